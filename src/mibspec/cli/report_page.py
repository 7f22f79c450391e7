"""Commands ``report``, ``leaderboard``, ``conformance run`` and ``migrate``.

Thin layers over :mod:`mibspec._html_report`, :mod:`mibspec._leaderboard`,
:mod:`mibspec._conformance_run` and :mod:`mibspec._migrate`; this module imports only
typer and the standard library at import time. Exit codes as for ``verify``: 0 success,
1 findings (or failed cases, or rejected reports), 2 usage error, 3 internal error.
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    check_outputs_or_exit,
    exit_on_internal_errors,
    usage_error,
)
from mibspec.core.display import visible

__all__ = ["register"]


class KAxis(str, enum.Enum):
    log = "log"
    linear = "linear"


class ResultFormat(str, enum.Enum):
    ctrf = "ctrf"
    junit = "junit"


def _check_profile(profile: str | None) -> None:
    from mibspec.validator import known_profiles

    if profile is not None and profile not in known_profiles():
        usage_error(f"unknown profile {profile!r}; known profiles: {', '.join(known_profiles())}")


def report_command(
    path: Annotated[Path, typer.Argument(help="A report.json (or a folder holding exactly one report).")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the HTML page to this file.")
    ] = None,
    png_dir: Annotated[
        Path | None, typer.Option("--png-dir", help="Write every figure as <name>.png into this folder.")
    ] = None,
    recompute: Annotated[
        bool, typer.Option("--recompute", help="Also run the recompute stage (claimed-vs-recomputed table).")
    ] = False,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Check under this profile instead of the declared one.")
    ] = None,
    k_axis: Annotated[KAxis, typer.Option("--k-axis", help="k axis of the faithfulness figure.")] = KAxis.log,
    model_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."
        ),
    ] = None,
) -> None:
    """Verify a report and summarise it in one self-contained HTML page with figures."""
    from mibspec._verify_api import collect_paths
    from mibspec._verify_api import verify as run_verify
    from mibspec.core.spec import install_hint

    if output is None and png_dir is None:
        usage_error("nothing to write: pass -o OUT.html and/or --png-dir DIR")
    _check_profile(profile)
    try:
        found = collect_paths([path])
    except FileNotFoundError as exc:
        usage_error(str(exc))
        return
    if len(found) != 1:
        usage_error(f"{path} holds {len(found)} reports; pass one report file")
    check_outputs_or_exit([(output, "--output")], found, folders=[(png_dir, "--png-dir")])
    try:
        import matplotlib  # noqa: F401  (only to fail early with a clear message)
    except ModuleNotFoundError:
        usage_error(f"figures need matplotlib: {install_hint('plots')}")
    from mibspec._html_report import build_report_page, render_html
    from mibspec.core.outputs import OutputPathError, input_files, write_atomic

    result = run_verify(found[0], recompute=recompute, profile=profile, model_roots=model_root or ())
    page = build_report_page(result, found[0], k_axis=k_axis.value)
    if png_dir is not None:
        inputs = input_files(found)
        pngs = [(png_dir / f"{figure.name}.png", figure.data) for figure in page.figures]
        try:
            for target, _ in pngs:
                inputs.refuse(target, "--png-dir")
        except OutputPathError as exc:
            usage_error(str(exc))
        for target, data in pngs:
            write_atomic(target, data)
            typer.echo(visible(str(target)))
    if output is not None:
        write_atomic(output, render_html(page))
        typer.echo(visible(str(output)))
    for skipped in page.skipped:
        typer.echo(visible(f"figure {skipped.name} not drawn: {skipped.reason}"), err=True)
    verdict = "conformant" if result.valid else "not conformant"
    typer.echo(f"{visible(str(found[0]))}: {verdict}; {len(page.figures)} figure(s)", err=True)
    exit_on_internal_errors(result)
    raise typer.Exit(EXIT_OK if result.valid else EXIT_FINDINGS)


def leaderboard_command(
    directory: Annotated[Path, typer.Argument(help="Folder searched for report.json / *.report.json.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write to OUT.md (Markdown), OUT.html, or OUT.json (a leaderboard document that "
            "`mibspec verify` checks); default: Markdown on stdout.",
        ),
    ] = None,
    recompute: Annotated[bool, typer.Option("--recompute", help="Also run the recompute stage.")] = False,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Check under this profile instead of the declared ones.")
    ] = None,
    model_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."
        ),
    ] = None,
) -> None:
    """Verify every report below DIR and tabulate the conformant circuit reports (CPR, CMD)."""
    from mibspec._leaderboard import build_leaderboard, render_html, render_json, render_markdown
    from mibspec._verify_api import collect_paths
    from mibspec.core.outputs import write_atomic

    renderer = render_markdown
    if output is not None:
        suffix = output.suffix.lower()
        if suffix in (".html", ".htm"):
            renderer = render_html
        elif suffix == ".json":
            renderer = render_json
        elif suffix not in (".md", ".markdown"):
            usage_error(f"{output}: the output must end in .md, .html or .json")
    if not directory.is_dir():
        usage_error(f"{directory}: no such folder")
    _check_profile(profile)
    try:
        check_outputs_or_exit([(output, "--output")], collect_paths([directory]))
        board = build_leaderboard(
            directory, recompute=recompute, profile=profile, model_roots=model_root or ()
        )
    except FileNotFoundError as exc:
        usage_error(str(exc))
        return
    text = renderer(board)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
        typer.echo(
            f"{visible(str(output))}: {len(board.entries)} report(s) tabulated, "
            f"{len(board.rejected)} rejected, "
            f"{len(board.not_tabulated)} not tabulated"
        )
    raise typer.Exit(EXIT_FINDINGS if board.rejected else EXIT_OK)


def conformance_run_command(
    impl: Annotated[
        str | None,
        typer.Option(
            "--impl",
            help="Command of another implementation (see conformance/README.md); default: this one.",
        ),
    ] = None,
    suite: Annotated[
        Path | None, typer.Option("--suite", help="Suite folder (default: conformance/v1 of the checkout).")
    ] = None,
    result_format: Annotated[ResultFormat, typer.Option("--format", "-f", help="Result format.")] = (
        ResultFormat.ctrf
    ),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the results to this file.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds allowed per case for --impl.", min=0.1)] = 120.0,
) -> None:
    """Run the conformance suite and report CTRF JSON or JUnit XML (exit 1 when a case fails)."""
    from mibspec._conformance_run import default_suite, run_suite, to_ctrf, to_junit

    folder = suite if suite is not None else default_suite()
    if folder is None:
        usage_error(
            "no conformance/v1 folder here or above "
            "(the suite is not installed with the package); pass --suite"
        )
        return
    if not folder.is_dir():
        usage_error(f"{folder}: no such folder")
    check_outputs_or_exit([(output, "--output")], [folder])
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

        write_atomic(output, text)
    summary = f"{len(run.cases)} case(s): {run.passed} passed, {run.failed} failed"
    typer.echo(summary, err=output is None)
    for case in run.cases:
        if case.status == "failed":
            typer.echo(visible(f"  FAILED {case.name}: {case.message}"), err=output is None)
    raise typer.Exit(EXIT_FINDINGS if run.failed else EXIT_OK)


def migrate_command(
    source: Annotated[Path, typer.Argument(help="The document to migrate.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Where to write the result.")] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="Target spec version (default: the current one).")
    ] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Replace the input file.")] = False,
) -> None:
    """Migrate a document to another spec version (atomic write; the input is kept unless --in-place)."""
    from mibspec._migrate import MigrationError, UnreadableDocumentError, migrate_file

    if in_place and output is not None:
        usage_error("pass either -o OUT or --in-place, not both")
    if not in_place and output is None:
        usage_error("pass -o OUT (the input is kept) or --in-place (the input is replaced)")
    try:
        result = migrate_file(source, output, to_version=to, in_place=in_place)
    except UnreadableDocumentError as exc:
        for finding in exc.findings:
            where = f"{finding.line}:{finding.column}" if finding.line is not None else "1:1"
            pointer = f" at {finding.pointer}" if finding.pointer else ""
            typer.echo(
                visible(
                    f"{exc.path}:{where} {finding.code} {finding.severity.value}: {finding.message}{pointer}"
                )
            )
        raise typer.Exit(EXIT_FINDINGS) from None
    except (MigrationError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        usage_error(str(exc))
        return
    if result.already_current:
        typer.echo(
            f"{visible(str(source))} is already at spec {result.to_version}; "
            "nothing to migrate, nothing written"
        )
        raise typer.Exit(EXIT_OK)
    chain = " → ".join([result.from_version, *(step.to_version for step in result.steps)])
    typer.echo(visible(f"{source}: spec {chain}; written to {source if in_place else output}"))
    for step in result.steps:
        typer.echo(f"  {step.from_version} → {step.to_version}: {step.description}")
    raise typer.Exit(EXIT_OK)


def register(app: typer.Typer) -> None:
    """Add the commands to the ``mibspec`` application."""
    app.command("report")(report_command)
    app.command("leaderboard")(leaderboard_command)
    conformance_app = typer.Typer(help="Run the conformance suite.", no_args_is_help=True)
    conformance_app.command("run")(conformance_run_command)
    app.add_typer(conformance_app, name="conformance")
    app.command("migrate")(migrate_command)
