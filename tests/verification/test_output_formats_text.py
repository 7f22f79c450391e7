"""The text output written without rich (to a pipe or a file, no comparison table) is byte
for byte what rich writes there."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from mibspec.core.findings import Finding, Severity
from mibspec.validator import DocumentResult, Stage, StageStatus, VerificationResult
from mibspec.verification import output_formats as _output_formats
from mibspec.verification.api import verify

SUITE = Path(__file__).resolve().parents[2] / "conformance" / "v1"
CASES = sorted(path.parent for path in SUITE.glob("*/*/*/expected.json"))


def _both(result: VerificationResult) -> tuple[list[str] | None, str]:
    rich = io.StringIO()
    _output_formats._render_rich(result, rich)
    return _output_formats._plain_lines(result, io.StringIO()), rich.getvalue()


@pytest.mark.parametrize("case", CASES, ids=lambda case: "/".join(case.parts[-3:]))
def test_every_conformance_case_reads_the_same_without_rich(case: Path) -> None:
    documents = [p for p in sorted(case.glob("*.json")) if p.name != "expected.json"]
    result = verify(*documents, recompute=False)
    plain, rich = _both(result)
    if plain is None:  # `path:line:column` reads as an emoji code: compare the lines without it
        for doc in result.documents:
            doc.findings = [replace(finding, line=None, column=None) for finding in doc.findings]
        plain, rich = _both(result)
    if plain is None:  # then rich has text it may change: it writes these lines itself
        assert _output_formats._RICH_CHANGES.search(rich)
    else:
        assert "".join(f"{line}\n" for line in plain) == rich


def test_text_rich_reads_as_markup_is_written_the_same() -> None:
    doc = DocumentResult(path="a [bold]b[/] [c] d[", kind="report", findings=[])
    doc.set_stage(Stage.PARSE, StageStatus.FAILED, "[red]x[/red] [/] ] [")
    doc.findings.append(
        Finding(code="K103", severity=Severity.WARNING, message="m [i] [", pointer="/a/[0]", hint="[b]")
    )
    plain, rich = _both(VerificationResult(documents=[doc]))
    assert plain is not None
    assert "".join(f"{line}\n" for line in plain) == rich
    # An emoji code or a backslash: rich writes the lines, as it always did.
    for description in ("a :smile: b", "a \\[b] c\\"):
        doc.description = description
        assert _both(VerificationResult(documents=[doc]))[0] is None


def test_a_terminal_or_forced_colour_goes_through_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    result = VerificationResult(documents=[DocumentResult(path="a", kind="report", findings=[])])

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert _output_formats._plain_lines(result, io.StringIO()) is not None
    assert _output_formats._plain_lines(result, Terminal()) is None
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert _output_formats._plain_lines(result, io.StringIO()) is None
