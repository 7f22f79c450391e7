"""Shared by every case: constants, the case folder, and the case registry (``@case``)."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import pickle
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from mibspec.documents import dump, parse_document
from mibspec.reference_impl.scoring.folder import OutputFolder

Json = dict[str, Any]

# --------------------------------------------------------------------------- constants

GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
CREATED = "2025-06-02T09:30:00Z"
PROVENANCE: Json = {
    "tool": {"name": "mibspec-conformance", "version": "1.0"},
    "created": CREATED,
}
# Revisions are fixed strings of the right form; conformance checks only their shape.
GPT2_REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
QWEN_REVISION = "060db6499f32faf8b98477b0a26969ef7d8b9987"
INTERPBENCH_REVISION = "3c1c8f6f5b1a2e4d9f0a7b6c5d4e3f2a1b0c9d8e"

GPT2_SMALL: Json = {
    "source": "hub",
    "id": "openai-community/gpt2",
    "revision": GPT2_REVISION,
    "architecture": "GPT2LMHeadModel",
    "dtype": "float32",
    "config": {"n_layers": 12, "n_heads": 12, "d_model": 768, "vocab_size": 50257},
}
QWEN_05B: Json = {
    "source": "hub",
    "id": "Qwen/Qwen2.5-0.5B",
    "revision": QWEN_REVISION,
    "architecture": "Qwen2ForCausalLM",
    "dtype": "float32",
    "config": {"n_layers": 24, "n_heads": 14, "n_kv_heads": 2, "d_model": 896, "vocab_size": 151936},
}
INTERPBENCH: Json = {
    "source": "hub",
    "id": "mib-bench/interpbench",
    "revision": INTERPBENCH_REVISION,
    "architecture": "HookedTransformer-siit",
    "dtype": "float32",
    "config": {"n_layers": 6, "n_heads": 4, "d_model": 64},
}
TINY_MODEL: Json = {
    "source": "local",
    "path": "models/tiny-gpt2-4l4h",
    "architecture": "GPT2LMHeadModel",
    "dtype": "float32",
    "config": {"n_layers": 4, "n_heads": 4, "d_model": 32, "vocab_size": 512},
}
TINY_CNN: Json = {
    "source": "registry",
    "architecture": "tiny-cnn-v1",
    "dtype": "float32",
    "weights": "weights",
}


def document(kind: str, fields: Json) -> Json:
    """A base document of ``kind`` in the spec version of this suite, as the JSON data cases edit.

    Built from the typed model of its kind (:mod:`mibspec.documents`), so valid by
    construction, and dumped by the documents' serialiser: it writes the spec version and
    the kind, and the keys follow the model's field order whatever the order of ``fields``.
    """
    return dump(parse_document(kind, fields))


# --------------------------------------------------------------------------- writing files


def pickled_npy_bytes() -> bytes:
    """A version 1.0 ``.npy`` file holding an object array (a pickle, which readers must refuse).

    Written by hand so the bytes do not depend on the numpy version; the pickle is a
    plain list of two strings (harmless), protocol 3.
    """
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"
    pad = 64 - (10 + len(header) + 1) % 64
    text = (header + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + pickle.dumps(["a", "b"], protocol=3)


class Folder(OutputFolder):
    """A case folder being written; artifact entries are computed from the files in it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, overwrite=True)

    def symlink(self, name: str, target: str) -> None:
        os.symlink(target, self.root / name)


_F = TypeVar("_F", bound=Callable[..., Json])


def fresh(fn: _F) -> _F:
    """Return a deep copy of the built document, so cases can edit it without touching shared constants."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Json:
        return copy.deepcopy(fn(*args, **kwargs))

    return wrapper  # type: ignore[return-value]


# --------------------------------------------------------------------------- the case registry

Finding = tuple[str, str] | tuple[str, str, str]  # (code, pointer) or (code, pointer, document)


@dataclass(frozen=True)
class Case:
    kind: str
    verdict: str
    id: str
    requirements: tuple[str, ...]
    description: str
    build: Callable[[Folder], None]
    findings: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    document: str | None = None
    max_bytes: int | None = None
    max_depth: int | None = None

    @property
    def folder(self) -> str:
        return f"{self.kind}/{self.verdict}/{self.id}"

    def expected(self) -> Json:
        def entries(items: tuple[Finding, ...]) -> list[Json]:
            out = []
            for item in items:
                entry = {"code": item[0], "pointer": item[1]}
                if len(item) == 3:
                    entry["document"] = item[2]
                out.append(entry)
            return out

        data: Json = {
            "id": self.id,
            "kind": self.kind,
            "verdict": self.verdict,
            "requirements": list(self.requirements),
            "description": self.description,
        }
        if self.document:
            data["document"] = self.document
        data["findings"] = entries(self.findings)
        if self.warnings:
            data["warnings"] = entries(self.warnings)
        if self.max_bytes is not None:
            data["max_bytes"] = self.max_bytes
        if self.max_depth is not None:
            data["max_depth"] = self.max_depth
        return data


_REGISTERED: dict[str, list[Case]] = {}  # module name → its cases, in definition order


def case(
    kind: str,
    requirements: str,
    description: str,
    *findings: Finding,
    **options: Any,
) -> Callable[[Callable[[Folder], None]], Callable[[Folder], None]]:
    """Register a case; its id is the function's name with hyphens, its verdict follows from findings."""

    def register(fn: Callable[[Folder], None]) -> Callable[[Folder], None]:
        verdict = "invalid" if findings else "valid"
        ident = fn.__name__.replace("_", "-")
        _REGISTERED.setdefault(fn.__module__, []).append(
            Case(kind, verdict, ident, tuple(requirements.split()), description, fn, findings, **options)
        )
        return fn

    return register


def cases_of(module: ModuleType) -> list[Case]:
    """The cases ``module`` registered, in the order it defines them."""
    return list(_REGISTERED.get(module.__name__, ()))


def save(folder: Folder, doc: Json, name: str = "document.json") -> None:
    folder.json(name, doc)


def rehash(folder: Folder, doc: Json) -> Json:
    """Recompute the sha256 and size of every artifact of ``doc`` whose file exists (after an edit)."""
    for entry in doc.get("artifacts", []):
        path = folder.root / entry["path"]
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            entry["sha256"], entry["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
    return doc


def read_json(folder: Folder, name: str) -> Json:
    return json.loads((folder.root / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]
