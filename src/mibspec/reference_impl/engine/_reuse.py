"""Unpatched runs shared by several evaluations on the same model and examples.

Reports that differ only in their circuits run the same clean and ablation passes on every
batch. :class:`ActivationCache`, passed to :func:`evaluate_circuits` as ``reuse``, keeps
those passes' results keyed by their content — the model object, the ablation constant and
the batch's clean ids, corrupted ids and mask (bytes, shapes and dtypes) — so each is
computed once. A cached entry is exactly what the pass returned, so results do not depend
on whether it was reused. Memory is bounded by ``max_bytes`` (least recently used entries
are dropped first; an entry larger than the bound is not kept).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["DEFAULT_ACTIVATION_BYTES", "ActivationCache"]

#: Default bound of an :class:`ActivationCache`, in bytes.
DEFAULT_ACTIVATION_BYTES = 1 << 30

T = TypeVar("T")


class ActivationCache:
    """A bounded, content-keyed store of per-batch unpatched runs (see the module docstring)."""

    def __init__(self, max_bytes: int = DEFAULT_ACTIVATION_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes: expected an integer >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.size = 0
        self.hits = 0
        self.misses = 0
        # key -> (model kept alive so that its id is not reused, value, bytes)
        self._entries: OrderedDict[bytes, tuple[Any, Any, int]] = OrderedDict()

    def get_or_compute(self, model: Any, parts: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """The cached value for ``model`` and the tensors ``parts``, else ``compute()``."""
        key = _key(model, parts)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is model:
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]  # type: ignore[no-any-return]
        self.misses += 1
        value = compute()
        size = _nbytes(value)
        if size <= self.max_bytes:
            self._entries[key] = (model, value, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self.size -= dropped
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0


def _key(model: Any, parts: tuple[Any, ...]) -> bytes:
    digest = hashlib.sha256(str(id(model)).encode())
    for part in parts:
        if part is None:
            digest.update(b"\x00none")
            continue
        tensor = part.detach().contiguous().cpu()
        digest.update(f"\x01{tensor.dtype}{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.digest()


def _nbytes(value: Any) -> int:
    """Bytes of the distinct tensor storages reachable from ``value``."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif hasattr(item, "__dataclass_fields__"):
            stack.extend(getattr(item, name) for name in item.__dataclass_fields__)
    return total
