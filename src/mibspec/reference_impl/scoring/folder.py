"""Writing a report folder: canonical JSON, sidecars, artifact entries with their hashes.

The producers write through :class:`OutputFolder`, and so do the scripts that build the
bundled examples and the conformance cases, so every generated folder is written and
hashed the same way.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.environment import environment_int
from mibspec.core.outputs import Inputs, write_atomic
from mibspec.core.sidecars import safetensors_bytes
from mibspec.documents import json_file_bytes

__all__ = [
    "OutputFolder",
    "artifact_entry",
    "created_timestamp",
    "json_bytes",
    "npy_bytes",
    "score_provenance",
]


def json_bytes(obj: Any) -> bytes:
    """Canonical document bytes: two-space indent, UTF-8, trailing newline (as
    :func:`mibspec.documents.document_bytes` writes a document built from its model)."""
    return json_file_bytes(obj)


def npy_bytes(array: Any) -> bytes:
    """A C-ordered ``.npy`` file of ``array``, without pickled objects."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def artifact_entry(
    data: bytes,
    ident: str,
    role: str,
    path: str,
    media_type: str,
    *,
    kind: str | None = None,
    rows: int | None = None,
) -> dict[str, Any]:
    """The artifact entry (spec: ``artifacts[]``) of a file with contents ``data``."""
    entry: dict[str, Any] = {
        "id": ident,
        "role": role,
        "path": path,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "media_type": media_type,
    }
    if rows is not None:
        entry["rows"] = rows
    if kind is not None:
        entry["kind"] = kind
    return entry


def created_timestamp() -> str:
    """RFC 3339 UTC time of creation; ``SOURCE_DATE_EPOCH`` pins it for reproducible output."""
    epoch = environment_int("SOURCE_DATE_EPOCH")
    utc = dt.timezone.utc  # datetime.UTC needs Python 3.11
    moment = (
        dt.datetime.fromtimestamp(epoch, tz=utc) if epoch is not None else dt.datetime.now(tz=utc)
    ).replace(microsecond=0)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def score_provenance(command: str, libraries: Iterable[str], created: str | None = None) -> dict[str, Any]:
    """The ``provenance`` of a report a ``mibspec score`` command writes: this tool's version,
    the creation time (``created``, else now), the installed versions of ``libraries`` in the
    order given (``python``: the interpreter's) and the command."""
    import platform
    from importlib.metadata import version

    from mibspec.core.version import __version__

    return {
        "tool": {"name": "mibspec", "version": __version__},
        "created": created_timestamp() if created is None else created,
        "libraries": {
            name: platform.python_version() if name == "python" else version(name) for name in libraries
        },
        "command": command,
    }


class OutputFolder:
    """A folder being written. Refuses to overwrite an existing report unless told to, and
    never overwrites one of the producer's ``inputs`` (its model, dataset, ...).

    Files are written atomically (:func:`mibspec.core.outputs.write_atomic`), so a file is
    either complete or absent.

    Raises:
        mibspec.core.outputs.OutputPathError: the folder is inside an input folder, or a file
            written is (or links to) an input.
    """

    def __init__(self, root: Path, *, overwrite: bool = False, inputs: Inputs | None = None) -> None:
        root = Path(root)
        self.inputs = inputs if inputs is not None else Inputs()
        self.inputs.refuse(root, "output folder")
        if (root / "report.json").exists() and not overwrite:
            raise FileExistsError(
                f"{root / 'report.json'} exists; choose another folder or allow overwriting"
            )
        root.mkdir(parents=True, exist_ok=True)
        self.root = root

    def write(self, name: str, data: bytes) -> str:
        """Write ``data`` to ``name`` (a path inside the folder; parent folders are made)."""
        target = self.root / name
        self.inputs.refuse(target, "output")
        write_atomic(target, data)
        return name

    def write_all(self, files: Mapping[str, bytes]) -> None:
        """Write each file of ``files`` (name → contents), in their order."""
        for name, data in files.items():
            self.write(name, data)

    def json(self, name: str, obj: Any) -> str:
        return self.write(name, json_bytes(obj))

    def jsonl(self, name: str, rows: Iterable[Any]) -> str:
        """One compact JSON value per line."""
        return self.write(name, b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows))

    def npy(self, name: str, array: Any) -> str:
        return self.write(name, npy_bytes(array))

    def safetensors(self, name: str, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> str:
        return self.write(name, safetensors_bytes(tensors, metadata))

    def artifact(
        self,
        ident: str,
        role: str,
        path: str,
        media_type: str,
        *,
        kind: str | None = None,
        rows: int | None = None,
        file: str | None = None,
    ) -> dict[str, Any]:
        """The artifact entry of ``path``, hashed from the file written at ``file``
        (default: ``path`` itself)."""
        data = (self.root / (file or path)).read_bytes()
        return artifact_entry(data, ident, role, path, media_type, kind=kind, rows=rows)
