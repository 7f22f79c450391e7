"""Model evaluations of the pixel-level saliency protocol: probabilities, the Shapley game
over the dominant area, deletion and addition curves.

Normative text: ``spec/v1/metrics/saliency.md`` (MS-2, MS-7, MS-9, MS-10). Conventions:

* class probabilities are the softmax of the model's logits taken in float64 (the model
  runs in its declared dtype);
* a pixel is a spatial position (all channels together); pixels are indexed in C order
  (row-major) and the players of the Shapley game are the dominant area's pixels in that
  order;
* the placeholder of a pixel is its clean-image value (the paper's choice): coalition S
  is the perturbed image with the area's pixels outside S set to their clean values, and
  its value is the probability of the shortcut's class;
* deletion removes pixels from the perturbed image (back to their clean values), addition
  inserts them into the clean image (their perturbed values), in the evaluated map's
  MS-1 order; the curve's score is the class probability or the 0/1 correctness of the
  argmax (lowest index on ties).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from mibspec.metrics.saliency import perturbation_masks
from mibspec.metrics.shapley import (
    MAX_EXACT_PLAYERS,
    shapley_exact,
    shapley_trials,
)

from ..devices import wide

__all__ = [
    "CurveScore",
    "GroundTruth",
    "PixelGame",
    "Sampler",
    "class_probabilities",
    "curve_scores",
    "shapley_ground_truth",
]

Sampler = Literal["exact", "permutation", "antithetic", "rotated_antithetic"]
CurveScore = Literal["probability", "accuracy"]

DEFAULT_BATCH = 256
"""Images per forward pass (small batches keep a small CNN's activations in cache)."""

#: Integer dtypes by element size: the raw bits of floating-point images.
_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _dtype(model: torch.nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _probabilities(model: torch.nn.Module, images: torch.Tensor, batch_size: int) -> torch.Tensor:
    out = []
    with torch.inference_mode():
        for start in range(0, images.shape[0], batch_size):
            logits = model(images[start : start + batch_size])
            out.append(torch.softmax(wide(logits), dim=-1))
    return torch.cat(out) if out else torch.zeros((0, 0), dtype=torch.float64, device=images.device)


def class_probabilities(
    model: torch.nn.Module, images: ArrayLike, *, batch_size: int = DEFAULT_BATCH
) -> NDArray[np.float64]:
    """Softmax probabilities ``(N, n_classes)`` (float64) of images ``(N, C, H, W)``."""
    x = torch.as_tensor(np.asarray(images), dtype=_dtype(model), device=_device(model))
    return _probabilities(model, x, batch_size).cpu().numpy()


class PixelGame:
    """The Shapley game of one image: players are the dominant area's pixels (MS-9).

    Calling the game with boolean coalitions ``(B, n)`` returns their values ``(B,)``:
    the probability of ``label`` for the perturbed image whose area pixels outside the
    coalition carry their clean values. All B images go through the model in batches of
    ``batch_size`` (one forward when B ≤ batch_size).

    Attributes:
        pixels: flat (C-order) indices of the players, ascending; player i is ``pixels[i]``.
        n_evaluations: coalitions evaluated so far.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        clean: ArrayLike,
        perturbed: ArrayLike,
        label: int,
        area: ArrayLike,
        *,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        dtype, device = _dtype(model), _device(model)
        clean_t = torch.as_tensor(np.asarray(clean), dtype=dtype, device=device)
        if clean_t.ndim != 3:
            raise ValueError(f"clean must have shape (C, H, W); got {tuple(clean_t.shape)}")
        perturbed_t = torch.as_tensor(np.asarray(perturbed), dtype=dtype, device=device)
        if perturbed_t.shape != clean_t.shape:
            raise ValueError(
                f"perturbed must have the shape of clean {tuple(clean_t.shape)}; "
                f"got {tuple(perturbed_t.shape)}"
            )
        mask = np.asarray(area, dtype=bool)
        if mask.shape != tuple(clean_t.shape[1:]):
            raise ValueError(f"area must have shape {tuple(clean_t.shape[1:])}; got {mask.shape}")
        self.pixels = np.flatnonzero(mask)
        if self.pixels.size == 0:
            raise ValueError("area must mark at least one pixel; got an empty area")
        self.model = model
        self.label = int(label)
        self.shape = tuple(clean_t.shape)
        self.batch_size = batch_size
        channels = clean_t.shape[0]
        # Coalition images are assembled in numpy from the raw bits of the two images: a
        # selection copies values exactly whatever the dtype (bfloat16 has no numpy type),
        # and numpy does it several times faster than torch's operators for these small
        # images. The result is moved to the images' device.
        self._dtype, self._device = dtype, clean_t.device
        bits = _SAME_SIZE_INT[clean_t.element_size()]
        self._clean = clean_t.reshape(channels, -1).contiguous().view(bits).cpu().numpy()
        self._perturbed = perturbed_t.reshape(channels, -1).contiguous().view(bits).cpu().numpy()
        self.n_evaluations = 0

    @property
    def n_players(self) -> int:
        return int(self.pixels.size)

    def images(self, coalitions: NDArray[np.bool_]) -> torch.Tensor:
        """The images ``(B, C, H, W)`` of boolean coalitions ``(B, n)``."""
        rows = np.asarray(coalitions, dtype=bool)
        # a pixel is perturbed where its player is present (pixels outside the area never are)
        present = np.zeros((rows.shape[0], 1, self._clean.shape[1]), dtype=bool)
        present[:, 0, self.pixels] = rows
        batch = np.broadcast_to(self._clean, (rows.shape[0], *self._clean.shape)).copy()
        np.copyto(batch, self._perturbed, where=present)
        images = torch.from_numpy(batch).view(self._dtype).to(self._device)
        return images.reshape(rows.shape[0], *self.shape)

    def __call__(self, coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
        rows = np.asarray(coalitions, dtype=bool)
        if rows.ndim != 2 or rows.shape[1] != self.n_players:
            raise ValueError(f"coalitions must have shape (B, {self.n_players}); got {rows.shape}")
        self.n_evaluations += rows.shape[0]
        out = np.empty(rows.shape[0], dtype=np.float64)
        with torch.inference_mode():
            for start in range(0, rows.shape[0], self.batch_size):
                block = rows[start : start + self.batch_size]
                logits = self.model(self.images(block))
                probs = torch.softmax(wide(logits), dim=-1)
                out[start : start + block.shape[0]] = probs[:, self.label].cpu().numpy()
        return out


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """A Shapley ground-truth map.

    Attributes:
        values: ``(H, W)`` float64; φ on the area's pixels, 0 elsewhere (null players).
        n_evaluations: coalitions evaluated.
    """

    values: NDArray[np.float64]
    n_evaluations: int


def shapley_ground_truth(
    model: torch.nn.Module,
    clean: ArrayLike,
    perturbed: ArrayLike,
    label: int,
    area: ArrayLike,
    *,
    sampler: Sampler,
    seed: int | None = None,
    image_index: int = 0,
    n_trials: int = 5,
    n_permutations: int | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_trial: Callable[[], None] | None = None,
) -> GroundTruth:
    """Shapley values of the area's pixels for one image (MS-9, MS-10).

    * ``exact``: every coalition once (n ≤ 16 players);
    * ``permutation`` / ``antithetic`` / ``rotated_antithetic``: the mean of ``n_trials``
      permutation-sampling trials of ``n_permutations`` permutations each (MS-10); the
      root seed of the image with dataset index i is ``numpy.random.SeedSequence([seed, i])``
      and trial t uses its t-th spawned child
      (:func:`mibspec.metrics.shapley.shapley_trials`), which calls
      ``on_trial`` after each trial.

    Raises:
        ValueError: an unknown sampler, too many players for ``exact``, or a missing seed
            or permutation count for sampling.
    """
    game = PixelGame(model, clean, perturbed, label, area, batch_size=batch_size)
    n = game.n_players
    if sampler == "exact":
        if n > MAX_EXACT_PLAYERS:
            raise ValueError(
                f"sampler: exact Shapley takes at most {MAX_EXACT_PLAYERS} players; the area has {n}"
            )
        phi = shapley_exact(game, n)
    elif sampler in ("permutation", "antithetic", "rotated_antithetic"):
        if seed is None or n_permutations is None:
            raise ValueError("seed and n_permutations are required with a sampling estimator")
        root = np.random.SeedSequence([int(seed), int(image_index)])
        phi = shapley_trials(
            game,
            n,
            n_trials=n_trials,
            n_permutations=n_permutations,
            seed=root,
            antithetic=sampler in ("antithetic", "rotated_antithetic"),
            rotated=sampler == "rotated_antithetic",
            on_trial=on_trial,
        ).values
    else:
        raise ValueError(
            f"sampler: expected exact, permutation, antithetic or rotated_antithetic, got {sampler!r}"
        )
    values = np.zeros(game.shape[1] * game.shape[2], dtype=np.float64)
    values[game.pixels] = phi
    return GroundTruth(values.reshape(game.shape[1:]), game.n_evaluations)


def curve_scores(
    model: torch.nn.Module,
    clean: ArrayLike,
    perturbed: ArrayLike,
    labels: Sequence[int],
    maps: ArrayLike,
    n_steps: int,
    *,
    score: CurveScore = "probability",
    batch_size: int = DEFAULT_BATCH,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-image deletion and addition curves (MS-7), each ``(N, n_steps + 1)``.

    Image j: ``clean[j]``, ``perturbed[j]`` ``(C, H, W)``, class ``labels[j]``, evaluated map
    ``maps[j]`` ``(H, W)``. Step s of the deletion curve scores the perturbed image with the
    first s pixels of the map's order set to their clean values; step s of the addition
    curve scores the clean image with those pixels set to their perturbed values.
    """
    clean_a = np.asarray(clean)
    perturbed_a = np.asarray(perturbed)
    maps_a = np.asarray(maps)
    n = len(labels)
    if clean_a.shape[0] != n or perturbed_a.shape[0] != n or maps_a.shape[0] != n:
        raise ValueError(
            f"clean, perturbed and maps must hold one entry per label ({n}); got "
            f"{clean_a.shape[0]}, {perturbed_a.shape[0]}, {maps_a.shape[0]}"
        )
    if score not in ("probability", "accuracy"):
        raise ValueError(f"score: expected probability or accuracy, got {score!r}")
    dtype, device = _dtype(model), _device(model)
    deletion = np.empty((n, n_steps + 1), dtype=np.float64)
    addition = np.empty_like(deletion)
    for j in range(n):
        masks = torch.as_tensor(perturbation_masks(maps_a[j], n_steps), device=device)[
            :, None
        ]  # (S+1, 1, H, W)
        x = torch.as_tensor(clean_a[j], dtype=dtype, device=device)[None]
        x_bar = torch.as_tensor(perturbed_a[j], dtype=dtype, device=device)[None]
        images = torch.cat([torch.where(masks, x, x_bar), torch.where(masks, x_bar, x)])
        probs = _probabilities(model, images, batch_size)
        label = int(labels[j])
        if score == "probability":
            values = probs[:, label].cpu().numpy()
        else:
            values = (probs.argmax(dim=-1) == label).to(torch.float64).cpu().numpy()
        deletion[j], addition[j] = values[: n_steps + 1], values[n_steps + 1 :]
    return deletion, addition
