"""The bundled causal-variable reports verify with recomputation on the shipped tiny model.

Every claimed number of each report (each unit's score and kept-pair count per
counterfactual set, each layer, Average, Best, the row count) is recomputed and
compared; the comparisons' count is derived here from the report's own structure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mibspec

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["causal-variable-ioi", "causal-variable-arithmetic", "causal-variable-ravel"]
)
def test_bundled_report_verifies_with_recomputation(name: str) -> None:
    pytest.importorskip("torch")
    report_path = REPO / "examples" / name / "report.json"
    result = mibspec.verify(report_path, model_roots=[MODELS])
    assert result.valid, [str(f) for f in result.findings]
    report = result.documents[0]
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    data = json.loads(report_path.read_text(encoding="utf-8"))
    expected = 1  # task.n_examples
    for variable in data["claims"]["variables"]:
        expected += 2 + len(variable["per_layer"])
        expected += sum(len(u["scores"]) + len(u.get("n_examples") or {}) for u in variable["units"])
    assert len(report.comparisons) == expected
    assert all(c.claimed is not None and c.within for c in report.comparisons)
    kinds = {doc.kind for doc in result.documents}
    assert kinds == {"report", "featurizer", "counterfactual_dataset", "causal_model"}


def test_ioi_report_says_lower_is_better() -> None:
    data = json.loads((REPO / "examples" / "causal-variable-ioi" / "report.json").read_text(encoding="utf-8"))
    for variable in data["claims"]["variables"]:
        assert (variable["metric"], variable["better"]) == ("mse", "lower")
        assert variable["best"] == min(variable["per_layer"].values())
    assert "lower is better" in data["description"]


def test_without_the_model_root_the_model_is_not_found() -> None:
    pytest.importorskip("torch")
    result = mibspec.verify(REPO / "examples" / "causal-variable-arithmetic" / "report.json")
    assert [(f.code, f.pointer) for f in result.findings] == [("R104", "/model/path")]


def test_ravel_report_is_on_the_shipped_ravel_model() -> None:
    data = json.loads(
        (REPO / "examples" / "causal-variable-ravel" / "report.json").read_text(encoding="utf-8")
    )
    assert data["model"]["path"] == "tiny-gpt2-ravel"
    trained = json.loads((MODELS / "tiny-gpt2-ravel" / "training.json").read_text(encoding="utf-8"))
    for name, digest in data["model"]["files"].items():
        assert trained["sha256"][name] == digest, name
    assert {v["name"] for v in data["claims"]["variables"]} == {"Country", "Continent", "Language"}
