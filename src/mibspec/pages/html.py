"""``mibspec html``: one self-contained HTML page summarising a verified report.

The page holds the verdict, every verified document's stages and findings, the
report's claims, the claimed-vs-recomputed table when the recompute stage ran, and
the track's figures (:mod:`mibspec.pages.figures`) as base64 PNG ``data:`` URIs. It loads
nothing from anywhere else: no scripts, fonts, style sheets or links. The same inputs
give the same bytes (no timestamps; the figures are deterministic).
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.claims import claim_catalogue
from mibspec.core.display import visible
from mibspec.core.version import __version__
from mibspec.validator import DocumentResult, VerificationResult

__all__ = ["HtmlPage", "build_html_page", "render_html"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.verdict { display: inline-block; padding: 0.2em 0.7em; border-radius: 0.3em; font-weight: bold; }
.verdict { color: #fff; }
.pass { background: #2a7d2a; } .fail { background: #b22222; }
.error { color: #b22222; font-weight: bold; } .warning { color: #a66b00; } .info { color: #1f5f9f; }
.passed { color: #2a7d2a; } .failed { color: #b22222; font-weight: bold; } .skipped, .not_run { color: #777; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; max-width: 60em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
"""


@dataclass
class HtmlPage:
    """What the page shows: the verification result, the report and its figures."""

    result: VerificationResult
    report_path: str
    report: dict[str, Any] | None
    figures: list[Any] = field(default_factory=list)
    skipped: list[Any] = field(default_factory=list)


def build_html_page(
    result: VerificationResult,
    report_path: str | os.PathLike[str],
    *,
    figures: bool = True,
    k_axis: str = "log",
) -> HtmlPage:
    """Read the report behind ``result`` and draw its figures.

    Args:
        result: the verification of ``report_path`` (its first document is the report).
        report_path: the report file.
        figures: draw the figures (needs matplotlib, the ``plots`` extra).
        k_axis: ``"log"`` or ``"linear"`` k axis of the faithfulness figure.

    Raises:
        ModuleNotFoundError: figures requested and matplotlib is not installed.
    """
    path = Path(report_path)
    report = _parsed_report(result, path)
    page = HtmlPage(result=result, report_path=str(report_path), report=report)
    if figures and report is not None:
        from mibspec.pages.figures import Skipped, render_figures

        main = result.documents[0] if result.documents else None
        if main is not None and _schema_passed(main):
            page.figures, page.skipped = render_figures(report, path.parent, k_axis=k_axis)  # type: ignore[arg-type]
        else:
            page.skipped = [Skipped("figures", "the report did not pass the schema stage")]
    return page


def _schema_passed(doc: DocumentResult) -> bool:
    from mibspec.validator import Stage, StageStatus

    return doc.stages[Stage.SCHEMA][0] is StageStatus.PASSED


def _parsed_report(result: VerificationResult, path: Path) -> dict[str, Any] | None:
    """The report as a dict, when it parsed (the verifier already read it strictly)."""
    from mibspec.validator import Stage, StageStatus

    if not result.documents or result.documents[0].stages[Stage.PARSE][0] is not StageStatus.PASSED:
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


# --------------------------------------------------------------------------- rendering


def _e(value: Any) -> str:
    return html.escape(visible(str(value)), quote=True)


def _lines(text: str) -> str:
    """Text of several lines, each escaped on its own (the line breaks are kept)."""
    return "\n".join(_e(line) for line in text.split("\n"))


def _num(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e("–" if value is None else value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return _e(value)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[bool] = ()) -> str:
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            if i < len(numeric) and numeric[i]:
                out.append(f'<td class="num">{_num(cell)}</td>')
            else:
                out.append(f"<td>{cell}</td>")  # already escaped by the caller
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def render_html(page: HtmlPage) -> str:
    """The page as one HTML document (UTF-8 text)."""
    result, report = page.result, page.report
    title = (report or {}).get("title") or page.report_path
    verdict = "conformant" if result.valid else "not conformant"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)} — mibspec</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p><span class="verdict {"pass" if result.valid else "fail"}">{_e(verdict)}</span> '
        f"{_e(page.report_path)} — checked with mibspec {_e(__version__)} against spec "
        f"{_e(result.spec_version)}{_profile_note(result)}</p>",
    ]
    if report is not None:
        parts.append(_summary(report))
    parts.append(_documents(result))
    parts.append(_stamps(result))
    parts.append(_findings(result))
    if report is not None:
        parts.append(_claims(report))
    parts.append(_comparisons(result))
    parts.append(_figures(page))
    if report is not None:
        claims = json.dumps(report.get("claims"), indent=2, ensure_ascii=False)
        parts.append(
            "<h2>Claims as written</h2><details><summary>claims</summary>"
            f"<pre>{_lines(claims)}</pre></details>"
        )
    parts.append(f"<p><small>mibspec {_e(__version__)}, spec {_e(result.spec_version)}</small></p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _profile_note(result: VerificationResult) -> str:
    return f" under profile {_e(result.profile)}" if result.profile else ""


def _model_label(model: Any) -> str:
    if not isinstance(model, dict):
        return "–"
    source = model.get("source")
    if source == "hub":
        revision = model.get("revision")
        return f"{model.get('id')} (hub{', ' + str(revision)[:12] if revision else ', unpinned'})"
    if source == "local":
        return f"{model.get('path')} (local)"
    return f"{model.get('architecture')} ({source})"


def _summary(report: dict[str, Any]) -> str:
    method: dict[str, Any] = report["method"] if isinstance(report.get("method"), dict) else {}
    task: dict[str, Any] = report["task"] if isinstance(report.get("task"), dict) else {}
    rows = [
        ("track", report.get("track")),
        ("method", " ".join(str(x) for x in (method.get("name"), method.get("version")) if x)),
        ("task", task.get("name")),
        ("split", task.get("split")),
        ("model", _model_label(report.get("model")) if "model" in report else None),
        ("profile", report.get("profile", "default")),
    ]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows if v)
    description = report.get("description")
    text = f"<p>{_e(description)}</p>" if description else ""
    return f"<h2>Report</h2><table>{body}</table>{text}"


def _documents(result: VerificationResult) -> str:
    rows = []
    for doc in result.documents:
        stages = " ".join(
            f'<span class="{_e(status.value)}" title="{_e(detail or "")}">{_e(stage.value)}: '
            f"{_e(status.value)}</span>"
            for stage, (status, detail) in doc.stages.items()
        )
        details = "; ".join(
            f"{stage.value} {status.value}: {detail}"
            for stage, (status, detail) in doc.stages.items()
            if detail and status.value != "passed"
        )
        verdict = (
            '<span class="passed">conformant</span>'
            if doc.valid
            else '<span class="failed">not conformant</span>'
        )
        rows.append(
            (
                _e(doc.path),
                _e(doc.kind or "?"),
                verdict,
                stages + (f"<br><small>{_e(details)}</small>" if details else ""),
            )
        )
    return "<h2>Verification</h2>" + _table(("document", "kind", "verdict", "stages"), rows)


def _stamps(result: VerificationResult) -> str:
    """Per report, how many of its numbers were recomputed, derived, declared or checked for
    structure only, and which were only derived or only checked for structure (SPEC.md CL-2)."""
    rows = []
    for doc in result.documents:
        stamp = doc.claims
        if stamp is None:
            continue
        which = "".join(
            f"<br><small>{_e(title)}: {_e(stamp.summary(group))}</small>"
            for group, title in (("derived", "derived only"), ("structure", "checked for structure only"))
            if stamp.count(group)
        )
        counts = (stamp.count(group) for group in ("recomputed", "derived", "declared", "structure"))
        rows.append((_e(doc.path), *counts, which or "–"))
    if not rows:
        return ""
    headers = ("report", "recomputed", "derived", "declarations", "structure only", "not recomputed")
    return "<h2>What the verdict rests on</h2>" + _table(
        headers, rows, numeric=(False, True, True, True, True, False)
    )


def _label(track: str, pointer: str) -> str:
    """The claim catalogue's label of the number at ``pointer`` of a ``track`` report."""
    row = claim_catalogue().row(track, pointer)
    return pointer if row is None else row.label


def _findings(result: VerificationResult) -> str:
    rows = []
    for doc in result.documents:
        for f in doc.findings:
            where = f"{f.line}:{f.column}" if f.line is not None else ""
            message = _e(f.message) + (f"<br><small>hint: {_e(f.hint)}</small>" if f.hint else "")
            rows.append(
                (
                    _e(doc.path),
                    f'<span class="{_e(f.severity.value)}">{_e(f.severity.value)}</span>',
                    _e(f.code),
                    _e(where),
                    f"<code>{_e(f.pointer)}</code>",
                    message,
                )
            )
    if not rows:
        return "<h2>Findings</h2><p>No findings.</p>"
    return "<h2>Findings</h2>" + _table(
        ("document", "severity", "code", "line:col", "pointer", "message"), rows
    )


def _comparisons(result: VerificationResult) -> str:
    blocks = []
    for doc in result.documents:
        if not doc.comparisons:
            continue
        rows = []
        for c in doc.comparisons:
            if c.claimed is None:
                diff, mark = None, '<span class="info">info</span>'
            else:
                diff = abs(c.claimed - c.recomputed)
                mark = '<span class="passed">ok</span>' if c.within else '<span class="failed">differs</span>'
            rows.append(
                (
                    _e(c.quantity),
                    f"<code>{_e(c.pointer)}</code>",
                    c.claimed,
                    c.recomputed,
                    diff,
                    c.tolerance,
                    mark,
                )
            )
        blocks.append(
            f"<h3>{_e(doc.path)}</h3>"
            + _table(
                ("quantity", "pointer", "claimed", "recomputed", "|difference|", "tolerance", ""),
                rows,
                numeric=(False, False, True, True, True, True, False),
            )
        )
    if not blocks:
        return ""
    return "<h2>Claimed vs recomputed</h2>" + "".join(blocks)


def _figures(page: HtmlPage) -> str:
    if not page.figures and not page.skipped:
        return ""
    out = ["<h2>Figures</h2>"]
    for figure in page.figures:
        encoded = base64.b64encode(figure.data).decode("ascii")
        out.append(
            f'<figure id="figure-{_e(figure.name)}"><h3>{_e(figure.title)}</h3>'
            f'<img class="mibspec-figure" alt="{_e(figure.title)}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{_e(figure.caption)}</figcaption></figure>"
        )
    if page.skipped:
        items = "".join(f"<li>{_e(s.name)}: {_e(s.reason)}</li>" for s in page.skipped)
        out.append(f"<p>Not drawn:</p><ul>{items}</ul>")
    return "".join(out)


# --------------------------------------------------------------------------- claims per track


def _leaderboard_tables(document: dict[str, Any]) -> str:
    """A leaderboard document's tables: methods × cells, then Average and Score."""
    parts = []
    for table in document["tables"]:
        cells = sorted({(c["task"], c["model"]) for row in table["rows"] for c in row["cells"]})
        rows = []
        for row in table["rows"]:
            values = {(c["task"], c["model"]): c["value"] for c in row["cells"]}
            rows.append(
                [_e(row["method"]), *(values.get(cell) for cell in cells), row["average"], row["score"]]
            )
        headers = ["method", *(f"{task} / {model}" for task, model in cells), "Average", "Score"]
        profile = f", profile {table['profile']}" if table.get("profile") else ""
        parts.append(f"<h3>{_e(str(table['metric']).upper() + profile)}</h3>")
        parts.append(_table(headers, rows, numeric=(False, *([True] * (len(headers) - 1)))))
    return "".join(parts)


def _claims(report: dict[str, Any]) -> str:
    if report.get("kind") == "leaderboard":
        try:
            return "<h2>Leaderboard</h2>" + _leaderboard_tables(report)
        except (KeyError, TypeError, AttributeError, ValueError):
            return "<h2>Leaderboard</h2><p>The tables do not have the shape of their schema.</p>"
    claims = report.get("claims")
    if not isinstance(claims, dict):
        return ""
    renderers = {
        "circuit": _circuit_claims,
        "causal_variable": _causal_variable_claims,
        "causal_bench": _causal_bench_claims,
        "saliency": _saliency_claims,
    }
    renderer = renderers.get(str(report.get("track")))
    if renderer is None:
        return ""
    try:
        return "<h2>Claims</h2>" + renderer(claims)
    except (KeyError, TypeError, AttributeError, ValueError):
        # A report that failed its schema may lack fields; the raw claims are shown below.
        return (
            "<h2>Claims</h2><p>The claims do not have the shape of their schema; "
            "see them as written below.</p>"
        )


def _circuit_claims(claims: dict[str, Any]) -> str:
    rows = [
        (_label("circuit", pointer), value)
        for pointer, value in (
            ("/claims/cpr/value", claims["cpr"]["value"]),
            ("/claims/cmd/value", claims["cmd"]["value"]),
            ("/claims/n_edges", claims["n_edges"]),
            ("/claims/m_full", claims.get("m_full")),
            ("/claims/m_empty", claims.get("m_empty")),
        )
    ]
    if claims.get("auroc"):
        label = _label("circuit", "/claims/auroc/value")
        rows.append((f"{label} ({claims['auroc']['convention']})", claims["auroc"]["value"]))
    out = [_table(("quantity", "value"), [(_e(k), v) for k, v in rows], numeric=(False, True))]
    fields = ("k", "n_edges", "weighted_size", "faithfulness")
    headers = [_label("circuit", f"/claims/curves/0/points/0/{name}") for name in fields]
    for curve in claims["curves"]:
        points = [tuple(p.get(name) for name in fields) for p in curve["points"]]
        out.append(f"<h3>Curve, {_e(curve['ranking'])} ranking</h3>")
        out.append(_table(headers, points, numeric=(True,) * 4))
    return "".join(out)


def _causal_variable_claims(claims: dict[str, Any]) -> str:
    out = []
    for variable in claims["variables"]:
        metric, better = variable["metric"].upper(), variable["better"]
        out.append(f"<h3>{_e(variable['name'])}: {_e(metric)} ({_e(better)} is better)</h3>")
        best = variable["best"] if "best" in variable else variable["highest"]  # spec 1.0: highest
        base = "/claims/variables/0"
        rows = [(_label("causal_variable", f"{base}/average"), variable["average"])]
        rows.append((_label("causal_variable", f"{base}/best"), best))
        per_layer = _label("causal_variable", f"{base}/per_layer/0")
        rows += [
            (f"{per_layer}, layer {layer}", value)
            for layer, value in (variable.get("per_layer") or {}).items()
        ]
        out.append(_table(("aggregate", "value"), [(_e(k), v) for k, v in rows], numeric=(False, True)))
        datasets = sorted({name for unit in variable["units"] for name in unit["scores"]})
        unit_rows = [
            (_e(unit["id"]), *(unit["scores"].get(name) for name in datasets)) for unit in variable["units"]
        ]
        out.append(_table(("unit", *datasets), unit_rows, numeric=(False, *(True,) * len(datasets))))
    return "".join(out)


def _causal_bench_claims(claims: dict[str, Any]) -> str:
    names = ("F", "C", "M", "S", "COS", "composite", "precision", "recall", "f1")
    headers = [_label("causal_bench", f"/claims/methods/0/metrics/{n}") for n in names]
    rows = [
        (_e(m["name"]), len(m["components"]), *(m["metrics"].get(n) for n in names))
        for m in claims["methods"]
    ]
    out = [_table(("method", "|set|", *headers), rows, numeric=(False, *(True,) * (len(names) + 1)))]
    conv = claims.get("convergence")
    if conv:
        keys = ("j_obs", "null_mean", "null_std", "z", "p", "n_permutations", "seed")
        labels = [_label("causal_bench", f"/claims/convergence/{k}") for k in keys]
        out.append("<h3>Convergence test</h3>")
        out.append(_table(labels, [tuple(conv.get(k) for k in keys)], numeric=(True,) * len(keys)))
    for key in ("consensus", "majority"):
        if claims.get(key) is not None:
            out.append(f"<p>{_e(key)}: {_e(', '.join(claims[key]) or '(empty)')}</p>")
    return "".join(out)


def _saliency_claims(claims: dict[str, Any]) -> str:
    dominance = claims["dominance"]
    rows = [
        (_label("saliency", pointer), value)
        for pointer, value in (
            ("/claims/clean_accuracy", claims.get("clean_accuracy")),
            ("/claims/perturbed_accuracy", claims.get("perturbed_accuracy")),
            ("/claims/dominance/n_images", dominance["n_images"]),
            ("/claims/dominance/n_dominant", dominance["n_dominant"]),
            ("/claims/dominance/rate", dominance["rate"]),
        )
    ]
    out = [_table(("quantity", "value"), [(_e(k), v) for k, v in rows], numeric=(False, True))]
    keys = ("hit_accuracy", "wiou", "deletion_auc", "addition_auc")
    headers = [_label("saliency", f"/claims/methods/0/{k}") for k in keys]
    method_rows = [(_e(m["name"]), *(m.get(k) for k in keys)) for m in claims["methods"]]
    out.append(_table(("method", *headers), method_rows, numeric=(False, True, True, True, True)))
    return "".join(out)
