"""The shortcut perturbation against a plain per-pixel loop (numpy only, no torch)."""

from __future__ import annotations

import numpy as np
import pytest

from mibspec.reference_impl.datasets.shortcut import (
    ShortcutSpec,
    apply_shortcut,
    grid_locations,
    patch_mask,
    shortcut_kernels,
)


def _slow_shortcut(image: np.ndarray, kernel: np.ndarray, location: tuple[int, int], side: int) -> np.ndarray:
    """One image (C, H, W), written as the paper states it: each patch pixel is the kernel-weighted
    sum of its neighbourhood in the clean image (zeros outside), clipped to [0, 1]."""
    channels, height, width = image.shape
    k = kernel.shape[0]
    half = k // 2
    out = image.copy()
    for ch in range(channels):
        for r in range(location[0], location[0] + side):
            for c in range(location[1], location[1] + side):
                total = 0.0
                for i in range(k):
                    for j in range(k):
                        rr, cc = r + i - half, c + j - half
                        if 0 <= rr < height and 0 <= cc < width:
                            total += image[ch, rr, cc] * kernel[i, j]
                out[ch, r, c] = min(max(total, 0.0), 1.0)
    return out


def test_kernels_have_one_unit_weight_and_the_rest_in_zero_alpha() -> None:
    kernels = shortcut_kernels(6, 5, 0.3, seed=4)
    assert kernels.shape == (6, 5, 5)
    for kernel in kernels:
        assert np.count_nonzero(kernel == 1.0) == 1
        rest = kernel[kernel != 1.0]
        assert rest.size == 24
        assert rest.min() >= 0.0
        assert rest.max() <= 0.3
    assert np.array_equal(kernels, shortcut_kernels(6, 5, 0.3, seed=4))
    assert not np.array_equal(kernels, shortcut_kernels(6, 5, 0.3, seed=5))


def test_apply_shortcut_matches_the_per_pixel_loop() -> None:
    rng = np.random.default_rng(0)
    images = rng.random((4, 2, 12, 12))
    labels = np.array([0, 1, 2, 1])
    kernels = shortcut_kernels(3, 3, 0.4, seed=1)
    # class 1's patch touches the top and left borders, class 2's the bottom and right ones
    locations = [(4, 5), (0, 0), (8, 8)]
    out = apply_shortcut(images, labels, kernels, locations, 4)
    for n in range(4):
        expected = _slow_shortcut(images[n], kernels[labels[n]], locations[labels[n]], 4)
        np.testing.assert_allclose(out[n], expected, rtol=0, atol=1e-12)
        changed = (out[n] != images[n]).any(axis=0)
        assert not (changed & ~patch_mask(locations[labels[n]], 4, 12, 12)).any()


def test_grid_locations_are_distinct_cells_inside_the_image() -> None:
    locations = grid_locations(10, 24, 5, seed=1)
    assert len(set(locations)) == 10
    masks = [patch_mask(loc, 5, 24, 24) for loc in locations]
    assert (np.sum(masks, axis=0) <= 1).all()  # no two patches overlap
    assert locations == grid_locations(10, 24, 5, seed=1)
    with pytest.raises(ValueError, match="n_classes must be <= the 16 patch cells"):
        grid_locations(17, 24, 5, seed=1)


def test_spec_draw_uses_one_seed_for_kernels_and_locations() -> None:
    spec = ShortcutSpec.draw(10, 24, kernel_side=5, patch_side=5, alpha=0.3, seed=0)
    assert np.array_equal(spec.kernels, shortcut_kernels(10, 5, 0.3, 0))
    assert list(spec.locations) == grid_locations(10, 24, 5, 1)
    assert spec.mask(3, 24, 24).sum() == 25


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: shortcut_kernels(2, 4, 0.1, 0), "kernel_side must be odd"),
        (lambda: shortcut_kernels(2, 3, -0.1, 0), "alpha must be >= 0"),
        (lambda: patch_mask((20, 0), 5, 24, 24), "inside the 24x24 image"),
        (
            lambda: apply_shortcut(
                np.zeros((1, 1, 8, 8)), np.array([3]), np.zeros((2, 3, 3)), [(0, 0)] * 2, 2
            ),
            r"labels must be in \[0, 1\]",
        ),
    ],
)
def test_bad_arguments_are_named(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()
