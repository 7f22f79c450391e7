"""CAUSAL-BENCH metrics over sets of model components.

Components are string ids inside a declared *universe* C, an ordered sequence of
unique ids (the canonical order). A component set is a ``set``/``frozenset`` of ids
(any iterable of unique ids is accepted) or a boolean mask of shape ``(N,)`` over the
universe. A behaviour ``β`` is evaluated in batches: it receives a read-only boolean
matrix ``(B, N)`` whose row b marks the components active in coalition b and returns
the ``(B,)`` behaviour values.

Normative text: ``spec/v1/metrics/causal_bench.md`` (requirements MB-*). In short:

* ``F = β(S)/β(C)``, ``C = (β(C) − β(C∖S))/β(C)``, ``M = 1 − |S|/|C|``, no clamping,
  ``|β(C)| < min_denominator`` raises :class:`DegenerateBehaviourError`;
* ``J(∅, ∅) = 1``; stability is the mean pairwise Jaccard over K ≥ 2 runs;
* COS: greedy reduction removing the member whose removal leaves the largest F
  (the smallest marginal contribution ``F(S) − F(S∖{c})``), ties broken by canonical
  order, while ``F(S∖{c}) ≥ threshold``; ``COS(∅) = 1``;
* composite: weighted harmonic mean ``Σw / Σ(w/v)``, a zero value gives 0;
* the convergence test draws the null with selection sampling from one seeded
  ``numpy.random.default_rng(seed).random((N, m, B))`` array (MB-11).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from .checks import as_bool_array, check_choice, check_finite_scalar, check_int, describe

__all__ = [
    "COMPOSITE_KEYS",
    "DEFAULT_COS_THRESHOLD",
    "P_CONVENTIONS",
    "TIE_TOLERANCE",
    "Behaviour",
    "CausalOptimalityResult",
    "ComponentSet",
    "ConvergenceResult",
    "DegenerateBehaviourError",
    "PConvention",
    "causal_optimality",
    "completeness",
    "composite",
    "consensus_set",
    "convergence_test",
    "expected_null_jaccard",
    "faithfulness",
    "from_mask",
    "jaccard",
    "jaccard_matrix",
    "majority_set",
    "minimality",
    "ordered",
    "precision_recall_f1",
    "stability",
    "to_mask",
]

Behaviour = Callable[[NDArray[np.bool_]], NDArray[np.float64]]
"""Batched behaviour: boolean ``(B, N)`` coalitions → ``(B,)`` behaviour values."""

ComponentSet = Iterable[str] | NDArray[np.bool_]
"""A set of component ids, an iterable of unique ids, or a boolean mask over the universe."""

PConvention = Literal["plus_one", "paper"]
P_CONVENTIONS: tuple[str, ...] = ("plus_one", "paper")

COMPOSITE_KEYS: tuple[str, ...] = ("F", "C", "M", "S", "COS")
"""Metrics entering the default (equal-weight) composite, in report order."""

DEFAULT_COS_THRESHOLD = 0.85
"""Faithfulness that every COS removal must preserve (CAUSAL-BENCH §2.4)."""

TIE_TOLERANCE = 1e-12
"""A null statistic counts as ``≥ J_obs`` when it is ``≥ J_obs − TIE_TOLERANCE``.

Mean Jaccards take few distinct values, so exact ties with the observed value are
common; the tolerance keeps the count independent of summation-order rounding.
"""

_H = TypeVar("_H", bound=Hashable)

# Elements of uniform keys held at once by the null sampler (float64: 32 MiB).
_CHUNK_ELEMENTS = 1 << 22


class DegenerateBehaviourError(ValueError):
    """``β(C)``, the behaviour of the full model, is too close to zero to divide by.

    Attributes:
        value: the rejected ``β(C)``.
        min_denominator: the bound ``|β(C)|`` fell below.
    """

    def __init__(self, value: float, min_denominator: float) -> None:
        self.value = value
        self.min_denominator = min_denominator
        super().__init__(
            "beta(C), the full-model behaviour used as denominator, must satisfy "
            f"|beta(C)| >= min_denominator = {min_denominator!r}; got beta(C) = {value!r}"
        )


# --------------------------------------------------------------------------- sets and masks


def _universe_index(universe: Sequence[str]) -> dict[str, int]:
    """Map each id to its canonical position, checking ids are unique strings."""
    if isinstance(universe, (str, bytes)) or not isinstance(universe, Sequence):
        raise ValueError(f"universe must be a sequence of component ids (str); got {describe(universe)}")
    if len(universe) == 0:
        raise ValueError("universe must contain at least one component id; got an empty sequence")
    index: dict[str, int] = {}
    for position, component in enumerate(universe):
        if not isinstance(component, str):
            raise ValueError(
                f"universe entries must be str; got {describe(component)} at position {position}"
            )
        if component in index:
            raise ValueError(
                f"universe ids must be unique; got {component!r} at positions "
                f"{index[component]} and {position}"
            )
        index[component] = position
    return index


def _as_frozenset(value: Any, name: str) -> frozenset[Any]:
    """A set of hashable ids; iterables are accepted when they hold no duplicates."""
    if isinstance(value, AbstractSet):
        return frozenset(value)
    if isinstance(value, (str, bytes, np.ndarray)) or not isinstance(value, Iterable):
        raise ValueError(f"{name} must be a set (or an iterable of unique ids); got {describe(value)}")
    seen: set[Any] = set()
    for item in value:
        if item in seen:
            raise ValueError(f"{name} must not repeat an id; got {item!r} more than once")
        seen.add(item)
    return frozenset(seen)


def _as_mask(value: Any, universe: Sequence[str], index: Mapping[str, int], name: str) -> NDArray[np.bool_]:
    """A fresh boolean mask over the universe from a mask or a set of ids."""
    n = len(universe)
    if isinstance(value, np.ndarray):
        return as_bool_array(value, name, shape=(n,)).copy()
    members = _as_frozenset(value, name)
    unknown = sorted(repr(c) for c in members if not isinstance(c, str) or c not in index)
    if unknown:
        shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ValueError(
            f"{name} must contain only ids from the universe; got {len(unknown)} unknown id(s): {shown}"
        )
    mask = np.zeros(n, dtype=np.bool_)
    mask[[index[c] for c in members]] = True
    return mask


def to_mask(components: ComponentSet, universe: Sequence[str]) -> NDArray[np.bool_]:
    """Boolean mask of shape ``(N,)`` over ``universe`` marking ``components``.

    Raises:
        ValueError: on ids outside the universe, duplicated ids, or a mask of the wrong shape.

    Example:
        >>> to_mask({"b"}, ["a", "b", "c"]).tolist()
        [False, True, False]
    """
    index = _universe_index(universe)
    return _as_mask(components, universe, index, "components")


def from_mask(mask: NDArray[np.bool_], universe: Sequence[str]) -> frozenset[str]:
    """The set of ids marked by a boolean mask over ``universe``."""
    _universe_index(universe)
    array = as_bool_array(mask, "mask", shape=(len(universe),))
    return frozenset(universe[i] for i in np.flatnonzero(array).tolist())


def ordered(components: ComponentSet, universe: Sequence[str]) -> tuple[str, ...]:
    """The ids of ``components`` in canonical (universe) order, e.g. for a report list.

    Example:
        >>> ordered({"c", "a"}, ["a", "b", "c"])
        ('a', 'c')
    """
    mask = to_mask(components, universe)
    return tuple(universe[i] for i in np.flatnonzero(mask).tolist())


# --------------------------------------------------------------------------- behaviour calls


def _evaluate(beta: Behaviour, coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Call ``beta`` on a read-only batch and check it returned ``(B,)`` finite floats."""
    coalitions.setflags(write=False)
    raw = np.asarray(beta(coalitions))
    expected = (coalitions.shape[0],)
    if (
        raw.shape != expected
        or raw.dtype == np.bool_
        or not (np.issubdtype(raw.dtype, np.floating) or np.issubdtype(raw.dtype, np.integer))
    ):
        raise ValueError(
            f"beta must return real values of shape {expected} for coalitions of shape "
            f"{coalitions.shape}; got {describe(raw)}"
        )
    values = raw.astype(np.float64)
    if not np.isfinite(values).all():
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"beta must return finite values; got {values[bad]!r} for coalition {bad}")
    return values


def _full_behaviour(value: float, min_denominator: float) -> float:
    if not abs(value) >= min_denominator:
        raise DegenerateBehaviourError(value, min_denominator)
    return value


def _check_min_denominator(min_denominator: float) -> float:
    result = check_finite_scalar(min_denominator, "min_denominator")
    if result <= 0.0:
        raise ValueError(f"min_denominator must be > 0; got {result!r}")
    return result


# --------------------------------------------------------------------------- F, C, M


def faithfulness(
    beta: Behaviour,
    S: ComponentSet,
    universe: Sequence[str],
    *,
    min_denominator: float = 1e-6,
) -> float:
    """Faithfulness ``F = β(S) / β(C)``: behaviour kept when only S is active.

    No clamping: F may exceed 1 or be negative when β is noisy.

    Args:
        beta: batched behaviour over the universe.
        S: identified components.
        universe: all components in canonical order.
        min_denominator: smallest accepted ``|β(C)|``.

    Raises:
        DegenerateBehaviourError: if ``|β(C)| < min_denominator``.
        ValueError: on malformed sets or behaviour output.
    """
    index = _universe_index(universe)
    floor = _check_min_denominator(min_denominator)
    mask = _as_mask(S, universe, index, "S")
    values = _evaluate(beta, np.stack([mask, np.ones_like(mask)]))
    return float(values[0] / _full_behaviour(float(values[1]), floor))


def completeness(
    beta: Behaviour,
    S: ComponentSet,
    universe: Sequence[str],
    *,
    min_denominator: float = 1e-6,
) -> float:
    """Completeness ``C = (β(C) − β(C∖S)) / β(C)``: behaviour destroyed by ablating S.

    Raises:
        DegenerateBehaviourError: if ``|β(C)| < min_denominator``.
        ValueError: on malformed sets or behaviour output.
    """
    index = _universe_index(universe)
    floor = _check_min_denominator(min_denominator)
    mask = _as_mask(S, universe, index, "S")
    values = _evaluate(beta, np.stack([np.ones_like(mask), ~mask]))
    full = _full_behaviour(float(values[0]), floor)
    return float((full - values[1]) / full)


def minimality(S: ComponentSet, universe: Sequence[str]) -> float:
    """Minimality ``M = 1 − |S| / |C|``.

    Example:
        >>> minimality({"a"}, ["a", "b", "c", "d"])
        0.75
    """
    index = _universe_index(universe)
    mask = _as_mask(S, universe, index, "S")
    # (N − |S|)/N rounds once, so e.g. 16 of 20 gives exactly 0.2.
    return (len(universe) - int(mask.sum())) / len(universe)


# --------------------------------------------------------------------------- Jaccard family


def _jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    union = len(a | b)
    return 1.0 if union == 0 else len(a & b) / union


def jaccard(a: Iterable[_H], b: Iterable[_H]) -> float:
    """Jaccard similarity ``|a ∩ b| / |a ∪ b|``, with ``J(∅, ∅) = 1``.

    Example:
        >>> jaccard({1, 2}, {2, 3})
        0.3333333333333333
    """
    return _jaccard(_as_frozenset(a, "a"), _as_frozenset(b, "b"))


def _as_set_list(sets: Any, name: str, *, minimum: int) -> list[frozenset[Any]]:
    if isinstance(sets, (str, bytes, AbstractSet, np.ndarray)) or not isinstance(sets, Iterable):
        raise ValueError(f"{name} must be a sequence of sets; got {describe(sets)}")
    result = [_as_frozenset(s, f"{name}[{i}]") for i, s in enumerate(sets)]
    if len(result) < minimum:
        raise ValueError(f"{name} must hold at least {minimum} set(s); got {len(result)}")
    return result


def stability(sets: Sequence[Iterable[_H]]) -> float:
    """Stability: mean pairwise Jaccard over K ≥ 2 runs.

    ``S = C(K, 2)⁻¹ · Σ_{i<j} J(S⁽ⁱ⁾, S⁽ʲ⁾)``, summed in lexicographic pair order.

    Raises:
        ValueError: if fewer than two runs are given.
    """
    runs = _as_set_list(sets, "sets", minimum=2)
    total = 0.0
    pairs = 0
    for a, b in itertools.combinations(runs, 2):
        total += _jaccard(a, b)
        pairs += 1
    return total / pairs


def jaccard_matrix(sets: Sequence[Iterable[_H]]) -> NDArray[np.float64]:
    """Symmetric ``(m, m)`` matrix of pairwise Jaccard similarities (diagonal 1)."""
    items = _as_set_list(sets, "sets", minimum=1)
    m = len(items)
    matrix = np.ones((m, m), dtype=np.float64)
    for i, j in itertools.combinations(range(m), 2):
        matrix[i, j] = matrix[j, i] = _jaccard(items[i], items[j])
    return matrix


def consensus_set(sets: Sequence[Iterable[_H]]) -> frozenset[_H]:
    """Components identified by every method: ``S_∩ = ⋂ᵢ Sᵢ``."""
    items = _as_set_list(sets, "sets", minimum=1)
    return frozenset.intersection(*items)


def majority_set(sets: Sequence[Iterable[_H]]) -> frozenset[_H]:
    """Components identified by strictly more than half of the m methods (``2·count > m``)."""
    items = _as_set_list(sets, "sets", minimum=1)
    counts: dict[Any, int] = {}
    for s in items:
        for component in s:
            counts[component] = counts.get(component, 0) + 1
    return frozenset(c for c, n in counts.items() if 2 * n > len(items))


def precision_recall_f1(identified: Iterable[_H], truth: Iterable[_H]) -> tuple[float, float, float]:
    """Precision, recall and F1 of an identified set against a ground-truth set.

    ``P = TP/|S|``, ``R = TP/|S*|``, ``F1 = 2·TP/(|S| + |S*|)``. Zero divisions: both
    sets empty → ``(1, 1, 1)``; otherwise an empty denominator gives 0 for that entry.

    Example:
        >>> precision_recall_f1({"a", "b", "x"}, {"a", "b"})
        (0.6666666666666666, 1.0, 0.8)
    """
    s = _as_frozenset(identified, "identified")
    t = _as_frozenset(truth, "truth")
    if not s and not t:
        return 1.0, 1.0, 1.0
    tp = len(s & t)
    precision = tp / len(s) if s else 0.0
    recall = tp / len(t) if t else 0.0
    return precision, recall, 2 * tp / (len(s) + len(t))


# --------------------------------------------------------------------------- COS


@dataclass(frozen=True)
class CausalOptimalityResult:
    """Outcome of the greedy COS reduction.

    Attributes:
        score: ``COS = |S_reduced| / |S|`` (1.0 for an empty S).
        reduced: the set left by the reduction.
        removed: removed ids, in removal order.
        initial_faithfulness: ``F(S)`` of the starting set (not required to reach the threshold).
        final_faithfulness: ``F(S_reduced)``.
        threshold: the faithfulness every removal had to preserve.
    """

    score: float
    reduced: frozenset[str]
    removed: tuple[str, ...]
    initial_faithfulness: float
    final_faithfulness: float
    threshold: float


def causal_optimality(
    beta: Behaviour,
    S: ComponentSet,
    universe: Sequence[str],
    *,
    threshold: float = DEFAULT_COS_THRESHOLD,
    min_denominator: float = 1e-6,
) -> CausalOptimalityResult:
    """Causal optimality score by greedy subset reduction.

    Starting from ``R = S``, each step computes ``F(R∖{c})`` for every member c and picks
    the c with the smallest marginal contribution ``F(R) − F(R∖{c})``, i.e. the largest
    ``F(R∖{c})``, ties broken by canonical order (earliest first). It is removed if
    ``F(R∖{c}) ≥ threshold``; otherwise the reduction stops (no other member could pass).
    The starting set need not reach the threshold. ``COS = |R| / |S|``; ``COS(∅) = 1``.

    Args:
        beta: batched behaviour over the universe.
        S: identified components.
        universe: all components in canonical order.
        threshold: faithfulness each removal must preserve.
        min_denominator: smallest accepted ``|β(C)|``.

    Raises:
        DegenerateBehaviourError: if ``|β(C)| < min_denominator``.
        ValueError: on malformed input.
    """
    index = _universe_index(universe)
    floor = _check_min_denominator(min_denominator)
    limit = check_finite_scalar(threshold, "threshold")
    current = _as_mask(S, universe, index, "S")
    values = _evaluate(beta, np.stack([current, np.ones_like(current)]))
    full = _full_behaviour(float(values[1]), floor)
    initial = float(values[0] / full)
    start_size = int(current.sum())
    final = initial
    removed: list[str] = []
    while current.any():
        members = np.flatnonzero(current)
        candidates = np.repeat(current[None, :], members.size, axis=0)
        candidates[np.arange(members.size), members] = False
        kept = _evaluate(beta, candidates) / full
        best = int(np.argmax(kept))  # first maximum: canonical-order tie-break
        if not kept[best] >= limit:
            break
        chosen = int(members[best])
        current[chosen] = False
        removed.append(universe[chosen])
        final = float(kept[best])
    score = 1.0 if start_size == 0 else int(current.sum()) / start_size
    return CausalOptimalityResult(
        score=score,
        reduced=frozenset(universe[i] for i in np.flatnonzero(current).tolist()),
        removed=tuple(removed),
        initial_faithfulness=initial,
        final_faithfulness=final,
        threshold=limit,
    )


# --------------------------------------------------------------------------- composite


def composite(values: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """Weighted harmonic mean ``Σₖ wₖ / Σₖ (wₖ / vₖ)`` (CAUSAL-BENCH Eq. 2).

    Args:
        values: metric values, each finite and ≥ 0 (values above 1 are allowed).
        weights: strictly positive finite weights over exactly the keys of ``values``
            (they need not sum to 1). None means equal weights, in which case
            ``values`` must hold exactly :data:`COMPOSITE_KEYS`.

    Returns:
        The composite; 0.0 if any value is 0 (the limit of the harmonic mean).

    Raises:
        ValueError: on mismatched keys, negative or non-finite values, or weights ≤ 0.

    Example:
        >>> composite({"a": 0.5, "b": 1.0}, {"a": 1.0, "b": 1.0})
        0.6666666666666666
    """
    if not isinstance(values, Mapping) or not values:
        raise ValueError(
            f"values must be a non-empty mapping of metric name to value; got {describe(values)}"
        )
    if weights is None:
        if set(values) != set(COMPOSITE_KEYS):
            raise ValueError(
                f"values must hold exactly the keys {COMPOSITE_KEYS} when weights is None; "
                f"got {sorted(values)}"
            )
        weights = dict.fromkeys(values, 1.0)
    elif not isinstance(weights, Mapping):
        raise ValueError(
            f"weights must be a mapping of metric name to weight, or None; got {describe(weights)}"
        )
    elif set(weights) != set(values):
        raise ValueError(
            f"weights must have exactly the keys of values {sorted(values)}; got {sorted(weights)}"
        )
    total_weight = 0.0
    total_ratio = 0.0
    has_zero = False
    for key in sorted(values):
        v = check_finite_scalar(values[key], f"values[{key!r}]")
        w = check_finite_scalar(weights[key], f"weights[{key!r}]")
        if v < 0.0:
            raise ValueError(f"values[{key!r}] must be >= 0; got {v!r}")
        if w <= 0.0:
            raise ValueError(f"weights[{key!r}] must be > 0; got {w!r}")
        total_weight += w
        if v == 0.0:
            has_zero = True
        else:
            total_ratio += w / v
    if has_zero:
        return 0.0
    return total_weight / total_ratio


# --------------------------------------------------------------------------- convergence test


@dataclass(frozen=True, eq=False)
class ConvergenceResult:
    """Cross-method convergence permutation test (CAUSAL-BENCH §2.5, Eq. 3).

    Attributes:
        j_obs: observed mean pairwise Jaccard over the m sets.
        null_mean: mean of the null statistics.
        null_std: standard deviation of the null statistics with ``ddof``.
        z: ``(j_obs − null_mean) / null_std``; None when every null draw is equal.
        p: one-sided p-value under ``p_convention``.
        n_exceed: number of null draws ``≥ j_obs − TIE_TOLERANCE``.
        n_permutations: number of null draws B.
        seed: the seed of the draw.
        ddof: delta degrees of freedom of ``null_std``.
        p_convention: ``"plus_one"`` or ``"paper"``.
        universe_size: N.
        set_sizes: the m set sizes, in input order.
        null: the B null statistics, in draw order.
    """

    j_obs: float
    null_mean: float
    null_std: float
    z: float | None
    p: float
    n_exceed: int
    n_permutations: int
    seed: int
    ddof: int
    p_convention: str
    universe_size: int
    set_sizes: tuple[int, ...]
    null: NDArray[np.float64]

    def as_dict(self) -> dict[str, Any]:
        """The report fields (``claims.convergence``); ``z`` is omitted when undefined (MB-12)."""
        fields: dict[str, Any] = {
            "j_obs": self.j_obs,
            "null_mean": self.null_mean,
            "null_std": self.null_std,
            "z": self.z,
            "p": self.p,
            "n_permutations": self.n_permutations,
            "seed": self.seed,
        }
        if self.z is None:
            del fields["z"]
        return fields


def _mean_pairwise_jaccard(intersections: NDArray[np.int64], sizes: NDArray[np.int64]) -> NDArray[np.float64]:
    """Mean Jaccard over pairs from ``(P, B)`` intersection counts, pairs in lexicographic order.

    Summed pair by pair, then divided by P, so observed and null statistics share the
    exact same floating-point operations.
    """
    pairs = list(itertools.combinations(range(sizes.size), 2))
    total = np.zeros(intersections.shape[1], dtype=np.float64)
    for p, (a, b) in enumerate(pairs):
        inter = intersections[p]
        union = sizes[a] + sizes[b] - inter
        similarity = np.ones(inter.shape, dtype=np.float64)
        np.divide(inter, union, out=similarity, where=union > 0)
        total += similarity
    return total / len(pairs)


def _null_intersections(
    sizes: NDArray[np.int64], universe_size: int, n_permutations: int, seed: int
) -> NDArray[np.int64]:
    """``(P, B)`` intersection counts of the null draws (MB-11).

    Keys ``U = default_rng(seed).random((N, m, B))`` are generated in slabs of rows j,
    which reproduces the single call exactly because each float64 consumes one 64-bit
    output of the bit generator. Selection sampling: component j joins method i's set
    in draw b iff ``(N − j)·U[j, i, b] < r``, where r is the number still to select.
    """
    m = sizes.size
    N = universe_size
    B = n_permutations
    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations(range(m), 2))
    intersections = np.zeros((len(pairs), B), dtype=np.int64)
    remaining = np.repeat(sizes.astype(np.float64)[:, None], B, axis=1)
    scaled = np.empty((m, B), dtype=np.float64)
    rows = max(1, min(N, _CHUNK_ELEMENTS // (m * B)))
    # The narrowest exact accumulator for a slab's counts (at most `rows` per entry).
    slab_sum = np.uint16 if rows <= np.iinfo(np.uint16).max else np.uint32
    for start in range(0, N, rows):
        keys = rng.random((min(rows, N - start), m, B))
        chosen = np.empty(keys.shape, dtype=np.bool_)
        for r in range(keys.shape[0]):
            np.multiply(keys[r], N - (start + r), out=scaled)
            np.less(scaled, remaining, out=chosen[r])
            remaining -= chosen[r]
        counts = chosen.view(np.uint8)
        for p, (a, b) in enumerate(pairs):
            intersections[p] += np.add.reduce(counts[:, a, :] & counts[:, b, :], axis=0, dtype=slab_sum)
    if remaining.any():
        raise RuntimeError("selection sampling did not select the requested set sizes")
    return intersections


def convergence_test(
    sets: Sequence[Iterable[_H]],
    universe_size: int,
    *,
    n_permutations: int = 1000,
    seed: int,
    p_convention: PConvention = "plus_one",
    ddof: int = 0,
) -> ConvergenceResult:
    """Permutation test of cross-method agreement (CAUSAL-BENCH §2.5, Eq. 3).

    ``J_obs`` is the mean pairwise Jaccard of the m sets. Each of the B null draws gives
    every method a uniformly random subset of its own size from the N components and
    takes the same statistic (draw algorithm: MB-11). ``z = (J_obs − μ) / σ`` with
    ``σ = std(null, ddof)``; ``p = (1 + n) / (B + 1)`` (``"plus_one"``, default, never 0)
    or ``n / B`` (``"paper"``), where n counts null draws ``≥ J_obs − TIE_TOLERANCE``.

    Args:
        sets: the m ≥ 2 methods' component sets.
        universe_size: N, the number of components in the universe.
        n_permutations: B ≥ 1 (≥ 2 when ``ddof = 1``).
        seed: non-negative integer seed of ``numpy.random.default_rng``.
        p_convention: ``"plus_one"`` or ``"paper"``.
        ddof: 0 or 1, delta degrees of freedom of the null standard deviation.

    Returns:
        The statistics with the null array; ``z`` is None when every null draw is equal.

    Raises:
        ValueError: on fewer than two sets, sets that cannot fit in N components, or
            invalid settings.
    """
    items = _as_set_list(sets, "sets", minimum=2)
    N = check_int(universe_size, "universe_size", minimum=1)
    B = check_int(n_permutations, "n_permutations", minimum=1)
    dof = check_int(ddof, "ddof", minimum=0, maximum=1)
    if dof >= B:
        raise ValueError(f"n_permutations must be > ddof = {dof}; got {B}")
    seed_value = check_int(seed, "seed", minimum=0)
    convention = check_choice(p_convention, "p_convention", P_CONVENTIONS)
    union = frozenset.union(*items)
    if len(union) > N:
        raise ValueError(
            f"universe_size must be at least the size of the union of the sets ({len(union)}); got {N}"
        )
    sizes = np.array([len(s) for s in items], dtype=np.int64)
    observed_counts = np.array(
        [[len(items[a] & items[b])] for a, b in itertools.combinations(range(len(items)), 2)],
        dtype=np.int64,
    )
    j_obs = float(_mean_pairwise_jaccard(observed_counts, sizes)[0])
    null = _mean_pairwise_jaccard(_null_intersections(sizes, N, B, seed_value), sizes)
    null_mean = float(np.mean(null))
    null_std = float(np.std(null, ddof=dof))
    degenerate = bool(null.min() == null.max())
    z = None if degenerate else (j_obs - null_mean) / null_std
    n_exceed = int(np.count_nonzero(null >= j_obs - TIE_TOLERANCE))
    p = (1 + n_exceed) / (B + 1) if convention == "plus_one" else n_exceed / B
    return ConvergenceResult(
        j_obs=j_obs,
        null_mean=null_mean,
        null_std=null_std,
        z=z,
        p=p,
        n_exceed=n_exceed,
        n_permutations=B,
        seed=seed_value,
        ddof=dof,
        p_convention=convention,
        universe_size=N,
        set_sizes=tuple(int(s) for s in sizes),
        null=null,
    )


def expected_null_jaccard(set_sizes: Sequence[int], universe_size: int) -> float:
    """Exact expectation of the convergence null statistic.

    For independent uniform subsets of sizes a and b of N components, ``K = |A ∩ B|`` is
    hypergeometric, so ``E[J] = Σₖ C(a,k)·C(N−a,b−k)/C(N,b) · k/(a+b−k)`` (with
    ``J = 1`` when ``a = b = 0``); the null mean is the average of ``E[J]`` over pairs.
    Useful to check a reported ``null_mean`` without the random draw.

    Raises:
        ValueError: on fewer than two sizes or sizes outside ``[0, N]``.
    """
    N = check_int(universe_size, "universe_size", minimum=1)
    if isinstance(set_sizes, (str, bytes)) or not isinstance(set_sizes, Sequence) or len(set_sizes) < 2:
        raise ValueError(f"set_sizes must be a sequence of at least two sizes; got {describe(set_sizes)}")
    sizes = [check_int(s, f"set_sizes[{i}]", minimum=0, maximum=N) for i, s in enumerate(set_sizes)]
    total = 0.0
    pairs = 0
    for a, b in itertools.combinations(sizes, 2):
        pairs += 1
        if a + b == 0:
            total += 1.0
            continue
        ways = math.comb(N, b)
        expectation = 0.0
        for k in range(max(0, a + b - N), min(a, b) + 1):
            expectation += math.comb(a, k) * math.comb(N - a, b - k) / ways * k / (a + b - k)
        total += expectation
    return total / pairs
