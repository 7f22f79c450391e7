"""Memory reused by every stacked pass of one evaluation."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import numpy as np
import torch

__all__ = ["STEP_BYTES", "Arena", "return_free_memory"]

#: Largest temporary, in bytes, that a patched pass allocates per step outside the arena.
#: glibc's allocator maps blocks above its threshold (adaptive, at most 32 MiB) afresh on
#: every allocation and reuses freed blocks below it; small steps (with the float32 copies
#: of a 16-bit norm, a few MiB) leave free blocks the next step refills, where steps of 8 MiB
#: left the heap of a bfloat16 Qwen2.5-0.5B-shaped verification with 100–200 MiB of holes.
STEP_BYTES = 2 * 2**20


class Arena:
    """Blocks of memory reused by every stacked pass of one evaluation.

    The operating system maps a fresh allocation of more than a few MiB page by page
    on first write; at GPT-2-small size that cost as much as the arithmetic done in the
    memory (a 36 MiB block: 25 ms to map, 4 ms to fill). The store of differences and
    the slot-input workspace are the large blocks of a pass; they are allocated once
    per evaluation, at the largest size asked for, and every later pass writes into
    them before reading.
    """

    def __init__(self, dtype: torch.dtype, device: torch.device | str = "cpu") -> None:
        self.dtype, self.device = dtype, device
        self.blocks: dict[str, torch.Tensor] = {}

    def reserve(self, name: str, size: int) -> None:
        """Make block ``name`` hold at least ``size`` elements (passes asking for less reuse it)."""
        block = self.blocks.get(name)
        if block is None or block.numel() < size:
            self.blocks.pop(name, None)  # free the smaller block before taking the larger
            self.blocks[name] = torch.empty(size, dtype=self.dtype, device=self.device)

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """An uninitialised contiguous tensor of ``shape`` in block ``name``."""
        size = int(np.prod(shape))
        self.reserve(name, size)
        return self.blocks[name][:size].view(shape)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or ``None`` under another C library."""
    try:  # the symbols the process has loaded: the C library's among them
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    return trim


def return_free_memory() -> None:
    """Give the memory the C allocator holds freed back to the operating system.

    glibc keeps freed blocks below its mapping threshold (at most 32 MiB, adaptive) in its
    heap for reuse. A batch's tensors are freed in another order than they were made, so the
    heap ends with free holes between live blocks that the next batch's tensors, of other
    sizes, do not all fill: resident memory that no tensor uses. Called between the batches
    of a large model, where the holes are largest and a call (15 ms on a Qwen2.5-0.5B-shaped
    model) is small beside a batch's passes. Values do not depend on it; elsewhere than glibc
    it does nothing.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
