"""``export mib-submission`` of a joint unit (spec 1.2, MV-10): MIB's IOI unit of heads across
layers goes back to MIB's layout and is read back the same.

The submission holds one featurizer per head (indices-only units, each the identity of one GPT-2
head), as MIB's IOI evaluation loads them; the result file scores all of them as one unit, under
the key listing every head, and one head alone as well. Import, join, export, import and join
again must give the same units, sites and scores; the exported result-file key and files are
written out by hand below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _mib_files import resolve_gpt2

import mibspec
from mibspec.exporters import export_mib_cv_submission
from mibspec.importers import import_mib_cv_submission
from mibspec.importers.mib_cv_join import join_mib_cv_results

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "examples" / "causal-variable-ioi" / "dataset.json"
CELL = "ioi_task_GPT2LMHeadModel_output_token"
HEADS = ((7, 3), (7, 9), (8, 6))


def _unit(layer: int, head: int) -> str:
    return f"AttentionHead(Layer:{layer},Head:{head},Token:all)"


def _key(heads: tuple[tuple[int, int], ...]) -> str:
    return "[[" + ", ".join(f"AtomicModelUnit(id='{_unit(*h)}')" for h in heads) + "]]"


JOINT = _key(HEADS)
ALONE = f"[[AtomicModelUnit(id='{_unit(7, 3)}')]]"


def _results(path: Path, joint_key: str = JOINT) -> Path:
    dataset: dict[str, Any] = {}
    for cf, (joint, alone) in {"io_s1_flip_test": (0.5, 1.5), "abc_test": (0.25, 2.0)}.items():
        dataset[cf] = {
            "model_unit": {
                key: {
                    "metadata": {"layer": 7, "head": 3, "position": "all"},
                    "output_token": {"average_score": v},
                }
                for key, v in ((joint_key, joint), (ALONE, alone))
            }
        }
    payload = {
        "method_name": "submission",
        "model_name": "GPT2LMHeadModel",
        "task_name": "ioi_task",
        "dataset": dataset,
    }
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def _import_and_join(submission: Path, results: Path, out: Path) -> Path:
    imported = import_mib_cv_submission(submission, out)
    assert imported.findings == []
    featurizers = [p for p in imported.written if p.suffix == ".json"]
    joined = join_mib_cv_results([results], featurizers, out, dataset=DATASET, resolve=resolve_gpt2)
    assert joined.findings == []
    [report] = joined.written
    return report


def _first_report(tmp_path: Path, joint_key: str = JOINT) -> Path:
    """The submission of the three heads and the result file, imported and joined."""
    submission = tmp_path / "submission" / CELL
    submission.mkdir(parents=True)
    for head in HEADS:
        (submission / f"{_unit(*head)}_indices").write_text("[1, 2]", encoding="utf-8")
    results = _results(tmp_path / "results.json", joint_key)
    return _import_and_join(tmp_path / "submission", results, tmp_path / "first")


def _claims(report: Path) -> dict[str, Any]:
    claims: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))["claims"]
    return claims


@pytest.mark.slow
def test_a_joint_unit_is_exported_as_mib_lays_it_out_and_read_back_the_same(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    first = _first_report(tmp_path)
    verified = mibspec.verify(first, recompute=False)
    assert [f for f in verified.findings if f.severity.value == "error"] == []

    exported = export_mib_cv_submission([first], tmp_path / "exported")
    assert exported.findings == []
    folder = tmp_path / "exported" / CELL
    # one file set per head, written once although two units use head 7.3
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith("_indices")) == sorted(
        f"{_unit(*h)}_indices" for h in HEADS
    )
    [results] = [p for p in folder.iterdir() if p.suffix == ".json"]
    assert results.name == "output_tokenioi_taskGPT2LMHeadModelsubmissionresults.json"
    written = json.loads(results.read_text(encoding="utf-8"))
    assert (written["method_name"], written["model_name"], written["task_name"]) == (
        "submission",
        "GPT2LMHeadModel",
        "ioi_task",
    )
    assert sorted(written["dataset"]) == ["abc_test", "io_s1_flip_test"]
    units = written["dataset"]["io_s1_flip_test"]["model_unit"]
    assert units == {
        ALONE: {
            "metadata": {"layer": 7, "head": 3, "position": "all"},
            "output_token": {"average_score": 1.5},
        },
        JOINT: {
            "metadata": {"layer": 7, "head": 3, "position": "all"},
            "output_token": {"average_score": 0.5},
        },
    }

    second = _import_and_join(tmp_path / "exported", results, tmp_path / "second")
    assert _claims(second) == _claims(first)
    [variable] = _claims(second)["variables"]
    joint = next(u for u in variable["units"] if u["id"] == JOINT)
    assert [(s["layer"], s["heads"]) for s in joint["joint_sites"]] == [(7, [9]), (8, [6])]
    assert joint["scores"] == {"abc": 0.25, "io_s1_flip": 0.5}


@pytest.mark.slow
def test_a_key_listing_its_heads_in_another_order_is_written_back_as_it_was(tmp_path: Path) -> None:
    """The unit keeps the key it was imported under as its id (the order MIB's ``--heads_list``
    gave); the export writes that key, not one re-listed by layer, so a second import gives the
    same unit id."""
    pytest.importorskip("torch")
    shuffled = _key((HEADS[2], HEADS[0], HEADS[1]))
    first = _first_report(tmp_path, shuffled)
    exported = export_mib_cv_submission([first], tmp_path / "exported")
    assert exported.findings == []
    [results] = [p for p in (tmp_path / "exported" / CELL).iterdir() if p.suffix == ".json"]
    written = json.loads(results.read_text(encoding="utf-8"))
    assert sorted(written["dataset"]["abc_test"]["model_unit"]) == sorted([ALONE, shuffled])
    second = _import_and_join(tmp_path / "exported", results, tmp_path / "second")
    assert _claims(second) == _claims(first)
    joint = next(u for u in _claims(second)["variables"][0]["units"] if u["id"] == shuffled)
    # the sites stay ordered by layer and head whatever the key's order
    assert joint["location"]["layer"] == 7
    assert [(s["layer"], s["heads"]) for s in joint["joint_sites"]] == [(7, [9]), (8, [6])]


def test_a_joint_site_without_a_featurizer_is_refused_on_export(tmp_path: Path) -> None:
    """Every site of a joint unit is a model unit of MIB's key: one without its featurizer has no
    files to write, so nothing is written."""
    pytest.importorskip("torch")
    first = _first_report(tmp_path)
    report = json.loads(first.read_text(encoding="utf-8"))
    [variable] = report["claims"]["variables"]
    u = next(i for i, unit in enumerate(variable["units"]) if unit["id"] == JOINT)
    del variable["units"][u]["joint_sites"][1]["featurizer"]
    first.write_text(json.dumps(report), encoding="utf-8")
    exported = export_mib_cv_submission([first], tmp_path / "exported")
    assert [(f.code, f.pointer) for f in exported.findings] == [
        ("I125", f"/claims/variables/0/units/{u}/joint_sites/1/featurizer")
    ]
    assert not (tmp_path / "exported").exists()
