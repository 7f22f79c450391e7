"""Inputs of the reports: counterfactual datasets, causal models, featurizers, shortcut datasets
and saliency maps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._common import PROVENANCE, Folder, Json, document, fresh

# --------------------------------------------------------------------------- datasets and models

# Rows come from the reference generators, in the row format of the spec (datasets.md).
DATASET_SEED = 2025
REPORT_ROWS = {"ioi": 3, "mcqa": 4, "arithmetic": 4}
DATASET_ROWS = 5  # the counterfactual_dataset cases


def generated(task: str, n_rows: int) -> Any:
    from mibspec.reference_impl.datasets import generate

    return generate(task, "test", n_rows, seed=DATASET_SEED)


@fresh
def ioi_causal_model() -> Json:
    return document(
        "causal_model",
        {
            "description": "IOI: the logit difference logit(IO) - logit(S) is linear in the subject token "
            "and position signals (MIB App. G.5.4 fit).",
            "task": "ioi",
            "mechanism": "ioi_linear",
            "variables": [
                {"name": "output_token", "description": "the indirect object's name, the expected answer"},
                {
                    "name": "output_position",
                    "values": [0, 1],
                    "description": "position of the indirect object among the two names",
                },
                {
                    "name": "logit_difference",
                    "description": "logit(IO) - logit(S): bias + token_coeff * token signal + "
                    "position_coeff * position signal, signals +1 when kept and -1 when flipped",
                },
            ],
            "outputs": ["logit_difference"],
            "parameters": {"bias": 0.069, "token_coeff": 0.687, "position_coeff": 2.018},
            "provenance": PROVENANCE,
        },
    )


@fresh
def arithmetic_causal_model() -> Json:
    return document(
        "causal_model",
        {
            "description": "Addition of two operands below 100, with an explicit carry from the ones digits.",
            "task": "arithmetic",
            "mechanism": "two_digit_carry",
            "variables": [
                {"name": "operand_1", "description": "an integer from 0 to 99"},
                {"name": "operand_2", "description": "an integer from 0 to 99"},
                {
                    "name": "ones_carry",
                    "values": [0, 1],
                    "description": "1 when the ones digits sum to more than 9",
                },
                {"name": "result", "description": "operand_1 + operand_2"},
            ],
            "outputs": ["result"],
            "parameters": {"operator": "+", "operand_min": 0, "operand_max": 99},
            "provenance": PROVENANCE,
        },
    )


@fresh
def mcqa_causal_model() -> Json:
    return document(
        "causal_model",
        {
            "description": "Four-choice colour questions: the answer is the symbol at the position of the "
            "correct choice.",
            "task": "mcqa",
            "mechanism": "answer_pointer",
            "variables": [
                {
                    "name": "answer_pointer",
                    "values": [0, 1, 2, 3],
                    "description": "position of the correct choice",
                },
                {"name": "answer", "description": "the symbol the pointer selects"},
            ],
            "outputs": ["answer"],
            "parameters": {"n_choices": 4},
            "provenance": PROVENANCE,
        },
    )


@fresh
def write_dataset(
    folder: Folder,
    *,
    task: str = "ioi",
    n_rows: int | None = None,
    name: str = "dataset.json",
    rows_file: str = "dataset.jsonl",
    causal_model: str | None = None,
) -> Json:
    """Write a counterfactual dataset document, its JSONL rows and (optionally) its causal model."""
    from mibspec.reference_impl.datasets import dumps_jsonl

    dataset = generated(task, n_rows or REPORT_ROWS[task])
    meta = dataset.metadata
    folder.write(rows_file, dumps_jsonl(dataset.rows).encode("utf-8"))
    artifacts = [folder.artifact("rows", "dataset", rows_file, "application/jsonl", rows=len(dataset.rows))]
    doc: Json = document(
        "counterfactual_dataset",
        {
            "description": f"{task} test inputs paired with their counterfactual inputs.",
            "task": task,
            "split": meta["split"],
            "examples": "rows",
            "counterfactual_types": meta["counterfactual_types"],
            "variables": meta["variables"],
        },
    )
    if causal_model is not None:
        model = {"ioi": ioi_causal_model, "mcqa": mcqa_causal_model, "arithmetic": arithmetic_causal_model}[
            task
        ]
        folder.json(causal_model, model())
        artifacts.append(
            folder.artifact(
                "causal-model", "causal_model", causal_model, "application/json", kind="causal_model"
            )
        )
        doc["causal_model"] = "causal-model"
    doc["generator"] = meta["generator"]
    doc["filters"] = meta["filters"]
    doc["artifacts"] = artifacts
    doc["provenance"] = PROVENANCE
    folder.json(name, doc)
    return doc


# --------------------------------------------------------------------------- featurizers


def orthonormal_rows(n: int, d: int, seed: int) -> NDArray[np.float32]:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, n)))
    return np.ascontiguousarray(q.T).astype(np.float32)


@fresh
def das_featurizer(
    folder: Folder,
    *,
    layer: int = 3,
    position: Json | None = None,
    name: str = "featurizer.json",
    sidecar: str = "featurizer.safetensors",
    input_dim: int = 768,
    n_features: int = 1,
    seed: int = 0,
    heads: list[int] | None = None,
) -> Json:
    """A DAS (subspace) featurizer on the residual stream (or on ``heads`` of the layer's
    attention): f = x·Rᵀ, R with orthonormal rows."""
    folder.safetensors(sidecar, {"rotation": orthonormal_rows(n_features, input_dim, seed)})
    where = f"heads {heads} of layer {layer}" if heads else f"the residual stream after layer {layer}"
    location: Json = {
        "layer": layer,
        "component": "attention_heads" if heads else "residual_post",
        "position": position or {"rule": "last"},
    }
    if heads:
        location["heads"] = heads
    doc: Json = document(
        "featurizer",
        {
            "description": f"Distributed alignment search: a {n_features}-dimensional subspace of {where}.",
            "type": "subspace",
            "location": location,
            "input_dim": input_dim,
            "n_features": n_features,
            "feature_indices": list(range(n_features)),
            "weights": {
                "rotation": {
                    "artifact": "weights",
                    "tensor": "rotation",
                    "shape": [n_features, input_dim],
                    "dtype": "float32",
                }
            },
            "error": "add_base_error",
            "artifacts": [folder.artifact("weights", "weights", sidecar, "application/x-safetensors")],
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


@fresh
def identity_featurizer(folder: Folder, *, layer: int, name: str, input_dim: int = 896) -> Json:
    """The "full vector" baseline: every dimension of the residual stream is a feature."""
    doc: Json = document(
        "featurizer",
        {
            "description": f"Full-vector baseline at the residual stream after layer {layer}.",
            "type": "identity",
            "location": {"layer": layer, "component": "residual_post", "position": {"rule": "last"}},
            "input_dim": input_dim,
            "n_features": input_dim,
            "error": "add_base_error",
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


@fresh
def sae_featurizer(
    folder: Folder, *, name: str = "featurizer.json", sidecar: str = "sae.safetensors"
) -> Json:
    """A small ReLU sparse autoencoder on the tiny model's residual stream."""
    rng = np.random.default_rng(5)
    d, n = 32, 64
    tensors = {
        "W_enc": (rng.normal(size=(d, n)) / np.sqrt(d)).astype(np.float32),
        "b_enc": np.zeros(n, dtype=np.float32),
        "W_dec": (rng.normal(size=(n, d)) / np.sqrt(n)).astype(np.float32),
        "b_dec": np.zeros(d, dtype=np.float32),
    }
    folder.safetensors(sidecar, tensors)
    weights = {
        key: {"artifact": "sae", "tensor": key, "shape": list(value.shape), "dtype": "float32"}
        for key, value in tensors.items()
    }
    doc: Json = document(
        "featurizer",
        {
            "description": "ReLU sparse autoencoder (64 latents) on the residual stream before layer 2.",
            "type": "sae",
            "location": {
                "layer": 2,
                "component": "residual_pre",
                "position": {
                    "rule": "slot",
                    "slot": "subject",
                    "match": "value",
                    "occurrence": 1,
                    "subtoken": "last",
                },
            },
            "input_dim": d,
            "n_features": n,
            "feature_indices": [3, 17, 40],
            "weights": weights,
            "error": "add_base_error",
            "sae_activation": "relu",
            "artifacts": [folder.artifact("sae", "weights", sidecar, "application/x-safetensors")],
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


@fresh
def pca_featurizer(folder: Folder, *, name: str = "featurizer.json") -> Json:
    """PCA on standardised activations, applied uncentred (the public code's convention, declared)."""
    rng = np.random.default_rng(9)
    d, n = 32, 8
    folder.npy("pca_mean.npy", rng.normal(size=d).astype(np.float32))
    folder.npy("pca_scale.npy", (1 + rng.random(d)).astype(np.float32))
    folder.npy("pca_components.npy", orthonormal_rows(n, d, 10))
    doc: Json = document(
        "featurizer",
        {
            "description": "Top-8 principal components of standardised residual activations after layer 1.",
            "type": "pca",
            "location": {"layer": 1, "component": "residual_post", "position": {"rule": "last"}},
            "input_dim": d,
            "n_features": n,
            "feature_indices": [0, 1],
            "weights": {
                "mean": {"artifact": "mean", "shape": [d], "dtype": "float32"},
                "scale": {"artifact": "scale", "shape": [d], "dtype": "float32"},
                "components": {"artifact": "components", "shape": [n, d], "dtype": "float32"},
            },
            "pca_centring": "uncentred",
            "artifacts": [
                folder.artifact("mean", "weights", "pca_mean.npy", "application/x-npy"),
                folder.artifact("scale", "weights", "pca_scale.npy", "application/x-npy"),
                folder.artifact("components", "weights", "pca_components.npy", "application/x-npy"),
            ],
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


# --------------------------------------------------------------------------- shortcut dataset

N_IMAGES, IMAGE_SHAPE, PATCH, KERNEL = 8, (3, 8, 8), 5, 3
LOCATIONS = [[0, 0], [3, 3]]
DOMINANT = [0, 1, 2, 4, 5, 7]  # images meeting the dominance prerequisites


def shortcut_arrays() -> dict[str, NDArray[Any]]:
    rng = np.random.default_rng(21)
    labels = np.arange(N_IMAGES, dtype=np.int64) % 2
    clean = rng.random((N_IMAGES, *IMAGE_SHAPE)).astype(np.float32)
    kernels = rng.uniform(0, 0.2, size=(2, KERNEL, KERNEL))
    for c in range(2):
        kernels[c].flat[rng.integers(KERNEL * KERNEL)] = 1.0
    kernels = kernels.astype(np.float32)
    perturbed = clean.copy()
    for i, label in enumerate(labels):
        r0, c0 = LOCATIONS[label]
        padded = np.pad(clean[i], ((0, 0), (1, 1), (1, 1)))
        for r in range(r0, r0 + PATCH):
            for c in range(c0, c0 + PATCH):
                window = padded[:, r : r + KERNEL, c : c + KERNEL]
                perturbed[i, :, r, c] = np.clip((window * kernels[label]).sum(axis=(1, 2)), 0, 1)
    return {"clean": clean, "perturbed": perturbed, "labels": labels, "kernels": kernels}


_SHORTCUT_ROLES = {"clean": "images", "perturbed": "images", "labels": "labels", "kernels": "kernels"}


@fresh
def write_shortcut_dataset(folder: Folder, *, name: str = "dataset.json", grayscale: bool = False) -> Json:
    """The shortcut dataset (float32 colour, or uint8 grayscale) with its four .npy sidecars."""
    arrays = shortcut_arrays()
    shape = IMAGE_SHAPE
    dtype = "float32"
    if grayscale:
        shape, dtype = (1, *IMAGE_SHAPE[1:]), "uint8"
        for key in ("clean", "perturbed"):
            arrays[key] = np.round(arrays[key].mean(axis=1, keepdims=True) * 255).astype(np.uint8)
    files = {key: folder.npy(f"{key}.npy", value) for key, value in arrays.items()}
    doc: Json = document(
        "shortcut_dataset",
        {
            "description": f"Random 8x8 {'grayscale' if grayscale else 'colour'} images; each class carries "
            "a 3x3 blur kernel applied to a 5x5 patch.",
            "source": "synthetic uniform-noise images (numpy PCG64, seed 21)",
            "split": "test",
            "n_classes": 2,
            "image_shape": list(shape),
            "clean_images": {"artifact": "clean", "shape": [N_IMAGES, *shape], "dtype": dtype},
            "perturbed_images": {"artifact": "perturbed", "shape": [N_IMAGES, *shape], "dtype": dtype},
            "labels": {"artifact": "labels", "shape": [N_IMAGES], "dtype": "int64"},
            "perturbation": {
                "kernel_size": KERNEL * KERNEL,
                "patch_size": PATCH * PATCH,
                "alpha": 0.2,
                "seed": 21,
                "kernels": {"artifact": "kernels", "shape": [2, KERNEL, KERNEL], "dtype": "float32"},
                "locations": LOCATIONS,
            },
            "seeds": [{"purpose": "images, kernels and the kernels' unit weight", "value": 21}],
            "artifacts": [
                folder.artifact(key, _SHORTCUT_ROLES[key], path, "application/x-npy")
                for key, path in files.items()
            ],
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


def occlusion_like(truth: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.float32]:
    """A 3x3 box blur of the truth plus noise; in two images the peak spills just outside the patch."""
    padded = np.pad(truth, ((0, 0), (1, 1), (1, 1)))
    h, w = truth.shape[1:]
    blurred = sum(padded[:, r : r + h, c : c + w] for r in range(3) for c in range(3)) / 9
    maps = blurred + np.abs(rng.normal(0, 0.05, truth.shape))
    for j in (1, 4):
        r0, c0 = LOCATIONS[np.arange(N_IMAGES)[DOMINANT[j]] % 2]
        r, c = (r0 + PATCH, c0) if r0 + PATCH < h else (r0 - 1, c0)
        maps[j, r, c] = maps[j].max() + 0.05
    return maps.astype(np.float32)


def saliency_maps() -> tuple[NDArray[np.float32], dict[str, NDArray[np.float32]], NDArray[np.bool_]]:
    """Ground-truth Shapley maps, two methods' maps, and the dominant-area masks (dominant images)."""
    rng = np.random.default_rng(33)
    labels = np.arange(N_IMAGES) % 2
    h, w = IMAGE_SHAPE[1:]
    masks = np.zeros((len(DOMINANT), h, w), dtype=bool)
    truth = np.zeros((len(DOMINANT), h, w), dtype=np.float32)
    for j, i in enumerate(DOMINANT):
        r0, c0 = LOCATIONS[labels[i]]
        masks[j, r0 : r0 + PATCH, c0 : c0 + PATCH] = True
        truth[j][masks[j]] = rng.permutation(PATCH * PATCH) / (PATCH * PATCH) + 0.02
    maps = {
        "gradient": (truth + rng.normal(0, 0.25, truth.shape)).astype(np.float32),
        "occlusion": occlusion_like(truth, rng),
    }
    return truth, maps, masks


def tiny_cnn_weights() -> dict[str, NDArray[np.float32]]:
    """Weights of a 3x3 convolution (4 channels) and a linear read-out over the 8x8 maps."""
    rng = np.random.default_rng(41)
    return {
        "conv.weight": (rng.normal(size=(4, 3, 3, 3)) / 5).astype(np.float32),
        "conv.bias": np.zeros(4, dtype=np.float32),
        "fc.weight": (rng.normal(size=(2, 4 * 8 * 8)) / 16).astype(np.float32),
        "fc.bias": np.zeros(2, dtype=np.float32),
    }


def saliency_scores(
    truth: NDArray[np.float32],
    saliency: NDArray[np.float32],
    masks: NDArray[np.bool_],
    ks: Sequence[int],
    weights: Sequence[float],
) -> tuple[float, list[float], float]:
    """(hit accuracy, mean IoU per k, WIoU with weights normalised to 1) over the images."""

    def top(values: NDArray[np.float32], k: int) -> set[int]:
        flat = values.ravel().astype(np.float64)
        return set(np.lexsort((np.arange(flat.size), -flat))[:k].tolist())

    hits = [bool(masks[j].ravel()[next(iter(top(saliency[j], 1)))]) for j in range(len(truth))]
    per_k = []
    for k in ks:
        ious = [
            len(top(truth[j], k) & top(saliency[j], k)) / len(top(truth[j], k) | top(saliency[j], k))
            for j in range(len(truth))
        ]
        per_k.append(math.fsum(ious) / len(ious))
    total = math.fsum(weights)
    return sum(hits) / len(hits), per_k, math.fsum(w / total * v for w, v in zip(weights, per_k, strict=True))
