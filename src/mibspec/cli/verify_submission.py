"""``mibspec verify-submission``: a MIB submission folder, its dataset and model pin, imported
and verified with recomputation in one command (:mod:`mibspec.submissions`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._request import option_of
from mibspec.cli._score_device import DeviceOption
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
from mibspec.cli.imports import (
    ArchitectureOption,
    CounterfactualTypeOption,
    MethodOption,
    ModelFilesOption,
    PositionsOption,
    RevisionOption,
    SplitOption,
)
from mibspec.core.display import visible

if TYPE_CHECKING:
    from mibspec.submissions import LeaderboardRow

__all__ = ["verify_submission_command"]

_FormatOption = Annotated[OutputFormat, Option("--format", "-f", help="Output format.")]
# Options shared with `mibspec verify`, declared by its request (tests/cli keeps the types in step).
_ModelRoot = Annotated[list[Path] | None, option_of("model_roots")]
_BatchSize = Annotated[str | None, option_of("batch_size")]
_Source = Annotated[
    Path,
    Argument(
        help="A MIB submission folder of either track, as MIB's scripts leave it (circuit track: "
        "<task>_<model> folders with their results .pkl files; causal-variable track: "
        "<TASK>_<MODEL>_<VARIABLE> folders of featurizers, with --results)."
    ),
]
_Output = Annotated[
    Path, Option("--output", "-o", help="Folder to write the imported documents and reports into.")
]
_Dataset = Annotated[
    str | None,
    Option(
        "--dataset",
        help="The dataset: a hub id pinned as ID@40-HEX-REVISION (read from the local Hugging "
        "Face cache when offline), a released .parquet/.jsonl file, or a dataset document.",
    ),
]
_Results = Annotated[
    list[Path] | None,
    Option(
        "--results",
        metavar="<path>",
        help="A MIB result file from anywhere (repeatable). Circuit track: a results pickle of "
        "run_evaluation.py (<task>_<model>_<split>_abs-<True|False>.pkl), used for the folder its "
        "name names. Causal-variable track: a result JSON (one variable each), whose unit scores "
        "are joined with the submission's featurizers.",
    ),
]


def verify_submission_command(
    source: _Source,
    out_dir: _Output,
    dataset: _Dataset = None,
    model_revision: RevisionOption = None,
    split: SplitOption = None,
    counterfactual_type: CounterfactualTypeOption = None,
    architecture: ArchitectureOption = None,
    method: MethodOption = None,
    model_files: ModelFilesOption = None,
    results: _Results = None,
    positions: PositionsOption = None,
    model_root: _ModelRoot = None,
    device: DeviceOption = "cpu",
    batch_size: _BatchSize = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import a MIB submission with its dataset and model pin, verify it with recomputation.

    Every report written is verified with recomputation, and the leaderboard's numbers (as the
    submission's results claim them) are printed beside the recomputed ones. A hub dataset or
    model is read from the local Hugging Face cache at its pinned commit (HF_HUB_OFFLINE=1 keeps
    it there); what is missing is named with the command that fetches it.
    """
    from mibspec.cli._score_device import batch_size_or_exit, device_or_exit
    from mibspec.cli.imports import render_import_failure
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import submission_layout
    from mibspec.submissions import SubmissionRequest, leaderboard_rows, verify_submission
    from mibspec.verification.output_formats import REPORTERS

    if not source.is_dir():
        usage_error(f"{source}: no such folder")
    check_outputs_or_exit([], [source], folders=[(out_dir, "--output")], follow_links=follow_output_links)
    for path in results or ():
        if not path.is_file():
            usage_error(f"--results {path}: no such file")
    track = submission_layout(source).track
    if dataset is None and (track == "circuit" or (track == "causal_variable" and results)):
        usage_error(
            "--dataset is needed to recompute: a hub id pinned as ID@REVISION (e.g. mib-bench/ioi@<commit>), "
            "a released .parquet/.jsonl file, or a dataset document"
        )
    request = SubmissionRequest(
        submission=source,
        out_dir=followed(out_dir, follow_output_links),
        dataset=dataset or "",
        model_revision=model_revision,
        split=split,
        counterfactual_type=counterfactual_type,
        architecture=architecture,
        method=method,
        model_files=model_files,
        results=tuple(results or ()),
        positions=positions,
        model_roots=tuple(model_root or ()),
        device=device_or_exit(device),
        batch_size=None if batch_size is None else batch_size_or_exit(batch_size),
    )
    try:
        outcome = verify_submission(request)
    except OutputPathError as exc:
        usage_error(str(exc))
    for note in outcome.notes:
        click.echo(f"mibspec: note: {visible(note)}", err=True)
    if outcome.verification is None:
        render_import_failure(source, outcome.findings, output_format)
    verification = outcome.verification
    REPORTERS[output_format.value](verification, sys.stdout)
    if output_format is OutputFormat.text:
        _print_leaderboard(leaderboard_rows(verification, outcome.reports))
    exit_on_internal_errors(verification)
    raise click.exceptions.Exit(EXIT_OK if outcome.valid else EXIT_FINDINGS)


def _print_leaderboard(rows: list[LeaderboardRow]) -> None:
    """The leaderboard's numbers: claimed by the submission's results, beside the recomputed."""
    if not rows:
        return
    click.echo("\nLeaderboard numbers (claimed by the submission's results, recomputed here):")
    for row in rows:
        claimed = "—" if row.claimed is None else f"{row.claimed:.6g}"
        recomputed = "not recomputed" if row.recomputed is None else f"{row.recomputed:.6g}"
        verdict = {True: "agrees", False: "DIFFERS", None: ""}[row.within]
        click.echo(f"  {visible(row.report)}  {row.quantity}: {claimed} → {recomputed} {verdict}".rstrip())
