"""The arena of a stacked pass's large blocks (``engine._arena.Arena``): one block per
name, kept across passes that ask for no more, replaced only by a larger one."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

from mibspec.reference_impl.engine._arena import Arena  # noqa: E402

pytestmark = pytest.mark.recompute


def test_a_block_is_reused_by_smaller_requests_and_replaced_by_larger_ones() -> None:
    arena = Arena(torch.bfloat16)
    first = arena.get("store", (2, 3, 4))
    assert first.shape == (2, 3, 4)
    assert first.dtype == torch.bfloat16
    assert first.is_contiguous()
    block = arena.blocks["store"]
    smaller = arena.get("store", (5, 2))
    assert arena.blocks["store"] is block  # no new allocation
    assert smaller.data_ptr() == block.data_ptr()
    larger = arena.get("store", (7, 5))
    assert arena.blocks["store"] is not block
    assert arena.blocks["store"].numel() == 35
    assert larger.data_ptr() == arena.blocks["store"].data_ptr()


def test_names_hold_separate_blocks_and_views_share_their_block() -> None:
    arena = Arena(torch.float32)
    store = arena.get("store", (4, 4))
    work = arena.get("workspace", (4, 4))
    store.fill_(1.0)
    work.fill_(2.0)
    assert bool((store == 1.0).all())  # writing one name's view leaves the other's alone
    again = arena.get("store", (16,))
    assert bool((again == 1.0).all())  # the same memory: a later pass writes before it reads
    arena.reserve("store", 8)  # asking for less keeps the block
    assert arena.blocks["store"].numel() == 16


def test_free_memory_is_returned_without_changing_tensors() -> None:
    from mibspec.reference_impl.engine import _arena

    kept = torch.arange(1 << 16, dtype=torch.float32)
    freed = [torch.ones(1 << 18) for _ in range(8)]
    del freed
    _arena.return_free_memory()  # glibc's malloc_trim; elsewhere nothing
    assert torch.equal(kept, torch.arange(1 << 16, dtype=torch.float32))
    if sys.platform == "linux" and os.confstr("CS_GNU_LIBC_VERSION"):
        assert _arena._malloc_trim() is not None
