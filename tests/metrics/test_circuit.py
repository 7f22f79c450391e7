"""Circuit-track metrics against hand loops, closed forms and sklearn."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from mibspec.metrics import circuit as mc

GRID = mc.DEFAULT_GRID
MIB_EDGE_TOTALS = (32_491, 179_749, 74_218, 1_592_881, 1_108)


# --------------------------------------------------------------------------- helpers (baselines)


def slow_trapezoid(xs: list[float], ys: list[float]) -> float:
    total = 0.0
    for i in range(len(xs) - 1):
        total += (xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2
    return total


def slow_rank(scores: list[float], ranking: str) -> list[int]:
    key = [abs(s) if ranking == "absolute" else s for s in scores]
    return sorted(range(len(scores)), key=lambda i: (-key[i], i))


def pairwise_auc(keys: list[float], truth: list[bool]) -> float:
    positives = [k for k, t in zip(keys, truth, strict=True) if t]
    negatives = [k for k, t in zip(keys, truth, strict=True) if not t]
    wins = 0.0
    for p in positives:
        for q in negatives:
            wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return wins / (len(positives) * len(negatives))


def slow_mib_auroc(scores: list[float], truth: list[bool], grid_thousandths: list[int]) -> float:
    """MIB AUROC with integer arithmetic on grid points given in thousandths."""
    n = len(scores)
    order = slow_rank(scores, "absolute")
    positives = sum(truth)
    negatives = n - positives
    tprs, fprs = [], []
    for g in grid_thousandths:
        m = -((-g * n) // 1000)  # ceil(g * n / 1000) on integers
        tp = sum(1 for i in order[:m] if truth[i])
        tprs.append(tp / positives)
        fprs.append((m - tp) / negatives)
    return slow_trapezoid(fprs, tprs) / fprs[-1]


score_lists = st.lists(st.integers(min_value=-4, max_value=4).map(float), min_size=1, max_size=40)
rankings = st.sampled_from(["signed", "absolute"])


# --------------------------------------------------------------------------- faithfulness


def test_faithfulness_closed_form() -> None:
    assert mc.faithfulness(3.0, 5.0, 1.0) == pytest.approx(0.5)
    assert mc.faithfulness(1.0, 5.0, 1.0) == 0.0
    assert mc.faithfulness(5.0, 5.0, 1.0) == 1.0


def test_faithfulness_is_not_clamped() -> None:
    assert mc.faithfulness(9.0, 5.0, 1.0) == pytest.approx(2.0)
    assert mc.faithfulness(-3.0, 5.0, 1.0) == pytest.approx(-1.0)


def test_faithfulness_negative_denominator_is_valid() -> None:
    assert mc.faithfulness(0.0, -2.0, 2.0) == pytest.approx(0.5)


@pytest.mark.parametrize(("m_full", "m_empty"), [(1.0, 1.0), (1.0, 1.0 + 5e-7), (0.0, -9e-7)])
def test_faithfulness_degenerate_denominator_raises(m_full: float, m_empty: float) -> None:
    with pytest.raises(mc.DegenerateDenominatorError, match="m_full - m_empty") as info:
        mc.faithfulness(0.3, m_full, m_empty)
    error = info.value
    assert isinstance(error, ValueError)
    assert isinstance(error, mc.DegenerateDenominatorError)
    assert error.denominator == m_full - m_empty


def test_faithfulness_min_denominator_is_configurable() -> None:
    assert mc.faithfulness(1.0, 2e-7, 0.0, min_denominator=1e-7) == pytest.approx(5e6)
    with pytest.raises(mc.DegenerateDenominatorError):
        mc.faithfulness(1.0, 0.5, 0.0, min_denominator=1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1.0", None, True])
def test_faithfulness_rejects_non_finite(bad: object) -> None:
    with pytest.raises(ValueError, match="m_circuit"):
        mc.faithfulness(bad, 1.0, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, -1e-6, math.nan])
def test_faithfulness_rejects_bad_min_denominator(bad: float) -> None:
    with pytest.raises(ValueError, match="min_denominator"):
        mc.faithfulness(1.0, 2.0, 0.0, min_denominator=bad)


def test_ratio_of_means_differs_from_mean_of_ratios() -> None:
    circuit = [1.0, 3.0]
    full = [2.0, 4.0]
    empty = [0.0, 0.0]
    # ratio of means: (2 - 0) / (3 - 0) = 2/3; mean of ratios: (1/2 + 3/4) / 2 = 0.625
    result = mc.faithfulness_from_examples(circuit, full, empty)
    assert result == pytest.approx(2.0 / 3.0, abs=1e-15)
    assert result != pytest.approx(0.625)


def test_faithfulness_from_examples_matches_loop() -> None:
    rng = np.random.default_rng(7)
    circuit, full, empty = rng.normal(size=(3, 50))
    full += 3.0
    mean = lambda xs: sum(float(x) for x in xs) / len(xs)  # noqa: E731
    expected = (mean(circuit) - mean(empty)) / (mean(full) - mean(empty))
    assert mc.faithfulness_from_examples(circuit, full, empty) == pytest.approx(expected, rel=1e-12)


def test_faithfulness_from_examples_degenerate_and_shape_errors() -> None:
    with pytest.raises(mc.DegenerateDenominatorError):
        mc.faithfulness_from_examples([1.0, 2.0], [1.0, -1.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="same examples"):
        mc.faithfulness_from_examples([1.0], [1.0, 2.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="per_example_full"):
        mc.faithfulness_from_examples([1.0], [], [0.0])
    with pytest.raises(ValueError, match="per_example_empty"):
        mc.faithfulness_from_examples([1.0], [2.0], [math.nan])


# --------------------------------------------------------------------------- CPR / CMD


@given(st.lists(st.floats(-10, 10), min_size=10, max_size=10))
def test_area_under_curve_matches_loop(values: list[float]) -> None:
    assert mc.area_under_curve(GRID, values) == pytest.approx(
        slow_trapezoid(list(GRID), values), rel=1e-12, abs=1e-12
    )


@given(st.floats(-5, 5))
def test_cpr_of_constant_faithfulness(c: float) -> None:
    assert mc.cpr(GRID, [c] * len(GRID)) == pytest.approx(0.999 * c, rel=1e-12, abs=1e-15)


def test_cpr_and_cmd_of_perfect_faithfulness() -> None:
    assert mc.cpr(GRID, [1.0] * 10) == pytest.approx(0.999, abs=1e-15)
    assert mc.cmd(GRID, [1.0] * 10) == 0.0


@given(st.floats(-3, 3), st.floats(-3, 3))
def test_cpr_of_linear_faithfulness_is_exact(a: float, b: float) -> None:
    # the trapezoid is exact for a linear f = a + b k on [0.001, 1]
    f = [a + b * k for k in GRID]
    expected = a * (1 - 0.001) + b * (1 - 0.001**2) / 2
    assert mc.cpr(GRID, f) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@given(st.floats(0, 3))
def test_cmd_of_linear_faithfulness_above_one(b: float) -> None:
    f = [1 + b * k for k in GRID]
    assert mc.cmd(GRID, f) == pytest.approx(b * (1 - 0.001**2) / 2, rel=1e-9, abs=1e-12)


def test_cmd_takes_absolute_value_at_the_points() -> None:
    # f crosses 1 between the points: |1 - f| = 0.5 at both ends, trapezoid 0.5
    # (the exact integral of |1 - f| would be 0.25; the convention is per point)
    assert mc.cmd([0.0, 1.0], [0.5, 1.5]) == pytest.approx(0.5)


@given(st.lists(st.floats(-5, 5), min_size=10, max_size=10))
def test_cmd_matches_loop(f: list[float]) -> None:
    expected = slow_trapezoid(list(GRID), [abs(1 - x) for x in f])
    assert mc.cmd(GRID, f) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("ks", "values", "match"),
    [
        ([0.1], [1.0], "at least 2"),
        ([0.1, 0.1], [1.0, 1.0], "strictly increasing"),
        ([0.2, 0.1], [1.0, 1.0], "strictly increasing"),
        ([0.1, 0.2], [1.0], "same length"),
        ([0.1, 0.2], [1.0, math.nan], "values"),
        ([0.1, math.inf], [1.0, 1.0], "ks"),
    ],
)
def test_area_under_curve_rejects(ks: list[float], values: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mc.area_under_curve(ks, values)


def test_cpr_cmd_reject_non_proportions() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mc.cpr([0.5, 1.5], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mc.cmd([-0.1, 0.5], [1.0, 1.0])


# --------------------------------------------------------------------------- edge counts


def test_edges_at_examples() -> None:
    assert mc.edges_at(0.001, 32_491, "floor") == 32
    assert mc.edges_at(0.001, 32_491, "ceil") == 33
    assert mc.edges_at(1.0, 32_491, "floor") == 32_491
    assert mc.edges_at(0, 10, "ceil") == 0
    # binary floats: 0.07 * 100 = 7.000000000000001 and 0.29 * 100 = 28.999999999999996
    assert mc.edges_at(0.07, 100, "ceil") == 7
    assert mc.edges_at(0.29, 100, "floor") == 29
    assert mc.edges_at(Fraction(1, 3), 10, "floor") == 3
    assert mc.edges_at(Decimal("0.005"), 1_108, "ceil") == 6


@given(st.integers(0, 1000), st.integers(1, 2_000_000), st.sampled_from(["floor", "ceil"]))
def test_edges_at_is_exact_on_thousandths(thousandths: int, n: int, rounding: str) -> None:
    k = thousandths / 1000
    expected = (thousandths * n) // 1000 if rounding == "floor" else -((-thousandths * n) // 1000)
    assert mc.edges_at(k, n, rounding) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("n_edges", MIB_EDGE_TOTALS)
def test_edges_at_floor_reproduces_mib_int_on_default_grid(n_edges: int) -> None:
    assert [mc.edges_at(k, n_edges, "floor") for k in GRID] == [int(k * n_edges) for k in GRID]


@pytest.mark.parametrize(
    ("k", "n", "rounding", "match"),
    [
        (1.5, 10, "floor", "k must"),
        (-0.1, 10, "floor", "k must"),
        (math.nan, 10, "floor", "k must"),
        (True, 10, "floor", "k must"),
        ("0.1", 10, "floor", "k must"),
        (0.1, 0, "floor", "n_edges"),
        (0.1, 2.0, "floor", "n_edges"),
        (0.1, 10, "round", "rounding"),
    ],
)
def test_edges_at_rejects(k: object, n: object, rounding: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mc.edges_at(k, n, rounding)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- ranking


@given(score_lists, rankings)
def test_rank_edges_matches_slow_sort(scores: list[float], ranking: str) -> None:
    assert mc.rank_edges(scores, ranking).tolist() == slow_rank(scores, ranking)  # type: ignore[arg-type]


@given(score_lists, rankings, st.data())
def test_top_n_matches_slow_selection(scores: list[float], ranking: str, data: st.DataObject) -> None:
    n = data.draw(st.integers(0, len(scores)))
    mask = mc.top_n(scores, n, ranking)  # type: ignore[arg-type]
    assert sorted(np.flatnonzero(mask).tolist()) == sorted(slow_rank(scores, ranking)[:n])


@given(score_lists, rankings, st.data())
def test_straddling_ties_matches_slow_count(scores: list[float], ranking: str, data: st.DataObject) -> None:
    n = data.draw(st.integers(0, len(scores)))
    report = mc.straddling_ties(scores, n, ranking)  # type: ignore[arg-type]
    keys = [abs(s) if ranking == "absolute" else s for s in scores]
    ordered = [keys[i] for i in slow_rank(scores, ranking)]
    if n == 0:
        assert report == mc.TieReport(0, False, None, 0, 0)
        return
    cut = ordered[n - 1]
    assert report.key_at_cut == cut
    assert report.n_tied_inside == sum(1 for x in ordered[:n] if x == cut)
    assert report.n_tied_outside == sum(1 for x in ordered[n:] if x == cut)
    assert report.straddles == (n < len(scores) and ordered[n] == cut)


def test_rank_edges_signed_vs_absolute() -> None:
    scores = [0.5, -2.0, 1.0, -0.5, 2.0]
    assert mc.rank_edges(scores, "signed").tolist() == [4, 2, 0, 3, 1]
    assert mc.rank_edges(scores, "absolute").tolist() == [1, 4, 2, 0, 3]


def test_rank_edges_at_llama_scale() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(-1000, 1000, size=1_592_881).astype(np.float64) / 7
    order = mc.rank_edges(scores, "absolute")
    keys = np.abs(scores)[order]
    assert np.array_equal(np.sort(order), np.arange(scores.size))
    assert (np.diff(keys) <= 0).all()
    same_key = np.diff(keys) == 0
    assert (np.diff(order)[same_key] > 0).all()


@pytest.mark.parametrize(
    ("scores", "ranking", "match"),
    [
        ([1.0, math.nan], "signed", "finite"),
        ([1.0, math.inf], "absolute", "finite"),
        ([[1.0, 2.0]], "signed", "1-D"),
        ([1.0, 2.0], "magnitude", "ranking"),
        (["a", "b"], "signed", "real numbers"),
    ],
)
def test_rank_edges_rejects(scores: object, ranking: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mc.rank_edges(scores, ranking)  # type: ignore[arg-type]


def test_top_n_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="n must"):
        mc.top_n([1.0, 2.0], 3, "signed")
    with pytest.raises(ValueError, match="n must"):
        mc.straddling_ties([1.0, 2.0], -1, "signed")


# --------------------------------------------------------------------------- AUROC


@st.composite
def labelled_scores(draw: st.DrawFn) -> tuple[list[float], list[bool]]:
    n = draw(st.integers(2, 30))
    scores = draw(st.lists(st.integers(-5, 5).map(float), min_size=n, max_size=n))
    truth = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(lambda t: 0 < sum(t) < len(t)))
    return scores, truth


@pytest.mark.slow
@given(labelled_scores(), rankings)
def test_edge_auroc_rank_matches_pair_loop_and_sklearn(
    case: tuple[list[float], list[bool]], ranking: str
) -> None:
    scores, truth = case
    keys = [abs(s) if ranking == "absolute" else s for s in scores]
    result = mc.edge_auroc_rank(scores, truth, ranking)  # type: ignore[arg-type]
    assert result == pytest.approx(pairwise_auc(keys, truth), abs=1e-12)
    assert result == pytest.approx(roc_auc_score(truth, keys), abs=1e-12)


def test_edge_auroc_rank_perfect_and_reversed() -> None:
    truth = np.array([True] * 5 + [False] * 20)
    scores = np.concatenate([np.linspace(5, 6, 5), np.linspace(-1, 1, 20)])
    assert mc.edge_auroc_rank(scores, truth, "signed") == 1.0
    assert mc.edge_auroc_rank(-scores, truth, "signed") == 0.0


@given(
    labelled_scores(),
    st.sampled_from([[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000], [100, 500, 1000], [250, 750]]),
)
@settings(max_examples=60)
def test_edge_auroc_mib_matches_slow_loop(case: tuple[list[float], list[bool]], grid: list[int]) -> None:
    scores, truth = case
    n = len(scores)
    last_m = -((-grid[-1] * n) // 1000)
    last_fp = sum(1 for i in slow_rank(scores, "absolute")[:last_m] if not truth[i])
    ks = [g / 1000 for g in grid]
    if last_fp == 0:
        with pytest.raises(ValueError, match="FPR = 0"):
            mc.edge_auroc_mib(scores, truth, ks)
        return
    assert mc.edge_auroc_mib(scores, truth, ks) == pytest.approx(
        slow_mib_auroc(scores, truth, grid), abs=1e-12
    )


def test_edge_auroc_mib_perfect_ranking_hitting_a_grid_count_is_one() -> None:
    n, positives = 1000, 10  # ceil(0.01 * 1000) = 10 = P
    truth = np.arange(n) < positives
    scores = np.linspace(1, 2, n) + np.where(truth, 10.0, 0.0)
    assert mc.edge_auroc_mib(scores, truth) == pytest.approx(1.0, abs=1e-15)
    assert mc.edge_auroc_rank(scores, truth) == 1.0


def test_edge_auroc_mib_perfect_ranking_between_grid_counts() -> None:
    # P = 15 falls between the counts 10 and 20: the segment from (0, 10/15) to
    # (5/985, 1) loses (5/985) * (1 - 10/15) / 2 of area
    n, positives = 1000, 15
    truth = np.arange(n) < positives
    scores = np.where(truth, 10.0, 1.0)
    expected = 1 - (5 / 985) * (1 / 6)
    assert mc.edge_auroc_mib(scores, truth) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("truth", "match"),
    [([False, False, False], "0 positives"), ([True, True, True], "0 negatives")],
)
def test_auroc_degenerate_truth(truth: list[bool], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        mc.edge_auroc_rank([1.0, 2.0, 3.0], truth)
    with pytest.raises(ValueError, match=match):
        mc.edge_auroc_mib([1.0, 2.0, 3.0], truth)


def test_auroc_input_errors() -> None:
    with pytest.raises(ValueError, match="truth_mask"):
        mc.edge_auroc_rank([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="truth_mask"):
        mc.edge_auroc_rank([1.0, 2.0], [0.5, 1.0])
    with pytest.raises(ValueError, match="grid"):
        mc.edge_auroc_mib([1.0, 2.0], [True, False], [0.5])
    with pytest.raises(ValueError, match="grid"):
        mc.edge_auroc_mib([1.0, 2.0], [True, False], [0.0, 1.0])
    with pytest.raises(ValueError, match="grid"):
        mc.edge_auroc_mib([1.0, 2.0], [True, False], [1.0, 0.5])


# --------------------------------------------------------------------------- leaderboard


@given(st.floats(-30, 30))
def test_sigmoid_closed_form(x: float) -> None:
    assert mc.sigmoid(x) == pytest.approx(1 / (1 + math.exp(-x)), rel=1e-12)
    assert mc.sigmoid(x) + mc.sigmoid(-x) == pytest.approx(1.0, abs=1e-15)


def test_sigmoid_extremes_and_arrays() -> None:
    assert mc.sigmoid(0.0) == 0.5
    assert mc.sigmoid(-1000.0) == 0.0
    assert mc.sigmoid(1000.0) == 1.0
    result = mc.sigmoid(np.array([0.0, 1.0]))
    assert isinstance(result, np.ndarray)
    assert result.tolist() == pytest.approx([0.5, 1 / (1 + math.exp(-1))])
    with pytest.raises(ValueError, match="x"):
        mc.sigmoid(math.nan)


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=12))
def test_leaderboard_score_and_average_match_loops(cells: list[float]) -> None:
    expected_score = sum(1 / (1 + math.exp(-x)) for x in cells) / len(cells)
    assert mc.leaderboard_score(cells) == pytest.approx(expected_score, rel=1e-12)
    assert mc.leaderboard_average(cells) == pytest.approx(sum(cells) / len(cells), rel=1e-12, abs=1e-12)


@given(st.floats(-5, 5), st.integers(1, 8))
def test_leaderboard_of_equal_parts_is_that_part(c: float, n: int) -> None:
    assert mc.leaderboard_score([c] * n) == pytest.approx(1 / (1 + math.exp(-c)), rel=1e-12)
    assert mc.leaderboard_average([c] * n) == pytest.approx(c, rel=1e-12, abs=1e-15)


def test_leaderboard_uses_raw_cmd() -> None:
    # CMD enters the sigmoid as is: CMD 0 (best) scores 0.5, CMD 0.75 scores higher
    assert mc.leaderboard_score([0.0]) == 0.5
    assert mc.leaderboard_score([0.75]) > 0.5


@pytest.mark.parametrize("cells", [[], ["-", 0.3], [math.nan], [None]])
def test_leaderboard_rejects(cells: list[object]) -> None:
    with pytest.raises(ValueError, match="cells"):
        mc.leaderboard_score(cells)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cells"):
        mc.leaderboard_average(cells)  # type: ignore[arg-type]


def test_leaderboard_accepts_generators() -> None:
    assert mc.leaderboard_average(x for x in (1.0, 2.0, 3.0)) == 2.0
    assert mc.leaderboard_score(itertools.repeat(0.0, 3)) == 0.5


def test_straddling_ties_at_equals_one_call_per_size() -> None:
    from mibspec.metrics.circuit import straddling_ties, straddling_ties_at

    scores = np.random.default_rng(5).integers(-3, 4, size=200).astype(np.float64)
    sizes = [0, 1, 7, 50, 123, 200]
    for ranking in ("signed", "absolute"):
        assert straddling_ties_at(scores, sizes, ranking) == [
            straddling_ties(scores, n, ranking) for n in sizes
        ]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-300, -1e-300, 3.0]) | st.floats(-5, 5),
        max_size=60,
    )
)
def test_descending_keys_are_the_stable_ranking_bit_for_bit(values: list[float]) -> None:
    # the slow obvious baseline: sort (key, index) pairs, key descending, index ascending;
    # zeros of both signs compare equal, so they stay in index order with their own signs
    from mibspec.metrics._ranking import descending_keys

    keys = np.array(values, dtype=np.float64)
    expected = [keys[i] for i in sorted(range(keys.size), key=lambda i: (-keys[i], i))]
    got = descending_keys(keys)
    assert got.tobytes() == np.array(expected, dtype=np.float64).tobytes()


def test_no_sizes_give_no_tie_reports() -> None:
    from mibspec.metrics.circuit import straddling_ties_at

    assert straddling_ties_at([1.0, 1.0], [], "signed") == []
