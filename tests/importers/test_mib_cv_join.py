"""MIB's IOI result files joined with a submission's ``Token:all`` featurizers.

The featurizers are indices-only units of a submission folder (each the identity of one GPT-2
head, 64 values), imported without a positions mapping: IOI's ``all`` needs none. The result
files are in the layout of MIB's IOI evaluation (``[[AtomicModelUnit(id='...')]]`` keys with
the first unit's ``metadata``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _mib_files import resolve_gpt2

from mibspec.importers import import_mib_cv_submission
from mibspec.importers.mib_cv_join import join_mib_cv_results

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "examples" / "causal-variable-ioi" / "dataset.json"
CELL = "ioi_task_GPT2LMHeadModel_output_token"
UNITS = ("AttentionHead(Layer:7,Head:3,Token:all)", "AttentionHead(Layer:7,Head:9,Token:all)")


def _featurizers(tmp_path: Path) -> list[Path]:
    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    for unit in UNITS:
        (cell / f"{unit}_indices").write_text("[1, 2]", encoding="utf-8")
    imported = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert imported.findings == []
    return imported.written


def _results(tmp_path: Path, units: dict[str, float]) -> Path:
    block: dict[str, Any] = {}
    for key, score in units.items():
        block[key] = {
            "metadata": {"layer": 7, "head": 3, "position": "all"},
            "output_token": {"average_score": score},
        }
    payload = {
        "method_name": "submission",
        "model_name": "GPT2LMHeadModel",
        "task_name": "ioi_task",
        "dataset": {"io_s1_flip_test": {"model_unit": block}},
    }
    path = tmp_path / "ioi_output_token.json"
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def test_units_at_every_token_join_their_featurizers(tmp_path: Path) -> None:
    featurizers = _featurizers(tmp_path)
    keys = [f"[[AtomicModelUnit(id='{unit.replace(':', '-')}')]]" for unit in UNITS]
    results = _results(tmp_path, {keys[0]: 2.0, keys[1]: 1.0})
    joined = join_mib_cv_results(
        [results], featurizers, tmp_path / "out", dataset=DATASET, resolve=resolve_gpt2
    )
    assert joined.findings == []
    [path] = joined.written
    [variable] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"]
    assert [(u["location"]["heads"], u["location"]["position"]) for u in variable["units"]] == [
        ([3], {"rule": "all"}),
        ([9], {"rule": "all"}),
    ]
    assert [u["scores"] for u in variable["units"]] == [{"io_s1_flip": 2.0}, {"io_s1_flip": 1.0}]
    assert (variable["per_layer"], variable["best"]) == ({"7": 1.0}, 1.0)  # MSE: the lower


def test_a_head_unit_at_every_token_whose_rotation_reads_the_residual_width_is_v105(tmp_path: Path) -> None:
    """A DAS file for ``AttentionHead(Layer:7,Head:3,Token:all)`` whose rotation has d_model
    (768) rows, not the head's 64: it imports as written (the rotation gives the width), and the
    joined report is refused where the unit names its featurizer."""
    torch = pytest.importorskip("torch")
    import mibspec

    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    rotation, _ = torch.linalg.qr(torch.randn(768, 8, generator=torch.Generator().manual_seed(3)))
    info = {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": 8,
        "additional_config": {"rotation_matrix": rotation.contiguous()},
    }
    for suffix in ("_featurizer", "_inverse_featurizer"):
        torch.save({"model_info": info, "state_dict": {}}, cell / f"{UNITS[0]}{suffix}")
    (cell / f"{UNITS[0]}_indices").write_text("null", encoding="utf-8")
    imported = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert imported.findings == []
    featurizers = [p for p in imported.written if p.suffix == ".json"]
    results = _results(tmp_path, {f"[[AtomicModelUnit(id='{UNITS[0]}')]]": 1.0})
    joined = join_mib_cv_results(
        [results], featurizers, tmp_path / "out", dataset=DATASET, resolve=resolve_gpt2
    )
    assert joined.findings == []
    [report] = joined.written
    verified = mibspec.verify(report, recompute=False)
    errors = {(f.code, f.pointer) for f in verified.findings if f.severity.value == "error"}
    assert ("V105", "/claims/variables/0/units/0/featurizer") in errors
    [width] = [f for f in verified.findings if f.pointer == "/claims/variables/0/units/0/featurizer"]
    assert "reads 768 values, the location holds 64" in width.message
    assert not verified.valid
