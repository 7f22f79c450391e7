"""Fuzz ``mibspec verify`` (no recomputation) with N inputs; print a summary, exit 1 on any failure.

Every input is a pure function of its number (see ``fuzzlib.make_input``), so a failure
is reproduced by running its number alone (``--start N --count 1``). Each input has a
time limit (SIGALRM in the interpreter, and a watchdog that ends the process if the
interpreter itself is stuck in native code). Run it niced on a shared machine:

    nice -n 10 python tests/fuzz/run.py --count 100000 [--start 0] [--seconds-per-input 10]
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzzlib import Fuzzer, Outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--seconds-per-input", type=float, default=10.0)
    parser.add_argument("--summary", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args()
    # As in the test suite (filterwarnings = error): a warning on hostile input is a defect too.
    warnings.simplefilter("error")
    failures: list[Outcome] = []
    codes: collections.Counter[str] = collections.Counter()
    verdicts: collections.Counter[str] = collections.Counter()
    times: list[float] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mibspec-fuzz-") as tmp:
        fuzzer = Fuzzer(Path(tmp), seconds_per_input=args.seconds_per_input)
        seeds = range(args.start, args.start + args.count)
        for done, seed in enumerate(seeds, start=1):
            faulthandler.dump_traceback_later(args.seconds_per_input * 3, exit=True)
            [outcome] = fuzzer.run_seeds(range(seed, seed + 1))
            faulthandler.cancel_dump_traceback_later()
            times.append(outcome.seconds)
            codes.update(outcome.codes)
            verdicts["valid" if outcome.valid else "invalid" if outcome.valid is False else "error"] += 1
            if outcome.problems:
                failures.append(outcome)
                print(f"FAIL seed {seed} ({outcome.description}): {outcome.problems[:3]}", flush=True)
            if done % 1000 == 0:
                elapsed = time.perf_counter() - started
                print(f"{done} inputs, {elapsed:.0f} s, {len(failures)} failures", flush=True)
    elapsed = time.perf_counter() - started
    times.sort()
    summary = {
        "inputs": args.count,
        "start": args.start,
        "seconds": round(elapsed, 1),
        "failures": len(failures),
        "hangs": sum(any(p.startswith("hang") for p in o.problems) for o in failures),
        "uncaught": sum(any(p.startswith("uncaught") for p in o.problems) for o in failures),
        "verdicts": dict(verdicts),
        "slowest_input_seconds": round(times[-1], 3) if times else None,
        "p99_input_seconds": round(times[int(0.99 * (len(times) - 1))], 4) if times else None,
        "distinct_codes": len(codes),
        "codes": dict(sorted(codes.items())),
        "failed_seeds": [o.seed for o in failures[:100]],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "codes"}, indent=2))
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
