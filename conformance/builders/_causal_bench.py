"""CAUSAL-BENCH material: the component universe, the true circuit, seed runs and the claims."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mibspec.reference_impl.behaviour.study import TABLE1_SETS

from ._common import Json

CB_UNIVERSE = [
    f"L{layer}.{part}" for layer in range(4) for part in [*(f"attn_head[{h}]" for h in range(4)), "mlp"]
]
CB_TRUTH = ["L0.attn_head[0]", "L0.attn_head[1]", "L1.mlp", "L2.attn_head[0]", "L3.mlp"]
# Table 1's sets: sizes 7, 10, 16, 4 with the true positives of the paper (see TABLE1_SETS)
CB_SETS: dict[str, list[str]] = {name: list(members) for name, members in TABLE1_SETS.items()}
# Stability (Table 1) the simulated seed runs are drawn to approximate.
CB_STABILITY = {
    "activation_patching": 0.417,
    "gradient_attribution": 0.533,
    "ablation_scanning": 0.505,
    "circuit_discovery": 1.0,
}


def canonical(components: Sequence[str], universe: Sequence[str] = CB_UNIVERSE) -> list[str]:
    chosen = set(components)
    return [c for c in universe if c in chosen]


def seed_runs(
    components: Sequence[str], target: float, seed: int, universe: Sequence[str], n_runs: int = 10
) -> list[list[str]]:
    """Perturbed copies of a set whose stability is within 0.01 of ``target`` (deterministic search)."""
    from mibspec.metrics.causal_bench import stability

    if target >= 1.0:
        return [canonical(components, universe) for _ in range(n_runs)]
    rng = np.random.default_rng(seed)
    members = set(components)
    for _ in range(10_000):
        flip = rng.uniform(0.05, 0.5)
        runs = []
        for _ in range(n_runs):
            run = [
                c for c in universe if (c in members) != (rng.random() < flip * (0.3 + 0.7 * (c in members)))
            ]
            runs.append(run or [components[0]])
        if abs(stability(runs) - target) < 0.01:
            return [canonical(r, universe) for r in runs]
    raise RuntimeError(f"no run set reaches stability {target}")


@dataclass(frozen=True)
class BehaviourValues:
    """F, C and the COS-reduced set of a method when the behaviour cannot be evaluated here."""

    faithfulness: float
    completeness: float
    reduced: list[str]


def causal_bench_claims(
    sets: dict[str, list[str]],
    universe: Sequence[str],
    *,
    planted: Json | None,
    given: dict[str, BehaviourValues] | None = None,
    truth: Sequence[str] | None,
    stability_targets: dict[str, float],
    settings: Json,
    seed: int,
) -> Json:
    """Claims computed with the reference metrics: F, C and COS from the planted model (or given)."""
    from mibspec.metrics import causal_bench as cb
    from mibspec.reference_impl.behaviour.planted import PlantedCircuitModel

    beta = None
    if planted is not None:
        beta = PlantedCircuitModel(
            planted["n_layers"],
            planted["n_heads"],
            seed=planted["seed"],
            signal=planted["signal"],
            component_noise_sd=planted["component_noise_sd"],
            measurement_noise_sd=planted["measurement_noise_sd"],
        )
    weights = settings["weights"]
    methods = []
    for index, (name, components) in enumerate(sets.items()):
        runs = seed_runs(components, stability_targets[name], seed + index, universe)
        if beta is not None:
            cos = cb.causal_optimality(beta, components, universe, threshold=settings["cos_threshold"])
            f = cb.faithfulness(beta, components, universe)
            c = cb.completeness(beta, components, universe)
            reduced, cos_score = canonical(cos.reduced, universe), cos.score
        else:
            assert given is not None
            f, c, reduced = given[name].faithfulness, given[name].completeness, given[name].reduced
            cos_score = len(reduced) / len(components)
        values = {
            "F": f,
            "C": c,
            "M": cb.minimality(components, universe),
            "S": cb.stability(runs),
            "COS": cos_score,
        }
        metrics: Json = {**values, "composite": cb.composite(values, weights)}
        if truth is not None:
            precision, recall, f1 = cb.precision_recall_f1(components, truth)
            metrics |= {"precision": precision, "recall": recall, "f1": f1}
        methods.append(
            {
                "name": name,
                "components": canonical(components, universe),
                "runs": [{"seed": 100 * index + i, "components": run} for i, run in enumerate(runs)],
                "reduced": reduced,
                "metrics": metrics,
            }
        )
    groups = list(sets.values())
    test = cb.convergence_test(
        groups,
        len(universe),
        n_permutations=settings["n_permutations"],
        seed=seed,
        p_convention=settings.get("p_convention", "plus_one"),
        ddof=settings.get("z_ddof", 0),
    )
    return {
        "methods": methods,
        "convergence": test.as_dict(),
        "consensus": canonical(cb.consensus_set(groups), universe),
        "majority": canonical(cb.majority_set(groups), universe),
        "jaccard": {"methods": list(sets), "matrix": cb.jaccard_matrix(groups).tolist()},
    }
