"""CAUSAL-BENCH rules: sample counts (family D), p-values (B) and every claim that follows
from the declared component sets alone (C). F, C and COS need the behaviour model and
are recomputed in the recompute stage. The metrics come from ``mibspec.reference_impl``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from .._engine import RuleContext
from .._findings import Finding
from . import compare, rule, with_defaults


def _causal_bench(doc: dict[str, Any]) -> bool:
    return doc.get("track") == "causal_bench"


@rule("causal-bench-samples", codes=("D101", "D102", "D103"), kinds=("report",))
def causal_bench_samples(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Enough distinct seed runs for stability, and enough permutations for the convergence test."""
    if not _causal_bench(doc):
        return
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
    if doc["claims"].get("convergence"):
        pointers.append(
            ("/claims/convergence/n_permutations", doc["claims"]["convergence"]["n_permutations"])
        )
    for pointer, count in pointers:
        if count < least:
            yield ctx.finding("D103", pointer, count=count, minimum=least, profile_name=ctx.profile.name)


@rule("causal-bench-sets", codes=("C104", "C105", "C106", "C108", "C109"), kinds=("report",))
def causal_bench_sets(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Composite, P/R/F1, M, S, Jaccard matrix, consensus and majority follow from the declared sets."""
    if not _causal_bench(doc):
        return
    from mibspec.reference_impl.metrics import causal_bench as cb

    universe = doc["universe"]
    known = set(universe)
    claims = doc["claims"]
    unknown = list(_unknown_components(doc, known))
    for pointer, component in unknown:
        yield ctx.finding("C109", pointer, component=component)
    if unknown:
        return  # the set metrics are undefined over components outside the universe

    def check(code: str, pointer: str, name: str, claimed: float, recomputed: float) -> Iterator[Finding]:
        return compare(ctx, code, pointer, claimed, recomputed, metric=name)

    truth = doc.get("ground_truth")
    weights = doc["settings"]["weights"]
    for m, method in enumerate(claims["methods"]):
        base, metrics = f"/claims/methods/{m}/metrics", method["metrics"]
        parts = {key: metrics[key] for key in weights}
        try:
            composite = cb.composite(parts, weights)
        except ValueError as exc:  # e.g. a negative part: the harmonic mean is undefined
            yield ctx.finding(
                "C104",
                f"{base}/composite",
                metric="composite",
                claimed=metrics["composite"],
                recomputed=f"undefined ({exc})",
            )
        else:
            yield from check("C104", f"{base}/composite", "composite", metrics["composite"], composite)
        yield from check(
            "C106", f"{base}/M", "M", metrics["M"], cb.minimality(set(method["components"]), universe)
        )
        runs = [set(run["components"]) for run in method["runs"]]
        yield from check("C106", f"{base}/S", "S", metrics["S"], cb.stability(runs))
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
            p, r, f1 = cb.precision_recall_f1(set(method["components"]), set(truth))
            for key, value in (("precision", p), ("recall", r), ("f1", f1)):
                if key in metrics:
                    yield from check("C105", f"{base}/{key}", key, metrics[key], value)
    method_sets = [set(method["components"]) for method in claims["methods"]]
    order = {component: index for index, component in enumerate(universe)}
    for key, compute in (("consensus", cb.consensus_set), ("majority", cb.majority_set)):
        if key in claims:
            expected = sorted(compute(method_sets), key=order.__getitem__)
            if set(claims[key]) != set(expected):
                yield ctx.finding(
                    "C108", f"/claims/{key}", what=key, claimed=claims[key], recomputed=expected
                )
    if "jaccard" in claims:
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
        else:
            expected_matrix = cb.jaccard_matrix(method_sets)
            for i, row in enumerate(jaccard["matrix"]):
                for j, value in enumerate(row):
                    if i >= len(names) or j >= len(names):
                        yield ctx.finding(
                            "C108",
                            f"/claims/jaccard/matrix/{i}/{j}",
                            what="Jaccard matrix",
                            claimed=value,
                            recomputed="no such method pair",
                        )
                    else:
                        yield from check(
                            "C108",
                            f"/claims/jaccard/matrix/{i}/{j}",
                            "Jaccard",
                            value,
                            float(expected_matrix[i, j]),
                        )


def _unknown_components(doc: dict[str, Any], known: set[str]) -> Iterator[tuple[str, str]]:
    claims = doc["claims"]
    candidates: list[tuple[str, list[str]]] = [("/ground_truth", doc.get("ground_truth") or [])]
    for m, method in enumerate(claims["methods"]):
        candidates.append((f"/claims/methods/{m}/components", method["components"]))
        candidates.append((f"/claims/methods/{m}/reduced", method.get("reduced") or []))
        for r, run in enumerate(method["runs"]):
            candidates.append((f"/claims/methods/{m}/runs/{r}/components", run["components"]))
    for key in ("consensus", "majority"):
        candidates.append((f"/claims/{key}", claims.get(key) or []))
    for pointer, components in candidates:
        for index, component in enumerate(components):
            if component not in known:
                yield f"{pointer}/{index}", component


@rule("causal-bench-convergence", codes=("B101", "C107"), kinds=("report",))
def causal_bench_convergence(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The convergence statistics agree with the sets, with each other and with B."""
    if not _causal_bench(doc) or not doc["claims"].get("convergence"):
        return
    from mibspec.reference_impl.metrics import causal_bench as cb

    conv, settings = doc["claims"]["convergence"], with_defaults(ctx, doc["settings"], "CausalBenchSettings")
    base = "/claims/convergence"
    if conv["n_permutations"] != settings["n_permutations"]:
        yield ctx.finding(
            "C107",
            f"{base}/n_permutations",
            statistic="B",
            claimed=conv["n_permutations"],
            recomputed=settings["n_permutations"],
        )
    method_sets = [set(method["components"]) for method in doc["claims"]["methods"]]
    if len(method_sets) >= 2 and set().union(*method_sets) <= set(doc["universe"]):
        j_obs = cb.stability(method_sets)  # the mean pairwise Jaccard over methods
        yield from compare(ctx, "C107", f"{base}/j_obs", conv["j_obs"], j_obs, statistic="J_obs")
    if "z" in conv and conv["null_std"] > 0:
        z = (conv["j_obs"] - conv["null_mean"]) / conv["null_std"]
        yield from compare(ctx, "C107", f"{base}/z", conv["z"], z, statistic="z")
    # A permutation p-value is a count over B draws: (count + 1)/(B + 1) or count/B.
    b, p = conv["n_permutations"], conv["p"]
    plus_one = settings["p_convention"] == "plus_one"
    denominator = b + 1 if plus_one else b
    count = p * denominator - (1 if plus_one else 0)
    nearest = round(count)
    if not (math.isclose(count, nearest, abs_tol=1e-6) and 0 <= nearest <= b):
        form = "(count + 1)/(B + 1)" if plus_one else "count/B"
        yield ctx.finding("B101", f"{base}/p", p=p, form=form, b=b)
