"""``mibspec conformance run``: the conformance suite against this or another implementation.

This implementation is run in-process (:func:`mibspec.spec_tools.conformance.run_case`). Another
implementation is run as a command, once per case, following the protocol of
``conformance/README.md`` ("Testing another implementation"):

* the command is split like a shell would (``shlex``), without a shell; in each
  argument ``{document}``, ``{max_bytes}`` and ``{max_depth}`` are replaced by the case's
  document (relative to the case folder) and its parse limits; when no argument holds
  ``{document}``, the document is appended as the last argument;
* it runs with the case folder as working directory, no standard input and a time limit;
* it exits with 0 or 1 and prints a verification result (the JSON of
  ``spec/v1/schemas/verification-result.schema.json``) on standard output;
* a document's ``path`` is resolved against the case folder; the case passes when the
  set of (document, code, pointer) of the error-level findings equals ``expected.json``'s
  ``findings``, every expected warning is reported, and ``valid`` matches the verdict.

Results are written as CTRF JSON (https://ctrf.io) or JUnit XML.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.display import visible
from mibspec.core.version import __version__
from mibspec.spec_tools.conformance import discover_cases, run_case
from mibspec.validator import Limits

__all__ = [
    "CTRF_SPEC_VERSION",
    "CaseResult",
    "SuiteRun",
    "default_suite",
    "run_external_case",
    "run_suite",
    "to_ctrf",
    "to_junit",
]

#: The CTRF version the JSON output follows.
CTRF_SPEC_VERSION = "0.1.0"

Key = tuple[str, str, str]  # (document relative to the case, code, pointer)


@dataclass
class CaseResult:
    """One case: ``status`` is ``passed`` or ``failed``; ``message`` says what differed."""

    name: str
    case: Path
    status: str
    duration_ms: int
    message: str | None = None
    requirements: list[str] = field(default_factory=list)


@dataclass
class SuiteRun:
    suite: Path
    implementation: str
    start_ms: int
    stop_ms: int
    cases: list[CaseResult]

    @property
    def passed(self) -> int:
        return sum(c.status == "passed" for c in self.cases)

    @property
    def failed(self) -> int:
        return sum(c.status == "failed" for c in self.cases)


def default_suite() -> Path | None:
    """``conformance/v1`` in the working directory or a parent, else beside a source checkout."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / "conformance" / "v1"
        if candidate.is_dir():
            return candidate
    checkout = Path(__file__).resolve().parents[2] / "conformance" / "v1"  # src/mibspec/ → <checkout>
    return checkout if checkout.is_dir() else None


def _case_name(suite: Path, case: Path) -> str:
    return case.relative_to(suite).as_posix()


def _describe(missing: set[Key], unexpected: set[Key], missing_warnings: set[Key]) -> str:
    parts = []
    for title, keys in (
        ("missing", missing),
        ("unexpected", unexpected),
        ("missing warning", missing_warnings),
    ):
        parts += [f"{title}: {code} at '{pointer}' in {doc}" for doc, code, pointer in sorted(keys)]
    return "; ".join(parts)


def _expected(case: Path) -> tuple[dict[str, Any], set[Key], set[Key]]:
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    main_doc = expected.get("document", "document.json")

    def keys(entries: list[dict[str, str]]) -> set[Key]:
        return {(e.get("document") or main_doc, e["code"], e["pointer"]) for e in entries}

    return expected, keys(expected.get("findings", [])), keys(expected.get("warnings", []))


def _in_process(case: Path) -> tuple[bool, str | None]:
    outcome = run_case(case)
    if outcome.passed:
        return True, None
    details = _describe(
        outcome.expected - outcome.actual, outcome.actual - outcome.expected, outcome.missing_warnings
    )
    return False, "; ".join(p for p in (outcome.problem, details) if p) or "failed"


def _command(template: str, document: str, limits: Limits) -> list[str]:
    values = {"document": document, "max_bytes": str(limits.max_bytes), "max_depth": str(limits.max_depth)}
    args = shlex.split(template)
    if not args:
        raise ValueError("impl must be a command; got an empty string")
    has_document = any("{document}" in arg for arg in args)
    out = []
    for arg in args:
        for name, value in values.items():
            arg = arg.replace("{" + name + "}", value)
        out.append(arg)
    return out if has_document else [*out, document]


def _keys_from_output(case: Path, output: Any) -> tuple[bool, set[Key], set[Key]]:
    """(valid, error keys, warning keys) from a verification-result JSON value."""
    if not isinstance(output, dict) or not isinstance(output.get("valid"), bool):
        raise ValueError('the output is not a verification result: no boolean "valid"')
    documents = output.get("documents")
    if not isinstance(documents, list):
        raise ValueError('the output is not a verification result: no "documents" list')
    errors: set[Key] = set()
    warnings: set[Key] = set()
    for i, doc in enumerate(documents):
        if not isinstance(doc, dict) or not isinstance(doc.get("path"), str):
            raise ValueError(f"documents[{i}] has no path")
        path = Path(doc["path"])
        relative = os.path.relpath(path if path.is_absolute() else case / path, case).replace(os.sep, "/")
        for j, finding in enumerate(doc.get("findings", [])):
            try:
                key = (relative, str(finding["code"]), str(finding["pointer"]))
                severity = finding["severity"]
            except (KeyError, TypeError) as exc:
                raise ValueError(f"documents[{i}].findings[{j}] lacks code, pointer or severity") from exc
            if severity == "error":
                errors.add(key)
            elif severity == "warning":
                warnings.add(key)
    return output["valid"], errors, warnings


def run_external_case(case: Path, command: str, *, timeout: float = 120.0) -> tuple[bool, str | None]:
    """Run another implementation on one case (protocol: module docstring); (passed, message)."""
    expected, want, want_warnings = _expected(case)
    defaults = Limits()
    limits = Limits(
        max_bytes=expected.get("max_bytes", defaults.max_bytes),
        max_depth=expected.get("max_depth", defaults.max_depth),
    )
    argv = _command(command, expected.get("document", "document.json"), limits)
    try:
        completed = subprocess.run(
            argv,
            cwd=case,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return False, f"command not found: {argv[0]}"
    except subprocess.TimeoutExpired:
        return False, f"no answer within {timeout:g} s"
    if completed.returncode not in (0, 1):
        stderr = completed.stderr.strip().splitlines()
        return False, f"exit code {completed.returncode}" + (f": {stderr[-1]}" if stderr else "")
    try:
        valid, actual, warnings = _keys_from_output(case, json.loads(completed.stdout))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return False, f"the output is not verification-result JSON ({exc})"
    problems = []
    if valid != (expected["verdict"] == "valid"):
        problems.append(f"verdict {'valid' if valid else 'invalid'}, expected {expected['verdict']}")
    if completed.returncode != (0 if valid else 1):
        problems.append(f"exit code {completed.returncode} does not match valid = {valid}")
    details = _describe(want - actual, actual - want, want_warnings - warnings)
    if details:
        problems.append(details)
    return (not problems), "; ".join(problems) or None


def run_suite(
    suite: Path,
    *,
    impl: str | None = None,
    timeout: float = 120.0,
    on_case: Callable[[CaseResult], None] | None = None,
) -> SuiteRun:
    """Run every case of ``suite`` (a folder such as ``conformance/v1``).

    Args:
        suite: the suite folder (``<kind>/<valid|invalid>/<case>/expected.json`` below it).
        impl: a command following the protocol of the module docstring; ``None`` runs
            this implementation in-process.
        timeout: seconds allowed per case for ``impl``.
        on_case: called with each case's result as soon as it is known.

    Raises:
        ValueError: ``suite`` holds no case, or ``impl`` is an empty command.
    """
    cases = discover_cases(suite)
    if not cases:
        raise ValueError(
            f"suite must hold <kind>/<valid|invalid>/<case>/expected.json folders; got none in {suite}"
        )
    if impl is not None and not shlex.split(impl):
        raise ValueError("impl must be a command; got an empty string")
    start = _now_ms()
    results = []
    for case in cases:
        began = time.perf_counter()
        passed, message = (
            _in_process(case) if impl is None else run_external_case(case, impl, timeout=timeout)
        )
        expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
        result = CaseResult(
            name=_case_name(suite, case),
            case=case,
            status="passed" if passed else "failed",
            duration_ms=round((time.perf_counter() - began) * 1000),
            message=message,
            requirements=list(expected.get("requirements", [])),
        )
        results.append(result)
        if on_case is not None:
            on_case(result)
    return SuiteRun(
        suite=suite,
        implementation=impl if impl is not None else f"mibspec {__version__} (in-process)",
        start_ms=start,
        stop_ms=_now_ms(),
        cases=results,
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_ctrf(run: SuiteRun) -> dict[str, Any]:
    """The run as a CTRF report (``reportFormat``, ``specVersion``, ``results``)."""
    tests = []
    for case in run.cases:
        test: dict[str, Any] = {"name": case.name, "status": case.status, "duration": case.duration_ms}
        if case.message:
            test["message"] = case.message
        test["filePath"] = f"{case.name}/expected.json"
        if case.requirements:
            test["extra"] = {"requirements": case.requirements}
        tests.append(test)
    return {
        "reportFormat": "CTRF",
        "specVersion": CTRF_SPEC_VERSION,
        "generatedBy": f"mibspec {__version__}",
        "results": {
            "tool": {"name": "mibspec conformance", "version": __version__},
            "summary": {
                "tests": len(run.cases),
                "passed": run.passed,
                "failed": run.failed,
                "pending": 0,
                "skipped": 0,
                "other": 0,
                "start": run.start_ms,
                "stop": run.stop_ms,
            },
            "tests": tests,
        },
        "extra": {"implementation": run.implementation, "suite": str(run.suite)},
    }


def to_junit(run: SuiteRun) -> str:
    """The run as JUnit XML: one ``testsuite`` per ``<kind>/<verdict>`` folder."""
    import xml.etree.ElementTree as ET

    groups: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        groups.setdefault(case.name.rsplit("/", 1)[0], []).append(case)
    root = ET.Element(
        "testsuites",
        name="mibspec conformance",
        tests=str(len(run.cases)),
        failures=str(run.failed),
        errors="0",
        time=f"{sum(c.duration_ms for c in run.cases) / 1000:.3f}",
    )
    for group, cases in groups.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=visible(group),
            tests=str(len(cases)),
            failures=str(sum(c.status == "failed" for c in cases)),
            errors="0",
            skipped="0",
            time=f"{sum(c.duration_ms for c in cases) / 1000:.3f}",
        )
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="implementation", value=visible(run.implementation))
        for case in cases:
            element = ET.SubElement(
                suite,
                "testcase",
                classname=visible(group.replace("/", ".")),
                name=visible(case.name.rsplit("/", 1)[1]),
                time=f"{case.duration_ms / 1000:.3f}",
            )
            if case.status == "failed":
                failure = ET.SubElement(element, "failure", message=visible(case.message or "failed"))
                failure.text = visible(case.message or "failed")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
