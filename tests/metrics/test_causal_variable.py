"""Causal-variable metrics against nested loops and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.metrics import causal_variable as cv

# --------------------------------------------------------------------------- IIA


def test_iia_is_the_fraction_correct() -> None:
    assert cv.iia([True, False, True, True]) == 0.75
    assert cv.iia(np.array([1, 0, 0, 0])) == 0.25


def test_iia_with_keep_filter() -> None:
    correct = [True, False, True, False]
    keep = [True, True, False, False]
    assert cv.iia(correct, keep=keep) == 0.5


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=50))
def test_iia_matches_loop(pairs: list[tuple[bool, bool]]) -> None:
    correct = [c for c, _ in pairs]
    keep = [k for _, k in pairs]
    kept = [c for c, k in pairs if k]
    if not kept:
        with pytest.raises(ValueError, match="at least one kept"):
            cv.iia(correct, keep=keep)
        return
    assert cv.iia(correct, keep=keep) == sum(kept) / len(kept)


@pytest.mark.parametrize(
    ("correct", "keep", "match"),
    [
        ([], None, "at least one kept"),
        ([0.5, 1.0], None, "correct"),
        ([[True]], None, "1-D"),
        ([True, False], [True], "keep"),
        ([True, False], [2, 0], "keep"),
    ],
)
def test_iia_rejects(correct: object, keep: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cv.iia(correct, keep=keep)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- IOI


def test_ioi_paper_fit_constants() -> None:
    assert cv.IOIFit(bias=0.069, token_coeff=0.687, position_coeff=2.018) == cv.IOI_PAPER_FIT


@pytest.mark.parametrize(
    ("token", "position", "expected"),
    [
        (1, 1, 0.069 + 0.687 + 2.018),
        (-1, 1, 0.069 - 0.687 + 2.018),
        (1, -1, 0.069 + 0.687 - 2.018),
        (-1, -1, 0.069 - 0.687 - 2.018),
    ],
)
def test_ioi_target_closed_forms(token: int, position: int, expected: float) -> None:
    result = cv.ioi_target(token, position)
    assert isinstance(result, float)
    assert result == pytest.approx(expected, abs=1e-15)


def test_ioi_target_figure_19_example() -> None:
    # MIB Fig. 19: no intervention predicts a logit difference of about 2.77
    assert cv.ioi_target(1, 1) == pytest.approx(2.774, abs=1e-12)


def test_ioi_target_broadcasts_and_custom_fit() -> None:
    result = cv.ioi_target(np.array([1, -1, 1]), 1, bias=0.0, token_coeff=1.0, position_coeff=10.0)
    assert isinstance(result, np.ndarray)
    assert result.tolist() == [11.0, 9.0, 11.0]


@pytest.mark.parametrize(("token", "position"), [(0, 1), (1, 2), (np.array([1, 0]), 1)])
def test_ioi_target_rejects_non_unit_signals(token: object, position: object) -> None:
    with pytest.raises(ValueError, match="signal"):
        cv.ioi_target(token, position)  # type: ignore[arg-type]


def test_ioi_target_rejects_bad_coefficients_and_shapes() -> None:
    with pytest.raises(ValueError, match="bias"):
        cv.ioi_target(1, 1, bias=math.nan)
    with pytest.raises(ValueError, match="broadcast"):
        cv.ioi_target(np.ones(2), np.ones(3))


@given(st.lists(st.tuples(st.floats(-20, 20), st.floats(-20, 20)), min_size=1, max_size=30))
def test_ioi_mse_matches_loop(pairs: list[tuple[float, float]]) -> None:
    observed = [a for a, _ in pairs]
    target = [b for _, b in pairs]
    expected = sum((a - b) ** 2 for a, b in pairs) / len(pairs)
    assert cv.ioi_mse(observed, target) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_ioi_mse_scalar_target_and_errors() -> None:
    assert cv.ioi_mse([1.0, 3.0], 2.0) == 1.0
    with pytest.raises(ValueError, match="target"):
        cv.ioi_mse([1.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="logit_diff"):
        cv.ioi_mse([], 0.0)


# --------------------------------------------------------------------------- aggregation


def nested_loop_aggregate(
    table: dict[tuple[str, int, str], float], better: str
) -> tuple[dict[int, float], dict[int, str], float, float, int]:
    choose = max if better == "higher" else min
    sets = sorted({c for c, _, _ in table})
    layers = sorted({layer for _, layer, _ in table})
    per_layer: dict[int, float] = {}
    best_position: dict[int, str] = {}
    for layer in layers:
        positions = sorted({p for _, lay, p in table if lay == layer})
        unit_means = {}
        for position in positions:
            total = 0.0
            for cf in sets:
                total += table[(cf, layer, position)]
            unit_means[position] = total / len(sets)
        best = choose(unit_means.values())
        per_layer[layer] = best
        best_position[layer] = next(p for p in positions if unit_means[p] == best)
    best = choose(per_layer.values())
    best_layer = next(layer for layer in layers if per_layer[layer] == best)
    average = sum(per_layer.values()) / len(per_layer)
    return per_layer, best_position, average, best, best_layer


@st.composite
def score_tables(draw: st.DrawFn) -> dict[tuple[str, int, str], float]:
    n_sets = draw(st.integers(1, 4))
    layers = draw(st.lists(st.integers(0, 30), min_size=1, max_size=6, unique=True))
    positions = draw(st.lists(st.sampled_from(["last", "entity", "choice", "op2"]), min_size=1, unique=True))
    table = {}
    for s in range(n_sets):
        for layer in layers:
            for position in positions:
                # eighths: sums are exact, so ties are frequent and comparisons exact
                table[(f"cf{s}", layer, position)] = draw(st.integers(0, 8)) / 8
    return table


@given(score_tables(), st.sampled_from(["higher", "lower"]))
def test_aggregate_matches_nested_loops(table: dict[tuple[str, int, str], float], better: str) -> None:
    result = cv.aggregate_scores(table, better=better)  # type: ignore[arg-type]
    per_layer, best_position, average, best, best_layer = nested_loop_aggregate(table, better)
    assert dict(result.per_layer) == per_layer
    assert dict(result.best_position) == best_position
    assert result.average == pytest.approx(average, abs=1e-15)
    assert result.best == best
    assert result.best_layer == best_layer
    assert result.better == better


def test_aggregate_min_versus_max() -> None:
    table = {
        ("a", 0, "last"): 0.2,
        ("a", 0, "entity"): 0.8,
        ("a", 1, "last"): 0.5,
        ("a", 1, "entity"): 0.4,
        ("b", 0, "last"): 0.4,
        ("b", 0, "entity"): 0.6,
        ("b", 1, "last"): 0.3,
        ("b", 1, "entity"): 0.6,
    }
    # unit means: (0, last) 0.3, (0, entity) 0.7, (1, last) 0.4, (1, entity) 0.5
    high = cv.aggregate_scores(table)
    assert dict(high.per_layer) == pytest.approx({0: 0.7, 1: 0.5})
    assert dict(high.best_position) == {0: "entity", 1: "entity"}
    assert (high.average, high.best, high.best_layer) == pytest.approx((0.6, 0.7, 0))
    low = cv.aggregate_scores(table, better="lower")
    assert dict(low.per_layer) == pytest.approx({0: 0.3, 1: 0.4})
    assert dict(low.best_position) == {0: "last", 1: "last"}
    assert (low.average, low.best, low.best_layer) == pytest.approx((0.35, 0.3, 0))


def test_aggregate_units_reads_units_as_the_report_lists_them() -> None:
    """Producer and recompute aggregate through aggregate_units: units as (id, layer, scores)."""
    from mibspec.reference_impl.recompute.causal_variable import aggregate_units

    units = [
        ("last-0", 0, {"a": 0.2, "b": 0.4}),
        ("entity-0", 0, {"a": 0.8, "b": 0.6}),
        ("last-1", 1, {"a": 0.5, "b": 0.3}),
        ("entity-1", 1, {"a": 0.4, "b": 0.6}),
    ]
    # unit means: last-0 0.3, entity-0 0.7, last-1 0.4, entity-1 0.5 (as in test_aggregate_min_versus_max)
    high = aggregate_units(units, "higher")
    assert dict(high.per_layer) == pytest.approx({0: 0.7, 1: 0.5})
    assert dict(high.best_position) == {0: "entity-0", 1: "entity-1"}
    assert (high.average, high.best) == pytest.approx((0.6, 0.7))
    low = aggregate_units(iter(units), "lower")
    assert dict(low.per_layer) == pytest.approx({0: 0.3, 1: 0.4})
    assert (low.average, low.best) == pytest.approx((0.35, 0.3))


def test_aggregate_int_positions_and_immutable_result() -> None:
    result = cv.aggregate_scores({("cf", 3, 7): 1.0, ("cf", 3, 2): 1.0})
    assert dict(result.best_position) == {3: 2}
    with pytest.raises(TypeError):
        result.per_layer[3] = 0.0  # type: ignore[index]


def test_aggregate_missing_unit_names_it() -> None:
    table = {("a", 0, "last"): 1.0, ("a", 1, "last"): 1.0, ("b", 0, "last"): 1.0}
    with pytest.raises(ValueError, match=r"layer=1, position='last'.*'b'"):
        cv.aggregate_scores(table)


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({}, "at least one"),
        ({("a", 0): 1.0}, "tuples"),
        ({("a", "0", "last"): 1.0}, "layer"),
        ({("a", 0, 1.5): 1.0}, "position"),
        ({("a", 0, "last"): math.nan}, "scores"),
        ({("a", 0, "last"): 1.0, ("a", 0, 3): 1.0}, "all str or all int"),
    ],
)
def test_aggregate_rejects(table: dict[object, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cv.aggregate_scores(table)  # type: ignore[arg-type]


def test_aggregate_rejects_unknown_direction() -> None:
    with pytest.raises(ValueError, match="better"):
        cv.aggregate_scores({("a", 0, "last"): 1.0}, better="max")  # type: ignore[arg-type]
