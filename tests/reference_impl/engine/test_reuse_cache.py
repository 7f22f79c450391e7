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
    # computed values fill all but a sixteenth of the bound (left for metrics): three here
    cache, model = ActivationCache(4 * entry), object()
    for i in range(10):
        cache.get_or_compute(model, (torch.tensor([i]),), lambda: _value(1000))
        assert cache.size <= 3 * entry
    assert cache.size == 3 * entry
    # kept as they came: the first three; the others were computed and not kept
    kept = [cache.get(model, cache.key(model, (torch.tensor([i]),))) is not None for i in range(10)]
    assert kept == [True, True, True] + [False] * 7
    # an entry kept again under its key replaces itself
    cache.put(model, cache.key(model, (torch.tensor([0]),)), _value(500), entry // 2)
    assert cache.size == 2 * entry + entry // 2
    # what is put (metrics) may fill the whole bound, not more
    cache.put(model, b"metrics", None, entry + entry // 2)
    cache.put(model, b"more", None, 1)
    assert (cache.size, cache.get(model, b"more")) == (4 * entry, None)
    big = ActivationCache(entry - 1)
    big.get_or_compute(model, (torch.tensor([0]),), lambda: _value(1000))
    assert big.size == 0  # larger than the bound: computed, not kept


def test_a_scan_larger_than_the_bound_still_reuses_what_fits() -> None:
    """Evaluations that share a cache pass the same batches in the same order: with five
    batches and room for three, every pass after the first reuses three (dropping the
    oldest for the newest would leave none to reuse)."""
    entry = 2 * 4 * 1000
    cache, model, calls = ActivationCache(4 * entry), object(), []  # three computed values fit

    def compute() -> object:
        calls.append(1)
        return _value(1000)

    for _ in range(4):
        for batch in range(5):
            cache.get_or_compute(model, (torch.tensor([batch]),), compute)
    assert len(calls) == 5 + 3 * 2


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        ActivationCache(-1)
