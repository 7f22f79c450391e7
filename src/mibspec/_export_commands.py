"""The ``mibspec export`` commands: circuit documents and reports back into MIB's formats.

Exit codes: 0 written, 2 usage error or a document that cannot be exported (it does
not verify, or is of another kind), 3 internal error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibspec._command_support import EXIT_OK, check_outputs_or_exit, usage_error

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


@export_app.command("mib-submission")
def export_mib_submission_command(
    reports: Annotated[list[Path], typer.Argument(help="Circuit-track reports.")],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to write the <task>_<model> folders into.")
    ],
) -> None:
    """Write circuit reports as MIB circuit-track submission folders (one per task and model)."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.exporters import ExportError, export_mib_submission

    for path in reports:
        if not path.is_file():
            usage_error(f"{path}: no such file")
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
