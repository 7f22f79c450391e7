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
import re
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import IO, Any
from urllib.parse import quote

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
    """Human-readable output (colour unless NO_COLOR is set or the stream is not a terminal)."""
    from rich.console import Console
    from rich.markup import escape

    # Files and pipes get a fixed width wide enough for the claimed-vs-recomputed table.
    width = None if getattr(out, "isatty", lambda: False)() else 120
    console = Console(file=out, highlight=False, soft_wrap=True, width=width)
    styles = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
    for doc in result.documents:
        verdict = "[bold green]conformant[/]" if doc.valid else "[bold red]not conformant[/]"
        origin = f" (referenced by {escape(doc.referenced_by)})" if doc.referenced_by else ""
        console.print(f"[bold]{escape(doc.path)}[/] {escape(doc.kind or '?')}: {verdict}{origin}")
        stages = "  ".join(f"{stage.value}: {status.value}" for stage, (status, _) in doc.stages.items())
        console.print(f"  [dim]{stages}[/]")
        for stage, (status, detail) in doc.stages.items():
            if detail and status.value in ("skipped", "not_run", "failed"):
                console.print(f"  [dim]{stage.value} {status.value}: {escape(detail)}[/]")
        for finding in doc.findings:
            where = f"{finding.line}:{finding.column}" if finding.line is not None else "-"
            pointer = f" [dim]at {escape(finding.pointer)}[/]" if finding.pointer else ""
            console.print(
                f"  {escape(doc.path)}:{where} [{styles[finding.severity]}]{finding.code}[/] "
                f"{finding.severity.value}: {escape(finding.message)}{pointer}"
            )
            if finding.hint:
                console.print(f"      [dim]hint: {escape(finding.hint)}[/]")
            claimed, recomputed = finding.data.get("claimed"), finding.data.get("recomputed")
            if claimed is not None or recomputed is not None:
                console.print(f"      claimed {claimed!r}, recomputed {recomputed!r}")
        if doc.comparisons:
            console.print(_comparison_table(doc.comparisons))
    verdict, summary = summary_line(result).split(" ", 1)
    console.print(f"[bold]{verdict}[/] {escape(summary)}")


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


def _comparison_table(comparisons: list[Any]) -> Any:
    from rich.table import Table

    table = Table(
        title="claimed vs recomputed", title_justify="left", box=None, padding=(0, 2), pad_edge=True
    )
    for name, justify in (
        ("quantity", "left"),
        ("claimed", "right"),
        ("recomputed", "right"),
        ("|difference|", "right"),
        ("tolerance", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for c in comparisons:
        if c.claimed is None:
            claimed, diff, mark = "-", "-", "[dim]info[/]"
        else:
            claimed, diff = f"{c.claimed:.6g}", f"{abs(c.claimed - c.recomputed):.2e}"
            mark = "[green]ok[/]" if c.within else "[bold red]differs[/]"
        table.add_row(c.quantity, claimed, f"{c.recomputed:.6g}", diff, f"{c.tolerance:.1e}", mark)
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
        for finding in doc.findings:
            message = finding.message
            if finding.pointer:
                message += f" (at {finding.pointer})"
            if finding.hint:
                message += f"\nhint: {finding.hint}"
            props = f"file={_github_property(doc.path)}"
            if finding.line is not None:
                props += f",line={finding.line}"
                if finding.column is not None:
                    props += f",col={finding.column}"
            props += f",title={_github_property(finding.code)}"
            out.write(f"::{_GITHUB_LEVELS[finding.severity]} {props}::{_github_data(message)}\n")
        if not doc.valid and not doc.errors:
            failed = ", ".join(
                stage.value for stage, (status, _) in doc.stages.items() if status is StageStatus.FAILED
            )
            out.write(
                f"::error file={_github_property(doc.path)},title=not conformant::"
                f"{_github_data(f'the {failed} stage failed')}\n"
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
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": location}],
        "properties": properties,
    }
    return entry


# --- JUnit XML --------------------------------------------------------------------------------

# Characters XML 1.0 cannot carry, even escaped: shown as \uXXXX instead.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finding_stage(code: str) -> str:
    from mibspec.validator import catalogue

    info = catalogue().by_code.get(code)
    stage = info.stage if info is not None else "rules"
    return "parse" if stage == "import" else stage  # an import failure fails the parse stage


def _finding_line(doc: DocumentResult, finding: Finding) -> str:
    where = f"{finding.line}:{finding.column}" if finding.line is not None else "-"
    text = f"{doc.path}:{where} {finding.code} {finding.severity.value}: {finding.message}"
    text += f" (at {finding.pointer or '/'})"
    if finding.hint:
        text += f"\n    hint: {finding.hint}"
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
        suite = ET.SubElement(root, "testsuite", name=_xml_text(doc.path))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        props = ET.SubElement(suite, "properties")
        for name, value in (("kind", doc.kind or ""), ("valid", str(doc.valid).lower())):
            ET.SubElement(props, "property", name=name, value=_xml_text(value))
        if doc.referenced_by:
            ET.SubElement(props, "property", name="referenced_by", value=_xml_text(doc.referenced_by))
        by_stage: dict[str, list[Finding]] = {}
        for finding in doc.findings:
            by_stage.setdefault(_finding_stage(finding.code), []).append(finding)
        for stage, (status, detail) in doc.stages.items():
            case = ET.SubElement(suite, "testcase", classname=_xml_text(doc.path), name=stage.value)
            counts["tests"] += 1
            findings = by_stage.get(stage.value, [])
            errors = [f for f in findings if f.severity is Severity.ERROR]
            for finding in errors:
                failure = ET.SubElement(
                    case, "failure", type=finding.code, message=_xml_text(finding.message)
                )
                failure.text = _xml_text(_finding_line(doc, finding))
            if status is StageStatus.FAILED and not errors:
                message = f"the {stage.value} stage failed" + (f": {detail}" if detail else "")
                failure = ET.SubElement(case, "failure", type="stage-failed", message=_xml_text(message))
                failure.text = _xml_text(message)
            if errors or status is StageStatus.FAILED:
                counts["failures"] += 1
            elif status in (StageStatus.SKIPPED, StageStatus.NOT_RUN):
                reason = f"{status.value}" + (f": {detail}" if detail else "")
                ET.SubElement(case, "skipped", message=_xml_text(reason))
                counts["skipped"] += 1
            others = [f for f in findings if f.severity is not Severity.ERROR]
            if others:
                system_out = ET.SubElement(case, "system-out")
                system_out.text = _xml_text("\n".join(_finding_line(doc, f) for f in others))
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
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
