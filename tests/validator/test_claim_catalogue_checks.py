"""The recompute stage reads the claim catalogue (SPEC.md R-5, CL-1).

* a comparison at a claim the catalogue does not mark recomputed, or under another tolerance
  than its row's class, is a defect of mibspec (an internal error, exit 3), never a pass;
* a claim the catalogue marks recomputed that got no comparison is R130.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mibspec.core.comparisons import Comparison
from mibspec.core.profiles import load_profile
from mibspec.validator import VerifyOptions, catalogue
from mibspec.validator._catalogue import InternalError
from mibspec.validator._context import RuleContext
from mibspec.validator._recompute_stage import catalogued, unrecomputed_findings

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
    ]
    assert catalogued(ctx, good) == good
    for bad in (
        _comparison("/claims/n_edges", 0.0, 0.0),  # a declaration
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
    assert "/claims/auroc/value" in pointers
    assert "/claims/curves/0/points/0/faithfulness" in pointers
    assert "/claims/n_edges" not in pointers  # a declaration
    compared = [
        Comparison(f.pointer, "q", 1.0, 1.0, 0.0, 0.0) for f in found if f.pointer != "/claims/auroc/value"
    ]
    assert [f.pointer for f in unrecomputed_findings(ctx, compared)] == ["/claims/auroc/value"]
    # A comparison without a claimed value (shown for information) checks nothing.
    info = [Comparison("/claims/auroc/value", "q", None, 1.0, 0.0, 0.0)]
    assert "/claims/auroc/value" in {f.pointer for f in unrecomputed_findings(ctx, compared + info)}
