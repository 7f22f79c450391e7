"""Node-level circuits of a curve, rebuilt from a circuit document's node scores (circuit.md MC-12).

At node granularity a grid point k keeps the top ⌊k · n_scored⌋ scored source nodes under
the curve's ranking (ties by forward index), plus every unscored node (EAP-IG's NaN), and
the circuit is the edge set of that node set (engine.md ME-6): every edge out of a kept node
into a slot of a kept node or into ``logits``. The engine prunes it as any edge circuit, which
gives the circuit the public evaluation keeps after its own pruning.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mibspec.metrics.circuit import Ranking, Rounding, edges_at, rank_edges

from ._inputs import UnusableInputError

__all__ = ["NodeLevelCircuits"]


class NodeLevelCircuits:
    """Edge masks of node-level circuits from node scores (``scored`` false: unscored)."""

    def __init__(self, universe: Any, scores: np.ndarray, scored: np.ndarray | None, pointer: str) -> None:
        n = universe.n_forward
        scores = np.asarray(scores, dtype=np.float64)
        scored = np.ones(n, dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
        if scores.shape != (n,) or scored.shape != (n,):
            raise UnusableInputError(
                pointer,
                f"node scores of shape {scores.shape} (scored flags {scored.shape}) for a graph of {n} "
                "source nodes",
            )
        if not np.isfinite(scores[scored]).all():
            raise UnusableInputError(pointer, "a scored node has a non-finite score")
        self._universe = universe
        self._scores = scores
        self._scored = scored
        self._orders: dict[Ranking, np.ndarray] = {}

    def nodes(self, k: float, ranking: Ranking, rounding: Rounding) -> np.ndarray:
        """Bool ``(n_forward,)``: the top ``⌊k · n_scored⌋`` scored nodes and every unscored one."""
        if ranking not in self._orders:
            indices = np.flatnonzero(self._scored)
            self._orders[ranking] = indices[rank_edges(self._scores[indices], ranking)]
        order = self._orders[ranking]
        kept = ~self._scored
        kept[order[: edges_at(k, len(order), rounding) if len(order) else 0]] = True
        return kept

    def circuit(self, k: float, ranking: Ranking, rounding: Rounding) -> np.ndarray:
        """Bool ``(n_edges,)``: the edges of :meth:`nodes` (ME-6)."""
        edges: np.ndarray = self._universe.node_set_edges(self.nodes(k, ranking, rounding)[None, :])[0]
        return edges
