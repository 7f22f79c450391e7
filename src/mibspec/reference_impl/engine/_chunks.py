"""How an evaluation is cut into passes: batches of examples and stacks of circuits (ME-9).

Circuits are pruned first; the full circuit is the clean run and the empty circuit the
ablation run, so only the others need a patched pass. Those are sorted by the size of
their reachable set and stacked along the batch axis, a stack holding circuits whose
reachable sets nearly coincide, up to a memory budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.graph import GraphUniverse

from ._weights import ModelWeights

__all__ = [
    "ACTIVATION_FRACTION",
    "MAX_STACK_BYTES",
    "MIN_ACTIVATION_BYTES",
    "UNION_SLACK",
    "CircuitPlan",
    "activation_batch",
    "activation_budget",
    "activation_share",
    "batches",
    "bytes_per_circuit",
    "chunks",
    "plan_circuits",
    "stack_budget",
    "weight_bytes",
]

#: A stack's union of reachable sets may exceed its smallest reachable set by this fraction.
UNION_SLACK = 0.1
#: Share of the model's weight bytes one batch's activations may take (engine.md ME-9).
ACTIVATION_FRACTION = 0.25
#: ... but never less than this: a small model's activations are small whatever the share.
MIN_ACTIVATION_BYTES = 2**28
#: Largest stacked pass: past it, stacking more small circuits saves nothing measurable.
MAX_STACK_BYTES = 2**28


def weight_bytes(model: ModelWeights) -> int:
    """Bytes of the model's tensors, each storage counted once (tied embeddings once)."""
    seen: dict[int, int] = {}
    stack: list[object] = [model]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return sum(seen.values())


def activation_share(weight_bytes: int) -> int:
    """Bytes one batch's activations may take beside ``weight_bytes`` of weights:
    :data:`ACTIVATION_FRACTION` of them, at least :data:`MIN_ACTIVATION_BYTES` (engine.md ME-9)."""
    return max(int(ACTIVATION_FRACTION * weight_bytes), MIN_ACTIVATION_BYTES)


def activation_budget(model: ModelWeights) -> int:
    """Bytes one batch's activations may take on ``model``: :func:`activation_share` of its
    weight bytes."""
    return activation_share(weight_bytes(model))


def activation_batch(model: ModelWeights, example_bytes: int) -> int:
    """The most examples whose activations, ``example_bytes`` each, fit
    :func:`activation_budget` (at least one)."""
    return max(1, activation_budget(model) // max(1, int(example_bytes)))


def stack_budget(model: ModelWeights, held: int) -> int:
    """The default memory budget of a stacked pass on a batch whose ablation state holds
    ``held`` bytes: what :func:`activation_budget` leaves, at most :data:`MAX_STACK_BYTES`
    (a pass holds at least one circuit whatever the budget)."""
    return max(1, min(MAX_STACK_BYTES, activation_budget(model) - held))


def batches(n: int, size: int) -> Iterator[slice]:
    """Consecutive slices of at most ``size`` of ``n`` examples."""
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


@dataclass(frozen=True, eq=False)
class CircuitPlan:
    """The circuits of one evaluation, pruned, and which of them need a patched pass."""

    pruned: NDArray[np.bool_]  # (K, n_forward, n_backward)
    reach: NDArray[np.bool_]  # (K, n_forward) nodes reachable from input
    neurons: NDArray[np.bool_] | None  # (K, n_forward, d_model)
    n_edges: NDArray[np.int64]  # (K,) edges left after pruning
    full: NDArray[np.bool_]  # (K,) every edge and every neuron kept: the clean run
    empty: NDArray[np.bool_]  # (K,) no edge kept: the ablation run
    todo: NDArray[np.int64]  # the other circuits, by reachable-set size

    @cached_property
    def digests(self) -> list[bytes]:
        """Per circuit, the SHA-256 of its pruned edges and neuron mask: what its metrics
        on a batch depend on besides the batch and the ablation."""
        out = []
        for i in range(self.pruned.shape[0]):
            digest = hashlib.sha256(np.packbits(self.pruned[i]).tobytes())
            if self.neurons is not None:
                digest.update(np.packbits(self.neurons[i]).tobytes())
            out.append(digest.digest())
        return out


def plan_circuits(
    universe: GraphUniverse, edges: NDArray[np.bool_], neurons: NDArray[np.bool_] | None
) -> CircuitPlan:
    """Prune the circuits (ME-2) and order those that need a patched pass for stacking."""
    K = edges.shape[0]
    pruned = np.stack([universe.prune(c) for c in edges]) if K else edges
    reach = (
        np.stack([universe.reachable_from_input(c) for c in pruned])
        if K
        else np.zeros((0, universe.n_forward), dtype=np.bool_)
    )
    kept = pruned.reshape(K, -1).sum(axis=1).astype(np.int64)
    full = (kept == universe.n_edges) & (
        np.ones(K, dtype=np.bool_) if neurons is None else neurons.reshape(K, -1).all(axis=1)
    )
    empty = kept == 0
    todo = np.flatnonzero(~full & ~empty)
    # Circuits with similar reachable sets are stacked together; the order does not affect values.
    n_active = reach.sum(axis=1)
    todo = todo[np.argsort(n_active[todo], kind="stable")]
    return CircuitPlan(
        pruned=pruned, reach=reach, neurons=neurons, n_edges=kept, full=full, empty=empty, todo=todo
    )


def bytes_per_circuit(model: ModelWeights, n_active: int, *, rows: int, positions: int) -> int:
    """Rough peak memory of one circuit in a stacked pass (stored differences dominate)."""
    B, T = rows, positions
    item = model.dtype.itemsize
    d, H = model.d_model, model.n_heads
    d_ff = model.layers[0].w_in.shape[1]
    per_row = item * T * (d * (n_active + 3 * H + 4) + 3 * d_ff) + 8 * H * T * T
    return B * per_row


def chunks(
    order: NDArray[np.int64],
    reach: NDArray[np.bool_],
    cost: Callable[[int], int],
    budget: int,
    spread: NDArray[np.bool_] | None = None,
) -> Iterator[NDArray[np.int64]]:
    """Consecutive groups of circuits whose stacked pass fits the memory budget.

    A stacked pass computes the union of its circuits' reachable nodes for every circuit,
    so a circuit joins a group only while the union stays within ``UNION_SLACK`` of the
    group's smallest reachable set (``order`` is sorted by reachable-set size).

    ``spread`` ``(K, n_forward)``: per circuit, the MLP nodes it reads off the read
    positions (:func:`~._graph_index.needed_everywhere`). A stacked pass computes such an
    MLP at every position for every circuit of the stack, and at the read positions alone
    is another sum of the same terms; so a circuit joins a group only when no circuit of
    the group would see one of its reachable MLPs computed otherwise than alone. With it,
    each circuit's metrics are those of its pass alone, whatever else is in the stack.
    """
    start = 0
    while start < len(order):
        union = reach[order[start]].copy()
        spread_union = None if spread is None else spread[order[start]].copy()
        limit = max(int(union.sum()) * (1 + UNION_SLACK), int(union.sum()) + 2)
        stop = start + 1
        while stop < len(order):
            trial = union | reach[order[stop]]
            size = int(trial.sum())
            if size > limit or (stop - start + 1) * cost(size) > budget:
                break
            if spread is not None and spread_union is not None:
                spread_trial = spread_union | spread[order[stop]]
                members = order[start : stop + 1]
                if ((spread_trial[None] & reach[members]) != spread[members]).any():
                    break
                spread_union = spread_trial
            union = trial
            stop += 1
        yield order[start:stop]
        start = stop
