"""Stage statuses across the conformance suite and the examples, and inputs left untouched.

A stage that failed or did not run is never reported as passed (SPEC.md V-1): for every
document, an error finding of stage X means X failed, a failed stage has an error of its
own, and every stage after one that did not pass is ``not_run`` or ``skipped``. With
recomputation on, a passed recompute stage compared claims and every one was within its
tolerance. Verification only reads: every file under ``conformance/`` and ``examples/``
has the same bytes and modification time before and after verifying all of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import fuzzlib
import pytest
from hardening_support import REPO

import mibspec
from mibspec.spec_tools.conformance import discover_cases
from mibspec.validator import Stage, StageStatus, catalogue

CAT = catalogue("1.0")
CASES = discover_cases(REPO / "conformance" / "v1")
EXAMPLE_REPORTS = sorted((REPO / "examples").glob("*/report.json"))


def _documents() -> list[Path]:
    found = []
    for case in CASES:
        expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
        found.append(case / expected.get("document", "document.json"))
    return found + EXAMPLE_REPORTS


DOCUMENTS = _documents()


def _stage_of(code: str) -> str:
    return CAT.by_code[code].stage


def test_the_suite_and_examples_are_all_here() -> None:
    assert len(CASES) >= 170
    assert len(EXAMPLE_REPORTS) >= 5


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(REPO)) for p in DOCUMENTS])
def test_stage_statuses_follow_the_findings(path: Path) -> None:
    result = mibspec.verify(path, recompute=False)
    assert fuzzlib.check_outcome(result, CAT) == []
    order = list(Stage)
    for doc in result.documents:
        failed = [stage for stage in order if doc.stages[stage][0] is StageStatus.FAILED]
        error_stages = {_stage_of(f.code) for f in doc.errors}
        assert {stage.value for stage in failed} == error_stages, (doc.path, failed, error_stages)
        if failed:
            first = order.index(failed[0])
            assert all(doc.stages[s][0] is StageStatus.PASSED for s in order[:first])
            for stage in order[first + 1 :]:
                assert doc.stages[stage][0] in (StageStatus.NOT_RUN, StageStatus.SKIPPED, StageStatus.FAILED)
            assert len(failed) == 1  # the stages after a failed one do not run
        status, detail = doc.stages[Stage.RECOMPUTE]
        assert status in (StageStatus.NOT_RUN, StageStatus.SKIPPED)
        assert detail  # a stage that did not run says why


@pytest.mark.slow
@pytest.mark.recompute
def test_stage_statuses_with_recomputation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every report of the suite with recomputation on (offline: hub models are not found)."""
    reports = [p for p in DOCUMENTS if p.parts[-4:-3] == ("report",) or p in EXAMPLE_REPORTS]
    assert len(reports) > 50
    result = mibspec.verify(*reports, model_roots=[REPO / "examples" / "models"])
    assert fuzzlib.check_outcome(result, CAT, recompute=True) == []
    statuses = set()
    for doc in result.documents:
        status, detail = doc.stages[Stage.RECOMPUTE]
        statuses.add(status)
        rules = doc.stages[Stage.RULES][0]
        if rules is not StageStatus.PASSED or doc.kind != "report":
            assert status in (StageStatus.NOT_RUN, StageStatus.SKIPPED), doc.path
        if status is StageStatus.FAILED:
            assert any(_stage_of(f.code) == "recompute" for f in doc.errors), doc.path
        if status is not StageStatus.PASSED:
            assert detail or any(_stage_of(f.code) == "recompute" for f in doc.findings), doc.path
    assert StageStatus.FAILED in statuses  # hub models are missing offline: R104, never passed


def _snapshot() -> dict[str, tuple[int, str, int]]:
    """(size, sha256, mtime_ns) of every file under conformance/ and examples/; link targets."""
    state: dict[str, tuple[int, str, int]] = {}
    for top in ("conformance", "examples"):
        for path in sorted((REPO / top).rglob("*")):
            key = str(path.relative_to(REPO))
            if path.is_symlink():
                state[key] = (0, "link:" + os.readlink(path), 0)
            elif path.is_file():
                info = path.stat()
                state[key] = (info.st_size, hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mtime_ns)
    return state


@pytest.mark.slow
def test_inputs_are_never_modified(tmp_path: Path) -> None:
    before = _snapshot()
    assert len(before) > 500
    outputs = []
    for output_format in ("json", "text", "sarif"):
        out = tmp_path / f"out.{output_format}"
        command = [sys.executable, "-m", "mibspec", "verify", *map(str, DOCUMENTS), "--no-recompute"]
        done = subprocess.run(
            [*command, "-f", output_format, "-o", str(out)],
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
            cwd=tmp_path,
        )
        assert done.returncode == 1, done.stderr[-2000:]  # the invalid cases fail
        outputs.append(out)
    for path in DOCUMENTS[:40]:
        mibspec.verify(path, recompute=False)
    assert _snapshot() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in outputs)
