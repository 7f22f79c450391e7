"""The content-keyed cache of unpatched runs that reports of one group share: bounded in
bytes, keyed by the tensors' content and the model object, never by position."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mibspec.reference_impl.engine import ActivationCache  # noqa: E402

pytestmark = pytest.mark.recompute


def _value(n: int) -> tuple[object, list[object]]:
    return torch.zeros(n, dtype=torch.float32), [torch.ones(n, dtype=torch.float32)]


def test_equal_content_is_computed_once_other_content_again() -> None:
    cache, model, calls = ActivationCache(1 << 20), object(), []

    def compute() -> object:
        calls.append(1)
        return _value(4)

    ids = torch.arange(6).reshape(2, 3)
    first = cache.get_or_compute(model, (None, ids, ids.clone()), compute)
    again = cache.get_or_compute(model, (None, ids.clone(), ids.clone()), compute)  # same content
    assert again is first
    cache.get_or_compute(model, (None, ids + 1, ids), compute)  # other content
    cache.get_or_compute(model, (None, ids.reshape(3, 2), ids.reshape(3, 2)), compute)  # other shape
    cache.get_or_compute(object(), (None, ids, ids), compute)  # another model
    assert (len(calls), cache.hits, cache.misses) == (4, 1, 4)


def test_memory_is_bounded() -> None:
    entry = 2 * 4 * 1000  # two float32 tensors of 1000 values
    cache, model = ActivationCache(3 * entry), object()
    for i in range(10):
        cache.get_or_compute(model, (torch.tensor([i]),), lambda: _value(1000))
        assert cache.size <= 3 * entry
    assert cache.size == 3 * entry
    # the least recently used went first: the last three are kept
    kept = [cache.get_or_compute(model, (torch.tensor([i]),), lambda: None) is not None for i in (7, 8, 9)]
    assert kept == [True, True, True]
    big = ActivationCache(entry - 1)
    big.get_or_compute(model, (torch.tensor([0]),), lambda: _value(1000))
    assert big.size == 0  # larger than the bound: computed, not kept


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        ActivationCache(-1)
