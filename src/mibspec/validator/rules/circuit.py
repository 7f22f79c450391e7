"""Circuit-track rules: the k-grid and circuit sizes (family K), and CPR/CMD recomputed
from the claimed curve (family C). The metrics come from ``mibspec.reference_impl``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from mibspec.core.conventions import convention
from mibspec.core.findings import Finding
from mibspec.core.rounding import intervals_meet

from .._context import RuleContext
from ._referenced import Referenced, referenced
from ._registry import compare, interval, rule
from .circuit_document import edge_total, graph_universe, matrix_cells


@rule("circuit-grid", track="circuit", codes=("K101", "K102"))
def circuit_grid(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The declared grid is the profile's, and every curve is evaluated on it."""
    grid = doc["settings"]["grid"]
    for pointer, declared, required in convention(ctx.profile, doc, "grid").conflicts():
        yield ctx.finding(
            "K101", pointer, declared=declared, expected=list(required), profile=ctx.profile.name
        )
    for index, curve in enumerate(doc["claims"]["curves"]):
        ks = [point["k"] for point in curve["points"]]
        if ks != grid:
            yield ctx.finding("K102", f"/claims/curves/{index}", ranking=curve["ranking"], ks=ks, grid=grid)


@rule("circuit-curves", track="circuit", codes=("K113",))
def circuit_curves(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each ranking has one curve: a second curve of a ranking leaves open which one a metric of
    that ranking is computed from."""
    first: dict[str, int] = {}
    for index, curve in enumerate(doc["claims"]["curves"]):
        ranking = curve["ranking"]
        if ranking in first:
            yield ctx.finding(
                "K113",
                f"/claims/curves/{index}/ranking",
                ranking=ranking,
                first=f"/claims/curves/{first[ranking]}",
            )
        first.setdefault(ranking, index)


def _circuit_document(doc: dict[str, Any], ctx: RuleContext) -> Referenced | None:
    """The report's circuit document, read for its rules (``None``: none declared, or one the
    artifact rules report)."""
    return referenced(ctx, doc["claims"].get("circuit"), "circuit")


def _universe_totals(doc: dict[str, Any], ctx: RuleContext) -> list[tuple[str, int]]:
    """The edge totals of the graph universes the report declares, each with where it comes
    from: its circuit document's graph, and the configuration its model declares."""
    totals = []
    document = _circuit_document(doc, ctx)
    if document is not None:
        totals.append((f"the graph of {document.path}", edge_total(document.data["graph"])))
    config = doc["model"].get("config")
    if isinstance(config, dict):
        totals.append(("the model's declared configuration", edge_total(config)))
    return totals


@rule("circuit-edge-total", track="circuit", codes=("K110",))
def circuit_edge_total(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """``claims.n_edges`` is the edge total of the graph universe the report declares (its
    circuit document's graph, the configuration its model declares)."""
    claimed = doc["claims"]["n_edges"]
    for source, total in _universe_totals(doc, ctx):
        if claimed != total:
            yield ctx.finding("K110", "/claims/n_edges", claimed=claimed, total=total, source=source)


#: A point whose circuit nothing declared determines.
_UNDETERMINED = object()


class _PointCircuits:
    """The circuit each curve point is evaluated on, read from the report's circuit document
    as recomputation reads it: the membership row the point names, else the circuit rebuilt
    from the document's scores at the report's granularity (circuit.md MC-12, the reference
    ``RebuiltCircuits``). :meth:`of` gives ``(edges, recorded size, exact)``, ``_UNDETERMINED``
    when nothing determines the circuit, or ``None`` when the document cannot answer and
    another rule says why (A110, K105, K108, K109)."""

    def __init__(self, document: Referenced, doc: dict[str, Any], ctx: RuleContext) -> None:
        from mibspec.metrics.graph import MAX_MATRIX_CELLS

        graph = document.data["graph"]
        self.document = document
        self.n_edges = edge_total(graph)
        self.universe: Any = graph_universe(graph) if matrix_cells(graph) <= MAX_MATRIX_CELLS else None
        self.granularity = doc["settings"].get("granularity") or document.data.get("granularity", "edge")
        self.recorded = ctx.profile.get("recorded_size", "complete_pruning")
        self.rounding = convention(ctx.profile, doc, "edge_count_rounding").value
        self._rebuilt: Any = None

    def of(self, point: dict[str, Any], ranking: str) -> Any:
        if self.universe is None:
            return None  # K108: the universe is too large to hold
        index = point.get("circuit")
        return self._row(index) if index is not None else self._rebuilt_circuit(point["k"], ranking)

    def _sized(self, edges: Any, fraction: Any = None) -> tuple[int, float, bool]:
        from mibspec.metrics.graph import recorded_size

        size = recorded_size(self.universe, edges, fraction, self.recorded)
        return int(edges.sum()), size, fraction is None

    def _row(self, index: int) -> Any:
        membership = self.document.tensor("membership")
        if (
            membership is None
            or membership.ndim != 2
            or membership.dtype.kind != "b"
            or membership.shape[1] != self.n_edges
            or index >= membership.shape[0]
        ):
            return None  # A110, K105 or K109 report it
        fraction = None
        masks = self.document.tensor("neuron_masks") if self.granularity == "neuron" else None
        if masks is not None and masks.ndim == 3 and index < masks.shape[0]:
            try:
                fraction = self.universe.neuron_fraction(masks[index])
            except ValueError:
                return None  # A110 reports the masks' shape or dtype
        return self._sized(membership[index], fraction)

    def _rebuilt_circuit(self, k: float, ranking: Any) -> Any:
        from mibspec.reference_impl.recompute import RebuiltCircuits, UnusableInputError

        if self.granularity == "neuron":
            return _UNDETERMINED  # neuron-level circuits are not rebuilt from scores (MC-12)
        if self._rebuilt is None:
            keys = ("node_scores", "node_scored") if self.granularity == "node" else ("scores",)
            tensors = {key: self.document.tensor(key) for key in keys}
            if any(tensors[key] is None and key in self.document.data for key in keys):
                return None  # A110 reports the tensor
            if tensors[keys[0]] is None:
                return _UNDETERMINED  # no scores of the report's granularity to rebuild from
            self._rebuilt = RebuiltCircuits(
                self.universe,
                self.granularity,
                self.rounding,
                edge_scores=tensors.get("scores"),
                node_scores=tensors.get("node_scores"),
                node_scored=tensors.get("node_scored"),
            )
        try:
            return self._sized(self._rebuilt.circuit(k, ranking))
        except UnusableInputError:
            return None  # scores that do not fit the graph: K114, A113 report them


@rule("circuit-point-sizes", track="circuit", codes=("K103", "K111", "K112"))
def circuit_point_sizes(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each point's edge count and weighted size are those of the circuit it is evaluated on
    (the row it names, or the circuit rebuilt from the document's scores), the weighted size
    being the size the profile says a report records; a point whose circuit nothing
    determines declares no size; and under a profile that checks sizes, no circuit is larger
    than its grid point allows (⌊k·|E|⌋ edges, k·|E| weighted), |E| the graph's edge total,
    never the claimed one."""
    claims = doc["claims"]
    document = _circuit_document(doc, ctx)
    if claims.get("circuit") is not None and document is None:
        return  # the artifact rules (A101–A110) report the circuit document
    circuits = _PointCircuits(document, doc, ctx) if document is not None else None
    totals = _universe_totals(doc, ctx)
    total = totals[0][1] if totals else None
    for c, curve in enumerate(claims["curves"]):
        for p, point in enumerate(curve["points"]):
            pointer = f"/claims/curves/{c}/points/{p}"
            found = _UNDETERMINED if circuits is None else circuits.of(point, curve["ranking"])
            if found is None:
                continue
            if found is _UNDETERMINED:
                for field in ("n_edges", "weighted_size"):
                    if field in point:
                        yield ctx.finding(
                            "K112", f"{pointer}/{field}", field=field, k=point["k"], ranking=curve["ranking"]
                        )
                continue
            assert isinstance(found, tuple)
            yield from _point_sizes(ctx, pointer, point, curve["ranking"], found, total)


def _point_sizes(
    ctx: RuleContext,
    pointer: str,
    point: dict[str, Any],
    ranking: str,
    found: tuple[int, float, bool],
    total: int | None,
) -> Iterator[Finding]:
    """K111 and K103 for one point whose circuit is known: ``found`` is its edge count, its
    recorded size and whether that size is a count (exact) or a sum of neuron fractions."""
    edges, size, exact = found
    named = point.get("circuit") is not None
    source = f"circuit {point['circuit']}" if named else "the circuit rebuilt from the scores"
    # A named row's edge count is its entry's (K109), which is the row's (K105).
    if not named and "n_edges" in point and point["n_edges"] != edges:
        yield ctx.finding(
            "K111",
            f"{pointer}/n_edges",
            what="edge count",
            k=point["k"],
            ranking=ranking,
            claimed=point["n_edges"],
            recomputed=edges,
            source=source,
            data={"claimed": point["n_edges"], "recomputed": edges},
        )
    if "weighted_size" in point:
        consistency = ctx.profile.consistency
        tolerance = (0.0, 0.0) if exact else (consistency["abs"], consistency["rel"])
        spot = f"{pointer}/weighted_size"
        if not intervals_meet(interval(ctx, spot, point["weighted_size"]), (size, size), *tolerance):
            yield ctx.finding(
                "K111",
                spot,
                what=f"recorded size ({ctx.profile.get('recorded_size', 'complete_pruning')})",
                k=point["k"],
                ranking=ranking,
                claimed=point["weighted_size"],
                recomputed=size,
                source=source,
                data={"claimed": point["weighted_size"], "recomputed": size},
            )
    # A rebuilt circuit is the point's k by definition (MC-12); a named row is what was submitted.
    if not named or not ctx.profile.check_circuit_size or total is None:
        return
    from mibspec.metrics.circuit import edges_at

    allowed = edges_at(point["k"], total, convention(ctx.profile, ctx.data, "edge_count_rounding").value)
    at = f"{pointer}/circuit"
    count, count_at = (point["n_edges"], f"{pointer}/n_edges") if "n_edges" in point else (edges, at)
    if count > allowed:
        yield ctx.finding("K103", count_at, k=point["k"], size=count, allowed=allowed, what="edges")
    # The weighted size is a sum of fractions: compare with a relative margin of 1e-12.
    limit = point["k"] * total
    weighted, weighted_at = (
        (point["weighted_size"], f"{pointer}/weighted_size") if "weighted_size" in point else (size, at)
    )
    if weighted > limit * (1 + 1e-12):
        yield ctx.finding(
            "K103", weighted_at, k=point["k"], size=weighted, allowed=limit, what="weighted edges"
        )


@rule("circuit-points", track="circuit", codes=("K109",))
def circuit_points(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each point that names a circuit names a row its circuit document lists, at the point's
    k and the curve's ranking, with the point's edge count. (Its weighted size is checked
    against the row itself, by ``circuit_point_sizes``.)"""
    listed = _listed_circuits(doc, ctx)
    if listed is None:
        return
    path, rows = listed
    for c, curve in enumerate(doc["claims"]["curves"]):
        for p, point in enumerate(curve["points"]):
            index = point.get("circuit")
            if index is None:
                continue
            pointer = f"/claims/curves/{c}/points/{p}/circuit"
            entry = rows.get(index)
            if entry is None:
                yield ctx.finding(
                    "K109", pointer, detail=f"circuit {index} is not a row {path} lists ({len(rows)} rows)"
                )
                continue
            ranking = entry.get("ranking") if entry.get("ranking") in ("signed", "absolute") else None
            for field, mine, theirs in (
                ("k", point["k"], entry.get("k")),
                ("ranking", curve["ranking"], ranking),
                ("n_edges", point.get("n_edges"), entry.get("n_edges")),
            ):
                if mine is None or theirs is None or mine == theirs:
                    continue
                if field == "k" and math.isclose(mine, theirs, rel_tol=1e-12):
                    continue
                yield ctx.finding(
                    "K109",
                    pointer,
                    detail=f"circuit {index} of {path} is listed with {field} {theirs!r}; the point "
                    f"(ranking {curve['ranking']}, k = {point['k']}) has {mine!r}",
                )
                break


def _listed_circuits(doc: dict[str, Any], ctx: RuleContext) -> tuple[str, dict[int, dict[str, Any]]] | None:
    """The report's circuit document (its path and its ``circuits`` entries by row), or
    ``None`` when there is none to read: no circuit artifact, or one another rule reports
    (A102–A107)."""
    document = _circuit_document(doc, ctx)
    if document is None:
        return None
    return document.path, {entry["index"]: entry for entry in document.data.get("circuits", [])}


@rule("circuit-areas", track="circuit", codes=("C101", "C102", "C103"))
def circuit_areas(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """CPR and CMD equal the trapezoids of the claimed faithfulness curve of the declared ranking."""
    from mibspec.metrics.circuit import cmd, cpr

    claims, settings = doc["claims"], doc["settings"]
    rankings = convention(ctx.profile, doc, "ranking")
    curves = {curve["ranking"]: (index, curve) for index, curve in enumerate(claims["curves"])}
    for metric, code, compute in (("cpr", "C101", cpr), ("cmd", "C102", cmd)):
        ranking = rankings.value.get(metric) if metric in rankings.declared else None
        if ranking is None:
            yield ctx.finding(
                "C103", "/settings/ranking", metric=metric.upper(), detail="declares no ranking for it"
            )
            continue
        if ranking not in curves:
            yield ctx.finding(
                "C103",
                f"/settings/ranking/{metric}",
                metric=metric.upper(),
                detail=f"names the {ranking} ranking, but claims.curves has no {ranking} curve",
            )
            continue
        _, curve = curves[ranking]
        ks = [point["k"] for point in curve["points"]]
        if ks != settings["grid"]:
            continue  # K102 reports it; the area would be on the wrong axis
        index = curves[ranking][0]
        values = [point["faithfulness"] for point in curve["points"]]
        spans = [
            interval(ctx, f"/claims/curves/{index}/points/{p}/faithfulness", value)
            for p, value in enumerate(values)
        ]
        if ctx.profile.force_full_faithfulness and ks and math.isclose(ks[-1], 1.0):
            values[-1] = 1.0
            spans[-1] = (1.0, 1.0)
        yield from compare(
            ctx,
            code,
            f"/claims/{metric}/value",
            claims[metric]["value"],
            compute(ks, values),
            bounds=_area_bounds(metric, ks, spans),
            ranking=ranking,
        )


def _area_bounds(metric: str, ks: list[float], spans: list[tuple[float, float]]) -> tuple[float, float]:
    """The least and greatest CPR or CMD over the faithfulness intervals (C-10). Both are
    trapezoids with non-negative weights: CPR of the interval ends, CMD of the least and
    greatest |1 − f| each interval allows."""
    from mibspec.metrics.circuit import cmd, cpr

    if metric == "cpr":
        return cpr(ks, [low for low, _ in spans]), cpr(ks, [high for _, high in spans])

    def distance(f: float) -> float:
        return abs(1.0 - f)

    nearest = [1.0 if low <= 1.0 <= high else min((low, high), key=distance) for low, high in spans]
    farthest = [max((low, high), key=distance) for low, high in spans]
    return cmd(ks, nearest), cmd(ks, farthest)


@rule("circuit-auroc", track="circuit", codes=("C125", "C126"))
def circuit_auroc(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The claimed edge AUROC is the AUROC of the circuit document's edge scores against the
    ground-truth circuit's edges, under the declared convention and ranking (MC-9, MC-10); an
    AUROC without scores and a ground truth to compute it from is refused."""
    from mibspec.metrics.circuit import edge_auroc_mib, edge_auroc_rank

    auroc = doc["claims"].get("auroc")
    if auroc is None:
        return
    inputs = _auroc_inputs(doc, ctx)
    if inputs is None:
        return  # the artifact rules report a broken circuit or ground-truth document
    if isinstance(inputs, str):
        yield ctx.finding("C126", "/claims/auroc", detail=inputs)
        return
    scores, truth = inputs
    name = convention(ctx.profile, doc, "auroc_convention").value
    ranking = convention(ctx.profile, doc, "ranking").value["auroc"]
    try:
        if name == "rank":
            value = edge_auroc_rank(scores, truth, ranking)
        else:
            value = edge_auroc_mib(scores, truth, doc["settings"]["grid"], ranking)
    except ValueError as exc:  # no true or no false edge; no false positive at the last k (MIB)
        yield ctx.finding("C126", "/claims/auroc", detail=f"it is undefined on these edges: {exc}")
        return
    yield from compare(
        ctx, "C125", "/claims/auroc/value", auroc["value"], value, convention=name, ranking=ranking
    )


def _auroc_inputs(doc: dict[str, Any], ctx: RuleContext) -> tuple[Any, Any] | str | None:
    """The edge scores and the ground-truth edge mask an AUROC is computed from; a string saying
    what is missing when the report does not declare them; ``None`` when a document they come
    from is reported by the artifact rules."""
    claims = doc["claims"]
    if claims.get("circuit") is None:
        return "the report declares no circuit document (claims.circuit) whose edge scores it ranks"
    document = _circuit_document(doc, ctx)
    truth_document = referenced(ctx, claims["auroc"]["ground_truth"], "circuit")
    if document is None or truth_document is None:
        return None
    if "scores" not in document.data:
        return f"the circuit document {document.path} declares no edge scores"
    if _graph_key(truth_document) != _graph_key(document):
        return (
            f"the ground truth {truth_document.path} and the circuit document {document.path} "
            "describe different graph universes"
        )
    if "membership" not in truth_document.data:
        return f"the ground truth {truth_document.path} declares no membership row (its true edges)"
    scores, truth = document.tensor("scores"), truth_document.tensor("membership")
    if scores is None or truth is None:
        return None  # A110 reports the tensor
    n_edges = edge_total(document.data["graph"])
    if truth.ndim != 2 or truth.shape[0] != 1 or truth.dtype.kind != "b":
        return (
            f"the ground truth {truth_document.path} must hold exactly one membership row (the true "
            f"edge set); it has shape {list(truth.shape)}"
        )
    if scores.ndim != 1 or scores.shape[0] != n_edges or truth.shape[1] != n_edges:
        return f"the edge scores and the ground truth must each cover the graph's {n_edges} edges"
    return scores, truth[0]


def _graph_key(document: Referenced) -> tuple[Any, ...]:
    """What determines a circuit document's graph universe (metrics/graph.md MG-1)."""
    graph = document.data["graph"]
    return (graph["n_layers"], graph["n_heads"], bool(graph.get("parallel_attn_mlp", False)))


def _repeats(
    ctx: RuleContext, base: str, items: list[dict[str, Any]], key: Any, field: str, what: Any
) -> Iterator[Finding]:
    """C116 for every item of ``items`` whose ``key(item)`` an earlier item already had."""
    first: dict[Any, int] = {}
    for i, item in enumerate(items):
        k = key(item)
        if k in first:
            yield ctx.finding("C116", f"{base}/{i}{field}", what=what(item), first=f"{base}/{first[k]}")
        first.setdefault(k, i)


@rule("leaderboard", codes=("C115", "C116"), kinds=("leaderboard",))
def leaderboard(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each row's Average and Score follow from its cells (MC-11); a leaderboard lists a metric
    once per profile, a table a method once, and a row a task × model cell once."""
    from mibspec.metrics.circuit import leaderboard_average, leaderboard_score

    tables = doc["tables"]
    yield from _repeats(
        ctx,
        "/tables",
        tables,
        lambda t: (t["metric"], t.get("profile")),
        "/metric",
        lambda t: f"metric {t['metric']!r}" + (f" under profile {t['profile']!r}" if "profile" in t else ""),
    )
    for t, table in enumerate(tables):
        rows = table["rows"]
        yield from _repeats(
            ctx,
            f"/tables/{t}/rows",
            rows,
            lambda r: r["method"],
            "/method",
            lambda r: f"method {r['method']!r}",
        )
        for r, row in enumerate(rows):
            pointer = f"/tables/{t}/rows/{r}"
            yield from _repeats(
                ctx,
                f"{pointer}/cells",
                row["cells"],
                lambda c: (c["task"], c["model"]),
                "",
                lambda c: f"cell {c['task']} × {c['model']}",
            )
            values = [cell["value"] for cell in row["cells"]]
            yield from compare(
                ctx, "C115", f"{pointer}/average", row["average"], leaderboard_average(values), what="Average"
            )
            yield from compare(
                ctx, "C115", f"{pointer}/score", row["score"], leaderboard_score(values), what="Score"
            )
