"""`mibspec verify DIR -j N` on a folder of report copies, against `-j 1` in the same run.

Builds a temporary folder with COPIES copies of the example circuit report (report,
circuit document, dataset and sidecars), then times the whole process of
`mibspec verify DIR --no-recompute --format json` for each job count. With
`--recompute`, the copies are of the bundled IOI report on the shipped tiny model and
every claim is recomputed (seconds of work per report instead of milliseconds). Ratios
are against `-j 1`; the outputs of every job count must be byte-identical.

    python benchmarks/bench_batch_verify.py [--copies N] [--runs N] [--jobs 1 2 4] [--recompute] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _run(folder: Path, jobs: int, recompute: bool) -> tuple[float, float, bytes]:
    """Wall time, CPU time of the process and its workers, and the output of one run."""
    command = [sys.executable, "-m", "mibspec", "verify", str(folder), "-f", "json"]
    command += ["--model-root", str(REPO / "examples" / "models")] if recompute else ["--no-recompute"]
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([*command, "-j", str(jobs)], capture_output=True, check=False)
    elapsed, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode not in (0, 1):
        raise SystemExit(f"-j {jobs} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=24)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--recompute", action="store_true", help="recompute the IOI example's claims")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    jobs = sorted({1, *args.jobs})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "results"
        for i in range(args.copies):
            example = "circuit-ioi" if args.recompute else "circuit"
            shutil.copytree(REPO / "examples" / example, folder / f"run{i:03d}")
        if not args.recompute:
            _run(folder, 1, False)  # warm the file cache and bytecode
        times: dict[int, list[float]] = {n: [] for n in jobs}
        cpus: dict[int, list[float]] = {n: [] for n in jobs}
        outputs: set[bytes] = set()
        for _ in range(args.runs):
            for n in jobs:
                elapsed, cpu, out = _run(folder, n, args.recompute)
                times[n].append(elapsed)
                cpus[n].append(cpu)
                outputs.add(out)
    base = statistics.median(times[1])
    what = "recomputed" if args.recompute else "--no-recompute"
    print(f"{args.copies} report folders (3 documents each, {what}), {args.runs} runs, {os.cpu_count()} CPUs")
    print(
        f"load average at end {os.getloadavg()[0]:.1f} (CPU time is the steadier figure on a shared machine)"
    )
    print(f"{'jobs':>4} {'median s':>9} {'min s':>7} {'speed-up vs -j 1':>17} {'median CPU s':>13}")
    for n in jobs:
        median = statistics.median(times[n])
        cpu = statistics.median(cpus[n])
        print(f"{n:>4} {median:>9.3f} {min(times[n]):>7.3f} {base / median:>17.2f} {cpu:>13.3f}")
    print(f"outputs byte-identical across job counts and runs: {len(outputs) == 1}")
    if args.json:
        figures = [{"name": "outputs byte-identical", "value": len(outputs) == 1}]
        for n in jobs:
            median = statistics.median(times[n])
            figures.append({"name": f"-j {n}, median wall", "value": median, "unit": "s"})
            figures.append({"name": f"-j {n}, speed-up vs -j 1", "value": base / median, "unit": "×"})
            figures.append({"name": f"-j {n}, median CPU", "value": statistics.median(cpus[n]), "unit": "s"})
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
