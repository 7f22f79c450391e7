"""What every model-based recomputer needs: the model, its tokenizer, referenced documents.

Failures raise :class:`UnusableInputError` with the pointer of the declaration at fault; the
recomputer turns it into an R104 finding (SPEC.md R-3).

Model lookup (SPEC.md M-2): a ``local`` model's ``path`` is relative and never climbs
(no ``..``); it is looked up in the report's folder, then in each ``--model-root``. A
``hub`` model is looked up as ``<root>/<id>`` in each model root first (an offline copy),
then read through transformers at its pinned revision. Declared ``files`` hashes are
checked before anything is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mibspec.core.files import sha256_file

__all__ = [
    "ModelSource",
    "UnusableInputError",
    "encode_function",
    "load_model_at",
    "load_referenced_document",
    "read_rows",
    "resolve_model",
]


class UnusableInputError(Exception):
    """A declaration recomputation depends on cannot be used (becomes R104 at ``pointer``)."""

    def __init__(self, pointer: str, detail: str) -> None:
        super().__init__(detail)
        self.pointer = pointer
        self.detail = detail


@dataclass(frozen=True)
class ModelSource:
    """Where the weights are: a local folder, or a hub id with its pinned revision."""

    location: str
    revision: str | None
    local: bool

    @property
    def display(self) -> str:
        return self.location if self.revision is None else f"{self.location}@{self.revision}"


def _check_files(folder: Path, files: dict[str, str], pointer: str) -> None:
    for name, declared in sorted(files.items()):
        parts = PurePosixPath(name).parts
        if PurePosixPath(name).is_absolute() or ".." in parts:
            raise UnusableInputError(
                f"{pointer}/files", f"model file name {name!r} must be relative and not climb"
            )
        target = folder / name
        if not target.is_file():
            raise UnusableInputError(
                f"{pointer}/files", f"model file {name!r} is declared but absent from {folder}"
            )
        actual = sha256_file(target)
        if actual != declared:
            raise UnusableInputError(
                f"{pointer}/files", f"sha256 of model file {name!r} is {actual}, declared {declared}"
            )


def load_model_at(source: ModelSource, dtype: str) -> Any:
    """The engine weights of a resolved model; any failure to load them is R104 at ``/model``."""
    from ..engine import load_model

    try:
        return load_model(source.location, revision=source.revision, dtype=dtype)
    except Exception as exc:  # loading is the model's business; any failure is a finding
        raise UnusableInputError("/model", f"cannot load {source.display}: {exc}") from exc


def resolve_model(
    model: dict[str, Any], folder: Path, roots: tuple[Path, ...], pointer: str = "/model"
) -> ModelSource:
    """Find the declared model (see the module docstring); check declared file hashes."""
    source = model["source"]
    files = model.get("files") or {}
    if source == "local":
        rel = PurePosixPath(model["path"])
        if rel.is_absolute() or ".." in rel.parts or "\\" in model["path"]:
            raise UnusableInputError(
                f"{pointer}/path", f"a local model path must be relative and not climb; got {model['path']!r}"
            )
        candidates = [folder / rel, *(root / rel for root in roots)]
        for candidate in candidates:
            if (candidate / "config.json").is_file():
                _check_files(candidate, files, pointer)
                return ModelSource(str(candidate), None, local=True)
        searched = ", ".join(str(c) for c in candidates)
        raise UnusableInputError(
            f"{pointer}/path",
            f"model folder {model['path']!r} not found (searched {searched}); pass --model-root FOLDER",
        )
    if source == "hub":
        for root in roots:
            candidate = root / model["id"]
            if (candidate / "config.json").is_file():
                _check_files(candidate, files, pointer)
                return ModelSource(str(candidate), None, local=True)
        revision = model.get("revision")
        if revision is None:
            raise UnusableInputError(
                f"{pointer}/revision", "the hub model is not pinned to a revision (A111)"
            )
        return ModelSource(model["id"], revision, local=False)
    raise UnusableInputError(
        f"{pointer}/source", f"models of source {source!r} cannot be recomputed by this track"
    )


def load_referenced_document(
    ctx: Any, artifact_id: str, pointer: str, kind: str
) -> tuple[dict[str, Any], Path]:
    """The JSON document behind an artifact of the report, and its folder.

    The earlier stages verified the document (A107 otherwise); it is parsed again with the
    same strict parser (``ctx.load_json``).
    """
    artifact = ctx.artifacts.get(artifact_id)
    if artifact is None or artifact_id in ctx.broken_artifacts:
        raise UnusableInputError(pointer, f"artifact {artifact_id!r} is not available")
    path = ctx.folder / artifact["path"]
    parsed = ctx.load_json(path)
    if not parsed.ok or not isinstance(parsed.data, dict) or parsed.data.get("kind") != kind:
        raise UnusableInputError(pointer, f"artifact {artifact_id!r} is not a readable {kind} document")
    return parsed.data, path.parent


def read_rows(document: dict[str, Any], folder: Path, pointer: str) -> list[dict[str, Any]]:
    """The JSON Lines rows a counterfactual dataset document declares (``examples``)."""
    entry = next((a for a in document.get("artifacts", []) if a["id"] == document["examples"]), None)
    if entry is None:
        raise UnusableInputError(pointer, f"the dataset declares no artifact {document['examples']!r}")
    rows = []
    with (folder / entry["path"]).open("r", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
    return rows


def encode_function(source: ModelSource, pointer: str = "/model") -> Any:
    """``encode(text) -> list[int]`` without special tokens, from the model's tokenizer.

    A local folder's ``tokenizer.json`` is read with the tokenizers library (no code is run);
    otherwise transformers' ``AutoTokenizer`` with ``trust_remote_code=False``.
    """
    try:
        if source.local and (Path(source.location) / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(Path(source.location) / "tokenizer.json"))
            return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
        from transformers import AutoTokenizer

        auto = AutoTokenizer.from_pretrained(
            source.location, revision=source.revision, trust_remote_code=False
        )
        return lambda text: list(auto(text, add_special_tokens=False)["input_ids"])
    except Exception as exc:  # any failure to read a tokenizer is a finding, not a crash
        raise UnusableInputError(pointer, f"cannot load the tokenizer of {source.display}: {exc}") from exc
