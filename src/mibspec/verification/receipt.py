"""Verification receipts: write one after ``mibspec verify``, check one later by re-hashing.

The receipt's format is :class:`mibspec.documents.Receipt`
(``spec/v1/schemas/receipt.schema.json``). Writing it reads every verified document
again, and every artifact each document declares, and hashes them (SHA-256, streamed);
the model files recomputation used are listed with the hash of the bytes it used.
A file the verification refused unread is not hashed either: an artifact whose size
differs from the declared one (A104), a document over the size limit (P107); it is
recorded with its size and the reason (``refused``). An artifact path that leaves its
document's folder is not recorded, as the rules stage refused it (A101).

Every file a receipt names lies inside the receipt's folder (its paths have no ``..``),
so a receipt is written into a folder that holds every verified file and every model
root. Checking re-hashes the same files and compares; nothing is parsed or recomputed.
A receipt naming a path that is absolute, climbs out with ``..`` or leads out through a
symbolic link is refused before anything is hashed.
"""

from __future__ import annotations

import json
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from mibspec.core.files import sha256_file
from mibspec.validator import Stage, StageStatus, VerificationResult

__all__ = [
    "ReceiptCheck",
    "ReceiptError",
    "build_receipt",
    "check_receipt",
    "outside_folder",
    "write_receipt",
]

RECEIPT_VERSION = "1.0"


class ReceiptError(ValueError):
    """The receipt file cannot be read or is not a receipt (a usage error)."""


def _sha256(path: Path) -> tuple[str, int] | None:
    """SHA-256 (hex) and size of a regular file, or ``None`` when it cannot be read."""
    try:
        return sha256_file(path), path.stat().st_size
    except OSError:
        return None


def _inside(path: Path, base: Path) -> bool:
    """Whether the resolved ``path`` is ``base`` or below it (``base`` resolved)."""
    return path == base or base in path.parents


def outside_folder(paths: list[str], receipt_path: str | os.PathLike[str]) -> str | None:
    """The first of ``paths`` (links resolved) outside the receipt's folder, or None.

    A receipt names files by paths inside its own folder, so it must be written into a
    folder that holds every file it pins.
    """
    base = Path(receipt_path).resolve().parent
    for path in paths:
        if not _inside(Path(path).resolve(), base):
            return path
    return None


def _relative(path: Path, base: Path) -> str:
    """``path`` relative to ``base``, '/'-separated; both resolved, ``path`` inside ``base``.

    Raises:
        ReceiptError: ``path`` is outside ``base`` (the receipt could not name it).
    """
    if not _inside(path, base):
        raise ReceiptError(
            f"{path} is outside the receipt's folder {base}: write the receipt into a folder "
            "that holds every verified file"
        )
    return path.relative_to(base).as_posix()


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size if path.is_file() else None
    except OSError:
        return None


def build_receipt(
    result: VerificationResult, receipt_path: str | os.PathLike[str], options: dict[str, Any]
) -> dict[str, Any]:
    """The receipt of ``result`` as a JSON-ready dict (paths relative to ``receipt_path``'s folder).

    ``options`` are the verification's options: ``recompute``, ``profile``, ``select``,
    ``ignore``, ``error_on_warning``, ``max_bytes`` (the document size limit it ran
    with; default: the default limit), ``batch_size`` (listed unless ``None``) and
    ``device`` (where recomputation ran, listed in the environment unless ``None``).

    Raises:
        ReceiptError: a verified file lies outside the receipt's folder.
    """
    from mibspec.core.version import __version__
    from mibspec.validator import DEFAULT_LIMITS
    from mibspec.verification.api import SPEC_VERSION, schema_bundle_hash
    from mibspec.verification.versions import imported_versions

    base = Path(receipt_path).resolve().parent
    files = _receipt_files(result, base, options.get("max_bytes", DEFAULT_LIMITS.max_bytes))
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
            **({"device": str(options["device"])} if options.get("device") is not None else {}),
        },
        "options": {
            "recompute": bool(options.get("recompute", True)),
            "profile": options.get("profile"),
            "select": list(options.get("select", [])),
            "ignore": list(options.get("ignore", [])),
            "error_on_warning": bool(options.get("error_on_warning", False)),
            **({"batch_size": options["batch_size"]} if options.get("batch_size") is not None else {}),
        },
        "valid": result.valid,
        "files": files,
        "documents": [doc.to_json() for doc in result.documents],
    }


def _receipt_files(result: VerificationResult, base: Path, max_bytes: int) -> list[dict[str, Any]]:
    """Every file the verification read, once each: the documents, their artifacts, the model files."""
    from mibspec.core.outputs import declared_files

    files = _FileList(base)
    for doc in result.documents:
        size = _size(Path(doc.path))
        too_large = size is not None and size > max_bytes
        refused = f"over the document size limit of {max_bytes} bytes (P107)" if too_large else None
        files.add(Path(doc.path), "document", doc.path, None, refused)
    for doc in result.documents:
        if doc.stages[Stage.PARSE][0] is not StageStatus.PASSED:
            continue
        for artifact_id, target, declared in declared_files(Path(doc.path)):
            if target is None:
                continue
            size = _size(target)
            refused = None
            if size is not None and size != declared:  # A104: not hashed by the rules stage
                refused = f"its size, {size} bytes, differs from the declared {declared!r} (A104)"
            files.add(target, "artifact", doc.path, artifact_id, refused)
    for doc in result.documents:
        # the hash of the bytes recomputation used, not of the file as it is now
        for used in doc.model_files:
            files.add(Path(used.path), "model", doc.path, hashed=(used.sha256, used.size))
    return files.entries


class _FileList:
    """The receipt's file entries, paths relative to ``base``; a file listed once, first role kept."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.entries: list[dict[str, Any]] = []
        self.seen: set[Path] = set()

    def add(
        self,
        path: Path,
        role: str,
        document: str,
        artifact_id: str | None = None,
        refused: str | None = None,
        hashed: tuple[str, int] | None = None,
    ) -> None:
        resolved = path.resolve()
        if resolved in self.seen:
            return
        self.seen.add(resolved)
        entry: dict[str, Any] = {"path": _relative(resolved, self.base), "role": role}
        if refused is None:
            if hashed is None:
                hashed = _sha256(resolved) if resolved.is_file() else None
            entry.update(sha256=hashed[0] if hashed else None, bytes=hashed[1] if hashed else None)
        else:  # the verification did not read it: neither does the receipt
            entry.update(sha256=None, bytes=_size(resolved))
        entry["document"] = document
        if artifact_id is not None:
            entry["artifact_id"] = artifact_id
        if refused is not None:
            entry["refused"] = refused
        self.entries.append(entry)


def write_receipt(
    result: VerificationResult,
    receipt_path: str | os.PathLike[str],
    options: dict[str, Any],
    *,
    follow_links: bool = False,
) -> dict[str, Any]:
    """Build the receipt, check it against its model, and write it atomically (UTF-8,
    two-space indent; missing folders are made; a link at ``receipt_path`` is followed only
    with ``follow_links``)."""
    from mibspec.core.outputs import write_atomic
    from mibspec.documents import Receipt

    receipt = build_receipt(result, receipt_path, options)
    Receipt.model_validate(receipt)  # a defect here is mibspec's, not the input's
    write_atomic(
        receipt_path, json.dumps(receipt, indent=2, ensure_ascii=False) + "\n", follow_links=follow_links
    )
    return receipt


@dataclass(frozen=True)
class FileCheck:
    """One file of a receipt, hashed again. ``status``: unchanged, changed or missing."""

    path: str
    role: str
    status: str
    expected: str | None
    actual: str | None
    #: Why the verification refused the file unread; it is then compared by size alone.
    refused: str | None = None
    #: (size now, size in the receipt) of a file whose size changed: it is not hashed.
    size: tuple[int, int] | None = None


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
        for f in self.files:
            if f.refused is not None and f.status == "unchanged":
                out.append(f"unhashed {f.path} ({f.role}): refused unread, {f.refused}; size unchanged")
        for f in self.changed:
            if f.refused is not None:
                out.append(f"{f.status:<8} {f.path} ({f.role}): refused unread, its size differs")
            elif f.size is not None:
                out.append(
                    f"changed  {f.path} ({f.role}): {f.size[0]} bytes, receipt {f.size[1]} bytes (not hashed)"
                )
            elif f.status == "missing":
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
            "files": [
                {
                    key: list(value) if key == "size" and value else value
                    for key, value in f.__dict__.items()
                    if key not in ("refused", "size") or value
                }
                for f in self.files
            ],
            "schema_bundle": {
                "receipt": self.bundle_expected,
                "installed": self.bundle_actual,
                "unchanged": self.bundle_unchanged,
            },
        }


def check_receipt(receipt_path: str | os.PathLike[str]) -> ReceiptCheck:
    """Re-hash every file a receipt lists and compare with the recorded SHA-256.

    A file recorded as unreadable (``sha256`` null) is unchanged while it still cannot
    be read; a file the verification refused unread (``refused``) is never hashed, only
    its size is compared. A file whose size differs from the recorded one is changed and is
    not hashed either. The installed spec's schema bundle is compared too.

    Raises:
        ReceiptError: the receipt cannot be read, is not strict JSON, does not match
            the receipt schema, or names a file outside its own folder.
    """
    from pydantic import ValidationError

    from mibspec.documents import Receipt
    from mibspec.validator import load_json_file
    from mibspec.verification.api import schema_bundle_hash

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
    targets = [_contained(base, index, entry.path, receipt_path) for index, entry in enumerate(receipt.files)]
    for entry, target in zip(receipt.files, targets, strict=True):
        if entry.refused is not None:  # never hashed: only its size is compared
            size = _size(target)
            status = "missing" if size is None else "unchanged" if size == entry.bytes else "changed"
            check.files.append(FileCheck(entry.path, entry.role, status, None, None, entry.refused))
            continue
        size = _size(target)
        if size is not None and entry.bytes is not None and size != entry.bytes:
            # a file of another size has another hash: it is never read (a 20 GiB sparse file)
            check.files.append(
                FileCheck(entry.path, entry.role, "changed", entry.sha256, None, size=(size, entry.bytes))
            )
            continue
        hashed = _sha256(target) if size is not None else None
        actual = hashed[0] if hashed else None
        if actual == entry.sha256:
            status = "unchanged"
        elif actual is None:
            status = "missing"
        else:
            status = "changed"
        check.files.append(FileCheck(entry.path, entry.role, status, entry.sha256, actual))
    return check


def _unsafe(path: str) -> str | None:
    """Why a receipt's path cannot name a file inside the receipt's folder, or None."""
    if path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", path):
        return "is absolute"
    if "\x00" in path:
        return "contains a NUL character"
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:  # a backslash separates on Windows
        return "climbs out of the receipt's folder with '..'"
    return None


def _contained(base: Path, index: int, path: str, receipt_path: str | os.PathLike[str]) -> Path:
    """``base/path`` when it stays inside ``base`` (``base`` resolved), links resolved.

    Raises:
        ReceiptError: the path is absolute, climbs out with ``..``, or leads out of the
            receipt's folder through a symbolic link (checked for every entry before any
            file is hashed).
    """
    reason = _unsafe(path)
    target: Path | None = None
    if reason is None:
        try:
            target = (base / path).resolve()
        except (OSError, RuntimeError):  # a link loop
            reason = "cannot be resolved (a symbolic link loop)"
        else:
            if not _inside(target, base):
                reason = "resolves outside the receipt's folder through a symbolic link"
    if reason is not None or target is None:
        raise ReceiptError(
            f"{receipt_path}: files/{index}/path {path!r} {reason}; a receipt names only files "
            "inside its own folder, so nothing was hashed"
        )
    return target
