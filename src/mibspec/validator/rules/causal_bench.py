"""CAUSAL-BENCH rules: sample counts (family D), p-values (B) and every claim that follows
from the declared component sets alone (C), including the threshold-sensitivity points,
the weight configurations and the scaling study (C113 for how these studies refer to the
report's methods). F, C, COS and the sets themselves need the behaviour model and are
recomputed in the recompute stage. The metrics come from ``mibspec.reference_impl``."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from mibspec.core.conventions import convention
from mibspec.core.findings import Finding
from mibspec.core.pointers import escape_pointer_token

from .._context import RuleContext
from ._registry import compare, interval, rule, with_defaults

_COMPONENT = re.compile(r"L([0-9]{1,18})\.(?:attn_head\[([0-9]{1,18})\]|mlp)")


def _in_universe(component: str, n_layers: int, n_heads: int) -> bool:
    """Whether ``component`` is one of ``component_universe(n_layers, n_heads)``, without
    building that universe (a declared L and H may be arbitrarily large)."""
    return _canonical_key(component, n_layers, n_heads) is not None


def _canonical_key(component: str, n_layers: int, n_heads: int) -> tuple[int, int, int] | None:
    """The position of ``component`` in ``component_universe(n_layers, n_heads)`` as a sort
    key (per layer: heads, then the MLP), or ``None`` when it is not a member; the
    universe is not built."""
    from mibspec.reference_impl.behaviour.planted import component_id

    match = _COMPONENT.fullmatch(component)
    if match is None or int(match.group(1)) >= n_layers:
        return None
    layer, head = int(match.group(1)), match.group(2)
    if head is None:
        return (layer, 1, 0) if component_id("mlp", layer) == component else None
    if int(head) < n_heads and component_id("attn_head", layer, int(head)) == component:
        return (layer, 0, int(head))
    return None


@rule("causal-bench-samples", track="causal_bench", codes=("D101", "D102", "D103"))
def causal_bench_samples(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Enough distinct seed runs for stability, and enough permutations for the convergence test."""
    minimum = ctx.profile.min_stability_runs
    for m, method in enumerate(doc["claims"]["methods"]):
        runs = method["runs"]
        if len(runs) < minimum:
            yield ctx.finding(
                "D101",
                f"/claims/methods/{m}/runs",
                method=method["name"],
                runs=len(runs),
                minimum=minimum,
                profile_name=ctx.profile.name,
            )
        seen: dict[int, int] = {}
        for r, run in enumerate(runs):
            if run["seed"] in seen:
                yield ctx.finding(
                    "D102",
                    f"/claims/methods/{m}/runs/{r}/seed",
                    seed=run["seed"],
                    first=f"/claims/methods/{m}/runs/{seen[run['seed']]}/seed",
                )
            seen.setdefault(run["seed"], r)
    least = ctx.profile.min_permutations
    pointers = [("/settings/n_permutations", doc["settings"]["n_permutations"])]
    for base, conv in _convergences(doc):
        pointers.append((f"{base}/n_permutations", conv["n_permutations"]))
    for pointer, count in pointers:
        if count < least:
            yield ctx.finding("D103", pointer, count=count, minimum=least, profile_name=ctx.profile.name)


@rule("causal-bench-declarations", track="causal_bench", codes=("C123",))
def causal_bench_declarations(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Every method carries the set its COS reduction left (metrics/causal_bench.md MB-8, MB-16)."""
    for m, method in enumerate(doc["claims"]["methods"]):
        if method.get("reduced") is None:
            yield ctx.finding("C123", f"/claims/methods/{m}", method=method["name"])


@rule("causal-bench-sets", track="causal_bench", codes=("C104", "C105", "C106", "C108", "C109", "C114"))
def causal_bench_sets(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Composite, P/R/F1, M, S, Jaccard matrix, consensus and majority follow from the declared sets."""
    universe = doc["universe"]
    repeated = list(_repeated_components(universe, ctx))
    yield from repeated
    if repeated:
        return  # the set metrics index the universe: undefined when it repeats a component
    unknown = list(_unknown_components(doc, set(universe)))
    for pointer, component in unknown:
        yield ctx.finding("C109", pointer, component=component)
    if unknown:
        return  # the set metrics are undefined over components outside the universe
    yield from _set_metrics(doc, ctx)
    yield from _weight_robustness(doc["claims"], ctx)
    yield from _scaling_sets(doc["claims"], ctx)
    yield from _consensus_and_majority(doc, ctx)
    if "jaccard" in doc["claims"]:
        yield from _jaccard(doc["claims"], ctx)


def _repeated_components(universe: list[str], ctx: RuleContext) -> Iterator[Finding]:
    """A component the universe lists more than once (C114), pointing at its first listing."""
    first: dict[str, int] = {}
    for index, component in enumerate(universe):
        if component in first:
            yield ctx.finding(
                "C114", f"/universe/{index}", component=component, first=f"/universe/{first[component]}"
            )
        first.setdefault(component, index)


def _set_metrics(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Composite, M, S and P/R/F1 of every method and of every threshold-sensitivity point."""
    from mibspec.metrics import causal_bench as cb

    universe, claims = doc["universe"], doc["claims"]
    truth = doc.get("ground_truth")
    weights = doc["settings"]["weights"]
    for m, method in enumerate(claims["methods"]):
        base, metrics = f"/claims/methods/{m}/metrics", method["metrics"]
        yield from _composite(ctx, f"{base}/composite", metrics, weights, "composite")
        minimality = cb.minimality(set(method["components"]), universe)
        yield from compare(ctx, "C106", f"{base}/M", metrics["M"], minimality, metric="M")
        runs = [set(run["components"]) for run in method["runs"]]
        yield from compare(ctx, "C106", f"{base}/S", metrics["S"], cb.stability(runs), metric="S")
        yield from _prf(ctx, base, metrics, method["components"], truth)
    sensitivity = claims.get("threshold_sensitivity")
    for p, point in enumerate(sensitivity["points"] if sensitivity else []):
        base, metrics = f"/claims/threshold_sensitivity/points/{p}/metrics", point["metrics"]
        yield from _composite(ctx, f"{base}/composite", metrics, weights, "composite")
        minimality = cb.minimality(set(point["components"]), universe)
        yield from compare(ctx, "C106", f"{base}/M", metrics["M"], minimality, metric="M")
        yield from _prf(ctx, base, metrics, point["components"], truth)


def _weight_robustness(claims: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each weight configuration's composites follow from the methods' parts under its weights."""
    parts_of = {method["name"]: method["metrics"] for method in claims["methods"]}
    names_index = {method["name"]: m for m, method in enumerate(claims["methods"])}
    for s, scenario in enumerate(claims.get("weight_robustness") or []):
        for name, value in scenario["composites"].items():
            if name in parts_of:
                yield from _composite(
                    ctx,
                    f"/claims/weight_robustness/{s}/composites/{escape_pointer_token(name)}",
                    {**parts_of[name], "composite": value},
                    scenario["weights"],
                    f"composite of {name} under {scenario['name']!r}",
                    parts_at=f"/claims/methods/{names_index[name]}/metrics",
                )


def _scaling_sets(claims: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The scaling study's sets lie in their model's universe and their P/R/F1 follow from them."""
    from mibspec.reference_impl.behaviour.planted import default_planted

    for c, config in enumerate(claims.get("scaling") or []):
        size = (config["n_layers"], config["n_heads"])
        scaled_truth = default_planted(*size)
        for e, entry in enumerate(config["methods"]):
            base = f"/claims/scaling/{c}/methods/{e}"
            outside = [(i, x) for i, x in enumerate(entry["components"]) if not _in_universe(x, *size)]
            for i, component in outside:
                yield ctx.finding("C109", f"{base}/components/{i}", component=component)
            if not outside:
                yield from _prf(ctx, base, entry, entry["components"], scaled_truth)


def _consensus_and_majority(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The claimed consensus and majority sets follow from the methods' sets (C108)."""
    from mibspec.metrics import causal_bench as cb

    claims = doc["claims"]
    method_sets = [set(method["components"]) for method in claims["methods"]]
    order = {component: index for index, component in enumerate(doc["universe"])}
    for key, compute in (("consensus", cb.consensus_set), ("majority", cb.majority_set)):
        if key in claims:
            expected = sorted(compute(method_sets), key=order.__getitem__)
            if set(claims[key]) != set(expected):
                yield ctx.finding(
                    "C108", f"/claims/{key}", what=key, claimed=claims[key], recomputed=expected
                )


def _jaccard(claims: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The Jaccard matrix names the report's methods in order and follows from their sets (C108)."""
    from mibspec.metrics import causal_bench as cb

    names = [method["name"] for method in claims["methods"]]
    jaccard = claims["jaccard"]
    if jaccard["methods"] != names:
        yield ctx.finding(
            "C108",
            "/claims/jaccard/methods",
            what="Jaccard matrix methods",
            claimed=jaccard["methods"],
            recomputed=names,
        )
        return
    expected_matrix = cb.jaccard_matrix([set(method["components"]) for method in claims["methods"]])
    for i, row in enumerate(jaccard["matrix"]):
        for j, value in enumerate(row):
            pointer = f"/claims/jaccard/matrix/{i}/{j}"
            if i >= len(names) or j >= len(names):
                yield ctx.finding(
                    "C108", pointer, what="Jaccard matrix", claimed=value, recomputed="no such method pair"
                )
            else:
                yield from compare(
                    ctx, "C108", pointer, value, float(expected_matrix[i, j]), metric="Jaccard"
                )


def _composite(
    ctx: RuleContext,
    pointer: str,
    metrics: dict[str, Any],
    weights: dict[str, float],
    label: str,
    parts_at: str | None = None,
) -> Iterator[Finding]:
    """The composite is the weighted harmonic mean of the parts, and is omitted exactly when a
    weighted part is negative (the mean is then undefined, MB-9). ``parts_at``: the object
    holding the parts (default: the composite's)."""
    from mibspec.metrics import causal_bench as cb

    parts = {key: metrics[key] for key in weights}
    negative = sorted(key for key, value in parts.items() if value < 0)
    if "composite" in metrics:
        if negative:
            yield ctx.finding(
                "C104",
                pointer,
                metric=label,
                claimed=metrics["composite"],
                recomputed=f"undefined ({', '.join(negative)} negative)",
            )
        else:
            yield from compare(
                ctx,
                "C104",
                pointer,
                metrics["composite"],
                cb.composite(parts, weights),
                bounds=_composite_bounds(ctx, parts_at or pointer.rsplit("/", 1)[0], parts, weights),
                metric=label,
            )
    elif not negative:
        value = cb.composite(parts, weights)
        yield ctx.finding(
            "C104",
            pointer.rsplit("/", 1)[0],
            metric=label,
            claimed="absent",
            recomputed=value,
            data={"recomputed": value},
        )


def _composite_bounds(
    ctx: RuleContext, base: str, parts: dict[str, float], weights: dict[str, float]
) -> tuple[float, float]:
    """The least and greatest composite over the parts' rounding intervals (C-10): the weighted
    harmonic mean increases with every part, so the corners of the box bound it."""
    from mibspec.metrics import causal_bench as cb

    lows, highs = {}, {}
    for key, value in parts.items():
        low, high = interval(ctx, f"{base}/{key}", value)
        lows[key], highs[key] = max(low, 0.0), max(high, 0.0)
    return cb.composite(lows, weights), cb.composite(highs, weights)


def _prf(
    ctx: RuleContext, base: str, metrics: dict[str, Any], components: list[str], truth: Any
) -> Iterator[Finding]:
    """Claimed precision, recall and F1 follow from the set and the ground truth (C105)."""
    from mibspec.metrics import causal_bench as cb

    claimed_prf = [(key, metrics[key]) for key in ("precision", "recall", "f1") if key in metrics]
    if claimed_prf and truth is None:
        yield ctx.finding(
            "C105",
            f"{base}/{claimed_prf[0][0]}",
            metric=claimed_prf[0][0],
            claimed=claimed_prf[0][1],
            recomputed="undefined (no ground_truth is declared)",
        )
    elif truth is not None:
        p, r, f1 = cb.precision_recall_f1(set(components), set(truth))
        for key, value in (("precision", p), ("recall", r), ("f1", f1)):
            if key in metrics:
                yield from compare(ctx, "C105", f"{base}/{key}", metrics[key], value, metric=key)


def _convergences(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every convergence block: the report's and each scaling configuration's."""
    claims = doc["claims"]
    if claims.get("convergence"):
        yield "/claims/convergence", claims["convergence"]
    for c, config in enumerate(claims.get("scaling") or []):
        if config.get("convergence"):
            yield f"/claims/scaling/{c}/convergence", config["convergence"]


def _component_sets(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Every component set of the report's universe, with its pointer."""
    claims = doc["claims"]
    candidates: list[tuple[str, list[str]]] = [("/ground_truth", doc.get("ground_truth") or [])]
    for m, method in enumerate(claims["methods"]):
        candidates.append((f"/claims/methods/{m}/components", method["components"]))
        candidates.append((f"/claims/methods/{m}/reduced", method.get("reduced") or []))
        for r, run in enumerate(method["runs"]):
            candidates.append((f"/claims/methods/{m}/runs/{r}/components", run["components"]))
    for key in ("consensus", "majority"):
        candidates.append((f"/claims/{key}", claims.get(key) or []))
    sensitivity = claims.get("threshold_sensitivity")
    for p, point in enumerate(sensitivity["points"] if sensitivity else []):
        candidates.append((f"/claims/threshold_sensitivity/points/{p}/components", point["components"]))
    return candidates


def _unknown_components(doc: dict[str, Any], known: set[str]) -> Iterator[tuple[str, str]]:
    for pointer, components in _component_sets(doc):
        for index, component in enumerate(components):
            if component not in known:
                yield f"{pointer}/{index}", component


@rule("causal-bench-set-order", track="causal_bench", codes=("C124",))
def causal_bench_set_order(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Each set lists its members once and in the universe's canonical order (MB-1)."""
    position = {component: i for i, component in enumerate(doc["universe"])}
    if len(position) != len(doc["universe"]):
        return  # C114: the canonical order is undefined
    for pointer, components in _component_sets(doc):
        yield from _out_of_order(ctx, pointer, components, position.get)
    for c, config in enumerate(doc["claims"].get("scaling") or []):  # each in its model's universe

        def canonical(component: str, config: dict[str, Any] = config) -> tuple[int, int, int] | None:
            return _canonical_key(component, config["n_layers"], config["n_heads"])

        for e, method in enumerate(config["methods"]):
            pointer = f"/claims/scaling/{c}/methods/{e}/components"
            yield from _out_of_order(ctx, pointer, method["components"], canonical)


def _out_of_order(
    ctx: RuleContext, pointer: str, components: list[str], key: Callable[[str], Any]
) -> Iterator[Finding]:
    """C124 at the first member of ``components`` that repeats or precedes an earlier one
    under ``key`` (a member's canonical position; ``None`` outside the universe, C109)."""
    previous = None
    for index, component in enumerate(components):
        at = key(component)
        if at is None:
            continue  # C109
        if previous is not None and at <= previous:  # one finding: after it the order has no reference
            repeated = component in components[:index]
            detail = "repeats an earlier member" if repeated else "comes before an earlier member"
            yield ctx.finding("C124", f"{pointer}/{index}", component=component, detail=detail)
            return
        previous = at


@rule("causal-bench-convergence", track="causal_bench", codes=("B101", "C107"))
def causal_bench_convergence(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The convergence statistics agree with the sets, with each other and with B (the report's
    test and each scaling configuration's)."""
    settings = with_defaults(ctx, doc["settings"], "CausalBenchSettings")
    for base, conv in _convergences(doc):
        if base == "/claims/convergence":
            method_sets = [set(method["components"]) for method in doc["claims"]["methods"]]
            universe = set(doc["universe"])
            inside = set().union(*method_sets) <= universe
        else:
            config = doc["claims"]["scaling"][int(base.split("/")[3])]
            method_sets = [set(method["components"]) for method in config["methods"]]
            size = (config["n_layers"], config["n_heads"])
            inside = all(_in_universe(x, *size) for x in set().union(*method_sets))
        yield from _convergence(ctx, base, conv, method_sets, inside, settings)


def _convergence(
    ctx: RuleContext,
    base: str,
    conv: dict[str, Any],
    method_sets: list[set[str]],
    inside: bool,
    settings: dict[str, Any],
) -> Iterator[Finding]:
    from mibspec.metrics import causal_bench as cb

    if conv["n_permutations"] != settings["n_permutations"]:
        yield ctx.finding(
            "C107",
            f"{base}/n_permutations",
            statistic="B",
            claimed=conv["n_permutations"],
            recomputed=settings["n_permutations"],
        )
    if len(method_sets) >= 2 and inside:
        j_obs = cb.stability(method_sets)  # the mean pairwise Jaccard over methods
        yield from compare(ctx, "C107", f"{base}/j_obs", conv["j_obs"], j_obs, statistic="J_obs")
    if "z" in conv and conv["null_std"] > 0:
        z = (conv["j_obs"] - conv["null_mean"]) / conv["null_std"]
        yield from compare(
            ctx, "C107", f"{base}/z", conv["z"], z, bounds=_z_bounds(ctx, base, conv), statistic="z"
        )
    # A permutation p-value is a count over B draws: (count + 1)/(B + 1) or count/B; a
    # rounded p stands for every count whose p rounds to it (C-10).
    b, p = conv["n_permutations"], conv["p"]
    plus_one = convention(ctx.profile, ctx.data, "p_convention").value == "plus_one"
    denominator = b + 1 if plus_one else b
    offset = 1 if plus_one else 0
    low, high = interval(ctx, f"{base}/p", p)
    least = max(math.ceil(low * denominator - offset - 1e-6), 0)
    most = min(math.floor(high * denominator - offset + 1e-6), b)
    if least > most:
        form = "(count + 1)/(B + 1)" if plus_one else "count/B"
        yield ctx.finding("B101", f"{base}/p", p=p, form=form, b=b)


def _z_bounds(ctx: RuleContext, base: str, conv: dict[str, Any]) -> tuple[float, float]:
    """The least and greatest z = (J_obs − μ)/σ over the rounding intervals of its inputs (C-10):
    z is monotone in each input while σ > 0, so the corners bound it; unbounded when the
    interval of σ reaches 0."""
    j_low, j_high = interval(ctx, f"{base}/j_obs", conv["j_obs"])
    m_low, m_high = interval(ctx, f"{base}/null_mean", conv["null_mean"])
    s_low, s_high = interval(ctx, f"{base}/null_std", conv["null_std"])
    if s_low <= 0:
        return -math.inf, math.inf
    corners = [(j - m) / s for j in (j_low, j_high) for m in (m_low, m_high) for s in (s_low, s_high)]
    return min(corners), max(corners)


@rule("causal-bench-studies", track="causal_bench", codes=("C113",))
def causal_bench_studies(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Threshold sensitivity, weight configurations and scaling study refer to the report's methods."""
    from mibspec.reference_impl.behaviour.study import ranking

    claims = doc["claims"]
    methods = {method["name"]: method for method in claims["methods"]}
    names = list(methods)
    sensitivity = claims.get("threshold_sensitivity")
    if sensitivity is not None:
        method = methods.get(sensitivity["method"])
        procedure = (method or {}).get("procedure")
        if method is None:
            yield ctx.finding(
                "C113",
                "/claims/threshold_sensitivity/method",
                what="threshold sensitivity",
                detail=f"no method is named {sensitivity['method']!r}; the methods are {names}",
            )
        elif procedure is not None and procedure["kind"] == "circuit_discovery":
            yield ctx.finding(
                "C113",
                "/claims/threshold_sensitivity/method",
                what="threshold sensitivity",
                detail=f"{sensitivity['method']!r} is circuit discovery, which thresholds no score",
            )
    for s, scenario in enumerate(claims.get("weight_robustness") or []):
        base = f"/claims/weight_robustness/{s}"
        defined = [
            name for name in names if all(methods[name]["metrics"][key] >= 0 for key in scenario["weights"])
        ]
        if sorted(scenario["composites"]) != sorted(defined):
            yield ctx.finding(
                "C113",
                f"{base}/composites",
                what=f"weight configuration {scenario['name']!r}",
                detail=f"composites are given for {sorted(scenario['composites'])}; the methods with a "
                f"defined composite are {sorted(defined)}",
            )
            continue
        expected = ranking(scenario["composites"], defined)
        if scenario["ranking"] != expected:
            yield ctx.finding(
                "C113",
                f"{base}/ranking",
                what=f"weight configuration {scenario['name']!r}",
                detail=f"ranking claimed {scenario['ranking']}, the composites give {expected}",
            )
    scaling = claims.get("scaling")
    if scaling and doc["behaviour"]["kind"] != "planted":
        yield ctx.finding(
            "C113",
            "/claims/scaling",
            what="scaling study",
            detail="the scaling study varies the planted model (MB-20); the behaviour is "
            f"{doc['behaviour']['kind']!r}",
        )
    for c, config in enumerate(scaling or []):
        for e, entry in enumerate(config["methods"]):
            if entry["name"] not in methods:
                yield ctx.finding(
                    "C113",
                    f"/claims/scaling/{c}/methods/{e}/name",
                    what="scaling study",
                    detail=f"no method is named {entry['name']!r}; the methods are {names}",
                )
