"""What every ``mibspec`` command shares: the exit codes, usage errors, the check that
outputs can be written and are not inputs, and the exit for documents mibspec failed on.

The commands live in the modules of :mod:`mibspec.cli`; they all import these from here.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import click

from mibspec.cli._options import Option
from mibspec.core.display import visible

if TYPE_CHECKING:
    from mibspec.validator import VerificationResult

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "IMPORT_CHECKS_ONLY",
    "FollowLinksOption",
    "OutputFormat",
    "check_outputs_or_exit",
    "check_profile_or_exit",
    "exit_on_internal_errors",
    "followed",
    "usage_error",
]

#: 0 conformant, 1 error-level findings, 2 usage error or unreadable path, 3 internal error.
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

#: The recompute stage's detail on what an import wrote: checked, not recomputed.
IMPORT_CHECKS_ONLY = (
    "not run by import, which checks what it wrote; `mibspec verify` on it recomputes its claims"
)


class OutputFormat(str, enum.Enum):
    """``--format`` of the commands that write text for people or JSON."""

    text = "text"
    json = "json"


#: ``--follow-output-links`` of every command that writes: outputs are not written through
#: symbolic links unless asked (a link planted in a scanned folder would send them elsewhere).
FollowLinksOption = Annotated[
    bool,
    Option(
        "--follow-output-links",
        help="Write outputs through symbolic links (by default an output that is, or passes "
        "through, a link is refused).",
    ),
]


def usage_error(message: str) -> NoReturn:
    """Print ``mibspec: error: MESSAGE`` (escaped) on stderr and exit 2."""
    click.echo(f"mibspec: error: {visible(message)}", err=True)
    raise click.exceptions.Exit(EXIT_USAGE)


def check_profile_or_exit(profile: str | None) -> None:
    """A usage error unless ``profile`` is ``None`` or a known profile."""
    from mibspec.validator import known_profiles

    if profile is not None and profile not in known_profiles():
        usage_error(f"unknown profile {profile!r}; known profiles: {', '.join(known_profiles())}")


def check_outputs_or_exit(
    files: Sequence[tuple[Path | None, str]],
    inputs: Iterable[str | os.PathLike[str]],
    *,
    folders: Sequence[tuple[Path | None, str]] = (),
    max_bytes: int = 64 * 1024 * 1024,
    follow_links: bool = False,
) -> None:
    """Before a command's work: a usage error unless every output can be written, none is
    (or links to) one of the ``inputs``, the files those declare as artifacts included, and
    none is or passes through a symbolic link (unless ``follow_links``)."""
    from mibspec.core.outputs import OutputPathError, check_outputs, input_files

    try:
        check_outputs(
            files, input_files(inputs, max_bytes=max_bytes), folders=folders, follow_links=follow_links
        )
    except OutputPathError as exc:
        usage_error(str(exc))


def followed(path: Path, follow_links: bool) -> Path:
    """The path to hand to library code that writes: with ``follow_links``, the file or folder
    the links on ``path`` name (the writer then meets no link), else ``path`` itself."""
    return Path(os.path.realpath(path)) if follow_links else path


def exit_on_internal_errors(result: VerificationResult) -> None:
    """Exit 3 naming each document mibspec itself failed on, once the output is written
    (every other document was verified and reported)."""
    for doc in result.internal_errors:
        click.echo(f"mibspec: {doc.path}: {doc.internal_error}", err=True)
    if result.internal_errors:
        raise click.exceptions.Exit(EXIT_INTERNAL)
