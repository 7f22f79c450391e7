"""Computation graphs (edge universes) and the circuit documents and ground truths over them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from ._common import PROVENANCE, Folder, Json, document, fresh

# --------------------------------------------------------------------------- graph universe


@dataclass(frozen=True)
class Universe:
    """An EAP-IG computation graph: nodes, destination slots and edges in canonical order.

    Canonical edge order: row-major over (source node, destination slot), sources
    ``input, a0.h0 … a0.h{H-1}, m0, a1.h0, …``, slots per layer all ``<q>``, then all
    ``<k>``, then all ``<v>``, then ``m{l}``, and ``logits`` last.
    """

    n_layers: int
    n_heads: int
    parallel_attn_mlp: bool = False

    @cached_property
    def sources(self) -> list[tuple[str, int, str]]:
        """(name, layer, type) of the source nodes; ``input`` has layer -1."""
        out = [("input", -1, "input")]
        for layer in range(self.n_layers):
            out += [(f"a{layer}.h{h}", layer, "head") for h in range(self.n_heads)]
            out.append((f"m{layer}", layer, "mlp"))
        return out

    @cached_property
    def nodes(self) -> list[str]:
        """Every node in topological order (sources, then ``logits``)."""
        return [name for name, _, _ in self.sources] + ["logits"]

    @cached_property
    def slots(self) -> list[tuple[str, int, str, str]]:
        """(slot name, layer, type, node) of the destination slots."""
        out: list[tuple[str, int, str, str]] = []
        for layer in range(self.n_layers):
            for letter in "qkv":
                out += [
                    (f"a{layer}.h{h}<{letter}>", layer, "head", f"a{layer}.h{h}") for h in range(self.n_heads)
                ]
            out.append((f"m{layer}", layer, "mlp", f"m{layer}"))
        out.append(("logits", self.n_layers, "logits", "logits"))
        return out

    def _connected(self, src_layer: int, src_type: str, dst_layer: int, dst_type: str) -> bool:
        if src_type == "input" or dst_type == "logits":
            return True
        if src_layer < dst_layer:
            return True
        return (
            src_layer == dst_layer and src_type == "head" and dst_type == "mlp" and not self.parallel_attn_mlp
        )

    @cached_property
    def edges(self) -> tuple[NDArray[np.intp], NDArray[np.intp], list[str]]:
        """(source node index, destination node index, edge name) of every edge."""
        index = {name: i for i, name in enumerate(self.nodes)}
        src, dst, names = [], [], []
        for s_name, s_layer, s_type in self.sources:
            for d_slot, d_layer, d_type, d_node in self.slots:
                if self._connected(s_layer, s_type, d_layer, d_type):
                    src.append(index[s_name])
                    dst.append(index[d_node])
                    names.append(f"{s_name}->{d_slot}")
        return np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp), names

    @property
    def n_edges(self) -> int:
        return len(self.edges[2])

    @property
    def n_forward(self) -> int:
        return len(self.sources)

    def pruned_size(self, mask: NDArray[np.bool_]) -> int:
        """Edges of ``mask`` on some input → logits path (the weighted size at edge granularity)."""
        return int(np.count_nonzero(self.pruned(mask)))

    def pruned(self, mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """The edges of ``mask`` that lie on some input → logits path through ``mask``."""
        src, dst, _ = self.edges
        n = len(self.nodes)
        reached = np.zeros(n, dtype=bool)
        reached[0] = True
        for node in range(1, n):  # topological order: an edge's source precedes its destination
            into = mask & (dst == node)
            reached[node] = bool(reached[src[into]].any())
        reaches = np.zeros(n, dtype=bool)
        reaches[n - 1] = True
        for node in range(n - 2, -1, -1):
            out = mask & (src == node)
            reaches[node] = bool(reaches[dst[out]].any())
        kept: NDArray[np.bool_] = mask & reached[src] & reaches[dst]
        return kept


GPT2_UNIVERSE = Universe(12, 12)
INTERPBENCH_UNIVERSE = Universe(6, 4)
TINY_UNIVERSE = Universe(4, 4)
assert GPT2_UNIVERSE.n_edges == 32491
assert INTERPBENCH_UNIVERSE.n_edges == 1108


def edges_at(k: float, n: int) -> int:
    """floor(k · n) in exact arithmetic on the decimal k."""
    return math.floor(Fraction(repr(k)) * n)


def ranked(scores: NDArray[np.float32], ranking: str) -> NDArray[np.intp]:
    """Edge indices by descending key (score, or |score|), ties by ascending index."""
    key = scores.astype(np.float64)
    if ranking == "absolute":
        key = np.abs(key)
    return np.lexsort((np.arange(key.size), -key))


def trapezoid(xs: Sequence[float], ys: Sequence[float]) -> float:
    return math.fsum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(xs) - 1))


def roc_auc(scores: NDArray[np.float64], truth: NDArray[np.bool_]) -> float:
    """Rank-statistic ROC AUC: P(score of a true edge > score of a false edge), ties count 1/2."""
    pos, neg = scores[truth], scores[~truth]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


def mib_auroc(scores: NDArray[np.float32], truth: NDArray[np.bool_], grid: Sequence[float]) -> float:
    """MIB's edge AUROC (metrics/circuit.md MC-10), as a plain loop: at each k the first ceil(k · n)
    edges by |score|, TPR and FPR against the truth, the trapezoid over FPR divided by the last FPR."""
    order = ranked(scores, "absolute")
    positives, negatives = int(truth.sum()), int((~truth).sum())
    tpr, fpr = [], []
    for k in grid:
        m = math.ceil(Fraction(repr(k)) * truth.size)
        tp = int(truth[order[:m]].sum())
        tpr.append(tp / positives)
        fpr.append((m - tp) / negatives)
    area = math.fsum((fpr[i + 1] - fpr[i]) * (tpr[i] + tpr[i + 1]) / 2 for i in range(len(grid) - 1))
    return area / fpr[-1]


# --------------------------------------------------------------------------- circuit data


@dataclass
class CircuitData:
    """Edge scores and the circuits built from them on the grid, per ranking."""

    universe: Universe
    scores: NDArray[np.float32]
    rankings: tuple[str, ...]
    grid: tuple[float, ...]
    membership: NDArray[np.bool_] = field(init=False)
    entries: list[Json] = field(init=False)

    def __post_init__(self) -> None:
        rows: list[NDArray[np.bool_]] = []
        entries: list[Json] = []
        for ranking in self.rankings:
            order = ranked(self.scores, ranking)
            for k in self.grid:
                count = edges_at(k, self.universe.n_edges)
                row = np.zeros(self.universe.n_edges, dtype=bool)
                row[order[:count]] = True
                entries.append(
                    {
                        "index": len(rows),
                        "k": k,
                        "ranking": ranking,
                        "n_edges": count,
                        "weighted_size": float(self.universe.pruned_size(row)),
                    }
                )
                rows.append(row)
        self.membership = np.stack(rows)
        self.entries = entries


def edge_scores(
    universe: Universe, seed: int, favoured: Sequence[str] = (), boost: NDArray[np.bool_] | None = None
) -> NDArray[np.float32]:
    """Signed edge scores shaped like attribution scores.

    score = ±imp(src)·imp(dst)·w(slot) + noise, with node importances 1 for ``input`` and
    ``logits``, U(0.5, 0.9) for ``favoured`` nodes and |N(0, 0.05)| otherwise, so the
    highest-scoring edges connect input to logits through the favoured nodes; edges in
    ``boost`` get a further +0.3.
    """
    rng = np.random.default_rng(seed)
    src, dst, names = universe.edges
    index = {name: i for i, name in enumerate(universe.nodes)}
    importance = np.abs(rng.normal(0, 0.05, size=len(universe.nodes)))
    importance[0] = importance[-1] = 1.0
    for name in favoured:
        importance[index[name]] = rng.uniform(0.5, 0.9)
    slot = np.array([0.5 if n.endswith("<q>") else 0.3 if n.endswith("<k>") else 1.0 for n in names])
    sign = np.where(rng.random(universe.n_edges) < 0.8, 1.0, -1.0)
    scores = (
        sign * importance[src] * importance[dst] * slot + rng.standard_t(3, size=universe.n_edges) * 0.002
    )
    if boost is not None:
        scores[boost] += 0.3
    out: NDArray[np.float32] = scores.astype(np.float32)
    return out


IOI_HEADS = (
    "a0.h1",
    "a3.h0",
    "a5.h5",
    "a6.h9",
    "a7.h3",
    "a7.h9",
    "a8.h6",
    "a8.h10",
    "a9.h6",
    "a9.h9",
    "a10.h0",
)

# Faithfulness measured at the grid points (signed ranking for CPR, |score| for CMD).
F_SIGNED = (0.1873, 0.2914, 0.4467, 0.5902, 0.7215, 0.8530, 0.9208, 0.9671, 0.9954, 1.0)
F_ABSOLUTE = (0.0412, 0.0987, 0.2455, 0.4108, 0.5893, 0.7736, 0.8819, 0.9497, 1.0132, 1.0)


def curve_values(curve: Json) -> list[float]:
    return [point["faithfulness"] for point in curve["points"]]


def circuit_curves(data: CircuitData, f_values: dict[str, Sequence[float]]) -> list[Json]:
    curves = []
    for ranking in data.rankings:
        points = []
        for entry in data.entries:
            if entry["ranking"] != ranking:
                continue
            points.append(
                {
                    "k": entry["k"],
                    "circuit": entry["index"],
                    "n_edges": entry["n_edges"],
                    "weighted_size": entry["weighted_size"],
                    # An empty circuit is the corrupted run: its faithfulness is 0 by definition.
                    "faithfulness": f_values[ranking][data.grid.index(entry["k"])]
                    if entry["n_edges"]
                    else 0.0,
                }
            )
        curves.append({"ranking": ranking, "points": points})
    return curves


@fresh
def write_circuit_document(
    folder: Folder,
    data: CircuitData,
    *,
    name: str = "circuit.json",
    sidecar: str = "circuit.safetensors",
    model: Json | None = None,
    description: str = "EAP-IG edge scores and the circuits built from them at each grid point.",
) -> Json:
    """Write a circuit document with its safetensors sidecar; return the document."""
    folder.safetensors(sidecar, {"scores": data.scores, "membership": data.membership})
    u = data.universe
    doc: Json = document(
        "circuit",
        {
            "description": description,
            "graph": {
                "convention": "eap-ig",
                "n_layers": u.n_layers,
                "n_heads": u.n_heads,
                "parallel_attn_mlp": u.parallel_attn_mlp,
                "n_edges": u.n_edges,
            },
            "granularity": "edge",
            "scores": {"artifact": "tensors", "tensor": "scores", "shape": [u.n_edges], "dtype": "float32"},
            "membership": {
                "artifact": "tensors",
                "tensor": "membership",
                "shape": list(data.membership.shape),
                "dtype": "bool",
            },
            "circuits": data.entries,
            "artifacts": [folder.artifact("tensors", "scores", sidecar, "application/x-safetensors")],
            "provenance": PROVENANCE,
        },
    )
    if model is not None:
        doc["model"] = model
    folder.json(name, doc)
    return doc


@fresh
def write_ground_truth(
    folder: Folder, universe: Universe, truth: NDArray[np.bool_], *, name: str, sidecar: str
) -> Json:
    """A circuit document holding one circuit: a known true edge set."""
    folder.safetensors(sidecar, {"membership": truth[None, :]})
    doc: Json = document(
        "circuit",
        {
            "description": "Ground-truth edge set of the model's planted circuit.",
            "graph": {
                "convention": "eap-ig",
                "n_layers": universe.n_layers,
                "n_heads": universe.n_heads,
                "parallel_attn_mlp": universe.parallel_attn_mlp,
                "n_edges": universe.n_edges,
            },
            "granularity": "edge",
            "membership": {
                "artifact": "truth",
                "tensor": "membership",
                "shape": [1, universe.n_edges],
                "dtype": "bool",
            },
            "circuits": [
                {"index": 0, "n_edges": int(truth.sum()), "weighted_size": float(universe.pruned_size(truth))}
            ],
            "artifacts": [folder.artifact("truth", "ground_truth", sidecar, "application/x-safetensors")],
            "provenance": PROVENANCE,
        },
    )
    folder.json(name, doc)
    return doc


def planted_truth(universe: Universe, path: Sequence[str]) -> NDArray[np.bool_]:
    """Edges between consecutive nodes of ``path`` (every q/k/v slot of a head), plus input and logits."""
    src, dst, _ = universe.edges
    index = {name: i for i, name in enumerate(universe.nodes)}
    chain = ["input", *path, "logits"]
    truth = np.zeros(universe.n_edges, dtype=bool)
    for a in chain:
        for b in chain:
            if index[a] < index[b]:
                truth |= (src == index[a]) & (dst == index[b])
    return truth
