"""``mibspec conformance run``: run the conformance suite, report CTRF JSON or JUnit XML.

A thin layer over :mod:`mibspec.spec_tools.conformance_run`.
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Option
from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    FollowLinksOption,
    check_outputs_or_exit,
    usage_error,
)
from mibspec.core.display import visible

__all__ = ["conformance_run_command"]


class ResultFormat(str, enum.Enum):
    ctrf = "ctrf"
    junit = "junit"


def conformance_run_command(
    impl: Annotated[
        str | None,
        Option(
            "--impl",
            help="Command of another implementation (see conformance/README.md); default: this one.",
        ),
    ] = None,
    suite: Annotated[
        Path | None, Option("--suite", help="Suite folder (default: conformance/v1 of the checkout).")
    ] = None,
    result_format: Annotated[ResultFormat, Option("--format", "-f", help="Result format.")] = (
        ResultFormat.ctrf
    ),
    output: Annotated[Path | None, Option("--output", "-o", help="Write the results to this file.")] = None,
    timeout: Annotated[float, Option(help="Seconds allowed per case for --impl.", min=0.1)] = 120.0,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Run the conformance suite and report CTRF JSON or JUnit XML (exit 1 when a case fails)."""
    from mibspec.spec_tools.conformance_run import default_suite, run_suite, to_ctrf, to_junit

    folder = suite if suite is not None else default_suite()
    if folder is None:
        usage_error(
            "no conformance/v1 folder here or above "
            "(the suite is not installed with the package); pass --suite"
        )
        return
    if not folder.is_dir():
        usage_error(f"{folder}: no such folder")
    check_outputs_or_exit([(output, "--output")], [folder], follow_links=follow_output_links)
    try:
        run = run_suite(folder, impl=impl, timeout=timeout)
    except ValueError as exc:
        usage_error(str(exc))
        return
    text = json.dumps(to_ctrf(run), indent=2) + "\n" if result_format is ResultFormat.ctrf else to_junit(run)
    if output is None:
        sys.stdout.write(text)
    else:
        from mibspec.core.outputs import write_atomic

        write_atomic(output, text, follow_links=follow_output_links)
    summary = f"{len(run.cases)} case(s): {run.passed} passed, {run.failed} failed"
    click.echo(summary, err=output is None)
    for case in run.cases:
        if case.status == "failed":
            click.echo(visible(f"  FAILED {case.name}: {case.message}"), err=output is None)
    raise click.exceptions.Exit(EXIT_FINDINGS if run.failed else EXIT_OK)
