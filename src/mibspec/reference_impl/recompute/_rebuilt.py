"""Circuits of curve points that name no circuit row, rebuilt from a circuit document's scores.

``metrics/circuit.md`` MC-12: at edge granularity a point at k is the top ⌊k·n⌋ edges of the
document's edge scores under the curve's ranking (MC-3, MC-4); at node granularity the edges
of the top nodes of its node scores (:class:`NodeLevelCircuits`); at neuron granularity the
edges of the nodes holding the top neurons of its neuron scores, with those neurons as the
circuit's neuron mask (:class:`NeuronLevelCircuits`). Recomputation evaluates these circuits,
the rules check the sizes a report claims for them, and importers write those sizes: all
three take them from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mibspec.metrics.circuit import Ranking, Rounding, edges_at, rank_edges

from ._inputs import UnusableInputError
from ._neuron_circuits import NeuronLevelCircuits
from ._node_circuits import NodeLevelCircuits

__all__ = ["RebuiltCircuits"]


class RebuiltCircuits:
    """The circuit of each point without a row, at the report's granularity.

    Args:
        universe: the graph universe (``mibspec.metrics.graph.GraphUniverse``).
        granularity: ``edge``, ``node`` or ``neuron``.
        rounding: the edge-count rounding (``floor`` or ``ceil``).
        edge_scores: the document's edge scores (``(n_edges,)``), or ``None``.
        node_scores, node_scored: the document's node scores and their scored flags, or ``None``.
        neuron_scores, neuron_scored: the document's neuron scores and their scored flags, or ``None``.
        pointer: where the document's scores are reported when they cannot be used.
    """

    def __init__(
        self,
        universe: Any,
        granularity: str,
        rounding: Rounding,
        *,
        edge_scores: Any = None,
        node_scores: Any = None,
        node_scored: Any = None,
        neuron_scores: Any = None,
        neuron_scored: Any = None,
        pointer: str = "/claims/circuit",
    ) -> None:
        self.universe = universe
        self.granularity = granularity
        self.rounding = rounding
        self.pointer = pointer
        self._edge_scores = None if edge_scores is None else np.asarray(edge_scores, dtype=np.float64)
        self._node_scores, self._node_scored = node_scores, node_scored
        self._neuron_scores, self._neuron_scored = neuron_scores, neuron_scored
        self._nodes: NodeLevelCircuits | None = None
        self._neurons: NeuronLevelCircuits | None = None
        self._orders: dict[str, np.ndarray] = {}

    def circuit(self, k: float, ranking: Ranking, point: str | None = None) -> np.ndarray:
        """The circuit at ``k`` under ``ranking``: a bool vector over the canonical edges, or (at
        node granularity) a bool source × slot matrix. ``point`` is the point's pointer, where an
        edge-level point without scores to rebuild it from is reported.

        At neuron granularity this is the edge matrix of the circuit; :meth:`neurons` gives
        its neuron mask.

        Raises:
            UnusableInputError: the point cannot be rebuilt at this granularity (no scores of
                the granularity, or scores that do not fit the graph).
        """
        if self.granularity == "neuron":
            return self._neuron_level().circuit(k, ranking, self.rounding)[0]
        if self.granularity == "node":
            return self._node_level().circuit(k, ranking, self.rounding)
        scores = self._edge_scores
        if scores is None:
            raise UnusableInputError(
                point or self.pointer, "the point names no circuit and the circuit document has no scores"
            )
        n_edges = self.universe.n_edges
        if scores.shape != (n_edges,):
            raise UnusableInputError(
                self.pointer,
                f"the circuit document has {scores.size} edge scores for a graph of {n_edges} edges",
            )
        if ranking not in self._orders:
            self._orders[ranking] = rank_edges(scores, ranking)
        mask = np.zeros(n_edges, dtype=bool)
        mask[self._orders[ranking][: edges_at(k, n_edges, self.rounding)]] = True
        return mask

    def neurons(self, k: float, ranking: Ranking) -> np.ndarray | None:
        """The neuron mask ``(n_forward, d_model)`` of the circuit at ``k`` at neuron
        granularity, ``None`` at the other granularities.

        Raises:
            UnusableInputError: as :meth:`circuit`.
        """
        if self.granularity != "neuron":
            return None
        return self._neuron_level().neurons(k, ranking, self.rounding)

    def _neuron_level(self) -> NeuronLevelCircuits:
        """Neuron-level circuits from the document's neuron scores; never from node or edge scores."""
        if self._neurons is None:
            if self._neuron_scores is None:
                raise UnusableInputError(
                    self.pointer,
                    "a neuron-level point without a circuit is rebuilt from neuron scores, and the "
                    "circuit document has none",
                )
            self._neurons = NeuronLevelCircuits(
                self.universe, self._neuron_scores, self._neuron_scored, self.pointer
            )
        return self._neurons

    def _node_level(self) -> NodeLevelCircuits:
        """Node-level circuits from the document's node scores; never from its edge scores."""
        if self._nodes is None:
            if self._node_scores is None:
                raise UnusableInputError(
                    self.pointer,
                    "a node-level point without a circuit is rebuilt from node scores, and the circuit "
                    "document has none (its edge scores rank edges, not nodes)",
                )
            self._nodes = NodeLevelCircuits(self.universe, self._node_scores, self._node_scored, self.pointer)
        return self._nodes
