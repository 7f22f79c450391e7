"""A CAUSAL-BENCH report silent on its p-value convention is checked and recomputed under its
profile's convention (PR-3), not the schema default."""

from __future__ import annotations

from pathlib import Path

import mibspec

CASE = (
    Path(__file__).resolve().parents[3]
    / "conformance/v1/report/valid/causal-bench-mib-2025-p-convention-from-profile/document.json"
)


def test_mib_2025_report_without_p_convention_recomputes_count_over_b() -> None:
    result = mibspec.verify(CASE)
    assert result.valid, [f.to_json() for f in result.findings]
    (document,) = result.documents
    p = next(c for c in document.comparisons if c.pointer == "/claims/convergence/p")
    # No null draw reaches J_obs here: count/B is 0, the plus_one form would be 1/(B + 1).
    assert p.claimed == 0.0
    assert p.recomputed == 0.0


def test_the_same_report_under_the_default_profile_fails_on_the_p_value() -> None:
    result = mibspec.verify(CASE, profile="default", recompute=False)
    assert [f.code for f in result.findings] == ["B101"]
