"""``mibspec conformance run``: this implementation, another one through the command protocol
(conformance/README.md), and a fake implementation that answers wrongly on purpose."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema
import pytest

from mibspec.spec_tools.conformance import discover_cases
from mibspec.spec_tools.conformance_run import run_suite, to_ctrf, to_junit

if TYPE_CHECKING:
    from conftest import SuiteMinimum

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "conformance" / "v1"

CliRun = Callable[..., subprocess.CompletedProcess[str]]

#: The parts of the CTRF JSON schema (github.com/ctrf-io/ctrf, schema/ctrf.schema.json) a
#: report must satisfy: required fields, status values, and no unknown keys where CTRF closes them.
CTRF_SCHEMA = {
    "type": "object",
    "required": ["results", "reportFormat", "specVersion"],
    "additionalProperties": False,
    "properties": {
        "reportFormat": {"const": "CTRF"},
        "specVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "generatedBy": {"type": "string"},
        "extra": {"type": "object"},
        "results": {
            "type": "object",
            "required": ["tool", "summary", "tests"],
            "additionalProperties": False,
            "properties": {
                "tool": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": False,
                    "properties": {"name": {"type": "string", "minLength": 1}, "version": {"type": "string"}},
                },
                "summary": {
                    "type": "object",
                    "required": ["tests", "passed", "failed", "skipped", "pending", "other", "start", "stop"],
                    "additionalProperties": False,
                    "properties": {
                        k: {"type": "integer"}
                        for k in ("tests", "passed", "failed", "skipped", "pending", "other", "start", "stop")
                    },
                },
                "tests": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "status", "duration"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "status": {"enum": ["passed", "failed", "skipped", "pending", "other"]},
                            "duration": {"type": "integer"},
                            "message": {"type": "string"},
                            "filePath": {"type": "string"},
                            "extra": {"type": "object"},
                        },
                        "additionalProperties": False,
                    },
                },
                "environment": {"type": "object"},
                "extra": {"type": "object"},
            },
        },
    },
}

#: A fake implementation: every document is valid and has no findings (wrong on every invalid case).
ALWAYS_VALID = """
import json, sys
print(json.dumps({"valid": True, "documents": [{"path": sys.argv[-1], "findings": []}]}))
"""

#: Reports the expected codes but at the root pointer, and exits 1 (wrong on cases with pointers).
WRONG_POINTERS = """
import json, sys
expected = json.load(open("expected.json"))
findings = [{"code": f["code"], "pointer": "", "severity": "error"} for f in expected.get("findings", [])]
print(json.dumps({"valid": not findings, "documents": [{"path": sys.argv[-1], "findings": findings}]}))
sys.exit(1 if findings else 0)
"""

#: Crashes.
BROKEN = """
import sys
print("internal error", file=sys.stderr)
sys.exit(3)
"""


def _subset(tmp_path: Path, names: list[str]) -> Path:
    suite = tmp_path / "suite"
    for name in names:
        shutil.copytree(SUITE / name, suite / name, symlinks=True)
    return suite


#: Cases covering a valid report, a finding inside a referenced document, parse limits from
#: expected.json, and a parse-level error.
SUBSET = [
    "report/valid/" + next(c.name for c in discover_cases(SUITE) if c.parent == SUITE / "report" / "valid"),
    "report/invalid/circuit-referenced-circuit-invalid",
    "json/valid/size-at-limit",
    "json/valid/depth-at-limit",
    "json/invalid/file-too-large",
    "json/invalid/duplicate-key",
]


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return f"{sys.executable} {path}"


@pytest.mark.slow
def test_this_implementation_passes_the_whole_suite_in_ctrf(suite_minimum: SuiteMinimum) -> None:
    run = run_suite(SUITE)
    report = to_ctrf(run)
    jsonschema.Draft202012Validator(CTRF_SCHEMA).validate(report)
    summary = report["results"]["summary"]
    assert summary["tests"] == len(discover_cases(SUITE)) >= suite_minimum.total
    assert summary["passed"] == summary["tests"]
    assert summary["failed"] == 0
    names = [test["name"] for test in report["results"]["tests"]]
    assert "report/invalid/circuit-referenced-circuit-invalid" in names
    assert summary["start"] <= summary["stop"]


@pytest.mark.slow
def test_this_implementation_speaks_the_command_protocol(tmp_path: Path) -> None:
    suite = _subset(tmp_path, SUBSET)
    command = (
        f"{sys.executable} -m mibspec verify --no-recompute --format json "
        "--max-bytes {max_bytes} --max-depth {max_depth} {document}"
    )
    run = run_suite(suite, impl=command)
    assert [(c.name, c.status, c.message) for c in run.cases] == [(c.name, "passed", None) for c in run.cases]
    assert len(run.cases) == len(SUBSET)


def test_fake_implementation_that_accepts_everything_fails_the_invalid_cases(tmp_path: Path) -> None:
    suite = _subset(tmp_path, SUBSET)
    run = run_suite(suite, impl=_script(tmp_path, "always_valid", ALWAYS_VALID))
    status = {c.name: c.status for c in run.cases}
    assert status == {name: "failed" if "/invalid/" in name else "passed" for name in SUBSET}
    by_name = {c.name: c for c in run.cases}
    message = by_name["report/invalid/circuit-referenced-circuit-invalid"].message or ""
    assert "verdict valid, expected invalid" in message
    expected = json.loads(
        (suite / "report/invalid/circuit-referenced-circuit-invalid/expected.json").read_text()
    )
    for finding in expected["findings"]:
        assert f"missing: {finding['code']} at '{finding['pointer']}'" in message
    report = to_ctrf(run)
    jsonschema.Draft202012Validator(CTRF_SCHEMA).validate(report)
    assert report["results"]["summary"]["failed"] == sum("/invalid/" in name for name in SUBSET) == 3


def test_fake_implementation_with_wrong_pointers_is_caught(tmp_path: Path) -> None:
    suite = _subset(
        tmp_path, ["report/invalid/circuit-referenced-circuit-invalid", "json/invalid/duplicate-key"]
    )
    run = run_suite(suite, impl=_script(tmp_path, "wrong_pointers", WRONG_POINTERS))
    assert all(c.status == "failed" for c in run.cases)
    for case in run.cases:
        assert "missing:" in (case.message or "")
        assert "unexpected:" in (case.message or "")
        assert "verdict" not in (case.message or "")  # the verdict itself was right


def test_crashing_or_missing_implementations_fail_with_the_reason(tmp_path: Path) -> None:
    suite = _subset(tmp_path, ["json/valid/size-at-limit", "json/invalid/file-too-large"])
    run = run_suite(suite, impl=_script(tmp_path, "broken", BROKEN))
    assert [(c.status, c.message) for c in run.cases] == [("failed", "exit code 3: internal error")] * 2
    missing = run_suite(suite, impl="no-such-implementation-binary")
    assert all("command not found" in (c.message or "") for c in missing.cases)


def test_junit_output_counts_failures(tmp_path: Path) -> None:
    suite = _subset(tmp_path, SUBSET)
    run = run_suite(suite, impl=_script(tmp_path, "always_valid", ALWAYS_VALID))
    root = ET.fromstring(to_junit(run))
    assert root.tag == "testsuites"
    assert root.get("tests") == str(len(SUBSET))
    assert root.get("failures") == "3"
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(SUBSET)
    failed = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    assert failed == {
        ("report.invalid", "circuit-referenced-circuit-invalid"),
        ("json.invalid", "file-too-large"),
        ("json.invalid", "duplicate-key"),
    }
    for suite_element in root.findall("testsuite"):
        assert int(suite_element.get("tests", "0")) == len(suite_element.findall("testcase"))


@pytest.mark.slow
def test_cli_writes_ctrf_or_junit_and_exits_by_outcome(tmp_path: Path, mibspec_cli: CliRun) -> None:
    suite = _subset(tmp_path, SUBSET[:3])
    out = tmp_path / "results.json"
    result = mibspec_cli("conformance", "run", "--suite", str(suite), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "3 case(s): 3 passed, 0 failed" in result.stdout
    jsonschema.Draft202012Validator(CTRF_SCHEMA).validate(json.loads(out.read_text()))
    fake = _script(tmp_path, "always_valid", ALWAYS_VALID)
    result = mibspec_cli("conformance", "run", "--suite", str(suite), "--impl", fake, "--format", "junit")
    assert result.returncode == 1
    assert ET.fromstring(result.stdout).get("failures") == "1"
    assert "FAILED report/invalid/circuit-referenced-circuit-invalid" in result.stderr


@pytest.mark.slow
def test_cli_usage_errors(tmp_path: Path, mibspec_cli: CliRun) -> None:
    # Outside a checkout, without --suite: the suite is not in the package.
    empty = tmp_path / "empty"
    empty.mkdir()
    result = mibspec_cli("conformance", "run", "--suite", str(empty))
    assert result.returncode == 2
    assert "none" in result.stderr
    assert mibspec_cli("conformance", "run", "--suite", str(tmp_path / "missing")).returncode == 2
    suite = _subset(tmp_path, SUBSET[:1])
    assert mibspec_cli("conformance", "run", "--suite", str(suite), "--impl", " ").returncode == 2


@pytest.mark.slow
def test_suite_is_found_from_the_checkout(mibspec_cli: CliRun) -> None:
    result = mibspec_cli("conformance", "run", "-o", "/dev/null", cwd=REPO / "conformance")
    assert result.returncode == 0, result.stderr
    assert f"{len(discover_cases(SUITE))} case(s)" in result.stdout


@pytest.mark.parametrize(
    "bad", ["all good", "{}", '{"valid": true}', '{"valid": true, "documents": [{"findings": []}]}']
)
def test_output_that_is_not_a_verification_result_fails(tmp_path: Path, bad: str) -> None:
    suite = _subset(tmp_path, ["json/valid/size-at-limit"])
    script = _script(tmp_path, "bad_output", f"print({bad!r})")
    [case] = run_suite(suite, impl=script).cases
    assert case.status == "failed"
    assert "not verification-result JSON" in (case.message or "")
