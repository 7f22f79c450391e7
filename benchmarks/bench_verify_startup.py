"""Whole-process time of `mibspec verify --no-recompute` on a small report.

Goal (spec/v1 foundation): under 0.5 s per run on 2 cores. Reported against two
baselines measured in the same run: a bare interpreter start, and a process that
only imports the JSON Schema library the validator uses.

    python benchmarks/bench_verify_startup.py [REPORT] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _time(command: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, cwd=tempfile.gettempdir(), check=False)
        times.append(time.perf_counter() - start)
        if completed.returncode not in (0, 1):
            raise SystemExit(f"{command} exited {completed.returncode}: {completed.stderr.decode()}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", default=str(REPO / "examples" / "circuit" / "report.json"))
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    report = str(Path(args.report).resolve())
    python = sys.executable
    cases = {
        "python -c pass": [python, "-c", "pass"],
        "python -c 'import jsonschema'": [python, "-c", "import jsonschema"],
        "mibspec verify --no-recompute": [python, "-m", "mibspec", "verify", report, "--no-recompute"],
        "mibspec verify --no-recompute --format json": [
            python,
            "-m",
            "mibspec",
            "verify",
            report,
            "--no-recompute",
            "--format",
            "json",
        ],
    }
    _time(cases["mibspec verify --no-recompute"], 2)  # warm the file cache and bytecode
    results = {name: _time(command, args.runs) for name, command in cases.items()}
    base = statistics.median(results["python -c pass"])
    print(f"report: {report}  runs: {args.runs}")
    print(f"{'command':<46} {'median s':>9} {'min s':>7} {'× bare python':>14}")
    for name, times in results.items():
        median = statistics.median(times)
        print(f"{name:<46} {median:>9.3f} {min(times):>7.3f} {median / base:>14.1f}")
    verify = statistics.median(results["mibspec verify --no-recompute"])
    print(f"goal: under 0.5 s per run -> {'met' if verify < 0.5 else 'NOT met'} ({verify:.3f} s)")


if __name__ == "__main__":
    main()
