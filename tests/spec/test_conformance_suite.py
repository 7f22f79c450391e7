"""Run every conformance case; check expected.json files and a second schema implementation."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mibspec.core.spec import spec_dir
from mibspec.spec_tools.conformance import discover_cases, run_case

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance" / "v1"

CASES = discover_cases(CONFORMANCE)
IDS = [f"{c.parent.parent.name}/{c.parent.name}/{c.name}" for c in CASES]


def _schema(name: str) -> dict[str, object]:
    return json.loads((spec_dir() / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case(case: Path) -> None:
    outcome = run_case(case)
    assert outcome.problem is None, outcome.problem
    assert outcome.actual == outcome.expected
    assert not outcome.missing_warnings
    assert outcome.passed


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_expected_json_is_well_formed(case: Path) -> None:
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(_schema("conformance-expected")).validate(expected)
    assert expected["id"] == case.name
    assert expected["verdict"] == case.parent.name
    assert expected["kind"] == case.parent.parent.name
    if expected["verdict"] == "invalid":
        assert expected["findings"], "an invalid case must list the findings it expects"


def _schema_cases() -> list[tuple[Path, str, object]]:
    """Cases whose document parses and names a known kind: those have a schema verdict."""
    known = {p.name.removesuffix(".schema.json") for p in (spec_dir() / "schemas").glob("*.json")}
    found = []
    for case in CASES:
        expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
        try:
            text = (case / expected.get("document", "document.json")).read_text(encoding="utf-8")
            document = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            continue  # parse-level cases have no schema verdict
        if isinstance(document, dict) and document.get("kind") in known:
            found.append((case, document["kind"], document))
    return found


SCHEMA_CASES = _schema_cases()


def test_most_cases_have_a_schema_verdict() -> None:
    assert 2 * len(SCHEMA_CASES) > len(CASES)


@pytest.mark.parametrize(
    ("case", "kind", "document"), SCHEMA_CASES, ids=[str(c[0].name) for c in SCHEMA_CASES]
)
def test_second_implementation_agrees_on_schema_verdicts(case: Path, kind: str, document: object) -> None:
    """jsonschema-rs and python-jsonschema give the same verdict on every parseable document."""
    import jsonschema_rs

    schema = _schema(kind)
    ours = jsonschema.Draft202012Validator(schema).is_valid(document)
    theirs = jsonschema_rs.Draft202012Validator(schema).is_valid(document)
    assert ours == theirs
