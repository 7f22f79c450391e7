"""Output formats for ``mibspec verify``, chosen by name from :data:`REPORTERS`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, Any

from mibspec.validator import Severity, VerificationResult

__all__ = ["REPORTERS", "render_json", "render_text"]


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
    errors = sum(len(doc.errors) for doc in result.documents)
    warnings = sum(len(doc.warnings) for doc in result.documents)
    valid = sum(doc.valid for doc in result.documents)
    summary = (
        f"{len(result.documents)} document(s), {valid} conformant; {errors} error(s), {warnings} warning(s)"
    )
    console.print(f"[bold]{'PASS' if result.valid else 'FAIL'}[/] {summary}")


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


REPORTERS: dict[str, Callable[[VerificationResult, IO[str]], None]] = {
    "text": render_text,
    "json": render_json,
}
