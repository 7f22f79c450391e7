"""The ``mibspec`` command: a thin layer over the Python API.

Its commands are listed in :mod:`mibspec.cli.table`, one module per command group beside
it; a command's module is imported only when that command runs (:mod:`mibspec.cli._lazy`).

Exit codes: 0 conformant, 1 error-level findings, 2 usage error or unreadable
path, 3 internal error.
"""

from __future__ import annotations

import os
import sys

import click

from mibspec.cli._lazy import LazyGroup
from mibspec.cli._support import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from mibspec.core.display import visible
from mibspec.core.version import __version__

__all__ = ["app", "main", "one_blas_thread"]


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from mibspec.core.spec import SPEC_VERSION

        click.echo(f"mibspec {__version__} (spec {SPEC_VERSION})")
        ctx.exit(EXIT_OK)


#: The ``mibspec`` command: the groups and commands of :data:`mibspec.cli.table.COMMANDS`.
app = LazyGroup(
    name="mibspec",
    help="Verify interpretability benchmark reports against the mibspec standard.",
    no_args_is_help=True,
    params=[
        click.Option(
            ["--version"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_version,
            help="Show the version and exit.",
        )
    ],
)


def one_blas_thread() -> None:
    """Run numpy's BLAS on one thread, and let idle OpenMP threads sleep, in this process
    (and the workers it starts), unless the environment says otherwise.

    OpenBLAS starts a pool of threads when numpy is imported; on verification's small
    matrices they cost more CPU than they win back (start-up, and the permutation test).
    Torch keeps its own threads, but they wait passively (``OMP_WAIT_POLICY=PASSIVE``): with
    the default, threads spinning between parallel regions on a machine whose cores are busy
    took the README's main job from 5 s to as much as 26 s, with four times the CPU time
    (``benchmarks/bench_steady.py``). Only the command line does this, before numpy or torch
    is imported; a library caller's process is left as it is.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    """Console entry point: maps every failure to a documented exit code, never a traceback."""
    one_blas_thread()
    from mibspec.core.environment import EnvironmentValueError, check_environment
    from mibspec.validator import InternalError

    try:  # before any work: a bad value is a usage error, not a failure after the work
        check_environment()
    except EnvironmentValueError as exc:
        click.echo(f"mibspec: error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)
    try:
        app.main(prog_name="mibspec", standalone_mode=True)
    except InternalError as exc:
        click.echo(f"mibspec: internal error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:  # a path the system refused: too long, unreadable, unwritable, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"mibspec: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a defect in mibspec, reported as such
        click.echo(f"mibspec: internal error: {type(exc).__name__}: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)
