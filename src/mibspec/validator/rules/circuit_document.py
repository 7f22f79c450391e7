"""Circuit-document rules: the graph universe matches its configuration, and the
membership rows match the circuits they are declared as (family K). Sizes and
pruning come from ``mibspec.metrics.graph``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.sidecars import ITEMSIZE, shape_problem

from .._context import RuleContext
from ._referenced import declared_tensor as _tensor
from ._registry import compare, rule


def edge_total(graph: dict[str, Any]) -> int:
    """The edge total of the configuration, in closed form (``metrics/graph.md``, MG-7):
    (3H+1)·(L + (H+1)·L(L−1)/2) + (1−P)·L·H + 1 + L(H+1). Needs no allocation, so any
    declared size can be checked."""
    L, H = graph["n_layers"], graph["n_heads"]
    P = 1 if graph.get("parallel_attn_mlp", False) else 0
    return (3 * H + 1) * (L + (H + 1) * L * (L - 1) // 2) + (1 - P) * L * H + 1 + L * (H + 1)


def matrix_cells(graph: dict[str, Any]) -> int:
    """(source, slot) cells of the universe's edge matrix: (1 + L(H+1)) · (L(3H+1) + 1)."""
    L, H = graph["n_layers"], graph["n_heads"]
    return (1 + L * (H + 1)) * (L * (3 * H + 1) + 1)


def graph_universe(graph: dict[str, Any]) -> Any:
    """The reference universe of a circuit document's ``graph`` (only for configurations
    within ``MAX_MATRIX_CELLS``)."""
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    return GraphUniverse(
        GraphConfig(
            graph["n_layers"],
            graph["n_heads"],
            graph.get("parallel_attn_mlp", False),
            graph.get("d_model"),
        )
    )


@rule("circuit-universe", codes=("K104", "K108"), kinds=("circuit",))
def circuit_universe(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The declared edge total is the one the graph configuration implies; a universe too
    large to hold cannot have its membership rows checked."""
    from mibspec.metrics.graph import MAX_MATRIX_CELLS

    expected = edge_total(doc["graph"])
    if doc["graph"]["n_edges"] != expected:
        yield ctx.finding("K104", "/graph/n_edges", declared=doc["graph"]["n_edges"], expected=expected)
    if ("membership" in doc or "neuron_masks" in doc) and matrix_cells(doc["graph"]) > MAX_MATRIX_CELLS:
        yield ctx.finding("K108", "/graph", cells=matrix_cells(doc["graph"]), limit=MAX_MATRIX_CELLS)


@rule("circuit-scores", codes=("K114",), kinds=("circuit",))
def circuit_scores(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Edge scores are one value per edge of the graph, in canonical edge order (DK-2): a
    shorter or longer vector would rank edges of another universe."""
    if "scores" not in doc:
        return
    shape, dtype = list(doc["scores"]["shape"]), doc["scores"]["dtype"]
    if shape != [edge_total(doc["graph"])] and not shape_problem(shape, ITEMSIZE[dtype]):  # A112 first
        yield ctx.finding(
            "K114",
            "/scores/shape",
            declared=list(doc["scores"]["shape"]),
            expected=[edge_total(doc["graph"])],
        )


@rule("circuit-membership", codes=("K105", "K106"), kinds=("circuit",))
def circuit_membership(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each declared circuit's edge count and weighted size match its membership row; circuits
    of one ranking are nested as k grows."""
    from mibspec.metrics.graph import MAX_MATRIX_CELLS

    if "membership" not in doc or not doc.get("circuits"):
        return
    membership = _tensor(ctx, doc["membership"])
    if membership is None or membership.ndim != 2 or membership.dtype.kind != "b":
        return

    n_edges = edge_total(doc["graph"])
    if membership.shape[1] != n_edges:
        yield ctx.finding(
            "K105",
            "/membership/shape",
            entry="membership",
            what="edges per row",
            claimed=membership.shape[1],
            recomputed=n_edges,
        )
        return
    if matrix_cells(doc["graph"]) > MAX_MATRIX_CELLS:
        return  # K108: the rows cannot be checked
    universe = graph_universe(doc["graph"])
    fractions = None
    if doc.get("granularity") == "neuron" and "neuron_masks" in doc:
        fractions = _tensor(ctx, doc["neuron_masks"])
    rows: dict[int, Any] = {}
    for i, entry in enumerate(doc["circuits"]):
        pointer = f"/circuits/{i}"
        if entry["index"] >= membership.shape[0]:
            yield ctx.finding(
                "K105",
                f"{pointer}/index",
                entry=i,
                what="row",
                claimed=entry["index"],
                recomputed=f"< {membership.shape[0]}",
            )
            continue
        row = membership[entry["index"]]
        rows[i] = row
        count = int(row.sum())
        if entry["n_edges"] != count:
            yield ctx.finding(
                "K105",
                f"{pointer}/n_edges",
                entry=i,
                what="edges",
                claimed=entry["n_edges"],
                recomputed=count,
            )
        if "weighted_size" in entry:
            fraction = None
            if fractions is not None and entry["index"] < fractions.shape[0]:
                fraction = universe.neuron_fraction(fractions[entry["index"]])
            size = universe.weighted_edge_count(row, fraction)
            yield from compare(
                ctx,
                "K105",
                f"{pointer}/weighted_size",
                entry["weighted_size"],
                size,
                entry=i,
                what="weighted size",
            )
    by_ranking: dict[str, list[tuple[float, int]]] = {}
    for i, entry in enumerate(doc["circuits"]):
        if i in rows and entry.get("k") is not None and entry.get("ranking"):
            by_ranking.setdefault(entry["ranking"], []).append((entry["k"], i))
    for ranking, entries in by_ranking.items():
        entries.sort()
        for (k_small, small), (k_large, large) in itertools.pairwise(entries):
            if (rows[small] & ~rows[large]).any():
                # A warning by default; profiles raise or silence it through their severity map.
                yield ctx.finding("K106", f"/circuits/{large}", ranking=ranking, small=k_small, large=k_large)


@rule("circuit-ties", codes=("K107",), kinds=("circuit",))
def circuit_ties(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """A top-n circuit whose cut falls inside a run of equal scores depends on the tie-break."""
    from mibspec.metrics.circuit import straddling_ties_at

    if "scores" not in doc:
        return
    entries = [
        (i, e) for i, e in enumerate(doc.get("circuits", [])) if e.get("ranking") in ("signed", "absolute")
    ]
    if not entries:
        return
    scores = _tensor(ctx, doc["scores"])
    if scores is None or scores.ndim != 1 or scores.dtype.kind != "f":
        return

    for ranking in ("signed", "absolute"):
        chosen = [(i, e) for i, e in entries if e["ranking"] == ranking and e["n_edges"] <= scores.shape[0]]
        reports = straddling_ties_at(scores, [e["n_edges"] for _, e in chosen], ranking)
        for (i, entry), report in zip(chosen, reports, strict=True):
            if report.straddles:
                yield ctx.finding(
                    "K107",
                    f"/circuits/{i}",
                    n=entry["n_edges"],
                    ranking=ranking,
                    key=report.key_at_cut,
                    inside=report.n_tied_inside,
                    outside=report.n_tied_outside,
                )


@rule("circuit-node-tensors", codes=("A113", "A114"), kinds=("circuit",))
def circuit_node_tensors(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Node and neuron tensors fit the graph and come in pairs (scores with their ``*_scored``
    mask); an entry marked unscored holds 0, never a score (SPEC.md I-2)."""
    graph = doc["graph"]
    n_forward = 1 + graph["n_layers"] * (graph["n_heads"] + 1)
    d_model = graph.get("d_model")
    shapes: dict[str, list[int] | None] = {
        "node_scores": [n_forward],
        "node_scored": [n_forward],
        "neuron_scores": [n_forward, d_model] if d_model else None,
        "neuron_scored": [n_forward, d_model] if d_model else None,
        "node_membership": None,
    }
    if "membership" in doc:
        rows = list(doc["membership"]["shape"])[:1]
        if rows:
            shapes["node_membership"] = [rows[0], n_forward]
        else:  # a membership tensor without rows: its own shape is reported (A110), not this one's
            del shapes["node_membership"]
    broken = set()
    for key, shape in shapes.items():
        if key not in doc:
            continue
        if shape is None:
            needs = "the graph's d_model" if key.startswith("neuron") else "a membership tensor"
            yield ctx.finding("A113", f"/{key}", detail=f"{key} needs {needs}")
            broken.add(key)
        elif list(doc[key]["shape"]) != shape:
            yield ctx.finding("A113", f"/{key}/shape", detail=f"{key} must have shape {shape}")
            broken.add(key)
    for level in ("node", "neuron"):
        scores, scored = f"{level}_scores", f"{level}_scored"
        if (scores in doc) != (scored in doc):
            present, absent = (scores, scored) if scores in doc else (scored, scores)
            yield ctx.finding("A113", f"/{present}", detail=f"{present} comes without {absent}")
            continue
        if scores not in doc or {scores, scored} & broken:
            continue
        values, flags = _tensor(ctx, doc[scores]), _tensor(ctx, doc[scored])
        if values is None or flags is None or flags.dtype.kind != "b" or values.shape != flags.shape:
            continue
        bad = (~flags) & (values != 0)
        if bad.any():
            yield ctx.finding(
                "A114", f"/{scores}", what=level, count=int(bad.sum()), first=int(bad.ravel().argmax())
            )
