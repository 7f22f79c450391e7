"""The ablation state a patched pass starts from (ME-5).

A node outside the circuit outputs its ablation value ``a_s``: the corrupted run's output
(``counterfactual``), the dataset mean (``mean``), zero (``zero``) or given vectors
(``optimal``). :class:`Reference` holds those values for one batch together with the slot
inputs ``Σ a_s`` they produce, computed once and shared by every circuit of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..devices import wide_device
from . import _forward, _ops
from ._chunks import batches
from ._inputs import check_ablation_values, check_mean_set, check_positive_int
from ._reuse import tensor_bytes
from ._weights import ModelWeights

__all__ = [
    "ABLATIONS",
    "Ablation",
    "Reference",
    "ablation_constant",
    "constant_reference",
    "mean_node_outputs",
    "reference_from_trace",
]

Ablation = Literal["counterfactual", "mean", "zero", "optimal"]
ABLATIONS: tuple[str, ...] = ("counterfactual", "mean", "zero", "optimal")


@dataclass(frozen=True, eq=False)
class Reference:
    """Ablation state of one batch: node values ``a`` and the slot inputs they produce."""

    nodes: torch.Tensor  # (n_forward, B or 1, T or 1, d); heads' rows unused when z is set
    slot_pre: list[torch.Tensor]  # (B, T, d), possibly a broadcast view
    slot_mid: list[torch.Tensor]
    attn: list[torch.Tensor]  # slot_mid − slot_pre: the ablated attention output of each layer
    final: torch.Tensor
    q: list[torch.Tensor]  # (H, B, T, e)
    k: list[torch.Tensor]
    v: list[torch.Tensor]
    z: list[torch.Tensor] | None  # (H, B, T, e): head h's ablation output is z_h·W_O^h + b_O/H
    group_sum: list[torch.Tensor] | None
    group_out: list[torch.Tensor] | None

    def held_bytes(self) -> int:
        """Bytes the state holds in memory. With ``z`` kept the heads' rows of ``nodes`` are
        never written, so never mapped: the input's and the MLPs' rows are counted."""
        nodes = self.nodes.untyped_storage().nbytes()
        if self.z is not None:
            n_layers = len(self.slot_pre)
            nodes = min(nodes, self.nodes[0].nbytes * (1 + n_layers))
        rest = [self.slot_pre, self.slot_mid, self.attn, self.final, self.q, self.k, self.v, self.z]
        return nodes + tensor_bytes([*rest, self.group_sum, self.group_out])


def reference_from_trace(tr: _forward.Trace, rows: slice) -> Reference:
    """The ablation state of a counterfactual run: ``rows`` of a traced pass."""

    def heads(xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [x[:, rows].contiguous() for x in xs]

    def batch(xs: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
        return None if xs is None else [x[rows] for x in xs]

    slot_pre = [x[rows] for x in tr.slot_pre]
    slot_mid = [x[rows] for x in tr.slot_mid]
    return Reference(
        nodes=tr.nodes[:, rows],
        slot_pre=slot_pre,
        slot_mid=slot_mid,
        attn=[mid - pre for pre, mid in zip(slot_pre, slot_mid, strict=True)],
        final=tr.final[rows],
        q=heads(tr.q),
        k=heads(tr.k),
        v=heads(tr.v),
        z=heads(tr.z),
        group_sum=batch(tr.group_sum),
        group_out=batch(tr.group_out),
    )


def constant_reference(
    model: ModelWeights,
    values: torch.Tensor,
    shape: tuple[int, int],
    rope: tuple[torch.Tensor, torch.Tensor] | None,
) -> Reference:
    """Ablation state where every node outputs a fixed vector (mean, zero, optimal)."""
    B, T = shape
    H = model.n_heads
    post = model.post_norm_heads
    x = values[0]
    slot_pre, slot_mid, attns, qs, ks, vs, gsum, gout = [], [], [], [], [], [], [], []
    for li, layer in enumerate(model.layers):
        base = 1 + li * (H + 1)
        full = x.expand(B, T, -1)
        q, k, v = _forward.qkv_shared(model, layer, full, rope)
        slot_pre.append(full)
        qs.append(q.transpose(0, 1))
        ks.append(k.transpose(0, 1))
        vs.append(v.transpose(0, 1))
        attn = values[base : base + H].sum(0)
        if layer.norm_attn_out is not None:
            gsum.append(attn.expand(B, T, -1))
            attn = _ops.norm(attn, layer.norm_attn_out)
            gout.append(attn.expand(B, T, -1))
        x = x + attn
        attns.append(attn.expand(B, T, -1))
        slot_mid.append(x.expand(B, T, -1))
        x = x + values[base + H]
    return Reference(
        nodes=values[:, None, None, :],
        slot_pre=slot_pre,
        slot_mid=slot_mid,
        attn=attns,
        final=x.expand(B, T, -1),
        q=qs,
        k=ks,
        v=vs,
        z=None,
        group_sum=gsum if post else None,
        group_out=gout if post else None,
    )


def mean_node_outputs(
    model: ModelWeights, input_ids: object, attention_mask: object = None, *, batch_size: int = 20
) -> torch.Tensor:
    """Mean of every node's output over all non-padding tokens of a dataset (ME-5).

    Sums are accumulated in float64 and the mean is rounded once to the model dtype.

    Returns:
        ``(n_forward, d)`` in the model dtype.
    """
    ids, mask = _forward.check_tokens(model, input_ids, attention_mask)
    size = check_positive_int(batch_size, "batch_size")
    wide = wide_device(model.device)
    total = torch.zeros((model.n_forward, model.d_model), dtype=torch.float64, device=wide)
    for sl in batches(ids.shape[0], size):
        tr = _forward.trace(model, ids[sl], mask[sl])
        weights = mask[sl].to(device=wide, dtype=torch.float64)
        total += torch.einsum("fntd,nt->fd", tr.nodes.to(device=wide, dtype=torch.float64), weights)
    return (total / float(mask.sum())).to(device=model.device, dtype=model.dtype)


def ablation_constant(
    model: ModelWeights,
    ablation: str,
    ablation_values: object,
    mean_set: tuple[object, object],
    corrupted: tuple[torch.Tensor, torch.Tensor],
    batch_size: int,
) -> torch.Tensor | None:
    """``(n_forward, d)`` values every ablated node outputs, ``None`` for ``counterfactual``.

    Args:
        model: the model.
        ablation: one of :data:`ABLATIONS`.
        ablation_values: the vectors of ``optimal`` (checked here).
        mean_set: ``(mean_ids, mean_mask)`` the ``mean`` ablation averages over; when
            ``mean_ids`` is None, the ``corrupted`` inputs and mask.
        corrupted: ``(ids, mask)`` of the checked counterfactual inputs.
        batch_size: examples per pass of the mean.
    """
    constant = check_ablation_values(model, ablation, ablation_values)
    mean_ids, mean_mask = mean_set
    check_mean_set(ablation, mean_ids, mean_mask)
    if ablation == "mean":
        if mean_ids is None:
            constant = mean_node_outputs(model, corrupted[0], corrupted[1], batch_size=batch_size)
        else:
            constant = mean_node_outputs(model, mean_ids, mean_mask, batch_size=batch_size)
    elif ablation == "zero":
        constant = torch.zeros((model.n_forward, model.d_model), dtype=model.dtype, device=model.device)
    return constant
