"""Determinism of verification: the same inputs give byte-identical output.

Twice in one process, and across processes with different ``PYTHONHASHSEED`` values and
1 or 2 OpenMP threads (validation only: no torch is involved). With recomputation, where
torch runs the model, the tiny IOI example gives the same verdicts and findings with 1 and 2
threads, and recomputed values within floating-point reassociation (engine.md ME-10): how a
product is split between threads may change the order of its sums on some CPUs.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hardening_support import REPO

import mibspec
from mibspec.core.comparisons import REASSOCIATION, first_difference
from mibspec.spec_tools.conformance import discover_cases
from mibspec.verification.output_formats import REPORTERS

pytestmark = pytest.mark.slow


def _documents() -> list[Path]:
    found = []
    for case in discover_cases(REPO / "conformance" / "v1"):
        expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
        found.append(case / expected.get("document", "document.json"))
    return found + sorted((REPO / "examples").glob("*/report.json"))


DOCUMENTS = _documents()


def _render(result: mibspec.VerificationResult, name: str) -> str:
    buffer = io.StringIO()
    REPORTERS[name](result, buffer)
    return buffer.getvalue()


def test_verifying_twice_gives_identical_bytes() -> None:
    first, second = (mibspec.verify(*DOCUMENTS, recompute=False) for _ in range(2))
    for output_format in ("json", "sarif", "junit", "text", "github"):
        assert _render(first, output_format) == _render(second, output_format), output_format
    assert len(_render(first, "json")) > 10_000


def _cli(env: dict[str, str], *args: str, cwd: Path = REPO.parent) -> bytes:
    # Outside the source tree, so that ``-m mibspec`` imports the installed package.
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", *args],
        capture_output=True,
        check=False,
        timeout=1200,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **env},
    )
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")[-2000:]
    return done.stdout


def test_output_does_not_depend_on_hash_seed_or_threads() -> None:
    args = [*map(str, DOCUMENTS), "--no-recompute", "-f", "json"]
    runs = [
        _cli({"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}, *args),
        _cli({"PYTHONHASHSEED": "4242", "OMP_NUM_THREADS": "2"}, *args),
        _cli({"PYTHONHASHSEED": "random", "OMP_NUM_THREADS": "2"}, *args),
    ]
    assert runs[0] == runs[1] == runs[2]
    result = json.loads(runs[0])
    assert len(result["documents"]) > len(DOCUMENTS)  # referenced documents are verified too


@pytest.mark.slow
@pytest.mark.recompute
def test_recomputation_is_the_same_with_one_and_two_threads() -> None:
    args = [str(REPO / "examples" / "circuit-ioi"), "--model-root", str(REPO / "examples" / "models")]
    args += ["-f", "json"]
    one = _cli({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "1"}, *args)
    two = _cli({"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "PYTHONHASHSEED": "2"}, *args)
    where = first_difference(json.loads(one), json.loads(two), REASSOCIATION["float32"])
    assert where is None, f"the outputs differ at {where}"
    assert one == _cli({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "3"}, *args)
    [report] = [d for d in json.loads(one)["documents"] if not d.get("referenced_by")]
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert len(report["recomputed"]) > 10
