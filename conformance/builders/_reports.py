"""The consistent base report of each track; the report cases start from these and break one thing."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from mibspec.reference_impl.behaviour.study import PLANTED_BEHAVIOUR

from ._causal_bench import CB_SETS, CB_STABILITY, CB_TRUTH, CB_UNIVERSE, causal_bench_claims
from ._common import (
    GPT2_SMALL,
    GRID,
    INTERPBENCH,
    PROVENANCE,
    QWEN_05B,
    TINY_CNN,
    TINY_MODEL,
    Folder,
    Json,
    document,
    fresh,
)
from ._graphs import (
    F_ABSOLUTE,
    F_SIGNED,
    GPT2_UNIVERSE,
    INTERPBENCH_UNIVERSE,
    IOI_HEADS,
    TINY_UNIVERSE,
    CircuitData,
    Universe,
    circuit_curves,
    curve_values,
    edge_scores,
    planted_truth,
    roc_auc,
    trapezoid,
    write_circuit_document,
    write_ground_truth,
)
from ._inputs import (
    DOMINANT,
    N_IMAGES,
    REPORT_ROWS,
    das_featurizer,
    identity_featurizer,
    saliency_maps,
    saliency_scores,
    tiny_cnn_weights,
    write_dataset,
    write_shortcut_dataset,
)

# --------------------------------------------------------------------------- circuit track

EAP_IG: Json = {
    "name": "EAP-IG (inputs)",
    "version": "1.0",
    "description": "Edge attribution patching with integrated gradients on the edge inputs.",
    "hyperparameters": {"ig_steps": 5, "aggregation": "sum"},
    "citation": {
        "text": "Hanna, Pezzelle and Belinkov (2024). Have Faith in Faithfulness: Going Beyond "
        "Circuit Overlap When Finding Model Mechanisms.",
        "url": "https://arxiv.org/abs/2403.17806",
    },
}
M_FULL, M_EMPTY = 3.2471, -0.0893
INTERPBENCH_PATH = ("a0.h1", "a1.h3", "m2", "a3.h0", "a4.h2", "m5")


def circuit_setup(which: str) -> tuple[Universe, Json, NDArray[np.float32], str]:
    if which == "gpt2":
        return GPT2_UNIVERSE, GPT2_SMALL, edge_scores(GPT2_UNIVERSE, 1, IOI_HEADS), "GPT-2 small"
    if which == "interpbench":
        truth = planted_truth(INTERPBENCH_UNIVERSE, INTERPBENCH_PATH)
        scores = edge_scores(INTERPBENCH_UNIVERSE, 2, INTERPBENCH_PATH[:3], boost=truth)
        return INTERPBENCH_UNIVERSE, INTERPBENCH, scores, "InterpBench"
    return (
        TINY_UNIVERSE,
        TINY_MODEL,
        edge_scores(TINY_UNIVERSE, 3, ("a1.h2", "a2.h0", "m3")),
        "a 4-layer model",
    )


@fresh
def circuit_report(folder: Folder, which: str = "tiny", *, auroc: bool = False) -> Json:
    """A circuit-track report with its circuit document, dataset and sidecars written into ``folder``."""
    universe, model, scores, label = circuit_setup(which)
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    write_circuit_document(folder, data, model=model)
    write_dataset(folder, task="ioi")
    artifacts = [
        folder.artifact("circuit", "circuit", "circuit.json", "application/json", kind="circuit"),
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
    ]
    ranking = {"cpr": "signed", "cmd": "absolute"}
    curves = circuit_curves(data, {"signed": F_SIGNED, "absolute": F_ABSOLUTE})
    claims: Json = {
        "circuit": "circuit",
        "n_edges": universe.n_edges,
        "m_full": M_FULL,
        "m_empty": M_EMPTY,
        "curves": curves,
        "cpr": {"value": trapezoid(GRID, curve_values(curves[0]))},
        "cmd": {"value": trapezoid(GRID, [abs(1 - f) for f in curve_values(curves[1])])},
    }
    if auroc:
        truth = planted_truth(universe, INTERPBENCH_PATH)
        write_ground_truth(folder, universe, truth, name="truth.json", sidecar="truth.safetensors")
        artifacts.append(
            folder.artifact("truth", "ground_truth", "truth.json", "application/json", kind="circuit")
        )
        ranking["auroc"] = "absolute"
        claims["auroc"] = {
            "value": roc_auc(np.abs(scores.astype(np.float64)), truth),
            "convention": "rank",
            "ground_truth": "truth",
        }
    return document(
        "report",
        {
            "track": "circuit",
            "profile": "default",
            "title": f"EAP-IG circuits for IOI on {label}",
            "method": EAP_IG,
            "task": {
                "name": "ioi",
                "dataset": "dataset",
                "split": "test",
                "counterfactual_type": "abc",
                "n_examples": REPORT_ROWS["ioi"],
            },
            "model": model,
            "settings": {
                "ablation": "counterfactual",
                "granularity": "edge",
                "grid": list(GRID),
                "ranking": ranking,
                "edge_count_rounding": "floor",
                "metric": "logit_difference",
                "batch_size": 5,
                "padding_side": "right",
            },
            "claims": claims,
            "artifacts": artifacts,
            "provenance": PROVENANCE,
        },
    )


# --------------------------------------------------------------------------- causal-variable track


def aggregate(units: Sequence[Json], better: str) -> tuple[dict[str, float], float, float]:
    """per_layer (best position of the mean over counterfactual sets), average, best layer."""
    pick = max if better == "higher" else min
    layers: dict[int, list[float]] = {}
    for unit in units:
        scores = list(unit["scores"].values())
        layers.setdefault(unit["location"]["layer"], []).append(math.fsum(scores) / len(scores))
    per_layer = {str(layer): pick(values) for layer, values in sorted(layers.items())}
    return per_layer, math.fsum(per_layer.values()) / len(per_layer), pick(per_layer.values())


def dataset_and_causal_model(folder: Folder, task: str) -> list[Json]:
    """Write the task's counterfactual dataset and causal model; their artifact entries."""
    write_dataset(folder, task=task, causal_model="causal_model.json")
    return [
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
        folder.artifact(
            "causal-model", "causal_model", "causal_model.json", "application/json", kind="causal_model"
        ),
    ]


def residual_unit(
    layer: int, position: Json, token: str, featurizer: str, scores: Json, n_examples: Json
) -> Json:
    """A unit at the residual stream after ``layer`` at ``position`` (``token`` names it in the id)."""
    return {
        "id": f"ResidualStream(Layer-{layer},Token-{token})",
        "location": {"layer": layer, "component": "residual_post", "position": position},
        "featurizer": featurizer,
        "scores": scores,
        "n_examples": n_examples,
    }


def variable_claim(name: str, metric: str, better: str, units: list[Json]) -> Json:
    """A variable's claim: its units and their per-layer, Average and best aggregates."""
    per_layer, average, best = aggregate(units, better)
    return {
        "name": name,
        "metric": metric,
        "better": better,
        "units": units,
        "per_layer": per_layer,
        "average": average,
        "best": best,
    }


IOI_MSE = {  # (layer, position rule) → MSE per counterfactual set
    (3, "last"): {"io_s1_flip": 6.913, "io_s2_flip": 7.288},
    (3, "s2"): {"io_s1_flip": 4.102, "io_s2_flip": 4.655},
    (4, "last"): {"io_s1_flip": 5.874, "io_s2_flip": 6.031},
    (4, "s2"): {"io_s1_flip": 3.517, "io_s2_flip": 3.906},
}
S2_POSITION: Json = {"rule": "slot", "slot": "name_c", "occurrence": -1, "subtoken": "last"}


@fresh
def causal_variable_report(folder: Folder) -> Json:
    """GPT-2 small on IOI: DAS featurizers aligned to the output-position variable (MSE, lower is better)."""
    artifacts = dataset_and_causal_model(folder, "ioi")
    units = []
    for seed, ((layer, where), scores) in enumerate(IOI_MSE.items()):
        position = {"rule": "last"} if where == "last" else S2_POSITION
        stem = f"das_l{layer}_{where}"
        das_featurizer(
            folder,
            layer=layer,
            position=position,
            name=f"{stem}.json",
            sidecar=f"{stem}.safetensors",
            seed=seed,
        )
        ident = f"das-l{layer}-{where}"
        artifacts.append(
            folder.artifact(ident, "featurizer", f"{stem}.json", "application/json", kind="featurizer")
        )
        token = "last_token" if where == "last" else "s2_token"
        units.append(residual_unit(layer, position, token, ident, scores, {"io_s1_flip": 3, "io_s2_flip": 2}))
    return _ioi_report("DAS alignment of the IOI output-position variable in GPT-2 small", units, artifacts)


def _ioi_report(title: str, units: list[Json], artifacts: list[Json]) -> Json:
    """The IOI report of GPT-2 small holding ``units`` of the output-position variable."""
    return document(
        "report",
        {
            "track": "causal_variable",
            "profile": "default",
            "title": title,
            "method": {
                "name": "DAS",
                "version": "1.0",
                "hyperparameters": {"n_features": 1, "epochs": 2, "learning_rate": 0.001},
            },
            "task": {"name": "ioi", "dataset": "dataset", "split": "test", "n_examples": REPORT_ROWS["ioi"]},
            "model": GPT2_SMALL,
            "settings": {
                "intervention": "interchange",
                "checker": "exact_token",
                "example_filter": "model_correct_on_base_and_counterfactuals",
                "batch_size": 8,
                "causal_model": "causal-model",
            },
            "claims": {"variables": [variable_claim("output_position", "mse", "lower", units)]},
            "seeds": [{"purpose": "featurizer initialisation and training order", "value": 0}],
            "artifacts": artifacts,
            "provenance": PROVENANCE,
        },
    )


#: (layer, head) of each site of the joint IOI unit, its location first (MV-10)
JOINT_HEADS = ((7, 3), (7, 9), (8, 6))


@fresh
def joint_heads_report(folder: Folder) -> Json:
    """GPT-2 small on IOI as MIB evaluates it: one unit of three heads of two layers at every
    token, each head with its own DAS featurizer (spec 1.2, MV-10)."""
    artifacts = dataset_and_causal_model(folder, "ioi")
    sites = []
    for seed, (layer, head) in enumerate(JOINT_HEADS):
        stem = f"das_l{layer}_h{head}"
        das_featurizer(
            folder,
            layer=layer,
            heads=[head],
            position={"rule": "all"},
            name=f"{stem}.json",
            sidecar=f"{stem}.safetensors",
            input_dim=64,
            seed=seed,
        )
        ident = f"das-l{layer}-h{head}"
        artifacts.append(
            folder.artifact(ident, "featurizer", f"{stem}.json", "application/json", kind="featurizer")
        )
        sites.append({"layer": layer, "component": "attention_heads", "heads": [head], "featurizer": ident})
    first = sites[0]
    unit = {
        "id": "AttentionHead(Layer:7,Head:3,Token:all)+AttentionHead(Layer:7,Head:9,Token:all)"
        "+AttentionHead(Layer:8,Head:6,Token:all)",
        "location": {**{k: first[k] for k in ("layer", "component", "heads")}, "position": {"rule": "all"}},
        "featurizer": first["featurizer"],
        "joint_sites": sites[1:],
        "scores": {"io_s1_flip": 1.284, "io_s2_flip": 1.517},
        "n_examples": {"io_s1_flip": 3, "io_s2_flip": 2},
    }
    return _ioi_report("DAS on three IOI heads of GPT-2 small, intervened on together", [unit], artifacts)


MCQA_IIA = {
    12: {"symbol": 0.25, "answer_position": 0.5},
    16: {"symbol": 0.75, "answer_position": 0.5},
    20: {"symbol": 1.0, "answer_position": 0.75},
}


@fresh
def mcqa_report(folder: Folder) -> Json:
    """Qwen2.5-0.5B on MCQA: the full-vector baseline aligned to the answer pointer (IIA)."""
    artifacts = dataset_and_causal_model(folder, "mcqa")
    units = []
    for layer, scores in MCQA_IIA.items():
        identity_featurizer(folder, layer=layer, name=f"full_vector_l{layer}.json")
        ident = f"full-vector-l{layer}"
        artifacts.append(
            folder.artifact(
                ident, "featurizer", f"full_vector_l{layer}.json", "application/json", kind="featurizer"
            )
        )
        units.append(
            residual_unit(
                layer, {"rule": "last"}, "last_token", ident, scores, {"symbol": 4, "answer_position": 4}
            )
        )
    return document(
        "report",
        {
            "track": "causal_variable",
            "title": "Full-vector baseline for the MCQA answer pointer in Qwen2.5-0.5B",
            "method": {"name": "Full vector"},
            "task": {
                "name": "mcqa",
                "dataset": "dataset",
                "split": "test",
                "n_examples": REPORT_ROWS["mcqa"],
            },
            "model": QWEN_05B,
            "settings": {"checker": "exact_token", "causal_model": "causal-model"},
            "claims": {"variables": [variable_claim("answer_pointer", "iia", "higher", units)]},
            "artifacts": artifacts,
            "provenance": PROVENANCE,
        },
    )


# --------------------------------------------------------------------------- CAUSAL-BENCH track

CB_WEIGHTS = {"F": 1.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0}
CB_BEHAVIOUR: Json = dict(PLANTED_BEHAVIOUR)
CB_SETTINGS: Json = {
    "weights": CB_WEIGHTS,
    "cos_threshold": 0.85,
    "n_permutations": 1000,
    "p_convention": "plus_one",
    "z_ddof": 0,
}


@fresh
def causal_bench_report() -> Json:
    """CAUSAL-BENCH on the planted 4-layer, 4-head model with the paper's Table 1 sets."""
    return document(
        "report",
        {
            "track": "causal_bench",
            "profile": "default",
            "title": "Four localization methods on the planted 4L/4H circuit",
            "method": {
                "name": "CAUSAL-BENCH method comparison",
                "version": "1.0",
                "hyperparameters": {"ap_threshold": 0.05, "cd_faithfulness_floor": 0.8},
            },
            "task": {"name": "planted-circuit"},
            "behaviour": CB_BEHAVIOUR,
            "universe": CB_UNIVERSE,
            "ground_truth": CB_TRUTH,
            "settings": CB_SETTINGS,
            "claims": causal_bench_claims(
                CB_SETS,
                CB_UNIVERSE,
                planted=CB_BEHAVIOUR,
                truth=CB_TRUTH,
                stability_targets=CB_STABILITY,
                settings=CB_SETTINGS,
                seed=7,
            ),
            "seeds": [
                {"purpose": "behaviour model noise", "value": 42},
                {"purpose": "permutation test", "value": 7},
            ],
            "provenance": PROVENANCE,
        },
    )


# --------------------------------------------------------------------------- saliency track

WIOU_KS = [25, 20, 15, 10, 5, 3, 1]
WIOU_WEIGHTS = [1.0, 3.0, 5.0, 10.0, 15.0, 20.0, 25.0]


@fresh
def saliency_report(folder: Folder, *, curves: bool = False) -> Json:
    """A tiny CNN trained on the shortcut dataset; two saliency methods against Shapley ground truth."""
    write_shortcut_dataset(folder)
    truth, maps, masks = saliency_maps()
    folder.npy("shapley.npy", truth)
    folder.safetensors("cnn.safetensors", tiny_cnn_weights())
    artifacts = [
        folder.artifact("dataset", "dataset", "dataset.json", "application/json", kind="shortcut_dataset"),
        folder.artifact("shapley", "ground_truth", "shapley.npy", "application/x-npy"),
    ]
    methods = []
    artifacts.append(folder.artifact("weights", "weights", "cnn.safetensors", "application/x-safetensors"))
    for name, values in maps.items():
        folder.npy(f"maps_{name}.npy", values)
        artifacts.append(folder.artifact(f"maps-{name}", "maps", f"maps_{name}.npy", "application/x-npy"))
        hit_accuracy, per_k, wiou = saliency_scores(truth, values, masks, WIOU_KS, WIOU_WEIGHTS)
        method: Json = {
            "name": name,
            "maps": {"artifact": f"maps-{name}", "shape": list(values.shape), "dtype": str(values.dtype)},
            "channel_reduction": "sum",
            "hit_accuracy": hit_accuracy,
            "wiou": wiou,
            "per_k_iou": per_k,
        }
        if curves:
            method |= {
                "deletion_auc": 0.3127 if name == "gradient" else 0.4410,
                "addition_auc": 0.7012 if name == "gradient" else 0.6235,
            }
        methods.append(method)
    settings: Json = {
        "dominance_threshold": 0.9,
        "wiou_ks": WIOU_KS,
        "wiou_weights": WIOU_WEIGHTS,
        "auc_convention": "normalised_trapezoid",
        "shapley_sampler": "permutation",
        "shapley_trials": 5,
        "shapley_permutations": 200,
    }
    if curves:
        settings["curve_steps"] = 64
    return document(
        "report",
        {
            "track": "saliency",
            "profile": "default",
            "title": "Pixel-level evaluation of two saliency methods on a shortcut-trained CNN",
            "method": {"name": "saliency comparison"},
            "task": {"name": "shortcut-8x8", "dataset": "dataset", "split": "test", "n_examples": N_IMAGES},
            "model": TINY_CNN,
            "settings": settings,
            "claims": {
                "clean_accuracy": 0.25,
                "perturbed_accuracy": 1.0,
                "dominance": {
                    "n_images": N_IMAGES,
                    "n_dominant": len(DOMINANT),
                    "rate": len(DOMINANT) / N_IMAGES,
                },
                "ground_truth": {
                    "artifact": "shapley",
                    "shape": list(truth.shape),
                    "dtype": str(truth.dtype),
                },
                "methods": methods,
            },
            "seeds": [{"purpose": "Shapley permutations", "value": 5}],
            "artifacts": artifacts,
            "provenance": PROVENANCE,
        },
    )
