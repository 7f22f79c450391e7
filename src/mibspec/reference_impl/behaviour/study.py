"""A CAUSAL-BENCH study: the numbers of the paper's Tables 1–3 computed from declared inputs.

Shared by the producer (``mibspec score causal-bench``, which first runs the localization
procedures) and the recompute stage (which re-runs them and recomputes every claim from
the declared sets). Everything here is numpy; a transformer behaviour enters only through
a :class:`BehaviourSource`. Normative text: ``spec/v1/metrics/causal_bench.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mibspec.metrics import causal_bench as cb

from .localization import LocalizationOracle, Procedure, identify, procedure_scores, subsample
from .planted import PlantedCircuitModel, default_planted

__all__ = [
    "DEFAULT_WEIGHT_SCENARIOS",
    "PLANTED_BEHAVIOUR",
    "PLANTED_THRESHOLDS",
    "SCALING_CONFIGS",
    "TABLE1_SETS",
    "BehaviourSource",
    "PlantedSource",
    "ScaledRun",
    "SubsampleSource",
    "convergence_claims",
    "ids",
    "planted_model",
    "ranking",
    "scaled_sets",
    "scenario_composite",
    "set_metrics",
    "threshold_sets",
]

DEFAULT_WEIGHT_SCENARIOS: dict[str, dict[str, float]] = {
    "equal": {"F": 1.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0},
    "faithfulness_heavy": {"F": 3.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0},
    "minimality_heavy": {"F": 1.0, "C": 1.0, "M": 3.0, "S": 1.0, "COS": 1.0},
    "cos_heavy": {"F": 1.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 3.0},
    "faithfulness_completeness": {"F": 2.0, "C": 2.0, "M": 1.0, "S": 1.0, "COS": 1.0},
}
"""Table 3's five configurations. The paper names them without their weights; here the
emphasised metric(s) weigh 3 (2 each for faithfulness + completeness) and the others 1."""

SCALING_CONFIGS: tuple[tuple[int, int], ...] = ((2, 2), (4, 4), (6, 6), (8, 8), (10, 10), (12, 12))
"""Table 2's planted model sizes (L layers, H heads)."""

PLANTED_THRESHOLDS: tuple[float, ...] = (0.0, 0.02, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15)
"""Detection thresholds of the threshold-sensitivity study on the planted model (Figure 5)."""

PLANTED_BEHAVIOUR: dict[str, Any] = {
    "kind": "planted",
    "n_layers": 4,
    "n_heads": 4,
    "seed": 42,
    "signal": 1.0,
    "component_noise_sd": 0.1,
    "measurement_noise_sd": 0.02,
}
"""The paper's 4-layer, 4-head planted model (§2.2) with this implementation's seed."""

_TRUTH = ("L0.attn_head[0]", "L0.attn_head[1]", "L1.mlp", "L2.attn_head[0]", "L3.mlp")

TABLE1_SETS: dict[str, tuple[str, ...]] = {
    "activation_patching": (*_TRUTH, "L1.attn_head[2]", "L2.attn_head[1]"),
    "gradient_attribution": (
        *_TRUTH,
        "L0.attn_head[3]",
        "L0.mlp",
        "L1.attn_head[0]",
        "L3.attn_head[1]",
        "L3.attn_head[3]",
    ),
    "ablation_scanning": (
        *_TRUTH,
        "L0.attn_head[2]",
        "L0.mlp",
        "L1.attn_head[1]",
        "L1.attn_head[2]",
        "L1.attn_head[3]",
        "L2.attn_head[2]",
        "L2.attn_head[3]",
        "L2.mlp",
        "L3.attn_head[0]",
        "L3.attn_head[1]",
        "L3.attn_head[2]",
    ),
    "circuit_discovery": _TRUTH[:4],
}
"""Localization sets shaped like Table 1's on the planted 4 × 4 model: sizes 7, 10, 16 and 4
with the paper's true positives (every planted component; circuit discovery misses L3.mlp),
false positives chosen here so that they overlap as AP∩GA = 0, AP∩AS = 1 and GA∩AS = 2,
which gives the paper's mean Jaccard similarity of 0.393. Inputs for examples and
conformance cases, not results of a procedure."""


def ids(members: NDArray[np.bool_] | Iterable[str], universe: Sequence[str]) -> list[str]:
    """Component ids in canonical order, from a mask over ``universe`` or an iterable of ids."""
    if isinstance(members, np.ndarray):
        return [universe[i] for i in np.flatnonzero(members).tolist()]
    chosen = set(members)
    return [c for c in universe if c in chosen]


class BehaviourSource:
    """The behaviour of the main run (seed ``None``) and of each seed perturbation."""

    universe: tuple[str, ...]
    perturbation: dict[str, Any]

    def oracle(self, seed: int | None) -> LocalizationOracle:  # pragma: no cover - interface
        raise NotImplementedError


class PlantedSource(BehaviourSource):
    """``method_noise`` perturbations: every run sees the same planted behaviour."""

    def __init__(self, model: PlantedCircuitModel) -> None:
        self.model = model
        self.universe = model.universe
        self.perturbation = {"kind": "method_noise"}

    def oracle(self, seed: int | None) -> LocalizationOracle:
        return self.model


class SubsampleSource(BehaviourSource):
    """``subsample`` perturbations: run seed s evaluates β on :func:`subsample` (s, n, size).

    Args:
        behaviour: an object with ``universe``, ``n_examples`` and ``behaviour(examples)``
            (e.g. :class:`~mibspec.reference_impl.behaviour.transformer.TransformerBehaviour`).
        size: examples per perturbed run.
    """

    def __init__(self, behaviour: Any, size: int) -> None:
        self.source = behaviour
        self.universe = behaviour.universe
        self.size = int(size)
        self.perturbation = {"kind": "subsample", "subsample_size": self.size}
        self._oracles: dict[int | None, LocalizationOracle] = {}

    def oracle(self, seed: int | None) -> LocalizationOracle:
        if seed not in self._oracles:
            examples = None if seed is None else subsample(seed, self.source.n_examples, self.size)
            self._oracles[seed] = self.source.behaviour(examples)
        return self._oracles[seed]


def planted_model(
    behaviour: Mapping[str, Any], n_layers: int, n_heads: int, truth: Iterable[str] | None = None
) -> PlantedCircuitModel:
    """The planted model of a report's ``behaviour`` block at a given size."""
    return PlantedCircuitModel(
        n_layers,
        n_heads,
        seed=behaviour["seed"],
        signal=behaviour.get("signal", 1.0),
        component_noise_sd=behaviour.get("component_noise_sd", 0.1),
        measurement_noise_sd=behaviour.get("measurement_noise_sd", 0.02),
        planted=truth,
    )


def set_metrics(
    beta: cb.Behaviour,
    components: Iterable[str],
    runs: Sequence[Iterable[str]],
    universe: Sequence[str],
    *,
    truth: Iterable[str] | None,
    weights: Mapping[str, float],
    cos_threshold: float,
    min_denominator: float = 1e-6,
) -> tuple[dict[str, float], list[str]]:
    """A method's metrics (F, C, M, S, COS, composite, and P/R/F1 with a truth) and its COS-reduced set."""
    members = set(components)
    cos = cb.causal_optimality(
        beta, members, universe, threshold=cos_threshold, min_denominator=min_denominator
    )
    values = {
        "F": cb.faithfulness(beta, members, universe, min_denominator=min_denominator),
        "C": cb.completeness(beta, members, universe, min_denominator=min_denominator),
        "M": cb.minimality(members, universe),
        "S": cb.stability([set(run) for run in runs]),
        "COS": cos.score,
    }
    metrics: dict[str, float] = dict(values)
    if all(value >= 0.0 for value in values.values()):  # otherwise undefined and omitted (MB-9)
        metrics["composite"] = cb.composite(values, weights)
    if truth is not None:
        precision, recall, f1 = cb.precision_recall_f1(members, set(truth))
        metrics |= {"precision": precision, "recall": recall, "f1": f1}
    return metrics, ids(cos.reduced, universe)


def convergence_claims(
    sets: Sequence[Iterable[str]], universe_size: int, settings: Mapping[str, Any], seed: int
) -> cb.ConvergenceResult:
    """The permutation test of the declared settings (B, p convention, ddof) and seed."""
    return cb.convergence_test(
        [set(s) for s in sets],
        universe_size,
        n_permutations=settings["n_permutations"],
        seed=seed,
        p_convention=settings.get("p_convention", "plus_one"),
        ddof=settings.get("z_ddof", 0),
    )


def ranking(composites: Mapping[str, float], order: Sequence[str]) -> list[str]:
    """Method names by composite, highest first; equal composites keep the order of ``order``."""
    position = {name: i for i, name in enumerate(order)}
    return sorted(order, key=lambda name: (-composites[name], position[name]))


@dataclass(frozen=True)
class ScaledRun:
    """Identified sets of every procedure on a planted model of one size."""

    n_layers: int
    n_heads: int
    universe: tuple[str, ...]
    truth: frozenset[str]
    sets: dict[str, list[str]]


def scaled_sets(
    behaviour: Mapping[str, Any], procedures: Mapping[str, Procedure], n_layers: int, n_heads: int
) -> ScaledRun:
    """Every procedure (with its own seed) on the planted model of size L × H with the default S*."""
    model = planted_model(behaviour, n_layers, n_heads)
    sets = {name: ids(identify(proc, model, proc.seed), model.universe) for name, proc in procedures.items()}
    return ScaledRun(n_layers, n_heads, model.universe, frozenset(default_planted(n_layers, n_heads)), sets)


def threshold_sets(
    procedure: Procedure,
    source: BehaviourSource,
    thresholds: Sequence[float],
    run_seeds: Sequence[int],
) -> tuple[list[list[str]], list[list[list[str]]]]:
    """Identified sets of a thresholded procedure at each threshold: the main set and the seed runs.

    The scores are computed once per seed and thresholded at every τ (``score > τ``).
    """
    universe = source.universe
    main = procedure_scores(procedure, source.oracle(None), procedure.seed)
    runs = [procedure_scores(procedure, source.oracle(seed), seed) for seed in run_seeds]
    sets = [ids(main > tau, universe) for tau in thresholds]
    run_sets = [[ids(scores > tau, universe) for scores in runs] for tau in thresholds]
    return sets, run_sets


def scenario_composite(metrics: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """The composite of ``metrics`` under ``weights``, or None when a weighted part is
    negative (the harmonic mean is undefined, MB-9)."""
    parts = {key: metrics[key] for key in weights}
    if any(value < 0.0 for value in parts.values()):
        return None
    return cb.composite(parts, weights)
