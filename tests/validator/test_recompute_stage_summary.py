"""The recompute stage's summary says how many claims were not reproduced, not only how
many were recomputed.

Independent anchors: the R103 findings and the recomputed claims are counted in the JSON
output of the same run; the claims are broken here by hand.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

CliRun = Callable[..., subprocess.CompletedProcess[str]]


def test_a_failed_recomputation_counts_the_claims_not_reproduced(mibspec_cli: CliRun, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    shutil.copy(REPO / "examples" / "causal_bench" / "report.json", report)
    data = json.loads(report.read_text(encoding="utf-8"))
    data["claims"]["methods"][0]["metrics"]["F"] -= 0.1
    data["claims"]["methods"][1]["metrics"]["C"] -= 0.1
    report.write_text(json.dumps(data, indent=2), encoding="utf-8")
    # C104 (the composite no longer follows from the metrics) would stop the stage before it runs.
    result = mibspec_cli("verify", str(report), "--ignore", "C104", "-f", "json")
    assert result.returncode == 1, result.stderr
    [doc] = json.loads(result.stdout)["documents"]
    mismatches = [f for f in doc["findings"] if f["code"] == "R103"]
    assert {f["pointer"] for f in mismatches} == {
        "/claims/methods/0/metrics/F",
        "/claims/methods/1/metrics/C",
    }
    recomputed = sum(c["claimed"] is not None for c in doc["recomputed"])
    stage = {s["name"]: s for s in doc["stages"]}["recompute"]
    assert stage["status"] == "failed"
    assert stage["detail"] == f"{recomputed} claim(s) recomputed, {len(mismatches)} not reproduced"
    text = mibspec_cli("verify", str(report), "--ignore", "C104")
    assert (
        f"recompute failed: {recomputed} claim(s) recomputed, {len(mismatches)} not reproduced" in text.stdout
    )
