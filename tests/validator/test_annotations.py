"""The schema-annotation walk: pruning subschemas that cannot lead to a keyword, and the
number normalisation that enters only the parts of a document holding candidates, give the
results of the full walk."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mibspec.validator import _annotations
from mibspec.validator._schema_stage import schema_for

REPO = Path(__file__).resolve().parents[2]


def _is_document(path: Path) -> bool:
    data = json.loads(path.read_text(encoding="utf-8"))
    return isinstance(data, dict) and "kind" in data and "spec_version" in data


#: The example documents (JSON files of the examples that are not documents are left out).
DOCUMENTS = sorted(
    path
    for path in (REPO / "examples").rglob("*.json")
    if "models" not in path.parts and path.name != "tokenizer.json" and _is_document(path)
)
KEYWORDS = ("x-mibspec-artifact", "x-mibspec-tensor", "type")


def _load(path: Path) -> tuple[Any, dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return schema_for(data["kind"], data["spec_version"]), data


def _full_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk without pruning: every subschema may lead to the keyword."""
    monkeypatch.setattr(_annotations, "_reaches", lambda root, schema, keyword: True)


def test_documents_are_found() -> None:
    assert len(DOCUMENTS) >= 10


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_pruned_walk_finds_what_the_full_walk_finds(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    validator, data = _load(path)
    pruned = {k: list(_annotations.iter_annotations(validator, data, k)) for k in KEYWORDS}
    _full_walk(monkeypatch)
    full = {k: list(_annotations.iter_annotations(validator, data, k)) for k in KEYWORDS}
    assert pruned == full


def _plant_candidates(node: Any) -> None:
    """Make every integer an integral float, and one in three floats a huge integer (in place)."""
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
    for n, (key, value) in enumerate(items):
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            node[key] = float(value)
        elif isinstance(value, float) and n % 3 == 0:
            node[key] = 2**70
        elif isinstance(value, dict | list):
            _plant_candidates(value)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO / "examples")))
def test_normalising_within_the_candidates_equals_the_full_walk(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    validator, data = _load(path)
    planted = copy.deepcopy(data)
    _plant_candidates(planted)
    planted["kind"], planted["spec_version"] = data["kind"], data["spec_version"]
    for document in (data, planted):  # as shipped, and with candidates everywhere
        fast = copy.deepcopy(document)
        _annotations.normalize_numbers(validator, fast)
        with monkeypatch.context() as patched:
            _full_walk(patched)
            slow = _normalized_by_the_full_walk(validator, copy.deepcopy(document))
        assert _typed(fast) == _typed(slow)


def _normalized_by_the_full_walk(validator: Any, instance: dict[str, Any]) -> dict[str, Any]:
    """The normalisation's rule applied at every place the full walk finds a ``type``."""
    changes = []
    for pointer, declared, value in _annotations.iter_annotations(validator, instance, "type"):
        types = declared if isinstance(declared, list) else [declared]
        if isinstance(value, float) and value.is_integer() and "integer" in types:
            changes.append((pointer, int(value)))
        elif isinstance(value, int) and abs(value) >= 2**63 and "number" in types and "integer" not in types:
            changes.append((pointer, float(value)))
    for pointer, new in changes:
        *parents, last = pointer.split("/")[1:]
        node: Any = instance
        for token in parents:
            node = (
                node[int(token)]
                if isinstance(node, list)
                else node[token.replace("~1", "/").replace("~0", "~")]
            )
        if isinstance(node, list):
            node[int(last)] = new
        else:
            node[last.replace("~1", "/").replace("~0", "~")] = new
    return instance


def _typed(node: Any) -> Any:
    """The document with each leaf paired with its type (1 and 1.0 compare unequal)."""
    if isinstance(node, dict):
        return {key: _typed(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_typed(value) for value in node]
    return (type(node).__name__, node)
