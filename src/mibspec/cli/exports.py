"""The ``mibspec export`` commands: circuit documents and reports back into MIB's formats.

Exit codes: 0 written, 2 usage error or a circuit document that cannot be exported (it
does not verify, or is of another kind), 3 internal error. Causal-variable reports that
do not verify or cannot be written in MIB's layout give their findings and exit 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    FollowLinksOption,
    OutputFormat,
    check_outputs_or_exit,
    exit_on_internal_errors,
    followed,
    usage_error,
)

__all__ = ["export_eap_ig_command", "export_mib_submission_command"]


def export_eap_ig_command(
    source: Annotated[Path, Argument(help="A circuit document (circuit.json).")],
    target: Annotated[
        Path,
        Option(
            "--output",
            "-o",
            help="The EAP-IG graph to write: .json (Graph.from_json) or .pt (Graph.from_pt; needs torch).",
        ),
    ],
    circuit: Annotated[
        int, Option("--circuit", help="Which circuit (membership row) to write as in_graph.")
    ] = 0,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Write a circuit document as a graph EAP-IG's Graph.from_json or Graph.from_pt loads."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.exporters import ExportError, export_eap_ig

    if not source.is_file():
        usage_error(f"{source}: no such file")
    check_outputs_or_exit([(target, "--output")], [source], follow_links=follow_output_links)
    try:
        export_eap_ig(source, followed(target, follow_output_links), circuit=circuit)
    except (ExportError, OutputPathError) as exc:
        usage_error(str(exc))
    click.echo(str(target))
    raise click.exceptions.Exit(EXIT_OK)


def _track(path: Path) -> str:
    """``causal_variable`` for a causal-variable report or a featurizer document, else
    ``circuit`` (whose export reports anything else it cannot write)."""
    from mibspec.validator import Limits, load_json_file

    data = load_json_file(path, Limits()).data
    if isinstance(data, dict) and (
        data.get("kind") == "featurizer"
        or (data.get("kind") == "report" and data.get("track") == "causal_variable")
    ):
        return "causal_variable"
    return "circuit"


def export_mib_submission_command(
    reports: Annotated[
        list[Path],
        Argument(
            help="Reports of one track: circuit-track reports, or causal-variable reports (or "
            "featurizers imported from a submission)."
        ),
    ],
    out_dir: Annotated[
        Path,
        Option(
            "--output",
            "-o",
            help="Folder to write the <task>_<model> folders, or the causal-variable submission, into.",
        ),
    ],
    output_format: Annotated[
        OutputFormat, Option("--format", "-f", help="Output format (causal-variable reports).")
    ] = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Write reports as a MIB submission folder of their track: circuit reports as one
    <task>_<model> folder each, causal-variable reports as their featurizers' unit files and
    MIB's result file of their unit scores (token positions as declared rules,
    token_positions.json, never as code)."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.exporters import ExportError, export_mib_submission

    for path in reports:
        if not path.is_file():
            usage_error(f"{path}: no such file")
    tracks = {path: _track(path) for path in reports}
    if len(set(tracks.values())) > 1:
        cv = next(p for p, t in tracks.items() if t == "causal_variable")
        circuit = next(p for p, t in tracks.items() if t == "circuit")
        usage_error(
            f"{circuit} is a circuit-track report and {cv} a causal-variable one: a submission folder "
            "holds one track; export each track into a folder of its own"
        )
    if set(tracks.values()) == {"causal_variable"}:
        run_cv_export(reports, out_dir, output_format.value, follow_output_links)
        return
    check_outputs_or_exit([], reports, folders=[(out_dir, "--output")], follow_links=follow_output_links)
    try:
        written = export_mib_submission(reports, followed(out_dir, follow_output_links))
    except (ExportError, OutputPathError) as exc:
        usage_error(str(exc))
    for path in written:
        click.echo(str(path))
    raise click.exceptions.Exit(EXIT_OK)


def run_cv_export(reports: list[Path], out_dir: Path, output_format: str, follow_links: bool = False) -> None:
    """Verify causal-variable reports, then write their featurizers as a submission folder."""
    import json

    from mibspec.core.outputs import OutputPathError
    from mibspec.exporters import export_mib_cv_submission
    from mibspec.validator import DocumentResult, Stage, StageStatus, VerificationResult
    from mibspec.verification.api import verify as run_verify
    from mibspec.verification.output_formats import REPORTERS

    for report in reports:
        if not report.is_file():
            usage_error(f"{report}: no such file")
    check_outputs_or_exit([], reports, folders=[(out_dir, "--output")], follow_links=follow_links)
    render = REPORTERS[output_format]
    verified = run_verify(*reports, recompute=False)
    if not verified.valid:  # only verified declarations are written out
        render(verified, sys.stdout)
        exit_on_internal_errors(verified)
        raise click.exceptions.Exit(EXIT_FINDINGS)
    try:
        result = export_mib_cv_submission(reports, followed(out_dir, follow_links))
    except OutputPathError as exc:
        usage_error(str(exc))
    if result.findings:
        failed = DocumentResult(path=", ".join(map(str, reports)), kind=None, findings=result.findings)
        failed.set_stage(Stage.PARSE, StageStatus.FAILED, "the reports could not be exported")
        render(VerificationResult(documents=[failed]), sys.stdout)
        raise click.exceptions.Exit(EXIT_FINDINGS)
    written = [str(path) for path in result.written]
    if output_format == OutputFormat.json.value:
        click.echo(json.dumps({"written": written}, indent=2))
    else:
        for path in written:
            click.echo(path)
        click.echo(
            "token positions are written as declared rules (token_positions.json), not as code: "
            "MIB's evaluator needs a token_position.py, which mibspec does not write"
        )
    raise click.exceptions.Exit(EXIT_OK)
