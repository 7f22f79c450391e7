"""The rule catalogue is complete: every code is emitted somewhere, documented, and covered
by conformance cases; codes are never reused."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from mibspec.core.spec import KINDS, spec_dir
from mibspec.spec_tools.conformance import discover_cases
from mibspec.validator import catalogue
from mibspec.validator._catalogue import PARSE_CODES
from mibspec.validator._recompute_stage import run_recompute
from mibspec.validator._schema_stage import _KEYWORD_CODES
from mibspec.validator.rules import RULES

if TYPE_CHECKING:
    from conftest import SuiteMinimum

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance" / "v1"

CAT = catalogue()


def test_codes_and_symbols_are_unique_and_well_formed() -> None:
    codes = [rule.code for rule in CAT.rules]
    symbols = [rule.symbol for rule in CAT.rules]
    assert len(codes) == len(set(codes))
    assert len(symbols) == len(set(symbols))
    for rule in CAT.rules:
        assert rule.code[0] in CAT.families, rule.code
        assert rule.code[1:].isdigit()
        assert len(rule.code) == 4
        assert rule.summary.endswith(".")
        assert rule.stage in {"parse", "schema", "rules", "recompute", "import"}


def test_retired_codes_are_never_reused() -> None:
    retired = {entry["code"] for entry in CAT.retired}
    assert retired.isdisjoint(rule.code for rule in CAT.rules)


def test_every_code_is_emitted_by_some_stage() -> None:
    emitted = set(PARSE_CODES.values()) | {"P108", "S101", "S102", "S103", "S104"}
    emitted |= set(_KEYWORD_CODES.values())
    for rule in RULES:
        emitted |= set(rule.codes)
    recompute_codes = {
        "R101",
        "R102",
        "R103",
        "R105",
        "R125",
        "R130",
    }  # emitted by validator/_recompute_stage.py
    recompute_codes |= {"R104", "R106", "R107"}  # emitted by the recomputers (tests/circuit)
    recompute_codes |= {"R108", "R109", "R110"}  # model declaration vs loaded config (tests/hardening)
    recompute_codes |= {"R111"}  # a digest from a trusted file-hash cache (tests/hardening)
    recompute_codes |= {"R113", "R114"}  # declared dtype vs weights; 16-bit batch size (tests/hardening)
    recompute_codes |= {"R112"}  # recompute skipped and impossible (validator/_pipeline.py)
    recompute_codes |= {"I101", "I102", "I103", "I104"}  # emitted by mibspec/importers (tests/importers)
    recompute_codes |= {f"I{n}" for n in range(105, 113)}  # emitted by mibspec/importers (tests/importers)
    recompute_codes |= {
        f"I{n}" for n in range(116, 129)
    }  # MIB datasets and submissions, safe folders (tests/importers)
    recompute_codes |= {"I129"}  # the submission path's hub inputs (tests/submissions)
    assert run_recompute.__module__.endswith("_recompute_stage")
    emitted |= recompute_codes
    assert {rule.code for rule in CAT.rules} == emitted


def test_rules_declare_only_catalogued_codes() -> None:
    for rule in RULES:
        for code in rule.codes:
            assert code in CAT.by_code, (rule.name, code)


def _cases() -> list[dict[str, object]]:
    return [
        json.loads((case / "expected.json").read_text(encoding="utf-8"))
        for case in discover_cases(CONFORMANCE)
    ]


def test_every_document_rule_has_a_conformance_case_that_triggers_it() -> None:
    covered = set()
    for case in _cases():
        for key in ("findings", "warnings"):  # warning-level rules are expected as warnings
            covered |= {finding["code"] for finding in case.get(key, [])}  # type: ignore[union-attr]
    # Recompute-stage codes are covered by the recompute tests, not by the (recompute-free) suite.
    required = {rule.code for rule in CAT.rules if rule.stage not in ("recompute", "import")}
    assert required <= covered, sorted(required - covered)


def test_every_document_kind_has_valid_and_invalid_cases() -> None:
    verdicts: dict[str, set[str]] = {}
    for case in _cases():
        verdicts.setdefault(str(case["kind"]), set()).add(str(case["verdict"]))
    for kind in KINDS:
        assert verdicts.get(kind) == {"valid", "invalid"}, kind


def test_suite_is_large_enough(suite_minimum: SuiteMinimum) -> None:
    assert suite_minimum.shortfalls(_cases()) == []


def test_conformance_readme_coverage_table_holds_the_suite_minimum(suite_minimum: SuiteMinimum) -> None:
    """The table counts the cases (``build_cases.py`` writes it); the minimum is a floor under it."""
    text = (CONFORMANCE.parent / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)`(?:, track `(\w+)`)?[^|]* \| (\d+) \| (\d+) \|$", text, re.MULTILINE)
    table = {f"{kind}/{track}" if track else kind: (int(v), int(i)) for kind, track, v, i in rows}
    assert set(table) == set(suite_minimum.counts)
    short = [
        f"{group} {verdict}"
        for group, pair in suite_minimum.counts.items()
        for verdict, have, least in zip(("valid", "invalid"), table[group], pair, strict=True)
        if have < least
    ]
    assert short == []


def test_suite_minimum_names_every_kind_and_track_of_the_suite(suite_minimum: SuiteMinimum) -> None:
    cases = _cases()
    assert {suite_minimum.group(case) for case in cases} == set(suite_minimum.counts)
    without_saliency = [case for case in cases if suite_minimum.group(case) != "report/saliency"]
    short = [line.split(":")[0] for line in suite_minimum.shortfalls(without_saliency)]
    assert short == ["report/saliency valid", "report/saliency invalid"]


def test_catalogue_file_is_what_the_registry_loads() -> None:
    raw = json.loads((spec_dir() / "rules.json").read_text(encoding="utf-8"))
    assert [entry["code"] for entry in raw["rules"]] == [rule.code for rule in CAT.rules]


def test_every_validation_keyword_in_the_document_schemas_has_a_code() -> None:
    annotations = {
        "$defs",
        "$id",
        "$ref",
        "$schema",
        "allOf",
        "if",
        "then",
        "else",
        "items",
        "properties",
        "description",
        "title",
        "default",
        "x-mibspec-artifact",
        "x-mibspec-tensor",
        "propertyNames",
    }
    used: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                used.add(key)
                if key in ("properties", "$defs"):
                    for child in value.values():
                        walk(child)
                elif key != "x-mibspec-artifact":
                    walk(value)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for kind in KINDS:
        walk(json.loads((spec_dir() / "schemas" / f"{kind}.schema.json").read_text(encoding="utf-8")))
    assert used - annotations <= set(_KEYWORD_CODES), sorted(used - annotations - set(_KEYWORD_CODES))
