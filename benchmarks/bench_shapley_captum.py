"""Shapley ground truth over a 25-pixel shortcut patch: the batched game against captum.

Setting: the shipped classifier ``examples/models/tiny-cnn-digits`` (registry architecture
``tiny-cnn-v1``, 24×24 images) on the dominant images of ``examples/saliency-digits``; the
players are the 5×5 patch's pixels, the placeholder is the clean image (MS-9), the value is
the shortcut class's probability. One torch thread, CPU.

Part 1, speed, the same 5 permutations for every contender (median over repeats, CPU time):

* ours: ``shapley_from_permutations`` on :class:`~mibspec.reference_impl.vision.PixelGame`
  (2 + 5·24 = 122 coalitions, built and scored in one batched forward);
* the one-batch floor: one forward over the 122 prefix images, built beforehand;
* captum ``ShapleyValueSampling`` replaying the same permutations (its
  ``permutation_generator`` is replaced), at its default ``perturbations_per_eval`` = 1
  and at the best of several values. Its forward function scatters the 25 pixel values
  into the image, as the game does.

The attributions of all contenders are checked equal (max |Δ| printed).

Part 2, accuracy per model evaluation: plain permutation sampling as captum does it
(random permutations, 1 + 25·P evaluations for P permutations) against antithetic
permutations (each drawn permutation with its reverse) and rotated antithetic permutations
(with its reverse, its half rotation and that rotation's reverse), 2 + 24·P evaluations. Errors are
measured against a high-sample reference (antithetic, ``--reference`` permutations) as the
mean squared error over the players, images and ``--repeats`` repetitions, less the
reference's own variance (estimated from its standard error). Both estimators
average independent units, so their MSE scales as 1/P: the antithetic budget that reaches
captum's error is ``P_needed = P_ours · MSE_ours / MSE_captum``, and the evaluation ratio
is ``(1 + 25·P_captum) / (2 + 24·P_needed)``.

Run: ``python benchmarks/bench_shapley_captum.py [--images 8] [--repeats 30] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from captum.attr import ShapleyValueSampling

from mibspec.core.sidecars import load_tensor, read_safetensors_header
from mibspec.metrics.shapley import draw_permutations, shapley_from_permutations
from mibspec.reference_impl.vision import (
    PixelGame,
    evaluate_dominance,
    load_registry_model,
    read_weights,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "saliency-digits"


def load_example() -> tuple[torch.nn.Module, dict[str, np.ndarray], list[np.ndarray], np.ndarray]:
    """Model, dataset tensors, per-class patch masks and the dominant image indices."""
    path = EXAMPLE / "dataset.safetensors"
    tensors = {
        name: np.array(load_tensor(path, info)) for name, info in read_safetensors_header(path).items()
    }
    model = load_registry_model(
        "tiny-cnn-v1", read_weights(EXAMPLE / "model.safetensors"), tensors["clean_images"].shape[1:]
    )
    doc = json.loads((EXAMPLE / "dataset.json").read_text(encoding="utf-8"))
    side = math.isqrt(doc["perturbation"]["patch_size"])
    masks = []
    for row, col in doc["perturbation"]["locations"]:
        mask = np.zeros(tensors["clean_images"].shape[-2:], dtype=bool)
        mask[row : row + side, col : col + side] = True
        masks.append(mask)
    result = evaluate_dominance(
        model, tensors["clean_images"], tensors["perturbed_images"], tensors["labels"], 0.9
    )
    return model, tensors, masks, result.dominant


def cpu_times(contenders: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median CPU seconds of each contender, timed round-robin (one warm-up call each first),
    so that a busy machine slows every contender alike. Every other round runs in reverse
    order, so that no contender always follows the same one (whose memory use leaves the
    caches and the allocator in a state that favours or hurts the next)."""
    for fn in contenders.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for round_ in range(repeats):
        order = list(contenders.items())
        for name, fn in order if round_ % 2 == 0 else order[::-1]:
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return {name: statistics.median(values) for name, values in times.items()}


class CaptumGame:
    """captum's view of the same game: 25 pixel values in, the class probability out."""

    def __init__(
        self, model: torch.nn.Module, clean: np.ndarray, perturbed: np.ndarray, label: int, area: np.ndarray
    ):
        self.model, self.label = model, label
        self.shape = clean.shape
        self.index = torch.as_tensor(np.flatnonzero(area))
        self.base = torch.as_tensor(clean).reshape(1, -1)
        self.inputs = torch.as_tensor(perturbed).reshape(1, -1)[:, self.index].clone()
        self.baselines = self.base[:, self.index].clone()

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        x = self.base.expand(values.shape[0], -1).clone()
        x[:, self.index] = values
        logits = self.model(x.reshape(values.shape[0], *self.shape))
        return torch.softmax(logits.to(torch.float64), dim=-1)[:, self.label]

    def attribute(self, permutations: np.ndarray, per_eval: int) -> np.ndarray:
        sampler = ShapleyValueSampling(self.forward)
        rows = [p.tolist() for p in permutations]
        sampler.permutation_generator = lambda num_features, num_samples: iter(rows)
        with torch.no_grad():
            values = sampler.attribute(
                self.inputs,
                baselines=self.baselines,
                n_samples=len(rows),
                perturbations_per_eval=per_eval,
            )
        return values.to(torch.float64).numpy()[0]


def speed(
    model: torch.nn.Module, tensors: dict[str, np.ndarray], masks: list[np.ndarray], image: int, repeats: int
) -> dict[str, float]:
    label = int(tensors["labels"][image])
    clean, perturbed = tensors["clean_images"][image], tensors["perturbed_images"][image]
    game = PixelGame(model, clean, perturbed, label, masks[label], batch_size=1024)
    captum_game = CaptumGame(model, clean, perturbed, label, masks[label])
    n = game.n_players
    permutations = draw_permutations(n, 5, seed=0)

    ours = shapley_from_permutations(game, permutations)
    # the floor: the same 122 coalitions, their images built beforehand, one forward
    position = np.argsort(permutations, axis=1)
    prefixes = position[:, None, :] < np.arange(1, n)[None, :, None]
    coalitions = np.concatenate([np.zeros((1, n), bool), np.ones((1, n), bool), prefixes.reshape(-1, n)])
    images = game.images(coalitions)
    assert coalitions.shape[0] == ours.n_evaluations

    def floor() -> None:
        with torch.inference_mode():
            torch.softmax(model(images).to(torch.float64), dim=-1)

    per_eval_values = (1, 2, 5, 10, 25)
    max_diff = 0.0
    for per_eval in per_eval_values:
        values = captum_game.attribute(permutations, per_eval)
        max_diff = max(max_diff, float(np.max(np.abs(values - ours.values))))

    def run_ours() -> None:
        shapley_from_permutations(game, permutations)

    # ours against the floor on their own, so that captum's larger passes between them do
    # not disturb one of the two more than the other; then ours against captum
    times = cpu_times({"ours": run_ours, "floor": floor}, repeats)
    t_ours, t_floor = times["ours"], times["floor"]
    contenders: dict[str, Callable[[], Any]] = {"ours": run_ours}
    for per_eval in per_eval_values:
        contenders[f"captum-{per_eval}"] = lambda pe=per_eval: captum_game.attribute(permutations, pe)
    times = cpu_times(contenders, repeats)
    t_captum = {pe: times[f"captum-{pe}"] for pe in per_eval_values}
    t_ours_captum = times["ours"]
    best = min(t_captum, key=lambda k: t_captum[k])
    print(f"image {image}: {n} players, 5 permutations, {ours.n_evaluations} coalitions")
    print(f"CPU ms, median of {repeats} round-robin repeats; max |ours - captum| = {max_diff:.2e}")
    rows = [
        ("ours: batched game, one forward (timed with the floor)", t_ours),
        ("one-batch floor: prebuilt images, one forward", t_floor),
        ("ours: batched game, one forward (timed with captum)", t_ours_captum),
        *((f"captum ShapleyValueSampling, perturbations_per_eval={pe}", t) for pe, t in t_captum.items()),
    ]
    for label, seconds in rows:
        print(f"  {label:<58} {seconds * 1e3:>8.2f}")
    return {
        "captum (default per_eval=1) / ours": t_captum[1] / t_ours_captum,
        f"captum (best per_eval={best}) / ours": t_captum[best] / t_ours_captum,
        "ours / one-batch floor (goal <= 1.2)": t_ours / t_floor,
    }


def accuracy(
    model: torch.nn.Module,
    tensors: dict[str, np.ndarray],
    masks: list[np.ndarray],
    images: list[int],
    *,
    captum_permutations: int,
    antithetic_permutations: int,
    rotated_permutations: int,
    repeats: int,
    reference: int,
) -> dict[str, float]:
    # estimator → (permutations, group size, squared errors); captum is replayed on uniformly
    # random permutations from a local generator, ours draw from their seeds
    ours = {
        "antithetic": (antithetic_permutations, 2),
        "rotated antithetic": (rotated_permutations, 4),
    }
    errors: dict[str, list[float]] = {"captum": [], **{name: [] for name in ours}}
    reference_variance: list[float] = []
    rng = np.random.default_rng(12345)
    n = 0
    for image in images:
        label = int(tensors["labels"][image])
        clean, perturbed = tensors["clean_images"][image], tensors["perturbed_images"][image]
        game = PixelGame(model, clean, perturbed, label, masks[label], batch_size=256)
        captum_game = CaptumGame(model, clean, perturbed, label, masks[label])
        n = game.n_players
        ref = shapley_from_permutations(
            game, draw_permutations(n, reference, seed=10_000 + image, antithetic=True), paired=True
        )
        # E[(estimate - reference)²] = MSE(estimate) + Var(reference): the reference's variance,
        # estimated from its standard error, is subtracted from every error below
        reference_variance.append(float(np.mean(ref.standard_error**2)))
        for _ in range(repeats):
            plain = np.argsort(rng.random((captum_permutations, n)), axis=1, kind="stable")
            values = captum_game.attribute(plain, per_eval=n)
            errors["captum"].append(float(np.mean((values - ref.values) ** 2)))
            for name, (count, group) in ours.items():
                perms = draw_permutations(
                    n, count, int(rng.integers(2**32)), antithetic=True, rotated=group == 4
                )
                estimate = shapley_from_permutations(game, perms, group=group)
                errors[name].append(float(np.mean((estimate.values - ref.values) ** 2)))
    noise = float(np.mean(reference_variance))
    mse = {name: float(np.mean(values)) - noise for name, values in errors.items()}
    evals_captum = 1 + n * captum_permutations
    print(
        f"{len(images)} images x {repeats} repetitions; reference: {reference} antithetic permutations "
        f"(its variance, {noise:.2e} per player, subtracted)"
    )
    print(f"  {'estimator':<52} {'perms':>7} {'evals':>7} {'RMSE':>10}")
    label = "captum: plain permutations"
    print(f"  {label:<52} {captum_permutations:>7.1f} {evals_captum:>7.0f} {mse['captum'] ** 0.5:>10.3e}")
    ratios = {}
    for name, (count, _) in ours.items():
        # both estimators average independent units: MSE ∝ 1 / permutations
        needed = count * mse[name] / mse["captum"]
        evals_needed = 2 + (n - 1) * needed
        print(f"  {'ours: ' + name:<52} {count:>7.1f} {2 + (n - 1) * count:>7.0f} {mse[name] ** 0.5:>10.3e}")
        print(f"  {'ours: ' + name + ', budget at captum error':<52} {needed:>7.1f} {evals_needed:>7.0f}")
        variance = mse["captum"] * captum_permutations / (mse[name] * count)
        ratios[f"variance per permutation, plain / {name}"] = variance
        ratios[f"evaluations to captum's error, captum / {name} (goal >= 2)"] = evals_captum / evals_needed
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=22, help="dominant images in part 2 (22: all)")
    parser.add_argument("--repeats", type=int, default=30, help="repetitions per image in part 2")
    parser.add_argument("--timing-repeats", type=int, default=41)
    parser.add_argument("--captum-permutations", type=int, default=20)
    parser.add_argument("--antithetic-permutations", type=int, default=10)
    parser.add_argument("--rotated-permutations", type=int, default=8)
    parser.add_argument(
        "--reference", type=int, default=1000, help="antithetic permutations of the reference"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tensors, masks, dominant = load_example()
    print("== part 1: speed, the same 5 permutations ==")
    ratios = speed(model, tensors, masks, int(dominant[0]), args.timing_repeats)
    print()
    print("== part 2: error per model evaluation ==")
    ratios |= accuracy(
        model,
        tensors,
        masks,
        [int(i) for i in dominant[: args.images]],
        captum_permutations=args.captum_permutations,
        antithetic_permutations=args.antithetic_permutations,
        rotated_permutations=args.rotated_permutations,
        repeats=args.repeats,
        reference=args.reference,
    )
    print()
    print("== ratios ==")
    for label, value in ratios.items():
        print(f"  {label:<72} {value:>7.2f}")
    if args.json:
        figures = []
        for label, value in ratios.items():
            # a goal is written into the label: "… (goal <= 1.2)"
            goal = re.search(r" \(goal (<=|>=) ([0-9.]+)\)$", label)
            figure: dict[str, Any] = {"name": label[: goal.start()] if goal else label, "value": value}
            if goal:
                bound = float(goal[2])
                figure["goal"] = f"{'≤' if goal[1] == '<=' else '≥'} {goal[2]}"
                figure["met"] = value <= bound if goal[1] == "<=" else value >= bound
            figures.append(figure)
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
