"""Where the graph's nodes and slots sit in the universe, and which nodes a stack reads
only at the read positions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mibspec.metrics.graph import GraphUniverse

from ._weights import ModelWeights

__all__ = ["GraphIndex", "graph_index", "needed_everywhere", "read_only"]


@dataclass(frozen=True, eq=False)
class GraphIndex:
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


def graph_index(model: ModelWeights, universe: GraphUniverse) -> GraphIndex:
    """The index of ``model``'s graph in ``universe``."""
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
    return GraphIndex(
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


def read_only(ix: GraphIndex, edges: NDArray[np.bool_], reach: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``(n_forward,)``: nodes whose patched output no circuit of the stack reads off the
    read positions (see :func:`needed_everywhere`)."""
    # any() over an axis of a 2-D array is an array (numpy's stubs also allow a scalar)
    return ~np.asarray(needed_everywhere(ix, edges, reach).any(axis=0))


def needed_everywhere(
    ix: GraphIndex, edges: NDArray[np.bool_], reach: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """``(C, n_forward)``: per circuit, its reachable nodes whose patched output it reads off
    the read positions.

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
    return everywhere & reach
