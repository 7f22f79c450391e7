"""The spec's constants (version, document kinds) and its files, shipped with the package
(or beside it in a source checkout)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = [
    "KINDS",
    "KNOWN_SPEC_VERSIONS",
    "MIGRATION_EXTENSION",
    "SPEC_VERSION",
    "install_hint",
    "load_spec_json",
    "spec_dir",
]

#: The spec version this implementation writes.
SPEC_VERSION = "1.2"
#: The ``extensions`` key in which ``mibspec migrate --keep-invalid`` records the findings of a
#: document that did not verify before it was migrated (SPEC.md S-7); a document carrying
#: them is not conformant (C127).
MIGRATION_EXTENSION = "mibspec:migration"

#: Spec versions this implementation validates, mapped to their folder under ``spec/``.
KNOWN_SPEC_VERSIONS: dict[str, str] = {"1.0": "v1", "1.1": "v1", "1.2": "v1"}

#: The document kinds of the spec (the ``kind`` of every document), in the spec's order.
KINDS = (
    "report",
    "circuit",
    "featurizer",
    "counterfactual_dataset",
    "causal_model",
    "shortcut_dataset",
    "leaderboard",
)

_PACKAGE = Path(__file__).resolve().parents[1]  # src/mibspec (this file is src/mibspec/core/spec.py)


def _data_root(name: str) -> Path:
    # Installed wheel: mibspec/<name>. Editable install or source checkout: <repo>/<name>,
    # two levels above src/mibspec/.
    for candidate in (_PACKAGE / name, _PACKAGE.parents[1] / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mibspec data folder {name!r} not found beside {_PACKAGE}")


def spec_dir(version: str = SPEC_VERSION) -> Path:
    """The folder holding a spec version's schemas, profiles and texts."""
    return _data_root("spec") / KNOWN_SPEC_VERSIONS[version]


@functools.lru_cache(maxsize=64)
def load_spec_json(version: str, relative: str) -> Any:
    """A JSON file of the spec (cached; the spec is read-only at run time)."""
    with (spec_dir(version) / relative).open(encoding="utf-8") as handle:
        return json.load(handle)


def install_hint(extras: str) -> str:
    """How to install optional dependencies: mibspec is installed from its repository,
    not from a package index.

    >>> install_hint("plots")
    'pip install ".[plots]" (run in the mibspec repository)'
    """
    return f'pip install ".[{extras}]" (run in the mibspec repository)'
