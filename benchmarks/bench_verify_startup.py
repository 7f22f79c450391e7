"""Whole-process time of `mibspec verify --no-recompute` on a small report.

Goal: at most 1.3× the time of `check-jsonschema --version` (a comparable command-line
JSON validator's start-up), measured in the same run, both

- without a bytecode cache, as a fresh user's first run would be: every process gets
  ``PYTHONDONTWRITEBYTECODE=1`` and its own empty ``PYTHONPYCACHEPREFIX``, so nothing is
  read from or written to a cache and every module is compiled from source; and
- with it: the usual case, the cache warmed by untimed runs first.

Also shown: a bare interpreter start, a process that only imports the JSON Schema library,
one that only imports the command-line library (click), and the same verification
from Python (``mibspec.verify()``, no command line), with the command line's share of the
CPU time. The commands run interleaved (one of each, then the next round), so that a change
in machine load hits them alike; medians of the rounds are compared, of the wall-clock
time and of the process's CPU time (user + system, the steadier figure on a busy machine). When
``check-jsonschema`` is not found (on PATH or beside this Python) the benchmark says so and
exits 2: without the baseline there is no ratio to measure.

    python benchmarks/bench_verify_startup.py [REPORT] [--runs N] [--check-jsonschema PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 1.3


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system) of one process."""
    start, cpu = time.perf_counter(), _children_cpu()
    completed = subprocess.run(command, capture_output=True, cwd=tempfile.gettempdir(), env=env, check=False)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{command} exited {completed.returncode}: {completed.stderr.decode()}")
    return elapsed, _children_cpu() - cpu


def _environment(cached: bool, scratch: Path) -> dict[str, str]:
    env = dict(os.environ)
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYTHONPYCACHEPREFIX", None)
        return env
    # a fresh, empty prefix per process: no cache is read, none is written
    prefix = Path(tempfile.mkdtemp(dir=scratch))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return env


def _measure(
    cases: dict[str, list[str]], runs: int, cached: bool, scratch: Path
) -> dict[str, list[tuple[float, float]]]:
    if cached:
        for command in cases.values():  # write the bytecode cache and warm the file cache
            _run(command, _environment(True, scratch))
            _run(command, _environment(True, scratch))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, command in cases.items():
            times[name].append(_run(command, _environment(cached, scratch)))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default=str(REPO / "examples" / "circuit" / "report.json"))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--check-jsonschema",
        default=shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema"),
        help="the check-jsonschema executable (default: the one on PATH, else beside this Python)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if not Path(args.check_jsonschema).is_file():
        reason = f"check-jsonschema not found at {args.check_jsonschema!r}; pass --check-jsonschema"
        print(f"skipped: {reason}")
        if args.json:
            args.json.write_text(json.dumps({"status": "not run", "reason": reason}), encoding="utf-8")
        return 2
    report = str(Path(args.report).resolve())
    python = sys.executable
    verify = "mibspec verify --no-recompute"
    api = "mibspec.verify() from Python"
    cases = {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import jsonschema'": [python, "-c", "import jsonschema"],
        # what the command line adds: click parses and converts the options
        "python -c 'import click'": [python, "-c", "import click"],
        # the same verification without the command line
        api: [
            python,
            "-c",
            # BLAS on one thread, as the command runs it (mibspec.cli.one_blas_thread)
            "import os, sys; os.environ.setdefault('OPENBLAS_NUM_THREADS', '1'); "
            "from mibspec import verify; verify(sys.argv[1], recompute=False)",
            report,
        ],
        verify: [python, "-m", "mibspec", "verify", report, "--no-recompute"],
    }
    baseline = "check-jsonschema --version"
    cases[baseline] = [args.check_jsonschema, "--version"]
    figures: list[dict[str, object]] = []
    print(f"report: {report}  runs: {args.runs} per command and mode, interleaved")
    with tempfile.TemporaryDirectory() as scratch:
        for cached, label in ((False, "no bytecode cache (first run)"), (True, "bytecode cache")):
            times = _measure(cases, args.runs, cached, Path(scratch))
            wall = {name: statistics.median(t[0] for t in values) for name, values in times.items()}
            cpu = {name: statistics.median(t[1] for t in values) for name, values in times.items()}
            print(f"\n{label}")
            print(f"{'command':<34} {'median wall s':>14} {'median CPU s':>13}")
            for name in times:
                print(f"{name:<34} {wall[name]:>14.3f} {cpu[name]:>13.3f}")
                figures.append({"name": f"{label}: {name}, median CPU", "value": cpu[name], "unit": "s"})
            share = 1 - cpu[api] / cpu[verify]
            print(f"the command line's share of {verify}, CPU: {share:.0%}")
            figures.append(
                {
                    "name": f"{label}: the command line's share of {verify}, CPU",
                    "value": 100 * share,
                    "unit": "%",
                }
            )
            for what, medians in (("wall", wall), ("CPU", cpu)):
                ratio = medians[verify] / medians[baseline]
                verdict = "met" if ratio <= GOAL else "NOT met"
                print(f"{verify} / {baseline}, {what}: {ratio:.2f}× (goal ≤ {GOAL}×: {verdict})")
                figures.append(
                    {
                        "name": f"{label}: {verify} / {baseline}, {what}",
                        "value": ratio,
                        "unit": "×",
                        "goal": f"≤ {GOAL}",
                        "met": ratio <= GOAL,
                    }
                )
    if args.json:
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
