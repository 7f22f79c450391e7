"""Neuron-level circuits of a curve, rebuilt from a circuit document's neuron scores (circuit.md MC-12).

At neuron granularity a grid point k keeps the top ⌊k · n_scored⌋ scored neurons (entries of
the ``(n_forward, d_model)`` score matrix, ranked as one vector in row-major order under the
curve's ranking, ties by ascending flat index) plus every unscored neuron (EAP-IG's NaN). A
source node is kept when any of its neurons is; the circuit is the edge set of that node set
(engine.md ME-6) and carries the kept neurons as its neuron mask (ME-7), which is the circuit
the public evaluation builds at ``level='neuron'`` (every edge out of a kept node into a kept
node or ``logits``, each source's output masked neuron by neuron).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mibspec.metrics.circuit import Ranking, Rounding, edges_at, rank_edges

from ._inputs import UnusableInputError

__all__ = ["NeuronLevelCircuits"]


class NeuronLevelCircuits:
    """Edge circuits and neuron masks of neuron-level circuits from neuron scores
    (``scored`` false: unscored)."""

    def __init__(self, universe: Any, scores: Any, scored: Any, pointer: str) -> None:
        if universe.cfg.d_model is None:
            raise UnusableInputError(pointer, "the graph declares no d_model: neuron scores cannot be placed")
        shape = (universe.n_forward, universe.cfg.d_model)
        values = np.asarray(scores, dtype=np.float64)
        flags = np.ones(shape, dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
        if values.shape != shape or flags.shape != shape:
            raise UnusableInputError(
                pointer,
                f"neuron scores of shape {values.shape} (scored flags {flags.shape}) for a graph of "
                f"{shape[0]} source nodes of width {shape[1]}",
            )
        if not np.isfinite(values[flags]).all():
            raise UnusableInputError(pointer, "a scored neuron has a non-finite score")
        self._universe = universe
        self._scores = values.reshape(-1)
        self._scored = flags.reshape(-1)
        self._shape = shape
        self._orders: dict[Ranking, np.ndarray] = {}

    @property
    def n_scored(self) -> int:
        """Number of scored neurons: what k is a proportion of."""
        return int(self._scored.sum())

    def neurons(self, k: float, ranking: Ranking, rounding: Rounding) -> np.ndarray:
        """Bool ``(n_forward, d_model)``: the top ``⌊k · n_scored⌋`` scored neurons and every
        unscored one."""
        if ranking not in self._orders:
            indices = np.flatnonzero(self._scored)
            self._orders[ranking] = indices[rank_edges(self._scores[indices], ranking)]
        order = self._orders[ranking]
        kept = ~self._scored
        kept[order[: edges_at(k, len(order), rounding) if len(order) else 0]] = True
        return kept.reshape(self._shape)

    def circuit(self, k: float, ranking: Ranking, rounding: Rounding) -> tuple[np.ndarray, np.ndarray]:
        """Bool ``(n_forward, n_backward)`` edges of the nodes with a kept neuron (ME-6) and
        the bool ``(n_forward, d_model)`` neuron mask (:meth:`neurons`)."""
        mask = self.neurons(k, ranking, rounding)
        nodes = np.asarray(mask.any(axis=1), dtype=bool)
        edges: np.ndarray = self._universe.node_set_edges(nodes[None, :])[0]
        return edges, mask
