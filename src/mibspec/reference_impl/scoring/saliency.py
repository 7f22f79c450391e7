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
recompute stage calls) and :mod:`mibspec.metrics`; the metrics are computed
from the maps as stored (float32), so the report follows from its files.

:func:`score_saliency` runs four steps, each usable on its own: :class:`SaliencyOptions`
(what the command takes), :func:`load_saliency_inputs` (weights, dataset, model),
:func:`compute_saliency` (dominance, ground truth, maps, scores) and
:func:`build_saliency_files` (the folder's files, in memory) and
:func:`write_saliency_folder` (through
:class:`~mibspec.reference_impl.scoring.folder.OutputFolder`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.sidecars import safetensors_bytes
from mibspec.documents import SaliencyReport, document_bytes
from mibspec.documents.common import Artifact, Citation, Method, Provenance, RegistryModel, Seed
from mibspec.documents.report import SaliencyClaims, SaliencySettings, TaskRef
from mibspec.metrics.saliency import WIOU_KS, WIOU_WEIGHTS

from .folder import OutputFolder, artifact_entry, created_timestamp, json_bytes, score_provenance

if TYPE_CHECKING:  # torch (and the vision module, which imports it) loads only when a run starts
    import torch

    from ..vision import DominanceResult, DominantImages

__all__ = [
    "GROUND_TRUTH_METHOD",
    "SaliencyInputs",
    "SaliencyOptions",
    "SaliencyRun",
    "SaliencyScores",
    "build_saliency_files",
    "compute_saliency",
    "load_saliency_inputs",
    "score_saliency",
    "write_saliency_folder",
]

GROUND_TRUTH_METHOD = "shapley_ground_truth"
"""Name of the report row that evaluates the ground truth itself (the paper's "Ours" row of
Table 3: its deletion and addition AUCs are the reference the methods' curves are read against)."""

_SAMPLERS = ("exact", "permutation", "antithetic", "rotated_antithetic")


@dataclass(frozen=True)
class SaliencyOptions:
    """What ``mibspec score saliency`` takes besides its weights, dataset and output folder.

    Attributes:
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
        overwrite: replace a report already in the output folder.
        device: where the model computes (``cpu``, ``cuda:N``, ``mps``).
    """

    architecture: str | None = None
    methods: Sequence[str] | None = None
    sampler: str = "permutation"
    n_trials: int = 5
    n_permutations: int | None = 20
    shapley_seed: int = 0
    maps_seed: int = 1
    curve_steps: int | None = None
    curve_score: str = "probability"
    auc_convention: str = "normalised_trapezoid"
    threshold: float = 0.9
    task_name: str = "shortcut"
    overwrite: bool = False
    device: str = "cpu"


@dataclass(frozen=True, eq=False)
class SaliencyInputs:
    """The checked inputs of a run: the methods chosen, the model, the dataset and its patches."""

    weights_path: Path
    dataset_path: Path
    methods: list[str]
    architecture: str
    model: torch.nn.Module
    dataset: dict[str, Any]
    tensors: dict[str, np.ndarray]
    labels: np.ndarray
    class_masks: list[np.ndarray]
    curve_steps: int


@dataclass(frozen=True, eq=False)
class SaliencyScores:
    """What :func:`compute_saliency` computed: dominance, ground truth, maps and one row of
    scores per evaluated method (the ground truth's row first)."""

    dominance: DominanceResult
    truth: np.ndarray
    maps: dict[str, np.ndarray]
    rows: dict[str, dict[str, Any]]


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
    """The weights file's ``__metadata__``, read by the bounded header reader.

    Raises:
        ValueError: the file is not a well-formed safetensors file (empty, another format).
    """
    from mibspec.core.sidecars import SidecarError, read_safetensors

    try:
        return read_safetensors(path)[1]
    except SidecarError as exc:
        raise ValueError(f"weights: {path} is not a safetensors file: {exc}") from exc


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
    return score_provenance("mibspec score saliency", ("numpy", "torch", "captum", "python"), created)


def _tensor_ref(name: str, array: np.ndarray, artifact: str = "tensors") -> dict[str, Any]:
    return {"artifact": artifact, "tensor": name, "shape": list(array.shape), "dtype": str(array.dtype)}


def score_saliency(
    weights_path: Path,
    dataset_path: Path,
    out_dir: Path,
    options: SaliencyOptions | None = None,
    *,
    progress: Progress | None = None,
    **fields: Any,
) -> SaliencyRun:
    """Evaluate saliency methods against the Shapley ground truth and write a report folder.

    Args:
        weights_path: safetensors weights of a registry architecture.
        dataset_path: a shortcut dataset document.
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        options: the run's settings (default: :class:`SaliencyOptions`'s defaults).
        progress: where to report progress (``None``: nowhere).
        **fields: :class:`SaliencyOptions` fields by name, replacing those of ``options``
            (``score_saliency(w, d, out, methods=["gradient"])``).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    options = replace(options or SaliencyOptions(), **fields)
    inputs = load_saliency_inputs(weights_path, dataset_path, options)
    scores = compute_saliency(inputs, options, progress)
    files = build_saliency_files(inputs, options, scores, created_timestamp())
    report = write_saliency_folder(Path(out_dir), files, inputs, overwrite=options.overwrite)
    dominance = scores.dominance
    return SaliencyRun(
        report=report,
        n_images=dominance.n_images,
        n_dominant=len(dominance.dominant),
        clean_accuracy=dominance.clean_accuracy,
        perturbed_accuracy=dominance.perturbed_accuracy,
        methods={
            name: {k: v for k, v in row.items() if k != "per_k_iou"} for name, row in scores.rows.items()
        },
    )


def write_saliency_folder(
    out_dir: Path, files: dict[str, bytes], inputs: SaliencyInputs, *, overwrite: bool = False
) -> Path:
    """Write ``files`` (from :func:`build_saliency_files`) into ``out_dir``, in their order; the
    path of the report written.

    Raises:
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
        mibspec.core.outputs.OutputPathError: a file would overwrite one of the inputs.
    """
    folder = OutputFolder(
        out_dir, overwrite=overwrite, inputs=input_files([inputs.weights_path, inputs.dataset_path])
    )
    for name, data in files.items():
        folder.write(name, data)
    return folder.root / "report.json"


# --------------------------------------------------------------------------- inputs


def _chosen_methods(options: SaliencyOptions) -> list[str]:
    from mibspec.reference_impl.vision import METHODS

    chosen = list(METHODS) if options.methods is None else list(options.methods)
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"methods: expected distinct names from {sorted(METHODS)}, got {chosen}")
    if options.sampler not in _SAMPLERS:
        raise ValueError(f"sampler: expected one of {_SAMPLERS}, got {options.sampler!r}")
    return chosen


def load_saliency_inputs(weights_path: Path, dataset_path: Path, options: SaliencyOptions) -> SaliencyInputs:
    """Check the options, read the dataset and build the registry model from its weights.

    Raises:
        ValueError: unusable options or inputs, naming them.
    """
    from mibspec.reference_impl.vision import class_patch_masks, load_registry_model, read_weights

    chosen = _chosen_methods(options)
    weights_path, dataset_path = Path(weights_path), Path(dataset_path)
    arch = options.architecture or _metadata(weights_path).get("architecture")
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
    model = load_registry_model(arch, read_weights(weights_path), clean.shape[1:], device=options.device)
    side = math.isqrt(int(doc["perturbation"]["patch_size"]))
    height, width = clean.shape[-2:]
    return SaliencyInputs(
        weights_path=weights_path,
        dataset_path=dataset_path,
        methods=chosen,
        architecture=arch,
        model=model,
        dataset=doc,
        tensors=tensors,
        labels=labels,
        class_masks=class_patch_masks(doc["perturbation"]["locations"], side, height, width),
        curve_steps=int(options.curve_steps or side * side),
    )


# --------------------------------------------------------------------------- compute


def compute_saliency(
    inputs: SaliencyInputs, options: SaliencyOptions, progress: Progress | None = None
) -> SaliencyScores:
    """Dominance, the Shapley ground truth and the methods' maps, and each one's scores.

    Raises:
        ValueError: no image of the dataset is dominant.
    """
    from mibspec.reference_impl.vision import dominant_images, evaluate_dominance

    from ..threads import one_thread

    clean, perturbed = inputs.tensors["clean_images"], inputs.tensors["perturbed_images"]
    with one_thread():
        result = evaluate_dominance(inputs.model, clean, perturbed, inputs.labels, options.threshold)
        if len(result.dominant) == 0:
            raise ValueError("dataset_path: no image meets the dominance prerequisites; nothing to evaluate")
        images = dominant_images(
            inputs.model, clean, perturbed, inputs.labels, result.dominant.tolist(), inputs.class_masks
        )
        truth = _ground_truth(images, options, progress)
        maps = _method_maps(images, inputs.methods, options.maps_seed, progress)
        rows = _score_rows(images, {GROUND_TRUTH_METHOD: truth, **maps}, truth, inputs, options, progress)
    return SaliencyScores(dominance=result, truth=truth, maps=maps, rows=rows)


def _ground_truth(images: DominantImages, options: SaliencyOptions, progress: Progress | None) -> np.ndarray:
    from mibspec.reference_impl.vision import ShapleySettings, dominant_ground_truth

    exact = options.sampler == "exact"
    shapley = ShapleySettings(
        sampler=options.sampler,  # type: ignore[arg-type]
        seed=None if exact else options.shapley_seed,
        n_trials=options.n_trials,
        n_permutations=None if exact else options.n_permutations,
    )
    n_dominant = len(images.indices)
    done = start_task(progress, f"Shapley ground truth of {n_dominant} dominant images", n_dominant)
    count = {"n": 0}

    def advance() -> None:
        count["n"] += 1
        done(count["n"])

    return dominant_ground_truth(images, shapley, advance)


def _method_maps(
    images: DominantImages, methods: list[str], seed: int, progress: Progress | None
) -> dict[str, np.ndarray]:
    from mibspec.reference_impl.vision import saliency_maps

    index = np.asarray(images.indices)
    maps: dict[str, np.ndarray] = {}
    done = start_task(progress, f"maps of {len(methods)} methods", len(methods))
    for i, name in enumerate(methods):
        maps[name] = saliency_maps(
            images.model, images.perturbed[index], images.labels[index], name, seed=seed
        )
        done(i + 1)
    return maps


def _score_rows(
    images: DominantImages,
    evaluated: dict[str, np.ndarray],
    truth: np.ndarray,
    inputs: SaliencyInputs,
    options: SaliencyOptions,
    progress: Progress | None,
) -> dict[str, dict[str, Any]]:
    """Scores and curve areas of each evaluated map set, from the maps as stored."""
    from mibspec.reference_impl.vision import CurveSettings, dominant_curves, map_scores

    curves = CurveSettings(
        steps=inputs.curve_steps,
        score=options.curve_score,  # type: ignore[arg-type]
        convention=options.auc_convention,  # type: ignore[arg-type]
    )
    rows: dict[str, dict[str, Any]] = {}
    done = start_task(progress, "scores and deletion/addition curves", len(evaluated))
    for i, (name, values) in enumerate(evaluated.items()):
        as_stored = values.astype(np.float64)
        scores = map_scores(as_stored, truth, images.areas, WIOU_KS, WIOU_WEIGHTS)
        deletion, addition = dominant_curves(images, as_stored, curves)
        rows[name] = {
            "hit_accuracy": scores.hit_accuracy,
            "wiou": scores.wiou,
            "per_k_iou": list(scores.per_k_iou),
            "deletion_auc": deletion,
            "addition_auc": addition,
        }
        done(i + 1)
    return rows


# --------------------------------------------------------------------------- build


def build_saliency_files(
    inputs: SaliencyInputs, options: SaliencyOptions, scores: SaliencyScores, created: str
) -> dict[str, bytes]:
    """The report folder's files, name → contents, in writing order (``report.json`` last)."""
    provenance = _provenance(created)
    files = {"model.safetensors": inputs.weights_path.read_bytes()}
    files.update(_dataset_files(inputs, provenance))
    stored_truth = scores.truth.astype(np.float64)
    files["shapley.safetensors"] = safetensors_bytes({"ground_truth": stored_truth})
    artifacts = [
        _artifact(files, "dataset", "dataset", "dataset.json", "application/json", kind="shortcut_dataset"),
        _artifact(files, "weights", "weights", "model.safetensors", "application/x-safetensors"),
        _artifact(files, "shapley", "ground_truth", "shapley.safetensors", "application/x-safetensors"),
    ]
    truth_ref = _tensor_ref("ground_truth", stored_truth, "shapley")
    method_rows = []
    for name, row in scores.rows.items():
        if name == GROUND_TRUTH_METHOD:
            # a Shapley player is a spatial position: one value per pixel
            method_rows.append({"name": name, "maps": truth_ref, "channel_reduction": "none", **row})
            continue
        artifact_id, path = f"maps-{name}", f"maps_{name}.safetensors"
        files[path] = safetensors_bytes({"maps": scores.maps[name]})
        artifacts.append(_artifact(files, artifact_id, "maps", path, "application/x-safetensors"))
        ref = _tensor_ref("maps", scores.maps[name], artifact_id)
        method_rows.append({"name": name, "maps": ref, "channel_reduction": "sum", **row})
    claims = _claims(scores, truth_ref, method_rows)
    files["report.json"] = document_bytes(_report(inputs, options, claims, artifacts, provenance))
    return files


def _artifact(
    files: dict[str, bytes], ident: str, role: str, path: str, media_type: str, **extra: Any
) -> dict[str, Any]:
    return artifact_entry(files[path], ident, role, path, media_type, **extra)


def _dataset_files(inputs: SaliencyInputs, provenance: dict[str, Any]) -> dict[str, bytes]:
    """``dataset.safetensors`` (the dataset's four tensors) and ``dataset.json`` naming them."""
    doc, tensors = inputs.dataset, inputs.tensors
    clean, perturbed = tensors["clean_images"], tensors["perturbed_images"]
    dataset_tensors = {
        "clean_images": clean,
        "perturbed_images": perturbed,
        "labels": tensors["labels"],
        "kernels": tensors["kernels"],
    }
    files = {"dataset.safetensors": safetensors_bytes(dataset_tensors)}
    dataset_doc = {key: value for key, value in doc.items() if key != "artifacts"}
    dataset_doc["clean_images"] = _tensor_ref("clean_images", clean)
    dataset_doc["perturbed_images"] = _tensor_ref("perturbed_images", perturbed)
    dataset_doc["labels"] = _tensor_ref("labels", tensors["labels"])
    dataset_doc["perturbation"] = {
        **doc["perturbation"],
        "kernels": _tensor_ref("kernels", tensors["kernels"]),
    }
    dataset_doc["artifacts"] = [
        _artifact(files, "tensors", "images", "dataset.safetensors", "application/x-safetensors")
    ]
    dataset_doc.setdefault("provenance", provenance)
    files["dataset.json"] = json_bytes(dataset_doc)
    return files


def _claims(
    scores: SaliencyScores, truth_ref: dict[str, Any], method_rows: list[dict[str, Any]]
) -> dict[str, Any]:
    result = scores.dominance
    return {
        "clean_accuracy": result.clean_accuracy,
        "perturbed_accuracy": result.perturbed_accuracy,
        "dominance": {
            "n_images": result.n_images,
            "n_dominant": len(result.dominant),
            "rate": result.rate,
        },
        "ground_truth": truth_ref,
        "methods": method_rows,
    }


def _settings(options: SaliencyOptions, steps: int) -> dict[str, Any]:
    sampler = options.sampler
    settings: dict[str, Any] = {
        "dominance_threshold": options.threshold,
        "wiou_ks": list(WIOU_KS),
        "wiou_weights": [float(w) for w in WIOU_WEIGHTS],
        "auc_convention": options.auc_convention,
        "shapley_sampler": sampler,
        "shapley_trials": 1 if sampler == "exact" else options.n_trials,
        "placeholder": "clean",
        "curve_steps": steps,
        "curve_score": options.curve_score,
    }
    if sampler != "exact":
        settings["shapley_permutations"] = options.n_permutations
        settings["shapley_seed"] = options.shapley_seed
    return settings


def _seeds(options: SaliencyOptions, methods: list[str]) -> list[Seed]:
    seeds = (
        []
        if options.sampler == "exact"
        else [Seed(purpose="Shapley permutations", value=options.shapley_seed)]
    )
    if "gradient_shap" in methods:
        seeds.append(Seed(purpose="gradient_shap baselines and sampling", value=options.maps_seed))
    return seeds


def _method(methods: list[str]) -> Method:
    """The report's ``method``: the captum methods and their settings."""
    import captum

    from mibspec.reference_impl.vision import METHODS

    return Method(
        name="captum saliency methods",
        version=captum.__version__,
        description="Standard attribution methods from captum, scored against the Shapley ground "
        "truth over the shortcut patch.",
        hyperparameters={
            "target": "logit of the shortcut's class",
            "input": "perturbed image",
            "methods": {
                name: {"captum": METHODS[name].captum_class, **METHODS[name].settings} for name in methods
            },
        },
        citation=Citation(
            text="Kokhlikyan et al. (2020). Captum: A unified and generic model interpretability library "
            "for PyTorch.",
            url="https://arxiv.org/abs/2009.07896",
        ),
    )


def _report(
    inputs: SaliencyInputs,
    options: SaliencyOptions,
    claims: dict[str, Any],
    artifacts: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> SaliencyReport:
    arch, chosen = inputs.architecture, inputs.methods
    return SaliencyReport(
        profile="default",
        title=f"Pixel-level evaluation of {len(chosen)} captum saliency methods on {arch}",
        description="Maps and ground truth cover the dominant images in dataset order; each method "
        "explains the logit of the shortcut's class on the perturbed image. The row "
        f"{GROUND_TRUTH_METHOD!r} evaluates the ground truth itself (the reference for the deletion and "
        "addition areas).",
        method=_method(chosen),
        task=TaskRef(
            name=options.task_name,
            dataset="dataset",
            split=inputs.dataset.get("split", "test"),
            n_examples=claims["dominance"]["n_images"],
        ),
        seeds=_seeds(options, chosen),
        model=RegistryModel(source="registry", architecture=arch, dtype="float32", weights="weights"),
        settings=SaliencySettings.model_validate(_settings(options, inputs.curve_steps)),
        claims=SaliencyClaims.model_validate(claims),
        artifacts=[Artifact.model_validate(entry) for entry in artifacts],
        provenance=Provenance.model_validate(provenance),
    )
