"""The engine's products (``_ops.matmul``): torch's own in float32 and float64; for 16-bit
operands on a CPU, formed in float32 and rounded once, as torch's 16-bit kernels compute."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mibspec.reference_impl.engine import _ops  # noqa: E402

pytestmark = pytest.mark.recompute

HALF = [torch.float16, torch.bfloat16]


def _operands(dtype: torch.dtype, n: int = 40, k: int = 96, m: int = 72) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(7)
    a = torch.randn(n, k, generator=g).to(dtype)
    b = (torch.randn(k, m, generator=g) / k**0.5).to(dtype)
    bias = torch.randn(m, generator=g).to(dtype)
    return a, b, bias


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_wide_dtypes_are_torchs_own_product(dtype: torch.dtype) -> None:
    a, b, bias = _operands(dtype)
    assert torch.equal(_ops.matmul(a, b), torch.matmul(a, b))
    assert torch.equal(_ops.matmul(a, b, bias), torch.addmm(bias, a, b))
    out = torch.empty(a.shape[0], b.shape[1], dtype=dtype)
    assert _ops.matmul(a, b, out=out) is out
    assert torch.equal(out, torch.matmul(a, b))


@pytest.mark.parametrize("dtype", HALF)
def test_half_products_are_the_float64_product_rounded_once(dtype: torch.dtype) -> None:
    """Against an independent baseline: the exact (float64) product rounded to the dtype once.
    Formed in float32, an element can differ from it only where float32's own rounding of the
    sum crosses a rounding boundary of the 16-bit dtype: at most one unit in the last place."""
    a, b, bias = _operands(dtype)
    exact = (a.double() @ b.double() + bias.double()).to(dtype)
    mine = _ops.matmul(a, b, bias)
    assert mine.dtype == dtype
    ulp = torch.finfo(dtype).eps * exact.double().abs().clamp_min(torch.finfo(dtype).tiny)
    assert bool(((mine.double() - exact.double()).abs() <= ulp).all())
    assert (mine != exact).float().mean().item() < 0.01  # off by one ulp only rarely
    # torch's own 16-bit kernel rounds once after a float32 sum as well: the same values up to
    # the last place where the two summation orders round differently
    native = torch.addmm(bias, a, b)
    assert bool(((mine.double() - native.double()).abs() <= 2 * ulp).all())


@pytest.mark.parametrize("dtype", HALF)
def test_a_wide_weight_is_multiplied_in_slices_with_the_same_values(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, bias = _operands(dtype)
    whole = _ops.matmul(a, b, bias)
    batched = _ops.matmul(a.unsqueeze(0).expand(3, -1, -1), b)
    monkeypatch.setattr(_ops, "WIDEN_ELEMENTS", b.shape[0] * 10)  # slices of 10 columns
    sliced = _ops.matmul(a, b, bias)
    ulp = torch.finfo(dtype).eps * whole.double().abs().clamp_min(torch.finfo(dtype).tiny)
    assert bool(((sliced.double() - whole.double()).abs() <= ulp).all())
    out = torch.empty(3, a.shape[0], b.shape[1], dtype=dtype)
    assert _ops.matmul(a.unsqueeze(0).expand(3, -1, -1), b, out=out) is out
    assert bool(((out.double() - batched.double()).abs() <= ulp).all())


def test_gradients_flow_through_a_half_product() -> None:
    """Attribution differentiates through the products: the widened form keeps the graph."""
    a, b, bias = _operands(torch.bfloat16)
    a.requires_grad_(True)
    _ops.matmul(a, b, bias).float().sum().backward()
    assert a.grad is not None
    expected = b.double().sum(1).expand_as(a)
    assert torch.allclose(a.grad.double(), expected, rtol=1e-2, atol=1e-2)


def test_half_products_reuse_their_float32_blocks() -> None:
    """The float32 copies live in a few blocks per thread, reused by every product (no fresh
    buffers), and a block made in inference mode serves products outside it."""
    a, b, bias = _operands(torch.bfloat16)
    with torch.inference_mode():
        first = _ops.matmul(a, b, bias)
    blocks = {name: block.data_ptr() for name, block in _ops._SCRATCH.blocks.items()}
    assert set(blocks) == {"a", "b", "product"}
    second = _ops.matmul(a, b, bias)
    assert torch.equal(first, second)
    assert {name: block.data_ptr() for name, block in _ops._SCRATCH.blocks.items()} == blocks
    assert all(block.numel() >= _ops.WIDEN_ELEMENTS for block in _ops._SCRATCH.blocks.values())
