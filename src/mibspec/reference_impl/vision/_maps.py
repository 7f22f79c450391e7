"""Saliency maps of standard attribution methods, through captum.

Every method explains the model's logit of the shortcut's class c on the perturbed image
(the paper's g(f, x̄, c), Algorithm 1) and returns one value per input element; a map is
reduced to one value per pixel by summing over channels (declared in the report as
``channel_reduction: sum``). Signs are kept: pixels are ranked as signed numbers (MS-1),
except where the method itself takes a magnitude (``gradient``: captum's ``Saliency``
returns |∂f/∂x|).

``gradient_shap`` is the only stochastic method. captum draws its baselines, the
interpolation coefficients and the noise from torch's and numpy's global generators, so
the call runs under :func:`pinned_global_generators`: both are seeded with the declared
seed for the duration of the call and restored afterwards, so the maps are reproducible
and the caller's random state is left as it was. Its baseline distribution (uniform
images drawn from a local ``torch.Generator``) is seeded with the same seed.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

__all__ = ["METHODS", "MapMethod", "pinned_global_generators", "saliency_maps"]


@contextlib.contextmanager
def pinned_global_generators(seed: int) -> Iterator[None]:
    """Seed torch's and numpy's global generators inside the block; restore them on exit."""
    numpy_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)


@dataclass(frozen=True)
class MapMethod:
    """An attribution method: its captum class, its settings as declared in a report."""

    name: str
    captum_class: str
    settings: dict[str, Any]
    run: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, int], torch.Tensor]


def _gradient(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int) -> torch.Tensor:
    from captum.attr import Saliency

    return Saliency(model).attribute(x, target=target, abs=True)


def _input_x_gradient(
    model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int
) -> torch.Tensor:
    from captum.attr import InputXGradient

    return InputXGradient(model).attribute(x, target=target)


def _integrated_gradients(
    model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int
) -> torch.Tensor:
    from captum.attr import IntegratedGradients

    return IntegratedGradients(model).attribute(
        x, baselines=torch.zeros_like(x), target=target, n_steps=32, method="gausslegendre"
    )


def _gradient_shap(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int) -> torch.Tensor:
    from captum.attr import GradientShap

    # drawn on the CPU, whatever the device, so that every device gets the same baselines
    generator = torch.Generator().manual_seed(seed)
    baselines = torch.rand((16, *x.shape[1:]), generator=generator, dtype=x.dtype, device="cpu").to(x.device)
    forward: Any = model
    if x.dtype != torch.float32:
        # captum draws the interpolation coefficients in float32, which promotes a half-precision
        # input; the model still runs in its own dtype
        def forward(inputs: torch.Tensor) -> torch.Tensor:
            return model(inputs.to(x.dtype))

    with pinned_global_generators(seed):
        return GradientShap(forward).attribute(
            x, baselines=baselines, target=target, n_samples=32, stdevs=0.0
        )


def _occlusion(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int) -> torch.Tensor:
    from captum.attr import Occlusion

    window = (x.shape[1], 3, 3)
    return Occlusion(model).attribute(
        x,
        sliding_window_shapes=window,
        strides=(x.shape[1], 1, 1),
        baselines=0.0,
        target=target,
        perturbations_per_eval=64,
    )


def _deeplift(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int) -> torch.Tensor:
    from captum.attr import DeepLift

    return DeepLift(model).attribute(x, baselines=torch.zeros_like(x), target=target)


def _guided_backprop(
    model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, seed: int
) -> torch.Tensor:
    from captum.attr import GuidedBackprop

    return GuidedBackprop(model).attribute(x, target=target)


METHODS: dict[str, MapMethod] = {
    m.name: m
    for m in (
        MapMethod("gradient", "Saliency", {"abs": True}, _gradient),
        MapMethod("input_x_gradient", "InputXGradient", {}, _input_x_gradient),
        MapMethod(
            "integrated_gradients",
            "IntegratedGradients",
            {"baseline": "zeros", "n_steps": 32, "method": "gausslegendre"},
            _integrated_gradients,
        ),
        MapMethod(
            "gradient_shap",
            "GradientShap",
            {"baselines": "16 uniform [0, 1) images", "n_samples": 32, "stdevs": 0.0, "seeded": True},
            _gradient_shap,
        ),
        MapMethod(
            "occlusion",
            "Occlusion",
            {"window": "3x3 (all channels)", "stride": 1, "baseline": 0.0},
            _occlusion,
        ),
        MapMethod("deeplift", "DeepLift", {"baseline": "zeros"}, _deeplift),
        MapMethod("guided_backprop", "GuidedBackprop", {}, _guided_backprop),
    )
}
"""Method name → captum method and its declared settings."""


def saliency_maps(
    model: torch.nn.Module, images: ArrayLike, labels: ArrayLike, method: str, *, seed: int = 0
) -> NDArray[np.float32]:
    """Maps ``(N, H, W)`` float32 of ``method`` for images ``(N, C, H, W)`` and their classes.

    Raises:
        ValueError: an unknown method.
    """
    entry = METHODS.get(method)
    if entry is None:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    parameter = next(model.parameters())
    x = torch.as_tensor(np.asarray(images), dtype=parameter.dtype, device=parameter.device)
    x = x.clone().requires_grad_(True)
    target = torch.as_tensor(np.asarray(labels), dtype=torch.int64, device=parameter.device)
    with warnings.catch_warnings():
        # captum announces the hooks it sets on ReLU modules (DeepLift, guided backpropagation)
        warnings.filterwarnings("ignore", message=r"Setting (forward, )?backward hooks", category=UserWarning)
        attributions = entry.run(model, x, target, seed)
    return attributions.detach().sum(dim=1).to(torch.float32).cpu().numpy()
