"""Output formats for ``mibspec verify``, chosen by name from :data:`REPORTERS`.

- ``text``: for people (rich; colour unless ``NO_COLOR`` is set or the stream is not a terminal);
- ``json``: the stable contract, ``spec/v1/schemas/verification-result.schema.json``;
- ``github``: GitHub Actions workflow commands, one annotation per finding;
- ``sarif``: a SARIF 2.1.0 log (code-scanning tools), the rule catalogue as the tool's rules;
- ``junit``: JUnit XML (test-report viewers), a test suite per document and a test case per stage.

Every format is a pure function of the result: the same result gives the same bytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import IO, Any
from urllib.parse import quote

from mibspec.core.display import visible
from mibspec.core.environment import environment_int
from mibspec.validator import DocumentResult, Finding, Severity, StageStatus, VerificationResult

__all__ = [
    "REPORTERS",
    "SARIF_SCHEMA_URI",
    "render_github",
    "render_json",
    "render_junit",
    "render_sarif",
    "render_text",
    "summary_line",
]


def render_json(result: VerificationResult, out: IO[str]) -> None:
    """The stable contract: ``spec/v1/schemas/verification-result.schema.json``."""
    json.dump(result.to_json(), out, indent=2, ensure_ascii=False, sort_keys=False)
    out.write("\n")


def render_text(result: VerificationResult, out: IO[str]) -> None:
    """Human-readable output (colour unless NO_COLOR is set or the stream is not a terminal).

    Text from the documents is shown through :func:`mibspec.core.display.visible` and never
    read as rich markup. The claimed-vs-recomputed table never cuts a number: a pipe or
    a file gets the table at its full width (``COLUMNS``, when set, is honoured); a
    narrower terminal wraps the quantity names, or shows one block per claim when even
    the numbers alone would not fit.
    """
    plain = _plain_lines(result, out)
    if plain is not None:
        out.writelines(f"{line}\n" for line in plain)
    else:
        _render_rich(result, out)


def _render_rich(result: VerificationResult, out: IO[str]) -> None:
    """The text output through rich: styles on a terminal, the comparison tables."""
    # rich is imported only here: plain output (a pipe, a file) without a comparison table
    # is written without it, which keeps `verify`'s start-up light.
    from rich.console import Console
    from rich.markup import escape

    available = _output_width(out)
    tables = {
        i: _ComparisonRows(doc.comparisons) for i, doc in enumerate(result.documents) if doc.comparisons
    }
    width = available or max([80, *(table.natural_width for table in tables.values())])
    console = Console(file=out, highlight=False, soft_wrap=True, width=width)
    for i, doc in enumerate(result.documents):
        for line in _document_lines(doc, lambda text: escape(visible(text)), _markup):
            console.print(line)
        if i in tables:
            tables[i].show(console, available)
    verdict, summary = summary_line(result).split(" ", 1)
    console.print(f"[bold]{verdict}[/] {escape(summary)}")


_SEVERITY_STYLES = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

#: What rich may change in text printed without colour: an emoji code (``:name:``, rich's
#: own pattern), a backslash (rich's markup escapes do not round-trip every one) or a control
#: character; such text goes through rich.
_RICH_CHANGES = re.compile(r":\S*?:|[\\\x00-\x09\x0b-\x1f\x7f]")


def _markup(style: str, text: str) -> str:
    return f"[{style}]{text}[/]"


def _unstyled(style: str, text: str) -> str:
    return text


def _plain_lines(result: VerificationResult, out: IO[str]) -> list[str] | None:
    """The lines rich would write, when it would write them without any change: to a stream
    that is not a terminal (nor forced to be one), without a claimed-vs-recomputed table and
    without text rich reads as an emoji code; else ``None``."""
    if any(doc.comparisons for doc in result.documents) or "TTY_COMPATIBLE" in os.environ:
        return None
    if "FORCE_COLOR" in os.environ or getattr(out, "isatty", lambda: False)():
        return None
    lines = [line for doc in result.documents for line in _document_lines(doc, visible, _unstyled)]
    lines.append(summary_line(result))
    return None if any(_RICH_CHANGES.search(line) for line in lines) else lines


def _document_lines(
    doc: DocumentResult, shown: Callable[[str], str], style: Callable[[str, str], str]
) -> list[str]:
    """One document's lines: its verdict, stages, findings; ``shown`` writes document text
    (escaped for markup, or plain), ``style`` applies a style (markup, or none)."""
    verdict = style("bold green", "conformant") if doc.valid else style("bold red", "not conformant")
    origin = f" (referenced by {shown(doc.referenced_by)})" if doc.referenced_by else ""
    lines = [f"{style('bold', shown(doc.path))} {shown(doc.kind or '?')}: {verdict}{origin}"]
    stages = "  ".join(f"{stage.value}: {status.value}" for stage, (status, _) in doc.stages.items())
    if doc.description:  # what the report says it is (an example, a synthetic run, ...)
        lines.append(f"  {style('dim', f'description: {shown(doc.description)}')}")
    lines.append(f"  {style('dim', stages)}")
    if doc.not_checked:
        gaps = "; ".join(item.what for item in doc.not_checked)
        note = f"profile {doc.profile or '?'} does not check: {gaps}"
        lines.append(f"  {style('yellow', shown(note))}")
    for stage, (status, detail) in doc.stages.items():
        if detail and status.value in ("skipped", "not_run", "failed"):
            lines.append(f"  {style('dim', f'{stage.value} {status.value}: {shown(detail)}')}")
    lines.extend(_claim_lines(doc, shown, style))
    for finding in doc.findings:
        where = f"{finding.line}:{finding.column}" if finding.line is not None else "-"
        pointer = f" {style('dim', f'at {shown(finding.pointer)}')}" if finding.pointer else ""
        code = style(_SEVERITY_STYLES[finding.severity], shown(finding.code))
        lines.append(
            f"  {shown(doc.path)}:{where} {code} {finding.severity.value}: {shown(finding.message)}{pointer}"
        )
        if finding.hint:
            lines.append(f"      {style('dim', f'hint: {shown(finding.hint)}')}")
        claimed, recomputed = finding.data.get("claimed"), finding.data.get("recomputed")
        if claimed is not None or recomputed is not None:
            lines.append(f"      claimed {shown(repr(claimed))}, recomputed {shown(repr(recomputed))}")
    return lines


def _claim_lines(
    doc: DocumentResult, shown: Callable[[str], str], style: Callable[[str, str], str]
) -> list[str]:
    """What a report's verdict rests on (SPEC.md CL-2): how many of its numbers were recomputed,
    derived, declared or checked for structure only, and which were only derived or only checked
    for structure."""
    stamp = doc.claims
    if stamp is None:
        return []
    counts = (
        f"claims: {stamp.count('recomputed')} recomputed, {stamp.count('derived')} derived from other "
        f"claims, {stamp.count('declared')} declarations, {stamp.count('structure')} checked for "
        "structure only"
    )
    lines = [f"  {style('dim', counts)}"]
    for group, title in (("derived", "derived only"), ("structure", "checked for structure only")):
        if stamp.count(group):
            lines.append(f"  {style('dim', f'{title}: {shown(stamp.summary(group))}')}")
    return lines


def _output_width(out: IO[str]) -> int | None:
    """Columns to fit the output into: ``COLUMNS`` when set, a terminal's width, else none."""
    columns = environment_int("COLUMNS")
    if columns:
        return columns
    if not getattr(out, "isatty", lambda: False)():
        return None
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def summary_line(result: VerificationResult) -> str:
    """``PASS|FAIL n document(s) (g given, r referenced), c conformant; e error(s), w warning(s)``."""
    errors = sum(len(doc.errors) for doc in result.documents)
    warnings = sum(len(doc.warnings) for doc in result.documents)
    valid = sum(doc.valid for doc in result.documents)
    referenced = sum(doc.referenced_by is not None for doc in result.documents)
    total = len(result.documents)
    parts = f" ({total - referenced} given, {referenced} referenced)" if referenced else ""
    return (
        f"{'PASS' if result.valid else 'FAIL'} {total} document(s){parts}, {valid} conformant; "
        f"{errors} error(s), {warnings} warning(s)"
    )


class _ComparisonRows:
    """The claimed-vs-recomputed table of one document, laid out for a given width."""

    HEADERS = ("quantity", "claimed", "recomputed", "|difference|", "tolerance", "")
    PADDING = 2  # spaces on each side of every column
    MIN_NAME = 20  # narrowest quantity column worth a table; below it, one block per claim

    def __init__(self, comparisons: list[Any]) -> None:
        from rich.cells import cell_len

        self.rows: list[tuple[str, str, str, str, str, str, str]] = []
        for c in comparisons:
            if c.claimed is None:
                claimed, diff, mark, style = "-", "-", "info", "dim"
            else:
                claimed, diff = f"{c.claimed:.6g}", f"{abs(c.claimed - c.recomputed):.2e}"
                mark, style = ("ok", "green") if c.within else ("differs", "bold red")
            self.rows.append(
                (visible(c.quantity), claimed, f"{c.recomputed:.6g}", diff, f"{c.tolerance:.1e}", mark, style)
            )
        self.widths = [
            max([cell_len(header), *(cell_len(row[i]) for row in self.rows)])
            for i, header in enumerate(self.HEADERS)
        ]
        self.natural_width = sum(self.widths) + 2 * self.PADDING * len(self.widths)

    def show(self, console: Any, available: int | None) -> None:
        """Print the table into ``available`` columns (``None``: as wide as it needs)."""
        if available is None or self.natural_width <= available:
            console.print(self._table(None))
            return
        name_width = available - (self.natural_width - self.widths[0])
        if name_width >= self.MIN_NAME:
            console.print(self._table(name_width))
            return
        from rich.text import Text

        console.print("claimed vs recomputed", style="italic")
        for name, claimed, recomputed, diff, tolerance, mark, style in self.rows:
            console.print(Text("  " + name))
            console.print(Text(f"      claimed {claimed}, recomputed {recomputed}"))
            console.print(Text.assemble(f"      |difference| {diff}, tolerance {tolerance}: ", (mark, style)))

    def _table(self, name_width: int | None) -> Any:
        """A rich table; the quantity column folds at ``name_width``, no other column wraps."""
        from rich.table import Table
        from rich.text import Text

        table = Table(
            title="claimed vs recomputed",
            title_justify="left",
            box=None,
            padding=(0, self.PADDING),
            pad_edge=True,
        )
        for i, (name, justify) in enumerate(zip(self.HEADERS, ("left", *["right"] * 4, "left"), strict=True)):
            if i == 0 and name_width is not None:
                table.add_column(name, justify="left", width=name_width, overflow="fold")
            else:
                table.add_column(name, justify=justify, width=self.widths[i], no_wrap=True)  # type: ignore[arg-type]
        for name, claimed, recomputed, diff, tolerance, mark, style in self.rows:
            table.add_row(
                *(Text(cell) for cell in (name, claimed, recomputed, diff, tolerance)),
                Text(mark, style=style),
            )
        return table


# --- GitHub Actions workflow commands ------------------------------------------------------

_GITHUB_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _github_data(text: str) -> str:
    """Escape a workflow command's message (GitHub's ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    """Escape a workflow command's property value (GitHub's ``escapeProperty``)."""
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(result: VerificationResult, out: IO[str]) -> None:
    """One ``::error|warning|notice file=…,line=…,col=…,title=CODE::message`` line per finding.

    The message carries the JSON pointer and the hint. A document that failed a stage
    without an error-level finding to show (its findings were filtered out) gets one
    ``::error`` naming the stage. The last line is the plain summary.
    """
    for doc in result.documents:
        path = _github_property(visible(doc.path))
        for finding in doc.findings:
            message = visible(finding.message)
            if finding.pointer:
                message += f" (at {visible(finding.pointer)})"
            if finding.hint:
                message += f"\nhint: {visible(finding.hint)}"
            props = f"file={path}"
            if finding.line is not None:
                props += f",line={finding.line}"
                if finding.column is not None:
                    props += f",col={finding.column}"
            props += f",title={_github_property(visible(finding.code))}"
            out.write(f"::{_GITHUB_LEVELS[finding.severity]} {props}::{_github_data(message)}\n")
        if not doc.valid and not doc.errors:
            failed = ", ".join(
                stage.value for stage, (status, _) in doc.stages.items() if status is StageStatus.FAILED
            )
            out.write(
                f"::error file={path},title=not conformant::{_github_data(f'the {failed} stage failed')}\n"
            )
    out.write(summary_line(result) + "\n")


# --- SARIF 2.1.0 ------------------------------------------------------------------------------

#: The ``$schema`` of the SARIF logs written here: the OASIS SARIF 2.1.0 schema (errata 01).
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_SARIF_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _uri(path: str) -> str:
    """A document path as a SARIF ``uri``: relative paths stay relative, '/'-separated."""
    posix = path.replace("\\", "/")
    if PurePosixPath(posix).is_absolute():
        return "file://" + quote(posix)
    return quote(posix)


def render_sarif(result: VerificationResult, out: IO[str]) -> None:
    """A SARIF 2.1.0 log with one run.

    ``tool.driver.rules`` is the whole rule catalogue (``id`` = code, ``name`` = symbol,
    ``shortDescription`` = summary, default level, the requirement in a property bag);
    each finding is a result with ``ruleId``/``ruleIndex``, ``level``, the message, the
    document as ``physicalLocation`` with ``startLine``/``startColumn`` (columns count
    Unicode code points), and ``pointer`` and ``hint`` in its property bag. Each
    document's verdict and stages are in the run's property bag.
    """
    from mibspec.core.version import __version__
    from mibspec.validator import catalogue

    cat = catalogue(result.spec_version)
    index = {rule.code: i for i, rule in enumerate(cat.rules)}
    rules = [
        {
            "id": rule.code,
            "name": rule.symbol,
            "shortDescription": {"text": rule.summary},
            "defaultConfiguration": {"level": _SARIF_LEVELS[rule.severity]},
            "properties": {"requirement": rule.requirement, "stage": rule.stage},
        }
        for rule in cat.rules
    ]
    results = [_sarif_result(doc, finding, index) for doc in result.documents for finding in doc.findings]
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "mibspec",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": rules,
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {
            "spec_version": result.spec_version,
            "valid": result.valid,
            **({"profile": result.profile} if result.profile else {}),
            "documents": [
                {
                    "path": doc.path,
                    "kind": doc.kind,
                    "valid": doc.valid,
                    "stages": {stage.value: status.value for stage, (status, _) in doc.stages.items()},
                }
                for doc in result.documents
            ],
        },
    }
    log = {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    json.dump(log, out, indent=2, ensure_ascii=False)
    out.write("\n")


def _sarif_result(doc: DocumentResult, finding: Finding, index: dict[str, int]) -> dict[str, Any]:
    region: dict[str, int] = {}
    if finding.line is not None:
        region["startLine"] = finding.line
        if finding.column is not None:
            region["startColumn"] = finding.column
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(doc.path)}}
    if region:
        location["region"] = region
    properties: dict[str, Any] = {"pointer": finding.pointer}
    if finding.hint:
        properties["hint"] = finding.hint
    if finding.data:
        properties["data"] = finding.data
    entry: dict[str, Any] = {"ruleId": finding.code}
    if finding.code in index:
        entry["ruleIndex"] = index[finding.code]
    entry |= {
        "level": _SARIF_LEVELS[finding.severity],
        "message": {"text": visible(finding.message)},
        "locations": [{"physicalLocation": location}],
        "properties": properties,
    }
    return entry


# --- JUnit XML --------------------------------------------------------------------------------


def _finding_stage(code: str) -> str:
    from mibspec.validator import catalogue

    info = catalogue().by_code.get(code)
    stage = info.stage if info is not None else "rules"
    return "parse" if stage == "import" else stage  # an import failure fails the parse stage


def _finding_line(doc: DocumentResult, finding: Finding) -> str:
    where = f"{finding.line}:{finding.column}" if finding.line is not None else "-"
    text = f"{visible(doc.path)}:{where} {visible(finding.code)} {finding.severity.value}: "
    text += f"{visible(finding.message)} (at {visible(finding.pointer or '/')})"
    if finding.hint:
        text += f"\n    hint: {visible(finding.hint)}"
    return text


def render_junit(result: VerificationResult, out: IO[str]) -> None:
    """JUnit XML: ``<testsuites>`` with a ``<testsuite>`` per document (named by its path).

    Each suite has one ``<testcase>`` per stage (``parse``, ``schema``, ``rules``,
    ``recompute``; ``classname`` is the document path). A failed stage, or a stage with
    error-level findings, carries one ``<failure>`` per error: ``type`` is the code,
    ``message`` the finding's message, and the text ``path:line:col CODE …
    (at /pointer)``; a failed stage with no error to show carries one ``<failure
    type="stage-failed">``. A skipped or not-run stage is ``<skipped>`` with the reason.
    Warnings and notes go to the test case's ``<system-out>``. No timestamps: the same
    result gives the same bytes.
    """
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="mibspec")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for doc in result.documents:
        suite = ET.SubElement(root, "testsuite", name=visible(doc.path))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        props = ET.SubElement(suite, "properties")
        for name, value in (("kind", doc.kind or ""), ("valid", str(doc.valid).lower())):
            ET.SubElement(props, "property", name=name, value=visible(value))
        if doc.referenced_by:
            ET.SubElement(props, "property", name="referenced_by", value=visible(doc.referenced_by))
        by_stage: dict[str, list[Finding]] = {}
        for finding in doc.findings:
            by_stage.setdefault(_finding_stage(finding.code), []).append(finding)
        for stage, (status, detail) in doc.stages.items():
            case = ET.SubElement(suite, "testcase", classname=visible(doc.path), name=stage.value)
            counts["tests"] += 1
            findings = by_stage.get(stage.value, [])
            errors = [f for f in findings if f.severity is Severity.ERROR]
            for finding in errors:
                failure = ET.SubElement(case, "failure", type=finding.code, message=visible(finding.message))
                failure.text = _finding_line(doc, finding)
            if status is StageStatus.FAILED and not errors:
                message = f"the {stage.value} stage failed" + (f": {detail}" if detail else "")
                failure = ET.SubElement(case, "failure", type="stage-failed", message=visible(message))
                failure.text = visible(message)
            if errors or status is StageStatus.FAILED:
                counts["failures"] += 1
            elif status in (StageStatus.SKIPPED, StageStatus.NOT_RUN):
                reason = f"{status.value}" + (f": {detail}" if detail else "")
                ET.SubElement(case, "skipped", message=visible(reason))
                counts["skipped"] += 1
            others = [f for f in findings if f.severity is not Severity.ERROR]
            if others:
                system_out = ET.SubElement(case, "system-out")
                system_out.text = "\n".join(_finding_line(doc, f) for f in others)
        for key, count in counts.items():
            suite.set(key, str(count))
            totals[key] += count
    for key, count in totals.items():
        root.set(key, str(count))
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")


REPORTERS: dict[str, Callable[[VerificationResult, IO[str]], None]] = {
    "text": render_text,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
}
