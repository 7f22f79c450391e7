"""Recomputing a causal-variable report that names no checker uses its profile's (SPEC.md PR-3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.reference_impl.recompute import _inputs
from mibspec.reference_impl.recompute import causal_variable as recompute_cv

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"

pytestmark = pytest.mark.recompute


@pytest.mark.parametrize(("profile", "expected"), [("mib-2025", "substring"), ("default", "exact_token")])
def test_a_report_without_checker_is_recomputed_with_its_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str, expected: str
) -> None:
    pytest.importorskip("torch")
    folder = tmp_path / "report"
    shutil.copytree(REPO / "examples" / "causal-variable-ravel", folder)
    path = folder / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["profile"] = profile
    data.get("settings", {}).pop("checker", None)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    used: list[str] = []

    def evaluator(*args: Any, checker: str, **kwargs: Any) -> Any:
        used.append(checker)
        raise _inputs.UnusableInputError("/settings", "stopped once the checker is known")

    monkeypatch.setattr(recompute_cv, "Evaluator", evaluator)
    result = mibspec.verify(path, model_roots=[MODELS])
    assert used == [expected]
    report = next(doc for doc in result.documents if doc.path.endswith("report.json"))
    assert [f.code for f in report.findings] == ["R104"]  # the stop above, nothing else
