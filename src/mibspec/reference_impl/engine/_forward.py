"""Plain (unpatched) forward pass over :class:`ModelWeights`, exposing the EAP-IG nodes.

Source nodes, in the graph's forward order: ``input`` (token embedding, times the
embedding scale, plus the learned position embedding), then per layer the heads
``a{l}.h{h}`` and ``m{l}``. A head's output is its mixed values times its own block of
the output projection plus ``1/H`` of the output-projection bias, so that the residual
stream entering layer ``l`` is exactly ``input + Σ(outputs of all nodes of layers < l)``
(Gemma-2: each layer's head outputs are summed, normalised together by the post-attention
norm, and that normalised sum is what enters the residual stream).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import _ops
from ._weights import LayerWeights, ModelWeights

__all__ = [
    "ForwardOutput",
    "Trace",
    "check_token_pair",
    "check_tokens",
    "embed",
    "run_model",
    "trace",
    "trace_rows",
]


@dataclass(frozen=True, eq=False)
class ForwardOutput:
    """Result of :func:`run_model`.

    Attributes:
        logits: ``(N, T, V)`` logits in the model dtype.
        residual: ``(N, T, d)`` residual stream entering the final norm.
        node_outputs: ``(N, T, n_forward, d)`` node outputs in forward-node order
            (Gemma-2 heads: before the post-attention norm), or ``None``.
    """

    logits: torch.Tensor
    residual: torch.Tensor
    node_outputs: torch.Tensor | None


@dataclass(frozen=True, eq=False)
class Trace:
    """Everything a patched run reuses from an unpatched one (internal).

    Attributes:
        nodes: ``(n_forward, N, T, d)`` node outputs (heads' rows only if ``head_nodes``).
        slot_pre: per layer, ``(N, T, d)`` input of the heads' q/k/v slots.
        slot_mid: per layer, ``(N, T, d)`` input of the MLP slot.
        final: ``(N, T, d)`` input of the logits slot.
        q, k, v: per layer, ``(H, N, T, e)`` (rotated; keys/values expanded to query heads).
        z: per layer, ``(H, N, T, e)`` mixed values; head h outputs ``z_h·W_O^h + b_O/H``.
        head_nodes: whether the heads' rows of ``nodes`` are filled.
        group_sum: per layer ``Σ_h`` head outputs, only with post-attention norms.
        group_out: per layer, the normalised ``group_sum``, only with post-attention norms.
    """

    nodes: torch.Tensor
    slot_pre: list[torch.Tensor]
    slot_mid: list[torch.Tensor]
    final: torch.Tensor
    q: list[torch.Tensor]
    k: list[torch.Tensor]
    v: list[torch.Tensor]
    z: list[torch.Tensor]
    head_nodes: bool
    group_sum: list[torch.Tensor] | None
    group_out: list[torch.Tensor] | None


def check_tokens(
    model: ModelWeights, input_ids: object, attention_mask: object, name: str = "input_ids"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate a right-padded token batch; return ``(ids, mask)`` as long tensors on the
    model's device.

    Raises:
        ValueError: wrong shape or dtype, ids out of the vocabulary, a mask that is not
            0/1, not right-padded, or has an empty row.
    """
    ids = torch.as_tensor(
        np.asarray(input_ids) if not torch.is_tensor(input_ids) else input_ids, device=model.device
    )
    if ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"{name}: expected a non-empty (N, T) integer array, got shape {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ValueError(f"{name}: expected integer token ids, got dtype {ids.dtype}")
    ids = ids.long()
    if int(ids.min()) < 0 or int(ids.max()) >= model.vocab_size:
        raise ValueError(
            f"{name}: token ids must lie in [0, {model.vocab_size}), got range "
            f"[{int(ids.min())}, {int(ids.max())}]"
        )
    if attention_mask is None:
        mask = torch.ones_like(ids)
    else:
        mask = torch.as_tensor(
            np.asarray(attention_mask) if not torch.is_tensor(attention_mask) else attention_mask,
            device=model.device,
        )
        if tuple(mask.shape) != tuple(ids.shape):
            raise ValueError(
                f"attention_mask: expected shape {tuple(ids.shape)} like {name}, got {tuple(mask.shape)}"
            )
        if not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("attention_mask: expected only 0 and 1 entries")
        mask = mask.long()
    if bool((mask[:, 0] == 0).any()):
        raise ValueError("attention_mask: every row needs at least one token, first (right padding)")
    if bool((mask[:, 1:] > mask[:, :-1]).any()):
        raise ValueError("attention_mask: expected right padding (ones, then zeros) in every row")
    if model.w_pos is not None and ids.shape[1] > model.w_pos.shape[0]:
        raise ValueError(
            f"{name}: sequence length {ids.shape[1]} exceeds the model's {model.w_pos.shape[0]} positions"
        )
    return ids, mask


def check_token_pair(
    model: ModelWeights, clean_ids: object, corrupted_ids: object, attention_mask: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate clean and corrupted token batches of one shape sharing ``attention_mask``;
    return ``(ids, corrupted_ids, mask)`` as long tensors.

    Raises:
        ValueError: either batch fails :func:`check_tokens`, or their shapes differ.
    """
    ids, mask = check_tokens(model, clean_ids, attention_mask, "clean_ids")
    cids, _ = check_tokens(model, corrupted_ids, attention_mask, "corrupted_ids")
    if cids.shape != ids.shape:
        raise ValueError(
            f"corrupted_ids: expected shape {tuple(ids.shape)} like clean_ids, got {tuple(cids.shape)}"
        )
    return ids, cids, mask


def embed(model: ModelWeights, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Output of the ``input`` node, ``(N, T, d)``."""
    x = model.w_embed[ids]
    if model.embed_scale is not None:
        x = x * model.embed_scale
    if model.w_pos is not None:
        x = x + model.w_pos[positions]
    return x


def qkv_shared(
    model: ModelWeights,
    layer: LayerWeights,
    x: torch.Tensor,
    rope: tuple[torch.Tensor, torch.Tensor] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q/k/v of every head from one shared slot input ``x`` ``(N, T, d)``; ``(N, H, T, e)`` each."""
    N, T, d = x.shape
    H, G, e = model.n_heads, model.n_kv_heads, model.d_head
    h = _ops.norm(x, layer.norm_attn)
    if layer.b_qkv is None:
        qkv = _ops.matmul(h, layer.w_qkv.reshape(d, -1))
    else:
        qkv = _ops.matmul(h.reshape(N * T, d), layer.w_qkv.reshape(d, -1), layer.b_qkv.reshape(-1))
    qkv = qkv.view(N, T, H + 2 * G, e).transpose(1, 2)
    q, k, v = qkv[:, :H], qkv[:, H : H + G], qkv[:, H + G :]
    if rope is not None:
        cos, sin = rope[0].unsqueeze(1), rope[1].unsqueeze(1)
        q, k = _ops.rotate(q, cos, sin), _ops.rotate(k, cos, sin)
    if G != H:
        group = model.kv_group
        k, v = k.index_select(1, group), v.index_select(1, group)
    return q, k, v


def head_outputs(
    model: ModelWeights, layer: LayerWeights, z: torch.Tensor, heads: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-head residual contributions ``z_h·W_O^h + b_O/H``.

    Args:
        z: ``(..., h, T, e)`` mixed values of the heads listed in ``heads`` (all if ``None``).

    Returns:
        ``(..., h, T, d)``.
    """
    w_o = layer.w_o if heads is None else layer.w_o.index_select(0, heads)
    out = _ops.matmul(z, w_o)
    if layer.b_o is not None:
        out = out + (layer.b_o / model.n_heads)
    return out


def _run(
    model: ModelWeights,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    record: bool,
    head_nodes: bool = True,
    rows: slice | None = None,
) -> tuple[torch.Tensor, Trace | None]:
    """Plain forward; returns the final residual and, when ``record``, the trace.

    With ``head_nodes=False`` the heads' rows of ``Trace.nodes`` are left unset (the mixed
    values ``Trace.z`` determine them), which saves materialising ``H`` residual-sized
    tensors per layer. With ``rows`` the trace holds those examples only (copies, so that
    the other examples' activations are freed layer by layer); the final residual returned
    beside it holds all.
    """
    N, T = ids.shape
    keep = _Rows(N, rows)
    H, d, e = model.n_heads, model.d_model, model.d_head
    positions = _ops.positions_from_mask(mask)
    rope = _ops.rope_tables(model, positions)
    masks: dict[int | None, torch.Tensor] = {}
    x = embed(model, ids, positions)
    shape = (model.n_forward, keep.n, T, d)
    nodes = torch.empty(shape, dtype=model.dtype, device=x.device) if record else None
    slot_pre: list[torch.Tensor] = []
    slot_mid: list[torch.Tensor] = []
    qs: list[torch.Tensor] = []
    ks: list[torch.Tensor] = []
    vs: list[torch.Tensor] = []
    zs: list[torch.Tensor] = []
    gsum: list[torch.Tensor] = []
    gout: list[torch.Tensor] = []
    if nodes is not None:
        nodes[0] = x[keep.rows]
    for li, layer in enumerate(model.layers):
        if layer.sliding_window not in masks:
            masks[layer.sliding_window] = _ops.causal_mask(mask, layer.sliding_window)
        allowed = masks[layer.sliding_window]
        q, k, v = qkv_shared(model, layer, x, rope)
        z = _ops.attention(
            q, k, v, allowed, layer.attn_scale, model.attn_softcap, layer.sliding_window is not None
        )
        base = 1 + li * (H + 1)
        if nodes is not None and head_nodes:
            o = head_outputs(model, layer, z)  # (N, H, T, d)
            attn = o.sum(1)
            nodes[base : base + H] = o[keep.rows].transpose(0, 1)
        else:
            attn = _ops.matmul(z.transpose(1, 2).reshape(N, T, H * e), layer.w_o.reshape(-1, d))
            if layer.b_o is not None:
                attn = attn + layer.b_o
        if layer.norm_attn_out is not None:
            if record:
                gsum.append(keep.copy(attn))
            attn = _ops.norm(attn, layer.norm_attn_out)
            if record:
                gout.append(keep.copy(attn))
        if record:
            # head-major copies: the patched run works on (heads, examples, positions, e)
            slot_pre.append(keep.copy(x))
            qs.append(q[keep.rows].transpose(0, 1).contiguous())
            ks.append(k[keep.rows].transpose(0, 1).contiguous())
            vs.append(v[keep.rows].transpose(0, 1).contiguous())
            zs.append(z[keep.rows].transpose(0, 1).contiguous())
        x = x + attn
        if record:
            slot_mid.append(keep.copy(x))
        m = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, model.activation)
        if nodes is not None:
            nodes[base + H] = m[keep.rows]
        x = x + m
    if not record:
        return x, None
    assert nodes is not None
    post = model.post_norm_heads
    return x, Trace(
        nodes=nodes,
        slot_pre=slot_pre,
        slot_mid=slot_mid,
        final=keep.copy(x),
        q=qs,
        k=ks,
        v=vs,
        z=zs,
        head_nodes=head_nodes,
        group_sum=gsum if post else None,
        group_out=gout if post else None,
    )


def trace(model: ModelWeights, ids: torch.Tensor, mask: torch.Tensor, *, head_nodes: bool = True) -> Trace:
    """Plain forward recording node outputs and slot inputs (ids already checked)."""
    with torch.inference_mode():
        _, tr = _run(model, ids, mask, record=True, head_nodes=head_nodes)
    assert tr is not None
    return tr


def trace_rows(
    model: ModelWeights, ids: torch.Tensor, mask: torch.Tensor, rows: slice, *, head_nodes: bool = True
) -> tuple[torch.Tensor, Trace]:
    """One plain forward over every row of ``ids``, recording the examples ``rows`` only: the
    final residual of every row, and the trace of ``rows`` (ids already checked)."""
    with torch.inference_mode():
        x, tr = _run(model, ids, mask, record=True, head_nodes=head_nodes, rows=rows)
    assert tr is not None
    return x, tr


class _Rows:
    """The examples a trace records: all of them, or a slice copied out of each tensor."""

    def __init__(self, n: int, rows: slice | None) -> None:
        self.rows = slice(None) if rows is None else rows
        self.n = len(range(n)[self.rows])
        self.all = self.n == n

    def copy(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` itself when every row is kept, else a copy of the kept rows."""
        return x if self.all else x[self.rows].clone()


def final_residual(model: ModelWeights, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Plain forward returning only the residual entering the final norm (ids already checked)."""
    with torch.inference_mode():
        x, _ = _run(model, ids, mask, record=False)
    return x


def run_model(
    model: ModelWeights,
    input_ids: object,
    attention_mask: object = None,
    *,
    node_outputs: bool = False,
) -> ForwardOutput:
    """Unpatched forward pass with full-vocabulary logits.

    Args:
        model: weights from :func:`load_model`.
        input_ids: ``(N, T)`` token ids, right padded.
        attention_mask: ``(N, T)`` 0/1, ones then zeros per row; all ones if ``None``.
            Position ids are ``cumsum(mask) - 1``.
        node_outputs: also return every source node's output.

    Returns:
        Logits, the final residual stream and optionally the node outputs.
    """
    ids, mask = check_tokens(model, input_ids, attention_mask)
    with torch.inference_mode():
        x, tr = _run(model, ids, mask, record=node_outputs)
        h = _ops.norm(x, model.norm_final)
        logits = _ops.matmul(h, model.w_unembed.T)
        if model.b_unembed is not None:
            logits = logits + model.b_unembed
        if model.final_softcap is not None:
            logits = torch.tanh(logits / model.final_softcap) * model.final_softcap
    nodes = None if tr is None else tr.nodes.permute(1, 2, 0, 3)
    return ForwardOutput(logits=logits, residual=x, node_outputs=nodes)
