"""``mibspec html``: verify a report and summarise it in one self-contained HTML page with
figures.

A thin layer over :mod:`mibspec.pages.html`; this module imports only click and the
standard library at import time.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    FollowLinksOption,
    check_outputs_or_exit,
    check_profile_or_exit,
    exit_on_internal_errors,
    usage_error,
)
from mibspec.core.display import visible

__all__ = ["html_command"]


class KAxis(str, enum.Enum):
    log = "log"
    linear = "linear"


def html_command(
    path: Annotated[Path, Argument(help="A report.json (or a folder holding exactly one report).")],
    output: Annotated[Path | None, Option("--output", "-o", help="Write the HTML page to this file.")] = None,
    png_dir: Annotated[
        Path | None, Option("--png-dir", help="Write every figure as <name>.png into this folder.")
    ] = None,
    recompute: Annotated[
        bool, Option("--recompute", help="Also run the recompute stage (claimed-vs-recomputed table).")
    ] = False,
    profile: Annotated[
        str | None, Option("--profile", help="Check under this profile instead of the declared one.")
    ] = None,
    k_axis: Annotated[KAxis, Option("--k-axis", help="k axis of the faithfulness figure.")] = KAxis.log,
    model_root: Annotated[
        list[Path] | None,
        Option(
            "--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."
        ),
    ] = None,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Verify a report and summarise it in one self-contained HTML page with figures."""
    from mibspec.core.spec import install_hint
    from mibspec.verification.api import collect_paths
    from mibspec.verification.api import verify as run_verify

    if output is None and png_dir is None:
        usage_error("nothing to write: pass -o OUT.html and/or --png-dir DIR")
    check_profile_or_exit(profile)
    try:
        found = collect_paths([path])
    except FileNotFoundError as exc:
        usage_error(str(exc))
        return
    if len(found) != 1:
        usage_error(f"{path} holds {len(found)} reports; pass one report file")
    check_outputs_or_exit(
        [(output, "--output")], found, folders=[(png_dir, "--png-dir")], follow_links=follow_output_links
    )
    try:
        import matplotlib  # noqa: F401  (only to fail early with a clear message)
    except ModuleNotFoundError:
        usage_error(f"figures need matplotlib: {install_hint('plots')}")
    from mibspec.core.outputs import OutputPathError, input_files, write_atomic
    from mibspec.pages.html import build_html_page, render_html

    result = run_verify(found[0], recompute=recompute, profile=profile, model_roots=model_root or ())
    page = build_html_page(result, found[0], k_axis=k_axis.value)
    if png_dir is not None:
        inputs = input_files(found)
        pngs = [(png_dir / f"{figure.name}.png", figure.data) for figure in page.figures]
        try:
            for target, _ in pngs:
                inputs.refuse(target, "--png-dir")
        except OutputPathError as exc:
            usage_error(str(exc))
        for target, data in pngs:
            write_atomic(target, data, follow_links=follow_output_links)
            click.echo(visible(str(target)))
    if output is not None:
        write_atomic(output, render_html(page), follow_links=follow_output_links)
        click.echo(visible(str(output)))
    for skipped in page.skipped:
        click.echo(visible(f"figure {skipped.name} not drawn: {skipped.reason}"), err=True)
    verdict = "conformant" if result.valid else "not conformant"
    click.echo(f"{visible(str(found[0]))}: {verdict}; {len(page.figures)} figure(s)", err=True)
    exit_on_internal_errors(result)
    raise click.exceptions.Exit(EXIT_OK if result.valid else EXIT_FINDINGS)
