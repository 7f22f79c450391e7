"""Pixel-level saliency metrics: dominance prerequisites, hit accuracy, top-k overlaps, WIoU, curve AUC.

Normative text: ``spec/v1/metrics/saliency.md`` (requirements MS-*).

A "pixel" is one element of the array passed in: maps of any shape are flattened in
C order and ranked by value descending, ties broken by ascending flat index. Reducing
colour channels to one value per spatial pixel is the caller's job and must be declared.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._ranking import descending_order, tie_report
from .checks import (
    as_bool_array,
    as_float_array,
    check_choice,
    check_finite_scalar,
    check_int,
    describe,
)

__all__ = [
    "WIOU_KS",
    "WIOU_WEIGHTS",
    "CurveConvention",
    "WIoUComponents",
    "curve_auc",
    "dominance",
    "hit",
    "hit_accuracy",
    "perturbation_masks",
    "pixel_order",
    "top_k_iou",
    "top_k_mask",
    "top_k_precision",
    "weighted_iou",
    "wiou",
    "wiou_components",
]

WIOU_KS: tuple[int, ...] = (25, 20, 15, 10, 5, 3, 1)
"""The paper's k values for WIoU."""
WIOU_WEIGHTS: tuple[float, ...] = (1, 3, 5, 10, 15, 20, 25)
"""The paper's weights for :data:`WIOU_KS` (sum 79; normalised to sum 1 by default)."""

CurveConvention = Literal["normalised_trapezoid", "unit_step_sum"]
_CONVENTIONS: tuple[str, ...] = ("normalised_trapezoid", "unit_step_sum")


# --------------------------------------------------------------------------- dominance


def _probabilities(value: ArrayLike, name: str) -> NDArray[np.float64]:
    array = as_float_array(value, name)
    if array.ndim == 0:
        raise ValueError(f"{name} must have a class axis (last axis); got a scalar")
    if ((array < 0.0) | (array > 1.0)).any():
        raise ValueError(f"{name} must hold probabilities in [0, 1]; got values outside")
    return array


def dominance(
    p_clean: ArrayLike,
    p_perturbed: ArrayLike,
    label: ArrayLike,
    *,
    threshold: float = 0.9,
) -> bool | NDArray[np.bool_]:
    """The paper's two dominant prerequisites (Eq. 1) for a perturbed image.

    With ``p = f(x)`` (clean image) and ``p̄ = f(x̄)`` (perturbed image) the shortcut is
    dominant for class c iff BOTH hold:

    1. ``p̄_c - p_c > T`` (strict; implies ``p̄_c > T``: the perturbed image is classified
       as c with high confidence while the clean one is not);
    2. ``p_c < max_i p_i`` (strict; the clean image is not predicted as c, ties at the
       maximum count as predicted, so they fail).

    Args:
        p_clean: class probabilities of the clean image(s), shape ``(..., C)``.
        p_perturbed: class probabilities of the perturbed image(s), same shape.
        label: class index c, an int or an int array of shape ``(...)``.
        threshold: T in [0, 1); the paper uses 0.9.

    Returns:
        A bool for a single image (1-D probability vectors), else a bool array ``(...)``.

    Raises:
        ValueError: on shape mismatch, probabilities outside [0, 1], labels out of range or
            a threshold outside [0, 1).
    """
    clean = _probabilities(p_clean, "p_clean")
    perturbed = _probabilities(p_perturbed, "p_perturbed")
    if clean.shape != perturbed.shape:
        raise ValueError(f"p_perturbed must have the shape of p_clean {clean.shape}; got {perturbed.shape}")
    t = check_finite_scalar(threshold, "threshold")
    if not 0.0 <= t < 1.0:
        raise ValueError(f"threshold must be in [0, 1); got {t!r}")
    labels = np.asarray(label)
    if labels.dtype == np.bool_ or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"label must be an int or an int array; got {describe(label)}")
    if labels.shape != clean.shape[:-1]:
        raise ValueError(f"label must have shape {clean.shape[:-1]}; got {labels.shape}")
    n_classes = clean.shape[-1]
    if ((labels < 0) | (labels >= n_classes)).any():
        raise ValueError(f"label must be in [0, {n_classes - 1}]; got values outside")
    index = labels[..., np.newaxis]
    p_c = np.take_along_axis(clean, index, axis=-1)[..., 0]
    p_bar_c = np.take_along_axis(perturbed, index, axis=-1)[..., 0]
    result = (p_bar_c - p_c > t) & (p_c < clean.max(axis=-1))
    return bool(result) if result.ndim == 0 else result


# --------------------------------------------------------------------------- top-k


def pixel_order(saliency: ArrayLike) -> NDArray[np.intp]:
    """Flat (C-order) pixel indices from most to least salient.

    Sorted by value descending, ties broken by ascending flat index. Deletion and
    addition curves remove / insert pixels in this order.

    Raises:
        ValueError: on an empty map or non-finite values.
    """
    values = as_float_array(saliency, "saliency")
    return descending_order(values.ravel())


def top_k_mask(values: ArrayLike, k: int) -> NDArray[np.bool_]:
    """Boolean mask (shape of ``values``) of the k highest values, stable tie-break.

    Exactly k elements are marked: the first k of :func:`pixel_order`.

    Raises:
        ValueError: on k outside ``[0, values.size]`` or non-finite values.
    """
    array = as_float_array(values, "values")
    count = check_int(k, "k", minimum=0, maximum=array.size)
    mask = np.zeros(array.size, dtype=np.bool_)
    mask[descending_order(array.ravel())[:count]] = True
    return mask.reshape(array.shape)


def _top_k_sets(
    a: ArrayLike, b: ArrayLike, k: int, names: tuple[str, str]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    first = as_float_array(a, names[0])
    second = as_float_array(b, names[1])
    if first.shape != second.shape:
        raise ValueError(f"{names[1]} must have the shape of {names[0]} {first.shape}; got {second.shape}")
    check_int(k, "k", minimum=1, maximum=first.size)
    return top_k_mask(first, k), top_k_mask(second, k)


def top_k_iou(a: ArrayLike, b: ArrayLike, k: int) -> float:
    """Intersection over union of the top-k sets of two maps.

    ``IoU_k = |top-k(a) ∩ top-k(b)| / |top-k(a) ∪ top-k(b)|``; both sets hold exactly k
    pixels (:func:`top_k_mask`), so the union is never empty and the value is in [0, 1].

    Raises:
        ValueError: on shape mismatch or k outside ``[1, a.size]``.
    """
    mask_a, mask_b = _top_k_sets(a, b, k, ("a", "b"))
    intersection = int(np.count_nonzero(mask_a & mask_b))
    union = int(np.count_nonzero(mask_a | mask_b))
    return intersection / union


def top_k_precision(values: ArrayLike, relevant_mask: ArrayLike, k: int) -> float:
    """Precision at k: fraction of the top-k pixels of ``values`` that are relevant.

    ``P@k = |top-k(values) ∩ R| / k`` for a binary relevance mask R (the convention of
    Quantus's TopKIntersection). Differs from :func:`top_k_iou`, which compares two
    top-k sets and divides by their union.

    Raises:
        ValueError: on shape mismatch or k outside ``[1, values.size]``.
    """
    array = as_float_array(values, "values")
    relevant = as_bool_array(relevant_mask, "relevant_mask", shape=array.shape)
    count = check_int(k, "k", minimum=1, maximum=array.size)
    return int(np.count_nonzero(top_k_mask(array, count) & relevant)) / count


@dataclass(frozen=True)
class WIoUComponents:
    """Per-k pieces of a WIoU value.

    Attributes:
        ks: the k values, in the order given.
        weights: weights applied (normalised to sum 1 unless ``normalise=False``).
        ious: ``IoU_k`` for each k.
        saliency_ties: per k, whether equal saliency values straddle the top-k cut.
        ground_truth_ties: per k, whether equal ground-truth values straddle the cut
            (e.g. fewer than k non-zero ground-truth pixels: the rest are tied at 0).
        wiou: ``Σ_k weights_k · ious_k``.
    """

    ks: tuple[int, ...]
    weights: tuple[float, ...]
    ious: tuple[float, ...]
    saliency_ties: tuple[bool, ...]
    ground_truth_ties: tuple[bool, ...]
    wiou: float


def wiou_components(
    saliency: ArrayLike,
    ground_truth: ArrayLike,
    ks: Sequence[int] = WIOU_KS,
    weights: Sequence[float] = WIOU_WEIGHTS,
    *,
    normalise: bool = True,
) -> WIoUComponents:
    """Weighted top-k IoU (paper Eq. 3) with its per-k components.

    ``WIoU = Σ_k w_k · |top-k(g) ∩ top-k(φ)| / |top-k(g) ∪ top-k(φ)|`` with g the saliency
    map and φ the ground-truth attribution, ``w_k = weights_k / Σ weights`` (normalised,
    the default, so WIoU ∈ [0, 1]; with ``normalise=False`` the raw weights are used).
    Each top-k set holds exactly k pixels (value descending, ties by flat index); a map
    with fewer than k distinct leading values has a tie at the cut, reported per k.

    Args:
        saliency: attribution map under evaluation.
        ground_truth: ground-truth attribution map, same shape.
        ks: distinct k values in ``[1, saliency.size]``.
        weights: non-negative weights, one per k, with a positive sum.
        normalise: divide the weights by their sum.

    Raises:
        ValueError: on shape mismatch, k out of range or repeated, or invalid weights.
    """
    g = as_float_array(saliency, "saliency")
    phi = as_float_array(ground_truth, "ground_truth")
    if g.shape != phi.shape:
        raise ValueError(f"ground_truth must have the shape of saliency {g.shape}; got {phi.shape}")
    k_values = tuple(check_int(k, f"ks[{i}]", minimum=1, maximum=g.size) for i, k in enumerate(ks))
    if not k_values:
        raise ValueError("ks must hold at least one k; got none")
    if len(set(k_values)) != len(k_values):
        raise ValueError(f"ks must be distinct; got {k_values}")
    w = _wiou_weights(weights, len(k_values), normalise)
    order_g = descending_order(g.ravel())
    order_phi = descending_order(phi.ravel())
    sorted_g = g.ravel()[order_g]
    sorted_phi = phi.ravel()[order_phi]
    ious: list[float] = []
    for k in k_values:
        top_g = np.zeros(g.size, dtype=np.bool_)
        top_phi = np.zeros(g.size, dtype=np.bool_)
        top_g[order_g[:k]] = True
        top_phi[order_phi[:k]] = True
        ious.append(int(np.count_nonzero(top_g & top_phi)) / int(np.count_nonzero(top_g | top_phi)))
    return WIoUComponents(
        ks=k_values,
        weights=tuple(float(x) for x in w),
        ious=tuple(ious),
        saliency_ties=tuple(tie_report(sorted_g, k).straddles for k in k_values),
        ground_truth_ties=tuple(tie_report(sorted_phi, k).straddles for k in k_values),
        wiou=weighted_iou(ious, w, normalise=False),
    )


def _wiou_weights(
    weights: Sequence[float] | NDArray[np.float64], n: int, normalise: bool
) -> NDArray[np.float64]:
    w = as_float_array(list(weights), "weights", ndim=1)
    if w.size != n:
        raise ValueError(f"weights must hold one weight per k ({n}); got {w.size}")
    if (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum; got {tuple(w)}")
    return w / w.sum() if normalise else w


def weighted_iou(
    ious: Sequence[float], weights: Sequence[float] | NDArray[np.float64], *, normalise: bool = True
) -> float:
    """WIoU from per-k IoUs: ``Σ_k w_k·IoU_k`` with ``w`` normalised to sum 1 by default (MS-6).

    Example:
        >>> weighted_iou([1.0, 0.5], [1, 3])
        0.625
    """
    values = as_float_array(list(ious), "ious", ndim=1)
    w = _wiou_weights(weights, values.size, normalise)
    # An exactly rounded sum: the value must not depend on the BLAS kernel the machine picks.
    return math.fsum(float(a) * float(b) for a, b in zip(w, values, strict=True))


def wiou(
    saliency: ArrayLike,
    ground_truth: ArrayLike,
    ks: Sequence[int] = WIOU_KS,
    weights: Sequence[float] = WIOU_WEIGHTS,
    *,
    normalise: bool = True,
) -> float:
    """Weighted top-k IoU (paper Eq. 3); see :func:`wiou_components` for the definition."""
    return wiou_components(saliency, ground_truth, ks, weights, normalise=normalise).wiou


# --------------------------------------------------------------------------- hit accuracy


def hit(saliency: ArrayLike, dominant_mask: ArrayLike, *, top: int = 1) -> bool:
    """Whether the most salient pixel(s) fall inside the dominant area.

    True iff each of the first ``top`` pixels of :func:`pixel_order` lies in the dominant
    area. The default ``top = 1`` is the pointing-game reading of the paper's hit
    accuracy (the single most important pixel; ties broken by lowest flat index).

    Args:
        saliency: attribution map.
        dominant_mask: boolean mask of the dominant (shortcut) area, same shape, non-empty.
        top: number of leading pixels that must all be inside.

    Raises:
        ValueError: on shape mismatch, an empty dominant area or ``top`` out of range.
    """
    values = as_float_array(saliency, "saliency")
    area = as_bool_array(dominant_mask, "dominant_mask", shape=values.shape)
    if not area.any():
        raise ValueError("dominant_mask must mark at least one pixel; got an empty area")
    count = check_int(top, "top", minimum=1, maximum=values.size)
    leading = descending_order(values.ravel())[:count]
    return bool(area.ravel()[leading].all())


def hit_accuracy(
    saliencies: Iterable[ArrayLike],
    dominant_masks: Iterable[ArrayLike],
    *,
    top: int = 1,
) -> float:
    """Hit accuracy (HA): fraction of positive samples whose :func:`hit` is True.

    ``HA = (1/n) Σ_i hit(g_i, D_i)`` over the n images that satisfy the dominance
    prerequisites (positive samples); images without a dominant area are not passed.

    Raises:
        ValueError: on no samples, a different number of maps and masks, or any
            :func:`hit` error (the message names the sample index).
    """
    maps = list(saliencies)
    masks = list(dominant_masks)
    if len(maps) != len(masks):
        raise ValueError(
            f"saliencies and dominant_masks must pair up; got {len(maps)} maps and {len(masks)} masks"
        )
    if not maps:
        raise ValueError("hit_accuracy needs at least one positive sample; got 0")
    hits = 0
    for i, (saliency, mask) in enumerate(zip(maps, masks, strict=True)):
        try:
            hits += hit(saliency, mask, top=top)
        except ValueError as error:
            raise ValueError(f"sample {i}: {error}") from error
    return hits / len(maps)


# --------------------------------------------------------------------------- curves


def perturbation_masks(saliency: ArrayLike, n_steps: int) -> NDArray[np.bool_]:
    """Cumulative masks for deletion / addition curves.

    ``masks[s]`` marks the first s pixels of :func:`pixel_order` (s = 0 … n_steps): the
    pixels deleted (deletion curve) or inserted (addition curve) after step s. ``masks[0]``
    is empty; each mask adds exactly one pixel to the previous one.

    Returns:
        Boolean array of shape ``(n_steps + 1, *saliency.shape)``.

    Raises:
        ValueError: on ``n_steps`` outside ``[1, saliency.size]``.
    """
    values = as_float_array(saliency, "saliency")
    steps = check_int(n_steps, "n_steps", minimum=1, maximum=values.size)
    order = descending_order(values.ravel())[:steps]
    # rank[p] = position of pixel p in the order (size = never removed)
    rank = np.full(values.size, values.size, dtype=np.intp)
    rank[order] = np.arange(steps)
    masks = rank[np.newaxis, :] < np.arange(steps + 1)[:, np.newaxis]
    return masks.reshape((steps + 1, *values.shape))


def curve_auc(values: ArrayLike, convention: CurveConvention) -> float:
    """Area under a deletion or addition curve.

    ``values[s]`` is the model score after s perturbation steps, s = 0 … S (step 0 is the
    unperturbed input and must be included).

    * ``"normalised_trapezoid"`` (RISE convention): trapezoid over ``x_s = s / S`` in
      [0, 1]: ``AUC = Σ_{s=0}^{S-1} (v_s + v_{s+1}) / (2S)``. Scores in [0, 1] give an AUC
      in [0, 1].
    * ``"unit_step_sum"``: ``AUC = Σ_{s=0}^{S} v_s`` (dx = 1, every given value, step 0
      included).

    Raises:
        ValueError: on fewer than two values, non-finite values or unknown convention.
    """
    curve = as_float_array(values, "values", ndim=1)
    mode = check_choice(convention, "convention", _CONVENTIONS)
    if curve.size < 2:
        raise ValueError(f"values must hold steps 0 … S with S >= 1 (at least 2 values); got {curve.size}")
    if mode == "unit_step_sum":
        return float(np.sum(curve))
    n_steps = curve.size - 1
    return float(np.sum(curve[:-1] + curve[1:]) / (2.0 * n_steps))
