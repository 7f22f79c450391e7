"""Memory reused by every stacked pass of one evaluation."""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["STEP_BYTES", "Arena"]

#: Largest temporary, in bytes, that a patched pass allocates per step outside the arena.
#: glibc's allocator maps blocks above its threshold (adaptive, at most 32 MiB) afresh on
#: every allocation and reuses freed blocks below it.
STEP_BYTES = 8 * 2**20


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
