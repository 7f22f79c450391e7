"""Recompute a saliency-track report: registry model + shortcut dataset + declared maps → claims.

Normative text: ``spec/v1/SPEC.md`` (R-2, R-3, M-3) and ``spec/v1/metrics/saliency.md``.
Steps:

1. build the declared registry architecture and load its weights artifact (names and
   shapes checked; nothing submitted is executed);
2. read the shortcut dataset of ``task.dataset``: clean and perturbed images, labels, and
   the class patches (``perturbation.locations``, √D×√D);
3. evaluate every image: accuracies, the dominance prerequisites (MS-2) with the declared
   threshold, the dominant images in dataset order;
4. recompute the Shapley ground truth of each dominant image with the declared sampler,
   trials, permutations and seed (MS-9, MS-10) and compare it with the declared maps
   element by element;
5. from each method's declared maps: hit accuracy, mean IoU per k and WIoU against the
   ground truth, and the deletion and addition AUC from the model (MS-3 … MS-8, MS-11).

Step 5 ranks the declared ground truth when it agrees with the recomputation within
tolerance and the recomputed one otherwise: rankings are discontinuous, and two values
equal within tolerance must not change a verdict through a near-tie.

Tolerances: the profile's recomputation tolerance for the model's dtype for everything
that runs the model (accuracies, dominance, the ground truth, curve areas); its
consistency tolerance for hit accuracy, IoU and WIoU, which follow from the maps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mibspec.core.comparisons import Comparison, Recomputation, recompute_tolerance
from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos
from mibspec.reference_impl.threads import one_thread

from ._inputs import UnusableInputError, check_declared_dtype, error_findings, load_referenced_document

if TYPE_CHECKING:  # the vision module imports torch, which this module loads only when it runs
    from mibspec.reference_impl.vision import CurveSettings, DominanceResult, DominantImages, ShapleySettings

__all__ = ["recompute"]


def recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation:
    """The report's claims recomputed: its comparisons, or the finding that stopped it."""
    try:
        with one_thread():
            return _recompute(ctx, progress)
    except UnusableInputError as exc:
        return Recomputation(findings=error_findings(ctx, exc))


# --------------------------------------------------------------------------- inputs


def _read(path: Path, media_type: str, name: str | None, pointer: str, what: str) -> np.ndarray:
    try:
        infos = tensor_infos(path, media_type)
        only = next(iter(infos.values())) if len(infos) == 1 else None
        info = only if name is None else infos.get(name)
        if info is None:
            wanted = "exactly one tensor" if name is None else f"a tensor {name!r}"
            raise SidecarError(f"expected {wanted}, found {sorted(str(k) for k in infos)}")
        return np.array(load_tensor(path, info))
    except (SidecarError, OSError, ValueError) as exc:
        raise UnusableInputError(pointer, f"cannot read {what} from {path.name!r}: {exc}") from exc


def _report_tensor(ctx: RecomputeContext, ref: dict[str, Any], pointer: str, what: str) -> np.ndarray:
    """A tensor the report declares (maps, ground truth), read from its artifact."""
    artifact_id = ref["artifact"]
    entry = ctx.artifacts.get(artifact_id)
    if entry is None or artifact_id in ctx.broken_artifacts:
        raise UnusableInputError(pointer, f"artifact {artifact_id!r} is not available")
    return _read(ctx.folder / entry["path"], entry["media_type"], ref.get("tensor"), pointer, what)


def _dataset_tensor(doc: dict[str, Any], folder: Path, field: str) -> np.ndarray:
    ref = doc[field]
    entry = next((a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"]), None)
    if entry is None:
        raise UnusableInputError("/task/dataset", f"the dataset declares no artifact {ref['artifact']!r}")
    return _read(folder / entry["path"], entry["media_type"], ref.get("tensor"), "/task/dataset", field)


def _dataset(ctx: RecomputeContext) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Clean and perturbed images (N, C, H, W), labels (N,) and each class's patch mask."""
    from mibspec.reference_impl.vision import class_patch_masks

    task = ctx.data["task"]
    if task.get("dataset") is None:
        raise UnusableInputError("/task/dataset", "the report declares no shortcut dataset to recompute on")
    doc, folder = load_referenced_document(ctx, task["dataset"], "/task/dataset", "shortcut_dataset")
    clean = _dataset_tensor(doc, folder, "clean_images")
    perturbed = _dataset_tensor(doc, folder, "perturbed_images")
    labels = _dataset_tensor(doc, folder, "labels")
    if clean.ndim != 4 or perturbed.shape != clean.shape or labels.shape != (clean.shape[0],):
        raise UnusableInputError(
            "/task/dataset",
            f"expected images (N, C, H, W) twice and N labels; got {list(clean.shape)}, "
            f"{list(perturbed.shape)} and {list(labels.shape)}",
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise UnusableInputError("/task/dataset", f"labels must be integers; got {labels.dtype}")
    n_classes = int(doc["n_classes"])
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise UnusableInputError("/task/dataset", f"labels must lie in [0, {n_classes - 1}]")
    height, width = clean.shape[-2:]
    side = _patch_side(doc["perturbation"], n_classes, height, width)
    masks = class_patch_masks(doc["perturbation"]["locations"], side, height, width)
    return clean, perturbed, labels.astype(np.int64), masks


def _patch_side(perturbation: dict[str, Any], n_classes: int, height: int, width: int) -> int:
    """The side √D of the class patches, after checking that each patch fits the images."""
    side = math.isqrt(int(perturbation["patch_size"]))
    if side * side != perturbation["patch_size"]:
        raise UnusableInputError(
            "/task/dataset", f"patch_size D = {perturbation['patch_size']} is not a square (√D×√D patch)"
        )
    locations = perturbation["locations"]
    if len(locations) != n_classes:
        raise UnusableInputError("/task/dataset", f"{len(locations)} patch locations for {n_classes} classes")
    for c, location in enumerate(locations):
        if len(location) != 2:
            raise UnusableInputError("/task/dataset", f"the location of class {c} is not [row, col]")
        row, col = location
        if row + side > height or col + side > width:
            raise UnusableInputError(
                "/task/dataset",
                f"the patch of class {c} at {location} does not fit the {height}x{width} images",
            )
    return side


def _model(ctx: RecomputeContext, image_shape: tuple[int, ...]) -> Any:
    from mibspec.reference_impl.vision import ARCHITECTURES, load_registry_model, read_weights

    model = ctx.data["model"]
    if model["source"] != "registry":
        raise UnusableInputError(
            "/model/source",
            "saliency recomputation needs a registry model (an architecture and a weights artifact)",
        )
    if model["architecture"] not in ARCHITECTURES:
        raise UnusableInputError(
            "/model/architecture",
            f"unknown registry architecture {model['architecture']!r}; "
            f"this version has {sorted(ARCHITECTURES)}",
        )
    dtype = model.get("dtype", "float32")
    entry = ctx.artifacts.get(model["weights"])
    if entry is None or model["weights"] in ctx.broken_artifacts:
        raise UnusableInputError("/model/weights", f"artifact {model['weights']!r} is not available")
    if entry["media_type"] != "application/x-safetensors":
        raise UnusableInputError("/model/weights", "registry weights must be a safetensors file")
    check_declared_dtype(ctx, model, dtype, [ctx.folder / entry["path"]], "/model")
    try:
        weights = read_weights(ctx.folder / entry["path"])
        return load_registry_model(
            model["architecture"],
            weights,
            image_shape,
            dtype=dtype,
            device=ctx.device,
        )
    except ValueError as exc:
        raise UnusableInputError("/model/weights", str(exc)) from exc


def _check_settings(settings: dict[str, Any], n_players: int) -> None:
    from mibspec.metrics.shapley import MAX_EXACT_PLAYERS

    sampler = settings["shapley_sampler"]
    if sampler == "exact":
        if n_players > MAX_EXACT_PLAYERS:
            raise UnusableInputError(
                "/settings/shapley_sampler",
                f"exact Shapley over {n_players} pixels is not offered (at most {MAX_EXACT_PLAYERS})",
            )
        return
    if settings.get("shapley_seed") is None:
        raise UnusableInputError(
            "/settings/shapley_seed", "a sampled ground truth can only be recomputed from its declared seed"
        )
    permutations = settings.get("shapley_permutations")
    if permutations is None:
        raise UnusableInputError(
            "/settings/shapley_permutations", "the number of permutations is not declared"
        )
    if sampler == "antithetic" and (permutations % 2 or permutations < 4):
        raise UnusableInputError(
            "/settings/shapley_permutations",
            f"antithetic sampling needs an even count >= 4; got {permutations}",
        )
    if sampler == "rotated_antithetic" and (permutations % 4 or permutations < 8):
        raise UnusableInputError(
            "/settings/shapley_permutations",
            f"rotated antithetic sampling needs a multiple of 4, >= 8; got {permutations}",
        )
    if sampler == "permutation" and permutations < 2:
        raise UnusableInputError("/settings/shapley_permutations", "permutation sampling needs at least 2")


# --------------------------------------------------------------------------- recompute


def _worst(declared: np.ndarray, recomputed: np.ndarray, rel: float) -> tuple[int, ...]:
    """Index of the element furthest outside (or least inside) ``|d − r| ≤ abs + rel·|r|``."""
    excess = np.abs(declared - recomputed) - rel * np.abs(recomputed)
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), excess.shape))


Tolerance = tuple[float, float]


def _comparison(pointer: str, quantity: str, claimed: Any, value: float, tolerance: Tolerance) -> Comparison:
    return Comparison(
        pointer, quantity, None if claimed is None else float(claimed), float(value), *tolerance
    )


def _recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation:
    from mibspec.reference_impl.vision import ShapleySettings, dominant_images, evaluate_dominance

    report, profile = ctx.data, ctx.profile
    settings, claims = report["settings"], report["claims"]
    model_tol = recompute_tolerance(profile, report["model"].get("dtype", "float32"))
    map_tol = float(profile["consistency"]["abs"]), float(profile["consistency"]["rel"])
    clean, perturbed, labels, class_masks = _dataset(ctx)
    model = _model(ctx, tuple(clean.shape[1:]))
    n_players = int(class_masks[0].sum())
    _check_settings(settings, n_players)

    progress.start(f"evaluating {clean.shape[0]} clean and perturbed images", 1)
    result = evaluate_dominance(
        model, clean, perturbed, labels, float(settings.get("dominance_threshold", 0.9))
    )
    progress.advance()
    comparisons = _dominance_comparisons(report["task"], claims, result, model_tol)
    if len(result.dominant) == 0:
        raise UnusableInputError("/claims/dominance/n_dominant", "no image meets the dominance prerequisites")
    images = dominant_images(model, clean, perturbed, labels, result.dominant.tolist(), class_masks)
    ground_truth, ranked_truth = _ground_truth(
        ctx, images, ShapleySettings.from_settings(settings), model_tol, progress
    )
    comparisons.append(ground_truth)
    curves = _curve_settings(settings, n_players, clean.shape[-2:])
    scoring = _MethodScoring(images, ranked_truth, settings["wiou_ks"], settings["wiou_weights"], curves)
    methods = claims["methods"]
    progress.start(f"scores and curves of {len(methods)} methods", len(methods))
    for m, method in enumerate(methods):
        comparisons += _method_comparisons(ctx, m, method, scoring, (model_tol, map_tol))
        progress.advance()
    return Recomputation(comparisons=comparisons)


def _dominance_comparisons(
    task: dict[str, Any], claims: dict[str, Any], result: DominanceResult, tolerance: Tolerance
) -> list[Comparison]:
    """The image count, the accuracies and the dominance claims against the evaluation."""
    found = []
    exact = (0.0, 0.0)  # counts
    if "n_examples" in task:
        found.append(_comparison("/task/n_examples", "images", task["n_examples"], result.n_images, exact))
    dominance = claims["dominance"]
    for pointer, quantity, claimed, value, allowed in (
        (
            "/claims/clean_accuracy",
            "accuracy on clean images",
            claims.get("clean_accuracy"),
            result.clean_accuracy,
            tolerance,
        ),
        (
            "/claims/perturbed_accuracy",
            "accuracy on perturbed images",
            claims.get("perturbed_accuracy"),
            result.perturbed_accuracy,
            tolerance,
        ),
        ("/claims/dominance/n_images", "images", dominance["n_images"], result.n_images, exact),
        (
            "/claims/dominance/n_dominant",
            "dominant images",
            dominance["n_dominant"],
            len(result.dominant),
            exact,
        ),
        ("/claims/dominance/rate", "dominant rate", dominance["rate"], result.rate, tolerance),
    ):
        found.append(_comparison(pointer, quantity, claimed, value, allowed))
    return found


def _ground_truth(
    ctx: RecomputeContext,
    images: DominantImages,
    shapley: ShapleySettings,
    tolerance: Tolerance,
    progress: Progress,
) -> tuple[Comparison, np.ndarray]:
    """The declared ground truth against the recomputed one, and the ground truth to rank.

    The declared one is ranked when it agrees within tolerance (see the module's docstring).
    """
    from mibspec.reference_impl.vision import dominant_ground_truth

    n_dominant = len(images.indices)
    height, width = images.clean.shape[-2:]
    claimed = ctx.data["claims"]["ground_truth"]
    declared_truth = _report_tensor(ctx, claimed, "/claims/ground_truth", "the ground truth")
    if declared_truth.shape != (n_dominant, height, width):
        raise UnusableInputError(
            "/claims/ground_truth",
            f"the ground truth has shape {list(declared_truth.shape)}; the {n_dominant} recomputed dominant "
            f"images need [{n_dominant}, {height}, {width}]",
        )
    progress.start(f"Shapley ground truth of {n_dominant} dominant images", n_dominant)
    # advance(0) between trials: a declared trial count far beyond the time limit stops there
    truth = dominant_ground_truth(images, shapley, progress.advance, on_trial=lambda: progress.advance(0))
    declared = declared_truth.astype(np.float64)
    abs_tol, rel_tol = tolerance
    j, r, c = _worst(declared, truth, rel_tol)
    comparison = Comparison(
        "/claims/ground_truth",
        f"Shapley value of image {images.indices[j]}, pixel ({r}, {c}) "
        f"(the largest deviation of {truth.size} values)",
        float(declared[j, r, c]),
        float(truth[j, r, c]),
        abs_tol,
        rel_tol,
    )
    return comparison, declared if comparison.within else truth


def _curve_settings(settings: dict[str, Any], n_players: int, shape: tuple[int, ...]) -> CurveSettings:
    """The declared curve settings, after checking the WIoU and curve settings against the images."""
    from mibspec.reference_impl.vision import CurveSettings

    ks, weights = settings["wiou_ks"], settings["wiou_weights"]
    if len(ks) != len(weights):
        raise UnusableInputError("/settings/wiou_weights", f"{len(weights)} weights for {len(ks)} k values")
    height, width = shape
    steps = settings.get("curve_steps") or n_players
    if steps > height * width:
        raise UnusableInputError("/settings/curve_steps", f"{steps} steps exceed the {height * width} pixels")
    return CurveSettings(
        steps=int(steps),
        score=settings.get("curve_score", "probability"),
        convention=settings.get("auc_convention", "normalised_trapezoid"),
    )


@dataclass(frozen=True, eq=False)
class _MethodScoring:
    """What a method's maps are scored with: the dominant images, the ground truth ranked, the
    WIoU's ks and weights, the curve settings."""

    images: DominantImages
    truth: np.ndarray
    ks: list[int]
    weights: list[float]
    curves: CurveSettings


def _method_comparisons(
    ctx: RecomputeContext,
    m: int,
    method: dict[str, Any],
    scoring: _MethodScoring,
    tolerances: tuple[Tolerance, Tolerance],
) -> list[Comparison]:
    """Method ``m``'s claimed scores and curve areas against those of its declared maps."""
    from mibspec.reference_impl.vision import dominant_curves, map_scores

    model_tol, map_tol = tolerances
    pointer, name = f"/claims/methods/{m}", method["name"]
    maps = _method_maps(ctx, method, pointer, scoring.truth.shape)
    try:
        scores = map_scores(maps, scoring.truth, scoring.images.areas, scoring.ks, scoring.weights)
    except ValueError as exc:
        raise UnusableInputError("/settings/wiou_ks", str(exc)) from exc
    found = [
        _comparison(
            f"{pointer}/hit_accuracy",
            f"{name}: hit accuracy",
            method["hit_accuracy"],
            scores.hit_accuracy,
            map_tol,
        ),
        _comparison(f"{pointer}/wiou", f"{name}: WIoU", method["wiou"], scores.wiou, map_tol),
    ]
    if method.get("per_k_iou") is not None and len(method["per_k_iou"]) == len(scoring.ks):
        for i, (k, value) in enumerate(zip(scoring.ks, scores.per_k_iou, strict=True)):
            claimed = method["per_k_iou"][i]
            found.append(
                _comparison(f"{pointer}/per_k_iou/{i}", f"{name}: mean IoU at k={k}", claimed, value, map_tol)
            )
    if method.get("deletion_auc") is None and method.get("addition_auc") is None:
        return found
    deletion, addition = dominant_curves(scoring.images, maps, scoring.curves)
    for field, label, value in (
        ("deletion_auc", "deletion AUC", deletion),
        ("addition_auc", "addition AUC", addition),
    ):
        if method.get(field) is not None:
            found.append(
                _comparison(f"{pointer}/{field}", f"{name}: {label}", method[field], value, model_tol)
            )
    return found


def _method_maps(
    ctx: RecomputeContext, method: dict[str, Any], pointer: str, shape: tuple[int, ...]
) -> np.ndarray:
    """A method's declared maps as float64, checked to be finite and of the ground truth's shape."""
    maps = _report_tensor(ctx, method["maps"], f"{pointer}/maps", "the maps").astype(np.float64)
    if maps.shape != shape:
        n_dominant, height, width = shape
        raise UnusableInputError(
            f"{pointer}/maps",
            f"the maps have shape {list(maps.shape)}; the {n_dominant} dominant images need "
            f"[{n_dominant}, {height}, {width}]",
        )
    if not np.isfinite(maps).all():
        raise UnusableInputError(f"{pointer}/maps", "the maps hold NaN or infinite values")
    return maps
