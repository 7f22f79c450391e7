"""``mibspec verify-submission`` on a causal-variable submission of IOI ``Token:all`` units.

The submission is written here in MIB's layout, as the public code saves DAS featurizers
(``SubspaceFeaturizerModule`` with ``additional_config.rotation_matrix``), for one head of the
shipped tiny GPT-2 at two layers, at every token; the rotation is the identity, so each unit
interchanges the head's whole output. Its result file, in the layout of MIB's IOI evaluation,
carries the scores ``mibspec score causal-variable --method full_vector`` computes for the same
units: recomputation through the imported files must reproduce them. The folder has no
``token_positions.json``: IOI's ``all`` needs no declaration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import SmallDataset

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
CELL = "ioi_task_GPT2LMHeadModel_output_token"
HEAD, LAYERS = 1, (2, 3)

pytestmark = [pytest.mark.recompute, pytest.mark.slow]


def _mibspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1", "SOURCE_DATE_EPOCH": "1748856600"}
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _unit_id(layer: int) -> str:
    return f"AttentionHead(Layer:{layer},Head:{HEAD},Token:all)"


def _mib_files(cell: Path) -> None:
    """Each unit as MIB's ``save_modules`` writes a DAS featurizer, with an identity rotation
    of the head's 16 values, and null indices (every feature)."""
    torch = pytest.importorskip("torch")
    cell.mkdir(parents=True)
    for layer in LAYERS:
        info = {
            "featurizer_class": "SubspaceFeaturizerModule",
            "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
            "n_features": 16,
            "additional_config": {"rotation_matrix": torch.eye(16), "requires_grad": True},
        }
        for suffix in ("_featurizer", "_inverse_featurizer"):
            torch.save({"model_info": info, "state_dict": {}}, cell / f"{_unit_id(layer)}{suffix}")
        (cell / f"{_unit_id(layer)}_indices").write_text("null", encoding="utf-8")


def _results(scored: dict[str, Any], path: Path, moved: float = 0.0) -> None:
    """The scored units in the layout of MIB's IOI evaluation; ``moved`` is added to the
    layer-3 unit's random_names score."""
    dataset: dict[str, Any] = {}
    [variable] = scored["claims"]["variables"]
    for unit in variable["units"]:
        layer = unit["location"]["layer"]
        key = f"[[AtomicModelUnit(id='{_unit_id(layer)}')]]"
        for cf, score in unit["scores"].items():
            value = score + (moved if (layer, cf) == (3, "random_names") else 0.0)
            dataset.setdefault(f"{cf}_test", {"model_unit": {}})["model_unit"][key] = {
                "metadata": {"layer": layer, "head": HEAD, "position": "all"},
                "output_token": {"average_score": value, "scores": [value]},
            }
    payload = {
        "method_name": "submission",
        "model_name": "tiny-gpt2",
        "task_name": "ioi_task",
        "dataset": dataset,
    }
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("token-all")
    dataset = small_ioi_dataset(root, 48)
    score = [
        *("score", "causal-variable", "-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset)),
        *("-o", str(root / "scored"), "--method", "full_vector", "--component", "attention_heads"),
        *("--head", str(HEAD), "--layer", "2", "--layer", "3", "--position", "all"),
        *("--variable", "output_token", "-c", "random_names", "-c", "io_s2_flip"),
    ]
    done = _mibspec(*score, cwd=root)
    assert done.returncode == 0, done.stderr
    _mib_files(root / "submission" / CELL)
    return {"root": root, "scored": root / "scored"}


def _verify(
    submission: dict[str, Path], tmp_path: Path, moved: float, folder: Path | None = None
) -> subprocess.CompletedProcess[str]:
    scored = json.loads((submission["scored"] / "report.json").read_text(encoding="utf-8"))
    results = tmp_path / "ioi_output_token.json"
    _results(scored, results, moved)
    return _mibspec(
        *("verify-submission", str(folder or submission["root"] / "submission"), "-o", str(tmp_path / "out")),
        *("--dataset", str(submission["scored"] / "dataset.json"), "--architecture", "GPT2LMHeadModel"),
        *("--model-root", str(MODELS), "--results", str(results), "--format", "json"),
        cwd=tmp_path,
    )


def _report(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "out" / CELL / "report.json").read_text(encoding="utf-8"))
    return data


def test_the_full_vector_scores_are_reproduced_through_mib_files(
    submission: dict[str, Path], tmp_path: Path
) -> None:
    done = _verify(submission, tmp_path, 0.0)
    assert done.returncode == 0, done.stdout + done.stderr
    [variable] = _report(tmp_path)["claims"]["variables"]
    assert [u["location"] for u in variable["units"]] == [
        {"layer": layer, "component": "attention_heads", "position": {"rule": "all"}, "heads": [HEAD]}
        for layer in LAYERS
    ]
    out = json.loads(done.stdout)
    [report] = [d for d in out["documents"] if d["kind"] == "report"]
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert not [f for f in report["findings"] if f["code"].startswith(("I12", "V110"))]


def test_a_result_score_moved_beyond_tolerance_is_r103(submission: dict[str, Path], tmp_path: Path) -> None:
    """Moved by 1.0: beyond the float16 tolerance the mib-2025 recomputation allows (about
    0.2 at an MSE near 40), so the unit, its layer and the Average are not reproduced."""
    done = _verify(submission, tmp_path, 1.0)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    found = {(f["code"], f["pointer"]) for d in out["documents"] for f in d["findings"]}
    assert ("R103", "/claims/variables/0/units/1/scores/random_names") in found
    assert ("R103", "/claims/variables/0/per_layer/3") in found
    assert ("R103", "/claims/variables/0/units/0/scores/random_names") not in found
    assert "C112" not in {code for code, _ in found}  # the importer computed the aggregates


def test_a_rotation_of_the_residual_width_at_a_head_is_r104_at_its_featurizer(
    submission: dict[str, Path], tmp_path: Path
) -> None:
    """The layer-3 unit's DAS file holds a rotation of d_model (64) rows where the head has 16
    values. The tiny model is not one of MIB's, so the report declares no configuration for the
    rules to compare widths with: recomputation refuses the unit where it names its featurizer."""
    import shutil

    torch = pytest.importorskip("torch")
    folder = tmp_path / "submission"
    shutil.copytree(submission["root"] / "submission", folder)
    info = {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": 8,
        "additional_config": {"rotation_matrix": torch.eye(64)[:, :8].contiguous(), "requires_grad": True},
    }
    for suffix in ("_featurizer", "_inverse_featurizer"):
        torch.save({"model_info": info, "state_dict": {}}, folder / CELL / f"{_unit_id(3)}{suffix}")
    done = _verify(submission, tmp_path, 0.0, folder)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    found = {(f["code"], f["pointer"]): f["message"] for d in out["documents"] for f in d["findings"]}
    assert found == {
        (
            "R104",
            "/claims/variables/0/units/1/featurizer",
        ): "the featurizer reads 64 values, the site holds 16"
    }
