"""The recompute stage's wall-clock limit (SPEC.md R-4): past it the stage stops and fails
with R105; a claim it did not reach is never reported as reproduced."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mibspec
from mibspec.validator import Limits, Stage, StageStatus

REPO = Path(__file__).resolve().parents[2]
# Recomputed with numpy only (the planted behaviour), so the test runs without the extra.
REPORT = REPO / "examples" / "causal-bench-planted" / "report.json"


def test_a_limit_already_passed_stops_the_stage_with_r105() -> None:
    result = mibspec.verify(REPORT, limits=Limits(max_recompute_seconds=0.0))
    [document] = [d for d in result.documents if d.kind == "report"]
    assert [(f.code, f.pointer) for f in document.findings] == [("R105", "")]
    status, detail = document.stages[Stage.RECOMPUTE]
    assert status is StageStatus.FAILED
    assert detail == "time limit of 0 s reached"
    assert document.comparisons == []
    assert not result.valid


@pytest.mark.slow
def test_a_generous_limit_changes_nothing() -> None:
    limited = mibspec.verify(REPORT, limits=Limits(max_recompute_seconds=3600.0))
    unlimited = mibspec.verify(REPORT)
    assert limited.valid
    assert json.dumps(limited.to_json(), sort_keys=True) == json.dumps(unlimited.to_json(), sort_keys=True)


@pytest.mark.slow
def test_cli_option() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "verify",
            str(REPORT),
            "--max-recompute-seconds",
            "0",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO.parent,
    )
    assert done.returncode == 1, done.stderr
    [document] = [d for d in json.loads(done.stdout)["documents"] if d["kind"] == "report"]
    assert [f["code"] for f in document["findings"]] == ["R105"]
    assert "time limit of 0 s" in document["findings"][0]["message"]
