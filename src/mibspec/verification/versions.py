"""The versions of the libraries a verification imported, for its receipt.

Worker processes report which watched libraries they imported (:func:`note_imported`);
:func:`imported_versions` adds those of this process and reads their installed versions.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

__all__ = ["WATCHED_MODULES", "imported_versions", "note_imported", "watched_imports"]

#: Libraries whose versions a receipt records when a verification imported them.
WATCHED_MODULES = ("numpy", "scipy", "torch", "transformers", "safetensors", "tokenizers", "captum")

#: Watched libraries imported by the worker processes of this run.
_WORKER_IMPORTS: set[str] = set()


def watched_imports() -> list[str]:
    """The watched libraries this process has imported."""
    return [name for name in WATCHED_MODULES if name in sys.modules]


def note_imported(names: Iterable[str]) -> None:
    """Record watched libraries a worker process imported (its :func:`watched_imports`)."""
    _WORKER_IMPORTS.update(name for name in names if name in WATCHED_MODULES)


def imported_versions() -> dict[str, str]:
    """Installed versions of the watched libraries this process or its workers imported."""
    from importlib.metadata import PackageNotFoundError, version

    names = set(watched_imports()) | _WORKER_IMPORTS
    versions: dict[str, str] = {}
    for name in sorted(names):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:  # imported from a source tree, not installed
            module = sys.modules.get(name)
            versions[name] = str(getattr(module, "__version__", "unknown"))
    return versions
