"""Causal-variable rules: per-layer, Average and Highest follow from the unit scores (C).
The aggregation comes from ``mibspec.reference_impl``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._engine import RuleContext
from .._findings import Finding
from . import compare, rule


@rule("causal-variable-aggregates", codes=("C112",), kinds=("report",))
def causal_variable_aggregates(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Mean over counterfactual sets per unit, best unit per layer, then Average and Highest."""
    if doc.get("track") != "causal_variable":
        return
    from mibspec.reference_impl.metrics.causal_variable import aggregate_scores

    for v, variable in enumerate(doc["claims"]["variables"]):
        base = f"/claims/variables/{v}"
        table: dict[tuple[str, int, str], float] = {}
        for unit in variable["units"]:
            for cf_set, score in unit["scores"].items():
                table[(cf_set, unit["location"]["layer"], unit["id"])] = score
        try:
            result = aggregate_scores(table, better=variable["better"])
        except ValueError as exc:  # e.g. a unit scored on some counterfactual sets only
            yield ctx.finding(
                "C112",
                f"{base}/units",
                what="unit scores",
                claimed="as listed",
                recomputed=f"undefined ({exc})",
            )
            continue
        for key in ("average", "highest"):
            yield from compare(ctx, "C112", f"{base}/{key}", variable[key], getattr(result, key), what=key)
        claimed_layers = variable.get("per_layer")
        if claimed_layers is None:
            continue
        layers = {str(layer): value for layer, value in result.per_layer.items()}
        if set(claimed_layers) != set(layers):
            yield ctx.finding(
                "C112",
                f"{base}/per_layer",
                what="layers",
                claimed=sorted(claimed_layers, key=int),
                recomputed=sorted(layers, key=int),
            )
            continue
        for layer, value in claimed_layers.items():
            yield from compare(
                ctx, "C112", f"{base}/per_layer/{layer}", value, layers[layer], what=f"layer {layer}"
            )
