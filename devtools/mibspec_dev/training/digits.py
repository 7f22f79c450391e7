"""A tiny CNN trained on scikit-learn's digits with a planted shortcut (saliency track).

The recipe (:class:`DigitsRecipe`), all of it seeded and deterministic for a given
thread count, library versions and CPU kernels:

1. images: ``sklearn.datasets.load_digits`` (1,797 8×8 images bundled with scikit-learn,
   values 0 … 16), upsampled ×3 by pixel repetition to 24×24 and mapped affinely to
   [0.25, 0.75] (``low + (high − low)·v/16``): a grey background, so that a blur changes
   the patch wherever it lies;
2. split: ``default_rng(seed).permutation(1797)``; the last ``n_test`` indices are the
   test split, the rest the training split;
3. shortcut: :class:`~mibspec.reference_impl.datasets.shortcut.ShortcutSpec` drawn with
   the recipe's K, D, α and seed; a fraction ``shortcut_fraction`` of the training
   images (chosen with ``default_rng(seed + 2)``) carry their class's shortcut;
4. model: ``tiny-cnn-v1`` (:mod:`mibspec.reference_impl.vision`), He-normal weights and zero
   biases from ``torch.Generator().manual_seed(seed)``; Adam, cross-entropy, mini-batches
   in an order drawn from the same generator.

:func:`evaluate_digits` measures what the paper's Tables 1 and 2 report: accuracy on the
clean test set (C-Set) and the perturbed one (P-Set), and the dominant rate (DR, the
fraction of test images meeting the dominance prerequisites with T = 0.9).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.saliency import dominance
from mibspec.reference_impl.datasets.shortcut import ShortcutSpec
from mibspec.reference_impl.vision import TinyCNN, class_probabilities

from .loop import deterministic_torch

__all__ = [
    "DigitsData",
    "DigitsRecipe",
    "TrainedDigits",
    "digits_data",
    "evaluate_digits",
    "train_digits",
]


@dataclass(frozen=True)
class DigitsRecipe:
    """Everything that determines the shipped digits classifier."""

    seed: int = 0
    upsample: int = 3
    low: float = 0.25
    high: float = 0.75
    n_test: int = 360
    kernel_side: int = 5
    patch_side: int = 5
    alpha: float = 0.3
    shortcut_fraction: float = 1.0
    widths: tuple[int, int] = (8, 16)
    epochs: int = 4
    batch_size: int = 64
    learning_rate: float = 3e-3
    threads: int = 1
    dominance_threshold: float = 0.9

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["widths"] = list(self.widths)
        return data


@dataclass(frozen=True, eq=False)
class DigitsData:
    """Images ``(N, 1, S, S)`` float32 in dataset order, labels, the split and the shortcut."""

    clean: NDArray[np.float32]
    perturbed: NDArray[np.float32]
    labels: NDArray[np.int64]
    train: NDArray[np.intp]
    test: NDArray[np.intp]
    shortcut: ShortcutSpec


def digits_data(recipe: DigitsRecipe) -> DigitsData:
    """Steps 1–3 of the recipe: images, split and shortcut (every image perturbed here)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    raw = np.asarray(digits.images, dtype=np.float64) / 16.0
    labels = np.asarray(digits.target, dtype=np.int64)
    up = np.kron(raw, np.ones((recipe.upsample, recipe.upsample)))
    clean = (recipe.low + (recipe.high - recipe.low) * up)[:, np.newaxis].astype(np.float32)
    side = clean.shape[-1]
    n_classes = int(labels.max()) + 1
    shortcut = ShortcutSpec.draw(
        n_classes,
        side,
        kernel_side=recipe.kernel_side,
        patch_side=recipe.patch_side,
        alpha=recipe.alpha,
        seed=recipe.seed,
    )
    perturbed = shortcut.apply(clean, labels).astype(np.float32)
    order = np.random.default_rng(recipe.seed).permutation(len(labels))
    return DigitsData(
        clean=clean,
        perturbed=perturbed,
        labels=labels,
        train=order[: len(labels) - recipe.n_test],
        test=order[len(labels) - recipe.n_test :],
        shortcut=shortcut,
    )


@dataclass(frozen=True, eq=False)
class TrainedDigits:
    """A trained model, its weights as float32 arrays, and the training losses per epoch."""

    model: TinyCNN
    weights: dict[str, NDArray[np.float32]]
    losses: list[float]


def train_digits(
    recipe: DigitsRecipe, data: DigitsData, *, shortcut_fraction: float | None = None
) -> TrainedDigits:
    """Step 4 of the recipe. ``shortcut_fraction`` overrides the recipe's (0 trains on clean images)."""
    fraction = recipe.shortcut_fraction if shortcut_fraction is None else shortcut_fraction
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"shortcut_fraction: expected a value in [0, 1], got {fraction!r}")
    carries = np.random.default_rng(recipe.seed + 2).random(len(data.train)) < fraction
    images = np.where(
        carries[:, None, None, None], data.perturbed[data.train], data.clean[data.train]
    ).astype(np.float32)
    targets = torch.as_tensor(data.labels[data.train])
    x = torch.as_tensor(images)
    channels, height, width = images.shape[1:]
    with deterministic_torch(recipe.threads):
        generator = torch.Generator().manual_seed(recipe.seed)
        model = TinyCNN(channels, *recipe.widths, int(data.labels.max()) + 1, height, width)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("weight"):
                    fan_in = parameter[0].numel()
                    parameter.copy_(torch.randn(parameter.shape, generator=generator) * (2.0 / fan_in) ** 0.5)
                else:
                    parameter.zero_()
        optimiser = torch.optim.Adam(model.parameters(), lr=recipe.learning_rate)
        losses = []
        for _ in range(recipe.epochs):
            order = torch.randperm(len(x), generator=generator)
            total = 0.0
            for start in range(0, len(x), recipe.batch_size):
                batch = order[start : start + recipe.batch_size]
                loss = torch.nn.functional.cross_entropy(model(x[batch]), targets[batch])
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += float(loss.detach()) * len(batch)
            losses.append(total / len(x))
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    weights = {
        name: tensor.detach().numpy().astype(np.float32) for name, tensor in model.state_dict().items()
    }
    return TrainedDigits(model, weights, losses)


def evaluate_digits(
    model: torch.nn.Module, data: DigitsData, indices: NDArray[np.intp], threshold: float
) -> dict[str, Any]:
    """C-Set and P-Set accuracy and the dominant rate on ``indices`` (paper Tables 1 and 2)."""
    labels = data.labels[indices]
    p_clean = class_probabilities(model, data.clean[indices])
    p_perturbed = class_probabilities(model, data.perturbed[indices])
    dominant = np.asarray(dominance(p_clean, p_perturbed, labels, threshold=threshold))
    return {
        "images": len(indices),
        "clean_accuracy": float(np.mean(p_clean.argmax(axis=1) == labels)),
        "perturbed_accuracy": float(np.mean(p_perturbed.argmax(axis=1) == labels)),
        "dominant": int(dominant.sum()),
        "dominant_rate": float(dominant.mean()),
    }
