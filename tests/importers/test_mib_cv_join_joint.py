"""MIB's IOI result file whose one unit joins every submitted head, joined with the
submission's per-head featurizers into one joint unit (spec 1.2, MV-10).

MIB's IOI evaluation (``ioi_evaluate_submission.py``) loads one featurizer per
``AttentionHead(Layer*X,Head*Y,Token*all)_featurizer`` file of the submission folder and scores
all those heads together, under one result-file key listing them. Here the submission holds
three heads of two layers (indices-only units, each the identity of one GPT-2 head); the
expected sites are written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _mib_files import resolve_gpt2

import mibspec
from mibspec.importers import import_mib_cv_submission
from mibspec.importers.mib_cv_join import join_mib_cv_results

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "examples" / "causal-variable-ioi" / "dataset.json"
CELL = "ioi_task_GPT2LMHeadModel_output_token"
#: the heads in the order MIB's key lists them (as its loader found the files), not sorted
HEADS = ((8, 6), (7, 9), (7, 3))
SCORE = {"io_s1_flip_test": 0.5}


def _unit(layer: int, head: int) -> str:
    return f"AttentionHead(Layer:{layer},Head:{head},Token:all)"


def _key(heads: tuple[tuple[int, int], ...]) -> str:
    return "[[" + ", ".join(f"AtomicModelUnit(id='{_unit(*h)}')" for h in heads) + "]]"


def _featurizers(tmp_path: Path, heads: tuple[tuple[int, int], ...] = HEADS) -> list[Path]:
    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    for head in heads:
        (cell / f"{_unit(*head)}_indices").write_text("[1, 2]", encoding="utf-8")
    imported = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert imported.findings == []
    return imported.written


def _results(tmp_path: Path, key: str) -> Path:
    first_layer, first_head = HEADS[0]
    entry: dict[str, Any] = {"metadata": {"layer": first_layer, "head": first_head, "position": "all"}}
    payload = {
        "method_name": "submission",
        "model_name": "GPT2LMHeadModel",
        "task_name": "ioi_task",
        "dataset": {
            cf: {"model_unit": {key: {**entry, "output_token": {"average_score": v}}}}
            for cf, v in SCORE.items()
        },
    }
    path = tmp_path / "ioi_output_token.json"
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def _join(tmp_path: Path, key: str, heads: tuple[tuple[int, int], ...] = HEADS) -> Any:
    featurizers = _featurizers(tmp_path, heads)
    return join_mib_cv_results(
        [_results(tmp_path, key)], featurizers, tmp_path / "out", dataset=DATASET, resolve=resolve_gpt2
    )


def test_a_joint_unit_joins_one_featurizer_per_head_and_verifies(tmp_path: Path) -> None:
    joined = _join(tmp_path, _key(HEADS))
    assert joined.findings == []
    [path] = joined.written
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["spec_version"] == "1.2"
    [variable] = report["claims"]["variables"]
    [unit] = variable["units"]
    artifacts = {a["id"]: a["path"] for a in report["artifacts"] if a["role"] == "featurizer"}
    assert len(artifacts) == 3
    assert unit["location"] == {
        "layer": 7,
        "component": "attention_heads",
        "heads": [3],
        "position": {"rule": "all"},
    }
    sites = [{k: v for k, v in s.items() if k != "featurizer"} for s in unit["joint_sites"]]
    assert sites == [
        {"layer": 7, "component": "attention_heads", "heads": [9]},
        {"layer": 8, "component": "attention_heads", "heads": [6]},
    ]
    # each site names the featurizer document of its own head
    for site, (layer, head) in zip([unit, *unit["joint_sites"]], [(7, 3), (7, 9), (8, 6)], strict=True):
        document = json.loads((path.parent / artifacts[site["featurizer"]]).read_text(encoding="utf-8"))
        assert document["location"]["layer"] == layer
        assert document["location"]["heads"] == [head]
    assert unit["scores"] == {"io_s1_flip": 0.5}
    assert (variable["per_layer"], variable["best"]) == ({"7": 0.5}, 0.5)
    verified = mibspec.verify(path, recompute=False)
    assert [f for f in verified.findings if f.severity.value == "error"] == []
    assert "V110" not in {f.code for f in verified.findings}  # every site has its featurizer


def test_heads_of_one_layer_scored_together_join_as_a_joint_unit(tmp_path: Path) -> None:
    """Each featurizer is one head's, so two heads of one layer are two sites of one unit."""
    heads = ((7, 9), (7, 3))
    joined = _join(tmp_path, _key(heads), heads)
    assert joined.findings == []
    [path] = joined.written
    [unit] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"][0]["units"]
    assert unit["location"]["heads"] == [3]
    assert [(s["layer"], s["heads"]) for s in unit["joint_sites"]] == [(7, [9])]
    verified = mibspec.verify(path, recompute=False)
    assert [f for f in verified.findings if f.severity.value == "error"] == []


def test_a_joint_unit_missing_one_heads_featurizer_is_i112(tmp_path: Path) -> None:
    key = _key(HEADS)
    joined = _join(tmp_path, key, HEADS[1:])
    [finding] = joined.findings
    assert (finding.code, finding.pointer) == ("I112", f"/dataset/io_s1_flip_test/model_unit/{key}")
    assert finding.line is not None
    assert "joined with the featurizer of each of them" in finding.message
    assert not joined.written
    assert not (tmp_path / "out" / CELL / "report.json").exists()


def test_a_head_listed_twice_is_v113_after_the_join(tmp_path: Path) -> None:
    key = _key(((7, 3), (8, 6), (7, 3)))
    joined = _join(tmp_path, key, ((7, 3), (8, 6)))
    assert joined.findings == []
    [path] = joined.written
    verified = mibspec.verify(path, recompute=False)
    errors = [(f.code, f.pointer) for f in verified.findings if f.severity.value == "error"]
    assert errors == [("V113", "/claims/variables/0/units/0/joint_sites/0")]


@pytest.mark.recompute
def test_verify_submission_recomputes_a_joint_unit_at_every_site(tmp_path: Path) -> None:
    """MIB's layout on the shipped tiny GPT-2 (2 layers, 4 heads of 16 values): three DAS heads
    of both layers scored as one unit, its claimed squared error far off. ``verify-submission``
    joins each head's featurizer and recomputes the unit: the claim is R103 at its score, and
    nothing is missing for recomputation (no V110, no R104)."""
    torch = pytest.importorskip("torch")
    from mibspec.submissions import SubmissionRequest, verify_submission

    heads = ((1, 2), (0, 1), (0, 3))
    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    generator = torch.Generator().manual_seed(5)
    for head in heads:
        rotation, _ = torch.linalg.qr(torch.randn(16, 2, generator=generator))
        info = {
            "featurizer_class": "SubspaceFeaturizerModule",
            "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
            "n_features": 2,
            "additional_config": {"rotation_matrix": rotation.contiguous()},
        }
        for suffix in ("_featurizer", "_inverse_featurizer"):
            torch.save({"model_info": info, "state_dict": {}}, cell / f"{_unit(*head)}{suffix}")
        (cell / f"{_unit(*head)}_indices").write_text("null", encoding="utf-8")
    key = _key(heads)
    payload = json.loads(_results(tmp_path, key).read_text(encoding="utf-8"))
    payload["model_name"] = "tiny-gpt2"
    for block in payload["dataset"].values():
        block["model_unit"][key]["output_token"]["average_score"] = 1.0e6
        block["model_unit"][key]["metadata"] = {"layer": 1, "head": 2, "position": "all"}
    results = tmp_path / "ioi_output_token.json"
    results.write_text(json.dumps(payload), encoding="utf-8")
    request = SubmissionRequest(
        submission=tmp_path / "submission",
        out_dir=tmp_path / "out",
        dataset=str(DATASET),
        architecture="GPT2LMHeadModel",
        model_roots=(REPO / "examples" / "models",),
        results=(results,),
    )
    outcome = verify_submission(request)
    assert outcome.findings == []
    assert outcome.verification is not None
    [report_path] = outcome.reports
    [unit] = json.loads(report_path.read_text(encoding="utf-8"))["claims"]["variables"][0]["units"]
    assert (unit["location"]["layer"], unit["location"]["heads"]) == (0, [1])
    assert [(s["layer"], s["heads"]) for s in unit["joint_sites"]] == [(0, [3]), (1, [2])]
    [document] = [d for d in outcome.verification.documents if d.path == str(report_path)]
    codes = {(f.code, f.pointer) for f in document.findings}
    pointer = "/claims/variables/0/units/0/scores/io_s1_flip"
    assert ("R103", pointer) in codes, codes
    assert not {code for code, _ in codes} & {"R104", "V110", "V105", "V113"}, codes
    [comparison] = [c for c in document.comparisons if c.pointer == pointer]
    assert comparison.claimed == 1.0e6
    assert 0.0 <= comparison.recomputed < 1.0e6  # a squared error, recomputed
    assert not outcome.valid
