"""Causal-variable-track metrics: IIA, IOI logit-difference MSE, layer/position aggregation.

Normative text: ``spec/v1/metrics/causal_variable.md`` (requirements MV-*).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, TypeVar, cast, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .checks import (
    as_bool_array,
    as_float_array,
    check_choice,
    check_finite_scalar,
    describe,
)

__all__ = [
    "IOI_PAPER_FIT",
    "Better",
    "CellKey",
    "IOIFit",
    "VariableAggregate",
    "aggregate_scores",
    "iia",
    "ioi_mse",
    "ioi_target",
]

Better = Literal["higher", "lower"]
Position = str | int
CellKey = tuple[Hashable, int, Position]
"""``(counterfactual_set, layer, position)`` key of one score cell."""

_BETTER: tuple[str, ...] = ("higher", "lower")
_K = TypeVar("_K")


# --------------------------------------------------------------------------- IIA


def iia(correct: ArrayLike, *, keep: ArrayLike | None = None) -> float:
    """Interchange intervention accuracy: the fraction of kept examples that are correct.

    ``IIA = Σ_i keep_i · correct_i / Σ_i keep_i``. ``correct_i`` is True when the
    intervened model produces the output the causal model predicts for base/counterfactual
    pair i. ``keep`` implements MIB's filter (the model must be right on the base input and
    on every counterfactual used); omitted, every example is kept.

    Args:
        correct: 1-D boolean array (integers 0/1 accepted).
        keep: optional 1-D boolean array of the same length.

    Raises:
        ValueError: if no example is kept (including an empty ``correct``), or on
            malformed input.
    """
    hits = as_bool_array(correct, "correct")
    if hits.ndim != 1:
        raise ValueError(f"correct must be a 1-D boolean array; got {describe(hits)}")
    if keep is not None:
        kept = as_bool_array(keep, "keep", shape=hits.shape)
        hits = hits[kept]
    if hits.size == 0:
        raise ValueError("iia needs at least one kept example; got 0")
    return float(np.count_nonzero(hits)) / hits.size


# --------------------------------------------------------------------------- IOI


@dataclass(frozen=True)
class IOIFit:
    """Linear model of the IOI logit difference ``logit(IO) - logit(S)``.

    ``target = bias + token_coeff · token_signal + position_coeff · position_signal``
    with signals +1 (subject token / position unchanged) or -1 (inverted).
    """

    bias: float
    token_coeff: float
    position_coeff: float


IOI_PAPER_FIT = IOIFit(bias=0.069, token_coeff=0.687, position_coeff=2.018)
"""MIB App. G.5.4 fit: ``0.069 + 2.018 · PositionSignal + 0.687 · TokenSignal``."""


def _signal(value: ArrayLike, name: str) -> NDArray[np.float64]:
    array = as_float_array(value, name, allow_empty=True)
    if not np.isin(array, (-1.0, 1.0)).all():
        raise ValueError(f"{name} must contain only -1 and +1; got other values")
    return array


@overload
def ioi_target(
    token_signal: int,
    position_signal: int,
    *,
    bias: float = ...,
    token_coeff: float = ...,
    position_coeff: float = ...,
) -> float: ...
@overload
def ioi_target(
    token_signal: ArrayLike,
    position_signal: ArrayLike,
    *,
    bias: float = ...,
    token_coeff: float = ...,
    position_coeff: float = ...,
) -> float | NDArray[np.float64]: ...
def ioi_target(
    token_signal: ArrayLike,
    position_signal: ArrayLike,
    *,
    bias: float = IOI_PAPER_FIT.bias,
    token_coeff: float = IOI_PAPER_FIT.token_coeff,
    position_coeff: float = IOI_PAPER_FIT.position_coeff,
) -> float | NDArray[np.float64]:
    """Causal-model prediction of the IOI logit difference ``logit(IO) - logit(S)``.

    ``target = bias + token_coeff · token_signal + position_coeff · position_signal``;
    defaults are :data:`IOI_PAPER_FIT` (0.069, 0.687, 2.018). Signals broadcast.

    Returns:
        A float for scalar signals, else a float64 array of the broadcast shape.

    Raises:
        ValueError: on signals other than ±1 or non-finite coefficients.
    """
    token = _signal(token_signal, "token_signal")
    position = _signal(position_signal, "position_signal")
    b = check_finite_scalar(bias, "bias")
    ct = check_finite_scalar(token_coeff, "token_coeff")
    cp = check_finite_scalar(position_coeff, "position_coeff")
    try:
        result = b + ct * token + cp * position
    except ValueError as error:
        raise ValueError(
            f"token_signal and position_signal must broadcast; got shapes {token.shape} and {position.shape}"
        ) from error
    return float(result) if result.ndim == 0 else result


def ioi_mse(logit_diff: ArrayLike, target: ArrayLike) -> float:
    """Mean squared error between observed and predicted IOI logit differences.

    ``MSE = (1/n) Σ_i (logit_diff_i - target_i)²``, where ``logit_diff_i`` is
    ``logit(IO) - logit(S)`` of the intervened model on example i. Lower is better.

    Args:
        logit_diff: 1-D observed logit differences.
        target: predictions of the same length, or a scalar applied to every example.

    Raises:
        ValueError: on empty, non-finite or mismatched inputs.
    """
    observed = as_float_array(logit_diff, "logit_diff", ndim=1)
    predicted = as_float_array(target, "target")
    if predicted.ndim != 0 and predicted.shape != observed.shape:
        raise ValueError(
            f"target must be a scalar or have the shape of logit_diff {observed.shape}; "
            f"got shape {predicted.shape}"
        )
    return float(np.mean((observed - predicted) ** 2))


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class VariableAggregate:
    """Scores of one method on one causal variable, aggregated over units.

    Attributes:
        better: ``"higher"`` (IIA) or ``"lower"`` (IOI MSE): which end is best.
        per_unit: ``(layer, position) -> mean over counterfactual sets``.
        per_layer: ``layer -> best per_unit value over positions in that layer``.
        best_position: ``layer -> position achieving per_layer`` (ties: smallest position).
        average: mean of ``per_layer`` over layers ("Average").
        best: best of ``per_layer`` over layers (MIB's "Highest"): the max for
            ``better="higher"``, the min for ``better="lower"``.
        best_layer: layer achieving ``best`` (ties: smallest layer).
    """

    better: Better
    per_unit: Mapping[tuple[int, Position], float]
    per_layer: Mapping[int, float]
    best_position: Mapping[int, Position]
    average: float
    best: float
    best_layer: int


def _check_key(key: object) -> tuple[Hashable, int, Position]:
    if not isinstance(key, tuple) or len(key) != 3:
        raise ValueError(
            f"scores keys must be (counterfactual_set, layer, position) tuples; got {describe(key)}"
        )
    cf_set, layer, position = key
    if isinstance(layer, (bool, np.bool_)) or not isinstance(layer, (int, np.integer)):
        raise ValueError(f"layer in scores key {key!r} must be an int; got {describe(layer)}")
    if isinstance(position, (bool, np.bool_)) or not isinstance(position, (str, int, np.integer)):
        raise ValueError(f"position in scores key {key!r} must be a str or an int; got {describe(position)}")
    if not isinstance(cf_set, Hashable):
        raise ValueError(f"counterfactual set in scores key {key!r} must be hashable")
    return cf_set, int(layer), position if isinstance(position, str) else int(position)


def _best(items: list[tuple[_K, float]], better: str) -> tuple[_K, float]:
    # items are sorted by key, so a strict comparison keeps the smallest key on ties
    best_key, best_value = items[0]
    for key, value in items[1:]:
        if (value > best_value) if better == "higher" else (value < best_value):
            best_key, best_value = key, value
    return best_key, best_value


def aggregate_scores(
    scores: Mapping[CellKey, float],
    *,
    better: Better = "higher",
) -> VariableAggregate:
    """Aggregate per-(counterfactual set, layer, position) scores as MIB reports them.

    1. ``unit(l, p) = mean_c score(c, l, p)`` over counterfactual sets c (unweighted);
    2. ``layer(l) = best_p unit(l, p)`` (max, or min when ``better="lower"``);
    3. ``average = mean_l layer(l)``; ``best = best_l layer(l)``.

    Every counterfactual set must cover exactly the same (layer, position) units.
    Positions of one call must be all str or all int (they are sorted for tie-breaks).

    Args:
        scores: mapping ``(counterfactual_set, layer, position) -> score`` (finite).
        better: ``"higher"`` for IIA, ``"lower"`` for IOI MSE.

    Raises:
        ValueError: on an empty mapping, malformed keys, non-finite scores, mixed
            position types, or a unit present for one counterfactual set and missing
            for another (the message names the unit and the set).
    """
    direction = check_choice(better, "better", _BETTER)
    if not scores:
        raise ValueError("scores must hold at least one (counterfactual_set, layer, position) cell; got none")
    by_set: dict[Hashable, dict[tuple[int, Position], float]] = {}
    for raw_key, raw_value in scores.items():
        cf_set, layer, position = _check_key(raw_key)
        value = check_finite_scalar(raw_value, f"scores[{raw_key!r}]")
        by_set.setdefault(cf_set, {})[(layer, position)] = value

    position_types = {type(position) for cells in by_set.values() for _, position in cells}
    if len(position_types) > 1:
        raise ValueError("positions in scores keys must be all str or all int; got a mix")

    sets = list(by_set)
    units = set().union(*(set(cells) for cells in by_set.values()))
    for cf_set in sets:
        missing = units - set(by_set[cf_set])
        if missing:
            layer, position = sorted(missing)[0]
            raise ValueError(
                f"unit (layer={layer}, position={position!r}) is missing for counterfactual "
                f"set {cf_set!r} but present for another set; every set must cover the same units"
            )

    ordered_units = sorted(units)
    per_unit = {
        unit: math.fsum(by_set[cf_set][unit] for cf_set in sets) / len(sets) for unit in ordered_units
    }
    per_layer: dict[int, float] = {}
    best_position: dict[int, Position] = {}
    for layer in sorted({layer for layer, _ in ordered_units}):
        candidates = [(pos, per_unit[(lay, pos)]) for lay, pos in ordered_units if lay == layer]
        position, value = _best(candidates, direction)
        best_position[layer] = position
        per_layer[layer] = value
    best_layer, best = _best(list(per_layer.items()), direction)
    return VariableAggregate(
        better=cast(Better, direction),
        per_unit=MappingProxyType(per_unit),
        per_layer=MappingProxyType(per_layer),
        best_position=MappingProxyType(best_position),
        average=math.fsum(per_layer.values()) / len(per_layer),
        best=best,
        best_layer=best_layer,
    )
