"""The ``mibspec export`` commands: circuit documents and reports back into MIB's formats.

Exit codes: 0 written, 2 usage error or a circuit document that cannot be exported (it
does not verify, or is of another kind), 3 internal error. Causal-variable reports that
do not verify or cannot be written in MIB's layout give their findings and exit 1, as
``export mib-cv-submission`` (the alias for that track) does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibspec.cli._support import EXIT_OK, check_outputs_or_exit, usage_error
from mibspec.cli.imports import _Format

__all__ = ["register"]

export_app = typer.Typer(
    help="Write mibspec documents in the file formats of other tools.", no_args_is_help=True
)


@export_app.command("eap-ig")
def export_eap_ig_command(
    source: Annotated[Path, typer.Argument(help="A circuit document (circuit.json).")],
    target: Annotated[Path, typer.Option("--output", "-o", help="The EAP-IG graph JSON to write.")],
    circuit: Annotated[
        int, typer.Option("--circuit", help="Which circuit (membership row) to write as in_graph.")
    ] = 0,
) -> None:
    """Write a circuit document as a graph EAP-IG's Graph.from_json loads."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.exporters import ExportError, export_eap_ig

    if not source.is_file():
        usage_error(f"{source}: no such file")
    check_outputs_or_exit([(target, "--output")], [source])
    try:
        export_eap_ig(source, target, circuit=circuit)
    except (ExportError, OutputPathError) as exc:
        usage_error(str(exc))
    typer.echo(str(target))
    raise typer.Exit(EXIT_OK)


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


@export_app.command("mib-submission")
def export_mib_submission_command(
    reports: Annotated[
        list[Path],
        typer.Argument(
            help="Reports of one track: circuit-track reports, or causal-variable reports (or "
            "featurizers imported from a submission)."
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Folder to write the <task>_<model> folders, or the causal-variable submission, into.",
        ),
    ],
    output_format: Annotated[
        _Format, typer.Option("--format", "-f", help="Output format (causal-variable reports).")
    ] = _Format.text,
) -> None:
    """Write reports as a MIB submission folder of their track: circuit reports as one
    <task>_<model> folder each, causal-variable reports as their featurizers' unit files
    (token positions as declared rules, token_positions.json, never as code)."""
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
        from mibspec.cli.imports import run_cv_export

        run_cv_export(reports, out_dir, output_format.value)
        return
    check_outputs_or_exit([], reports, folders=[(out_dir, "--output")])
    try:
        written = export_mib_submission(reports, out_dir)
    except (ExportError, OutputPathError) as exc:
        usage_error(str(exc))
    for path in written:
        typer.echo(str(path))
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add the ``export`` command group to ``app``."""
    app.add_typer(export_app, name="export")
