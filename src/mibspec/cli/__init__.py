"""The ``mibspec`` command: a thin layer over the Python API.

Its commands are listed in :mod:`mibspec.cli.table`, one module per command group beside
it; a command's module is imported only when that command runs (:mod:`mibspec.cli._lazy`).

Exit codes: 0 conformant, 1 error-level findings, 2 usage error or unreadable
path, 3 internal error.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from mibspec.cli._lazy import LazyGroup
from mibspec.cli._support import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from mibspec.core.display import visible
from mibspec.core.version import __version__

__all__ = ["app", "main", "one_blas_thread"]

app = typer.Typer(
    name="mibspec",
    cls=LazyGroup,
    help="Verify interpretability benchmark reports against the mibspec standard.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from mibspec.core.spec import SPEC_VERSION

        typer.echo(f"mibspec {__version__} (spec {SPEC_VERSION})")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Verify interpretability benchmark reports against the mibspec standard."""


def one_blas_thread() -> None:
    """Run numpy's BLAS on one thread in this process, unless the environment says otherwise.

    OpenBLAS starts a pool of threads when numpy is imported; on verification's small
    matrices they cost more CPU than they win back (start-up, and the permutation test).
    Only the command line does this, before numpy is imported; torch keeps its own threads,
    and a library caller's process is left as it is.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    """Console entry point: maps every failure to a documented exit code, never a traceback."""
    one_blas_thread()
    from mibspec.validator import InternalError

    try:
        app(standalone_mode=True)
    except InternalError as exc:
        typer.echo(f"mibspec: internal error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:  # a path the system refused: too long, unreadable, unwritable, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"mibspec: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a defect in mibspec, reported as such
        typer.echo(f"mibspec: internal error: {type(exc).__name__}: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)
