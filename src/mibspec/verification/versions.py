"""Verifying many report files in worker processes, with the serial run's result.

The serial runner verifies each path in order and lists every document once, the
first time it is reached (a document referenced by two reports is listed under the
first). Here each report file is verified on its own (in units of several reports per
worker, see :mod:`mibspec.verification.grouping`); the parent merges the documents in input order
and keeps the first occurrence of each file, which gives the same list, in the same
order, as the serial run.
"""

from __future__ import annotations

import sys

from mibspec.validator import VerificationResult, VerifyOptions

__all__ = ["WATCHED_MODULES", "imported_versions", "verify_parallel"]

#: Libraries whose versions a receipt records when a verification imported them.
WATCHED_MODULES = ("numpy", "scipy", "torch", "transformers", "safetensors", "tokenizers", "captum")

#: Modules imported by the worker processes of this run (for :func:`imported_versions`).
_WORKER_IMPORTS: set[str] = set()


def verify_parallel(paths: list[str], options: VerifyOptions, jobs: int) -> VerificationResult:
    """Verify ``paths`` in ``jobs`` processes; the result equals ``verify_paths(paths, options)``.

    Work is split into units of reports and run by persistent workers (see
    :mod:`mibspec.verification.grouping`).
    """
    from mibspec.verification.grouping import verify_many

    return verify_many(paths, options, jobs)


def imported_versions() -> dict[str, str]:
    """Installed versions of the watched libraries this process or its workers imported."""
    from importlib.metadata import PackageNotFoundError, version

    names = {name for name in WATCHED_MODULES if name in sys.modules} | _WORKER_IMPORTS
    versions: dict[str, str] = {}
    for name in sorted(names):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:  # imported from a source tree, not installed
            module = sys.modules.get(name)
            versions[name] = str(getattr(module, "__version__", "unknown"))
    return versions
