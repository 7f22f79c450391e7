"""The claim catalogue (spec/v1/claims.json) covers every number a report may carry, once.

The report schema is walked independently of the catalogue's code: every number and integer
leaf of each track's report (through ``$ref``, the ``if``/``then`` branches, array items and
``additionalProperties``) must have exactly one row, and every row must describe a value the
schema allows. The reports the producers wrote (the bundled examples) and the conformance
reports have a row for every number they hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mibspec.core.claims import CHECKS, claim_catalogue, pointer_tokens
from mibspec.core.profiles import known_profiles, load_profile
from mibspec.core.spec import spec_dir
from mibspec.validator import catalogue as rule_catalogue

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((spec_dir() / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
#: Each track's report definition, as the schema selects it by ``track``.
REPORTS = {
    branch["if"]["properties"]["track"]["const"]: branch["then"]["$ref"].rpartition("/")[2]
    for branch in SCHEMA["allOf"]
}


def _resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _types(node: Any) -> set[str]:
    node = _resolve(node)
    found = node.get("type")
    types = {found} if isinstance(found, str) else set(found or ())
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            types |= _types(branch)
    return types


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], set[str], Any]]:
    """``(path pattern, types, node)`` for every node of the schema below ``node``; ``*`` stands
    for an array item or a property of ``additionalProperties``."""
    node = _resolve(node)
    yield path, _types(node), node
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            yield from _walk(branch, path)
    for branch in node.get("allOf", []):
        if "then" in branch:
            yield from _walk(branch["then"], path)
        elif "if" not in branch:
            yield from _walk(branch, path)
    for name, child in node.get("properties", {}).items():
        if isinstance(child, dict):
            yield from _walk(child, (*path, name))
    for key in ("additionalProperties", "items"):
        if isinstance(node.get(key), dict):
            yield from _walk(node[key], (*path, "*"))


def _schema_nodes(track: str) -> dict[tuple[str, ...], set[str]]:
    nodes: dict[tuple[str, ...], set[str]] = {}
    for path, types, _ in _walk(SCHEMA["$defs"][REPORTS[track]], ()):
        nodes.setdefault(path, set()).update(types)
    return nodes


def _numeric_leaves(track: str) -> dict[tuple[str, ...], str]:
    leaves = {}
    for path, types in _schema_nodes(track).items():
        numeric = types & {"number", "integer"}
        if numeric:
            leaves[path] = "integer" if numeric == {"integer"} else "number"
    return leaves


@pytest.mark.parametrize("track", REPORTS)
def test_every_number_the_report_schema_allows_has_exactly_one_row(track: str) -> None:
    rows = claim_catalogue().rows_for(track)
    problems = []
    for path, kind in sorted(_numeric_leaves(track).items()):
        matching = [row for row in rows if row.numeric and row.match(path) is not None]
        pointer = "/" + "/".join(path)
        if len(matching) != 1:
            problems.append(f"{pointer}: {len(matching)} rows")
        elif matching[0].type != kind:
            problems.append(f"{pointer}: the schema says {kind}, the row {matching[0].type}")
    assert not problems, problems


@pytest.mark.parametrize("track", REPORTS)
def test_every_row_describes_a_value_the_schema_allows(track: str) -> None:
    nodes = _schema_nodes(track)
    leaves = _numeric_leaves(track)
    stale = []
    for row in claim_catalogue().rows_for(track):
        if row.numeric:
            found = [path for path in leaves if row.match(path) is not None]
        elif row.type == "set":
            found = [p for p, types in nodes.items() if "array" in types and row.match(p) is not None]
        else:
            found = [p for p, types in nodes.items() if "object" in types and row.match(p) is not None]
        if not found:
            stale.append(row.pointer)
    assert not stale, stale


def test_rows_name_existing_codes_kinds_and_patterns() -> None:
    catalogue = claim_catalogue()
    codes = {rule.code for rule in rule_catalogue().rules}
    for row in catalogue.rows:
        assert row.check in CHECKS
        assert set(row.rules) <= codes, row.pointer
        if row.check in ("recomputed", "derived", "declaration"):
            assert row.rules, f"{row.pointer}: a {row.check} row names the rules that check it"
        if row.check == "recomputed":
            assert "R103" in row.rules, row.pointer
        if row.check == "declaration":
            assert row.compared_with, f"{row.pointer}: a declaration says what it is compared with"
        if row.check == "structure":
            assert row.note, row.pointer
            assert row.rounding is None, row.pointer
        if row.rounding is not None:
            assert row.check in ("recomputed", "derived"), row.pointer
            assert row.type == "number", f"{row.pointer}: a count is never rounded"
        tracks = [row.track] if row.track != "*" else list(REPORTS)
        for pattern in (*row.derived_from, *([row.only_with] if row.only_with else [])):
            tokens = tuple(pattern.split("/")[1:])
            assert any(tokens in _schema_nodes(t) for t in tracks), f"{row.pointer}: {pattern}"


def test_every_profile_bounds_every_kind_of_rounding() -> None:
    kinds = set(claim_catalogue().rounding_kinds)
    used = {row.rounding for row in claim_catalogue().rows if row.rounding}
    assert used == kinds  # no kind without a claim, no claim of an undefined kind
    for name in known_profiles():
        assert set(load_profile(name)["coarsest_rounding"]) == kinds, name


def test_a_row_is_found_for_concrete_pointers() -> None:
    catalogue = claim_catalogue()
    assert catalogue.row("circuit", "/claims/curves/1/points/9/faithfulness").label == "faithfulness"
    assert (
        catalogue.row("causal_bench", "/claims/weight_robustness/0/composites/a~1b").rounding == "composite"
    )
    assert catalogue.row("circuit", "/claims/cpr/rounding/decimals").check == "declaration"
    assert catalogue.row("circuit", "/claims/curves/1/points/9/extra") is None
    assert catalogue.row(None, "/claims/cpr/value") is None
    assert pointer_tokens("") == ()


def _documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted((REPO / "examples").glob("*/report.json")):
        yield str(path.relative_to(REPO)), json.loads(path.read_text(encoding="utf-8"))
    for path in sorted((REPO / "conformance" / "v1" / "report").glob("*/*/document.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("track") in REPORTS:
            yield str(path.relative_to(REPO)), data


def _numbers(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if (path == "" and key == "extensions") or key == "hyperparameters":
                continue  # free-form, outside the standard
            yield from _numbers(value, f"{path}/{key.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}/{i}")
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path


def test_every_number_the_producers_and_the_suite_write_has_a_row() -> None:
    """The bundled examples (written by `mibspec score` and build_examples.py) and the conformance
    reports: each number has a row, and the catalogue's walk finds exactly those numbers."""
    catalogue = claim_catalogue()
    checked = 0
    for name, doc in _documents():
        numbers = set(_numbers(doc))
        found = {c.pointer for c in catalogue.instances(doc) if c.row.numeric}
        assert found == numbers, (name, sorted(numbers ^ found)[:10])
        checked += len(numbers)
    assert checked > 10_000


def test_walk_marks_a_set_recomputed_only_with_what_it_needs() -> None:
    doc = {
        "track": "causal_bench",
        "claims": {"methods": [{"components": ["a"], "procedure": {"seed": 1}}, {"components": ["b"]}]},
    }
    found = {c.pointer: c.row.check for c in claim_catalogue().instances(doc) if c.row.type == "set"}
    assert found == {
        "/claims/methods/0/components": "recomputed",
        "/claims/methods/1/components": "declaration",
    }
