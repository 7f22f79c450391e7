"""How steady the README's main job is: the same command run again and again, on a quiet
machine and with every core kept busy by other processes.

The command is the first one README.md gives a new user, `mibspec verify
examples/circuit-ioi/report.json --model-root examples/models` (recomputation included). It
runs ``--runs`` times in each condition, one process after the other:

- quiet: nothing else started by the benchmark;
- loaded: ``--load`` processes (default: one per core) spinning in a loop for the duration.

Each condition runs twice, interleaved run by run: with the command line's own thread policy
(idle OpenMP threads sleep, ``OMP_WAIT_POLICY=PASSIVE``, set by ``mibspec.cli``) and with
OpenMP's default (``OMP_WAIT_POLICY`` unset in the child's environment is what the command
line replaces, so the baseline passes ``ACTIVE``: threads spin between parallel regions).

Figures: the median wall-clock and CPU time (user + system of the process) per condition and
policy, and the spread, max over min, of each. Goal (quiet, the command line's policy): a
spread of at most 1.5 in both wall-clock and CPU time. The loaded rows show what the policy
is for: with spinning threads, busy cores multiplied the CPU time.

    python benchmarks/bench_steady.py [--runs N] [--load K] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 1.5
COMMAND = ["verify", "examples/circuit-ioi/report.json", "--model-root", "examples/models"]
COLUMNS = ["machine", "OpenMP wait policy", "median wall", "median CPU", "wall max/min", "CPU max/min"]
POLICIES = {"the command line's (PASSIVE)": None, "OpenMP's default (ACTIVE)": "ACTIVE"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(policy: str | None) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one run of the main job under ``policy``."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", *COMMAND], cwd=REPO, env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the main job exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, _children_cpu() - cpu


def _spinners(count: int) -> list[subprocess.Popen[bytes]]:
    loop = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]


def _measure(runs: int) -> dict[str, list[tuple[float, float]]]:
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in POLICIES}
    for _ in range(runs):
        for name, policy in POLICIES.items():
            times[name].append(_run(policy))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per condition and policy (default 10)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes when loaded")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    _run(None)  # untimed: the bytecode and file caches warmed
    figures: list[dict[str, object]] = []
    rows: list[list[str]] = []
    for condition in ("quiet", f"loaded ({args.load} busy processes)"):
        spinners = _spinners(args.load) if condition != "quiet" else []
        try:
            times = _measure(args.runs)
        finally:
            for process in spinners:
                process.kill()
                process.wait()
        for name, values in times.items():
            walls, cpus = [t[0] for t in values], [t[1] for t in values]
            spread = {"wall": max(walls) / min(walls), "CPU": max(cpus) / min(cpus)}
            rows.append(
                [
                    condition,
                    name,
                    f"{statistics.median(walls):.2f} s",
                    f"{statistics.median(cpus):.2f} s",
                    f"{spread['wall']:.2f}×",
                    f"{spread['CPU']:.2f}×",
                ]
            )
            print(" | ".join(rows[-1]))
            for what, value in spread.items():
                figure: dict[str, object] = {
                    "name": f"{condition}, {name}: spread (max / min) of {what} time over {args.runs} runs",
                    "value": value,
                    "unit": "×",
                }
                if condition == "quiet" and POLICIES[name] is None:
                    figure.update({"goal": f"≤ {GOAL}", "met": value <= GOAL})
                figures.append(figure)
            median_cpu = statistics.median(cpus)
            label = f"{condition}, {name}: median CPU time"
            figures.append({"name": label, "value": median_cpu, "unit": "s"})
    table = {
        "title": f"mibspec {' '.join(COMMAND)}, {args.runs} runs per row",
        "columns": COLUMNS,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(
            json.dumps({"status": "ok", "figures": figures, "tables": [table]}, indent=1), encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
