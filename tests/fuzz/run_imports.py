"""Fuzz the importers and exporters with N inputs per surface; print a summary, exit 1 on any failure.

Every input is a pure function of its surface and number (see ``import_fuzzlib``), so a
failure is reproduced by running that number alone (``--surface S --start N --count 1``).
Each input has a time limit (SIGALRM, and a watchdog that ends the process if the
interpreter is stuck in native code) and a bounded address space (what the process holds
plus 2 GiB), so a file that makes mibspec allocate what it claims fails instead. Run it
niced on a shared machine:

    nice -n 10 python tests/fuzz/run_imports.py --count 1000 [--surface eap-ig-pt ...]
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

from import_fuzzlib import SURFACES, ImportFuzzer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="inputs per surface")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--surface", action="append", choices=SURFACES, help="(default: every surface)")
    parser.add_argument("--seconds-per-input", type=float, default=30.0)
    parser.add_argument("--summary", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args()
    # As in the test suite (filterwarnings = error): a warning on hostile input is a defect too.
    warnings.simplefilter("error")
    surfaces = args.surface or list(SURFACES)
    summary: dict[str, dict[str, object]] = {}
    failed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mibspec-import-fuzz-") as tmp:
        fuzzer = ImportFuzzer(Path(tmp), seconds_per_input=args.seconds_per_input)
        for surface in surfaces:
            codes: collections.Counter[str] = collections.Counter()
            times, failures = [], []
            surface_start = time.perf_counter()
            for number in range(args.start, args.start + args.count):
                faulthandler.dump_traceback_later(args.seconds_per_input * 3, exit=True)
                [outcome] = fuzzer.run_surface(surface, range(number, number + 1))
                faulthandler.cancel_dump_traceback_later()
                times.append(outcome.seconds)
                codes.update(outcome.codes or ("none",))
                if outcome.problems:
                    failures.append(outcome)
                    print(
                        f"FAIL {surface} {number} ({outcome.description}): {outcome.problems[:3]}", flush=True
                    )
            times.sort()
            summary[surface] = {
                "inputs": args.count,
                "seconds": round(time.perf_counter() - surface_start, 1),
                "failures": len(failures),
                "hangs": sum(any(p.startswith("hang") for p in o.problems) for o in failures),
                "uncaught": sum(any(p.startswith("uncaught") for p in o.problems) for o in failures),
                "slowest_input_seconds": round(times[-1], 3) if times else None,
                "codes": dict(sorted(codes.items())),
                "failed_numbers": [o.seed for o in failures[:50]],
            }
            failed += len(failures)
            print(json.dumps({surface: summary[surface]}), flush=True)
    total = {
        "inputs": args.count * len(surfaces),
        "seconds": round(time.perf_counter() - started, 1),
        "failures": failed,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(total, indent=2))
    if args.summary:
        args.summary.write_text(
            json.dumps({"total": total, "surfaces": summary}, indent=2) + "\n", encoding="utf-8"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
