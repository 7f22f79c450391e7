"""The EAP-IG graph universe: circuits as edge sets over a transformer's computation graph.

Normative text: ``spec/v1/metrics/graph.md`` (requirements MG-*). Summary:

* source ("forward") nodes, in computation order: ``input``, then per layer the heads
  ``a{l}.h0 .. a{l}.h{H-1}`` and ``m{l}``; ``n_forward = 1 + L·(H+1)``;
* destination ("backward") slots: per layer all heads' ``<q>``, then all ``<k>``, then
  all ``<v>``, then ``m{l}``; ``logits`` last; ``n_backward = L·(3H+1) + 1``;
* slot ``d`` reads the first ``slot_n_sources[d]`` forward nodes, so an edge ``(f, d)``
  exists iff ``f < slot_n_sources[d]``;
* the canonical edge order is the row-major order of the existing ``(f, d)`` pairs
  (source-major, then slot order), and edge names are ``"{src}->{dst}"``.

Because ``slot_n_sources`` is nondecreasing in slot order, the slots a source feeds form
a contiguous suffix of the slot order; every index map below is a closed form of that
fact, so building the Llama-3.1-8B universe (1,592,881 edges) takes milliseconds and
no per-edge Python object or string exists until one is asked for.

Circuits and scores are accepted either as vectors over the canonical edge order
(shape ``(n_edges,)``) or as EAP-IG-style matrices (shape ``(n_forward, n_backward)``);
results come back in the form they were given.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "EAP_IG_CFG_KEYS",
    "MAX_MATRIX_CELLS",
    "RECORDED_SIZES",
    "GraphConfig",
    "GraphUniverse",
    "recorded_size",
]

EAP_IG_CFG_KEYS: tuple[str, ...] = ("n_layers", "n_heads", "parallel_attn_mlp", "d_model")
"""Keys of the EAP-IG ``cfg`` object that determine a graph universe."""

MAX_MATRIX_CELLS: int = 2**28
"""Largest ``n_forward · n_backward`` accepted (MG-15); guards against hostile configs."""

RECORDED_SIZES: tuple[str, ...] = ("complete_pruning",)
"""The circuit sizes a profile may say a report records (profile key ``recorded_size``)."""

_QKV: tuple[str, ...] = ("q", "k", "v")
_MAX_REPORTED = 5
_MIN_CHUNK = 4096


def _describe(value: Any) -> str:
    """Short description of a received value for error messages."""
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _readonly(array: NDArray[Any]) -> NDArray[Any]:
    # The universe is shared by every caller; a stray in-place write must fail loudly.
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class GraphConfig:
    """Architecture numbers that determine a graph universe.

    Attributes:
        n_layers: number of transformer blocks L (>= 1).
        n_heads: attention heads per block H (>= 1).
        parallel_attn_mlp: True when the MLP of a block reads the block's input rather
            than the attention output (GPT-J/NeoX style); ``m{l}`` then does not read
            the heads of layer l.
        d_model: residual width, needed only for neuron-level circuits (>= 1 or None).

    Raises:
        ValueError: naming the field, on a wrong type or an out-of-range value.
    """

    n_layers: int
    n_heads: int
    parallel_attn_mlp: bool = False
    d_model: int | None = None

    def __post_init__(self) -> None:
        for field in ("n_layers", "n_heads"):
            value = getattr(self, field)
            if not _is_int(value) or value < 1:
                raise ValueError(f"GraphConfig.{field} must be an integer >= 1; got {_describe(value)}")
            object.__setattr__(self, field, int(value))
        if not isinstance(self.parallel_attn_mlp, (bool, np.bool_)):
            raise ValueError(
                f"GraphConfig.parallel_attn_mlp must be a bool; got {_describe(self.parallel_attn_mlp)}"
            )
        object.__setattr__(self, "parallel_attn_mlp", bool(self.parallel_attn_mlp))
        if self.d_model is not None:
            if not _is_int(self.d_model) or self.d_model < 1:
                raise ValueError(
                    f"GraphConfig.d_model must be an integer >= 1 or None; got {_describe(self.d_model)}"
                )
            object.__setattr__(self, "d_model", int(self.d_model))

    @classmethod
    def from_eap_ig_cfg(cls, cfg: Mapping[str, Any], *, strict: bool = True) -> GraphConfig:
        """Read the ``cfg`` object of an EAP-IG graph file (MG-14).

        ``n_layers`` and ``n_heads`` are required; ``parallel_attn_mlp`` defaults to
        False and ``d_model`` to None when absent.

        Args:
            cfg: the decoded ``cfg`` mapping.
            strict: when True, keys outside :data:`EAP_IG_CFG_KEYS` are an error; when
                False they are ignored (callers that want to warn can compare the keys
                with :data:`EAP_IG_CFG_KEYS` themselves).

        Raises:
            ValueError: on a non-mapping, a missing required key, an unknown key (strict)
                or an invalid value.
        """
        if not isinstance(cfg, Mapping):
            raise ValueError(f"cfg must be a mapping (the EAP-IG 'cfg' object); got {_describe(cfg)}")
        missing = [key for key in ("n_layers", "n_heads") if key not in cfg]
        if missing:
            raise ValueError(f"cfg must contain the keys {missing}; got keys {sorted(map(str, cfg))}")
        unknown = sorted(str(key) for key in cfg if key not in EAP_IG_CFG_KEYS)
        if strict and unknown:
            raise ValueError(
                f"cfg must contain only the keys {list(EAP_IG_CFG_KEYS)}; got unknown keys {unknown}"
            )
        return cls(
            n_layers=cfg["n_layers"],
            n_heads=cfg["n_heads"],
            parallel_attn_mlp=cfg.get("parallel_attn_mlp", False),
            d_model=cfg.get("d_model"),
        )


class GraphUniverse:
    """All possible edges of a model's computation graph in the EAP-IG convention.

    Construction costs a few array operations; per-edge arrays other than
    :attr:`edge_mask` are computed on first use and cached. Every exposed array is
    read-only.

    Attributes:
        cfg: the configuration.
        n_forward: number of source nodes, ``1 + L·(H+1)``.
        n_backward: number of destination slots, ``L·(3H+1) + 1``.
        n_edges: number of edges (see ``spec/v1/metrics/graph.md``, MG-7, for the closed form).
        forward_names: source node names in forward order.
        backward_names: destination slot names in slot order.
        slot_n_sources: for each slot d, the number of leading forward nodes it reads.
        node_of_slot: for each slot, the forward index of the node it feeds (-1 for ``logits``).
        edge_mask: bool ``(n_forward, n_backward)``, True where an edge exists.
    """

    cfg: GraphConfig
    n_forward: int
    n_backward: int
    n_edges: int
    forward_names: tuple[str, ...]
    backward_names: tuple[str, ...]
    slot_n_sources: NDArray[np.int64]
    node_of_slot: NDArray[np.int64]
    edge_mask: NDArray[np.bool_]

    def __init__(self, cfg: GraphConfig) -> None:
        if not isinstance(cfg, GraphConfig):
            raise ValueError(f"cfg must be a GraphConfig; got {_describe(cfg)}")
        L, H = cfg.n_layers, cfg.n_heads
        n_forward = 1 + L * (H + 1)
        n_backward = L * (3 * H + 1) + 1
        if n_forward * n_backward > MAX_MATRIX_CELLS:
            raise ValueError(
                f"cfg must describe a universe of at most {MAX_MATRIX_CELLS} (source, slot) cells; "
                f"got n_layers={L}, n_heads={H}: {n_forward} x {n_backward} = {n_forward * n_backward}"
            )
        self.cfg = cfg
        self.n_forward = n_forward
        self.n_backward = n_backward

        forward_names = ["input"]
        backward_names: list[str] = []
        for layer in range(L):
            forward_names += [f"a{layer}.h{head}" for head in range(H)]
            forward_names.append(f"m{layer}")
            for letter in _QKV:
                backward_names += [f"a{layer}.h{head}<{letter}>" for head in range(H)]
            backward_names.append(f"m{layer}")
        backward_names.append("logits")
        self.forward_names = tuple(forward_names)
        self.backward_names = tuple(backward_names)

        # Slot layout per layer: 3H head slots then the MLP slot; logits last.
        layer_first_head = 1 + np.arange(L, dtype=np.int64) * (H + 1)
        mlp_reads = layer_first_head + (0 if cfg.parallel_attn_mlp else H)
        per_layer = np.concatenate(
            [np.repeat(layer_first_head[:, None], 3 * H, axis=1), mlp_reads[:, None]], axis=1
        )
        self.slot_n_sources = _readonly(np.append(per_layer.ravel(), n_forward).astype(np.int64))

        head_forward = layer_first_head[:, None] + np.arange(H, dtype=np.int64)[None, :]
        node_per_layer = np.concatenate(
            [np.tile(head_forward, (1, 3)), (layer_first_head + H)[:, None]], axis=1
        )
        self.node_of_slot = _readonly(np.append(node_per_layer.ravel(), -1).astype(np.int64))

        self.edge_mask = _readonly(
            np.arange(n_forward, dtype=np.int64)[:, None] < self.slot_n_sources[None, :]
        )
        self.n_edges = int(self._row_lengths.sum())

    # ------------------------------------------------------------------ structure
    @cached_property
    def _first_slot(self) -> NDArray[np.int64]:
        """For each source f, the first slot that reads it (its row is a suffix from there)."""
        first = np.searchsorted(self.slot_n_sources, np.arange(self.n_forward), side="right")
        return _readonly(first.astype(np.int64))

    @cached_property
    def _row_lengths(self) -> NDArray[np.int64]:
        return _readonly((self.n_backward - self._first_slot).astype(np.int64))

    @cached_property
    def _row_starts(self) -> NDArray[np.int64]:
        starts = np.zeros(self.n_forward, dtype=np.int64)
        np.cumsum(self._row_lengths[:-1], out=starts[1:])
        return _readonly(starts)

    @cached_property
    def edge_index(self) -> NDArray[np.int64]:
        """``(n_forward, n_backward)`` canonical edge index of each cell, -1 where no edge exists."""
        offset = (self._row_starts - self._first_slot)[:, None]
        index = np.where(self.edge_mask, offset + np.arange(self.n_backward, dtype=np.int64)[None, :], -1)
        return _readonly(index.astype(np.int64))

    @cached_property
    def edge_src(self) -> NDArray[np.int64]:
        """``(n_edges,)`` forward index of each edge's source, in canonical order."""
        return _readonly(np.repeat(np.arange(self.n_forward, dtype=np.int64), self._row_lengths))

    @cached_property
    def edge_dst(self) -> NDArray[np.int64]:
        """``(n_edges,)`` slot index of each edge's destination, in canonical order."""
        shift = np.repeat(self._row_starts - self._first_slot, self._row_lengths)
        return _readonly(np.arange(self.n_edges, dtype=np.int64) - shift)

    @cached_property
    def _forward_lookup(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.forward_names)}

    @cached_property
    def _backward_lookup(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.backward_names)}

    @cached_property
    def _slot_to_node_id(self) -> NDArray[np.int64]:
        """Node id of each slot, with ``logits`` as id ``n_forward`` (used by greedy selection)."""
        ids = self.node_of_slot.copy()
        ids[-1] = self.n_forward
        return _readonly(ids)

    def __repr__(self) -> str:
        return f"GraphUniverse({self.cfg!r}, n_edges={self.n_edges})"

    # ------------------------------------------------------------------ names
    def forward_index(self, name: str) -> int:
        """Forward index of a source node name such as ``"a3.h7"``.

        Raises:
            ValueError: if ``name`` is not a source node of this universe.
        """
        index = self._forward_lookup.get(name) if isinstance(name, str) else None
        if index is None:
            raise ValueError(f"name must be a source node of this universe; got {_describe(name)}")
        return index

    def backward_index(self, name: str) -> int:
        """Slot index of a destination slot name such as ``"a3.h7<k>"`` or ``"logits"``.

        Raises:
            ValueError: if ``name`` is not a destination slot of this universe.
        """
        index = self._backward_lookup.get(name) if isinstance(name, str) else None
        if index is None:
            raise ValueError(f"name must be a destination slot of this universe; got {_describe(name)}")
        return index

    def edge_name(self, i: int) -> str:
        """Name ``"{src}->{dst}"`` of the edge with canonical index ``i``.

        Raises:
            ValueError: if ``i`` is not an integer in ``[0, n_edges)``.
        """
        if not _is_int(i) or not 0 <= i < self.n_edges:
            raise ValueError(f"i must be an integer in [0, {self.n_edges}); got {_describe(i)}")
        src = int(np.searchsorted(self._row_starts, i, side="right")) - 1
        dst = int(i - self._row_starts[src] + self._first_slot[src])
        return f"{self.forward_names[src]}->{self.backward_names[dst]}"

    def edge_names(self) -> list[str]:
        """Names of all edges in canonical order (builds ``n_edges`` strings)."""
        forward = np.array([name + "->" for name in self.forward_names], dtype=object)
        backward = np.array(self.backward_names, dtype=object)
        names: list[str] = (forward[self.edge_src] + backward[self.edge_dst]).tolist()
        return names

    def edge_ids(self, names: Iterable[str]) -> NDArray[np.int64]:
        """Canonical indices of edges given by name (MG-8).

        Names must be spelled exactly as :meth:`edge_names` spells them; duplicates are
        returned as they come.

        Raises:
            ValueError: listing the first few names that are not strings, not of the form
                ``"{src}->{dst}"`` with a known source and slot, or not an edge (the
                source is computed after the slot reads the residual stream).
        """
        if isinstance(names, (str, bytes)):
            raise ValueError(f"names must be a sequence of edge names, not a single string; got {names!r}")
        items = names if isinstance(names, list) else list(names)
        forward = self._forward_lookup
        backward = self._backward_lookup
        n_forward, n_backward = self.n_forward, self.n_backward
        stride = n_backward + 1
        # Unknown parts map to an out-of-range cell so that a single gather finds every error.
        cells = [
            forward.get(src, n_forward) * stride + backward.get(dst, n_backward)
            if isinstance(name, str) and sep
            else -1
            for name in items
            for src, sep, dst in (name.partition("->") if isinstance(name, str) else ("", "", ""),)
        ]
        flat = np.asarray(cells, dtype=np.int64)
        rows, cols = np.divmod(flat, stride)
        valid = (flat >= 0) & (rows < n_forward) & (cols < n_backward)
        ids = np.full(flat.shape, -1, dtype=np.int64)
        ids[valid] = self.edge_index[rows[valid], cols[valid]]
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            examples = [f"#{position} {items[position]!r}" for position in bad[:_MAX_REPORTED].tolist()]
            raise ValueError(
                "names must be edges of this universe spelled '{src}->{dst}' "
                f"(e.g. 'input->a0.h0<q>', 'm0->logits'); got {bad.size} invalid of {flat.size}, "
                f"first: {', '.join(examples)}"
            )
        return ids

    # ------------------------------------------------------------------ conversions
    def to_matrix(self, edge_values: Any, fill: Any = 0) -> NDArray[Any]:
        """Scatter a ``(n_edges,)`` vector into a ``(n_forward, n_backward)`` matrix.

        Raises:
            ValueError: if ``edge_values`` is not 1-D of length ``n_edges``.
        """
        values = np.asarray(edge_values)
        if values.shape != (self.n_edges,):
            raise ValueError(f"edge_values must have shape ({self.n_edges},); got {_describe(values)}")
        matrix = np.full((self.n_forward, self.n_backward), fill, dtype=values.dtype)
        matrix[self.edge_mask] = values
        return matrix

    def from_matrix(self, matrix: Any) -> NDArray[Any]:
        """Gather the edge cells of a ``(n_forward, n_backward)`` matrix in canonical order.

        Raises:
            ValueError: if ``matrix`` does not have shape ``(n_forward, n_backward)``.
        """
        array = np.asarray(matrix)
        if array.shape != self.edge_mask.shape:
            raise ValueError(f"matrix must have shape {self.edge_mask.shape}; got {_describe(array)}")
        return array[self.edge_mask]

    def _circuit_matrix(self, edge_in: Any, name: str) -> tuple[NDArray[np.bool_], bool]:
        """Validate a circuit and return it as a fresh bool matrix, plus whether it came as a vector."""
        array = np.asarray(edge_in)
        if array.dtype != np.bool_:
            raise ValueError(f"{name} must be a boolean array; got {_describe(array)}")
        if array.shape == (self.n_edges,):
            matrix = np.zeros(self.edge_mask.shape, dtype=np.bool_)
            matrix[self.edge_mask] = array
            return matrix, True
        if array.shape == self.edge_mask.shape:
            outside = array & ~self.edge_mask
            if outside.any():
                f, d = (int(x) for x in np.argwhere(outside)[0])
                raise ValueError(
                    f"{name} must be False where no edge exists; got {int(outside.sum())} such cells, "
                    f"first ({f}, {d}) = {self.forward_names[f]}->{self.backward_names[d]}"
                )
            return array.copy(), False
        raise ValueError(
            f"{name} must have shape ({self.n_edges},) (canonical edge order) or "
            f"{self.edge_mask.shape} (source x slot); got {_describe(array)}"
        )

    def node_set_edges(self, nodes: Any) -> NDArray[np.bool_]:
        """Edge circuits equivalent to node circuits (``metrics/engine.md`` ME-6).

        An edge ``s → d`` is in the circuit iff ``s`` is in the node set and ``d`` is a slot
        of a node in the set or ``logits``. ``input`` is a node like any other: leaving it
        out ablates every path.

        Args:
            nodes: bool ``(K, n_forward)``.

        Returns:
            bool ``(K, n_forward, n_backward)``.

        Raises:
            ValueError: ``nodes`` is not a boolean array of shape ``(K, n_forward)``.
        """
        mask = np.asarray(nodes)
        if mask.dtype != np.bool_ or mask.ndim != 2 or mask.shape[1] != self.n_forward:
            raise ValueError(
                f"nodes: expected a boolean array of shape (K, {self.n_forward}), got "
                f"dtype {mask.dtype} and shape {mask.shape}"
            )
        dst_in = np.concatenate(
            [mask[:, self.node_of_slot[:-1]], np.ones((mask.shape[0], 1), dtype=np.bool_)], axis=1
        )
        edges: NDArray[np.bool_] = mask[:, :, None] & dst_in[:, None, :] & self.edge_mask[None]
        return edges

    # ------------------------------------------------------------------ reachability and pruning
    def _forward_present(self, matrix: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Sources reachable from ``input`` through the edges of ``matrix`` (MG-9)."""
        L, H = self.cfg.n_layers, self.cfg.n_heads
        present = np.zeros(self.n_forward, dtype=np.bool_)
        present[0] = True
        for layer in range(L):
            first_head = 1 + layer * (H + 1)
            first_slot = layer * (3 * H + 1)
            mlp_slot = first_slot + 3 * H
            # Heads of a layer read only earlier nodes, so the whole layer is one product.
            received = present[:first_head] @ matrix[:first_head, first_slot:mlp_slot]
            present[first_head : first_head + H] = received.reshape(3, H).any(axis=0)
            reads = int(self.slot_n_sources[mlp_slot])
            present[first_head + H] = bool(present[:reads] @ matrix[:reads, mlp_slot])
        return present

    def _slots_alive(self, matrix: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """Slots whose node reaches ``logits`` through the edges of ``matrix`` (``logits`` included)."""
        L, H = self.cfg.n_layers, self.cfg.n_heads
        alive = np.zeros(self.n_backward, dtype=np.bool_)
        alive[-1] = True
        for layer in range(L - 1, -1, -1):
            first_head = 1 + layer * (H + 1)
            first_slot = layer * (3 * H + 1)
            mlp_slot = first_slot + 3 * H
            # The MLP's out-edges go to later slots only; settle it before the heads that may feed it.
            alive[mlp_slot] = bool(matrix[first_head + H, mlp_slot + 1 :] @ alive[mlp_slot + 1 :])
            heads = matrix[first_head : first_head + H, mlp_slot:] @ alive[mlp_slot:]
            alive[first_slot:mlp_slot] = np.tile(heads, 3)
        return alive

    def reachable_from_input(self, edge_in: Any) -> NDArray[np.bool_]:
        """Forward nodes reachable from ``input`` through the edges of a circuit (MG-9).

        ``input`` is always reachable. No pruning is applied first: a node reached
        only through edges that lead nowhere still counts as reachable.

        Args:
            edge_in: bool circuit, ``(n_edges,)`` or ``(n_forward, n_backward)``.

        Returns:
            bool array of shape ``(n_forward,)``.
        """
        matrix, _ = self._circuit_matrix(edge_in, "edge_in")
        return self._forward_present(matrix)

    def _prune_matrix(self, matrix: NDArray[np.bool_]) -> NDArray[np.bool_]:
        present = self._forward_present(matrix)
        alive = self._slots_alive(matrix)
        matrix &= present[:, None]
        matrix &= alive[None, :]
        return matrix

    def prune(self, edge_in: Any) -> NDArray[np.bool_]:
        """Keep only the edges that lie on a path ``input -> ... -> logits`` of the circuit (MG-10).

        An edge ``(s, d)`` is kept iff ``s`` is reachable from ``input`` through circuit
        edges and the node fed by slot ``d`` reaches ``logits`` through circuit edges
        (``logits`` reaches itself). This is the fixed point of EAP-IG's iterative prune.

        Args:
            edge_in: bool circuit, ``(n_edges,)`` or ``(n_forward, n_backward)``.

        Returns:
            the pruned circuit, in the same form as ``edge_in`` (a new array).
        """
        matrix, as_vector = self._circuit_matrix(edge_in, "edge_in")
        pruned = self._prune_matrix(matrix)
        return pruned[self.edge_mask] if as_vector else pruned

    # ------------------------------------------------------------------ size
    def neuron_fraction(self, neurons_in_graph: Any) -> NDArray[np.float64]:
        """Fraction of each source node's neurons kept, from a bool ``(n_forward, d_model)`` mask.

        Raises:
            ValueError: on a non-boolean mask or a shape other than ``(n_forward, d_model)``
                (any width >= 1 when ``cfg.d_model`` is None).
        """
        mask = np.asarray(neurons_in_graph)
        width_ok = mask.ndim == 2 and mask.shape[1] >= 1
        if self.cfg.d_model is not None:
            width_ok = width_ok and mask.shape[1] == self.cfg.d_model
        if mask.dtype != np.bool_ or not width_ok or mask.shape[0] != self.n_forward:
            expected = "d_model" if self.cfg.d_model is None else str(self.cfg.d_model)
            raise ValueError(
                f"neurons_in_graph must be a boolean array of shape ({self.n_forward}, {expected}); "
                f"got {_describe(mask)}"
            )
        return np.asarray(mask.mean(axis=1, dtype=np.float64))

    def weighted_edge_count(
        self,
        edge_in: Any,
        neuron_fraction: Any | None = None,
        *,
        prune: bool = True,
    ) -> float:
        """MIB circuit size: ``Σ_{(s,d) kept} w_s`` with ``w_s`` the kept fraction of ``s``'s neurons (MG-11).

        ``w_s = 1`` for every source when ``neuron_fraction`` is None, so the size is the
        plain edge count. The sum is correctly rounded (``math.fsum`` semantics).

        Args:
            edge_in: bool circuit, ``(n_edges,)`` or ``(n_forward, n_backward)``.
            neuron_fraction: ``(n_forward,)`` finite values in [0, 1], or None.
            prune: count after :meth:`prune` (the MIB definition) when True.

        Raises:
            ValueError: on an invalid circuit or ``neuron_fraction``.
        """
        if not isinstance(prune, (bool, np.bool_)):
            raise ValueError(f"prune must be a bool; got {_describe(prune)}")
        matrix, _ = self._circuit_matrix(edge_in, "edge_in")
        if prune:
            matrix = self._prune_matrix(matrix)
        per_source = np.count_nonzero(matrix, axis=1)
        if neuron_fraction is None:
            return float(per_source.sum())
        weights = self._check_fraction(neuron_fraction)
        return math.fsum((per_source * weights).tolist())

    def _check_fraction(self, neuron_fraction: Any) -> NDArray[np.float64]:
        weights = np.asarray(neuron_fraction)
        if (
            weights.shape != (self.n_forward,)
            or weights.dtype == np.bool_
            or not (np.issubdtype(weights.dtype, np.integer) or np.issubdtype(weights.dtype, np.floating))
        ):
            raise ValueError(
                f"neuron_fraction must be a real array of shape ({self.n_forward},); got {_describe(weights)}"
            )
        weights = weights.astype(np.float64)
        bad = ~(np.isfinite(weights) & (weights >= 0.0) & (weights <= 1.0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"neuron_fraction must lie in [0, 1]; got {float(weights[i])!r} "
                f"for node {self.forward_names[i]!r}"
            )
        return weights

    # ------------------------------------------------------------------ greedy construction
    def _edge_scores(self, scores: Any) -> tuple[NDArray[np.float64], bool]:
        array = np.asarray(scores)
        if array.dtype == np.bool_ or not (
            np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
        ):
            raise ValueError(f"scores must be an array of real numbers; got {_describe(array)}")
        if array.shape == (self.n_edges,):
            values, as_vector = array.astype(np.float64), True
        elif array.shape == self.edge_mask.shape:
            # Cells without an edge carry no meaning (EAP-IG stores 0 there) and are ignored.
            values, as_vector = array[self.edge_mask].astype(np.float64), False
        else:
            raise ValueError(
                f"scores must have shape ({self.n_edges},) (canonical edge order) or "
                f"{self.edge_mask.shape} (source x slot); got {_describe(array)}"
            )
        finite = np.isfinite(values)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"scores must be finite on every edge; got {float(values[i])!r} "
                f"for edge {self.edge_name(i)!r}"
            )
        return values, as_vector

    def greedy_order(self, scores: Any, *, absolute: bool, n: int | None = None) -> NDArray[np.int64]:
        """Canonical indices of the edges in the order EAP-IG's greedy construction adds them (MG-12).

        Keys are ``|score|`` (``absolute=True``) or the signed score; edge ``e`` ranks
        before ``e'`` when its key is larger, or equal with a smaller canonical index.
        Starting from the reached set ``R = {logits}``, each step selects the best-ranked
        unselected edge whose destination slot belongs to a node of ``R`` and adds the
        edge's source to ``R``. Greedy circuits are nested: the circuit of size ``m`` is
        the first ``m`` entries of this order.

        Implementation: one heap entry per reached node holding the rank of its best
        unselected in-edge (in-edges pre-sorted per node), so a step costs
        O(log n_forward); once every node with in-edges is reached, every unselected edge
        is a candidate and the rest of the order is the global rank order, taken in one
        vectorised step.

        Args:
            scores: finite edge scores, ``(n_edges,)`` or ``(n_forward, n_backward)``
                (cells without an edge are ignored).
            absolute: rank by ``|score|`` when True, by signed score when False.
            n: stop after this many edges (``0 <= n <= n_edges``); None for all.

        Returns:
            int64 array of length ``n`` (or ``n_edges``).
        """
        values, _ = self._edge_scores(scores)
        count = self._check_n(n)
        if not isinstance(absolute, (bool, np.bool_)):
            raise ValueError(f"absolute must be a bool; got {_describe(absolute)}")
        keys = np.abs(values) if absolute else values
        return _greedy_order(self, keys, count)

    def greedy_select(self, scores: Any, n: int, *, absolute: bool) -> NDArray[np.bool_]:
        """The greedy circuit with ``n`` edges (unpruned); see :meth:`greedy_order` (MG-12).

        Args:
            scores: finite edge scores, ``(n_edges,)`` or ``(n_forward, n_backward)``.
            n: number of edges to select, ``0 <= n <= n_edges``.
            absolute: rank by ``|score|`` when True, by signed score when False.

        Returns:
            bool selection in the same form as ``scores``.
        """
        if n is None:
            raise ValueError(f"n must be an integer in [0, {self.n_edges}]; got None")
        chosen = self.greedy_order(scores, absolute=absolute, n=n)
        selected = np.zeros(self.n_edges, dtype=np.bool_)
        selected[chosen] = True
        as_vector = np.shape(scores) == (self.n_edges,)
        return selected if as_vector else self.to_matrix(selected, fill=False)

    def _check_n(self, n: int | None) -> int:
        if n is None:
            return self.n_edges
        if not _is_int(n) or not 0 <= n <= self.n_edges:
            raise ValueError(f"n must be an integer in [0, {self.n_edges}]; got {_describe(n)}")
        return int(n)

    @classmethod
    def from_eap_ig_cfg(cls, cfg: Mapping[str, Any], *, strict: bool = True) -> GraphUniverse:
        """Universe of an EAP-IG ``cfg`` object; see :meth:`GraphConfig.from_eap_ig_cfg`."""
        return cls(GraphConfig.from_eap_ig_cfg(cfg, strict=strict))


def recorded_size(
    universe: GraphUniverse,
    edge_in: Any,
    neuron_fraction: Any | None = None,
    convention: str = "complete_pruning",
) -> float:
    """The size a report records for a circuit, under a profile's ``recorded_size``.

    ``complete_pruning`` (both profiles of spec 1.1): the weighted edge count after pruning
    to a fixed point, :meth:`GraphUniverse.weighted_edge_count` (MG-11).

    Raises:
        ValueError: an unknown convention, or an invalid circuit or ``neuron_fraction``.
    """
    if convention not in RECORDED_SIZES:
        raise ValueError(
            f"convention must be one of {', '.join(RECORDED_SIZES)}; got {_describe(convention)}"
        )
    return universe.weighted_edge_count(edge_in, neuron_fraction)


def _descending_order(keys: NDArray[np.float64]) -> NDArray[np.int64]:
    """Indices sorted by key descending, ties by ascending index.

    Same result as a stable sort of ``-keys``; an unstable sort followed by re-sorting
    only the tied runs is several times faster on large, mostly distinct keys.
    """
    order = np.argsort(-keys).astype(np.int64)
    ranked = keys[order]
    tie = ranked[1:] == ranked[:-1]
    if tie.any():
        in_run = np.zeros(order.size, dtype=np.bool_)
        in_run[1:] |= tie
        in_run[:-1] |= tie
        run_id = np.cumsum(np.concatenate(([True], ~tie)))
        positions = np.flatnonzero(in_run)
        members = order[positions]
        # Tied runs are contiguous, so sorting (run, index) pairs puts each run back in place.
        order[positions] = members[np.lexsort((members, run_id[positions]))]
    return order


def _greedy_order(universe: GraphUniverse, keys: NDArray[np.float64], n: int) -> NDArray[np.int64]:
    """First ``n`` edges of the greedy order (see :meth:`GraphUniverse.greedy_order`).

    Works on ranks (positions in the global order ``key desc, index asc``). The next edge
    is always the smallest-ranked untaken candidate (an edge whose destination node is
    reached), so between two "reach" events the selection is the global order filtered
    to candidates. Two sources of candidates are merged:

    * a frontier ``F``: every candidate of rank < ``F`` is taken or in the backlog;
      candidates of rank >= ``F`` are found by scanning the global order in chunks;
    * a backlog: sorted ranks < ``F`` of in-edges of nodes reached after ``F`` passed them.

    The backlog is always consumed first (its ranks are below ``F``). A run of candidates
    is taken up to and including the first whose source is not yet reached; that source
    is then reached and its in-edges below ``F`` join the backlog. Python-level work is
    therefore proportional to the number of reach events (<= n_forward), not to ``n``.
    """
    n_edges = universe.n_edges
    n_forward = universe.n_forward
    order = _descending_order(keys)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    rank = np.empty(n_edges, dtype=np.int64)
    rank[order] = np.arange(n_edges, dtype=np.int64)
    node_ids = universe._slot_to_node_id
    dest_of_rank = node_ids[universe.edge_dst[order]]
    src_of_rank = universe.edge_src[order]

    # Ranks of each destination node's in-edges, ascending (logits = node id n_forward).
    # Small integer node ids let numpy use a radix sort for this stable grouping.
    id_type = np.int16 if n_forward < np.iinfo(np.int16).max else np.int32
    grouping = np.argsort(dest_of_rank.astype(id_type), kind="stable")
    in_ranks = grouping.astype(np.int64)
    bounds = np.searchsorted(dest_of_rank[grouping], np.arange(n_forward + 2)).tolist()

    reached = np.zeros(n_forward + 1, dtype=np.bool_)
    reached[n_forward] = True
    # input has no in-edges: reaching it never adds candidates, so it never interrupts a run.
    reached[0] = True
    taken: list[NDArray[np.int64]] = []
    remaining = n
    frontier = 0
    chunk = _MIN_CHUNK
    backlog = np.zeros(0, dtype=np.int64)
    while remaining:
        from_backlog = backlog.size > 0
        if from_backlog:
            run = backlog
        else:
            if frontier >= n_edges:
                # Unreachable: every node feeds logits, so candidates last until all edges are taken.
                raise RuntimeError(f"greedy selection ran out of candidates with {remaining} edges left")
            stop = min(frontier + chunk, n_edges)
            run = frontier + np.flatnonzero(reached[dest_of_rank[frontier:stop]])
        blocking = np.flatnonzero(~reached[src_of_rank[run]])
        end = int(blocking[0]) + 1 if blocking.size else run.size
        end = min(end, remaining)
        if end:
            taken.append(run[:end])
            remaining -= end
        if from_backlog:
            backlog = backlog[end:]
        elif blocking.size and end == int(blocking[0]) + 1:
            frontier = int(run[end - 1]) + 1
            chunk = _MIN_CHUNK
        else:
            frontier = stop
            chunk *= 2
        if blocking.size and end == int(blocking[0]) + 1:
            node = int(src_of_rank[run[end - 1]])
            reached[node] = True
            node_ranks = in_ranks[bounds[node] : bounds[node + 1]]
            late = node_ranks[: int(np.searchsorted(node_ranks, frontier))]
            if late.size:
                backlog = np.union1d(backlog, late) if backlog.size else late
    chosen_ranks = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
    return order[chosen_ranks]
