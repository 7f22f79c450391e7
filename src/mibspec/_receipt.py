"""Verification receipts: write one after ``mibspec verify``, check one later by re-hashing.

The receipt's format is :class:`mibspec.documents.Receipt`
(``spec/v1/schemas/receipt.schema.json``). Writing it reads every verified document
again, and every artifact each document declares, and hashes them (SHA-256, streamed).
An artifact path that leaves its document's folder is recorded unread (``sha256``
null), as the rules stage refused it (A101). Checking re-hashes the same files and
compares; nothing is parsed or recomputed.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.files import sha256_file
from mibspec.validator import Stage, StageStatus, VerificationResult

__all__ = ["ReceiptCheck", "ReceiptError", "build_receipt", "check_receipt", "write_receipt"]

RECEIPT_VERSION = "1.0"


class ReceiptError(ValueError):
    """The receipt file cannot be read or is not a receipt (a usage error)."""


def _sha256(path: Path) -> tuple[str, int] | None:
    """SHA-256 (hex) and size of a regular file, or ``None`` when it cannot be read."""
    try:
        return sha256_file(path), path.stat().st_size
    except OSError:
        return None


def _relative(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path, base)).as_posix()
    except ValueError:  # another drive: no relative path exists
        return path.as_posix()


def _declared_artifacts(document: Path) -> list[tuple[str, Path | None]]:
    """(artifact id, file) for each artifact entry; the file is ``None`` when it leaves the folder."""
    try:
        data = json.loads(document.read_bytes())
    except (OSError, ValueError):
        return []
    entries = data.get("artifacts") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    folder = document.parent.resolve()
    found: list[tuple[str, Path | None]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            continue
        artifact_id = entry.get("id")
        target = (folder / entry["path"]).resolve()
        inside = target == folder or folder in target.parents
        found.append((str(artifact_id) if artifact_id is not None else "", target if inside else None))
    return found


def build_receipt(
    result: VerificationResult, receipt_path: str | os.PathLike[str], options: dict[str, Any]
) -> dict[str, Any]:
    """The receipt of ``result`` as a JSON-ready dict (paths relative to ``receipt_path``'s folder).

    ``options`` are the verification's options: ``recompute``, ``profile``, ``select``,
    ``ignore``, ``error_on_warning``.
    """
    from mibspec._api import SPEC_VERSION, schema_bundle_hash
    from mibspec._batch import imported_versions
    from mibspec.core.version import __version__

    base = Path(receipt_path).resolve().parent
    files: list[dict[str, Any]] = []
    seen: set[Path] = set()

    def add(path: Path, role: str, document: str, artifact_id: str | None = None) -> None:
        resolved = path.resolve()
        if resolved in seen:
            return
        seen.add(resolved)
        hashed = _sha256(resolved) if resolved.is_file() else None
        entry: dict[str, Any] = {
            "path": _relative(resolved, base),
            "role": role,
            "sha256": hashed[0] if hashed else None,
            "bytes": hashed[1] if hashed else None,
            "document": document,
        }
        if artifact_id is not None:
            entry["artifact_id"] = artifact_id
        files.append(entry)

    for doc in result.documents:
        add(Path(doc.path), "document", doc.path)
    for doc in result.documents:
        if doc.stages[Stage.PARSE][0] is not StageStatus.PASSED:
            continue
        for artifact_id, target in _declared_artifacts(Path(doc.path)):
            if target is None:
                continue
            add(target, "artifact", doc.path, artifact_id)
    return {
        "receipt_version": RECEIPT_VERSION,
        "tool": {"name": "mibspec", "version": __version__},
        "spec": {
            "version": result.spec_version or SPEC_VERSION,
            "schema_bundle_sha256": schema_bundle_hash(result.spec_version or SPEC_VERSION),
        },
        "environment": {
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "packages": imported_versions(),
        },
        "options": {
            "recompute": bool(options.get("recompute", True)),
            "profile": options.get("profile"),
            "select": list(options.get("select", [])),
            "ignore": list(options.get("ignore", [])),
            "error_on_warning": bool(options.get("error_on_warning", False)),
        },
        "valid": result.valid,
        "files": files,
        "documents": [doc.to_json() for doc in result.documents],
    }


def write_receipt(
    result: VerificationResult, receipt_path: str | os.PathLike[str], options: dict[str, Any]
) -> dict[str, Any]:
    """Build the receipt, check it against its model, and write it (UTF-8, two-space indent)."""
    from mibspec.documents import Receipt

    receipt = build_receipt(result, receipt_path, options)
    Receipt.model_validate(receipt)  # a defect here is mibspec's, not the input's
    path = Path(receipt_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(receipt, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return receipt


@dataclass(frozen=True)
class FileCheck:
    """One file of a receipt, hashed again. ``status``: unchanged, changed or missing."""

    path: str
    role: str
    status: str
    expected: str | None
    actual: str | None


@dataclass
class ReceiptCheck:
    """The outcome of :func:`check_receipt`."""

    receipt: str
    files: list[FileCheck] = field(default_factory=list)
    bundle_expected: str = ""
    bundle_actual: str = ""
    tool_version: str = ""

    @property
    def changed(self) -> list[FileCheck]:
        return [f for f in self.files if f.status != "unchanged"]

    @property
    def bundle_unchanged(self) -> bool:
        return self.bundle_expected == self.bundle_actual

    @property
    def unchanged(self) -> bool:
        return not self.changed and self.bundle_unchanged

    def lines(self) -> list[str]:
        """Text output: one line per change, then the verdict."""
        out = []
        for f in self.changed:
            if f.status == "missing":
                out.append(f"missing  {f.path} ({f.role}; receipt sha256 {f.expected})")
            else:
                out.append(f"changed  {f.path} ({f.role}): sha256 {f.actual}, receipt {f.expected}")
        if not self.bundle_unchanged:
            out.append(
                f"changed  spec schema bundle: sha256 {self.bundle_actual}, receipt {self.bundle_expected}"
            )
        total = len(self.files)
        if self.unchanged:
            out.append(f"PASS {total} file(s) and the spec schema bundle match the receipt")
        else:
            bundle = "" if self.bundle_unchanged else " and the spec schema bundle differs"
            out.append(f"FAIL {len(self.changed)} of {total} file(s) changed since the receipt{bundle}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "receipt": self.receipt,
            "unchanged": self.unchanged,
            "files": [f.__dict__ for f in self.files],
            "schema_bundle": {
                "receipt": self.bundle_expected,
                "installed": self.bundle_actual,
                "unchanged": self.bundle_unchanged,
            },
        }


def check_receipt(receipt_path: str | os.PathLike[str]) -> ReceiptCheck:
    """Re-hash every file a receipt lists and compare with the recorded SHA-256.

    A file recorded as unreadable (``sha256`` null) is unchanged while it still cannot
    be read. The installed spec's schema bundle is compared too.

    Raises:
        ReceiptError: the receipt cannot be read, is not strict JSON, or does not match
            the receipt schema.
    """
    from pydantic import ValidationError

    from mibspec._api import schema_bundle_hash
    from mibspec.documents import Receipt
    from mibspec.validator import load_json_file

    path = Path(receipt_path)
    try:
        parsed = load_json_file(path)
    except OSError as exc:
        raise ReceiptError(f"{receipt_path}: cannot read the receipt ({exc.strerror or exc})") from exc
    if parsed.problems:
        raise ReceiptError(f"{receipt_path}: not strict JSON: {parsed.problems[0].message}")
    try:
        receipt = Receipt.model_validate(parsed.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        pointer = "/" + "/".join(str(part) for part in first["loc"])
        raise ReceiptError(f"{receipt_path}: not a receipt: {first['msg']} at {pointer}") from exc
    base = path.resolve().parent
    try:
        bundle = schema_bundle_hash(receipt.spec.version)
    except KeyError:  # a spec version this installation does not carry
        bundle = f"(spec {receipt.spec.version} is not installed)"
    check = ReceiptCheck(
        receipt=str(receipt_path),
        bundle_expected=receipt.spec.schema_bundle_sha256,
        bundle_actual=bundle,
        tool_version=receipt.tool.version,
    )
    for entry in receipt.files:
        target = base / entry.path
        hashed = _sha256(target) if target.is_file() else None
        actual = hashed[0] if hashed else None
        if actual == entry.sha256:
            status = "unchanged"
        elif actual is None:
            status = "missing"
        else:
            status = "changed"
        check.files.append(FileCheck(entry.path, entry.role, status, entry.sha256, actual))
    return check
