"""Runs shared by several evaluations on the same model and examples.

Reports that differ only in their circuits run the same clean and ablation passes on every
batch, and reports of the same method share circuits too (every curve holds the full model
and the empty circuit; re-submissions and other claims over the same circuits share all).
:class:`ActivationCache`, passed to :func:`evaluate_circuits` as ``reuse``, keeps results
keyed by their content — the model object, the ablation constant and the batch's clean
ids, corrupted ids and mask (bytes, shapes and dtypes):

* the clean and ablation runs of a batch;
* the per-example metrics of a circuit on a batch, keyed also by the pruned circuit and
  its neuron mask (a circuit's metrics do not depend on the other circuits of its stack,
  see :func:`~._chunks.chunks`);
* the dataset mean of the ``mean`` ablation.

So each is computed once, and a batch whose metrics are all kept is not run again at all. A
cached entry is exactly what was computed, so results do not depend on whether it was
reused. Memory is bounded by ``max_bytes``: entries are kept while they fit, and an entry
that does not fit in what is left is not kept (nothing is dropped for it). The evaluations
that share a cache pass the same batches in the same order, so dropping the least recently
used entry for the newest would, on a dataset whose runs exceed the bound, drop each
batch's runs just before the next evaluation asks for them, and none would be reused;
kept as they come, the first batches' runs serve every later evaluation. The values
:meth:`ActivationCache.get_or_compute` keeps (runs, means) fill at most all but
:data:`METRICS_SHARE` of the bound; the rest is left for the metrics, kept with
:meth:`ActivationCache.put`, which spare whole batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

import torch

__all__ = ["DEFAULT_ACTIVATION_BYTES", "ActivationCache", "tensor_bytes"]

#: Default bound of an :class:`ActivationCache`, in bytes.
DEFAULT_ACTIVATION_BYTES = 1 << 30
#: Share of the bound runs and means leave to metrics (64 MiB of the default: a circuit's
#: metrics on a batch of 20 examples take 160 bytes).
METRICS_SHARE = 1 / 16

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
        self._entries: dict[bytes, tuple[Any, Any, int]] = {}

    def get_or_compute(
        self, model: Any, parts: tuple[Any, ...], compute: Callable[[], T], tag: str = ""
    ) -> T:
        """The cached value for ``model`` and the tensors ``parts``, else ``compute()``;
        ``tag`` tells apart values of different kinds computed from the same tensors."""
        key = self.key(model, parts, tag)
        entry = self._lookup(model, key)
        if entry is not None:
            return entry[1]  # type: ignore[no-any-return]
        value = compute()
        self.put(
            model, key, value, tensor_bytes(value), room=self.max_bytes - int(self.max_bytes * METRICS_SHARE)
        )
        return value

    def key(self, model: Any, parts: tuple[Any, ...], tag: str = "") -> bytes:
        """The content key of ``model`` and the tensors ``parts`` (for :meth:`get`, :meth:`put`)."""
        return _key(model, parts, tag)

    def get(self, model: Any, key: bytes) -> Any:
        """The value kept under ``key`` for ``model``, else ``None``."""
        entry = self._lookup(model, key)
        return None if entry is None else entry[1]

    def _lookup(self, model: Any, key: bytes) -> tuple[Any, Any, int] | None:
        entry = self._entries.get(key)
        if entry is not None and entry[0] is model:
            self.hits += 1
            return entry
        self.misses += 1
        return None

    def put(self, model: Any, key: bytes, value: Any, size: int, room: int | None = None) -> None:
        """Keep ``value`` (``size`` bytes) under ``key`` for ``model`` if the entries then take
        at most ``room`` bytes (default: the bound; see the module docstring)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= old[2]
        limit = self.max_bytes if room is None else min(room, self.max_bytes)
        if self.size + size <= limit:
            self._entries[key] = (model, value, size)
            self.size += size

    def clear(self) -> None:
        self._entries.clear()
        self.size = 0


def _key(model: Any, parts: tuple[Any, ...], tag: str = "") -> bytes:
    digest = hashlib.sha256(f"{id(model)}\x00{tag}".encode())
    for part in parts:
        if part is None:
            digest.update(b"\x00none")
            continue
        tensor = part.detach().contiguous().cpu()
        digest.update(f"\x01{tensor.dtype}{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.digest()


def tensor_bytes(value: Any) -> int:
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
