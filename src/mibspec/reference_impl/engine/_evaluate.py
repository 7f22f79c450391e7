"""Patched evaluation of circuits (EAP-IG semantics), many circuits per pass.

Normative text: ``spec/v1/metrics/engine.md`` (ME-*). For every circuit C (a set of
edges of the graph universe, pruned first) and example, every destination slot ``d``
receives

    x_d = Σ_{s → d}  a_s + [ (s, d) ∈ C ] · μ_s ⊙ (o_s − a_s)

where ``o_s`` is the output of source ``s`` in the patched run, ``a_s`` its ablation
value (the corrupted run's output by default) and ``μ_s`` its neuron mask (all ones at
edge and node granularity). With post-attention norms (Gemma-2) each layer's head terms
are summed and normalised per destination before entering the sum (ME-4).

How the cost is kept low (ME-9): the ablation state ``a`` and its slot inputs
``Σ a_s`` are computed once per batch and shared by every circuit; a node outputs ``a_s``
unless it is reachable from ``input`` in the pruned circuit, so only reachable nodes are
recomputed, as ``x_d = (Σ a_s) + Σ_{s reachable} [(s,d) ∈ C] μ_s ⊙ (o_s − a_s)``; q/k/v
slots with no circuit in-edge reuse the cached ablation q/k/v; the empty circuit is the
ablation run and the full circuit the clean run; circuits are stacked along the batch
axis up to a memory budget; the logits slot is formed only at the read positions and
only the two answer rows of the unembedding are used; an MLP from which no circuit path
leads into a k or v slot is computed at the read positions only; the large buffers of a
pass are reused by the next; metrics are float64.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from numpy.typing import NDArray

from ..graph import GraphConfig, GraphUniverse
from . import _forward, _ops
from ._weights import ModelWeights

__all__ = [
    "ABLATIONS",
    "Ablation",
    "CircuitMetrics",
    "evaluate_circuits",
    "graph_universe",
    "mean_node_outputs",
    "node_circuit_edges",
]

Ablation = Literal["counterfactual", "mean", "zero", "optimal"]
ABLATIONS: tuple[str, ...] = ("counterfactual", "mean", "zero", "optimal")


@dataclass(frozen=True, eq=False)
class CircuitMetrics:
    """Per-example metric ``m = logit(correct) − logit(counterfactual)`` at the read position.

    Attributes:
        circuits: ``(K, N)`` float64, one row per circuit, in the order given.
        clean: ``(N,)`` the unpatched clean run, m(N).
        empty: ``(N,)`` the empty circuit under the ablation, m(∅) (for counterfactual
            ablation: the unpatched corrupted run).
        n_edges: ``(K,)`` edges left in each circuit after pruning.
        ablation: the ablation kind used.
    """

    circuits: NDArray[np.float64]
    clean: NDArray[np.float64]
    empty: NDArray[np.float64]
    n_edges: NDArray[np.int64]
    ablation: str


def graph_universe(model: ModelWeights) -> GraphUniverse:
    """The EAP-IG graph universe of a model."""
    return GraphUniverse(
        GraphConfig(
            n_layers=model.n_layers,
            n_heads=model.n_heads,
            parallel_attn_mlp=model.parallel_attn_mlp,
            d_model=model.d_model,
        )
    )


def node_circuit_edges(universe: GraphUniverse, nodes: object) -> NDArray[np.bool_]:
    """Edge circuits equivalent to node circuits (ME-6).

    An edge ``s → d`` is in the circuit iff ``s`` is in the node set and ``d`` is a slot of
    a node in the set or ``logits``. ``input`` is a node like any other: leaving it out
    ablates every path.

    Args:
        universe: the graph universe.
        nodes: bool ``(K, n_forward)``.

    Returns:
        bool ``(K, n_forward, n_backward)``.
    """
    mask = np.asarray(nodes)
    if mask.dtype != np.bool_ or mask.ndim != 2 or mask.shape[1] != universe.n_forward:
        raise ValueError(
            f"nodes: expected a boolean array of shape (K, {universe.n_forward}), got "
            f"dtype {mask.dtype} and shape {mask.shape}"
        )
    dst_in = np.concatenate(
        [mask[:, universe.node_of_slot[:-1]], np.ones((mask.shape[0], 1), dtype=np.bool_)], axis=1
    )
    edges: NDArray[np.bool_] = mask[:, :, None] & dst_in[:, None, :] & universe.edge_mask[None]
    return edges


# ---------------------------------------------------------------------------- validation


def _check_answers(model: ModelWeights, value: object, name: str, n: int) -> torch.Tensor:
    arr = np.asarray(value.numpy() if torch.is_tensor(value) else value)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name}: expected {n} integer token ids, got dtype {arr.dtype} and shape {arr.shape}"
        )
    if n and (arr.min() < 0 or arr.max() >= model.vocab_size):
        raise ValueError(
            f"{name}: token ids must lie in [0, {model.vocab_size}), got range [{arr.min()}, {arr.max()}]"
        )
    return torch.as_tensor(arr.astype(np.int64))


def _check_circuits(universe: GraphUniverse, circuits: object) -> NDArray[np.bool_]:
    arr = np.asarray(circuits)
    if arr.dtype != np.bool_:
        raise ValueError(f"circuits: expected a boolean array, got dtype {arr.dtype}")
    if arr.ndim == 2 and arr.shape[1] == universe.n_edges:
        out = np.zeros((arr.shape[0], universe.n_forward, universe.n_backward), dtype=np.bool_)
        out[:, universe.edge_mask] = arr
        return out
    if arr.ndim == 3 and arr.shape[1:] == universe.edge_mask.shape:
        outside = arr & ~universe.edge_mask[None]
        if outside.any():
            k, f, d = (int(x) for x in np.argwhere(outside)[0])
            raise ValueError(
                f"circuits: cells without an edge must be False; circuit {k} has "
                f"{universe.forward_names[f]}->{universe.backward_names[d]}"
            )
        return arr
    raise ValueError(
        f"circuits: expected shape (K, {universe.n_edges}) (canonical edge order) or "
        f"(K, {universe.n_forward}, {universe.n_backward}), got {arr.shape}"
    )


def _check_neurons(model: ModelWeights, neurons: object, k: int) -> NDArray[np.bool_] | None:
    if neurons is None:
        return None
    arr = np.asarray(neurons)
    shape = (k, model.n_forward, model.d_model)
    if arr.dtype != np.bool_ or arr.shape != shape:
        raise ValueError(
            f"neurons: expected a boolean array of shape {shape}, got dtype {arr.dtype} and shape {arr.shape}"
        )
    return arr


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------- ablation state


@dataclass(frozen=True, eq=False)
class _Reference:
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


def _reference_from_trace(tr: _forward.Trace, rows: slice) -> _Reference:
    """The ablation state of a counterfactual run: ``rows`` of a traced pass."""

    def heads(xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [x[:, rows].contiguous() for x in xs]

    def batch(xs: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
        return None if xs is None else [x[rows] for x in xs]

    slot_pre = [x[rows] for x in tr.slot_pre]
    slot_mid = [x[rows] for x in tr.slot_mid]
    return _Reference(
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


def _constant_reference(
    model: ModelWeights,
    values: torch.Tensor,
    shape: tuple[int, int],
    rope: tuple[torch.Tensor, torch.Tensor] | None,
) -> _Reference:
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
    return _Reference(
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


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def mean_node_outputs(
    model: ModelWeights, input_ids: object, attention_mask: object = None, *, batch_size: int = 20
) -> torch.Tensor:
    """Mean of every node's output over all non-padding tokens of a dataset (ME-5).

    Sums are accumulated in float64 and the mean is rounded once to the model dtype.

    Returns:
        ``(n_forward, d)`` in the model dtype.
    """
    ids, mask = _forward.check_tokens(model, input_ids, attention_mask)
    size = _check_positive_int(batch_size, "batch_size")
    total = torch.zeros((model.n_forward, model.d_model), dtype=torch.float64)
    for sl in _batches(ids.shape[0], size):
        tr = _forward.trace(model, ids[sl], mask[sl])
        weights = mask[sl].to(torch.float64)
        total += torch.einsum("fntd,nt->fd", tr.nodes.to(torch.float64), weights)
    return (total / float(mask.sum())).to(model.dtype)


# ---------------------------------------------------------------------------- the patched run


@dataclass(frozen=True, eq=False)
class _Index:
    """Forward and slot indices of the graph's nodes, read from the universe's names."""

    head: NDArray[np.int64]  # (L, H) forward index of a{l}.h{h}
    mlp: NDArray[np.int64]  # (L,) forward index of m{l}
    slot_q: NDArray[np.int64]  # (L, H)
    slot_k: NDArray[np.int64]
    slot_v: NDArray[np.int64]
    slot_mlp: NDArray[np.int64]  # (L,)
    slot_logits: int
    n_sources: NDArray[np.int64]  # (n_backward,) leading forward nodes each slot reads
    is_head: NDArray[np.bool_]  # (n_forward,)
    layer_of: NDArray[np.int64]  # (n_forward,) layer of a node, -1 for input
    slot_node: NDArray[np.int64]  # (n_backward,) forward index of the node a slot feeds, -1: logits
    slot_spreads: NDArray[np.bool_]  # (n_backward,) k and v slots: read at every earlier position


def _index(model: ModelWeights, universe: GraphUniverse) -> _Index:
    L, H = model.n_layers, model.n_heads
    fi, bi = universe.forward_index, universe.backward_index
    head = np.array([[fi(f"a{i}.h{h}") for h in range(H)] for i in range(L)], dtype=np.int64)
    mlp = np.array([fi(f"m{i}") for i in range(L)], dtype=np.int64)
    slots = {
        p: np.array([[bi(f"a{i}.h{h}<{p}>") for h in range(H)] for i in range(L)], dtype=np.int64)
        for p in "qkv"
    }
    is_head = np.zeros(universe.n_forward, dtype=np.bool_)
    is_head[head.ravel()] = True
    layer_of = np.full(universe.n_forward, -1, dtype=np.int64)
    slot_spreads = np.zeros(universe.n_backward, dtype=np.bool_)
    for i in range(L):
        layer_of[head[i]] = i
        layer_of[mlp[i]] = i
        slot_spreads[slots["k"][i]] = True
        slot_spreads[slots["v"][i]] = True
    return _Index(
        head=head,
        mlp=mlp,
        slot_q=slots["q"],
        slot_k=slots["k"],
        slot_v=slots["v"],
        slot_mlp=np.array([bi(f"m{i}") for i in range(L)], dtype=np.int64),
        slot_logits=bi("logits"),
        n_sources=np.asarray(universe.slot_n_sources, dtype=np.int64),
        is_head=is_head,
        layer_of=layer_of,
        slot_node=np.asarray(universe.node_of_slot, dtype=np.int64),
        slot_spreads=slot_spreads,
    )


def _read_only(ix: _Index, edges: NDArray[np.bool_], reach: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``(n_forward,)``: nodes whose patched output no circuit of the stack reads off the
    read positions.

    The metric reads the logits slot at each example's read position only. A node's
    output is needed at every position when one of its circuit edges enters a k or v
    slot (attention reads keys and values at every earlier position) or a slot of a node
    that is itself needed at every position; otherwise it is needed at the read
    positions alone. Only edges into nodes reachable in the same circuit count: the
    others are not recomputed for that circuit. Forward order is topological, so one
    sweep from the last node decides every node.
    """
    C, n_forward, _ = edges.shape
    node = np.where(ix.slot_node >= 0, ix.slot_node, 0)
    into_node = ix.slot_node >= 0
    spreads = np.broadcast_to(ix.slot_spreads, (C, len(node)))
    everywhere = np.zeros((C, n_forward), dtype=np.bool_)
    for f in range(n_forward - 1, 0, -1):
        out = edges[:, f] & into_node & reach[:, node]  # (C, n_backward)
        if out.any():
            everywhere[:, f] = (out & (spreads | everywhere[:, node])).any(axis=1)
    return ~(everywhere & reach).any(axis=0)


class _Arena:
    """Blocks of memory reused by every stacked pass of one evaluation.

    The operating system maps a fresh allocation of more than a few MiB page by page
    on first write; at GPT-2-small size that cost as much as the arithmetic done in the
    memory (a 36 MiB block: 25 ms to map, 4 ms to fill). The store of differences and
    the slot-input workspace are the large blocks of a pass; they are allocated once
    per evaluation, at the largest size asked for, and every later pass writes into
    them before reading.
    """

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.blocks: dict[str, torch.Tensor] = {}

    def reserve(self, name: str, size: int) -> None:
        """Make block ``name`` hold at least ``size`` elements (passes asking for less reuse it)."""
        block = self.blocks.get(name)
        if block is None or block.numel() < size:
            self.blocks.pop(name, None)  # free the smaller block before taking the larger
            self.blocks[name] = torch.empty(size, dtype=self.dtype)

    def get(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        """An uninitialised contiguous tensor of ``shape`` in block ``name``."""
        size = int(np.prod(shape))
        self.reserve(name, size)
        return self.blocks[name][:size].view(shape)


#: Largest temporary, in bytes, that a patched pass allocates per step outside the arena.
#: glibc's allocator maps blocks above its threshold (adaptive, at most 32 MiB) afresh on
#: every allocation and reuses freed blocks below it.
_STEP_BYTES = 8 * 2**20


class _Chunk:
    """State of one patched pass over a stack of C circuits and one batch of B examples."""

    def __init__(
        self,
        model: ModelWeights,
        ix: _Index,
        ref: _Reference,
        edges: NDArray[np.bool_],
        reach: NDArray[np.bool_],
        neurons: NDArray[np.bool_] | None,
        arena: _Arena,
    ) -> None:
        self.model, self.ix, self.ref, self.arena = model, ix, ref, arena
        self.edges = edges  # (C, n_forward, n_backward), pruned
        self.C = edges.shape[0]
        self.active = np.flatnonzero(reach.any(axis=0))  # forward indices, ascending
        # Row 0 of the store holds the ablated input of the slots being formed, so that
        # adding it is one more column of the mixing product; active node i is row 1 + i.
        self.slot_of = {int(f): 1 + i for i, f in enumerate(self.active)}
        self.neurons = None
        if neurons is not None:
            kept = torch.as_tensor(neurons[:, self.active]).to(model.dtype)
            self.neurons = torch.cat([torch.ones_like(kept[:, :1]), kept], dim=1)
        self.read_only = _read_only(ix, edges, reach)
        self.buffer: torch.Tensor | None = None

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

    def workspace(self, k: int, rest: tuple[int, ...]) -> torch.Tensor:
        """A contiguous ``(C, k, prod(rest))`` block of the arena, shared by every layer:
        a layer's slot inputs are consumed before the next layer forms its own."""
        return self.arena.get("workspace", (self.C, k, int(np.prod(rest))))

    def store(self, forward: NDArray[np.int64], delta: torch.Tensor) -> None:
        """Write ``(C, n, B, T, d)`` differences ``o − a`` of consecutive active nodes."""
        pos = self.slot_of[int(forward[0])]
        n = len(forward)
        if self.neurons is not None:
            delta = delta * self.neurons[:, pos : pos + n, None, None, :]
        assert self.buffer is not None
        self.buffer[:, pos : pos + n] = delta

    def store_read(self, forward: int, delta: torch.Tensor, read: torch.Tensor) -> None:
        """Write the ``(C, B, d)`` difference of a node computed at the read positions only.

        Every other position holds 0, the difference of a node that outputs its ablation
        value; no circuit of the stack reads it there (:func:`_read_only`).
        """
        pos = self.slot_of[forward]
        if self.neurons is not None:
            delta = delta * self.neurons[:, pos, None, :]
        assert self.buffer is not None
        row = self.buffer[:, pos]
        row.zero_()
        row[:, torch.arange(len(read)), read] = delta

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
        With ``reuse`` (and no post-attention norms) the result lives in the chunk's
        :meth:`workspace` and is overwritten by the next such call.
        """
        assert lo == 0 or not with_base
        C, k = self.C, len(slots)
        rest = tuple(buffer.shape[2:])
        sources = self.active[lo:hi]
        if group_sum is None:
            w = self._weights(sources, slots, with_base)
            if not (with_base or w.any()):
                return None
            first = 0 if with_base else 1 + lo
            flat = buffer[:, first : 1 + hi].reshape(C, 1 + hi - first, -1)
            out = self.workspace(k, rest) if reuse else None
            return _mix(w, flat, out).view(C, k, *rest)
        assert group_out is not None
        total: torch.Tensor | None = None
        heads = self.ix.is_head[sources]
        lin = np.flatnonzero(~heads)
        w = self._weights(sources[lin], slots, with_base)
        lin_rows = 1 + lo + lin
        if with_base:
            lin_rows = np.concatenate([[0], lin_rows])
        if with_base or w.any():
            picked = buffer[:, torch.from_numpy(lin_rows)].reshape(C, len(lin_rows), -1)
            total = _mix(w, picked).view(C, k, *rest)
        layers = self.ix.layer_of[sources]
        for layer in np.unique(layers[heads]).tolist():
            members = np.flatnonzero(heads & (layers == layer))
            w = self._weights(sources[members], slots)
            if not w.any():
                continue
            a, b = 1 + lo + int(members[0]), 1 + lo + int(members[-1]) + 1
            mixed = _mix(w, buffer[:, a:b].reshape(C, b - a, -1)).view(C, k, *rest)
            norm_w = self.model.layers[layer].norm_attn_out
            assert norm_w is not None
            part = _ops.norm(group_sum[layer] + mixed, norm_w) - group_out[layer]
            total = part if total is None else total + part
        return total


_Mixing = Literal["auto", "dense", "sparse"]
#: How :func:`_mix` forms sums: per circuit by the cost model (``auto``), or always one way
#: (the forced modes exist so that tests can compare the two forms on the same circuits).
_MIXING: _Mixing = "auto"


def _sparse_is_cheaper(n_edges: int, k: int, s: int) -> bool:
    """Whether summing ``n_edges`` rows into ``k`` slots beats a dense ``k × s`` product.

    Both forms are bound by memory traffic over rows of ``B·T·d`` values. The sparse form
    makes one pass per edge (plus a little per slot); the dense product writes ``k`` rows,
    streams all ``s`` and multiplies ``k·s`` pairs. Fitted on the passes of GPT-2-small-
    sized EAP and random circuits on one CPU thread, in units of one sparse pass: dense
    ≈ 2·k + 2·s + k·s/12 (the sparse per-slot cost is folded in). There the rule chose
    the sparse form for 85 % of the circuits, at a total within 1 % of always choosing
    the faster form.
    """
    return n_edges < 2 * (k + s) + k * s / 12


def _mix(w: NDArray[np.bool_], rows: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``Σ_s w[c, j, s] · rows[c, s]``: for each circuit c and slot j the sum of the rows its
    edges select, ``(C, k, n)`` from 0/1 ``w`` ``(C, k, s)`` and ``rows`` ``(C, s, n)``.

    Circuits that keep a small fraction of the edges make a dense 0/1 product mostly
    multiply zeros while streaming every source row; for those circuits the rows of the
    present edges are added directly, in ascending source order. Each circuit takes
    the cheaper form by :func:`_sparse_is_cheaper`; both are sums of the same terms, so
    they differ by float rounding only, and each is deterministic. Half-precision models
    always take the dense product.
    """
    C, k, s = w.shape
    n = rows.shape[-1]
    if out is None:
        out = torch.empty((C, k, n), dtype=rows.dtype)
    counts = w.reshape(C, -1).sum(axis=1)
    if rows.dtype not in (torch.float32, torch.float64):
        # a dense product accumulates half-precision terms in float32; chained sums would not
        sparse = np.zeros(C, dtype=np.bool_)
    elif _MIXING == "auto":
        sparse = np.array([_sparse_is_cheaper(int(c), k, s) for c in counts], dtype=np.bool_)
    else:
        sparse = np.full(C, _MIXING == "sparse")
    if not sparse.any():
        torch.bmm(_as_tensor(w, rows.dtype), rows, out=out)
        return out
    for c in range(C):
        if not sparse[c]:
            torch.mm(_as_tensor(w[c], rows.dtype), rows[c], out=out[c])
            continue
        for j in range(k):
            picked = np.flatnonzero(w[c, j]).tolist()
            target = out[c, j]
            if not picked:
                target.zero_()
            elif len(picked) == 1:
                target.copy_(rows[c, picked[0]])
            else:
                torch.add(rows[c, picked[0]], rows[c, picked[1]], out=target)
                for i in picked[2:]:
                    target.add_(rows[c, i])
    return out


def _as_tensor(w: NDArray[np.bool_], dtype: torch.dtype) -> torch.Tensor:
    """A 0/1 membership array as a tensor of ``dtype``."""
    if dtype in (torch.float32, torch.float64):
        np_type = np.float32 if dtype == torch.float32 else np.float64
        return torch.from_numpy(np.ascontiguousarray(w, dtype=np_type))
    return torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(dtype)


def _gather_read(x: torch.Tensor, read: torch.Tensor) -> torch.Tensor:
    """``(..., B, T, d)`` → ``(..., B, d)`` at each example's read position.

    A ``(..., 1, 1, d)`` value, the same at every example and position (a constant
    ablation value), is broadcast to ``(..., B, d)``.
    """
    if x.shape[-3] == 1 and x.shape[-2] == 1:
        return x[..., 0, :, :].expand(*x.shape[:-3], len(read), x.shape[-1])
    index = read.view(*([1] * (x.ndim - 3)), -1, 1, 1).expand(*x.shape[:-2], 1, x.shape[-1])
    return x.gather(-2, index).squeeze(-2)


def _metric(model: ModelWeights, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """float64 ``logit(correct) − logit(counterfactual)`` from ``(..., B, d)`` residuals."""
    logits = _ops.unembed_rows(model, hidden, tokens).to(torch.float64)
    return logits[..., 0] - logits[..., 1]


def _take(x: torch.Tensor, index: NDArray[np.int64]) -> torch.Tensor:
    """``x[index]`` along the first axis; a view when ``index`` is a contiguous range."""
    first = int(index[0])
    if len(index) == int(index[-1]) - first + 1:
        return x[first : first + len(index)]
    return x.index_select(0, torch.from_numpy(index))


class _HeadWeights:
    """Per layer, q/k/v projections stacked per query head: ``(3H, d, e)`` and ``(3H, e)``.

    Rows ``j·H + h`` project the q (j = 0), k (1) or v (2) slot of query head h (keys and
    values of grouped-query attention repeated per query head). Layers are kept once
    built while the stacks of the whole model stay under ``limit`` bytes.
    """

    def __init__(self, model: ModelWeights, limit: int = 2**30) -> None:
        self.model = model
        H, G = model.n_heads, model.n_kv_heads
        group = model.kv_group
        self.rows = torch.cat([torch.arange(H), H + group, H + G + group])
        layer = model.layers[0]
        size = layer.w_qkv.element_size() * 3 * H * layer.w_qkv.shape[0] * layer.w_qkv.shape[2]
        self.keep = size * model.n_layers <= limit
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}

    def get(self, li: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        if li in self.cache:
            return self.cache[li]
        layer = self.model.layers[li]
        w = layer.w_qkv.index_select(1, self.rows).permute(1, 0, 2).contiguous()
        b = None if layer.b_qkv is None else layer.b_qkv.index_select(0, self.rows)
        if self.keep:
            self.cache[li] = (w, b)
        return w, b


def _patched(
    model: ModelWeights,
    ix: _Index,
    qkv_weights: _HeadWeights,
    ref: _Reference,
    clean_input: torch.Tensor,
    edges: NDArray[np.bool_],
    reach: NDArray[np.bool_],
    neurons: NDArray[np.bool_] | None,
    batch: _BatchContext,
    arena: _Arena,
) -> torch.Tensor:
    """Metrics ``(C, B)`` of a stack of pruned circuits on one batch.

    Layouts: stored differences ``(C, n_active, B, T, d)``; per-head tensors
    ``(C, heads, B, T, ·)``, so a layer's head outputs land in the store without a copy.
    """
    ch = _Chunk(model, ix, ref, edges, reach, neurons, arena)
    C = ch.C
    B, T, d = clean_input.shape
    post, gout = ref.group_sum, ref.group_out
    read_sum = None if post is None else [_gather_read(g, batch.read) for g in post]
    read_out = None if gout is None else [_gather_read(g, batch.read) for g in gout]
    ch.buffer = arena.get("store", (C, 1 + len(ch.active), B, T, d))
    ch.store(np.array([0]), (clean_input - ref.nodes[0]).expand(C, 1, B, T, d))
    active = np.zeros(model.n_forward, dtype=np.bool_)
    active[ch.active] = True
    kinds = ((ix.slot_q, ref.q), (ix.slot_k, ref.k), (ix.slot_v, ref.v))
    for li, layer in enumerate(model.layers):
        heads = np.flatnonzero(active[ix.head[li]])
        m_f = int(ix.mlp[li])
        if not len(heads) and not active[m_f]:
            continue
        # q/k/v slots that some circuit of the stack feeds; the others keep the cached values
        plan: list[tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]]] = []
        for slot_table, *_ in kinds:
            slots = slot_table[li, heads]
            need: NDArray[np.bool_] = np.asarray(edges[:, :, slots].any(axis=1))  # (C, n_heads_active)
            plan.append((slots, need, np.flatnonzero(need.any(axis=0)).astype(np.int64)))
        mixed_slots = [slots[todo] for slots, _, todo in plan]
        mlp_everywhere = bool(active[m_f] and not ch.read_only[m_f])
        if mlp_everywhere:
            mixed_slots.append(ix.slot_mlp[li : li + 1])
        all_slots = np.concatenate(mixed_slots)
        # one pass over the stored differences serves every slot of the layer (the MLP slot's
        # ablated input is the heads' one plus the ablated attention output, added below)
        first = int(np.searchsorted(ch.active, ix.n_sources[ix.slot_q[li, 0]]))
        x_all = None
        if len(all_slots):
            ch.buffer[:, 0] = ref.slot_pre[li]
            x_all = ch.slot_inputs(all_slots, 0, first, True, post, gout, ch.buffer, reuse=True)
        if len(heads):
            # every q/k/v slot to recompute goes through one norm and one batched product
            H = model.n_heads
            stacked = np.concatenate([j * H + heads[todo] for j, (_, _, todo) in enumerate(plan)])
            counts = [len(todo) for _, _, todo in plan]
            y_all = None
            if len(stacked):
                assert x_all is not None
                w_all, b_all = qkv_weights.get(li)
                w_slots = _take(w_all, stacked)  # (k, d, e)
                # normalise and project a few slots at a time, keeping the temporaries small
                step = max(1, _STEP_BYTES // (C * B * T * d * x_all.element_size()))
                parts = []
                for a in range(0, len(stacked), step):
                    b = min(a + step, len(stacked))
                    h = _ops.norm(x_all[:, a:b], layer.norm_attn)  # (C, b - a, B, T, d)
                    parts.append(torch.matmul(h.reshape(C, b - a, B * T, d), w_slots[a:b]))
                y_all = torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]
                y_all = y_all.view(C, len(stacked), B, T, -1)
                if b_all is not None:
                    y_all = y_all + _take(b_all, stacked)[None, :, None, None, :]
                n_rot = counts[0] + counts[1]
                if batch.rope is not None and n_rot:
                    y_all[:, :n_rot] = _ops.rotate(y_all[:, :n_rot], batch.rope[0], batch.rope[1])
            qkv = []
            offset = 0
            for (_, cache_list, *_), (_, need, todo) in zip(kinds, plan, strict=True):
                cached = _take(cache_list[li], heads).unsqueeze(0).expand(C, -1, -1, -1, -1)
                if not len(todo):
                    qkv.append(cached)
                    continue
                assert y_all is not None
                y = y_all[:, offset : offset + len(todo)]
                offset += len(todo)
                if len(todo) == len(heads) and bool(need.all()):
                    qkv.append(y)
                    continue
                # rows (circuits) that do not feed a slot keep its cached value exactly
                full = cached.clone()
                idx = torch.from_numpy(todo)
                keep = torch.from_numpy(need[:, todo])[:, :, None, None, None]
                full[:, idx] = torch.where(keep, y, full[:, idx])
                qkv.append(full)
            q, k, v = qkv
            allowed = batch.allowed[layer.sliding_window][:, 0]  # (B, T, T)
            z = _ops.attention(
                q, k, v, allowed, layer.attn_scale, model.attn_softcap, layer.sliding_window is not None
            )  # (C, h, B, T, e)
            w_o = _take(layer.w_o, heads)  # (h, e, d)
            fwd = ix.head[li, heads]
            delta: torch.Tensor | None
            if ref.z is not None:
                # o − a = (z − z_ablated)·W_O: the bias cancels, no per-head ablation outputs needed
                dz = (z - _take(ref.z[li], heads)).reshape(C, len(heads), B * T, -1)
                if ch.neurons is None:
                    # a layer's active heads are consecutive in the store: write in place, one
                    # circuit at a time (a product over the stack would go through a copy)
                    pos = ch.slot_of[int(fwd[0])]
                    for c in range(C):
                        target = ch.buffer[c, pos : pos + len(heads)].view(len(heads), B * T, d)
                        torch.matmul(dz[c], w_o, out=target)
                    delta = None
                else:
                    delta = torch.matmul(dz, w_o).view(C, len(heads), B, T, d)
            else:
                o = torch.matmul(z.reshape(C, len(heads), B * T, -1), w_o).view(C, len(heads), B, T, d)
                if layer.b_o is not None:
                    o = o + layer.b_o / model.n_heads
                delta = o - _take(ref.nodes, fwd)
            if delta is not None:
                ch.store(fwd, delta)
        if mlp_everywhere:
            assert x_all is not None
            # from the heads' ablated input to the MLP's: add the ablated attention output
            x = x_all[:, -1:] + ref.attn[li]
            last = int(np.searchsorted(ch.active, ix.n_sources[ix.slot_mlp[li]]))
            own = ch.slot_inputs(ix.slot_mlp[li : li + 1], first, last, False, post, gout, ch.buffer)
            if own is not None:
                x = x + own
            out = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, model.activation)
            ch.store(np.array([m_f]), out - ref.nodes[m_f])
        elif active[m_f]:
            # read only at the read positions: mix, normalise and apply the MLP there alone
            last = int(np.searchsorted(ch.active, ix.n_sources[ix.slot_mlp[li]]))
            rows = _gather_read(ch.buffer[:, : 1 + last], batch.read)  # (C, 1 + last, B, d)
            rows[:, 0] = _gather_read(ref.slot_mid[li], batch.read)
            x = ch.slot_inputs(ix.slot_mlp[li : li + 1], 0, last, True, read_sum, read_out, rows)
            assert x is not None
            out = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, model.activation)  # (C, 1, B, d)
            ch.store_read(m_f, out[:, 0] - _gather_read(ref.nodes[m_f], batch.read), batch.read)
    read_buffer = _gather_read(ch.buffer, batch.read)  # (C, 1 + n_active, B, d)
    read_buffer[:, 0] = _gather_read(ref.final, batch.read)
    logits_slot = np.array([ix.slot_logits])
    x_final = ch.slot_inputs(logits_slot, 0, len(ch.active), True, read_sum, read_out, read_buffer)
    assert x_final is not None
    return _metric(model, x_final[:, 0], batch.tokens)


@dataclass(frozen=True, eq=False)
class _BatchContext:
    read: torch.Tensor  # (B,) read positions
    tokens: torch.Tensor  # (B, 2) correct, counterfactual
    rope: tuple[torch.Tensor, torch.Tensor] | None  # cos, sin: (B, T, e) each
    allowed: dict[int | None, torch.Tensor]  # window → (B, 1, T, T)


def _bytes_per_circuit(model: ModelWeights, n_active: int, *, rows: int, positions: int) -> int:
    """Rough peak memory of one circuit in a stacked pass (stored differences dominate)."""
    B, T = rows, positions
    item = torch.empty((), dtype=model.dtype).element_size()
    d, H = model.d_model, model.n_heads
    d_ff = model.layers[0].w_in.shape[1]
    per_row = item * T * (d * (n_active + 3 * H + 4) + 3 * d_ff) + 8 * H * T * T
    return B * per_row


_UNION_SLACK = 0.1


def _chunks(
    order: NDArray[np.int64], reach: NDArray[np.bool_], cost: Callable[[int], int], budget: int
) -> Iterator[NDArray[np.int64]]:
    """Consecutive groups of circuits whose stacked pass fits the memory budget.

    A stacked pass computes the union of its circuits' reachable nodes for every circuit,
    so a circuit joins a group only while the union stays within ``_UNION_SLACK`` of the
    group's smallest reachable set (``order`` is sorted by reachable-set size).
    """
    start = 0
    while start < len(order):
        union = reach[order[start]].copy()
        limit = max(int(union.sum()) * (1 + _UNION_SLACK), int(union.sum()) + 2)
        stop = start + 1
        while stop < len(order):
            trial = union | reach[order[stop]]
            size = int(trial.sum())
            if size > limit or (stop - start + 1) * cost(size) > budget:
                break
            union = trial
            stop += 1
        yield order[start:stop]
        start = stop


def evaluate_circuits(
    model: ModelWeights,
    clean_ids: object,
    corrupted_ids: object,
    attention_mask: object,
    correct: object,
    counterfactual: object,
    circuits: object,
    *,
    neurons: object = None,
    ablation: Ablation = "counterfactual",
    ablation_values: object = None,
    mean_ids: object = None,
    mean_mask: object = None,
    batch_size: int = 20,
    memory_budget: int = 2**28,
    progress: Callable[[int], None] | None = None,
) -> CircuitMetrics:
    """Per-example metric of K circuits, plus the full model and the empty circuit (ME-1..ME-9).

    Args:
        model: weights from :func:`load_model`.
        clean_ids: ``(N, T)`` clean token ids, right padded.
        corrupted_ids: ``(N, T)`` counterfactual token ids; same shape and attention mask.
        attention_mask: ``(N, T)`` 0/1, shared by both inputs (ones then zeros per row).
        correct: ``(N,)`` token id of the clean input's answer.
        counterfactual: ``(N,)`` token id of the counterfactual input's answer.
        circuits: bool ``(K, n_forward, n_backward)`` or ``(K, n_edges)`` (canonical edge
            order); pruned before evaluation (ME-2). Use :func:`node_circuit_edges` for
            node circuits.
        neurons: optional bool ``(K, n_forward, d_model)``: the coordinates of each
            source's output that a kept edge carries (ME-7).
        ablation: ``counterfactual`` (default), ``mean``, ``zero`` or ``optimal`` (ME-5).
        ablation_values: ``(n_forward, d_model)`` per-node vectors, required by and only
            accepted with ``optimal``.
        mean_ids, mean_mask: the token set the ``mean`` ablation averages over; default:
            ``corrupted_ids`` with ``attention_mask``.
        batch_size: examples per pass (results do not depend on it, ME-10). Each batch
            is cut to its longest row: right padding beyond it changes no value.
        memory_budget: bytes a stacked pass of several circuits may use (a pass holds at
            least one circuit). Circuits are stacked only when their reachable sets nearly
            coincide; on a CPU stacking pays off for small circuits, whose passes are short.
        progress: called after each batch with the number of examples done so far
            (like ``attribute_edges``).

    Returns:
        :class:`CircuitMetrics`.

    Raises:
        ValueError: on any malformed argument, naming it.
    """
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation: expected one of {list(ABLATIONS)}, got {ablation!r}")
    ids, cids, mask = _forward.check_token_pair(model, clean_ids, corrupted_ids, attention_mask)
    N = ids.shape[0]
    tokens = torch.stack(
        [
            _check_answers(model, correct, "correct", N),
            _check_answers(model, counterfactual, "counterfactual", N),
        ],
        dim=1,
    )
    size = _check_positive_int(batch_size, "batch_size")
    budget = _check_positive_int(memory_budget, "memory_budget")
    universe = graph_universe(model)
    edges = _check_circuits(universe, circuits)
    K = edges.shape[0]
    neuron_mask = _check_neurons(model, neurons, K)

    constant: torch.Tensor | None = None
    if ablation == "optimal":
        if ablation_values is None:
            raise ValueError("ablation_values: required with ablation='optimal', got None")
        vals = torch.as_tensor(np.asarray(ablation_values, dtype=np.float64))
        if tuple(vals.shape) != (model.n_forward, model.d_model) or not bool(torch.isfinite(vals).all()):
            raise ValueError(
                f"ablation_values: expected finite values of shape ({model.n_forward}, {model.d_model}), "
                f"got shape {tuple(vals.shape)}"
            )
        constant = vals.to(model.dtype)
    elif ablation_values is not None:
        raise ValueError(f"ablation_values: only accepted with ablation='optimal', got ablation={ablation!r}")
    if ablation != "mean" and (mean_ids is not None or mean_mask is not None):
        raise ValueError(f"mean_ids: only accepted with ablation='mean', got ablation={ablation!r}")
    if ablation == "mean":
        if mean_ids is None:
            constant = mean_node_outputs(model, cids, mask, batch_size=size)
        else:
            constant = mean_node_outputs(model, mean_ids, mean_mask, batch_size=size)
    elif ablation == "zero":
        constant = torch.zeros((model.n_forward, model.d_model), dtype=model.dtype)

    pruned = np.stack([universe.prune(c) for c in edges]) if K else edges
    reach = (
        np.stack([universe.reachable_from_input(c) for c in pruned])
        if K
        else np.zeros((0, model.n_forward), dtype=np.bool_)
    )
    kept = pruned.reshape(K, -1).sum(axis=1).astype(np.int64)
    full = (kept == universe.n_edges) & (
        np.ones(K, dtype=np.bool_) if neuron_mask is None else neuron_mask.reshape(K, -1).all(axis=1)
    )
    empty = kept == 0
    todo = np.flatnonzero(~full & ~empty)
    # Circuits with similar reachable sets are stacked together; the order does not affect values.
    n_active = reach.sum(axis=1)
    todo = todo[np.argsort(n_active[todo], kind="stable")]
    ix = _index(model, universe)
    qkv_weights = _HeadWeights(model)
    arena = _Arena(model.dtype)

    out = np.empty((K, N), dtype=np.float64)
    clean_m = np.empty(N, dtype=np.float64)
    empty_m = np.empty(N, dtype=np.float64)
    with torch.inference_mode():
        for sl in _batches(N, size):
            width = int(mask[sl].sum(1).max())
            b_ids, b_cids, b_mask, b_tok = ids[sl, :width], cids[sl, :width], mask[sl, :width], tokens[sl]
            B, T = b_ids.shape
            positions = _ops.positions_from_mask(b_mask)
            rope = _ops.rope_tables(model, positions)
            read = b_mask.sum(1) - 1
            windows = {layer.sliding_window for layer in model.layers}
            batch = _BatchContext(
                read=read,
                tokens=b_tok,
                rope=rope,
                allowed={w: _ops.causal_mask(b_mask, w) for w in windows},
            )
            if constant is None:
                # the clean and the corrupted run share one pass (same mask, stacked rows)
                both = _forward.trace(
                    model, torch.cat([b_ids, b_cids]), torch.cat([b_mask, b_mask]), head_nodes=False
                )
                clean_final = both.final[:B]
                ref = _reference_from_trace(both, slice(B, 2 * B))
            else:
                clean_final = _forward.final_residual(model, b_ids, b_mask)
                ref = _constant_reference(model, constant, (B, T), rope)
            clean_m[sl] = _metric(model, _gather_read(clean_final, read), b_tok).numpy()
            empty_m[sl] = _metric(model, _gather_read(ref.final, read), b_tok).numpy()
            out[full, sl] = clean_m[sl]
            out[empty, sl] = empty_m[sl]
            if not len(todo):
                if progress is not None:
                    progress(sl.stop)
                continue
            clean_input = _forward.embed(model, b_ids, positions)
            cost = functools.partial(_bytes_per_circuit, model, rows=B, positions=T)
            groups = list(_chunks(todo, reach, cost, budget))
            # the largest store first, so that growing passes do not map new memory each time
            rows = max(len(g) * (1 + int(reach[g].any(axis=0).sum())) for g in groups)
            arena.reserve("store", rows * B * T * model.d_model)
            for group in groups:
                values = _patched(
                    model,
                    ix,
                    qkv_weights,
                    ref,
                    clean_input,
                    pruned[group],
                    reach[group],
                    None if neuron_mask is None else neuron_mask[group],
                    batch,
                    arena,
                )
                out[group, sl] = values.numpy()
            if progress is not None:
                progress(sl.stop)
    return CircuitMetrics(circuits=out, clean=clean_m, empty=empty_m, n_edges=kept, ablation=ablation)
