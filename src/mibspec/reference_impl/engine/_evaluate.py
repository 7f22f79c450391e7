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
ablation run and the full circuit the clean run; circuits of a float32 or float64 model are
stacked along the batch axis up to a memory budget (a 16-bit model evaluates each circuit
in a pass of its own, ME-10); the logits slot is formed only at the read positions and
only the two answer rows of the unembedding are used; an MLP from which no circuit path
leads into a k or v slot is computed at the read positions only; the large buffers of a
pass are reused by the next; metrics are float64.

This module holds the public API; the parts live in their own modules: argument checks
(``_inputs``), the ablation state (``_ablation``), batches and stacks of circuits
(``_chunks``), the graph index (``_graph_index``), reused memory (``_arena``), sums of
stored rows (``_mixing``), the store of a stack (``_stack``) and the patched forward
(``_patched_forward``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.graph import GraphConfig, GraphUniverse

from . import _forward, _ops
from ._ablation import (
    ABLATIONS,
    Ablation,
    Reference,
    ablation_constant,
    constant_reference,
    mean_node_outputs,
    reference_from_trace,
)
from ._arena import Arena, return_free_memory
from ._chunks import (
    MIN_ACTIVATION_BYTES,
    CircuitPlan,
    batches,
    bytes_per_circuit,
    chunks,
    plan_circuits,
    stack_budget,
    weight_bytes,
)
from ._graph_index import graph_index, needed_everywhere
from ._inputs import (
    check_ablation,
    check_circuits,
    check_examples,
    check_neurons,
    check_positive_int,
)
from ._mixing import Mixing
from ._ops import gather_read, logit_difference
from ._patched_forward import BatchContext, HeadWeights, PassSetup, PatchedPass
from ._reuse import ActivationCache
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

#: How the slot inputs are summed: per circuit by the cost model (``auto``), or always as a
#: dense product or row by row (the forced modes let tests compare the two forms).
_MIXING: Mixing = "auto"


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
    """Edge circuits equivalent to node circuits (ME-6): :meth:`GraphUniverse.node_set_edges`.

    Args:
        universe: the graph universe.
        nodes: bool ``(K, n_forward)``.

    Returns:
        bool ``(K, n_forward, n_backward)``.
    """
    return universe.node_set_edges(nodes)


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
    centre_neurons: bool = False,
    ablation: Ablation = "counterfactual",
    ablation_values: object = None,
    mean_ids: object = None,
    mean_mask: object = None,
    batch_size: int = 20,
    memory_budget: int | None = None,
    progress: Callable[[int], None] | None = None,
    reuse: ActivationCache | None = None,
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
        centre_neurons: with ``neurons``, mask each ``o_s − a_s`` minus its mean over the
            residual coordinates (ME-7: TransformerLens's coordinates in LayerNorm models).
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
            Default (``None``): per batch, what :func:`~._chunks.activation_budget` leaves
            beside the batch's ablation state, at most 256 MiB (:func:`~._chunks.stack_budget`).
            16-bit models evaluate each circuit in a pass of its own, whatever the budget.
        progress: called after each batch with the number of examples done so far
            (like ``attribute_edges``).
        reuse: an :class:`ActivationCache` of the runs and metrics of batches evaluated
            by another call on the same model and examples (a batch whose metrics are all
            kept is not run); results as without it, up to reassociation (ME-10).

    Returns:
        :class:`CircuitMetrics`.

    Raises:
        ValueError: on any malformed argument, naming it.
    """
    check_ablation(ablation, ABLATIONS)
    ids, cids, mask, tokens = check_examples(
        model, clean_ids, corrupted_ids, attention_mask, correct, counterfactual
    )
    size = check_positive_int(batch_size, "batch_size")
    budget = None if memory_budget is None else check_positive_int(memory_budget, "memory_budget")
    universe = graph_universe(model)
    edges = check_circuits(universe, circuits)
    neuron_mask = check_neurons(model, neurons, edges.shape[0])
    constant = _constant(model, ablation, ablation_values, (mean_ids, mean_mask), (cids, mask), size, reuse)
    plan = plan_circuits(universe, edges, neuron_mask)
    centre = bool(centre_neurons) and neuron_mask is not None
    arena = Arena(model.dtype, model.device)
    setup = PassSetup(model, graph_index(model, universe), HeadWeights(model), arena, _MIXING, centre)

    out, clean_m, empty_m = _evaluate_batches(
        setup, plan, constant, (ids, cids, mask, tokens), edges.shape[0], size, budget, reuse, progress
    )
    return CircuitMetrics(circuits=out, clean=clean_m, empty=empty_m, n_edges=plan.n_edges, ablation=ablation)


def _evaluate_batches(
    setup: PassSetup,
    plan: CircuitPlan,
    constant: torch.Tensor | None,
    examples: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    K: int,
    size: int,
    budget: int | None,
    reuse: ActivationCache | None,
    progress: Callable[[int], None] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The metric of every circuit, of the full model and of the empty circuit on every example,
    one batch of ``size`` examples at a time: ``(K, N)``, ``(N,)``, ``(N,)``."""
    model = setup.model
    ids, cids, mask, tokens = examples
    N = ids.shape[0]
    out = np.empty((K, N), dtype=np.float64)
    # beside a model of at least the activation floor the allocator's free blocks are worth
    # returning after each batch (a call: about 2 ms on the example model, 15 ms on Qwen2.5-0.5B)
    trim = weight_bytes(model) >= MIN_ACTIVATION_BYTES
    clean_m = np.empty(N, dtype=np.float64)
    empty_m = np.empty(N, dtype=np.float64)
    with torch.inference_mode():
        for sl in batches(N, size):
            width = int(mask[sl].sum(1).max())
            b_ids, b_cids, b_mask, b_tok = ids[sl, :width], cids[sl, :width], mask[sl, :width], tokens[sl]
            parts = (constant, b_ids, b_cids, b_mask)
            # what a batch's metrics depend on: its runs' inputs and the answer tokens
            kind = "circuits, centred neurons" if setup.centre_neurons else "circuits"
            key = None if reuse is None else reuse.key(model, (*parts, b_tok), kind)
            known = _known_metrics(setup, plan, reuse, key)
            if known is not None:  # every metric of the batch is kept: its runs are not needed
                clean_m[sl], empty_m[sl], todo = known
            else:
                clean_m[sl], empty_m[sl], todo = _batch_metrics(setup, plan, parts, b_tok, budget, reuse, key)
                if trim:
                    return_free_memory()
            out[plan.full, sl] = clean_m[sl]
            out[plan.empty, sl] = empty_m[sl]
            out[plan.todo, sl] = todo
            if progress is not None:
                progress(sl.stop)
    return out, clean_m, empty_m


def _stack_bytes(model: ModelWeights, ref: Reference, budget: int | None) -> int:
    """The memory budget of a stacked pass on a batch (``budget`` when given). A 16-bit pass
    holds one circuit (ME-10): a circuit's products formed with the rows of the circuits
    beside it have other shapes, so other summation orders, and 16-bit rounding carries
    that difference past the dtype's tolerance (a bfloat16 Qwen2.5-0.5B-shaped curve point:
    8.6e-3 apart, tolerance 3.7e-3), so its values would depend on the other circuits."""
    if model.dtype.itemsize < 4:
        return 1
    return stack_budget(model, ref.held_bytes()) if budget is None else budget


def _batch_context(
    model: ModelWeights, mask: torch.Tensor, tokens: torch.Tensor
) -> tuple[BatchContext, torch.Tensor]:
    """What every pass over one batch reads, and the token positions."""
    positions = _ops.positions_from_mask(mask)
    rope = _ops.rope_tables(model, positions)
    read = mask.sum(1) - 1
    windows = {layer.sliding_window for layer in model.layers}
    batch = BatchContext(
        read=read,
        tokens=tokens,
        rope=rope,
        allowed={w: _ops.causal_mask(mask, w) for w in windows},
    )
    return batch, positions


def _known_metrics(
    setup: PassSetup, plan: CircuitPlan, reuse: ActivationCache | None, key: bytes | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None:
    """The batch's full-model, empty-circuit and circuit metrics (``plan.todo`` order) when
    ``reuse`` keeps every one of them under ``key``, else ``None``."""
    if reuse is None or key is None:
        return None
    unpatched = reuse.get(setup.model, _unpatched_key(key))
    if unpatched is None:
        return None
    rows = []
    for i in plan.todo.tolist():
        row = reuse.get(setup.model, _circuit_key(plan, int(i), key))
        if row is None:
            return None
        rows.append(row)
    todo = np.stack(rows) if rows else np.empty((0, unpatched.shape[1]), dtype=np.float64)
    return unpatched[0], unpatched[1], todo


def _batch_metrics(
    setup: PassSetup,
    plan: CircuitPlan,
    parts: tuple[torch.Tensor | None, torch.Tensor, torch.Tensor, torch.Tensor],
    b_tok: torch.Tensor,
    budget: int | None,
    reuse: ActivationCache | None,
    key: bytes | None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The batch's full-model, empty-circuit and circuit metrics (``plan.todo`` order), from
    its clean and ablation runs (kept in ``reuse`` for the evaluations that follow)."""
    model = setup.model
    constant, b_ids, b_cids, b_mask = parts
    batch, positions = _batch_context(model, b_mask, b_tok)
    compute = functools.partial(_unpatched_runs, model, constant, b_ids, b_cids, b_mask, batch.rope)
    clean_final, ref = compute() if reuse is None else reuse.get_or_compute(model, parts, compute)
    clean = logit_difference(model, gather_read(clean_final, batch.read), b_tok).cpu().numpy()
    empty = logit_difference(model, gather_read(ref.final, batch.read), b_tok).cpu().numpy()
    if reuse is not None and key is not None:
        unpatched = np.stack([clean, empty]).astype(np.float64)
        reuse.put(model, _unpatched_key(key), unpatched, unpatched.nbytes)
    todo = np.empty((0, clean.shape[0]), dtype=np.float64)
    if len(plan.todo):
        inputs = functools.partial(_forward.embed, model, b_ids, positions)
        fits = _stack_bytes(model, ref, budget)
        todo = _circuit_metrics(setup, plan, ref, inputs, batch, fits, reuse, key)
    # the batch's state goes before the next batch's runs make theirs
    del clean_final, ref, batch
    return clean, empty, todo


def _unpatched_runs(
    model: ModelWeights,
    constant: torch.Tensor | None,
    ids: torch.Tensor,
    cids: torch.Tensor,
    mask: torch.Tensor,
    rope: tuple[torch.Tensor, torch.Tensor] | None,
) -> tuple[torch.Tensor, Reference]:
    """The clean run's final residual ``(B, T, d)`` and the batch's ablation state."""
    B, T = ids.shape
    if constant is None:
        # the clean and the corrupted run share one pass (same mask, stacked rows); only the
        # corrupted rows are recorded, and the clean run's final residual
        final, corrupted = _forward.trace_rows(
            model, torch.cat([ids, cids]), torch.cat([mask, mask]), slice(B, 2 * B), head_nodes=False
        )
        return final[:B], reference_from_trace(corrupted, slice(None))
    return _forward.final_residual(model, ids, mask), constant_reference(model, constant, (B, T), rope)


def _constant(
    model: ModelWeights,
    ablation: str,
    ablation_values: object,
    mean_set: tuple[object, object],
    corrupted: tuple[torch.Tensor, torch.Tensor],
    size: int,
    reuse: ActivationCache | None,
) -> torch.Tensor | None:
    """:func:`ablation_constant`; the dataset mean of the ``mean`` ablation is taken from
    ``reuse`` when an evaluation on the same model and inputs computed it."""
    compute = functools.partial(
        ablation_constant, model, ablation, ablation_values, mean_set, corrupted, size
    )
    if reuse is None or ablation != "mean" or mean_set[0] is not None or mean_set[1] is not None:
        return compute()
    return reuse.get_or_compute(model, (*corrupted, torch.tensor([size])), compute, "mean")


def _circuit_metrics(
    setup: PassSetup,
    plan: CircuitPlan,
    ref: Reference,
    clean_input: Callable[[], torch.Tensor],
    batch: BatchContext,
    budget: int,
    reuse: ActivationCache | None,
    batch_key: bytes | None,
) -> NDArray[np.float64]:
    """Metrics ``(len(plan.todo), B)`` of the circuits that need a patched pass, in the order
    of ``plan.todo``: each distinct circuit (pruned edges and neuron mask) is evaluated once,
    or taken from ``reuse`` when another evaluation on the batch (``batch_key``) did."""
    keys = [_circuit_key(plan, int(i), batch_key) for i in plan.todo]
    values: dict[bytes, NDArray[np.float64]] = {}
    missing: list[int] = []
    for i, key in zip(plan.todo.tolist(), keys, strict=True):
        if key in values:
            continue
        found = None if reuse is None else reuse.get(setup.model, key)
        if found is None:
            missing.append(i)
            values[key] = np.empty(0)  # a placeholder until its pass runs
        else:
            values[key] = found
    if missing:
        where = {int(i): key for i, key in zip(plan.todo.tolist(), keys, strict=True)}
        todo = np.asarray(missing, dtype=np.int64)  # a subsequence of plan.todo: still in order
        for group, metrics in _stacked_passes(setup, plan, todo, ref, clean_input(), batch, budget):
            for i, row in zip(group.tolist(), metrics.cpu().numpy(), strict=True):
                values[where[i]] = row
                if reuse is not None:
                    reuse.put(setup.model, where[i], row, row.nbytes)
    return np.stack([values[key] for key in keys])


def _unpatched_key(batch_key: bytes) -> bytes:
    """The key of a batch's full-model and empty-circuit metrics."""
    return hashlib.sha256(batch_key + b"\x00unpatched metrics").digest()


def _circuit_key(plan: CircuitPlan, index: int, batch_key: bytes | None) -> bytes:
    """What a circuit's metrics on a batch depend on besides the batch: its pruned edges, its
    neuron mask and the mixing mode."""
    return hashlib.sha256((batch_key or b"") + _MIXING.encode() + plan.digests[index]).digest()


def _stacked_passes(
    setup: PassSetup,
    plan: CircuitPlan,
    todo: NDArray[np.int64],
    ref: Reference,
    clean_input: torch.Tensor,
    batch: BatchContext,
    budget: int,
) -> Iterator[tuple[NDArray[np.int64], torch.Tensor]]:
    """Metrics ``(C, B)`` of the circuits ``todo`` (indices into the plan, sorted by
    reachable-set size), one stack at a time."""
    model = setup.model
    B, T, _ = clean_input.shape
    cost = functools.partial(bytes_per_circuit, model, rows=B, positions=T)
    # the MLPs each circuit reads off the read positions: stacks keep every circuit's own choice
    mlp = setup.ix.mlp
    spread = np.zeros_like(plan.reach)
    everywhere = needed_everywhere(setup.ix, plan.pruned[todo], plan.reach[todo])
    spread[todo[:, None], mlp[None, :]] = everywhere[:, mlp]
    groups = list(chunks(todo, plan.reach, cost, budget, spread))
    # the largest store first, so that growing passes do not map new memory each time
    rows = max(len(g) * (1 + int(plan.reach[g].any(axis=0).sum())) for g in groups)
    setup.arena.reserve("store", rows * B * T * model.d_model)
    for group in groups:
        neurons = None if plan.neurons is None else plan.neurons[group]
        run = PatchedPass(setup, ref, clean_input, plan.pruned[group], plan.reach[group], neurons, batch)
        yield group, run.metrics()
