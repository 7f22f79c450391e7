"""``mibspec leaderboard``: verify every report below a folder and tabulate the conformant ones.

A thin layer over :mod:`mibspec.pages.leaderboard`.
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
    check_outputs_or_exit,
    check_profile_or_exit,
    usage_error,
)
from mibspec.core.display import visible

__all__ = ["leaderboard_command"]


def leaderboard_command(
    directory: Annotated[Path, Argument(help="Folder searched for report.json / *.report.json.")],
    output: Annotated[
        Path | None,
        Option(
            "--output",
            "-o",
            help="Write to OUT.md (Markdown), OUT.html, or OUT.json (a leaderboard document that "
            "`mibspec verify` checks); default: Markdown on stdout.",
        ),
    ] = None,
    recompute: Annotated[bool, Option("--recompute", help="Also run the recompute stage.")] = False,
    profile: Annotated[
        str | None, Option("--profile", help="Check under this profile instead of the declared ones.")
    ] = None,
    model_root: Annotated[
        list[Path] | None,
        Option(
            "--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."
        ),
    ] = None,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Verify every report below DIR and tabulate the conformant circuit reports (CPR, CMD)."""
    from mibspec.core.outputs import write_atomic
    from mibspec.pages.leaderboard import build_leaderboard, render_html, render_json, render_markdown
    from mibspec.verification.api import collect_paths

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
    check_profile_or_exit(profile)
    try:
        check_outputs_or_exit(
            [(output, "--output")], collect_paths([directory]), follow_links=follow_output_links
        )
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
        write_atomic(output, text, follow_links=follow_output_links)
        click.echo(
            f"{visible(str(output))}: {len(board.entries)} report(s) tabulated, "
            f"{len(board.rejected)} rejected, "
            f"{len(board.not_tabulated)} not tabulated"
        )
    raise click.exceptions.Exit(EXIT_FINDINGS if board.rejected else EXIT_OK)
