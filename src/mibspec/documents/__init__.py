"""Typed Python API for mibspec documents, and the source of the JSON Schemas.

Each document kind is a pydantic model; :func:`generate_schema` turns it into the
draft 2020-12 schema shipped in ``spec/v1/schemas/<kind>.schema.json``, and
:func:`document_bytes` writes a document built from it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ._base import DIALECT, SPEC_VERSION, TAGS, SchemaGenerator, schema_id
from .common import Artifact, Method, ModelRef, Provenance, Seed, Uncertainty
from .conformance import Expectation
from .kinds import (
    CausalModel,
    Circuit,
    CounterfactualDataset,
    DatasetSource,
    Featurizer,
    Leaderboard,
    ShortcutDataset,
)
from .output import VerificationOutput
from .profile import Profile
from .receipt import Receipt
from .report import (
    CausalBenchReport,
    CausalVariableReport,
    CircuitReport,
    Report,
    SaliencyReport,
)

__all__ = [
    "KINDS",
    "SPEC_VERSION",
    "SUPPORT_SCHEMAS",
    "Artifact",
    "CausalBenchReport",
    "CausalModel",
    "CausalVariableReport",
    "Circuit",
    "CircuitReport",
    "CounterfactualDataset",
    "DatasetSource",
    "Expectation",
    "Featurizer",
    "Leaderboard",
    "Method",
    "ModelRef",
    "Profile",
    "Provenance",
    "Receipt",
    "Report",
    "SaliencyReport",
    "Seed",
    "ShortcutDataset",
    "Uncertainty",
    "VerificationOutput",
    "document_bytes",
    "dump",
    "generate_schema",
    "json_file_bytes",
    "parse_document",
    "schema_names",
    "schema_text",
]

#: Document kind → (model, one-line description). The order is the documentation order.
KINDS: dict[str, tuple[Any, str]] = {
    "report": (Report, "A result report: method, model, task, settings, seeds, artifacts and claims."),
    "circuit": (Circuit, "Edge scores and circuits over a model's computation graph."),
    "featurizer": (Featurizer, "An invertible feature map at a model location, as data."),
    "counterfactual_dataset": (
        CounterfactualDataset,
        "Base inputs with counterfactual inputs by type (rows in a JSON Lines sidecar).",
    ),
    "causal_model": (CausalModel, "A task's high-level causal model from a built-in mechanism."),
    "shortcut_dataset": (ShortcutDataset, "Images with a class-specific shortcut perturbation."),
    "leaderboard": (Leaderboard, "Circuit-track leaderboard cells per method with Average and Score."),
}

#: Schemas that describe mibspec's own files rather than submitted documents.
SUPPORT_SCHEMAS: dict[str, tuple[Any, str]] = {
    "profile": (Profile, "A conventions profile (spec/v1/profiles)."),
    "verification-result": (VerificationOutput, "The output of `mibspec verify --format json`."),
    "conformance-expected": (Expectation, "The expected.json of a conformance case."),
    "receipt": (Receipt, "A verification receipt written by `mibspec verify --receipt`."),
}

_ADAPTERS: dict[str, TypeAdapter[Any]] = {}


def _model(name: str) -> Any:
    entry = KINDS.get(name) or SUPPORT_SCHEMAS.get(name)
    if entry is None:
        known = sorted([*KINDS, *SUPPORT_SCHEMAS])
        raise ValueError(f"schema name: expected one of {known}, got {name!r}")
    return entry


def _adapter(name: str) -> TypeAdapter[Any]:
    if name not in _ADAPTERS:
        _ADAPTERS[name] = TypeAdapter(_model(name)[0])
    return _ADAPTERS[name]


def generate_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a document kind or support file, as shipped in ``spec/v1/schemas``."""
    description = _model(name)[1]
    body = _adapter(name).json_schema(schema_generator=SchemaGenerator, mode="validation")
    head = {
        "$schema": DIALECT,
        "$id": schema_id(name),
        "title": f"mibspec {name} {SPEC_VERSION}",
        "description": description,
    }
    return {**head, **body}


def schema_names() -> list[str]:
    """Every schema shipped in ``spec/v1/schemas``: document kinds, then support files."""
    return [*KINDS, *SUPPORT_SCHEMAS]


def schema_text(name: str) -> str:
    """The schema serialised exactly as committed (two-space indent, trailing newline)."""
    return json.dumps(generate_schema(name), indent=2, ensure_ascii=False) + "\n"


def parse_document(kind: str, data: Any) -> Any:
    """Build the typed model of a document that already passed schema validation."""
    return _adapter(kind).validate_python(data)


def dump(document: BaseModel) -> dict[str, Any]:
    """A document built from its model, as JSON data: keys in the model's field order, the fields
    never set left out, and ``spec_version``, ``kind`` (and a report's ``track``) always present.

    >>> from mibspec.documents.kinds import CausalModel, CausalVariable
    >>> list(dump(CausalModel(task="t", mechanism="ioi_linear", variables=[CausalVariable(name="x")],
    ...                       outputs=["x"])))
    ['spec_version', 'kind', 'task', 'mechanism', 'variables', 'outputs']
    """
    tags = {name for name in TAGS if name in type(document).model_fields}
    marked = type(document).model_construct(document.model_fields_set | tags, **dict(document))
    return marked.model_dump(mode="json", exclude_unset=True)


def document_bytes(document: BaseModel) -> bytes:
    """The file of a document built from its model: :func:`dump` as JSON with a two-space indent,
    UTF-8 text (not ASCII escapes), no NaN or infinity, and a trailing newline."""
    return json_file_bytes(dump(document))


def json_file_bytes(data: Any) -> bytes:
    """JSON data as a document file: two-space indent, UTF-8, no NaN or infinity, trailing newline."""
    return (json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
