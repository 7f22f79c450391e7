"""The patched forward: a stack of circuits through every layer on one batch (ME-1..ME-4).

Only nodes reachable from ``input`` in some circuit of the stack (the active nodes) are
recomputed; every other node outputs its ablation value. q/k/v slots with no circuit
in-edge reuse the cached ablation q/k/v. An MLP from which no circuit path leads into a
k or v slot is computed at the read positions only, and the logits slot is formed only
there. Layouts: stored differences ``(C, n_active, B, T, d)``; per-head tensors
``(C, heads, B, T, ·)``, so a layer's head outputs land in the store without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray

from . import _ops
from ._ablation import Reference
from ._arena import STEP_BYTES, Arena
from ._graph_index import GraphIndex
from ._mixing import Mixing
from ._ops import gather_read, logit_difference, take
from ._stack import Stack
from ._weights import ModelWeights

__all__ = ["BatchContext", "HeadWeights", "PassSetup", "PatchedPass"]


@dataclass(frozen=True, eq=False)
class BatchContext:
    """What every pass over one batch of examples reads."""

    read: torch.Tensor  # (B,) read positions
    tokens: torch.Tensor  # (B, 2) correct, counterfactual
    rope: tuple[torch.Tensor, torch.Tensor] | None  # cos, sin: (B, T, e) each
    allowed: dict[int | None, torch.Tensor]  # window → (B, 1, T, T)


class HeadWeights:
    """Per layer, the q/k/v projections one per row: ``(H + 2G, d, e)`` and ``(H + 2G, e)``.

    Slot ``j·H + h`` (the q (j = 0), k (1) or v (2) slot of query head h) is projected by
    row :meth:`rows` of it: the key and value rows of grouped-query attention are shared
    by the query heads of their group, and are kept once. Layers are kept once built
    while the stacks of the whole model stay under ``limit`` bytes. Where the products
    copy their operands anyway (16-bit weights on a CPU, :func:`~._ops.matmul`) a layer's
    rows are a view of its weights: no copy is made or kept.
    """

    def __init__(self, model: ModelWeights, limit: int = 2**30) -> None:
        self.model = model
        H, G = model.n_heads, model.n_kv_heads
        group = model.kv_group.cpu().numpy()
        self.slot_rows = np.concatenate([np.arange(H), H + group, H + G + group]).astype(np.int64)
        layer = model.layers[0]
        self.view = _ops.widens(layer.w_qkv)
        size = layer.w_qkv.element_size() * layer.w_qkv.numel() * model.n_layers
        self.keep = not self.view and size <= limit
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def slots(self, li: int, slots: NDArray[np.int64]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(k, d, e)`` and ``(k, e)``: the projections of layer ``li``'s slots ``j·H + h``."""
        w, b = self.get(li)
        rows = self.slot_rows[slots]
        if np.array_equal(rows, np.arange(rows[0], rows[0] + len(rows))):
            part = slice(int(rows[0]), int(rows[0]) + len(rows))
            return w[part], None if b is None else b[part]
        index = torch.from_numpy(rows).to(w.device)
        return w.index_select(0, index), None if b is None else b.index_select(0, index)

    def get(self, li: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        if li in self.cache:
            return self.cache[li]
        layer = self.model.layers[li]
        w = layer.w_qkv.permute(1, 0, 2)
        if not self.view:
            w = w.contiguous()
        b = layer.b_qkv
        if self.keep:
            self.cache[li] = (w, b)
        return w, b


@dataclass(frozen=True, eq=False)
class PassSetup:
    """What every patched pass of one evaluation shares."""

    model: ModelWeights
    ix: GraphIndex
    qkv_weights: HeadWeights
    arena: Arena
    mixing: Mixing
    centre_neurons: bool = False  # ME-7: mask the centred difference (TransformerLens's coordinates)


class _SlotPlan(NamedTuple):
    """The q, k or v slots of a layer's active heads and which of them to recompute."""

    slots: NDArray[np.int64]  # (h,) slot indices
    need: NDArray[np.bool_]  # (C, h) circuits with an edge into the slot
    todo: NDArray[np.int64]  # positions in ``slots`` that some circuit of the stack feeds


class PatchedPass:
    """One patched pass of a stack of pruned circuits on one batch, layer by layer.

    The stored differences live in the :class:`Stack`; :meth:`metrics` runs the pass.
    """

    def __init__(
        self,
        setup: PassSetup,
        ref: Reference,
        clean_input: torch.Tensor,
        edges: NDArray[np.bool_],
        reach: NDArray[np.bool_],
        neurons: NDArray[np.bool_] | None,
        batch: BatchContext,
    ) -> None:
        self.setup, self.model, self.ix = setup, setup.model, setup.ix
        self.ref, self.edges, self.batch = ref, edges, batch
        st = Stack(setup.model, setup.ix, ref, edges, reach, neurons, setup.arena, setup.mixing)
        st.centre = setup.centre_neurons
        self.st = st
        C = st.C
        B, T, d = clean_input.shape
        self.shape = (C, B, T, d)
        self.post, self.gout = ref.group_sum, ref.group_out
        self.read_sum = None if self.post is None else [gather_read(g, batch.read) for g in self.post]
        self.read_out = None if self.gout is None else [gather_read(g, batch.read) for g in self.gout]
        self.buffer = setup.arena.get("store", (C, 1 + len(st.active), B, T, d))
        st.buffer = self.buffer
        st.store(np.array([0]), (clean_input - ref.nodes[0]).expand(C, 1, B, T, d))
        self.active = np.zeros(self.model.n_forward, dtype=np.bool_)
        self.active[st.active] = True

    def _layer(self, li: int) -> None:
        """Recompute layer ``li``'s active heads and MLP into the store."""
        heads = np.flatnonzero(self.active[self.ix.head[li]])
        m_f = int(self.ix.mlp[li])
        if not len(heads) and not self.active[m_f]:
            return
        plan = self._slot_plan(li, heads)
        mlp_everywhere = bool(self.active[m_f] and not self.st.read_only[m_f])
        x_all, first = self._layer_inputs(li, plan, mlp_everywhere)
        if len(heads):
            y_all = self._project(li, heads, plan, x_all)
            q, k, v = self._qkv(li, heads, plan, y_all)
            layer = self.model.layers[li]
            allowed = self.batch.allowed[layer.sliding_window][:, 0]  # (B, T, T)
            z = _ops.attention(
                q, k, v, allowed, layer.attn_scale, self.model.attn_softcap, layer.sliding_window is not None
            )  # (C, h, B, T, e)
            self._store_heads(li, heads, z)
        if mlp_everywhere:
            assert x_all is not None
            self._mlp_everywhere(li, x_all, first)
        elif self.active[m_f]:
            self._mlp_at_read(li)

    def _slot_plan(self, li: int, heads: NDArray[np.int64]) -> list[_SlotPlan]:
        """q/k/v slots that some circuit of the stack feeds; the others keep the cached values."""
        plan = []
        for slot_table in (self.ix.slot_q, self.ix.slot_k, self.ix.slot_v):
            slots = slot_table[li, heads]
            need: NDArray[np.bool_] = np.asarray(self.edges[:, :, slots].any(axis=1))  # (C, h)
            plan.append(_SlotPlan(slots, need, np.flatnonzero(need.any(axis=0)).astype(np.int64)))
        return plan

    def _layer_inputs(
        self, li: int, plan: list[_SlotPlan], mlp_everywhere: bool
    ) -> tuple[torch.Tensor | None, int]:
        """Inputs of the layer's recomputed q/k/v slots and, when computed everywhere, of the
        MLP's up to its heads; and the number of active nodes before the layer."""
        ix = self.ix
        mixed_slots = [p.slots[p.todo] for p in plan]
        if mlp_everywhere:
            mixed_slots.append(ix.slot_mlp[li : li + 1])
        all_slots = np.concatenate(mixed_slots)
        # one pass over the stored differences serves every slot of the layer (the MLP slot's
        # ablated input is the heads' one plus the ablated attention output, added later)
        first = int(np.searchsorted(self.st.active, ix.n_sources[ix.slot_q[li, 0]]))
        x_all = None
        if len(all_slots):
            self.buffer[:, 0] = self.ref.slot_pre[li]
            x_all = self.st.slot_inputs(
                all_slots, 0, first, True, self.post, self.gout, self.buffer, reuse=True
            )
        return x_all, first

    def _project(
        self, li: int, heads: NDArray[np.int64], plan: list[_SlotPlan], x_all: torch.Tensor | None
    ) -> torch.Tensor | None:
        """Every q/k/v slot to recompute through one norm and one batched product, rotated."""
        C, B, T, d = self.shape
        H = self.model.n_heads
        stacked = np.concatenate([j * H + heads[p.todo] for j, p in enumerate(plan)])
        counts = [len(p.todo) for p in plan]
        if not len(stacked):
            return None
        assert x_all is not None
        layer = self.model.layers[li]
        w_slots, b_slots = self.setup.qkv_weights.slots(li, stacked)  # (k, d, e), (k, e)
        # normalise and project a few slots at a time, keeping the temporaries small
        step = max(1, STEP_BYTES // (C * B * T * d * x_all.element_size()))
        parts = []
        for a in range(0, len(stacked), step):
            b = min(a + step, len(stacked))
            h = _ops.norm(x_all[:, a:b], layer.norm_attn)  # (C, b - a, B, T, d)
            parts.append(_ops.matmul(h.reshape(C, b - a, B * T, d), w_slots[a:b]))
        y_all = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        y_all = y_all.view(C, len(stacked), B, T, -1)
        if b_slots is not None:
            y_all = y_all + b_slots[None, :, None, None, :]
        n_rot = counts[0] + counts[1]
        rope = self.batch.rope
        if rope is not None and n_rot:
            y_all[:, :n_rot] = _ops.rotate(y_all[:, :n_rot], rope[0], rope[1])
        return y_all

    def _qkv(
        self, li: int, heads: NDArray[np.int64], plan: list[_SlotPlan], y_all: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(C, h, B, T, e)`` q, k and v of the active heads: recomputed or cached."""
        C = self.st.C
        qkv = []
        offset = 0
        for cache_list, p in zip((self.ref.q, self.ref.k, self.ref.v), plan, strict=True):
            cached = take(cache_list[li], heads).unsqueeze(0).expand(C, -1, -1, -1, -1)
            if not len(p.todo):
                qkv.append(cached)
                continue
            assert y_all is not None
            y = y_all[:, offset : offset + len(p.todo)]
            offset += len(p.todo)
            if len(p.todo) == len(heads) and bool(p.need.all()):
                qkv.append(y)
                continue
            # rows (circuits) that do not feed a slot keep its cached value exactly
            full = cached.clone()
            idx = torch.from_numpy(p.todo).to(full.device)
            keep = torch.from_numpy(p.need[:, p.todo]).to(full.device)[:, :, None, None, None]
            full[:, idx] = torch.where(keep, y, full[:, idx])
            qkv.append(full)
        q, k, v = qkv
        return q, k, v

    def _store_heads(self, li: int, heads: NDArray[np.int64], z: torch.Tensor) -> None:
        """Store the differences ``o − a`` of the active heads from their attention output."""
        C, B, T, d = self.shape
        layer = self.model.layers[li]
        w_o = take(layer.w_o, heads)  # (h, e, d)
        fwd = self.ix.head[li, heads]
        delta: torch.Tensor | None
        if self.ref.z is not None:
            # o − a = (z − z_ablated)·W_O: the bias cancels, no per-head ablation outputs needed
            dz = (z - take(self.ref.z[li], heads)).reshape(C, len(heads), B * T, -1)
            if self.st.neurons is None:
                # a layer's active heads are consecutive in the store: write in place, one
                # circuit at a time (a product over the stack would go through a copy)
                pos = self.st.slot_of[int(fwd[0])]
                for c in range(C):
                    target = self.buffer[c, pos : pos + len(heads)].view(len(heads), B * T, d)
                    _ops.matmul(dz[c], w_o, out=target)
                delta = None
            else:
                delta = _ops.matmul(dz, w_o).view(C, len(heads), B, T, d)
        else:
            o = _ops.matmul(z.reshape(C, len(heads), B * T, -1), w_o).view(C, len(heads), B, T, d)
            if layer.b_o is not None:
                o = o + layer.b_o / self.model.n_heads
            delta = o - take(self.ref.nodes, fwd)
        if delta is not None:
            self.st.store(fwd, delta)

    def _mlp_everywhere(self, li: int, x_all: torch.Tensor, first: int) -> None:
        """Recompute the MLP at every position (some circuit path leads from it into a k or v slot)."""
        ix, ref, layer = self.ix, self.ref, self.model.layers[li]
        m_f = int(ix.mlp[li])
        # from the heads' ablated input to the MLP's: add the ablated attention output
        x = x_all[:, -1:] + ref.attn[li]
        last = int(np.searchsorted(self.st.active, ix.n_sources[ix.slot_mlp[li]]))
        own = self.st.slot_inputs(
            ix.slot_mlp[li : li + 1], first, last, False, self.post, self.gout, self.buffer
        )
        if own is not None:
            x = x + own
        out = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, self.model.activation)
        self.st.store(np.array([m_f]), out - ref.nodes[m_f])

    def _mlp_at_read(self, li: int) -> None:
        """Recompute the MLP at the read positions only: mix, normalise and apply it there alone."""
        ix, ref, layer, read = self.ix, self.ref, self.model.layers[li], self.batch.read
        m_f = int(ix.mlp[li])
        last = int(np.searchsorted(self.st.active, ix.n_sources[ix.slot_mlp[li]]))
        rows = gather_read(self.buffer[:, : 1 + last], read)  # (C, 1 + last, B, d)
        rows[:, 0] = gather_read(ref.slot_mid[li], read)
        x = self.st.slot_inputs(ix.slot_mlp[li : li + 1], 0, last, True, self.read_sum, self.read_out, rows)
        assert x is not None
        out = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, self.model.activation)  # (C, 1, B, d)
        self.st.store_read(m_f, out[:, 0] - gather_read(ref.nodes[m_f], read), read)

    def metrics(self) -> torch.Tensor:
        """Metrics ``(C, B)``, float64: every layer, then the logits slot at the read positions."""
        for li in range(len(self.model.layers)):
            self._layer(li)
        st, read = self.st, self.batch.read
        read_buffer = gather_read(self.buffer, read)  # (C, 1 + n_active, B, d)
        read_buffer[:, 0] = gather_read(self.ref.final, read)
        logits_slot = np.array([self.ix.slot_logits])
        x_final = st.slot_inputs(
            logits_slot, 0, len(st.active), True, self.read_sum, self.read_out, read_buffer
        )
        assert x_final is not None
        return logit_difference(self.model, x_final[:, 0], self.batch.tokens)
