"""Planted-circuit behaviour model against Eq. 1, its documented noise recipe and the paper's tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.metrics import causal_bench as cb
from mibspec.reference_impl.behaviour import (
    PlantedCircuitModel,
    component_universe,
    default_planted,
)

PAPER_FIVE = {"L0.attn_head[0]", "L0.attn_head[1]", "L1.mlp", "L2.attn_head[0]", "L3.mlp"}
# Table 2: configurations and their component counts.
TABLE_2_SIZES = {(2, 2): 6, (4, 4): 20, (6, 6): 42, (8, 8): 72, (10, 10): 110, (12, 12): 156}


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def slow_expected(model: PlantedCircuitModel, members: set[str]) -> float:
    hits = sum(1 for c in members if c in model.planted)
    return sigmoid(8.0 * (hits / len(model.planted) - 0.5))


def slow_noise(model: PlantedCircuitModel, row: list[bool]) -> float:
    """ε from the documented recipe, with the entropy words built bit by bit."""
    n = len(row)
    words = []
    for k in range((n + 31) // 32):
        word = 0
        for t in range(32):
            if 32 * k + t < n and row[32 * k + t]:
                word += 1 << t
        words.append(word)
    entropy = [model.seed % 2**32, model.seed // 2**32, 1, n, *words]
    return model.measurement_noise_sd * float(np.random.default_rng(entropy).standard_normal())


def rows_for(model: PlantedCircuitModel, sets: list[set[str]]) -> np.ndarray:
    return np.array([[c in s for c in model.universe] for s in sets], dtype=bool)


def table1_sets(model: PlantedCircuitModel) -> dict[str, set[str]]:
    others = [c for c in model.universe if c not in model.planted]
    return {
        "AP": set(model.planted) | set(others[:2]),
        "GA": set(model.planted) | set(others[2:7]),
        "AS": set(model.planted) | set(others[:11]),
        "CD": set(model.planted) - {"L3.mlp"},
    }


# --------------------------------------------------------------------------- universe and planted set


@pytest.mark.parametrize(("shape", "n"), sorted(TABLE_2_SIZES.items()))
def test_universe_sizes_match_table2(shape: tuple[int, int], n: int) -> None:
    L, H = shape
    universe = component_universe(L, H)
    assert len(universe) == n == L * H + L
    assert len(set(universe)) == n


def test_universe_order_is_heads_then_mlp_per_layer() -> None:
    assert component_universe(2, 2) == (
        "L0.attn_head[0]",
        "L0.attn_head[1]",
        "L0.mlp",
        "L1.attn_head[0]",
        "L1.attn_head[1]",
        "L1.mlp",
    )


@pytest.mark.parametrize("shape", [(4, 4), (4, 2), (6, 6), (12, 12)])
def test_default_planted_is_the_papers_five(shape: tuple[int, int]) -> None:
    assert default_planted(*shape) == PAPER_FIVE
    assert PlantedCircuitModel(*shape, seed=0).planted == PAPER_FIVE


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((2, 2), {"L0.attn_head[0]", "L0.attn_head[1]", "L1.attn_head[0]", "L1.mlp"}),
        ((3, 3), {"L0.attn_head[0]", "L0.attn_head[1]", "L1.mlp", "L2.attn_head[0]", "L2.mlp"}),
        ((4, 1), {"L0.attn_head[0]", "L1.mlp", "L2.attn_head[0]", "L3.mlp"}),
        ((1, 1), {"L0.attn_head[0]", "L0.mlp"}),
    ],
)
def test_default_planted_clamps_small_models(shape: tuple[int, int], expected: set[str]) -> None:
    assert default_planted(*shape) == expected


def test_custom_planted_set_and_validation() -> None:
    model = PlantedCircuitModel(2, 2, seed=0, planted=["L1.mlp"])
    assert model.planted == {"L1.mlp"}
    with pytest.raises(ValueError, match="unknown id"):
        PlantedCircuitModel(2, 2, seed=0, planted={"L5.mlp"})
    with pytest.raises(ValueError, match="at least one"):
        PlantedCircuitModel(2, 2, seed=0, planted=set())
    with pytest.raises(ValueError, match="n_layers"):
        PlantedCircuitModel(0, 2, seed=0)
    with pytest.raises(ValueError, match="seed"):
        PlantedCircuitModel(2, 2, seed=-1)
    with pytest.raises(ValueError, match="seed"):
        PlantedCircuitModel(2, 2, seed=2**64)
    with pytest.raises(ValueError, match="measurement_noise_sd"):
        PlantedCircuitModel(2, 2, seed=0, measurement_noise_sd=-0.1)


def test_active_is_checked() -> None:
    model = PlantedCircuitModel(2, 2, seed=0)
    with pytest.raises(ValueError, match="2-D"):
        model(np.ones(6, dtype=bool))
    with pytest.raises(ValueError, match="shape"):
        model(np.ones((1, 5), dtype=bool))
    with pytest.raises(ValueError, match="boolean"):
        model(np.ones((1, 6)))


# --------------------------------------------------------------------------- contributions


def test_contributions_follow_the_documented_draw() -> None:
    model = PlantedCircuitModel(4, 4, seed=12345, component_noise_sd=0.1, signal=1.0)
    draws = 0.1 * np.random.default_rng([12345, 0, 0, 20]).standard_normal(20)
    for i, c in enumerate(model.universe):
        assert model.contributions[i] == (1.0 if c in PAPER_FIVE else draws[i])
    bigger = PlantedCircuitModel(4, 4, seed=12345, component_noise_sd=0.3, signal=2.0)
    outside = ~model.planted_mask
    np.testing.assert_allclose(bigger.contributions[outside], 3 * model.contributions[outside], rtol=1e-14)
    assert (bigger.contributions[model.planted_mask] == 2.0).all()


def test_contribution_noise_is_a_standard_deviation() -> None:
    model = PlantedCircuitModel(60, 60, seed=4)
    outside = model.contributions[~model.planted_mask]
    assert outside.size == 3655
    assert abs(outside.std() - 0.1) < 0.1 * 5 / math.sqrt(2 * outside.size)
    assert abs(outside.mean()) < 5 * 0.1 / math.sqrt(outside.size)


# --------------------------------------------------------------------------- behaviour (Eq. 1)


@settings(max_examples=40, deadline=None)
@given(
    L=st.integers(1, 5),
    H=st.integers(1, 4),
    seed=st.integers(0, 2**64 - 1),
    data=st.data(),
)
def test_behaviour_matches_eq1_and_noise_recipe(L: int, H: int, seed: int, data: st.DataObject) -> None:
    model = PlantedCircuitModel(L, H, seed=seed)
    n = model.n_components
    rows = data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=1, max_size=5))
    values = model(np.array(rows, dtype=bool))
    for value, row in zip(values, rows, strict=True):
        members = {c for c, on in zip(model.universe, row, strict=True) if on}
        expected = slow_expected(model, members) + slow_noise(model, row)
        assert value == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_noise_recipe_with_multiword_masks() -> None:
    model = PlantedCircuitModel(12, 12, seed=2**40 + 7)
    rng = np.random.default_rng(0)
    rows = rng.random((6, 156)) < 0.5
    noise = model.measurement_noise(rows)
    for b in range(6):
        assert noise[b] == slow_noise(model, rows[b].tolist())


def test_behaviour_is_a_pure_function_of_the_coalition() -> None:
    model = PlantedCircuitModel(4, 4, seed=99)
    rng = np.random.default_rng(1)
    rows = rng.random((8, 20)) < 0.5
    batch = model(rows)
    single = np.array([model(rows[b : b + 1])[0] for b in range(8)])
    order = rng.permutation(8)
    shuffled = model(rows[order])
    np.testing.assert_array_equal(batch, single)
    np.testing.assert_array_equal(batch[order], shuffled)
    np.testing.assert_array_equal(batch, PlantedCircuitModel(4, 4, seed=99)(rows))
    assert not np.array_equal(batch, PlantedCircuitModel(4, 4, seed=100)(rows))


def test_measurement_noise_is_a_standard_deviation() -> None:
    model = PlantedCircuitModel(12, 12, seed=3)
    rows = np.random.default_rng(2).random((3000, 156)) < 0.5
    noise = model.measurement_noise(rows)
    assert abs(noise.std() - 0.02) < 0.02 * 5 / math.sqrt(2 * noise.size)
    assert abs(noise.mean()) < 5 * 0.02 / math.sqrt(noise.size)


def test_noiseless_switch() -> None:
    model = PlantedCircuitModel(4, 4, seed=5)
    quiet = model.without_noise()
    rows = np.random.default_rng(3).random((5, 20)) < 0.5
    np.testing.assert_array_equal(quiet.measurement_noise(rows), np.zeros(5))
    np.testing.assert_array_equal(quiet(rows), model.expected_behaviour(rows))
    np.testing.assert_array_equal(quiet.contributions, model.contributions)
    assert quiet.planted == model.planted
    assert quiet.settings()["measurement_noise_sd"] == 0.0
    assert model.settings() == {
        "kind": "planted",
        "n_layers": 4,
        "n_heads": 4,
        "seed": 5,
        "signal": 1.0,
        "component_noise_sd": 0.1,
        "measurement_noise_sd": 0.02,
    }


# --------------------------------------------------------------------------- the paper's numbers


def test_table1_cos_and_minimality_noiseless() -> None:
    model = PlantedCircuitModel(4, 4, seed=0, noiseless=True)
    sets = table1_sets(model)
    expected_cos = {"AP": 0.571, "GA": 0.400, "AS": 0.250, "CD": 1.000}
    expected_m = {"AP": 0.650, "GA": 0.500, "AS": 0.200, "CD": 0.800}
    for name, members in sets.items():
        result = cb.causal_optimality(model, members, model.universe)
        assert result.score == pytest.approx(expected_cos[name], abs=0.0005)
        assert cb.minimality(members, model.universe) == pytest.approx(expected_m[name], abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table1_cos_with_measurement_noise(seed: int) -> None:
    model = PlantedCircuitModel(4, 4, seed=seed)
    sets = table1_sets(model)
    expected = {"AP": 4 / 7, "GA": 0.4, "AS": 0.25, "CD": 1.0}
    for name, members in sets.items():
        assert cb.causal_optimality(model, members, model.universe).score == pytest.approx(expected[name])


def test_section34_exact_circuit_has_cos_080_and_tie_break() -> None:
    model = PlantedCircuitModel(4, 4, seed=0, noiseless=True)
    result = cb.causal_optimality(model, model.planted, model.universe)
    assert result.score == pytest.approx(0.800)
    # all five removals tie under Eq. 1: the first in canonical order goes
    assert result.removed == ("L0.attn_head[0]",)
    # §3.5: ground truth M = 0.750
    assert cb.minimality(model.planted, model.universe) == 0.75


def test_noiseless_faithfulness_and_completeness_closed_forms() -> None:
    model = PlantedCircuitModel(4, 4, seed=0, noiseless=True)
    sets = table1_sets(model)
    full = sigmoid(4.0)
    for name in ("AP", "GA", "AS"):
        assert cb.faithfulness(model, sets[name], model.universe) == 1.0
        expected_c = (full - sigmoid(-4.0)) / full
        assert cb.completeness(model, sets[name], model.universe) == pytest.approx(expected_c, rel=1e-12)
    # CD keeps 4 of 5: F = σ(2.4)/σ(4) ≈ 0.934 (Table 1 reports 0.978), C = (σ(4) − σ(−2.4))/σ(4)
    assert cb.faithfulness(model, sets["CD"], model.universe) == pytest.approx(sigmoid(2.4) / full, rel=1e-12)
    assert cb.completeness(model, sets["CD"], model.universe) == pytest.approx(
        (full - sigmoid(-2.4)) / full, rel=1e-12
    )


def test_table1_f1_with_the_planted_model() -> None:
    model = PlantedCircuitModel(4, 4, seed=0)
    expected = {"AP": 0.833, "GA": 0.667, "AS": 0.476, "CD": 0.889}
    for name, members in table1_sets(model).items():
        assert cb.precision_recall_f1(members, model.planted)[2] == pytest.approx(expected[name], abs=0.0005)
