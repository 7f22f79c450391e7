"""Shapley estimators against the direct subset formula and the Shapley axioms."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from mibspec.metrics import shapley as sh

Game = Callable[[NDArray[np.bool_]], NDArray[np.float64]]


# --------------------------------------------------------------------------- games and baselines


def table_game(table: list[float]) -> Game:
    """Game given by a value per coalition code (bit i = player i)."""
    values = np.asarray(table, dtype=np.float64)

    def value_fn(coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
        codes = (coalitions.astype(np.int64) << np.arange(coalitions.shape[1])).sum(axis=1)
        return values[codes]

    return value_fn


def direct_shapley(v: Callable[[frozenset[int]], float], n: int) -> list[float]:
    """φ_i = Σ_{S ⊆ N∖{i}} |S|!(n-|S|-1)!/n! (v(S ∪ {i}) - v(S)), by explicit subsets."""
    phi = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        total = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                total += weight * (v(s | {i}) - v(s))
        phi.append(total)
    return phi


def code_of(subset: frozenset[int]) -> int:
    return sum(1 << j for j in subset)


class CountingGame:
    """Wraps a game and records every batch it is called with."""

    def __init__(self, game: Game) -> None:
        self.game = game
        self.batches: list[int] = []

    def __call__(self, coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
        self.batches.append(coalitions.shape[0])
        return self.game(coalitions)


@st.composite
def random_games(draw: st.DrawFn, max_players: int = 5) -> tuple[int, list[float]]:
    n = draw(st.integers(1, max_players))
    table = draw(st.lists(st.integers(-20, 20).map(float), min_size=1 << n, max_size=1 << n))
    return n, table


def interaction_game(n: int, seed: int, third_order: float) -> tuple[Game, NDArray[np.float64]]:
    """Near-additive game: weights + small pairwise and triple interactions."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=n)
    pair = rng.normal(scale=0.3, size=(n, n))
    triple = rng.normal(scale=third_order, size=(n, n, n))

    def value_fn(coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
        x = coalitions.astype(np.float64)
        return (
            x @ weights + np.einsum("bi,ij,bj->b", x, pair, x) + np.einsum("bi,bj,bk,ijk->b", x, x, x, triple)
        )

    return value_fn, weights


# --------------------------------------------------------------------------- exact


@given(random_games())
def test_exact_matches_direct_formula(game: tuple[int, list[float]]) -> None:
    n, table = game
    expected = direct_shapley(lambda s: table[code_of(s)], n)
    assert sh.shapley_exact(table_game(table), n).tolist() == pytest.approx(expected, abs=1e-9)


@given(random_games())
def test_efficiency(game: tuple[int, list[float]]) -> None:
    n, table = game
    phi = sh.shapley_exact(table_game(table), n)
    assert phi.sum() == pytest.approx(table[-1] - table[0], abs=1e-9)


@given(random_games(max_players=4), st.data())
def test_symmetry(game: tuple[int, list[float]], data: st.DataObject) -> None:
    n, table = game
    if n < 2:
        return
    i, j = data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))

    def swap(code: int) -> int:
        bi, bj = (code >> i) & 1, (code >> j) & 1
        return code & ~((1 << i) | (1 << j)) | (bi << j) | (bj << i)

    # symmetrise: v(S) = (t(S) + t(swap(S))) / 2 makes i and j interchangeable
    symmetric = [(table[c] + table[swap(c)]) / 2 for c in range(1 << n)]
    phi = sh.shapley_exact(table_game(symmetric), n)
    assert phi[i] == pytest.approx(phi[j], abs=1e-9)


@given(random_games(max_players=4), st.data())
def test_null_player(game: tuple[int, list[float]], data: st.DataObject) -> None:
    n, table = game
    null = data.draw(st.integers(0, n - 1))
    # v(S) = t(S without the null player): adding it never changes the value
    nulled = [table[c & ~(1 << null)] for c in range(1 << n)]
    assert sh.shapley_exact(table_game(nulled), n)[null] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.slow
@given(random_games(max_players=4), st.data(), st.floats(-3, 3))
def test_linearity(game: tuple[int, list[float]], data: st.DataObject, alpha: float) -> None:
    n, first = game
    second = data.draw(st.lists(st.integers(-20, 20).map(float), min_size=1 << n, max_size=1 << n))
    combined = [a + alpha * b for a, b in zip(first, second, strict=True)]
    expected = sh.shapley_exact(table_game(first), n) + alpha * sh.shapley_exact(table_game(second), n)
    assert sh.shapley_exact(table_game(combined), n).tolist() == pytest.approx(expected.tolist(), abs=1e-8)


def test_additive_game_gives_its_weights() -> None:
    weights = np.array([0.5, -1.25, 3.0, 0.0, 2.0, -0.75])
    phi = sh.shapley_exact(lambda c: c.astype(np.float64) @ weights, 6)
    assert phi.tolist() == pytest.approx(weights.tolist(), abs=1e-12)


def test_exact_evaluates_each_coalition_once_in_batches() -> None:
    game = CountingGame(table_game([float(c) for c in range(1 << 5)]))
    reference = sh.shapley_exact(game, 5)
    assert game.batches == [32]
    chunked = CountingGame(game.game)
    assert np.array_equal(sh.shapley_exact(chunked, 5, batch_size=10), reference)
    assert chunked.batches == [10, 10, 10, 2]


def test_coalition_matrix_bit_order() -> None:
    assert sh.coalition_matrix(2).tolist() == [[False, False], [True, False], [False, True], [True, True]]


@pytest.mark.parametrize(
    ("value_fn", "match"),
    [
        (lambda c: np.zeros((c.shape[0], 1)), "shape"),
        (lambda c: np.full(c.shape[0], np.nan), "finite"),
        (lambda c: np.array(["x"] * c.shape[0]), "real numbers"),
        (lambda c: c.any(axis=1), "real numbers"),
    ],
)
def test_value_function_output_is_checked(value_fn: Game, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sh.shapley_exact(value_fn, 3)


def test_exact_rejects_too_many_players_and_bad_batch() -> None:
    with pytest.raises(ValueError, match="n must"):
        sh.shapley_exact(lambda c: np.zeros(c.shape[0]), 17)
    with pytest.raises(ValueError, match="n must"):
        sh.shapley_exact(lambda c: np.zeros(c.shape[0]), 0)
    with pytest.raises(ValueError, match="batch_size"):
        sh.shapley_exact(lambda c: np.zeros(c.shape[0]), 3, batch_size=0)


# --------------------------------------------------------------------------- permutation sampling


def test_all_permutations_reproduce_the_exact_value() -> None:
    n = 4
    rng = np.random.default_rng(5)
    table = rng.normal(size=1 << n).tolist()
    perms = np.array(list(itertools.permutations(range(n))))
    estimate = sh.shapley_from_permutations(table_game(table), perms)
    expected = direct_shapley(lambda s: table[code_of(s)], n)
    assert estimate.values.tolist() == pytest.approx(expected, abs=1e-12)


def test_permutation_estimate_converges_within_its_standard_error() -> None:
    game, _ = interaction_game(7, seed=2, third_order=0.2)
    exact = sh.shapley_exact(game, 7)
    estimate = sh.shapley_permutation(game, 7, n_permutations=2000, seed=123)
    assert (np.abs(estimate.values - exact) <= 4 * estimate.standard_error + 1e-12).all()
    assert (estimate.standard_error < 0.05).all()


def test_permutation_evaluation_count_and_batches() -> None:
    game = CountingGame(table_game(list(np.arange(1 << 5, dtype=float))))
    estimate = sh.shapley_permutation(game, 5, n_permutations=30, seed=0, batch_size=16)
    assert estimate.n_evaluations == 2 + 30 * 4
    assert sum(game.batches) == estimate.n_evaluations
    assert max(game.batches) <= 16
    assert estimate.sampler == "permutation"


def test_permutations_follow_the_documented_recipe() -> None:
    rng = np.random.default_rng(42)
    expected = np.argsort(rng.random((6, 9)), axis=1, kind="stable")
    assert np.array_equal(sh.draw_permutations(9, 6, 42), expected)
    estimate = sh.shapley_permutation(lambda c: c.sum(axis=1).astype(float), 9, n_permutations=6, seed=42)
    assert np.array_equal(estimate.permutations, expected)


def test_antithetic_pairs_are_reverses() -> None:
    rng = np.random.default_rng(8)
    drawn = np.argsort(rng.random((3, 5)), axis=1, kind="stable")
    perms = sh.draw_permutations(5, 6, 8, antithetic=True)
    assert np.array_equal(perms[0::2], drawn)
    assert np.array_equal(perms[1::2], drawn[:, ::-1])


def test_same_seed_same_result_different_seed_different_permutations() -> None:
    game, _ = interaction_game(6, seed=1, third_order=0.5)
    first = sh.shapley_permutation(game, 6, n_permutations=20, seed=9)
    second = sh.shapley_permutation(game, 6, n_permutations=20, seed=9)
    other = sh.shapley_permutation(game, 6, n_permutations=20, seed=10)
    assert np.array_equal(first.values, second.values)
    assert np.array_equal(first.standard_error, second.standard_error)
    assert np.array_equal(first.permutations, second.permutations)
    assert not np.array_equal(first.permutations, other.permutations)


def test_sampling_does_not_touch_the_global_rng() -> None:
    before = np.random.get_state(legacy=False)
    sh.shapley_permutation(lambda c: c.sum(axis=1).astype(float), 4, n_permutations=4, seed=0)
    after = np.random.get_state(legacy=False)
    assert np.array_equal(before["state"]["key"], after["state"]["key"])
    assert before["state"]["pos"] == after["state"]["pos"]


def test_antithetic_is_exact_for_pairwise_games() -> None:
    # a permutation and its reverse see every pair in both orders
    game, _ = interaction_game(6, seed=4, third_order=0.0)
    estimate = sh.shapley_permutation(game, 6, n_permutations=4, seed=0, antithetic=True)
    assert estimate.values.tolist() == pytest.approx(sh.shapley_exact(game, 6).tolist(), abs=1e-12)
    assert estimate.sampler == "antithetic_permutation"


def test_antithetic_has_lower_error_on_a_near_additive_game() -> None:
    game, _ = interaction_game(6, seed=3, third_order=0.2)
    exact = sh.shapley_exact(game, 6)
    plain_sq, anti_sq = 0.0, 0.0
    for seed in range(200):
        plain = sh.shapley_permutation(game, 6, n_permutations=8, seed=seed)
        anti = sh.shapley_permutation(game, 6, n_permutations=8, seed=seed, antithetic=True)
        plain_sq += float(np.sum((plain.values - exact) ** 2))
        anti_sq += float(np.sum((anti.values - exact) ** 2))
    assert anti_sq < 0.5 * plain_sq


def test_replaying_external_permutations() -> None:
    perms = np.array([[2, 0, 1], [1, 2, 0]])
    estimate = sh.shapley_from_permutations(table_game([0.0, 1.0, 2.0, 4.0, 3.0, 5.0, 6.0, 10.0]), perms)
    # first: v({2})-v(∅)=3 for 2, v({0,2})-v({2})=2 for 0, v(N)-v({0,2})=5 for 1
    # second: v({1})-v(∅)=2 for 1, v({1,2})-v({1})=4 for 2, v(N)-v({1,2})=4 for 0
    assert estimate.values.tolist() == pytest.approx([3.0, 3.5, 3.5])
    assert estimate.standard_error.tolist() == pytest.approx([1.0, 1.5, 0.5])
    assert estimate.n_evaluations == 2 + 2 * 2


@pytest.mark.parametrize(
    ("perms", "kwargs", "match"),
    [
        ([[0, 1, 1], [0, 1, 2]], {}, "row 0"),
        ([[0, 1, 2]], {}, "2 independent units"),
        ([[0, 1], [1, 0]], {"paired": True}, "2 independent units"),
        ([[0, 1], [1, 0], [0, 1]], {"paired": True}, "even"),
        ([0, 1, 2], {}, "2-D"),
        ([[0.0, 1.0], [1.0, 0.0]], {}, "integer"),
    ],
)
def test_from_permutations_rejects(perms: list[object], kwargs: dict[str, bool], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sh.shapley_from_permutations(lambda c: np.zeros(c.shape[0]), perms, **kwargs)


@pytest.mark.parametrize(
    ("n_permutations", "antithetic", "match"),
    [(1, False, "n_permutations"), (2, True, "n_permutations"), (5, True, "even")],
)
def test_permutation_counts_are_checked(n_permutations: int, antithetic: bool, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sh.draw_permutations(3, n_permutations, 0, antithetic=antithetic)


def test_single_player_game() -> None:
    estimate = sh.shapley_permutation(lambda c: c[:, 0] * 2.5, 1, n_permutations=3, seed=0)
    assert estimate.values.tolist() == [2.5]
    assert estimate.n_evaluations == 2
    assert sh.shapley_exact(lambda c: c[:, 0] * 2.5, 1).tolist() == [2.5]


# --------------------------------------------------------------------------- trials


def test_trials_use_spawned_child_seeds_and_average() -> None:
    game, _ = interaction_game(5, seed=6, third_order=0.3)
    result = sh.shapley_trials(game, 5, n_trials=5, n_permutations=12, seed=2024)
    children = np.random.SeedSequence(2024).spawn(5)
    assert len(result.trials) == 5
    for trial, child in zip(result.trials, children, strict=True):
        assert np.array_equal(trial.permutations, sh.draw_permutations(5, 12, child))
    manual = sum(trial.values for trial in result.trials) / 5
    assert result.values.tolist() == pytest.approx(manual.tolist(), abs=1e-15)
    pooled_se = np.sqrt(sum(trial.standard_error**2 for trial in result.trials)) / 5
    assert result.standard_error.tolist() == pytest.approx(pooled_se.tolist(), abs=1e-15)
    assert result.n_evaluations == 5 * (2 + 12 * 4)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_trials_are_deterministic(seed: int) -> None:
    game, _ = interaction_game(4, seed=0, third_order=0.3)
    first = sh.shapley_trials(game, 4, n_trials=3, n_permutations=4, seed=seed)
    second = sh.shapley_trials(game, 4, n_trials=3, n_permutations=4, seed=seed)
    assert np.array_equal(first.values, second.values)


def test_each_trial_is_followed_by_on_trial_and_a_huge_count_allocates_nothing_up_front() -> None:
    """``on_trial`` runs after every trial, so a caller can stop between them: with 10**12
    trials declared, the third call stops the run at once (spawning every child seed first
    would take terabytes)."""
    game, _ = interaction_game(4, seed=1, third_order=0.3)
    calls: list[int] = []
    result = sh.shapley_trials(
        game, 4, n_trials=3, n_permutations=4, seed=5, on_trial=lambda: calls.append(1)
    )
    assert len(calls) == 3
    assert np.array_equal(
        result.values, sh.shapley_trials(game, 4, n_trials=3, n_permutations=4, seed=5).values
    )

    class StopError(Exception):
        pass

    def stop_at_third() -> None:
        calls.append(1)
        if len(calls) == 6:
            raise StopError

    with pytest.raises(StopError):
        sh.shapley_trials(game, 4, n_trials=10**12, n_permutations=4, seed=5, on_trial=stop_at_third)


def test_trials_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n_trials"):
        sh.shapley_trials(lambda c: np.zeros(c.shape[0]), 3, n_trials=0, n_permutations=4, seed=0)
    with pytest.raises(ValueError, match="seed"):
        sh.shapley_trials(lambda c: np.zeros(c.shape[0]), 3, n_permutations=4, seed=-1)
