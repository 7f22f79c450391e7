"""The claims of a report as HTML tables for ``mibspec html``: one function per track, of the
report's ``claims`` object (each track's descriptor names its function, ``claims_table``
in :mod:`mibspec.core.tracks`). A claims object without the shape of its schema raises
``KeyError``, ``TypeError``, ``AttributeError`` or ``ValueError``; the page then shows the
claims as written."""

from __future__ import annotations

from typing import Any

from ._markup import claim_label, escape, html_table

__all__ = ["causal_bench_claims", "causal_variable_claims", "circuit_claims", "saliency_claims"]


def circuit_claims(claims: dict[str, Any]) -> str:
    """CPR, CMD, the model's full and empty metric, the AUROC, and each curve's points."""
    rows = [
        (claim_label("circuit", pointer), value)
        for pointer, value in (
            ("/claims/cpr/value", claims["cpr"]["value"]),
            ("/claims/cmd/value", claims["cmd"]["value"]),
            ("/claims/n_edges", claims["n_edges"]),
            ("/claims/m_full", claims.get("m_full")),
            ("/claims/m_empty", claims.get("m_empty")),
        )
    ]
    if claims.get("auroc"):
        label = claim_label("circuit", "/claims/auroc/value")
        rows.append((f"{label} ({claims['auroc']['convention']})", claims["auroc"]["value"]))
    out = [html_table(("quantity", "value"), [(escape(k), v) for k, v in rows], numeric=(False, True))]
    fields = ("k", "n_edges", "weighted_size", "faithfulness")
    headers = [claim_label("circuit", f"/claims/curves/0/points/0/{name}") for name in fields]
    for curve in claims["curves"]:
        points = [tuple(p.get(name) for name in fields) for p in curve["points"]]
        out.append(f"<h3>Curve, {escape(curve['ranking'])} ranking</h3>")
        out.append(html_table(headers, points, numeric=(True,) * 4))
    return "".join(out)


def causal_variable_claims(claims: dict[str, Any]) -> str:
    """Per variable: its Average, best and per-layer scores, and every unit's score per dataset."""
    out = []
    for variable in claims["variables"]:
        metric, better = variable["metric"].upper(), variable["better"]
        out.append(f"<h3>{escape(variable['name'])}: {escape(metric)} ({escape(better)} is better)</h3>")
        best = variable["best"] if "best" in variable else variable["highest"]  # spec 1.0: highest
        base = "/claims/variables/0"
        rows = [(claim_label("causal_variable", f"{base}/average"), variable["average"])]
        rows.append((claim_label("causal_variable", f"{base}/best"), best))
        per_layer = claim_label("causal_variable", f"{base}/per_layer/0")
        rows += [
            (f"{per_layer}, layer {layer}", value)
            for layer, value in (variable.get("per_layer") or {}).items()
        ]
        out.append(
            html_table(("aggregate", "value"), [(escape(k), v) for k, v in rows], numeric=(False, True))
        )
        datasets = sorted({name for unit in variable["units"] for name in unit["scores"]})
        unit_rows = [
            (escape(unit["id"]), *(unit["scores"].get(name) for name in datasets))
            for unit in variable["units"]
        ]
        out.append(html_table(("unit", *datasets), unit_rows, numeric=(False, *(True,) * len(datasets))))
    return "".join(out)


def causal_bench_claims(claims: dict[str, Any]) -> str:
    """Per method: its set size and metrics; the convergence test; the consensus and majority sets."""
    names = ("F", "C", "M", "S", "COS", "composite", "precision", "recall", "f1")
    headers = [claim_label("causal_bench", f"/claims/methods/0/metrics/{n}") for n in names]
    rows = [
        (escape(m["name"]), len(m["components"]), *(m["metrics"].get(n) for n in names))
        for m in claims["methods"]
    ]
    out = [html_table(("method", "|set|", *headers), rows, numeric=(False, *(True,) * (len(names) + 1)))]
    conv = claims.get("convergence")
    if conv:
        keys = ("j_obs", "null_mean", "null_std", "z", "p", "n_permutations", "seed")
        labels = [claim_label("causal_bench", f"/claims/convergence/{k}") for k in keys]
        out.append("<h3>Convergence test</h3>")
        out.append(html_table(labels, [tuple(conv.get(k) for k in keys)], numeric=(True,) * len(keys)))
    for key in ("consensus", "majority"):
        if claims.get(key) is not None:
            out.append(f"<p>{escape(key)}: {escape(', '.join(claims[key]) or '(empty)')}</p>")
    return "".join(out)


def saliency_claims(claims: dict[str, Any]) -> str:
    """The accuracies and dominance counts, and per method its hit accuracy, WIoU and curve areas."""
    dominance = claims["dominance"]
    rows = [
        (claim_label("saliency", pointer), value)
        for pointer, value in (
            ("/claims/clean_accuracy", claims.get("clean_accuracy")),
            ("/claims/perturbed_accuracy", claims.get("perturbed_accuracy")),
            ("/claims/dominance/n_images", dominance["n_images"]),
            ("/claims/dominance/n_dominant", dominance["n_dominant"]),
            ("/claims/dominance/rate", dominance["rate"]),
        )
    ]
    out = [html_table(("quantity", "value"), [(escape(k), v) for k, v in rows], numeric=(False, True))]
    keys = ("hit_accuracy", "wiou", "deletion_auc", "addition_auc")
    headers = [claim_label("saliency", f"/claims/methods/0/{k}") for k in keys]
    method_rows = [(escape(m["name"]), *(m.get(k) for k in keys)) for m in claims["methods"]]
    out.append(html_table(("method", *headers), method_rows, numeric=(False, True, True, True, True)))
    return "".join(out)
