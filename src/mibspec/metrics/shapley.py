"""Shapley values of a batched cooperative game: exact enumeration and permutation sampling.

A game on n players is given as a value function over coalitions: a callable taking a
boolean matrix ``(B, n)`` (row b is a coalition, ``True`` = player present) and
returning the ``(B,)`` values, so that a model can score many coalitions in one
forward pass. Every estimator reports how many coalitions it evaluated.

Reproducibility: permutations are drawn from ``numpy.random.default_rng(seed)`` (PCG64
seeded through ``SeedSequence``) as ``argsort(rng.random((m, n)), axis=1, kind="stable")``;
trials use child seeds ``SeedSequence(seed).spawn(n_trials)``. No global RNG is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .checks import check_int, describe

__all__ = [
    "MAX_EXACT_PLAYERS",
    "ShapleyEstimate",
    "ShapleyTrials",
    "ValueFn",
    "coalition_matrix",
    "draw_permutations",
    "shapley_exact",
    "shapley_from_permutations",
    "shapley_permutation",
    "shapley_trials",
]

ValueFn = Callable[[NDArray[np.bool_]], ArrayLike]
"""Value function: boolean coalitions ``(B, n)`` -> values ``(B,)``."""

Seed = int | np.random.SeedSequence

MAX_EXACT_PLAYERS = 16
"""Largest n accepted by :func:`shapley_exact` (2¹⁶ = 65,536 coalitions)."""


# --------------------------------------------------------------------------- evaluation


def _chunks(n_rows: int, batch_size: int | None) -> Iterator[slice]:
    step = n_rows if batch_size is None else batch_size
    for start in range(0, n_rows, max(step, 1)):
        yield slice(start, min(start + step, n_rows))


def _check_batch_size(batch_size: int | None) -> int | None:
    return None if batch_size is None else check_int(batch_size, "batch_size", minimum=1)


def _evaluate(
    value_fn: ValueFn, coalitions: NDArray[np.bool_], batch_size: int | None
) -> NDArray[np.float64]:
    """Values of every row of ``coalitions``, calling ``value_fn`` on at most ``batch_size`` rows."""
    out = np.empty(coalitions.shape[0], dtype=np.float64)
    for rows in _chunks(coalitions.shape[0], batch_size):
        block = coalitions[rows]
        raw = np.asarray(value_fn(block))
        if raw.shape != (block.shape[0],):
            raise ValueError(
                f"value_fn must return shape ({block.shape[0]},) for {block.shape[0]} coalitions; "
                f"got {describe(raw)}"
            )
        if raw.dtype == np.bool_ or not (
            np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)
        ):
            raise ValueError(f"value_fn must return real numbers; got {describe(raw)}")
        values = raw.astype(np.float64)
        if not np.isfinite(values).all():
            raise ValueError("value_fn must return finite values; got NaN or infinity")
        out[rows] = values
    return out


# --------------------------------------------------------------------------- exact


def coalition_matrix(n: int) -> NDArray[np.bool_]:
    """All 2ⁿ coalitions: row c contains player i iff bit i of c is set (player 0 = LSB)."""
    players = check_int(n, "n", minimum=1, maximum=MAX_EXACT_PLAYERS)
    codes = np.arange(1 << players, dtype=np.int64)
    return ((codes[:, np.newaxis] >> np.arange(players)) & 1).astype(np.bool_)


def shapley_exact(value_fn: ValueFn, n: int, *, batch_size: int | None = None) -> NDArray[np.float64]:
    """Exact Shapley values by enumerating all 2ⁿ coalitions once.

    ``φ_i = Σ_{S ⊆ N∖{i}} |S|! (n-|S|-1)! / n! · (v(S ∪ {i}) - v(S))``, i.e. weight
    ``1 / (n · C(n-1, |S|))``. Each coalition is evaluated exactly once
    (2ⁿ evaluations, coalition order of :func:`coalition_matrix`); the marginal
    differences are formed before weighting.

    Args:
        value_fn: batched value function.
        n: number of players, 1 ≤ n ≤ :data:`MAX_EXACT_PLAYERS`.
        batch_size: at most this many coalitions per ``value_fn`` call (None: one call).

    Returns:
        float64 array of the n Shapley values.

    Raises:
        ValueError: on n outside [1, 16], a bad batch size or a bad value function output.
    """
    coalitions = coalition_matrix(n)
    values = _evaluate(value_fn, coalitions, _check_batch_size(batch_size))
    sizes = coalitions.sum(axis=1)
    codes = np.arange(coalitions.shape[0], dtype=np.int64)
    # weight of v(S ∪ {i}) - v(S) for |S| = s
    weights = np.array([1.0 / (n * math.comb(n - 1, s)) for s in range(n)])
    phi = np.empty(n, dtype=np.float64)
    for i in range(n):
        without = codes[~coalitions[:, i]]
        phi[i] = np.sum(weights[sizes[without]] * (values[without | (1 << i)] - values[without]))
    return phi


# --------------------------------------------------------------------------- sampling


# eq=False: the fields are arrays, whose == is elementwise
@dataclass(frozen=True, eq=False)
class ShapleyEstimate:
    """A Monte-Carlo permutation estimate of Shapley values.

    Attributes:
        values: estimated Shapley values, shape ``(n,)``.
        standard_error: per-player standard error of ``values``: the sample standard
            deviation (ddof = 1) of the independent units divided by √(number of units);
            a unit is one permutation, or one group of ``group`` consecutive rows.
        n_evaluations: coalitions passed to the value function.
        permutations: the permutations used, shape ``(P, n)``; row r lists the players
            in the order they join.
        paired: whether consecutive rows (2j, 2j+1) form antithetic pairs.
        group: rows per independent unit: 1 (plain), 2 (antithetic pairs) or 4 (rotated
            antithetic groups).
    """

    values: NDArray[np.float64]
    standard_error: NDArray[np.float64]
    n_evaluations: int
    permutations: NDArray[np.intp]
    paired: bool
    group: int = 1

    @property
    def sampler(self) -> str:
        """``"permutation"``, ``"antithetic_permutation"`` or ``"rotated_antithetic_permutation"``."""
        if self.group >= 4:
            return "rotated_antithetic_permutation"
        return "antithetic_permutation" if self.paired else "permutation"


def draw_permutations(
    n: int, n_permutations: int, seed: Seed, *, antithetic: bool = False, rotated: bool = False
) -> NDArray[np.intp]:
    """The permutations :func:`shapley_permutation` uses for ``(n, n_permutations, seed)``.

    ``rng = numpy.random.default_rng(seed)``; ``m`` rows are drawn as
    ``argsort(rng.random((m, n)), axis=1, kind="stable")``. Plain sampling draws
    ``m = n_permutations``. Antithetic sampling draws ``m = n_permutations / 2`` and
    interleaves each drawn permutation with its reverse: rows ``π_1, rev(π_1), π_2, …``.
    Rotated antithetic sampling (``rotated=True``, with ``antithetic``) draws
    ``m = n_permutations / 4`` and follows each drawn π with ``rev(π)``, ``rot(π)`` and
    ``rev(rot(π))``, where ``rot(π)[k] = π[(k + ⌊n/2⌋) mod n]`` (π rotated by half its
    length): each player then joins at four positions spread over the order, which
    stratifies the coalition sizes it is evaluated at.

    Raises:
        ValueError: on n < 1, fewer than 2 independent units (plain: 2 permutations;
            antithetic: 4, i.e. 2 pairs; rotated: 8, i.e. 2 groups), a count that is not a
            multiple of the group size, or ``rotated`` without ``antithetic``.
    """
    players = check_int(n, "n", minimum=1)
    if rotated and not antithetic:
        raise ValueError("rotated must come with antithetic=True; got antithetic=False")
    group = 4 if rotated else 2 if antithetic else 1
    count = check_int(n_permutations, "n_permutations", minimum=2 * group)
    if count % group:
        what = "even with antithetic=True" if group == 2 else "a multiple of 4 with rotated=True"
        raise ValueError(f"n_permutations must be {what}; got {count}")
    rng = np.random.default_rng(seed)
    base = np.argsort(rng.random((count // group, players)), axis=1, kind="stable")
    if group == 1:
        return base
    out = np.empty((count, players), dtype=base.dtype)
    out[0::group] = base
    out[1::group] = base[:, ::-1]
    if group == 4:
        turned = np.roll(base, -(players // 2), axis=1)
        out[2::4] = turned
        out[3::4] = turned[:, ::-1]
    return out


def _check_permutations(permutations: ArrayLike) -> NDArray[np.intp]:
    perms = np.asarray(permutations)
    if perms.ndim != 2 or perms.shape[1] < 1 or not np.issubdtype(perms.dtype, np.integer):
        raise ValueError(
            f"permutations must be a 2-D integer array (P, n) with n >= 1; got {describe(perms)}"
        )
    n = perms.shape[1]
    if not (np.sort(perms, axis=1) == np.arange(n)).all():
        bad = int(np.flatnonzero((np.sort(perms, axis=1) != np.arange(n)).any(axis=1))[0])
        raise ValueError(
            f"permutations row {bad} must be a permutation of 0..{n - 1}; got {perms[bad].tolist()}"
        )
    return perms.astype(np.intp)


def shapley_from_permutations(
    value_fn: ValueFn,
    permutations: ArrayLike,
    *,
    paired: bool = False,
    group: int | None = None,
    batch_size: int | None = None,
) -> ShapleyEstimate:
    """Permutation-sampling estimate from given permutations (e.g. to replay another tool's).

    For permutation π and position j, player ``π_j`` contributes
    ``v({π_0 … π_j}) - v({π_0 … π_{j-1}})``; the estimate is the mean contribution over
    the P permutations. Coalitions evaluated: the empty and the full coalition once
    each, plus the n - 1 inner prefixes of every permutation:
    ``n_evaluations = 2 + P · (n - 1)`` (repeated inner prefixes are not merged). Without
    a ``batch_size`` they all go to ``value_fn`` in a single call.

    Args:
        value_fn: batched value function.
        permutations: integer array ``(P, n)``; each row a permutation of ``0 … n-1``.
        paired: treat rows (2j, 2j+1) as one antithetic unit for the standard error.
        group: rows per independent unit (default 2 when ``paired``, else 1); 4 for the
            groups of rotated antithetic sampling.
        batch_size: at most this many coalitions per ``value_fn`` call (None: one call).

    Raises:
        ValueError: on malformed permutations, fewer than 2 independent units, or a bad
            value function output.
    """
    perms = _check_permutations(permutations)
    batch = _check_batch_size(batch_size)
    n_perms, n = perms.shape
    size = (2 if paired else 1) if group is None else check_int(group, "group", minimum=1)
    if paired and size < 2:
        raise ValueError(f"group must be >= 2 when paired; got {size}")
    units = n_perms // size
    if n_perms % size:
        what = "an even number of rows when paired" if size == 2 else f"a multiple of {size} rows (group)"
        raise ValueError(f"permutations must have {what}; got {n_perms}")
    if units < 2:
        raise ValueError(f"at least 2 independent units are needed for a standard error; got {units}")

    end_rows = np.stack([np.zeros(n, np.bool_), np.ones(n, np.bool_)])
    # prefix_values[r, j] = v(first j players of permutation r), j = 0 … n
    prefix_values = np.empty((n_perms, n + 1), dtype=np.float64)
    if n > 1:
        position = np.empty_like(perms)
        position[np.arange(n_perms)[:, np.newaxis], perms] = np.arange(n)
        inner = np.arange(1, n)
        # bounded memory: build the inner prefixes of a block of permutations at a time; the
        # empty and full coalitions ride with the first block (one value_fn call without a batch size)
        block = n_perms if batch is None else max(1, batch // (n - 1))
        for start in range(0, n_perms, block):
            rows = slice(start, min(start + block, n_perms))
            coalitions = (position[rows, np.newaxis, :] < inner[np.newaxis, :, np.newaxis]).reshape(-1, n)
            if start == 0:
                coalitions = np.concatenate([end_rows, coalitions])
            values = _evaluate(value_fn, coalitions, batch)
            if start == 0:
                ends, values = values[:2], values[2:]
            prefix_values[rows, 1:n] = values.reshape(-1, n - 1)
    else:
        ends = _evaluate(value_fn, end_rows, batch)
    prefix_values[:, 0] = ends[0]
    prefix_values[:, n] = ends[1]

    marginals = np.empty((n_perms, n), dtype=np.float64)
    marginals[np.arange(n_perms)[:, np.newaxis], perms] = np.diff(prefix_values, axis=1)
    unit_values = marginals.reshape(units, size, n).mean(axis=1) if size > 1 else marginals
    return ShapleyEstimate(
        values=unit_values.mean(axis=0),
        standard_error=unit_values.std(axis=0, ddof=1) / math.sqrt(units),
        n_evaluations=2 + n_perms * (n - 1),
        permutations=perms,
        paired=size > 1,
        group=size,
    )


def shapley_permutation(
    value_fn: ValueFn,
    n: int,
    *,
    n_permutations: int,
    seed: Seed,
    antithetic: bool = False,
    rotated: bool = False,
    batch_size: int | None = None,
) -> ShapleyEstimate:
    """Monte-Carlo permutation estimate of Shapley values.

    Draws permutations with :func:`draw_permutations` (``n_permutations`` counts every
    permutation evaluated, so antithetic sampling draws half as many and adds their
    reverses) and evaluates them with :func:`shapley_from_permutations`.

    Args:
        value_fn: batched value function.
        n: number of players.
        n_permutations: permutations evaluated (≥ 2; with ``antithetic`` even and ≥ 4).
        seed: seed of ``numpy.random.default_rng``.
        antithetic: pair each drawn permutation with its reverse.
        rotated: with ``antithetic``, also add the drawn permutation rotated by half its
            length and that rotation's reverse (groups of 4; a multiple of 4, ≥ 8).
        batch_size: at most this many coalitions per ``value_fn`` call.

    Raises:
        ValueError: see :func:`draw_permutations` and :func:`shapley_from_permutations`.
    """
    perms = draw_permutations(n, n_permutations, seed, antithetic=antithetic, rotated=rotated)
    group = 4 if rotated else 2 if antithetic else 1
    return shapley_from_permutations(value_fn, perms, group=group, batch_size=batch_size)


# eq=False: the fields are arrays, whose == is elementwise
@dataclass(frozen=True, eq=False)
class ShapleyTrials:
    """Average of independent permutation-sampling trials.

    Attributes:
        values: mean over trials of the trial estimates.
        standard_error: ``sqrt(Σ_t se_t²) / T``, the standard error of that mean.
        n_evaluations: total coalitions evaluated over all trials.
        trials: the individual trial estimates, in child-seed order.
    """

    values: NDArray[np.float64]
    standard_error: NDArray[np.float64]
    n_evaluations: int
    trials: tuple[ShapleyEstimate, ...]


def shapley_trials(
    value_fn: ValueFn,
    n: int,
    *,
    n_trials: int = 5,
    n_permutations: int,
    seed: Seed,
    antithetic: bool = False,
    rotated: bool = False,
    batch_size: int | None = None,
    on_trial: Callable[[], None] | None = None,
) -> ShapleyTrials:
    """Mean of ``n_trials`` independent permutation estimates (the paper averages 5).

    Trial t uses ``seed_t = numpy.random.SeedSequence(seed).spawn(n_trials)[t]`` in
    :func:`shapley_permutation` with ``n_permutations`` permutations each. ``seed`` may
    also be a ``SeedSequence`` (e.g. ``SeedSequence([seed, image_index])``); its children
    are spawned from a fresh copy, so the result does not depend on what was spawned
    from it before. ``on_trial`` is called after each trial (a progress or time-limit
    check between trials).

    Raises:
        ValueError: on n_trials < 1, a negative seed, or see :func:`shapley_permutation`.
    """
    trials_count = check_int(n_trials, "n_trials", minimum=1)
    if isinstance(seed, np.random.SeedSequence):
        root = np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    else:
        root = np.random.SeedSequence(check_int(seed, "seed", minimum=0))
    trials = []
    for t in range(trials_count):
        # root.spawn(trials_count)[t], made when trial t starts: a huge count allocates nothing
        child = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, t), pool_size=root.pool_size)
        trials.append(
            shapley_permutation(
                value_fn,
                n,
                n_permutations=n_permutations,
                seed=child,
                antithetic=antithetic,
                rotated=rotated,
                batch_size=batch_size,
            )
        )
        if on_trial is not None:
            on_trial()
    stacked = np.stack([trial.values for trial in trials])
    errors = np.stack([trial.standard_error for trial in trials])
    return ShapleyTrials(
        values=stacked.mean(axis=0),
        standard_error=np.sqrt(np.sum(errors**2, axis=0)) / trials_count,
        n_evaluations=sum(trial.n_evaluations for trial in trials),
        trials=tuple(trials),
    )
