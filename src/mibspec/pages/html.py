"""``mibspec html``: one self-contained HTML page summarising a verified report.

The page holds the verdict, every verified document's stages and findings, the
report's claims, the claimed-vs-recomputed table when the recompute stage ran, and
the track's figures (:mod:`mibspec.pages.figures`) as base64 PNG ``data:`` URIs. It loads
nothing from anywhere else: no scripts, fonts, style sheets or links. The same inputs
give the same bytes (no timestamps; the figures are deterministic).
"""

from __future__ import annotations

import base64
import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.tracks import TRACKS
from mibspec.core.version import __version__
from mibspec.validator import DocumentResult, VerificationResult

from ._markup import escape, html_table

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


def _lines(text: str) -> str:
    """Text of several lines, each escaped on its own (the line breaks are kept)."""
    return "\n".join(escape(line) for line in text.split("\n"))


def render_html(page: HtmlPage) -> str:
    """The page as one HTML document (UTF-8 text)."""
    result, report = page.result, page.report
    title = (report or {}).get("title") or page.report_path
    verdict = "conformant" if result.valid else "not conformant"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)} — mibspec</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p><span class="verdict {"pass" if result.valid else "fail"}">{escape(verdict)}</span> '
        f"{escape(page.report_path)} — checked with mibspec {escape(__version__)} against spec "
        f"{escape(result.spec_version)}{_profile_note(result)}</p>",
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
    parts.append(f"<p><small>mibspec {escape(__version__)}, spec {escape(result.spec_version)}</small></p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _profile_note(result: VerificationResult) -> str:
    return f" under profile {escape(result.profile)}" if result.profile else ""


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
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows if v)
    description = report.get("description")
    text = f"<p>{escape(description)}</p>" if description else ""
    return f"<h2>Report</h2><table>{body}</table>{text}"


def _documents(result: VerificationResult) -> str:
    rows = []
    for doc in result.documents:
        stages = " ".join(
            f'<span class="{escape(status.value)}" title="{escape(detail or "")}">{escape(stage.value)}: '
            f"{escape(status.value)}</span>"
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
                escape(doc.path),
                escape(doc.kind or "?"),
                verdict,
                stages + (f"<br><small>{escape(details)}</small>" if details else ""),
            )
        )
    return "<h2>Verification</h2>" + html_table(("document", "kind", "verdict", "stages"), rows)


def _stamps(result: VerificationResult) -> str:
    """Per report, how many of its numbers were recomputed, derived, declared or checked for
    structure only, and which were only derived or only checked for structure (SPEC.md CL-2)."""
    rows = []
    for doc in result.documents:
        stamp = doc.claims
        if stamp is None:
            continue
        which = "".join(
            f"<br><small>{escape(title)}: {escape(stamp.summary(group))}</small>"
            for group, title in (("derived", "derived only"), ("structure", "checked for structure only"))
            if stamp.count(group)
        )
        counts = (stamp.count(group) for group in ("recomputed", "derived", "declared", "structure"))
        rows.append((escape(doc.path), *counts, which or "–"))
    if not rows:
        return ""
    headers = ("report", "recomputed", "derived", "declarations", "structure only", "not recomputed")
    return "<h2>What the verdict rests on</h2>" + html_table(
        headers, rows, numeric=(False, True, True, True, True, False)
    )


def _findings(result: VerificationResult) -> str:
    rows = []
    for doc in result.documents:
        for f in doc.findings:
            where = f"{f.line}:{f.column}" if f.line is not None else ""
            message = escape(f.message) + (f"<br><small>hint: {escape(f.hint)}</small>" if f.hint else "")
            rows.append(
                (
                    escape(doc.path),
                    f'<span class="{escape(f.severity.value)}">{escape(f.severity.value)}</span>',
                    escape(f.code),
                    escape(where),
                    f"<code>{escape(f.pointer)}</code>",
                    message,
                )
            )
    if not rows:
        return "<h2>Findings</h2><p>No findings.</p>"
    return "<h2>Findings</h2>" + html_table(
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
                    escape(c.quantity),
                    f"<code>{escape(c.pointer)}</code>",
                    c.claimed,
                    c.recomputed,
                    diff,
                    c.tolerance,
                    mark,
                )
            )
        blocks.append(
            f"<h3>{escape(doc.path)}</h3>"
            + html_table(
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
            f'<figure id="figure-{escape(figure.name)}"><h3>{escape(figure.title)}</h3>'
            f'<img class="mibspec-figure" alt="{escape(figure.title)}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{escape(figure.caption)}</figcaption></figure>"
        )
    if page.skipped:
        items = "".join(f"<li>{escape(s.name)}: {escape(s.reason)}</li>" for s in page.skipped)
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
                [escape(row["method"]), *(values.get(cell) for cell in cells), row["average"], row["score"]]
            )
        headers = ["method", *(f"{task} / {model}" for task, model in cells), "Average", "Score"]
        profile = f", profile {table['profile']}" if table.get("profile") else ""
        parts.append(f"<h3>{escape(str(table['metric']).upper() + profile)}</h3>")
        parts.append(html_table(headers, rows, numeric=(False, *([True] * (len(headers) - 1)))))
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
    track = TRACKS.get(str(report.get("track")))
    if track is None:
        return ""
    module, _, function = track.claims_table.partition(":")
    renderer = getattr(importlib.import_module(module), function)
    try:
        return "<h2>Claims</h2>" + renderer(claims)
    except (KeyError, TypeError, AttributeError, ValueError):
        # A report that failed its schema may lack fields; the raw claims are shown below.
        return (
            "<h2>Claims</h2><p>The claims do not have the shape of their schema; "
            "see them as written below.</p>"
        )
