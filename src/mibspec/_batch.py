"""Verifying many report files in worker processes, with the serial run's result.

The serial runner verifies each path in order and lists every document once, the
first time it is reached (a document referenced by two reports is listed under the
first). Here each worker verifies one report file on its own; the parent merges the
workers' documents in input order and keeps the first occurrence of each file, which
gives the same list, in the same order, as the serial run.
"""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from mibspec.validator import (
    DocumentResult,
    VerificationResult,
    VerifyOptions,
    printable_path,
    record_internal_error,
    verify_paths,
)

__all__ = ["WATCHED_MODULES", "imported_versions", "verify_parallel"]

#: Libraries whose versions a receipt records when a verification imported them.
WATCHED_MODULES = ("numpy", "scipy", "torch", "transformers", "safetensors", "tokenizers", "captum")

#: Modules imported by the worker processes of this run (for :func:`imported_versions`).
_WORKER_IMPORTS: set[str] = set()


def _verify_one(path: str, options: VerifyOptions) -> tuple[list[DocumentResult], list[str]]:
    result = verify_paths([path], options)
    return result.documents, [name for name in WATCHED_MODULES if name in sys.modules]


def verify_parallel(paths: list[str], options: VerifyOptions, jobs: int) -> VerificationResult:
    """Verify ``paths`` in ``jobs`` processes; the result equals ``verify_paths(paths, options)``."""
    # "spawn": a fresh interpreter per worker, the same on every platform, and safe after
    # a parent has imported libraries that keep threads (fork would copy their locks).
    context = multiprocessing.get_context("spawn")
    documents: list[DocumentResult] = []
    seen: set[Path] = set()
    with ProcessPoolExecutor(max_workers=min(jobs, len(paths)), mp_context=context) as pool:
        futures = [pool.submit(_verify_one, path, options) for path in paths]
        for path, future in zip(paths, futures, strict=True):
            try:
                docs, imported = future.result()
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                raise  # an unreadable input: a usage error, as in the serial run
            except Exception as exc:  # the worker itself failed (killed, out of memory, ...)
                failed = DocumentResult(path=printable_path(path))
                record_internal_error(failed, exc)
                docs, imported = [failed], []
            _WORKER_IMPORTS.update(imported)
            for doc in docs:
                key = Path(doc.path).resolve()
                if key not in seen:
                    seen.add(key)
                    documents.append(doc)
    return VerificationResult(documents=documents, profile=options.profile)


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
