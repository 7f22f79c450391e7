"""Fuzz the HTML page and recomputation's model inputs (``surfaces.py``) with N inputs; print a
summary per surface, exit 1 on any failure.

Every input is a pure function of its number, so a failure is reproduced by running its number
alone (``--start N --count 1``). Run it niced on a shared machine:

    nice -n 10 python tests/fuzz/run_surfaces.py --count 2000 [--summary out.json]
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from surfaces import SURFACES, SurfaceFuzzer, SurfaceOutcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seconds-per-input", type=float, default=120.0)
    parser.add_argument("--summary", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args()
    warnings.simplefilter("error")  # as in the test suite: a warning on hostile input is a defect too
    failures: list[SurfaceOutcome] = []
    inputs: collections.Counter[str] = collections.Counter()
    codes: dict[str, collections.Counter[str]] = {s: collections.Counter() for s in SURFACES}
    slowest: dict[str, float] = collections.defaultdict(float)
    largest: dict[str, int] = collections.defaultdict(int)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mibspec-surfaces-") as tmp:
        fuzzer = SurfaceFuzzer(Path(tmp), seconds_per_input=args.seconds_per_input)
        for done, seed in enumerate(range(args.start, args.start + args.count), start=1):
            faulthandler.dump_traceback_later(args.seconds_per_input * 3, exit=True)
            outcome = fuzzer.run_input(seed)
            faulthandler.cancel_dump_traceback_later()
            inputs[outcome.surface] += 1
            codes[outcome.surface].update(outcome.codes)
            slowest[outcome.surface] = max(slowest[outcome.surface], outcome.seconds)
            largest[outcome.surface] = max(largest[outcome.surface], outcome.rss_growth)
            if outcome.problems:
                failures.append(outcome)
                print(
                    f"FAIL seed {seed} [{outcome.surface}] ({outcome.description}): {outcome.problems[:2]}",
                    flush=True,
                )
            if done % 100 == 0:
                print(
                    f"{done} inputs, {time.perf_counter() - started:.0f} s, {len(failures)} failures",
                    flush=True,
                )
    summary = {
        "inputs": dict(inputs),
        "start": args.start,
        "seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds": round(resource.getrusage(resource.RUSAGE_SELF).ru_utime, 1),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "failures": len(failures),
        "internal_errors": sum(any(p.startswith("internal error") for p in o.problems) for o in failures),
        "hangs": sum(any(p.startswith("hang") for p in o.problems) for o in failures),
        "uncaught": sum(any(p.startswith("uncaught") for p in o.problems) for o in failures),
        "memory": sum(any(p.startswith("memory") for p in o.problems) for o in failures),
        "slowest_input_seconds": {k: round(v, 2) for k, v in slowest.items()},
        "largest_peak_growth_bytes": dict(largest),
        "codes": {surface: dict(sorted(counter.items())) for surface, counter in codes.items()},
        "failed": [(o.seed, o.surface, o.description, o.problems[:1]) for o in failures[:50]],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "codes"}, indent=2))
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
