"""The shortcut perturbation of the pixel-level saliency protocol (numpy only).

"Decision rules are in the pixels", §3.1: each class c has a √K×√K kernel ``k⁽ᶜ⁾``
whose weights are drawn uniformly from [0, α] except one, set to 1; the shortcut of an
image of class c blurs the √D×√D patch whose top-left corner is the class's location
with that kernel. Definitions pinned here (the paper leaves them open):

* the blur is a cross-correlation (deep-learning "convolution": no kernel flip) of the
  clean image, channel by channel, centred on each patch pixel, with zeros outside the
  image; only the patch pixels change and each is computed from the clean image;
* perturbed values are clipped to ``[clip_low, clip_high]`` (default [0, 1], the range
  of the images);
* kernels are drawn as ``rng = numpy.random.default_rng(seed)``;
  ``kernels = rng.uniform(0, α, (C, √K, √K))``; then, for c = 0 … C−1,
  ``kernels[c].flat[rng.integers(K)] = 1``;
* class locations, when drawn rather than given, are distinct cells of the grid of
  non-overlapping patches with one background row/column between them, the first
  ``n_classes`` of ``default_rng(seed + 1).permutation(n_cells)`` (:func:`grid_locations`
  takes that seed; :meth:`ShortcutSpec.draw` passes ``seed + 1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mibspec.metrics.checks import check_finite_scalar, check_int, describe

__all__ = [
    "ShortcutSpec",
    "apply_shortcut",
    "grid_locations",
    "patch_mask",
    "shortcut_kernels",
]


def _odd_side(value: int, name: str) -> int:
    side = check_int(value, name, minimum=1)
    if side % 2 == 0:
        raise ValueError(f"{name} must be odd (a kernel centred on its pixel); got {side}")
    return side


def shortcut_kernels(n_classes: int, kernel_side: int, alpha: float, seed: int) -> NDArray[np.float64]:
    """The per-class blur kernels, shape ``(n_classes, kernel_side, kernel_side)``.

    Weights are uniform in [0, α] except one per kernel, set to 1 (see the module docstring
    for the exact draw order).

    Raises:
        ValueError: on n_classes < 1, an even or non-positive side, α < 0 or a negative seed.
    """
    classes = check_int(n_classes, "n_classes", minimum=1)
    side = _odd_side(kernel_side, "kernel_side")
    a = check_finite_scalar(alpha, "alpha")
    if a < 0:
        raise ValueError(f"alpha must be >= 0; got {a!r}")
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    kernels = rng.uniform(0.0, a, size=(classes, side, side))
    for c in range(classes):
        kernels[c].flat[rng.integers(side * side)] = 1.0
    return kernels


def grid_locations(n_classes: int, image_side: int, patch_side: int, seed: int) -> list[tuple[int, int]]:
    """Distinct patch corners ``(row, col)``, one per class, on a grid of non-overlapping cells.

    Cells start at multiples of ``patch_side + 1`` (one row/column apart), listed row by
    row, and fit inside a square image of side ``image_side``; class c gets the cell
    ``default_rng(seed).permutation(n_cells)[c]``.

    Raises:
        ValueError: when the grid has fewer cells than classes.
    """
    classes = check_int(n_classes, "n_classes", minimum=1)
    side = check_int(image_side, "image_side", minimum=1)
    patch = check_int(patch_side, "patch_side", minimum=1, maximum=side)
    starts = list(range(0, side - patch + 1, patch + 1))
    cells = [(r, c) for r in starts for c in starts]
    if len(cells) < classes:
        raise ValueError(
            f"n_classes must be <= the {len(cells)} patch cells of a {side}x{side} image; got {classes}"
        )
    rng = np.random.default_rng(check_int(seed, "seed", minimum=0))
    chosen = rng.permutation(len(cells))[:classes]
    return [cells[int(i)] for i in chosen]


def patch_mask(location: Sequence[int], patch_side: int, height: int, width: int) -> NDArray[np.bool_]:
    """Boolean ``(height, width)`` mask of the patch with top-left corner ``location``.

    Raises:
        ValueError: when the patch does not lie inside the image.
    """
    row, col = (int(v) for v in location)
    side = check_int(patch_side, "patch_side", minimum=1)
    if row < 0 or col < 0 or row + side > height or col + side > width:
        raise ValueError(
            f"location must put the {side}x{side} patch inside the {height}x{width} image; got {[row, col]}"
        )
    mask = np.zeros((height, width), dtype=np.bool_)
    mask[row : row + side, col : col + side] = True
    return mask


def apply_shortcut(
    images: ArrayLike,
    labels: ArrayLike,
    kernels: ArrayLike,
    locations: Sequence[Sequence[int]],
    patch_side: int,
    *,
    clip: tuple[float, float] = (0.0, 1.0),
) -> NDArray[np.float64]:
    """Perturbed copies of ``images`` (N, C, H, W): each image's class patch blurred by its kernel.

    ``out[n, ch, r, c] = clip(Σ_{i,j} x[n, ch, r + i − h, c + j − h] · k⁽ʸ⁾[i, j])`` for
    (r, c) in the patch of class y = ``labels[n]`` (h = (side − 1) / 2, zeros outside the
    image); every other pixel is copied.

    Raises:
        ValueError: on shapes that do not fit, labels without a kernel or location, or a
            patch outside the image.
    """
    x = np.asarray(images, dtype=np.float64)
    if x.ndim != 4:
        raise ValueError(f"images must have shape (N, C, H, W); got {describe(x)}")
    y = np.asarray(labels)
    if y.shape != (x.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be {x.shape[0]} integers; got {describe(y)}")
    k = np.asarray(kernels, dtype=np.float64)
    if k.ndim != 3 or k.shape[1] != k.shape[2]:
        raise ValueError(f"kernels must have shape (n_classes, side, side); got {describe(k)}")
    side = _odd_side(k.shape[1], "kernel side")
    if len(locations) != k.shape[0]:
        raise ValueError(f"locations must hold one corner per kernel ({k.shape[0]}); got {len(locations)}")
    if y.size and (y.min() < 0 or y.max() >= k.shape[0]):
        raise ValueError(f"labels must be in [0, {k.shape[0] - 1}]; got values outside")
    low, high = clip
    _, _, height, width = x.shape
    half = (side - 1) // 2
    padded = np.pad(x, ((0, 0), (0, 0), (half, half), (half, half)))
    out = x.copy()
    for n, label in enumerate(y.tolist()):
        area = patch_mask(locations[label], patch_side, height, width)
        rows, cols = np.nonzero(area)
        # windows[ch, p, i, j] = padded value around patch pixel p
        offsets = np.arange(side)
        windows = padded[n][
            :, rows[:, None, None] + offsets[None, :, None], cols[:, None, None] + offsets[None, None, :]
        ]
        out[n][:, rows, cols] = np.clip(np.einsum("cpij,ij->cp", windows, k[label]), low, high)
    return out


@dataclass(frozen=True)
class ShortcutSpec:
    """A declared shortcut perturbation (the ``perturbation`` block of a shortcut dataset).

    Attributes:
        kernel_side: √K.
        patch_side: √D.
        alpha: blur parameter α.
        seed: seed of the kernels (and of drawn locations).
        kernels: ``(n_classes, √K, √K)``.
        locations: per class the patch's top-left corner ``(row, col)``.
    """

    kernel_side: int
    patch_side: int
    alpha: float
    seed: int
    kernels: NDArray[np.float64]
    locations: tuple[tuple[int, int], ...]

    @classmethod
    def draw(
        cls, n_classes: int, image_side: int, *, kernel_side: int, patch_side: int, alpha: float, seed: int
    ) -> ShortcutSpec:
        """Kernels and grid locations from one seed (:func:`shortcut_kernels`, :func:`grid_locations`)."""
        kernels = shortcut_kernels(n_classes, kernel_side, alpha, seed)
        locations = grid_locations(n_classes, image_side, patch_side, seed + 1)
        return cls(kernel_side, patch_side, float(alpha), seed, kernels, tuple(locations))

    def apply(self, images: ArrayLike, labels: ArrayLike) -> NDArray[np.float64]:
        """:func:`apply_shortcut` with this spec."""
        return apply_shortcut(images, labels, self.kernels, self.locations, self.patch_side)

    def mask(self, label: int, height: int, width: int) -> NDArray[np.bool_]:
        """The dominant area of class ``label``."""
        return patch_mask(self.locations[label], self.patch_side, height, width)
