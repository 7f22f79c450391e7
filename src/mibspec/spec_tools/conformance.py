"""Running the conformance suite (``conformance/v1/<kind>/<valid|invalid>/<case>/``).

The suite lives in the repository, not in the installed package: it holds
deliberately hostile files (links pointing out of their case, truncated sidecars).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from mibspec.validator import Limits, VerifyOptions, verify_paths

__all__ = ["CaseOutcome", "discover_cases", "run_case"]

Key = tuple[str, str, str]  # (document relative to the case, code, pointer)


@dataclass
class CaseOutcome:
    case: Path
    id: str
    passed: bool
    expected: set[Key] = field(default_factory=set)
    actual: set[Key] = field(default_factory=set)
    missing_warnings: set[Key] = field(default_factory=set)
    problem: str | None = None


def discover_cases(root: Path) -> list[Path]:
    """Every case folder below ``root`` (e.g. ``conformance/v1``), in a stable order."""
    return sorted(path.parent for path in root.glob("*/*/*/expected.json"))


def run_case(case: Path) -> CaseOutcome:
    """Verify a case's document (no recomputation) and compare codes and pointers with expected.json."""
    expected = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    defaults = Limits()
    limits = Limits(
        max_bytes=expected.get("max_bytes", defaults.max_bytes),
        max_depth=expected.get("max_depth", defaults.max_depth),
    )
    document = case / expected.get("document", "document.json")
    result = verify_paths([document], VerifyOptions(recompute=False, limits=limits))

    def key(doc_path: str, code: str, pointer: str) -> Key:
        relative = os.path.relpath(doc_path, case).replace(os.sep, "/")
        return (relative, code, pointer)

    actual = {key(d.path, f.code, f.pointer) for d in result.documents for f in d.errors}
    warnings = {key(d.path, f.code, f.pointer) for d in result.documents for f in d.warnings}
    main_doc = expected.get("document", "document.json")

    def expected_keys(entries: list[dict[str, str]]) -> set[Key]:
        return {(e.get("document") or main_doc, e["code"], e["pointer"]) for e in entries}

    want = expected_keys(expected.get("findings", []))
    want_warnings = expected_keys(expected.get("warnings", []))
    verdict_ok = result.valid == (expected["verdict"] == "valid")
    missing_warnings = want_warnings - warnings
    passed = verdict_ok and actual == want and not missing_warnings
    problem = None
    if not verdict_ok:
        problem = f"verdict {'valid' if result.valid else 'invalid'}, expected {expected['verdict']}"
    return CaseOutcome(case, expected["id"], passed, want, actual, missing_warnings, problem)
