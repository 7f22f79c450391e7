"""Every MUST of the spec is checked by a rule, expressed by a schema constraint, or given a
stated reason; the coverage table in SPEC.md is the generated one.

Independent anchor: the key-word lines are found here with a plain scan of the spec texts,
not with the coverage module's parser.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import mibspec.spec_tools.coverage as coverage_module
from mibspec.core.spec import spec_dir
from mibspec.spec_tools.coverage import (
    COVERAGE_BEGIN,
    coverage,
    coverage_problems,
    requirements,
    spec_with_section,
)
from mibspec.validator import catalogue

SPEC = spec_dir()


def test_every_must_of_the_spec_is_covered() -> None:
    assert coverage_problems() == []
    assert all(row.covered for row in coverage())


def test_the_coverage_section_of_spec_md_is_up_to_date() -> None:
    text = (SPEC / "SPEC.md").read_text(encoding="utf-8")
    assert COVERAGE_BEGIN in text
    assert spec_with_section(text) == text, "run `mibspec rules --coverage --update-spec`"


def test_every_key_word_line_belongs_to_a_listed_requirement() -> None:
    """A plain scan: each line with MUST/SHALL/REQUIRED lies between a requirement's opening and
    the next heading or opening, and that requirement is in the coverage table."""
    listed = {(row.requirement.file, row.requirement.id) for row in coverage()}
    opening = re.compile(r"^(?:\*\*\[([A-Z]+-\d+)\]\*\*|## ([A-Z]+-\d+)\b)")
    files = [SPEC / "SPEC.md", SPEC / "datasets.md", *sorted((SPEC / "metrics").glob("*.md"))]
    seen = 0
    for path in files:
        current = None
        text = path.read_text(encoding="utf-8").split(COVERAGE_BEGIN)[0]
        for line in text.splitlines():
            match = opening.match(line)
            if match:
                current = match.group(1) or match.group(2)
            elif line.startswith("#"):
                current = None
            if re.search(r"\b(MUST|SHALL|REQUIRED)\b", line) and "RFC 2119" not in line:
                if "key words" in line or "words MUST, MUST NOT" in line:
                    continue  # the sentence that defines the key words
                assert current is not None, (path.name, line)
                assert (path.relative_to(SPEC).as_posix(), current) in listed, (path.name, current)
                seen += 1
    assert seen > 100  # the spec states well over a hundred MUSTs


def test_the_reduced_set_requirement_names_its_rule() -> None:
    rows = {row.requirement.id: row for row in coverage()}
    assert "C123" in rows["MB-8"].rules
    assert {"R108", "R109", "R110"} <= set(rows["M-5"].rules)
    assert "C122" in rows["PR-3"].rules


def test_every_rule_names_requirements_the_spec_defines() -> None:
    defined = {req.id for req in requirements()}
    for rule in catalogue().rules:
        assert {rule.requirement, *rule.enforces} <= defined, rule.code


@pytest.fixture
def spec_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the spec folder the coverage module reads instead of the real one."""
    copy = tmp_path / "v1"
    shutil.copytree(SPEC, copy)
    monkeypatch.setattr(coverage_module, "spec_dir", lambda version=None: copy)
    monkeypatch.setattr(
        coverage_module,
        "load_spec_json",
        lambda version, name: json.loads((copy / name).read_text(encoding="utf-8")),
    )
    return copy


def test_a_must_without_rule_schema_or_reason_is_reported(spec_copy: Path) -> None:
    path = spec_copy / "metrics" / "circuit.md"
    path.write_text(
        path.read_text(encoding="utf-8") + "\n## MC-99 Something new\n\nA report MUST say something.\n",
        encoding="utf-8",
    )
    problems = coverage_problems()
    assert len(problems) == 1
    assert problems[0].startswith("MC-99 (metrics/circuit.md:")
    # A stated reason covers it.
    stated = json.loads((spec_copy / "coverage.json").read_text(encoding="utf-8"))
    stated["requirements"]["MC-99"] = {"reason": "stated"}
    (spec_copy / "coverage.json").write_text(json.dumps(stated), encoding="utf-8")
    assert coverage_problems() == []


def test_a_must_outside_any_requirement_is_reported(spec_copy: Path) -> None:
    path = spec_copy / "datasets.md"
    path.write_text(
        "# Datasets\n\nEvery row MUST be fine.\n" + path.read_text(encoding="utf-8"), encoding="utf-8"
    )
    assert coverage_problems() == ["datasets.md:3: a key word outside any identified requirement"]


def test_a_stale_reason_is_reported(spec_copy: Path) -> None:
    stated = json.loads((spec_copy / "coverage.json").read_text(encoding="utf-8"))
    stated["requirements"]["MC-5"] = {"reason": "MC-5 states no MUST"}
    (spec_copy / "coverage.json").write_text(json.dumps(stated), encoding="utf-8")
    assert coverage_problems() == [
        "coverage.json lists MC-5, which is not a normative requirement of the spec"
    ]
