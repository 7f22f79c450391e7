"""Saliency-track producer: registry model + shortcut dataset → maps, ground truth, metrics → report.

What ``mibspec score saliency`` runs. The written folder holds

* ``report.json``;
* ``model.safetensors``: the weights, copied byte for byte (the report's registry model);
* ``dataset.json`` + ``dataset.safetensors``: the shortcut dataset (its tensors rewritten
  into one safetensors file with the tensor names ``clean_images``, ``perturbed_images``,
  ``labels``, ``kernels``);
* ``shapley.safetensors``: the Shapley ground truth of the dominant images, float64
  ``(n_dominant, H, W)`` (one tensor);
* ``maps_<method>.safetensors``: each method's maps, float32 ``(n_dominant, H, W)``.

Every number is computed with :mod:`mibspec.reference_impl.vision` (the functions the
recompute stage calls) and :mod:`mibspec.reference_impl.metrics`; the metrics are computed
from the maps as stored (float32), so the report follows from its files.
"""

from __future__ import annotations

import json
import math
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.spec import SPEC_VERSION

from ..metrics.saliency import WIOU_KS, WIOU_WEIGHTS
from .folder import OutputFolder, created_timestamp

__all__ = ["GROUND_TRUTH_METHOD", "SaliencyRun", "score_saliency"]

GROUND_TRUTH_METHOD = "shapley_ground_truth"
"""Name of the report row that evaluates the ground truth itself (the paper's "Ours" row of
Table 3: its deletion and addition AUCs are the reference the methods' curves are read against)."""

_SAMPLERS = ("exact", "permutation", "antithetic", "rotated_antithetic")


@dataclass(frozen=True)
class SaliencyRun:
    """What :func:`score_saliency` wrote and computed."""

    report: Path
    n_images: int
    n_dominant: int
    clean_accuracy: float
    perturbed_accuracy: float
    methods: dict[str, dict[str, float]]


def _metadata(path: Path) -> dict[str, str]:
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length).decode("utf-8"))
    meta = header.get("__metadata__") or {}
    return {str(k): str(v) for k, v in meta.items()}


def _read_dataset(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A shortcut dataset document and its four tensors."""
    from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"dataset_path: cannot read {path}: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "shortcut_dataset":
        raise ValueError(f"dataset_path: {path} is not a shortcut_dataset document")
    tensors = {}
    refs = {
        "clean_images": doc["clean_images"],
        "perturbed_images": doc["perturbed_images"],
        "labels": doc["labels"],
        "kernels": doc["perturbation"]["kernels"],
    }
    for field, ref in refs.items():
        entry = next((a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"]), None)
        if entry is None:
            raise ValueError(f"dataset_path: {path} declares no artifact {ref['artifact']!r} for {field}")
        target = path.parent / entry["path"]
        try:
            info = tensor_infos(target, entry["media_type"]).get(ref.get("tensor"))
            if info is None:
                raise SidecarError(f"no tensor {ref.get('tensor')!r}")
            tensors[field] = np.array(load_tensor(target, info))
        except (SidecarError, OSError) as exc:
            raise ValueError(f"dataset_path: cannot read {field} from {target}: {exc}") from exc
    return doc, tensors


def _provenance(created: str) -> dict[str, Any]:
    import captum
    import torch

    from mibspec.core.version import __version__

    return {
        "tool": {"name": "mibspec", "version": __version__},
        "created": created,
        "libraries": {
            "numpy": np.__version__,
            "torch": torch.__version__,
            "captum": captum.__version__,
            "python": platform.python_version(),
        },
        "command": "mibspec score saliency",
    }


def _tensor_ref(name: str, array: np.ndarray, artifact: str = "tensors") -> dict[str, Any]:
    return {"artifact": artifact, "tensor": name, "shape": list(array.shape), "dtype": str(array.dtype)}


def score_saliency(
    weights_path: Path,
    dataset_path: Path,
    out_dir: Path,
    *,
    architecture: str | None = None,
    methods: Sequence[str] | None = None,
    sampler: str = "permutation",
    n_trials: int = 5,
    n_permutations: int | None = 20,
    shapley_seed: int = 0,
    maps_seed: int = 1,
    curve_steps: int | None = None,
    curve_score: str = "probability",
    auc_convention: str = "normalised_trapezoid",
    threshold: float = 0.9,
    task_name: str = "shortcut",
    overwrite: bool = False,
    progress: Progress | None = None,
) -> SaliencyRun:
    """Evaluate saliency methods against the Shapley ground truth and write a report folder.

    Args:
        weights_path: safetensors weights of a registry architecture.
        dataset_path: a shortcut dataset document.
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        architecture: the registry architecture (default: the weights' ``architecture``
            metadata).
        methods: names from :data:`mibspec.reference_impl.vision._maps.METHODS` (default: all).
        sampler: ``exact``, ``permutation``, ``antithetic`` or ``rotated_antithetic`` (MS-9, MS-10).
        n_trials: trials averaged by the sampling estimators (the paper: 5).
        n_permutations: permutations per trial (sampling estimators).
        shapley_seed: root seed of the permutations (image i: ``SeedSequence([seed, i])``).
        maps_seed: seed of the stochastic attribution methods (gradient_shap).
        curve_steps: deletion/addition steps (default: D, the patch's pixel count, as in the paper).
        curve_score: ``probability`` or ``accuracy`` (MS-7).
        auc_convention: ``normalised_trapezoid`` or ``unit_step_sum`` (MS-8).
        threshold: dominance threshold T.
        task_name: the report's ``task.name``.
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    from mibspec.reference_impl.vision import (
        METHODS,
        evaluate_dominance,
        ground_truth_maps,
        load_registry_model,
        map_curves,
        map_scores,
        read_weights,
        saliency_maps,
    )

    from ..threads import one_thread

    chosen = list(METHODS) if methods is None else list(methods)
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"methods: expected distinct names from {sorted(METHODS)}, got {chosen}")
    if sampler not in _SAMPLERS:
        raise ValueError(f"sampler: expected one of {_SAMPLERS}, got {sampler!r}")
    weights_path, dataset_path = Path(weights_path), Path(dataset_path)
    arch = architecture or _metadata(weights_path).get("architecture")
    if not arch:
        raise ValueError("architecture: not given and the weights file names none in its metadata")
    doc, tensors = _read_dataset(dataset_path)
    clean, perturbed = tensors["clean_images"], tensors["perturbed_images"]
    labels = tensors["labels"].astype(np.int64)
    if clean.ndim != 4 or perturbed.shape != clean.shape or labels.shape != (clean.shape[0],):
        raise ValueError(
            f"dataset_path: expected images (N, C, H, W) and N labels; got {clean.shape}, {perturbed.shape}, "
            f"{labels.shape}"
        )
    model = load_registry_model(arch, read_weights(weights_path), clean.shape[1:])
    side = math.isqrt(int(doc["perturbation"]["patch_size"]))
    height, width = clean.shape[-2:]
    class_masks = []
    for row, col in doc["perturbation"]["locations"]:
        mask = np.zeros((height, width), dtype=bool)
        mask[row : row + side, col : col + side] = True
        class_masks.append(mask)
    steps = int(curve_steps or side * side)

    with one_thread():
        result = evaluate_dominance(model, clean, perturbed, labels, threshold)
        dominant = result.dominant
        if len(dominant) == 0:
            raise ValueError("dataset_path: no image meets the dominance prerequisites; nothing to evaluate")
        areas = [class_masks[labels[i]] for i in dominant]
        done = start_task(progress, f"Shapley ground truth of {len(dominant)} dominant images", len(dominant))
        count = {"n": 0}

        def advance() -> None:
            count["n"] += 1
            done(count["n"])

        truth = ground_truth_maps(
            model,
            clean,
            perturbed,
            labels,
            areas,
            dominant.tolist(),
            sampler=sampler,  # type: ignore[arg-type]
            seed=None if sampler == "exact" else shapley_seed,
            n_trials=n_trials,
            n_permutations=None if sampler == "exact" else n_permutations,
            advance=advance,
        )
        maps: dict[str, np.ndarray] = {}
        done = start_task(progress, f"maps of {len(chosen)} methods", len(chosen))
        for i, name in enumerate(chosen):
            maps[name] = saliency_maps(model, perturbed[dominant], labels[dominant], name, seed=maps_seed)
            done(i + 1)
        evaluated = {GROUND_TRUTH_METHOD: truth, **maps}
        rows: dict[str, dict[str, Any]] = {}
        done = start_task(progress, "scores and deletion/addition curves", len(evaluated))
        for i, (name, values) in enumerate(evaluated.items()):
            as_stored = values.astype(np.float64)
            scores = map_scores(as_stored, truth, areas, WIOU_KS, WIOU_WEIGHTS)
            deletion, addition = map_curves(
                model,
                clean[dominant],
                perturbed[dominant],
                labels[dominant],
                as_stored,
                steps,
                score=curve_score,  # type: ignore[arg-type]
                convention=auc_convention,  # type: ignore[arg-type]
            )
            rows[name] = {
                "hit_accuracy": scores.hit_accuracy,
                "wiou": scores.wiou,
                "per_k_iou": list(scores.per_k_iou),
                "deletion_auc": deletion,
                "addition_auc": addition,
            }
            done(i + 1)

    folder = OutputFolder(
        Path(out_dir), overwrite=overwrite, inputs=input_files([weights_path, dataset_path])
    )
    created = created_timestamp()
    provenance = _provenance(created)
    folder.write("model.safetensors", weights_path.read_bytes())
    dataset_tensors = {
        "clean_images": clean,
        "perturbed_images": perturbed,
        "labels": tensors["labels"],
        "kernels": tensors["kernels"],
    }
    folder.safetensors("dataset.safetensors", dataset_tensors)
    dataset_doc = {key: value for key, value in doc.items() if key != "artifacts"}
    dataset_doc["clean_images"] = _tensor_ref("clean_images", clean)
    dataset_doc["perturbed_images"] = _tensor_ref("perturbed_images", perturbed)
    dataset_doc["labels"] = _tensor_ref("labels", tensors["labels"])
    dataset_doc["perturbation"] = {
        **doc["perturbation"],
        "kernels": _tensor_ref("kernels", tensors["kernels"]),
    }
    dataset_doc["artifacts"] = [
        folder.artifact("tensors", "images", "dataset.safetensors", "application/x-safetensors")
    ]
    dataset_doc.setdefault("provenance", provenance)
    folder.json("dataset.json", dataset_doc)
    stored_truth = truth.astype(np.float64)
    folder.safetensors("shapley.safetensors", {"ground_truth": stored_truth})
    artifacts = [
        folder.artifact("dataset", "dataset", "dataset.json", "application/json", kind="shortcut_dataset"),
        folder.artifact("weights", "weights", "model.safetensors", "application/x-safetensors"),
        folder.artifact("shapley", "ground_truth", "shapley.safetensors", "application/x-safetensors"),
    ]
    truth_ref = _tensor_ref("ground_truth", stored_truth, "shapley")
    method_rows = []
    for name, row in rows.items():
        if name == GROUND_TRUTH_METHOD:
            # a Shapley player is a spatial position: one value per pixel
            method_rows.append({"name": name, "maps": truth_ref, "channel_reduction": "none", **row})
            continue
        artifact_id = f"maps-{name}"
        folder.safetensors(f"maps_{name}.safetensors", {"maps": maps[name]})
        artifacts.append(
            folder.artifact(artifact_id, "maps", f"maps_{name}.safetensors", "application/x-safetensors")
        )
        ref = _tensor_ref("maps", maps[name], artifact_id)
        method_rows.append({"name": name, "maps": ref, "channel_reduction": "sum", **row})

    settings: dict[str, Any] = {
        "dominance_threshold": threshold,
        "wiou_ks": list(WIOU_KS),
        "wiou_weights": [float(w) for w in WIOU_WEIGHTS],
        "auc_convention": auc_convention,
        "shapley_sampler": sampler,
        "shapley_trials": 1 if sampler == "exact" else n_trials,
        "placeholder": "clean",
        "curve_steps": steps,
        "curve_score": curve_score,
    }
    if sampler != "exact":
        settings["shapley_permutations"] = n_permutations
        settings["shapley_seed"] = shapley_seed
    seeds = [] if sampler == "exact" else [{"purpose": "Shapley permutations", "value": shapley_seed}]
    if "gradient_shap" in chosen:
        seeds.append({"purpose": "gradient_shap baselines and sampling", "value": maps_seed})
    import captum

    report = {
        "spec_version": SPEC_VERSION,
        "kind": "report",
        "track": "saliency",
        "profile": "default",
        "title": f"Pixel-level evaluation of {len(chosen)} captum saliency methods on {arch}",
        "description": "Maps and ground truth cover the dominant images in dataset order; each method "
        "explains the logit of the shortcut's class on the perturbed image. The row "
        f"{GROUND_TRUTH_METHOD!r} evaluates the ground truth itself (the reference for the deletion and "
        "addition areas).",
        "method": {
            "name": "captum saliency methods",
            "version": captum.__version__,
            "description": "Standard attribution methods from captum, scored against the Shapley ground "
            "truth over the shortcut patch.",
            "hyperparameters": {
                "target": "logit of the shortcut's class",
                "input": "perturbed image",
                "methods": {
                    name: {"captum": METHODS[name].captum_class, **METHODS[name].settings} for name in chosen
                },
            },
            "citation": {
                "text": "Kokhlikyan et al. (2020). Captum: A unified and generic model interpretability "
                "library for PyTorch.",
                "url": "https://arxiv.org/abs/2009.07896",
            },
        },
        "task": {
            "name": task_name,
            "dataset": "dataset",
            "split": doc.get("split", "test"),
            "n_examples": result.n_images,
        },
        "seeds": seeds,
        "model": {"source": "registry", "architecture": arch, "dtype": "float32", "weights": "weights"},
        "settings": settings,
        "claims": {
            "clean_accuracy": result.clean_accuracy,
            "perturbed_accuracy": result.perturbed_accuracy,
            "dominance": {
                "n_images": result.n_images,
                "n_dominant": len(dominant),
                "rate": result.rate,
            },
            "ground_truth": truth_ref,
            "methods": method_rows,
        },
        "artifacts": artifacts,
        "provenance": provenance,
    }
    folder.json("report.json", report)
    return SaliencyRun(
        report=folder.root / "report.json",
        n_images=result.n_images,
        n_dominant=len(dominant),
        clean_accuracy=result.clean_accuracy,
        perturbed_accuracy=result.perturbed_accuracy,
        methods={name: {k: v for k, v in row.items() if k != "per_k_iou"} for name, row in rows.items()},
    )
