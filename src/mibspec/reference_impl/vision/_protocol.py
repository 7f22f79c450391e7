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

import numpy as np
import torch
from numpy.typing import NDArray

from ..metrics.saliency import (
    CurveConvention,
    curve_auc,
    dominance,
    hit_accuracy,
    weighted_iou,
    wiou_components,
)
from ._evaluate import CurveScore, Sampler, class_probabilities, curve_scores, shapley_ground_truth

__all__ = [
    "DominanceResult",
    "MapScores",
    "evaluate_dominance",
    "ground_truth_maps",
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


def ground_truth_maps(
    model: torch.nn.Module,
    clean: NDArray[np.generic],
    perturbed: NDArray[np.generic],
    labels: NDArray[np.integer],
    areas: Sequence[NDArray[np.bool_]],
    indices: Sequence[int],
    *,
    sampler: Sampler,
    seed: int | None,
    n_trials: int,
    n_permutations: int | None,
    advance: Callable[[], None] | None = None,
) -> NDArray[np.float64]:
    """Shapley ground truth ``(len(indices), H, W)`` of the images at dataset ``indices``.

    ``areas[j]`` is the dominant area of image ``indices[j]``; the image's seed is
    ``SeedSequence([seed, indices[j]])`` (MS-10).
    """
    maps = []
    for j, index in enumerate(indices):
        truth = shapley_ground_truth(
            model,
            clean[index],
            perturbed[index],
            int(labels[index]),
            areas[j],
            sampler=sampler,
            seed=seed,
            image_index=int(index),
            n_trials=n_trials,
            n_permutations=n_permutations,
        )
        maps.append(truth.values)
        if advance is not None:
            advance()
    height, width = clean.shape[-2:]
    return np.stack(maps) if maps else np.zeros((0, height, width), dtype=np.float64)


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
