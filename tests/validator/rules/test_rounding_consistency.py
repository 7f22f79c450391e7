"""Consistency and recomputation within a declared rounding (SPEC.md C-10), and no looser.

The bounds the rules use are checked against sampling inside the inputs' intervals (every
sampled value lies within them, and the corners reach them); the verdicts are checked at the
edge of what the rounding allows, on the conformance cases and the bundled Table 1 report.
"""

from __future__ import annotations

import copy
import itertools
import json
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import mibspec
from mibspec.core.comparisons import Comparison
from mibspec.metrics.causal_bench import composite
from mibspec.metrics.circuit import DEFAULT_GRID, cmd, cpr
from mibspec.validator._recompute_stage import with_rounding
from mibspec.validator.rules.circuit import _area_bounds

REPO = Path(__file__).resolve().parents[3]
CASES = REPO / "conformance" / "v1" / "report"
TABLE1 = REPO / "examples" / "causal-bench-table1" / "report.json"


def _verify(doc: dict[str, Any], folder: Path, tmp_path: Path) -> list[tuple[str, str]]:
    """Error findings of ``doc`` verified in a copy of ``folder`` (its artifacts beside it)."""
    target = tmp_path / "case"
    if not target.exists():
        target.mkdir()
        for path in folder.iterdir():
            if path.name not in ("document.json", "expected.json", "report.json"):
                (target / path.name).write_bytes(path.read_bytes())
    (target / "document.json").write_text(json.dumps(doc), encoding="utf-8")
    result = mibspec.verify(target / "document.json", recompute=False)
    return [(f.code, f.pointer) for f in result.findings if f.severity.value == "error"]


def _load(folder: Path) -> dict[str, Any]:
    name = "report.json" if (folder / "report.json").exists() else "document.json"
    return json.loads((folder / name).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("half", [0.005, 0.05])
def test_area_bounds_contain_every_curve_in_the_intervals_and_reach_their_ends(half: float) -> None:
    rng = np.random.default_rng(3)
    ks = list(DEFAULT_GRID)
    printed = [round(x, 2) for x in rng.uniform(0.6, 1.2, size=len(ks))]
    printed[4] = 1.0  # an interval holding f = 1: |1 − f| can reach 0 there
    spans = [(f - half, f + half) for f in printed]
    for metric, area in (("cpr", cpr), ("cmd", cmd)):
        low, high = _area_bounds(metric, ks, spans)
        samples = [area(ks, [rng.uniform(a, b) for a, b in spans]) for _ in range(500)]
        assert low - 1e-12 <= min(samples)
        assert max(samples) <= high + 1e-12
        # Tight: some choice inside the intervals reaches each bound (per point: an end, or 1).
        choices = [sorted({a, b, *([1.0] if a <= 1.0 <= b else [])}) for a, b in spans]
        per_point_low = [min(c, key=lambda f: f if metric == "cpr" else abs(1 - f)) for c in choices]
        per_point_high = [max(c, key=lambda f: f if metric == "cpr" else abs(1 - f)) for c in choices]
        assert area(ks, per_point_low) == pytest.approx(low, abs=1e-12)
        assert area(ks, per_point_high) == pytest.approx(high, abs=1e-12)


def _slow_composite(parts: dict[str, float]) -> float:
    return len(parts) / sum(1 / v for v in parts.values())


def test_table1_composites_lie_in_the_range_of_their_printed_parts() -> None:
    """Each printed composite of Table 1 meets the range of the harmonic mean over the parts'
    intervals (every corner of the box computed with a slow loop), and moving it by a little more
    than the rounding allows leaves that range."""
    doc = _load(TABLE1.parent)
    for method in doc["claims"]["methods"]:
        metrics = method["metrics"]
        parts = {key: metrics[key] for key in ("F", "C", "M", "S", "COS")}
        corners = [
            _slow_composite(
                {key: value + sign * 0.0005 for (key, value), sign in zip(parts.items(), signs, strict=True)}
            )
            for signs in itertools.product((-1, 1), repeat=5)
        ]
        low, high = min(corners), max(corners)
        assert composite({k: v - 0.0005 for k, v in parts.items()}) == pytest.approx(low, rel=1e-12)
        assert composite({k: v + 0.0005 for k, v in parts.items()}) == pytest.approx(high, rel=1e-12)
        claimed = metrics["composite"]
        assert claimed + 0.0005 >= low
        assert claimed - 0.0005 <= high


# --------------------------------------------------------------------------- verdicts at the edge


def _edge_cases(doc: dict[str, Any]) -> tuple[float, float]:
    """The least and greatest composite of method 0 the printed parts allow (slow loop)."""
    metrics = doc["claims"]["methods"][0]["metrics"]
    parts = {key: metrics[key] for key in ("F", "C", "M", "S", "COS")}
    low = _slow_composite({k: v - 0.0005 for k, v in parts.items()})
    high = _slow_composite({k: v + 0.0005 for k, v in parts.items()})
    return low, high


def _printed_edges(low: float, high: float, decimals: int) -> tuple[float, float, float, float]:
    """The numbers of ``decimals`` decimals whose interval (±half a unit) still meets [low, high]
    at its ends — the least and the greatest — and the next ones beyond, which do not."""
    unit = Decimal(1).scaleb(-decimals)
    half = unit / 2
    least = ((Decimal(repr(low)) - half) / unit).to_integral_value(ROUND_CEILING) * unit
    most = ((Decimal(repr(high)) + half) / unit).to_integral_value(ROUND_FLOOR) * unit
    return float(least), float(most), float(least - unit), float(most + unit)


def test_a_composite_is_held_to_its_rounding_and_no_looser(tmp_path: Path) -> None:
    folder = CASES / "valid" / "causal-bench-rounding-declared"
    doc = _load(folder)
    low, high = _edge_cases(doc)
    least, most, below, above = _printed_edges(low, high, 3)
    pointer = "/claims/methods/0/metrics/composite"
    for claimed, ok in ((least, True), (most, True), (below, False), (above, False)):
        edited = copy.deepcopy(doc)
        edited["claims"]["methods"][0]["metrics"]["composite"] = claimed
        findings = _verify(edited, folder, tmp_path)
        assert findings == ([] if ok else [("C104", pointer)]), claimed
    # Between the printed numbers a claim is not one of them (C-11), whatever its interval meets.
    edited = copy.deepcopy(doc)
    edited["claims"]["methods"][0]["metrics"]["composite"] = most + 0.0004
    assert _verify(edited, folder, tmp_path) == [("C130", pointer)]


def test_exact_set_metrics_must_lie_in_the_claims_interval(tmp_path: Path) -> None:
    """M, S, F1 and J_obs follow from the sets alone: the claim's interval must hold them."""
    folder = CASES / "valid" / "causal-bench-rounding-declared"
    doc = _load(folder)
    edited = copy.deepcopy(doc)
    edited["claims"]["methods"][0]["metrics"]["M"] = 0.65 + 0.0006  # M = 1 − 7/20 = 0.65 exactly
    edited["claims"]["methods"][0]["metrics"]["f1"] = round(10 / 12, 3) + 0.001
    edited["claims"]["convergence"]["j_obs"] += 0.001  # three significant digits: ±0.0005
    found = set(_verify(edited, folder, tmp_path))
    assert {
        ("C106", "/claims/methods/0/metrics/M"),
        ("C105", "/claims/methods/0/metrics/f1"),
        ("C107", "/claims/convergence/j_obs"),
    } <= found
    edited["claims"]["methods"][0]["metrics"]["M"] = 0.65 + 0.0004
    assert ("C106", "/claims/methods/0/metrics/M") not in _verify(edited, folder, tmp_path)


def test_a_per_claim_rounding_overrides_the_reports(tmp_path: Path) -> None:
    """The convergence block's three significant digits, not the report's three decimals, decide z."""
    folder = CASES / "valid" / "causal-bench-rounding-declared"
    doc = _load(folder)
    assert _verify(doc, folder, tmp_path) == []
    edited = copy.deepcopy(doc)
    edited["claims"]["convergence"]["rounding"] = {"significant_digits": 6}  # inputs nearly exact
    assert ("C107", "/claims/convergence/z") in _verify(edited, folder, tmp_path)


def test_a_rounded_p_value_needs_a_count_inside_its_interval(tmp_path: Path) -> None:
    folder = CASES / "valid" / "causal-bench-rounding-declared"
    doc = _load(folder)
    edited = copy.deepcopy(doc)
    # B = 1000, (count + 1)/1001: 0.0015 (three significant digits: ±5e-7) holds no count.
    edited["claims"]["convergence"]["p"] = 0.0015
    edited["claims"]["convergence"]["z"] = doc["claims"]["convergence"]["z"]
    assert ("B101", "/claims/convergence/p") in _verify(edited, folder, tmp_path)
    edited["claims"]["convergence"]["p"] = 0.002  # 2/1001 = 0.001998 rounds to 0.002
    assert ("B101", "/claims/convergence/p") not in _verify(edited, folder, tmp_path)


def test_causal_variable_aggregates_within_the_rounding(tmp_path: Path) -> None:
    folder = CASES / "valid" / "causal-variable-rounding-declared"
    doc = _load(folder)
    assert _verify(doc, folder, tmp_path) == []
    edited = copy.deepcopy(doc)
    edited["claims"]["variables"][0]["best"] += 0.02  # two decimals: the scores allow ±0.005 each
    assert _verify(edited, folder, tmp_path) == [("C112", "/claims/variables/0/best")]


@pytest.mark.slow
def test_circuit_areas_within_the_rounding(tmp_path: Path) -> None:
    folder = CASES / "valid" / "circuit-rounding-declared"
    doc = _load(folder)
    ks = doc["settings"]["grid"]
    for key in ("cpr", "cmd"):
        ranking = doc["settings"]["ranking"][key]
        curve = next(c for c in doc["claims"]["curves"] if c["ranking"] == ranking)
        index = doc["claims"]["curves"].index(curve)
        values = [p["faithfulness"] for p in curve["points"]]
        spans = [(f - 0.005, f + 0.005) for f in values]
        low, high = _area_bounds(key, ks, spans)
        least, most, below, above = _printed_edges(low, high, 2)
        edges = [(least, True), (most, True), (above, False), *([(below, False)] if below >= 0 else [])]
        for claimed, ok in edges:
            edited = copy.deepcopy(doc)
            edited["claims"][key]["value"] = claimed
            expected = [] if ok else [("C101" if key == "cpr" else "C102", f"/claims/{key}/value")]
            assert _verify(edited, folder, tmp_path) == expected, (key, index, claimed)


# --------------------------------------------------------------------------- recomputation


def test_recomputation_allows_the_half_unit_and_no_more() -> None:
    ctx = SimpleNamespace(
        data={"track": "circuit", "rounding": {"decimals": 3}, "claims": {"cpr": {"value": 0.65}}}
    )
    inside = Comparison("/claims/cpr/value", "CPR", 0.65, 0.65049, 1e-5, 1e-5)
    outside = Comparison("/claims/cpr/value", "CPR", 0.65, 0.6506, 1e-5, 1e-5)
    assert not inside.within
    assert not outside.within
    widened = with_rounding(ctx, [inside, outside])  # type: ignore[arg-type]
    assert [c.within for c in widened] == [True, False]
    assert widened[0].abs_tol == pytest.approx(1e-5 + 0.0005)
    bare = SimpleNamespace(data={"track": "circuit", "claims": {"cpr": {"value": 0.65}}})
    assert with_rounding(bare, [inside]) == [inside]  # type: ignore[arg-type]
    # A count is exact whatever the report declares: 64 images to one significant digit is not 60.
    count = Comparison("/claims/dominance/n_images", "images", 60.0, 64.0, 0.0, 0.0)
    rounded = SimpleNamespace(data={"track": "saliency", "rounding": {"significant_digits": 1}})
    assert with_rounding(rounded, [count]) == [count]  # type: ignore[arg-type]
    assert not count.within
