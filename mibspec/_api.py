"""The Python API behind the command line."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mibspec._resources import spec_dir
from mibspec._version import __version__
from mibspec.validator import DEFAULT_LIMITS, Limits, VerificationResult, VerifyOptions, verify_paths

__all__ = ["SPEC_VERSION", "collect_paths", "schema_bundle_hash", "verify"]

SPEC_VERSION = "1.0"
REPORT_PATTERNS = ("report.json", "*.report.json")


def collect_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Expand directories to the report files below them (``report.json``, ``*.report.json``).

    Raises:
        FileNotFoundError: a path does not exist, or a directory holds no report.
    """
    found: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            reports = sorted({str(p) for pattern in REPORT_PATTERNS for p in path.rglob(pattern)})
            if not reports:
                raise FileNotFoundError(f"{raw}: no report.json or *.report.json below this folder")
            found.extend(reports)
        elif path.exists():
            found.append(str(raw))
        else:
            raise FileNotFoundError(f"{raw}: no such file or folder")
    return found


def verify(
    *paths: str | os.PathLike[str],
    recompute: bool = True,
    profile: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    model_roots: Iterable[str | os.PathLike[str]] = (),
    progress: Any = None,
) -> VerificationResult:
    """Verify documents (and every document they reference), as ``mibspec verify`` does.

    Args:
        paths: document files, or folders searched for ``report.json`` / ``*.report.json``.
        recompute: recompute claims from the declared artifacts (needs ``mibspec[recompute]``).
        profile: check under this profile instead of the one each report declares.
        limits: parse limits per document.
        model_roots: extra folders in which local model paths are looked up.
        progress: an object with ``start(description, total)`` and ``advance(steps=1)``
            that the recompute stage reports to (default: none).

    Returns:
        The verification result; ``result.valid`` is the verdict.

    Raises:
        FileNotFoundError: a path does not exist (a usage error, not a finding).
    """
    options = VerifyOptions(
        recompute=recompute,
        profile=profile,
        limits=limits,
        model_roots=tuple(Path(root) for root in model_roots),
        progress=progress,
    )
    return verify_paths(collect_paths(paths), options)


def schema_bundle_hash(version: str = SPEC_VERSION) -> str:
    """SHA-256 over the spec's schema files (names and bytes, in name order): what a citation pins."""
    digest = hashlib.sha256()
    for path in sorted((spec_dir(version) / "schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def tool_version() -> str:
    return __version__
