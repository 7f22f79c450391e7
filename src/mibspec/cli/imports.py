"""``mibspec import mib-dataset`` and the causal-variable side of ``mibspec import
mib-submission`` and ``mibspec export mib-submission``: MIB's released datasets and
causal-variable submission folders. ``import mib-cv-submission`` and ``export
mib-cv-submission`` remain as aliases restricted to causal-variable folders and reports.

Each import writes its documents, then verifies them (recomputation is left to ``mibspec
verify``); the import's own warnings (for example the units whose token positions are still
undeclared) are reported with the verification, under the source's path.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    IMPORT_CHECKS_ONLY,
    check_outputs_or_exit,
    exit_on_internal_errors,
    usage_error,
)

if TYPE_CHECKING:
    from mibspec.importers import ImportResult

__all__ = ["register"]


class _Format(str, enum.Enum):
    text = "text"
    json = "json"


_FormatOption = Annotated[_Format, typer.Option("--format", "-f", help="Output format.")]


def _report(sources: list[Path], result: ImportResult, output_format: _Format) -> None:
    """Render the import's findings, or verify and render what it wrote (with its warnings)."""
    from mibspec._output_formats import REPORTERS
    from mibspec._verify_api import verify as run_verify
    from mibspec.validator import (
        DocumentResult,
        Stage,
        StageStatus,
        VerificationResult,
    )

    render = REPORTERS[output_format.value]
    where = str(sources[0]) if len(sources) == 1 else ", ".join(str(s) for s in sources)
    source_result = DocumentResult(path=where, kind=None, findings=list(result.findings))
    failed = any(f.severity.value == "error" for f in result.findings)
    if failed and not result.written:
        source_result.set_stage(Stage.PARSE, StageStatus.FAILED, "the input could not be imported")
        render(VerificationResult(documents=[source_result]), sys.stdout)
        raise typer.Exit(EXIT_FINDINGS)
    # Several files import one by one: those that converted are written and verified.
    verified = run_verify(*result.written, recompute=False, skipped_because=IMPORT_CHECKS_ONLY)
    if result.findings:
        if failed:
            source_result.set_stage(Stage.PARSE, StageStatus.FAILED, "some inputs could not be imported")
        else:
            source_result.set_stage(Stage.PARSE, StageStatus.PASSED, "imported, with warnings")
        verified = VerificationResult(documents=[source_result, *verified.documents])
    render(verified, sys.stdout)
    exit_on_internal_errors(verified)
    raise typer.Exit(EXIT_OK if verified.valid and not failed else EXIT_FINDINGS)


def import_mib_dataset_command(
    sources: Annotated[
        list[Path],
        typer.Argument(help="Released dataset files: parquet (needs the mib extra) or JSON Lines."),
    ],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to write <stem>.json and <stem>.jsonl into.")
    ],
    task: Annotated[
        str | None, typer.Option(help="ioi, mcqa, arc_easy, arithmetic or ravel (default: from the columns).")
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(help="train, validation, test or private_test (default: from the file name)."),
    ] = None,
    hub_id: Annotated[
        str | None, typer.Option("--hub-id", help="The dataset repository, e.g. mib-bench/ioi.")
    ] = None,
    revision: Annotated[str | None, typer.Option(help="The repository's full commit hash.")] = None,
    attributes: Annotated[
        Path | None,
        typer.Option(
            "--attributes",
            help="RAVEL's attribute table (entity → {attribute: value}), from which RAVEL's answers come.",
        ),
    ] = None,
    output_format: _FormatOption = _Format.text,
) -> None:
    """Import MIB's released dataset files as counterfactual datasets, then verify them."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import import_mib_dataset

    for source in [*sources, *([attributes] if attributes else [])]:
        if not source.is_file():
            usage_error(f"{source}: no such file")
    check_outputs_or_exit([], sources, folders=[(out_dir, "--output")])
    try:
        result = import_mib_dataset(
            sources, out_dir, task=task, split=split, hub_id=hub_id, revision=revision, attributes=attributes
        )
    except OutputPathError as exc:
        usage_error(str(exc))
    _report(sources, result, output_format)


PositionsOption = Annotated[
    Path | None,
    typer.Option(
        "--positions",
        help="Causal-variable track: JSON object mapping the submission's token-position names to "
        'declared rules, e.g. {"last_token": {"rule": "last"}}.',
    ),
]


def import_mib_cv_submission_command(
    source: Annotated[Path, typer.Argument(help="A MIB causal-variable submission folder.")],
    out_dir: Annotated[
        Path,
        typer.Option("--output", "-o", help="Folder to write <TASK>_<MODEL>_<VARIABLE>/<unit>.json into."),
    ],
    positions: PositionsOption = None,
    output_format: _FormatOption = _Format.text,
) -> None:
    """Alias of `import mib-submission` for causal-variable folders: import a causal-variable
    submission's featurizers (never its code), then verify them."""
    run_cv_import(source, out_dir, positions, output_format.value)


def run_cv_import(source: Path, out_dir: Path, positions: Path | None, output_format: str) -> None:
    """Import a causal-variable submission folder, then verify and report what was written."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import import_mib_cv_submission

    if not source.is_dir():
        usage_error(f"{source}: no such folder")
    if positions is not None and not positions.is_file():
        usage_error(f"{positions}: no such file")
    check_outputs_or_exit([], [], folders=[(out_dir, "--output")])
    try:
        result = import_mib_cv_submission(source, out_dir, positions=positions)
    except OutputPathError as exc:
        usage_error(str(exc))
    _report([source], result, _Format(output_format))


def export_mib_cv_submission_command(
    reports: Annotated[
        list[Path],
        typer.Argument(help="Causal-variable reports (or featurizers imported from a submission) to write."),
    ],
    out_dir: Annotated[Path, typer.Option("--output", "-o", help="The submission folder to write.")],
    output_format: _FormatOption = _Format.text,
) -> None:
    """Alias of `export mib-submission` for causal-variable reports: write their featurizers
    as a MIB submission folder.

    Token positions are written as declared rules (token_positions.json), not as code.
    """
    run_cv_export(reports, out_dir, output_format.value)


def run_cv_export(reports: list[Path], out_dir: Path, output_format: str) -> None:
    """Verify causal-variable reports, then write their featurizers as a submission folder."""
    import json

    from mibspec._output_formats import REPORTERS
    from mibspec._verify_api import verify as run_verify
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import export_mib_cv_submission
    from mibspec.validator import DocumentResult, Stage, StageStatus, VerificationResult

    for report in reports:
        if not report.is_file():
            usage_error(f"{report}: no such file")
    check_outputs_or_exit([], reports, folders=[(out_dir, "--output")])
    render = REPORTERS[output_format]
    verified = run_verify(*reports, recompute=False)
    if not verified.valid:  # only verified declarations are written out
        render(verified, sys.stdout)
        exit_on_internal_errors(verified)
        raise typer.Exit(EXIT_FINDINGS)
    try:
        result = export_mib_cv_submission(reports, out_dir)
    except OutputPathError as exc:
        usage_error(str(exc))
    if result.findings:
        failed = DocumentResult(path=", ".join(map(str, reports)), kind=None, findings=result.findings)
        failed.set_stage(Stage.PARSE, StageStatus.FAILED, "the reports could not be exported")
        render(VerificationResult(documents=[failed]), sys.stdout)
        raise typer.Exit(EXIT_FINDINGS)
    written = [str(path) for path in result.written]
    if output_format == _Format.json.value:
        typer.echo(json.dumps({"written": written}, indent=2))
    else:
        for path in written:
            typer.echo(path)
        typer.echo(
            "token positions are written as declared rules (token_positions.json), not as code: "
            "MIB's evaluator needs a token_position.py, which mibspec does not write"
        )
    raise typer.Exit(EXIT_OK)


def register(import_app: typer.Typer, export_app: typer.Typer) -> None:
    """Add the commands to the ``mibspec import`` and ``mibspec export`` groups."""
    import_app.command("mib-dataset")(import_mib_dataset_command)
    import_app.command("mib-cv-submission")(import_mib_cv_submission_command)
    export_app.command("mib-cv-submission")(export_mib_cv_submission_command)
