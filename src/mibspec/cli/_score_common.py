"""What every ``mibspec score`` command does around its producer: check the paths it was
given, show the producer's progress, turn bad input into a usage error, verify the report
it wrote (without recomputation) and exit with the verdict."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import click

from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, check_outputs_or_exit, followed, usage_error
from mibspec.core.display import visible
from mibspec.core.progress import Progress


def require_paths(paths: Iterable[tuple[Path, str]], *, files: bool = False) -> None:
    """A usage error for the first ``(path, what)`` that does not exist (or is no file)."""
    for path, what in paths:
        if not (path.is_file() if files else path.exists()):
            usage_error(f"{what} {path} does not exist")


def check_output_folder(out_dir: Path, inputs: Iterable[Path | None], follow_links: bool = False) -> Path:
    """Before the run: a usage error unless ``out_dir`` can be written, is neither an input
    file nor inside an input folder (the files written are checked as they are) and is no
    symbolic link and passes through none (unless ``follow_links``). Returns the folder to
    write into."""
    check_outputs_or_exit(
        [],
        [path for path in inputs if path is not None],
        folders=[(out_dir, "--output")],
        follow_links=follow_links,
    )
    return followed(out_dir, follow_links)


@contextlib.contextmanager
def producing(needs: str, extras: str) -> Iterator[Progress]:
    """A progress bar for the producer run inside the block; its bad-input errors
    (``ValueError``, ``FileExistsError``, ``OSError``) and a missing optional dependency
    (``ImportError``) become usage errors; the latter says ``needs`` (``"scoring needs"``)
    the extras ``extras`` (``"recompute"``) and how to install them."""
    from mibspec.verification.progress import TerminalProgress

    with TerminalProgress() as bar:
        try:
            yield bar
        except ImportError as exc:
            from mibspec.core.spec import install_hint

            usage_error(f"{needs} the {extras} extra ({exc}): {install_hint(extras)}")
        except FileExistsError as exc:  # the library's words for its overwrite flag, with the option's
            usage_error(f"{exc} (--overwrite)")
        except (ValueError, OSError) as exc:
            usage_error(str(exc))


def verify_written(report: Any) -> bool:
    """Verify the report a producer wrote (no recomputation); say so; return the verdict."""
    from mibspec.verification import verify

    valid = verify(report, recompute=False).valid
    verdict = "conformant" if valid else "NOT conformant"
    click.echo(f"wrote {visible(str(report))} ({verdict} without recomputation)")
    return valid


def finish(valid: bool) -> NoReturn:

    raise click.exceptions.Exit(EXIT_OK if valid else EXIT_FINDINGS)
