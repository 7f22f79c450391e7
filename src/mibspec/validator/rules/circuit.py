"""Circuit-track rules: the k-grid and circuit sizes (family K), and CPR/CMD recomputed
from the claimed curve (family C). The metrics come from ``mibspec.reference_impl``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from mibspec.core.conventions import convention
from mibspec.core.findings import Finding

from .._context import RuleContext
from ._registry import compare, interval, rule


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


@rule("circuit-size", track="circuit", codes=("K103",))
def circuit_size(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """No circuit is larger than its grid point allows (k·|E| weighted, ⌊k·|E|⌋ edges)."""
    if not ctx.profile.check_circuit_size:
        return

    from mibspec.reference_impl.metrics.circuit import edges_at

    n_total = doc["claims"]["n_edges"]
    rounding = convention(ctx.profile, doc, "edge_count_rounding").value
    for c, curve in enumerate(doc["claims"]["curves"]):
        for p, point in enumerate(curve["points"]):
            allowed = edges_at(point["k"], n_total, rounding)
            pointer = f"/claims/curves/{c}/points/{p}"
            if point.get("n_edges", 0) > allowed:
                yield ctx.finding(
                    "K103",
                    f"{pointer}/n_edges",
                    k=point["k"],
                    size=point["n_edges"],
                    allowed=allowed,
                    what="edges",
                )
            # The weighted size is a sum of fractions: compare with a relative margin of 1e-12.
            limit = point["k"] * n_total
            if point["weighted_size"] > limit * (1 + 1e-12):
                yield ctx.finding(
                    "K103",
                    f"{pointer}/weighted_size",
                    k=point["k"],
                    size=point["weighted_size"],
                    allowed=limit,
                    what="weighted edges",
                )


@rule("circuit-points", track="circuit", codes=("K109",))
def circuit_points(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each point that names a circuit names a row its circuit document lists, at the point's
    k and the curve's ranking, with the point's edge count. (Not its weighted size: a report
    may record the public evaluator's size, PR-5, where the document lists the pruned one.)"""
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
    ident = doc["claims"].get("circuit")
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    if artifact is None or ident in ctx.broken_artifacts or artifact.get("kind") != "circuit":
        return None
    try:
        parsed = ctx.load_json(ctx.folder / artifact["path"])
    except OSError:
        return None
    entries = parsed.data.get("circuits") if not parsed.problems and isinstance(parsed.data, dict) else None
    if not isinstance(entries, list):
        return None
    rows: dict[int, dict[str, Any]] = {}
    for entry in entries:
        index = entry.get("index") if isinstance(entry, dict) else None
        if isinstance(index, float) and index.is_integer():  # JSON Schema's integer 3.0
            index = int(index)
        if isinstance(index, int) and not isinstance(index, bool):
            rows[index] = entry
    return artifact["path"], rows


@rule("circuit-areas", track="circuit", codes=("C101", "C102", "C103"))
def circuit_areas(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """CPR and CMD equal the trapezoids of the claimed faithfulness curve of the declared ranking."""
    from mibspec.reference_impl.metrics.circuit import cmd, cpr

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
    from mibspec.reference_impl.metrics.circuit import cmd, cpr

    if metric == "cpr":
        return cpr(ks, [low for low, _ in spans]), cpr(ks, [high for _, high in spans])

    def distance(f: float) -> float:
        return abs(1.0 - f)

    nearest = [1.0 if low <= 1.0 <= high else min((low, high), key=distance) for low, high in spans]
    farthest = [max((low, high), key=distance) for low, high in spans]
    return cmd(ks, nearest), cmd(ks, farthest)


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
    """Each row's Average and Score follow from its cells (MC-11); a table lists a metric
    once, a method once, and a row a task × model cell once."""
    from mibspec.reference_impl.metrics.circuit import leaderboard_average, leaderboard_score

    tables = doc["tables"]
    yield from _repeats(
        ctx, "/tables", tables, lambda t: t["metric"], "/metric", lambda t: f"metric {t['metric']!r}"
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
