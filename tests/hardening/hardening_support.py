"""Shared helpers of the hardening tests: measured subprocess verification, result digests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

#: Verifies the paths given in argv[1] (a JSON list) with the options in argv[2] (a JSON
#: object of ``mibspec.verify`` keywords, limits as a dict), after a warm-up verification
#: of a small valid document so that imports and schema compilation are in the baseline.
#: Prints the result, the peak of traced Python allocations and the growth of the peak
#: resident set size during the verification.
_MEASURE = r"""
import json, resource, sys, tracemalloc
import mibspec
from mibspec.validator import Limits

paths, options, warmup = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
mibspec.verify(warmup, recompute=False)
if "limits" in options:
    options["limits"] = Limits(**options["limits"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tracemalloc.start()
result = mibspec.verify(*paths, **options)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"result": result.to_json(), "traced_peak": traced, "rss_growth": after - before}))
"""

WARMUP = (
    REPO / "conformance" / "v1" / "causal_model" / "valid" / "arithmetic-two-digit-carry" / "document.json"
)


def measured_verify(paths: list[Path], **options: Any) -> dict[str, Any]:
    """Run ``mibspec.verify`` in a fresh process; return its JSON result and memory figures."""
    options.setdefault("recompute", False)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEASURE,
            json.dumps([str(p) for p in paths]),
            json.dumps(options),
            str(WARMUP),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        # `-c` puts the working directory first on sys.path: outside the source tree, the
        # installed package is the one measured.
        cwd=REPO.parent,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def codes(result: dict[str, Any]) -> set[tuple[str, str]]:
    """(code, pointer) of every finding of a JSON verification result."""
    return {(f["code"], f["pointer"]) for doc in result["documents"] for f in doc["findings"]}
