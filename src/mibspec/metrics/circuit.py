"""Circuit-track metrics: faithfulness, CPR, CMD, edge ranking, edge AUROC, leaderboard scores.

Conventions (normative text: ``spec/v1/metrics/circuit.md``, requirements MC-*):

* faithfulness is a ratio of dataset means, never a mean of per-example ratios, with
  no clamping and a guarded denominator;
* CPR and CMD are linear trapezoids over the given k points only (no k = 0 point),
  CMD integrating ``|1 - f|`` at the points;
* rankings are by signed score (CPR) or by ``|score|`` (CMD), ties broken by ascending
  edge index in the canonical edge order;
* edge counts are ``floor(k * n)`` (circuits) or ``ceil(k * n)`` (MIB AUROC), computed
  in exact rational arithmetic on the shortest decimal representation of k.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._ranking import TieReport, descending_keys, descending_order, tie_report
from .checks import (
    as_bool_array,
    as_float_array,
    check_choice,
    check_finite_scalar,
    check_int,
    describe,
)

__all__ = [
    "DEFAULT_GRID",
    "DegenerateDenominatorError",
    "Ranking",
    "Rounding",
    "TieReport",
    "area_under_curve",
    "cmd",
    "cpr",
    "edge_auroc_mib",
    "edge_auroc_rank",
    "edges_at",
    "faithfulness",
    "faithfulness_from_examples",
    "leaderboard_average",
    "leaderboard_score",
    "rank_edges",
    "sigmoid",
    "straddling_ties",
    "straddling_ties_at",
    "top_n",
]

DEFAULT_GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Proportions of edges at which MIB evaluates circuits (ten points, no k = 0)."""

Ranking = Literal["signed", "absolute"]
Rounding = Literal["floor", "ceil"]

_RANKINGS: tuple[str, ...] = ("signed", "absolute")
_ROUNDINGS: tuple[str, ...] = ("floor", "ceil")


class DegenerateDenominatorError(ValueError):
    """The faithfulness denominator ``m(N) - m(∅)`` is too close to zero to divide by.

    Attributes:
        denominator: the value of ``m(N) - m(∅)`` that was rejected.
        min_denominator: the threshold it fell below (in absolute value).
    """

    def __init__(self, denominator: float, min_denominator: float) -> None:
        self.denominator = denominator
        self.min_denominator = min_denominator
        super().__init__(
            "faithfulness denominator m_full - m_empty must satisfy "
            f"|m_full - m_empty| >= min_denominator = {min_denominator!r}; "
            f"got m_full - m_empty = {denominator!r}"
        )


# --------------------------------------------------------------------------- faithfulness


def faithfulness(
    m_circuit: float,
    m_full: float,
    m_empty: float,
    *,
    min_denominator: float = 1e-6,
) -> float:
    """Normalised faithfulness of a circuit from dataset-mean metric values.

    ``f = (m(C) - m(∅)) / (m(N) - m(∅))`` where each ``m`` is the MEAN over the dataset
    of the per-example metric (logit difference) for the circuit C, the full model N and
    the empty circuit ∅ (every edge patched). No clamping: f may be negative or exceed 1.

    Args:
        m_circuit: mean metric with only the circuit's edges un-ablated.
        m_full: mean metric of the full model.
        m_empty: mean metric of the empty circuit.
        min_denominator: smallest accepted ``|m(N) - m(∅)|`` (absolute, > 0).

    Returns:
        The faithfulness f as a Python float.

    Raises:
        DegenerateDenominatorError: if ``|m_full - m_empty| < min_denominator``.
        ValueError: on non-finite inputs or a non-positive ``min_denominator``.
    """
    circuit = check_finite_scalar(m_circuit, "m_circuit")
    full = check_finite_scalar(m_full, "m_full")
    empty = check_finite_scalar(m_empty, "m_empty")
    threshold = check_finite_scalar(min_denominator, "min_denominator")
    if threshold <= 0.0:
        raise ValueError(f"min_denominator must be > 0; got {threshold!r}")
    denominator = full - empty
    if abs(denominator) < threshold:
        raise DegenerateDenominatorError(denominator, threshold)
    return (circuit - empty) / denominator


def faithfulness_from_examples(
    per_example_circuit: ArrayLike,
    per_example_full: ArrayLike,
    per_example_empty: ArrayLike,
    *,
    min_denominator: float = 1e-6,
) -> float:
    """Faithfulness from per-example metric values (ratio of means).

    Each array is averaged in float64 (``numpy.mean``) and the three means are passed to
    :func:`faithfulness`: ``f = (mean m(C) - mean m(∅)) / (mean m(N) - mean m(∅))``.
    This is NOT the mean of per-example ratios.

    Args:
        per_example_circuit: 1-D per-example metric with the circuit.
        per_example_full: 1-D per-example metric of the full model (same examples).
        per_example_empty: 1-D per-example metric of the empty circuit (same examples).
        min_denominator: see :func:`faithfulness`.

    Raises:
        DegenerateDenominatorError: see :func:`faithfulness`.
        ValueError: on empty, non-1-D or non-finite arrays, or arrays of different length.
    """
    circuit = as_float_array(per_example_circuit, "per_example_circuit", ndim=1)
    full = as_float_array(per_example_full, "per_example_full", ndim=1)
    empty = as_float_array(per_example_empty, "per_example_empty", ndim=1)
    if not circuit.shape == full.shape == empty.shape:
        raise ValueError(
            "per_example_circuit, per_example_full and per_example_empty must cover the same "
            f"examples (equal lengths); got lengths {circuit.size}, {full.size}, {empty.size}"
        )
    return faithfulness(
        float(circuit.mean()),
        float(full.mean()),
        float(empty.mean()),
        min_denominator=min_denominator,
    )


# --------------------------------------------------------------------------- areas


def area_under_curve(ks: ArrayLike, values: ArrayLike) -> float:
    """Linear trapezoid over the given points only.

    ``A = Σ_{i=0}^{n-2} (k_{i+1} - k_i) · (v_i + v_{i+1}) / 2``. No point is added at
    k = 0 or anywhere else; the x axis is linear.

    Args:
        ks: 1-D strictly increasing finite x values (at least two).
        values: 1-D finite y values, same length as ``ks``.

    Raises:
        ValueError: on fewer than two points, unequal lengths, non-finite values or ks
            not strictly increasing.
    """
    x = as_float_array(ks, "ks", ndim=1)
    y = as_float_array(values, "values", ndim=1)
    if x.size < 2:
        raise ValueError(f"ks must hold at least 2 points; got {x.size}")
    if x.shape != y.shape:
        raise ValueError(f"values must have the same length as ks ({x.size}); got {y.size}")
    steps = np.diff(x)
    if not (steps > 0).all():
        bad = int(np.flatnonzero(steps <= 0)[0])
        raise ValueError(
            f"ks must be strictly increasing; got ks[{bad}] = {x[bad]!r} >= ks[{bad + 1}] = {x[bad + 1]!r}"
        )
    return float(np.sum(steps * (y[:-1] + y[1:]) / 2.0))


def _check_proportions(ks: ArrayLike) -> NDArray[np.float64]:
    x = as_float_array(ks, "ks", ndim=1)
    if ((x < 0.0) | (x > 1.0)).any():
        bad = int(np.flatnonzero((x < 0.0) | (x > 1.0))[0])
        raise ValueError(f"ks must be proportions of edges in [0, 1]; got ks[{bad}] = {x[bad]!r}")
    return x


def cpr(ks: ArrayLike, faithfulness_values: ArrayLike) -> float:
    """Integrated circuit performance ratio (higher is better).

    ``CPR = Σ_i (k_{i+1} - k_i) · (f_i + f_{i+1}) / 2`` over the given grid points
    (:func:`area_under_curve` of f). With f ≡ c on :data:`DEFAULT_GRID`, CPR = 0.999·c.
    Circuits for CPR are built by signed score.

    Args:
        ks: strictly increasing proportions of edges in [0, 1] (e.g. :data:`DEFAULT_GRID`).
        faithfulness_values: faithfulness at each k.

    Raises:
        ValueError: see :func:`area_under_curve`; also if a k lies outside [0, 1].
    """
    return area_under_curve(_check_proportions(ks), faithfulness_values)


def cmd(ks: ArrayLike, faithfulness_values: ArrayLike) -> float:
    """Integrated circuit-model distance (0 is best).

    ``CMD = Σ_i (k_{i+1} - k_i) · (|1 - f_i| + |1 - f_{i+1}|) / 2``: the absolute value
    is taken at the grid points before the trapezoid (a curve crossing f = 1 between two
    points is not split). Circuits for CMD are built by ``|score|``.

    Args:
        ks: strictly increasing proportions of edges in [0, 1].
        faithfulness_values: faithfulness at each k.

    Raises:
        ValueError: see :func:`cpr`.
    """
    f = as_float_array(faithfulness_values, "faithfulness_values", ndim=1)
    return area_under_curve(_check_proportions(ks), np.abs(1.0 - f))


# --------------------------------------------------------------------------- edge counts


def _exact_proportion(k: Any) -> Fraction:
    if isinstance(k, (bool, np.bool_)):
        raise ValueError(f"k must be a real number in [0, 1]; got {describe(k)}")
    if isinstance(k, Fraction):
        exact = k
    elif isinstance(k, Decimal):
        if not k.is_finite():
            raise ValueError(f"k must be a real number in [0, 1]; got {k!r}")
        exact = Fraction(k)
    elif isinstance(k, (int, np.integer)):
        exact = Fraction(int(k))
    elif isinstance(k, (float, np.floating)):
        value = float(k)
        if not math.isfinite(value):
            raise ValueError(f"k must be a real number in [0, 1]; got {value!r}")
        # The shortest repr is the decimal the user wrote (0.001 -> "0.001"), so k·n is
        # integral exactly when the written decimal times n is, unlike the binary float.
        exact = Fraction(repr(value))
    else:
        raise ValueError(f"k must be a real number in [0, 1]; got {describe(k)}")
    if not 0 <= exact <= 1:
        raise ValueError(f"k must be a real number in [0, 1]; got {k!r}")
    return exact


def edges_at(k: float | Fraction | Decimal, n_edges: int, rounding: Rounding) -> int:
    """Number of edges kept at proportion k.

    ``floor(k · n)`` (MIB's circuit convention, ``int(k * n)``) or ``ceil(k · n)`` (MIB's
    InterpBench AUROC convention), computed exactly: a float k is replaced by the
    rational value of its shortest decimal representation (``Fraction(repr(k))``), so
    ``0.001 · 32491 = 32.491`` gives 32 / 33 and an integral product such as
    ``0.07 · 100`` gives exactly 7 under both roundings (binary float arithmetic
    gives ``7.000000000000001`` and a ceiling of 8). On :data:`DEFAULT_GRID` this agrees
    with float arithmetic for every ``n_edges`` up to 5·10⁶.

    Args:
        k: proportion in [0, 1] (float, int, ``Fraction`` or ``Decimal``).
        n_edges: total number of edges, >= 1.
        rounding: ``"floor"`` or ``"ceil"``.

    Raises:
        ValueError: on k outside [0, 1] or not a real number, n_edges < 1, unknown rounding.
    """
    exact = _exact_proportion(k)
    n = check_int(n_edges, "n_edges", minimum=1)
    mode = check_choice(rounding, "rounding", _ROUNDINGS)
    product = exact * n
    return math.floor(product) if mode == "floor" else math.ceil(product)


# --------------------------------------------------------------------------- ranking


def _ranking_keys(scores: ArrayLike, ranking: str) -> NDArray[np.float64]:
    values = as_float_array(scores, "scores", ndim=1, allow_empty=True)
    mode = check_choice(ranking, "ranking", _RANKINGS)
    return np.abs(values) if mode == "absolute" else values


def rank_edges(scores: ArrayLike, ranking: Ranking) -> NDArray[np.intp]:
    """Canonical ranking of edges, most important first.

    Key = score (``"signed"``) or |score| (``"absolute"``); edges are sorted by key
    descending, ties broken by ascending edge index (the canonical edge order), i.e. a
    stable sort of ``-key``. The top-n circuit is the first n entries.

    Args:
        scores: 1-D finite edge scores in canonical edge order.
        ranking: ``"signed"`` (CPR circuits) or ``"absolute"`` (CMD circuits).

    Returns:
        A permutation of ``range(len(scores))`` (dtype intp).

    Raises:
        ValueError: on NaN/infinite scores, non-1-D input or unknown ranking.
    """
    return descending_order(_ranking_keys(scores, ranking))


def top_n(scores: ArrayLike, n: int, ranking: Ranking) -> NDArray[np.bool_]:
    """Boolean mask of the first ``n`` edges of :func:`rank_edges`.

    For many cuts of the same scores, call :func:`rank_edges` once and slice its result.

    Raises:
        ValueError: see :func:`rank_edges`; also if n is not in ``[0, len(scores)]``.
    """
    keys = _ranking_keys(scores, ranking)
    count = check_int(n, "n", minimum=0, maximum=keys.size)
    mask = np.zeros(keys.size, dtype=np.bool_)
    mask[descending_order(keys)[:count]] = True
    return mask


def straddling_ties(scores: ArrayLike, n: int, ranking: Ranking) -> TieReport:
    """Report whether keys tied at the cut fall on both sides of the top-``n`` selection.

    ``straddles`` is True iff ``0 < n < len(scores)`` and the n-th and (n+1)-th ranked keys
    are equal; then the selection depends on the tie-break rule, not on the scores.

    Raises:
        ValueError: see :func:`top_n`.
    """
    keys = _ranking_keys(scores, ranking)
    [report] = straddling_ties_at(keys, [check_int(n, "n", minimum=0, maximum=keys.size)], "signed")
    return report


def straddling_ties_at(scores: ArrayLike, ns: Sequence[int], ranking: Ranking) -> list[TieReport]:
    """:func:`straddling_ties` for several selection sizes, sorting the scores once."""
    keys = _ranking_keys(scores, ranking)
    counts = [check_int(n, f"ns[{i}]", minimum=0, maximum=keys.size) for i, n in enumerate(ns)]
    if not counts:
        return []
    sorted_keys = descending_keys(keys)
    return [tie_report(sorted_keys, count) for count in counts]


# --------------------------------------------------------------------------- AUROC


def _truth_and_keys(
    scores: ArrayLike, truth_mask: ArrayLike, ranking: str
) -> tuple[NDArray[np.float64], NDArray[np.bool_], int, int]:
    keys = _ranking_keys(scores, ranking)
    truth = as_bool_array(truth_mask, "truth_mask", shape=keys.shape)
    positives = int(np.count_nonzero(truth))
    negatives = truth.size - positives
    if positives == 0:
        raise ValueError("truth_mask must contain at least one true edge; got 0 positives")
    if negatives == 0:
        raise ValueError("truth_mask must contain at least one false edge; got 0 negatives")
    return keys, truth, positives, negatives


def edge_auroc_mib(
    scores: ArrayLike,
    truth_mask: ArrayLike,
    grid: Sequence[float] = DEFAULT_GRID,
    ranking: Ranking = "absolute",
) -> float:
    """InterpBench edge AUROC as computed by MIB (grid-sampled, normalised by the last FPR).

    For each k in ``grid`` (in order) take the first ``m_k = ceil(k · n)`` edges of
    :func:`rank_edges` (MIB ranks by ``|score|``, ``ranking="absolute"``); ``TPR_k = TP_k / P``
    and ``FPR_k = FP_k / N_neg``. Then ``AUROC = trapezoid(TPR over FPR) / FPR_last`` with no
    (0, 0) point. A perfect ranking scores exactly 1 only if some ``m_k`` equals P (or
    the first point already has FPR = 0 and TPR = 1); otherwise it scores slightly below 1.

    Args:
        scores: 1-D finite edge scores.
        truth_mask: boolean mask of ground-truth circuit edges (same length).
        grid: strictly increasing proportions in (0, 1], at least two.
        ranking: key = |score| (``"absolute"``, default, MIB's) or score (``"signed"``).

    Raises:
        ValueError: if P = 0, N_neg = 0, FPR_last = 0, or on invalid inputs.
    """
    keys, truth, positives, negatives = _truth_and_keys(scores, truth_mask, ranking)
    ks = _check_proportions(list(grid))
    if ks.size < 2:
        raise ValueError(f"grid must hold at least 2 proportions; got {ks.size}")
    if not (np.diff(ks) > 0).all() or ks[0] <= 0.0:
        raise ValueError(f"grid must be strictly increasing proportions in (0, 1]; got {tuple(grid)}")
    true_so_far = np.cumsum(truth[descending_order(keys)], dtype=np.int64)
    tpr = np.empty(ks.size)
    fpr = np.empty(ks.size)
    for i, k in enumerate(grid):
        m = edges_at(k, keys.size, "ceil")
        tp = int(true_so_far[m - 1]) if m > 0 else 0
        tpr[i] = tp / positives
        fpr[i] = (m - tp) / negatives
    if fpr[-1] == 0.0:
        raise ValueError(
            "edge_auroc_mib needs a false positive at the last grid point to normalise; "
            f"got FPR = 0 at k = {grid[-1]!r}"
        )
    area = float(np.sum(np.diff(fpr) * (tpr[:-1] + tpr[1:]) / 2.0))
    return area / float(fpr[-1])


def edge_auroc_rank(
    scores: ArrayLike,
    truth_mask: ArrayLike,
    ranking: Ranking = "absolute",
) -> float:
    """Standard ROC AUC over all edges (Mann–Whitney statistic, ties count 1/2).

    ``AUROC = (R_+ - P(P+1)/2) / (P · N_neg)`` where ``R_+`` is the sum over true edges
    of their average ranks (``scipy.stats.rankdata(method="average")``, rank 1 = smallest
    key). Equals ``P(key_pos > key_neg) + P(key_pos = key_neg) / 2`` over all pairs.

    Args:
        scores: 1-D finite edge scores.
        truth_mask: boolean mask of ground-truth circuit edges.
        ranking: key = |score| (``"absolute"``, default) or score (``"signed"``).

    Raises:
        ValueError: if P = 0 or N_neg = 0, or on invalid inputs.
    """
    keys, truth, positives, negatives = _truth_and_keys(scores, truth_mask, ranking)
    from scipy.stats import rankdata  # imported here: scipy.stats is slow to import

    ranks = rankdata(keys, method="average")
    rank_sum = float(np.sum(ranks[truth]))
    u_statistic = rank_sum - positives * (positives + 1) / 2.0
    return u_statistic / (positives * negatives)


# --------------------------------------------------------------------------- leaderboard


@overload
def sigmoid(x: float) -> float: ...
@overload
def sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]: ...
def sigmoid(x: float | NDArray[np.float64]) -> float | NDArray[np.float64]:
    """Logistic function ``σ(x) = 1 / (1 + exp(-x))``, overflow-safe (``scipy.special.expit``)."""
    from scipy.special import expit

    if isinstance(x, np.ndarray):
        return np.asarray(expit(as_float_array(x, "x", allow_empty=True)), dtype=np.float64)
    return float(expit(check_finite_scalar(x, "x")))


def _cells(cells: Iterable[float]) -> NDArray[np.float64]:
    raw = cells if isinstance(cells, np.ndarray) else np.asarray(list(cells))
    return as_float_array(raw, "cells", ndim=1)


def leaderboard_score(cells: Iterable[float]) -> float:
    """MIB leaderboard "Score": mean over cells of the sigmoid of each cell value.

    ``Score = (1/n) Σ_j σ(x_j)`` where ``x_j`` is the raw CPR or the raw CMD of cell j
    (MIB App. D.6 applies the sigmoid "to each CPR or CMD value"; CMD is not negated or
    subtracted from 1, so on the CMD tab a lower Score is better).

    Raises:
        ValueError: on no cells or non-finite cells.
    """
    return float(np.mean(sigmoid(_cells(cells))))


def leaderboard_average(cells: Iterable[float]) -> float:
    """MIB leaderboard "Average": arithmetic mean of the raw cell values.

    Raises:
        ValueError: on no cells or non-finite cells.
    """
    return float(np.mean(_cells(cells)))
