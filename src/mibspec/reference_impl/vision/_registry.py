"""The built-in registry of image-classifier architectures (RegistryModel, SPEC.md M-3).

A registry model is declared as data: an architecture name from :data:`ARCHITECTURES`
and a safetensors file of weights. No submitted code runs: the architecture is built
here, the weights are read as plain arrays (``mibspec.core.sidecars``, no pickle) and
checked name by name and shape by shape before they are copied in.

``tiny-cnn-v1`` (input ``(N, C, H, W)``, H and W multiples of 4; logits ``(N, n_classes)``)::

    conv1  Conv2d(C → w1, 3×3, padding 1) → ReLU → MaxPool 2×2
    conv2  Conv2d(w1 → w2, 3×3, padding 1) → ReLU → MaxPool 2×2
    fc     flatten (C-order: channel, row, column) → Linear(w2 · H/4 · W/4 → n_classes)

Tensors: ``conv1.weight (w1, C, 3, 3)``, ``conv1.bias (w1)``, ``conv2.weight (w2, w1, 3, 3)``,
``conv2.bias (w2)``, ``fc.weight (n_classes, w2·H/4·W/4)``, ``fc.bias (n_classes)``; the
widths and the class count are read from the shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "TinyCNN",
    "load_registry_model",
    "read_weights",
]

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


class TinyCNN(nn.Module):
    """``tiny-cnn-v1``: two 3×3 convolutions with ReLU and 2×2 max pooling, then a linear layer.

    ReLU and pooling are separate modules per layer, as attribution libraries that hook
    non-linearities (DeepLift, guided backpropagation) require.
    """

    def __init__(self, in_channels: int, width1: int, width2: int, n_classes: int, height: int, width: int):
        super().__init__()
        if height % 4 or width % 4:
            raise ValueError(f"image_shape: tiny-cnn-v1 needs H and W divisible by 4; got {height}x{width}")
        self.image_shape = (in_channels, height, width)
        self.n_classes = n_classes
        self.conv1 = nn.Conv2d(in_channels, width1, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(width1, width2, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(width2 * (height // 4) * (width // 4), n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.fc(self.flatten(x))


def _tiny_cnn(shapes: Mapping[str, tuple[int, ...]], image_shape: Sequence[int]) -> TinyCNN:
    channels, height, width = (int(v) for v in image_shape)
    w1, w2 = shapes["conv1.weight"][0], shapes["conv2.weight"][0]
    n_classes = shapes["fc.weight"][0]
    return TinyCNN(channels, w1, w2, n_classes, height, width)


@dataclass(frozen=True)
class Architecture:
    """A registry entry: how to build the module from the weights' shapes and the image shape."""

    name: str
    tensors: tuple[str, ...]
    build: Callable[[Mapping[str, tuple[int, ...]], Sequence[int]], nn.Module]
    description: str


ARCHITECTURES: dict[str, Architecture] = {
    "tiny-cnn-v1": Architecture(
        "tiny-cnn-v1",
        ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc.weight", "fc.bias"),
        _tiny_cnn,
        "conv3x3-ReLU-maxpool2 twice, then a linear layer on the C-order flattened features",
    ),
}
"""Architecture name → entry. Names are never reused for a different network."""


def read_weights(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a numpy array (header parsed here, no pickle).

    Raises:
        ValueError: the file is not a readable safetensors file or holds an unreadable dtype.
    """
    from mibspec.core.sidecars import SidecarError, load_tensor, read_safetensors_header

    try:
        infos = read_safetensors_header(Path(path))
        return {name: np.array(load_tensor(Path(path), info)) for name, info in infos.items()}
    except (SidecarError, OSError) as exc:
        raise ValueError(f"weights: cannot read {path}: {exc}") from exc


def load_registry_model(
    architecture: str,
    weights: Mapping[str, Any],
    image_shape: Sequence[int],
    *,
    dtype: str = "float32",
    device: str | torch.device = "cpu",
) -> nn.Module:
    """Build ``architecture`` for images of ``image_shape`` (C, H, W) and copy ``weights`` in.

    The module is built on the CPU and moved to ``device`` (where it then computes).

    Every tensor the architecture names must be present with the shape the module has;
    extra tensors are refused too (a weights file for another network is an error, not a
    partial load). The module is returned in eval mode, without gradients on parameters.

    Raises:
        ValueError: unknown architecture or dtype, missing/extra tensors, shape mismatch.
    """
    entry = ARCHITECTURES.get(architecture)
    if entry is None:
        raise ValueError(f"architecture: expected one of {sorted(ARCHITECTURES)}, got {architecture!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
    arrays = {name: np.asarray(value) for name, value in weights.items()}
    missing = [name for name in entry.tensors if name not in arrays]
    extra = sorted(set(arrays) - set(entry.tensors))
    if missing or extra:
        raise ValueError(
            f"weights: {architecture} needs tensors {list(entry.tensors)}; "
            f"missing {missing}, unexpected {extra}"
        )
    if len(image_shape) != 3:
        raise ValueError(f"image_shape: expected [C, H, W], got {list(image_shape)}")
    shapes = {name: tuple(int(d) for d in arrays[name].shape) for name in entry.tensors}
    try:
        module = entry.build(shapes, image_shape)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"weights: cannot build {architecture} from shapes {shapes}: {exc}") from exc
    state = module.state_dict()
    for name in entry.tensors:
        if tuple(state[name].shape) != shapes[name]:
            raise ValueError(
                f"weights: tensor {name} has shape {list(shapes[name])}, {architecture} on images "
                f"{list(image_shape)} needs {list(state[name].shape)}"
            )
        array = arrays[name]
        if not np.issubdtype(array.dtype, np.floating) or not np.isfinite(array).all():
            raise ValueError(f"weights: tensor {name} must hold finite floating-point values")
    torch_dtype = _DTYPES[dtype]
    module.load_state_dict({name: torch.from_numpy(np.array(arrays[name])) for name in entry.tensors})
    module = module.to(device=device, dtype=torch_dtype).eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module
