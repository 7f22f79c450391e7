"""Numerical building blocks shared by the plain and the patched forward.

Precision follows the reference implementations of each family: RMS norms and the
attention softmax are computed in at least float32 (float64 stays float64), everything
else in the model dtype. A product of 16-bit tensors (:func:`matmul`) accumulates in
float32 and is rounded once to the model dtype, as torch's CPU kernels and CUDA's default
(float32 accumulation) compute it; on a CPU it is formed in float32 explicitly, which gives
the same values up to summation order at float32's speed (torch's own 16-bit CPU kernels run
15–50× slower where the CPU has no 16-bit units).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch
from numpy.typing import NDArray
from torch.nn import functional as nnf

from ..devices import wide
from ._weights import LayerWeights, ModelWeights, NormWeights

__all__ = [
    "activation",
    "attention",
    "causal_mask",
    "gather_read",
    "logit_difference",
    "matmul",
    "mlp",
    "norm",
    "positions_from_mask",
    "rope_tables",
    "rotate",
    "take",
    "unembed_rows",
    "widens",
]


def _upcast(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


#: dtypes whose products a CPU forms in float32 (module docstring)
_NARROW = (torch.float16, torch.bfloat16)
#: the most elements of an operand widened to float32 at once: a wide weight (an
#: unembedding) is multiplied a slice of columns at a time and a tall input a block of rows
#: at a time, so the float32 copies stay small whatever the batch; they are formed in three
#: blocks of this size per thread, reused by every product (:func:`_scratch`)
WIDEN_ELEMENTS = 1 << 20


def widens(x: torch.Tensor) -> bool:
    """Whether :func:`matmul` forms products of ``x``'s dtype and device in float32 copies."""
    return x.dtype in _NARROW and x.device.type == "cpu"


def matmul(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``a @ b`` (``+ bias``, with ``a`` and ``b`` 2-D) in ``a``'s dtype; written to ``out``
    when given. 16-bit operands on a CPU are multiplied in float32 and the result rounded once
    (module docstring); anything else is torch's product as it is."""
    if not widens(a):
        if bias is None:
            return torch.matmul(a, b) if out is None else torch.matmul(a, b, out=out)
        return torch.addmm(bias, a, b) if out is None else torch.addmm(bias, a, b, out=out)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        # differentiated (attribution): one widened product, rounded once
        wide = a.float() @ b.float() if bias is None else torch.addmm(bias.float(), a.float(), b.float())
        return wide.to(a.dtype) if out is None else out.copy_(wide)
    n, m = b.shape[-1], a.shape[-2]
    lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if out is None:
        out = torch.empty((*lead, m, n), dtype=a.dtype, device=a.device)
    cols = max(1, min(n, WIDEN_ELEMENTS * n // max(1, b.numel())))
    rows = max(1, min(m, WIDEN_ELEMENTS // max(1, math.prod(lead) * max(a.shape[-1], cols))))
    for j in range(0, n, cols):
        bj = _widened("b", b[..., j : j + cols])
        cj = None if bias is None else bias[j : j + cols].float()
        for i in range(0, m, rows):
            ai = _widened("a", a[..., i : i + rows, :])
            target = out[..., i : i + rows, j : j + cols]
            block = _scratch("product", target.shape)
            if cj is None:
                torch.matmul(ai, bj, out=block)
            else:
                torch.addmm(cj, ai, bj, out=block)
            target.copy_(block)  # rounds the float32 block to the dtype, as .to() would
    return out


class _Scratch(threading.local):
    """Per thread, the float32 blocks the 16-bit products are formed in (:func:`matmul`)."""

    def __init__(self) -> None:
        self.blocks: dict[str, torch.Tensor] = {}


_SCRATCH = _Scratch()


def _scratch(name: str, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """An uninitialised contiguous float32 CPU tensor of ``shape`` in the thread's block
    ``name``, reused by every product: each block holds about :data:`WIDEN_ELEMENTS`
    elements, allocated once, so the products' working memory stays the same few blocks
    instead of fresh buffers whose freed space the allocator keeps scattered."""
    size = math.prod(shape)
    block = _SCRATCH.blocks.get(name)
    if block is None or block.numel() < size:
        _SCRATCH.blocks.pop(name, None)
        with torch.inference_mode(False):  # a block made in inference mode is written outside it too
            block = torch.empty(max(size, WIDEN_ELEMENTS), dtype=torch.float32)
        _SCRATCH.blocks[name] = block
    return block[:size].view(shape)


def _widened(name: str, x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, copied into the scratch block ``name``."""
    return _scratch(name, x.shape).copy_(x)


def norm(x: torch.Tensor, w: NormWeights) -> torch.Tensor:
    """Apply one normalisation over the last axis (formulas in :class:`NormWeights`)."""
    if w.kind == "layer":
        return nnf.layer_norm(x, (x.shape[-1],), w.weight, w.bias, w.eps)
    xf = x.to(_upcast(x.dtype))
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + w.eps)
    if w.kind == "rms":
        # Llama/Qwen2 round the normalised vector to the model dtype before the weight.
        return w.weight * xf.to(x.dtype)
    # Gemma-2 multiplies by (1 + w) in the upcast dtype and rounds once at the end.
    return (xf * (1.0 + w.weight.to(xf.dtype))).to(x.dtype)


def activation(x: torch.Tensor, name: str) -> torch.Tensor:
    """MLP nonlinearity by engine name."""
    if name == "gelu_tanh":
        return nnf.gelu(x, approximate="tanh")
    if name == "gelu":
        return nnf.gelu(x)
    if name == "silu":
        return nnf.silu(x)
    if name == "relu":
        return nnf.relu(x)
    raise ValueError(f"activation: unknown name {name!r}")


def mlp(x: torch.Tensor, layer: LayerWeights, act: str) -> torch.Tensor:
    """The MLP sublayer on an already normalised input, including Gemma-2's output norm."""
    shape = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    up = matmul(x2, layer.w_in, layer.b_in)
    # gated families multiply the activated gate with the up projection
    hidden = activation(up, act) if layer.w_gate is None else activation(matmul(x2, layer.w_gate), act) * up
    out = matmul(hidden, layer.w_out, layer.b_out)
    out = out.view(*shape, -1)
    if layer.norm_mlp_out is not None:
        out = norm(out, layer.norm_mlp_out)
    return out


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids ``cumsum(mask) - 1`` clipped at 0 (``(N, T)`` long)."""
    return (mask.long().cumsum(-1) - 1).clamp_min(0)


def causal_mask(mask: torch.Tensor, window: int | None) -> torch.Tensor:
    """``(N, 1, T, T)`` bool: query i may read key j iff ``j ≤ i``, j is not padding, and
    (sliding window) ``i - j < window``."""
    T = mask.shape[-1]
    i = torch.arange(T, device=mask.device).unsqueeze(1)
    j = torch.arange(T, device=mask.device).unsqueeze(0)
    allowed = j <= i
    if window is not None:
        allowed = allowed & (i - j < window)
    return allowed.unsqueeze(0).unsqueeze(0) & mask.bool()[:, None, None, :]


def rope_tables(model: ModelWeights, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """cos/sin tables ``(N, T, e)`` in the model dtype, or ``None`` without rotary embeddings."""
    if model.rope_inv_freq is None:
        return None
    freqs = positions[..., None].float() * model.rope_inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = (emb.cos() * model.rope_scale).to(model.dtype)
    sin = (emb.sin() * model.rope_scale).to(model.dtype)
    return cos, sin


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding ``x·cos + rotate_half(x)·sin``; cos/sin broadcast against ``x``."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    scale: float,
    softcap: float | None,
    windowed: bool = False,
) -> torch.Tensor:
    """Scaled dot-product attention per head.

    Args:
        q, k, v: ``(..., h, T, e)`` (keys and values already expanded to query heads).
        allowed: bool mask broadcastable to ``(..., h, T, T)``.
        scale: multiplier of ``q·k``.
        softcap: ``c·tanh(s/c)`` applied to the scores before masking, or ``None``.
        windowed: the mask comes from a sliding window, so a padding query row may see no
            key at all; such rows get the mean of the values (they are never read, but
            must stay finite).

    Without soft-capping or a window, one fused kernel computes the same function.

    Returns:
        The mixed values ``(..., h, T, e)``.
    """
    if softcap is None and not windowed:
        # every row sees at least its first token; the fused softmax runs in float32 or wider
        return nnf.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=scale)
    scores = matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    # A finite fill keeps fully masked rows (padding queries under a sliding window) finite:
    # their values are never read, but NaN would leak through zero attention weights.
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=_upcast(q.dtype)).to(q.dtype)
    return matmul(probs, v)


def unembed_rows(model: ModelWeights, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Logits of selected vocabulary rows only.

    Args:
        hidden: ``(..., d)`` residual stream at the read positions (before the final norm).
        tokens: ``(..., k)`` token ids whose logits are wanted.

    Returns:
        ``(..., k)`` logits in the model dtype, soft-capped when the model does so.
    """
    h = norm(hidden, model.norm_final)
    rows = model.w_unembed[tokens]
    logits = (rows * h.unsqueeze(-2)).sum(-1)
    if model.b_unembed is not None:
        logits = logits + model.b_unembed[tokens]
    if model.final_softcap is not None:
        logits = torch.tanh(logits / model.final_softcap) * model.final_softcap
    return logits


def gather_read(x: torch.Tensor, read: torch.Tensor) -> torch.Tensor:
    """``(..., B, T, d)`` → ``(..., B, d)`` at each example's read position.

    A ``(..., 1, 1, d)`` value, the same at every example and position (a constant
    ablation value), is broadcast to ``(..., B, d)``.
    """
    if x.shape[-3] == 1 and x.shape[-2] == 1:
        return x[..., 0, :, :].expand(*x.shape[:-3], len(read), x.shape[-1])
    index = read.view(*([1] * (x.ndim - 3)), -1, 1, 1).expand(*x.shape[:-2], 1, x.shape[-1])
    return x.gather(-2, index).squeeze(-2)


def logit_difference(model: ModelWeights, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """float64 ``logit(correct) − logit(counterfactual)`` from ``(..., B, d)`` residuals."""
    logits = wide(unembed_rows(model, hidden, tokens))
    return logits[..., 0] - logits[..., 1]


def take(x: torch.Tensor, index: NDArray[np.int64]) -> torch.Tensor:
    """``x[index]`` along the first axis; a view when ``index`` is a contiguous range."""
    first = int(index[0])
    if len(index) == int(index[-1]) - first + 1:
        return x[first : first + len(index)]
    return x.index_select(0, torch.from_numpy(index).to(x.device))
