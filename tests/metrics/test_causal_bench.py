"""CAUSAL-BENCH metrics against the paper's tables, closed forms and slow loops."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import hypergeom

from mibspec.metrics import causal_bench as cb

# --------------------------------------------------------------------------- paper data

# CAUSAL-BENCH Table 1 (4L/4H, |C| = 20, |S*| = 5): |S|, F, C, M, Stab., COS, F1, Comp.
TABLE_1 = {
    "AP": (7, 1.000, 0.992, 0.650, 0.417, 0.571, 0.833, 0.650),
    "GA": (10, 1.000, 0.977, 0.500, 0.533, 0.400, 0.667, 0.595),
    "AS": (16, 1.000, 0.980, 0.200, 0.505, 0.250, 0.476, 0.385),
    "CD": (4, 0.978, 0.899, 0.800, 1.000, 1.000, 0.889, 0.929),
}
# True positives stated in the text (§3.1, §3.2): AP 5 of 7, GA 5 of 10, AS 5 of 16, CD 4 of 4.
TRUE_POSITIVES = {"AP": 5, "GA": 5, "AS": 5, "CD": 4}
UNIVERSE_20 = [f"c{i:02d}" for i in range(20)]
PLANTED_5 = frozenset(UNIVERSE_20[:5])


def paper_sets() -> dict[str, frozenset[str]]:
    """Sets matching Table 1, Figure 4 and §3.3 (overlaps of false positives chosen so that
    the mean pairwise Jaccard is the reported 0.393)."""
    extra = UNIVERSE_20[5:]
    ap = PLANTED_5 | {extra[0], extra[1]}
    ga = PLANTED_5 | set(extra[2:7])
    as_ = PLANTED_5 | {extra[0]} | set(extra[2:4]) | set(extra[7:15])
    cd = PLANTED_5 - {UNIVERSE_20[4]}
    return {"AP": frozenset(ap), "GA": frozenset(ga), "AS": frozenset(as_), "CD": frozenset(cd)}


# --------------------------------------------------------------------------- slow baselines


def slow_jaccard(a: set[int] | frozenset[int], b: set[int] | frozenset[int]) -> float:
    inter = sum(1 for x in a if x in b)
    union = len(a) + len(b) - inter
    return 1.0 if union == 0 else inter / union


def slow_mean_pairwise(sets: list[set[int]]) -> float:
    total = 0.0
    pairs = 0
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            total += slow_jaccard(sets[i], sets[j])
            pairs += 1
    return total / pairs


def slow_null(sizes: list[int], N: int, B: int, seed: int) -> list[float]:
    """The MB-11 draw, one component at a time, from the single documented key array."""
    keys = np.random.default_rng(seed).random((N, len(sizes), B))
    null = []
    for b in range(B):
        draws = []
        for i, size in enumerate(sizes):
            chosen: set[int] = set()
            for j in range(N):
                if (N - j) * float(keys[j, i, b]) < size - len(chosen):
                    chosen.add(j)
            assert len(chosen) == size
            draws.append(chosen)
        null.append(slow_mean_pairwise(draws))
    return null


def exact_null_mean(sizes: list[int], N: int) -> float:
    """Closed form through scipy's hypergeometric pmf."""
    total = 0.0
    pairs = list(itertools.combinations(sizes, 2))
    for a, b in pairs:
        if a + b == 0:
            total += 1.0
            continue
        ks = np.arange(max(0, a + b - N), min(a, b) + 1)
        total += float(np.sum(hypergeom.pmf(ks, N, a, b) * ks / (a + b - ks)))
    return total / len(pairs)


sets_of_small_ints = st.frozensets(st.integers(0, 9), max_size=10)


# --------------------------------------------------------------------------- Table 1


@pytest.mark.parametrize("method", sorted(TABLE_1))
def test_table1_composite_from_its_own_columns(method: str) -> None:
    _, F, C, M, S, COS, _, comp = TABLE_1[method]
    value = cb.composite({"F": F, "C": C, "M": M, "S": S, "COS": COS})
    assert value == pytest.approx(comp, abs=0.0015)


@pytest.mark.parametrize("method", sorted(TABLE_1))
def test_table1_f1_from_sizes_and_true_positives(method: str) -> None:
    size, *_, f1, _ = TABLE_1[method]
    tp = TRUE_POSITIVES[method]
    identified = set(UNIVERSE_20[:tp]) | set(UNIVERSE_20[20 - (size - tp) :])
    assert len(identified) == size
    precision, recall, f1_value = cb.precision_recall_f1(identified, PLANTED_5)
    assert f1_value == pytest.approx(f1, abs=0.0005)
    assert precision == pytest.approx(tp / size)
    assert recall == pytest.approx(tp / 5)


def test_section32_precision_and_recall() -> None:
    sets = paper_sets()
    assert cb.precision_recall_f1(sets["AS"], PLANTED_5)[0] == pytest.approx(0.313, abs=0.00051)
    assert cb.precision_recall_f1(sets["CD"], PLANTED_5)[:2] == (1.0, 0.8)
    assert all(cb.precision_recall_f1(s, PLANTED_5)[1] >= 0.8 for s in sets.values())


@pytest.mark.parametrize("method", sorted(TABLE_1))
def test_table1_minimality(method: str) -> None:
    size, _, _, M, *_ = TABLE_1[method]
    assert cb.minimality(UNIVERSE_20[:size], UNIVERSE_20) == pytest.approx(M, abs=1e-12)


def test_figure4_and_section33_set_relations() -> None:
    sets = paper_sets()
    assert cb.jaccard(sets["AP"], sets["CD"]) == pytest.approx(0.571, abs=0.0005)
    assert cb.jaccard(sets["AS"], sets["CD"]) == pytest.approx(0.250, abs=1e-12)
    assert cb.consensus_set(list(sets.values())) == PLANTED_5 - {UNIVERSE_20[4]}
    assert cb.majority_set(list(sets.values())) == PLANTED_5
    matrix = cb.jaccard_matrix([sets[k] for k in ("AP", "GA", "AS", "CD")])
    assert matrix[0, 3] == matrix.max(where=~np.eye(4, dtype=bool), initial=0.0)
    assert matrix[2, 3] == matrix.min(where=~np.eye(4, dtype=bool), initial=1.0)


# --------------------------------------------------------------------------- composite


unit_values = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)
positive_weights = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


@given(value=unit_values)
def test_composite_of_equal_parts_is_that_part(value: float) -> None:
    assert cb.composite(dict.fromkeys(cb.COMPOSITE_KEYS, value)) == pytest.approx(value, rel=1e-12)


@given(
    values=st.lists(unit_values, min_size=5, max_size=5),
    weights=st.lists(positive_weights, min_size=5, max_size=5),
    scale=st.floats(min_value=1e-3, max_value=1e3),
)
def test_composite_lies_between_min_and_max_and_ignores_weight_scale(
    values: list[float], weights: list[float], scale: float
) -> None:
    v = dict(zip(cb.COMPOSITE_KEYS, values, strict=True))
    w = dict(zip(cb.COMPOSITE_KEYS, weights, strict=True))
    result = cb.composite(v, w)
    assert min(values) * (1 - 1e-12) <= result <= max(values) * (1 + 1e-12)
    scaled = cb.composite(v, {k: scale * x for k, x in w.items()})
    assert scaled == pytest.approx(result, rel=1e-12)
    slow = sum(weights) / sum(wk / vk for wk, vk in zip(weights, values, strict=True))
    assert result == pytest.approx(slow, rel=1e-12)


def test_composite_harmonic_mean_closed_form() -> None:
    assert cb.composite({"a": 0.5, "b": 1.0}, {"a": 1.0, "b": 1.0}) == pytest.approx(2 / 3)
    assert cb.composite({"a": 0.5, "b": 1.0}, {"a": 3.0, "b": 1.0}) == pytest.approx(4 / 7)


def test_composite_zero_value_gives_zero() -> None:
    values = dict.fromkeys(cb.COMPOSITE_KEYS, 0.9) | {"COS": 0.0}
    assert cb.composite(values) == 0.0


@pytest.mark.parametrize(
    ("values", "weights", "fragment"),
    [
        ({"F": 1.0}, None, "exactly the keys"),
        (dict.fromkeys(cb.COMPOSITE_KEYS, 0.5), {"F": 1.0}, "weights must have exactly"),
        ({"a": 0.5, "b": 0.5}, {"a": 0.0, "b": 1.0}, "weights['a'] must be > 0"),
        ({"a": 0.5, "b": 0.5}, {"a": -1.0, "b": 1.0}, "weights['a'] must be > 0"),
        ({"a": -0.5, "b": 0.5}, {"a": 1.0, "b": 1.0}, "values['a'] must be >= 0"),
        ({"a": math.nan, "b": 0.5}, {"a": 1.0, "b": 1.0}, "values['a'] must be a finite"),
        ({}, None, "non-empty mapping"),
    ],
)
def test_composite_rejects_bad_input(
    values: dict[str, float], weights: dict[str, float] | None, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        cb.composite(values, weights)


# --------------------------------------------------------------------------- P/R/F1, Jaccard, sets


@given(identified=sets_of_small_ints, truth=sets_of_small_ints)
def test_precision_recall_f1_against_loop(identified: frozenset[int], truth: frozenset[int]) -> None:
    tp = 0
    for x in identified:
        if x in truth:
            tp += 1
    p, r, f1 = cb.precision_recall_f1(identified, truth)
    if not identified and not truth:
        assert (p, r, f1) == (1.0, 1.0, 1.0)
        return
    assert p == (tp / len(identified) if identified else 0.0)
    assert r == (tp / len(truth) if truth else 0.0)
    expected_f1 = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    assert f1 == pytest.approx(expected_f1, abs=1e-12)
    assert 0.0 <= f1 <= 1.0


@given(a=sets_of_small_ints, b=sets_of_small_ints)
def test_jaccard_against_loop(a: frozenset[int], b: frozenset[int]) -> None:
    assert cb.jaccard(a, b) == slow_jaccard(a, b)
    assert cb.jaccard(a, b) == cb.jaccard(b, a)
    assert cb.jaccard(a, a) == 1.0


def test_jaccard_of_two_empty_sets_is_one() -> None:
    assert cb.jaccard(set(), set()) == 1.0
    assert cb.jaccard(set(), {1}) == 0.0


@given(sets=st.lists(sets_of_small_ints, min_size=1, max_size=6))
def test_jaccard_matrix_symmetric_unit_diagonal(sets: list[frozenset[int]]) -> None:
    matrix = cb.jaccard_matrix(sets)
    assert matrix.shape == (len(sets), len(sets))
    np.testing.assert_array_equal(matrix, matrix.T)
    np.testing.assert_array_equal(np.diag(matrix), np.ones(len(sets)))
    for i, j in itertools.product(range(len(sets)), repeat=2):
        if i != j:
            assert matrix[i, j] == slow_jaccard(sets[i], sets[j])


@given(sets=st.lists(sets_of_small_ints, min_size=2, max_size=6))
def test_stability_is_mean_pairwise_jaccard(sets: list[frozenset[int]]) -> None:
    assert cb.stability(sets) == pytest.approx(slow_mean_pairwise([set(s) for s in sets]), abs=1e-15)


def test_stability_needs_two_runs() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        cb.stability([{1}])


@given(sets=st.lists(sets_of_small_ints, min_size=1, max_size=7))
def test_consensus_and_majority_against_loops(sets: list[frozenset[int]]) -> None:
    everything = set().union(*sets)
    consensus = {x for x in everything if all(x in s for s in sets)}
    majority = {x for x in everything if sum(x in s for s in sets) > len(sets) / 2}
    assert cb.consensus_set(sets) == consensus
    assert cb.majority_set(sets) == majority
    assert cb.consensus_set(sets) <= cb.majority_set(sets)


def test_majority_needs_strictly_more_than_half() -> None:
    assert cb.majority_set([{1, 2}, {1}, {2, 3}, {3}]) == frozenset()
    assert cb.majority_set([{1, 2}, {1}, {1, 3}, {3}]) == {1}


def test_set_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="must not repeat"):
        cb.jaccard(["a", "a"], {"a"})
    with pytest.raises(ValueError, match="must be a set"):
        cb.jaccard("ab", {"a"})
    with pytest.raises(ValueError, match="at least 1"):
        cb.consensus_set([])


# --------------------------------------------------------------------------- masks, F, C, M


def test_mask_round_trip_and_order() -> None:
    universe = ["x", "y", "z", "w"]
    mask = cb.to_mask(["w", "y"], universe)
    assert mask.tolist() == [False, True, False, True]
    assert cb.from_mask(mask, universe) == {"y", "w"}
    assert cb.ordered({"w", "y"}, universe) == ("y", "w")
    with pytest.raises(ValueError, match="unknown id"):
        cb.to_mask({"q"}, universe)
    with pytest.raises(ValueError, match="unique"):
        cb.to_mask({"x"}, ["x", "x"])
    with pytest.raises(ValueError, match="shape"):
        cb.to_mask(np.ones(3, dtype=bool), universe)


def additive_behaviour(weights: np.ndarray) -> cb.Behaviour:
    """β(S) = Σ_{c ∈ S} w_c, so F = Σ_S w / Σ w and C = Σ_S w / Σ w exactly."""

    def beta(active: np.ndarray) -> np.ndarray:
        return np.array([sum(float(w) for w, on in zip(weights, row, strict=True) if on) for row in active])

    return beta


@settings(max_examples=50)
@given(
    weights=st.lists(st.floats(0.05, 2.0), min_size=1, max_size=8),
    data=st.data(),
)
def test_faithfulness_and_completeness_additive_closed_form(
    weights: list[float], data: st.DataObject
) -> None:
    universe = [f"u{i}" for i in range(len(weights))]
    chosen = data.draw(st.lists(st.booleans(), min_size=len(weights), max_size=len(weights)))
    S = {u for u, on in zip(universe, chosen, strict=True) if on}
    beta = additive_behaviour(np.array(weights))
    kept = sum(w for w, on in zip(weights, chosen, strict=True) if on)
    total = sum(weights)
    assert cb.faithfulness(beta, S, universe) == pytest.approx(kept / total, rel=1e-12, abs=1e-15)
    assert cb.completeness(beta, S, universe) == pytest.approx(kept / total, rel=1e-12, abs=1e-12)
    assert cb.faithfulness(beta, np.array(chosen), universe) == cb.faithfulness(beta, S, universe)
    assert cb.minimality(S, universe) == pytest.approx(1 - len(S) / len(universe), abs=1e-15)


def test_degenerate_full_behaviour_raises() -> None:
    universe = ["a", "b"]

    def zero(active: np.ndarray) -> np.ndarray:
        return np.zeros(active.shape[0])

    with pytest.raises(cb.DegenerateBehaviourError, match="beta\\(C\\)"):
        cb.faithfulness(zero, {"a"}, universe)
    with pytest.raises(ValueError, match="min_denominator"):
        cb.completeness(zero, {"a"}, universe)


def test_behaviour_output_is_checked() -> None:
    universe = ["a", "b"]
    with pytest.raises(ValueError, match="shape"):
        cb.faithfulness(lambda active: np.ones(3), {"a"}, universe)
    with pytest.raises(ValueError, match="finite"):
        cb.faithfulness(lambda active: np.full(active.shape[0], np.nan), {"a"}, universe)


def test_behaviour_receives_read_only_coalitions() -> None:
    def mutating(active: np.ndarray) -> np.ndarray:
        active[:] = True
        return np.ones(active.shape[0])

    with pytest.raises(ValueError, match="read-only"):
        cb.faithfulness(mutating, {"a"}, ["a", "b"])


# --------------------------------------------------------------------------- COS


def table_behaviour(N: int, seed: int) -> tuple[cb.Behaviour, dict[tuple[bool, ...], float]]:
    """A generic, non-monotone behaviour: an arbitrary value per coalition."""
    rng = np.random.default_rng(seed)
    table = {
        bits: float(v)
        for bits, v in zip(itertools.product((False, True), repeat=N), rng.random(2**N), strict=True)
    }
    table[(True,) * N] = 0.5 + rng.random()

    def beta(active: np.ndarray) -> np.ndarray:
        return np.array([table[tuple(bool(x) for x in row)] for row in active])

    return beta, table


def slow_cos(
    table: dict[tuple[bool, ...], float], S: list[int], N: int, threshold: float
) -> tuple[list[int], list[int]]:
    def faith(members: list[int]) -> float:
        return table[tuple(i in members for i in range(N))] / table[(True,) * N]

    current = sorted(S)
    removed: list[int] = []
    while current:
        best, best_f = current[0], -math.inf
        for c in current:  # canonical order; strict > keeps the earliest of tied maxima
            f = faith([x for x in current if x != c])
            if f > best_f:
                best, best_f = c, f
        if best_f < threshold:
            break
        current.remove(best)
        removed.append(best)
    return current, removed


@settings(max_examples=60, deadline=None)
@given(
    N=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    threshold=st.floats(0.0, 1.5),
    data=st.data(),
)
def test_cos_against_slow_greedy_and_brute_force(
    N: int, seed: int, threshold: float, data: st.DataObject
) -> None:
    universe = [f"u{i}" for i in range(N)]
    beta, table = table_behaviour(N, seed)
    S = sorted(data.draw(st.sets(st.integers(0, N - 1))))
    result = cb.causal_optimality(beta, {universe[i] for i in S}, universe, threshold=threshold)
    reduced, removed = slow_cos(table, S, N, threshold)
    assert result.reduced == {universe[i] for i in reduced}
    assert result.removed == tuple(universe[i] for i in removed)
    assert result.score == (1.0 if not S else len(reduced) / len(S))

    full = table[(True,) * N]

    def faith(members: set[int]) -> float:
        return table[tuple(i in members for i in range(N))] / full

    assert result.initial_faithfulness == faith(set(S))
    assert result.final_faithfulness == faith(set(reduced))
    for c in reduced:  # irreducible: no single removal keeps the threshold
        assert faith(set(reduced) - {c}) < threshold
    if removed:
        assert result.final_faithfulness >= threshold
        feasible = [
            size
            for size in range(len(S) + 1)
            for subset in itertools.combinations(S, size)
            if faith(set(subset)) >= threshold
        ]
        assert len(reduced) >= min(feasible)


def test_cos_tie_break_is_canonical_order() -> None:
    universe = ["a", "b", "c", "d"]

    def flat(active: np.ndarray) -> np.ndarray:
        return np.where(active.sum(axis=1) >= 2, 1.0, 0.1)

    result = cb.causal_optimality(flat, {"d", "b", "a"}, universe, threshold=0.9)
    assert result.removed == ("a",)
    assert result.reduced == {"b", "d"}
    assert result.score == pytest.approx(2 / 3)


def test_cos_of_empty_set_is_one() -> None:
    beta, _ = table_behaviour(3, 7)
    empty = cb.causal_optimality(beta, set(), ["u0", "u1", "u2"])
    assert (empty.score, empty.reduced, empty.removed) == (1.0, frozenset(), ())


def test_cos_start_below_threshold_still_reduces() -> None:
    universe = ["a", "b", "c"]

    def only_a(active: np.ndarray) -> np.ndarray:
        # β(C) = 1, β({a}) = 0.9, everything else 0.1
        alone = active[:, 0] & ~active[:, 1] & ~active[:, 2]
        return np.where(active.all(axis=1), 1.0, np.where(alone, 0.9, 0.1))

    result = cb.causal_optimality(only_a, {"a", "b"}, universe, threshold=0.85)
    assert result.initial_faithfulness == pytest.approx(0.1)
    assert result.removed == ("b",)
    assert result.final_faithfulness == pytest.approx(0.9)
    assert result.score == 0.5


def test_cos_threshold_is_checked() -> None:
    beta, _ = table_behaviour(2, 0)
    with pytest.raises(ValueError, match="threshold"):
        cb.causal_optimality(beta, {"u0"}, ["u0", "u1"], threshold=math.inf)


# --------------------------------------------------------------------------- convergence test


def test_expected_null_jaccard_against_enumeration() -> None:
    N = 6
    for sizes in [(2, 3), (1, 4, 6), (0, 2, 5), (0, 0), (3, 3, 3)]:
        subsets = [list(itertools.combinations(range(N), s)) for s in sizes]
        total = 0.0
        count = 0
        for combo in itertools.product(*subsets):
            total += slow_mean_pairwise([set(c) for c in combo])
            count += 1
        assert cb.expected_null_jaccard(list(sizes), N) == pytest.approx(total / count, rel=1e-12)
        assert exact_null_mean(list(sizes), N) == pytest.approx(total / count, rel=1e-12)


def test_null_draws_match_slow_loop_exactly() -> None:
    sets = [set(range(3)), {1, 4, 5, 6}, {0, 7}]
    sizes, N, B, seed = [3, 4, 2], 9, 300, 11
    result = cb.convergence_test(sets, N, n_permutations=B, seed=seed)
    null = slow_null(sizes, N, B, seed)
    np.testing.assert_array_equal(result.null, np.array(null))
    j_obs = slow_mean_pairwise(sets)
    assert result.j_obs == j_obs
    mean = sum(null) / B
    std = math.sqrt(sum((x - mean) ** 2 for x in null) / B)
    exceed = sum(1 for x in null if x >= j_obs)
    assert result.null_mean == pytest.approx(mean, rel=1e-12)
    assert result.null_std == pytest.approx(std, rel=1e-9)
    assert result.z == pytest.approx((j_obs - mean) / std, rel=1e-9)
    assert result.n_exceed == exceed
    assert result.p == (1 + exceed) / (B + 1)
    paper = cb.convergence_test(sets, N, n_permutations=B, seed=seed, p_convention="paper", ddof=1)
    assert paper.p == exceed / B
    assert paper.null_std == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in null) / (B - 1)), rel=1e-9)


def test_null_draw_is_independent_of_slab_size(monkeypatch: pytest.MonkeyPatch) -> None:
    sets = [set(range(10)), set(range(5, 30)), set(range(40, 45)), {1, 50, 60}]
    whole = cb.convergence_test(sets, 64, n_permutations=500, seed=3)
    monkeypatch.setattr(cb, "_CHUNK_ELEMENTS", 4 * 500 * 3)  # three rows of keys per slab
    sliced = cb.convergence_test(sets, 64, n_permutations=500, seed=3)
    np.testing.assert_array_equal(whole.null, sliced.null)


def test_draw_algorithm_gives_uniform_subsets() -> None:
    N, s, B = 5, 2, 20_000
    keys = np.random.default_rng(5).random((N, B))
    counts: dict[tuple[int, ...], int] = {}
    for b in range(B):
        chosen: list[int] = []
        for j in range(N):
            if (N - j) * keys[j, b] < s - len(chosen):
                chosen.append(j)
        counts[tuple(chosen)] = counts.get(tuple(chosen), 0) + 1
    assert len(counts) == math.comb(N, s)
    expected = B / math.comb(N, s)
    sd = math.sqrt(expected * (1 - 1 / math.comb(N, s)))
    assert all(abs(c - expected) < 5 * sd for c in counts.values())


@pytest.mark.parametrize(
    ("sizes", "N"),
    [([7, 10, 16, 4], 20), ([3, 8], 12), ([136, 52, 85, 4], 156), ([1, 1, 1, 1, 1], 6), ([0, 3, 5], 10)],
)
def test_null_mean_matches_hypergeometric_expectation(sizes: list[int], N: int) -> None:
    sets = [set(range(s)) for s in sizes]
    result = cb.convergence_test(sets, N, n_permutations=4000, seed=sum(sizes))
    standard_error = result.null_std / math.sqrt(result.n_permutations)
    assert abs(result.null_mean - exact_null_mean(sizes, N)) < 4.5 * standard_error + 1e-12


def test_paper_section33_convergence() -> None:
    sets = list(paper_sets().values())
    exact = exact_null_mean([len(s) for s in sets], 20)
    assert exact == pytest.approx(0.261, abs=0.0005)
    result = cb.convergence_test(sets, 20, n_permutations=20_000, seed=2025, p_convention="paper")
    assert result.j_obs == pytest.approx(0.393, abs=0.0005)
    assert abs(result.null_mean - exact) < 4.5 * result.null_std / math.sqrt(20_000)
    # σ implied by the paper: (0.393 − 0.261) / 3.75 ≈ 0.0352
    assert result.null_std == pytest.approx(0.0352, abs=0.002)
    assert result.z == pytest.approx(3.75, abs=0.2)
    assert result.p < 0.002


def test_convergence_is_deterministic_and_seed_dependent() -> None:
    sets = [set(range(5)), set(range(3, 9)), set(range(20, 24))]
    first = cb.convergence_test(sets, 40, n_permutations=300, seed=9)
    again = cb.convergence_test(sets, 40, n_permutations=300, seed=9)
    other = cb.convergence_test(sets, 40, n_permutations=300, seed=10)
    np.testing.assert_array_equal(first.null, again.null)
    assert (first.z, first.p) == (again.z, again.p)
    assert not np.array_equal(first.null, other.null)


def test_plus_one_p_is_never_zero() -> None:
    sets = [set(range(5)), set(range(5)), set(range(5))]
    plus_one = cb.convergence_test(sets, 156, n_permutations=999, seed=1)
    paper = cb.convergence_test(sets, 156, n_permutations=999, seed=1, p_convention="paper")
    assert plus_one.n_exceed == 0
    assert plus_one.p == 1 / 1000
    assert paper.p == 0.0
    assert plus_one.as_dict()["p"] == plus_one.p


def test_degenerate_null_has_no_z() -> None:
    result = cb.convergence_test([set(), set()], 5, n_permutations=50, seed=0)
    assert result.z is None
    assert (result.j_obs, result.null_std, result.p) == (1.0, 0.0, 1.0)
    full = cb.convergence_test([set(range(5)), {0, 1}], 5, n_permutations=50, seed=0)
    assert full.z is None
    assert full.j_obs == 0.4
    assert "z" not in full.as_dict()
    assert set(full.as_dict()) == {"j_obs", "null_mean", "null_std", "p", "n_permutations", "seed"}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"sets": [{1}]}, "at least 2"),
        ({"universe_size": 2}, "union"),
        ({"p_convention": "exact"}, "p_convention"),
        ({"ddof": 2}, "ddof"),
        ({"seed": -1}, "seed"),
        ({"n_permutations": 1, "ddof": 1}, "n_permutations"),
        ({"n_permutations": 0}, "n_permutations"),
    ],
)
def test_convergence_rejects_bad_input(kwargs: dict[str, object], fragment: str) -> None:
    arguments: dict[str, object] = {"sets": [{1, 2}, {2, 3}], "universe_size": 5, "seed": 0} | kwargs
    with pytest.raises(ValueError, match=fragment):
        cb.convergence_test(**arguments)  # type: ignore[arg-type]
