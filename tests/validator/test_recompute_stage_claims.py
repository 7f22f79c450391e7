"""The recompute stage and the outputs read the claim catalogue (SPEC.md R-5, CL-1, CL-2).

* a comparison at a claim the catalogue does not mark recomputed, or under another tolerance
  than its row's class, is a defect of mibspec (an internal error, exit 3), never a pass;
* a claim the catalogue marks recomputed that got no comparison is R130;
* the stamp puts every number of a report in one group, by how this run checked it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.core.comparisons import Comparison
from mibspec.core.profiles import load_profile
from mibspec.validator import VerifyOptions, catalogue
from mibspec.validator._catalogue import InternalError
from mibspec.validator._context import RuleContext
from mibspec.validator._recompute_stage import catalogued, unrecomputed_findings
from mibspec.validator._stamp import GROUPS, claim_stamp

REPO = Path(__file__).resolve().parents[2]
CIRCUIT = REPO / "examples" / "circuit-ioi" / "report.json"


def _ctx(data: dict[str, Any], profile: str = "default") -> RuleContext:
    return RuleContext(
        path=CIRCUIT,
        data=data,
        kind="report",
        spec_version="1.1",
        profile=load_profile(profile),
        options=VerifyOptions(),
        cat=catalogue(),
    )


def _report() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CIRCUIT.read_text(encoding="utf-8"))
    return data


def _comparison(pointer: str, abs_tol: float = 1e-5, rel_tol: float = 1e-5) -> Comparison:
    return Comparison(pointer, "q", 0.5, 0.5, abs_tol, rel_tol)


def test_comparisons_are_held_to_their_catalogue_rows() -> None:
    ctx = _ctx(_report())
    good = [
        _comparison("/claims/cpr/value"),  # recompute: float32
        _comparison("/claims/curves/1/points/3/faithfulness"),
        _comparison("/task/n_examples", 0.0, 0.0),  # exact
        _comparison("/claims/n_edges", 0.0, 0.0),  # recomputed from the loaded model, exactly
    ]
    assert catalogued(ctx, good) == good
    for bad in (
        _comparison("/claims/n_edges"),  # a count under a float tolerance
        _comparison("/claims/curves/0/points/0/weighted_size", 0.0, 0.0),  # a declaration
        _comparison("/claims/unknown"),  # no row
        _comparison("/task/n_examples"),  # a count under a float tolerance
        _comparison("/claims/cpr/value", 1e-3, 5e-3),  # float16's tolerance for a float32 model
    ):
        with pytest.raises(InternalError):
            catalogued(ctx, [bad])


def test_a_claim_marked_recomputed_without_a_comparison_is_r130() -> None:
    data = _report()
    data["claims"]["auroc"] = {"value": 0.99, "convention": "rank", "ground_truth": "circuit"}
    ctx = _ctx(data)
    found = unrecomputed_findings(ctx, [])
    pointers = {f.pointer for f in found}
    assert {f.code for f in found} == {"R130"}
    assert "/claims/n_edges" in pointers
    assert "/claims/curves/0/points/0/faithfulness" in pointers
    assert "/claims/auroc/value" not in pointers  # derived in the rules stage (C125)
    assert "/claims/curves/0/points/0/n_edges" not in pointers  # a declaration
    last = "/claims/m_full"
    compared = [Comparison(f.pointer, "q", 1.0, 1.0, 0.0, 0.0) for f in found if f.pointer != last]
    assert [f.pointer for f in unrecomputed_findings(ctx, compared)] == [last]
    # A comparison without a claimed value (shown for information) checks nothing.
    info = [Comparison(last, "q", None, 1.0, 0.0, 0.0)]
    assert last in {f.pointer for f in unrecomputed_findings(ctx, compared + info)}


def test_the_stamp_groups_every_number_once() -> None:
    data = _report()
    stamp = claim_stamp(data, [], rules_passed=True)
    grouped = [p for group in GROUPS for p in stamp.groups[group]]
    assert len(grouped) == len(set(grouped))
    assert "/claims/cpr/value" in stamp.groups["derived"]  # C101 from the curve
    assert "/claims/curves/0/points/0/faithfulness" in stamp.groups["structure"]  # not recomputed
    assert "/claims/n_edges" in stamp.groups["declared"]
    assert "/settings/batch_size" in stamp.groups["structure"]
    recomputed = [Comparison("/claims/cpr/value", "CPR", 0.96, 0.96, 1e-5, 1e-5)]
    stamp = claim_stamp(data, recomputed, rules_passed=False)
    assert stamp.groups["recomputed"] == ["/claims/cpr/value"]
    assert "/claims/cmd/value" in stamp.groups["structure"]  # the rules failed: nothing derived
    assert "CPR (/claims/cpr/value)" in claim_stamp(data, [], rules_passed=True).summary("derived")


def test_the_json_output_carries_the_stamp() -> None:
    output = mibspec.verify(CIRCUIT, recompute=False).to_json()
    report, *others = output["documents"]
    claims = report["claims"]
    assert set(claims) == set(GROUPS)
    assert claims["derived"] == {"count": 2, "pointers": ["/claims/cpr/value", "/claims/cmd/value"]}
    assert claims["recomputed"]["count"] == 0
    assert claims["structure"]["count"] == len(claims["structure"]["pointers"]) > 20
    assert all("claims" not in doc for doc in others)  # referenced documents carry no claims


def test_the_text_and_html_outputs_summarise_the_stamp() -> None:
    import io

    from mibspec.pages.html import build_html_page, render_html
    from mibspec.verification.output_formats import render_text

    result = mibspec.verify(CIRCUIT, recompute=False)
    out = io.StringIO()
    render_text(result, out)
    text = out.getvalue()
    assert "claims: 0 recomputed, 2 derived from other claims," in text
    assert "derived only: CPR (/claims/cpr/value); CMD (/claims/cmd/value)" in text
    assert "faithfulness ×20 (/claims/curves/*/points/*/faithfulness)" in text
    page = render_html(build_html_page(result, CIRCUIT, figures=False))
    assert "<h2>What the verdict rests on</h2>" in page
    assert "faithfulness ×20 (/claims/curves/*/points/*/faithfulness)" in page
