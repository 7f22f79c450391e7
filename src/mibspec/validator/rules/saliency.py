"""Saliency-track rules: Shapley sample counts (D), aggregates that follow from their
claimed parts (C), and a shortcut dataset's perturbation that fits its images (B). The
metrics come from ``mibspec.reference_impl``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding

from .._context import RuleContext
from ._registry import compare, interval, rule, with_defaults


@rule("saliency-samples", track="saliency", codes=("D104",))
def saliency_samples(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Monte-Carlo Shapley ground truth averages at least the profile's number of trials."""
    settings = with_defaults(ctx, doc["settings"], "SaliencySettings")
    minimum = ctx.profile.min_shapley_trials
    if settings["shapley_sampler"] != "exact" and settings["shapley_trials"] < minimum:
        yield ctx.finding(
            "D104",
            "/settings/shapley_trials",
            trials=settings["shapley_trials"],
            minimum=minimum,
            profile_name=ctx.profile.name,
        )


@rule("saliency-aggregates", track="saliency", codes=("C110", "C111"))
def saliency_aggregates(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """WIoU equals the weighted per-k IoUs; the dominance rate equals dominant / images."""
    from mibspec.metrics.saliency import weighted_iou

    settings, claims = doc["settings"], doc["claims"]
    ks, weights = settings["wiou_ks"], settings["wiou_weights"]
    if len(ks) != len(weights):
        yield ctx.finding(
            "C110",
            "/settings/wiou_weights",
            what="WIoU weights",
            claimed=f"{len(weights)} weights",
            recomputed=f"one per k ({len(ks)})",
        )
        return
    for m, method in enumerate(claims["methods"]):
        if "per_k_iou" not in method:
            continue
        pointer = f"/claims/methods/{m}"
        if len(method["per_k_iou"]) != len(ks):
            yield ctx.finding(
                "C110",
                f"{pointer}/per_k_iou",
                what="per-k IoUs",
                claimed=f"{len(method['per_k_iou'])} values",
                recomputed=f"one per k ({len(ks)})",
            )
            continue
        recomputed = weighted_iou(method["per_k_iou"], weights)
        # A weighted mean increases with every part: the interval ends bound it (C-10).
        spans = [interval(ctx, f"{pointer}/per_k_iou/{i}", x) for i, x in enumerate(method["per_k_iou"])]
        bounds = (
            weighted_iou([max(low, 0.0) for low, _ in spans], weights),
            weighted_iou([min(high, 1.0) for _, high in spans], weights),
        )
        yield from compare(
            ctx, "C110", f"{pointer}/wiou", method["wiou"], recomputed, bounds=bounds, what="WIoU"
        )
    dominance = claims["dominance"]
    if dominance["n_dominant"] > dominance["n_images"] or dominance["n_images"] == 0:
        yield ctx.finding(
            "C111",
            "/claims/dominance/n_dominant",
            claimed=dominance["n_dominant"],
            recomputed=f"at most n_images = {dominance['n_images']} (and n_images > 0)",
        )
        return
    rate = dominance["n_dominant"] / dominance["n_images"]
    yield from compare(ctx, "C111", "/claims/dominance/rate", dominance["rate"], rate)


@rule("saliency-map-shape", track="saliency", codes=("C117",))
def saliency_map_shape(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The ground truth and every method's maps: one (H, W) map per dominant image, one shape."""
    claims = doc["claims"]
    n_dominant = claims["dominance"]["n_dominant"]
    truth = claims["ground_truth"]["shape"]
    if len(truth) != 3 or truth[0] != n_dominant:
        yield ctx.finding(
            "C117",
            "/claims/ground_truth/shape",
            what="the ground truth",
            shape=truth,
            expected=f"[{n_dominant}, H, W] (n_dominant = {n_dominant})",
        )
        return
    for m, method in enumerate(claims["methods"]):
        shape = method["maps"]["shape"]
        if shape != truth:
            yield ctx.finding(
                "C117",
                f"/claims/methods/{m}/maps/shape",
                what=f"the maps of {method['name']!r}",
                shape=shape,
                expected=f"{truth}, the ground truth's",
            )


@rule("shortcut-perturbation-fits", kinds=("shortcut_dataset",), codes=("B102",))
def shortcut_perturbation_fits(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The shortcut perturbation fits the images: square patch and kernel, one patch location
    per class, each patch inside the image, kernels declared (n_classes, √K, √K)."""
    perturbation = doc["perturbation"]
    pointer = "/perturbation"
    _, height, width = doc["image_shape"]
    sides = {}
    for name in ("patch_size", "kernel_size"):
        value = perturbation[name]
        side = math.isqrt(value)
        if side * side != value:
            yield ctx.finding(
                "B102", f"{pointer}/{name}", detail=f"{name} {value} is not a square (√{value}×√{value})"
            )
        sides[name] = side
    locations = perturbation["locations"]
    if len(locations) != doc["n_classes"]:
        yield ctx.finding(
            "B102",
            f"{pointer}/locations",
            detail=f"{len(locations)} patch locations for {doc['n_classes']} classes (one per class)",
        )
    side = sides["patch_size"]
    for c, location in enumerate(locations):
        row, col = location
        if row + side > height or col + side > width:
            yield ctx.finding(
                "B102",
                f"{pointer}/locations/{c}",
                detail=f"the {side}×{side} patch at [{row}, {col}] does not fit the {height}×{width} images",
            )
    expected = [doc["n_classes"], sides["kernel_size"], sides["kernel_size"]]
    if list(perturbation["kernels"]["shape"]) != expected:
        yield ctx.finding(
            "B102",
            f"{pointer}/kernels/shape",
            detail=f"the kernels are declared {perturbation['kernels']['shape']}, "
            f"not (n_classes, √K, √K) = {expected}",
        )
