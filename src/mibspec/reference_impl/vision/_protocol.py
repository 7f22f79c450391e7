"""The pixel-level saliency protocol over a dataset: what a saliency report claims.

``metrics/saliency.md`` (MS-11) fixes how per-image quantities become report numbers;
the producer (``mibspec score saliency``) and the recompute stage both call these
functions, so a report and its recomputation follow one implementation:

* accuracies are over all images (argmax, lowest index on ties); the dominant images are
  those meeting MS-2, in dataset order;
* hit accuracy is MS-3 over the dominant images; ``per_k_iou[k]`` is the mean over the
  dominant images of IoU_k(map, ground truth) and WIoU the normalised weighted sum of those
  means (equal to the mean of the per-image WIoUs);
* the deletion and addition AUCs are the AUCs (declared convention) of the mean curve over
  the dominant images (equal to the mean of the per-image AUCs for both conventions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.saliency import (
    CurveConvention,
    curve_auc,
    dominance,
    hit_accuracy,
    weighted_iou,
    wiou_components,
)

from ._evaluate import CurveScore, Sampler, class_probabilities, curve_scores, shapley_ground_truth

__all__ = [
    "CurveSettings",
    "DominanceResult",
    "DominantImages",
    "MapScores",
    "ShapleySettings",
    "class_patch_masks",
    "dominant_curves",
    "dominant_ground_truth",
    "dominant_images",
    "evaluate_dominance",
    "map_curves",
    "map_scores",
]


@dataclass(frozen=True, eq=False)
class DominanceResult:
    """Probabilities of every image and the dominance prerequisites (MS-2).

    Attributes:
        p_clean, p_perturbed: ``(N, n_classes)`` float64.
        dominant: dataset indices of the dominant images, ascending.
        clean_accuracy, perturbed_accuracy: argmax accuracy over all N images.
    """

    p_clean: NDArray[np.float64]
    p_perturbed: NDArray[np.float64]
    dominant: NDArray[np.intp]
    clean_accuracy: float
    perturbed_accuracy: float

    @property
    def n_images(self) -> int:
        return int(self.p_clean.shape[0])

    @property
    def rate(self) -> float:
        return len(self.dominant) / self.n_images


def evaluate_dominance(
    model: torch.nn.Module,
    clean: NDArray[np.generic],
    perturbed: NDArray[np.generic],
    labels: NDArray[np.integer],
    threshold: float,
) -> DominanceResult:
    """Probabilities of the clean and perturbed images, accuracies and the dominant images."""
    p_clean = class_probabilities(model, clean)
    p_perturbed = class_probabilities(model, perturbed)
    mask = np.asarray(dominance(p_clean, p_perturbed, labels, threshold=threshold))
    return DominanceResult(
        p_clean=p_clean,
        p_perturbed=p_perturbed,
        dominant=np.flatnonzero(mask),
        clean_accuracy=float(np.mean(p_clean.argmax(axis=1) == labels)),
        perturbed_accuracy=float(np.mean(p_perturbed.argmax(axis=1) == labels)),
    )


@dataclass(frozen=True)
class MapScores:
    """Hit accuracy, mean IoU per k and WIoU of one method's maps (MS-3, MS-6, MS-11)."""

    hit_accuracy: float
    per_k_iou: tuple[float, ...]
    wiou: float


def map_scores(
    maps: NDArray[np.floating],
    truths: NDArray[np.floating],
    areas: Sequence[NDArray[np.bool_]],
    ks: Sequence[int],
    weights: Sequence[float],
) -> MapScores:
    """Scores of ``maps`` ``(n, H, W)`` against ``truths`` ``(n, H, W)`` on the n dominant images."""
    parts = [wiou_components(maps[j], truths[j], ks, weights) for j in range(len(maps))]
    per_k = tuple(float(np.mean([p.ious[i] for p in parts])) for i in range(len(ks)))
    return MapScores(
        hit_accuracy=hit_accuracy(list(maps), list(areas)),
        per_k_iou=per_k,
        wiou=weighted_iou(per_k, weights),
    )


def map_curves(
    model: torch.nn.Module,
    clean: NDArray[np.generic],
    perturbed: NDArray[np.generic],
    labels: NDArray[np.integer],
    maps: NDArray[np.floating],
    n_steps: int,
    *,
    score: CurveScore,
    convention: CurveConvention,
) -> tuple[float, float]:
    """Deletion and addition AUC of the mean curves over the images (MS-7, MS-8, MS-11)."""
    deletion, addition = curve_scores(model, clean, perturbed, labels.tolist(), maps, n_steps, score=score)
    return curve_auc(deletion.mean(axis=0), convention), curve_auc(addition.mean(axis=0), convention)


# --------------------------------------------------------------------------- the dominant images


def class_patch_masks(
    locations: Sequence[Sequence[int]], side: int, height: int, width: int
) -> list[NDArray[np.bool_]]:
    """Each class's patch: a ``side``×``side`` square at its ``[row, col]``, in an H×W mask."""
    masks = []
    for row, col in locations:
        mask = np.zeros((height, width), dtype=bool)
        mask[row : row + side, col : col + side] = True
        masks.append(mask)
    return masks


@dataclass(frozen=True, eq=False)
class DominantImages:
    """The model, the dataset and its dominant images: what the ground truth and curves need.

    Attributes:
        clean, perturbed, labels: the whole dataset (N images).
        indices: dataset indices of the dominant images, ascending.
        areas: the dominant area (its class's patch) of each dominant image.
    """

    model: torch.nn.Module
    clean: NDArray[np.generic]
    perturbed: NDArray[np.generic]
    labels: NDArray[np.integer]
    indices: list[int]
    areas: list[NDArray[np.bool_]]


def dominant_images(
    model: torch.nn.Module,
    clean: NDArray[np.generic],
    perturbed: NDArray[np.generic],
    labels: NDArray[np.integer],
    dominant: Sequence[int],
    class_masks: Sequence[NDArray[np.bool_]],
) -> DominantImages:
    """The dominant images at dataset indices ``dominant``, each with its class's patch."""
    indices = [int(i) for i in dominant]
    areas = [class_masks[labels[i]] for i in indices]
    return DominantImages(model, clean, perturbed, labels, indices, areas)


@dataclass(frozen=True)
class ShapleySettings:
    """How the ground truth is estimated (MS-9, MS-10): the report's ``shapley_*`` settings."""

    sampler: Sampler
    seed: int | None
    n_trials: int
    n_permutations: int | None

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> ShapleySettings:
        """The estimator a report's ``settings`` declare."""
        return cls(
            sampler=settings["shapley_sampler"],
            seed=settings.get("shapley_seed"),
            n_trials=int(settings.get("shapley_trials", 1)),
            n_permutations=settings.get("shapley_permutations"),
        )


def dominant_ground_truth(
    images: DominantImages,
    shapley: ShapleySettings,
    advance: Callable[[], None] | None = None,
    on_trial: Callable[[], None] | None = None,
) -> NDArray[np.float64]:
    """Shapley ground truth ``(n_dominant, H, W)`` of the dominant images; ``advance`` is
    called after each image, ``on_trial`` after each sampling trial.

    The seed of the image with dataset index i is ``SeedSequence([seed, i])`` (MS-10).
    """
    maps = []
    for j, index in enumerate(images.indices):
        truth = shapley_ground_truth(
            images.model,
            images.clean[index],
            images.perturbed[index],
            int(images.labels[index]),
            images.areas[j],
            sampler=shapley.sampler,
            seed=shapley.seed,
            image_index=int(index),
            n_trials=shapley.n_trials,
            n_permutations=shapley.n_permutations,
            on_trial=on_trial,
        )
        maps.append(truth.values)
        if advance is not None:
            advance()
    height, width = images.clean.shape[-2:]
    return np.stack(maps) if maps else np.zeros((0, height, width), dtype=np.float64)


@dataclass(frozen=True)
class CurveSettings:
    """Deletion/addition curves: steps, curve value (MS-7) and AUC convention (MS-8)."""

    steps: int
    score: CurveScore
    convention: CurveConvention


def dominant_curves(
    images: DominantImages, maps: NDArray[np.floating], curves: CurveSettings
) -> tuple[float, float]:
    """Deletion and addition AUC of ``maps`` ``(n_dominant, H, W)`` over the dominant images."""
    index = np.asarray(images.indices)
    return map_curves(
        images.model,
        images.clean[index],
        images.perturbed[index],
        images.labels[index],
        maps,
        curves.steps,
        score=curves.score,
        convention=curves.convention,
    )
