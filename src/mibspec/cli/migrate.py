"""``mibspec migrate``: migrate a document to another spec version.

A thin layer over :mod:`mibspec.spec_tools.migrate`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, FollowLinksOption, followed, usage_error
from mibspec.core.display import visible

__all__ = ["migrate_command"]


def migrate_command(
    source: Annotated[Path, Argument(help="The document to migrate.")],
    output: Annotated[Path | None, Option("--output", "-o", help="Where to write the result.")] = None,
    to: Annotated[str | None, Option("--to", help="Target spec version (default: the current one).")] = None,
    in_place: Annotated[bool, Option("--in-place", help="Replace the input file.")] = False,
    keep_invalid: Annotated[
        bool,
        Option(
            "--keep-invalid",
            help="Migrate an input that does not verify: the output records its findings and does not "
            "verify either (C127); the exit code is 1.",
        ),
    ] = False,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Migrate a document to another spec version (atomic write; the input is kept unless --in-place).

    The input is verified first (without recomputation); one that does not verify is refused
    with its findings (exit 1), unless --keep-invalid.
    """
    from mibspec.core.outputs import OutputPathError, refuse_links
    from mibspec.spec_tools.migrate import (
        InvalidInputError,
        MigrationError,
        UnreadableDocumentError,
        migrate_file,
    )

    if in_place and output is not None:
        usage_error("pass either -o OUT or --in-place, not both")
    if not in_place and output is None:
        usage_error("pass -o OUT (the input is kept) or --in-place (the input is replaced)")
    written = source if in_place else output
    assert written is not None
    if not follow_output_links:
        try:
            refuse_links(written, "--in-place" if in_place else "--output")
        except OutputPathError as exc:
            usage_error(str(exc))
    elif in_place:
        source = followed(source, True)
    else:
        output = followed(written, True)
    try:
        result = migrate_file(source, output, to_version=to, in_place=in_place, keep_invalid=keep_invalid)
    except InvalidInputError as exc:
        _echo_findings(exc.findings)
        click.echo(visible(f"{exc}; pass --keep-invalid to migrate it with its findings recorded"))
        raise click.exceptions.Exit(EXIT_FINDINGS) from None
    except UnreadableDocumentError as exc:
        for finding in exc.findings:
            where = f"{finding.line}:{finding.column}" if finding.line is not None else "1:1"
            pointer = f" at {finding.pointer}" if finding.pointer else ""
            click.echo(
                visible(
                    f"{exc.path}:{where} {finding.code} {finding.severity.value}: {finding.message}{pointer}"
                )
            )
        raise click.exceptions.Exit(EXIT_FINDINGS) from None
    except (MigrationError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        usage_error(str(exc))
        return
    if result.already_current:
        click.echo(
            f"{visible(str(source))} is already at spec {result.to_version}; "
            "nothing to migrate, nothing written"
        )
        raise click.exceptions.Exit(EXIT_OK)
    chain = " → ".join([result.from_version, *(step.to_version for step in result.steps)])
    click.echo(visible(f"{source}: spec {chain}; written to {source if in_place else output}"))
    for step in result.steps:
        click.echo(f"  {step.from_version} → {step.to_version}: {step.description}")
    if result.carried:
        _echo_findings(list(result.carried))
        click.echo(
            "the input did not verify: its findings are recorded in the output, which does not verify "
            "either (C127) until they are fixed and the record removed"
        )
        raise click.exceptions.Exit(EXIT_FINDINGS)
    raise click.exceptions.Exit(EXIT_OK)


def _echo_findings(findings: list[tuple[str, Any]]) -> None:
    """One line per finding: its document, line:column, code, severity, message and pointer."""
    for path, finding in findings:
        where = f"{finding.line}:{finding.column}" if finding.line is not None else "-"
        pointer = f" at {finding.pointer}" if finding.pointer else ""
        click.echo(
            visible(f"{path}:{where} {finding.code} {finding.severity.value}: {finding.message}{pointer}")
        )
