"""The store of a patched pass over a stack of circuits, and the slot inputs mixed from it.

For a stack of C circuits the store holds, per circuit, the difference ``o_s − a_s``
between the patched and the ablation output of every active node (a node reachable
from ``input`` in some circuit of the stack); row 0 holds the ablated input of the slots
being formed. A slot's input is then row 0 plus the rows of the circuit's edges into it
(:meth:`Stack.slot_inputs`).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray

from . import _ops
from ._ablation import Reference
from ._arena import Arena
from ._graph_index import GraphIndex, read_only
from ._mixing import Mixing, mix
from ._weights import ModelWeights

__all__ = ["Stack"]


class Stack:
    """State of one patched pass over a stack of C circuits and one batch of B examples."""

    def __init__(
        self,
        model: ModelWeights,
        ix: GraphIndex,
        ref: Reference,
        edges: NDArray[np.bool_],
        reach: NDArray[np.bool_],
        neurons: NDArray[np.bool_] | None,
        arena: Arena,
        mixing: Mixing,
    ) -> None:
        self.model, self.ix, self.ref, self.arena, self.mixing = model, ix, ref, arena, mixing
        self.edges = edges  # (C, n_forward, n_backward), pruned
        self.reach = reach  # (C, n_forward)
        self.C = edges.shape[0]
        self.active = np.flatnonzero(reach.any(axis=0))  # forward indices, ascending
        # Row 0 of the store holds the ablated input of the slots being formed, so that
        # adding it is one more column of the mixing product; active node i is row 1 + i.
        self.slot_of = {int(f): 1 + i for i, f in enumerate(self.active)}
        self.neurons = None
        if neurons is not None:
            kept = torch.as_tensor(neurons[:, self.active], device=model.device).to(model.dtype)
            self.neurons = torch.cat([torch.ones_like(kept[:, :1]), kept], dim=1)
        self.read_only = read_only(ix, edges, reach)
        self.buffer: torch.Tensor | None = None
        # with neuron masks: mask o − a after removing its mean over the residual coordinates
        self.centre = False

    def _masked(self, delta: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.centre:
            delta = delta - delta.mean(dim=-1, keepdim=True)
        return delta * mask

    def _weights(
        self, sources: NDArray[np.int64], slots: NDArray[np.int64], with_base: bool = False
    ) -> NDArray[np.bool_]:
        """``(C, k, s)`` membership of edges ``sources → slots``.

        With ``with_base`` a leading column of ones selects row 0 of the store.
        """
        w = self.edges[:, sources][:, :, slots].transpose(0, 2, 1)
        if with_base:
            w = np.concatenate([np.ones((*w.shape[:2], 1), dtype=np.bool_), w], axis=2)
        return w

    def _own_sizes(
        self, sources: NDArray[np.int64], slots: NDArray[np.int64], w: NDArray[np.bool_], with_base: bool
    ) -> NDArray[np.int64]:
        """``(C, 3)`` terms, slots and rows of each circuit's mixing product in its own pass.

        Alone, a circuit's pass forms only the slots it has an edge into and streams only
        its reachable sources (and row 0 with ``with_base``); the mixing form is chosen on
        these (see :func:`mix`), so a circuit mixes alike in any stack.
        """
        k = self.edges[:, :, slots].any(axis=1).sum(axis=1)
        s = self.reach[:, sources].sum(axis=1) + int(with_base)
        edges = w[:, :, int(with_base) :].reshape(self.C, -1).sum(axis=1)
        return np.stack([edges + k * int(with_base), k, s], axis=1).astype(np.int64)

    def workspace(self, k: int, rest: tuple[int, ...]) -> torch.Tensor:
        """A contiguous ``(C, k, prod(rest))`` block of the arena, shared by every layer:
        a layer's slot inputs are consumed before the next layer forms its own."""
        return self.arena.get("workspace", (self.C, k, int(np.prod(rest))))

    def store(self, forward: NDArray[np.int64], delta: torch.Tensor) -> None:
        """Write ``(C, n, B, T, d)`` differences ``o − a`` of consecutive active nodes."""
        pos = self.slot_of[int(forward[0])]
        n = len(forward)
        if self.neurons is not None:
            delta = self._masked(delta, self.neurons[:, pos : pos + n, None, None, :])
        assert self.buffer is not None
        self.buffer[:, pos : pos + n] = delta

    def store_read(self, forward: int, delta: torch.Tensor, read: torch.Tensor) -> None:
        """Write the ``(C, B, d)`` difference of a node computed at the read positions only.

        Every other position holds 0, the difference of a node that outputs its ablation
        value; no circuit of the stack reads it there (:func:`read_only`).
        """
        pos = self.slot_of[forward]
        if self.neurons is not None:
            delta = self._masked(delta, self.neurons[:, pos, None, :])
        assert self.buffer is not None
        row = self.buffer[:, pos]
        row.zero_()
        row[:, torch.arange(len(read), device=read.device), read] = delta

    def slot_inputs(
        self,
        slots: NDArray[np.int64],
        lo: int,
        hi: int,
        with_base: bool,
        group_sum: list[torch.Tensor] | None,
        group_out: list[torch.Tensor] | None,
        buffer: torch.Tensor,
        reuse: bool = False,
    ) -> torch.Tensor | None:
        """What the circuit's edges from active nodes ``lo:hi`` bring to ``slots``.

        ``buffer`` is ``(C, 1 + n_active, *rest)`` (the store, or its rows at the read
        positions) and the result ``(C, k, *rest)``. With ``with_base`` (only for
        ``lo == 0``) row 0, the slots' ablated input, is included, so the result is the
        slots' input; without it the result is the increment, or ``None`` when no edge of
        the range enters the slots. With post-attention norms each layer's heads are
        summed with the ablation values of the layer's other heads and normalised per
        destination; the difference to the normalised ablation sum is what is added.
        With ``reuse`` (and no post-attention norms) the result lives in the stack's
        :meth:`workspace` and is overwritten by the next such call.
        """
        assert lo == 0 or not with_base
        if group_sum is None:
            return self._summed(slots, lo, hi, with_base, buffer, reuse)
        assert group_out is not None
        return self._normalised_per_layer(slots, lo, hi, with_base, group_sum, group_out, buffer)

    def _summed(
        self,
        slots: NDArray[np.int64],
        lo: int,
        hi: int,
        with_base: bool,
        buffer: torch.Tensor,
        reuse: bool,
    ) -> torch.Tensor | None:
        """:meth:`slot_inputs` without post-attention norms: one mixing product."""
        C, k = self.C, len(slots)
        rest = tuple(buffer.shape[2:])
        sources = self.active[lo:hi]
        w = self._weights(sources, slots, with_base)
        if not (with_base or w.any()):
            return None
        first = 0 if with_base else 1 + lo
        flat = buffer[:, first : 1 + hi].reshape(C, 1 + hi - first, -1)
        out = self.workspace(k, rest) if reuse else None
        sizes = self._own_sizes(sources, slots, w, with_base)
        return mix(w, flat, out, self.mixing, sizes).view(C, k, *rest)

    def _normalised_per_layer(
        self,
        slots: NDArray[np.int64],
        lo: int,
        hi: int,
        with_base: bool,
        group_sum: list[torch.Tensor],
        group_out: list[torch.Tensor],
        buffer: torch.Tensor,
    ) -> torch.Tensor | None:
        """:meth:`slot_inputs` with post-attention norms: the input, the MLPs and the base
        are mixed at once, each layer's heads are mixed and normalised per destination."""
        C, k = self.C, len(slots)
        rest = tuple(buffer.shape[2:])
        sources = self.active[lo:hi]
        total: torch.Tensor | None = None
        heads = self.ix.is_head[sources]
        lin = np.flatnonzero(~heads)
        w = self._weights(sources[lin], slots, with_base)
        lin_rows = 1 + lo + lin
        if with_base:
            lin_rows = np.concatenate([[0], lin_rows])
        if with_base or w.any():
            picked = buffer[:, torch.from_numpy(lin_rows).to(buffer.device)].reshape(C, len(lin_rows), -1)
            sizes = self._own_sizes(sources[lin], slots, w, with_base)
            total = mix(w, picked, mode=self.mixing, sizes=sizes).view(C, k, *rest)
        layers = self.ix.layer_of[sources]
        for layer in np.unique(layers[heads]).tolist():
            members = np.flatnonzero(heads & (layers == layer))
            w = self._weights(sources[members], slots)
            if not w.any():
                continue
            a, b = 1 + lo + int(members[0]), 1 + lo + int(members[-1]) + 1
            sizes = self._own_sizes(sources[members], slots, w, False)
            rows = buffer[:, a:b].reshape(C, b - a, -1)
            mixed = mix(w, rows, mode=self.mixing, sizes=sizes).view(C, k, *rest)
            norm_w = self.model.layers[layer].norm_attn_out
            assert norm_w is not None
            part = _ops.norm(group_sum[layer] + mixed, norm_w) - group_out[layer]
            total = part if total is None else total + part
        return total
