"""The causal-variable side of ``mibspec import mib-submission`` and ``mibspec export mib-submission``.

The submission folders are written here in the public layout (``<TASK>_<MODEL>_<VARIABLE>/
<unit>_featurizer``, ``_inverse_featurizer``, ``_indices``; the two ``.pt`` files hold
``model_info`` with the rotation as ``d_model × n_features``) from the featurizers of the
bundled arithmetic report on the shipped tiny model, so an imported submission can be put back
into that report and recomputed. The IOI ``Token:all`` units at the end are indices-only (the
identity of a GPT-2 head's 64 values, the public code's default): MIB's IOI task evaluates
attention heads at every token, its one position ``all``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mibspec
from mibspec.exporters import export_mib_cv_submission
from mibspec.importers import import_mib_cv_submission

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "causal-variable-arithmetic"
MODELS = REPO / "examples" / "models"
CELL = "arithmetic_GPT2LMHeadModel_ones_carry"
POSITIONS = {"last_token": {"rule": "last"}, "slot_operand_2": {"rule": "slot", "slot": "operand_2"}}


def _example_units() -> list[tuple[dict[str, Any], dict[str, Any], Path]]:
    """(report unit, featurizer document, featurizer path) of the bundled arithmetic report."""
    report = json.loads((EXAMPLE / "report.json").read_text(encoding="utf-8"))
    paths = {a["id"]: EXAMPLE / a["path"] for a in report["artifacts"]}
    units = []
    for unit in report["claims"]["variables"][0]["units"]:
        path = paths[unit["featurizer"]]
        units.append((unit, json.loads(path.read_text(encoding="utf-8")), path))
    return units


def _rotation(doc: dict[str, Any], path: Path) -> np.ndarray:
    from safetensors.numpy import load_file

    return load_file(path.parent / doc["artifacts"][0]["path"])["rotation"]


def _position_name(position: dict[str, Any]) -> str:
    return "last_token" if position["rule"] == "last" else f"slot_{position['slot']}"


def write_submission(folder: Path, *, separator: str = ":") -> Path:
    """The bundled arithmetic featurizers as a public submission folder (unit ids written
    with ``separator``), each file dated as its featurizer."""
    cell = folder / CELL
    cell.mkdir(parents=True)
    for _, doc, path in _example_units():
        location = doc["location"]
        name = _position_name(location["position"])
        unit_id = f"ResidualStream(Layer{separator}{location['layer']},Token{separator}{name})"
        matrix = torch.from_numpy(_rotation(doc, path).T.copy())  # d_model × n_features, as saved publicly
        info = {
            "featurizer_class": "SubspaceFeaturizerModule",
            "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
            "n_features": doc["n_features"],
            "additional_config": {"rotation_matrix": matrix, "requires_grad": True},
        }
        torch.save({"model_info": info, "state_dict": {}}, cell / f"{unit_id}_featurizer")
        torch.save({"model_info": info, "state_dict": {}}, cell / f"{unit_id}_inverse_featurizer")
        (cell / f"{unit_id}_indices").write_text(json.dumps(doc["feature_indices"]), encoding="utf-8")
        stamp = datetime.fromisoformat(doc["provenance"]["created"].replace("Z", "+00:00")).timestamp()
        for suffix in ("_featurizer", "_inverse_featurizer", "_indices"):
            os.utime(cell / f"{unit_id}{suffix}", (stamp, stamp))
    return folder


def _positions(tmp_path: Path, mapping: dict[str, Any]) -> Path:
    path = tmp_path / "positions.json"
    path.write_text(json.dumps(mapping), encoding="utf-8")
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("separator", [":", "-"])
def test_imported_featurizers_are_the_originals(tmp_path: Path, separator: str) -> None:
    source = write_submission(tmp_path / "submission", separator=separator)
    before = _tree(source)
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert result.findings == []
    assert len(result.written) == 8
    verified = mibspec.verify(*result.written, recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]
    by_location = {json.dumps(d["location"], sort_keys=True): (d, p) for _, d, p in _example_units()}
    for path in result.written:
        doc = json.loads(path.read_text(encoding="utf-8"))
        original, original_path = by_location[json.dumps(doc["location"], sort_keys=True)]
        for key in ("type", "input_dim", "n_features", "feature_indices", "weights", "error"):
            assert doc[key] == original[key], key
        imported_sidecar = path.parent / doc["artifacts"][0]["path"]
        assert (
            imported_sidecar.read_bytes()
            == (original_path.parent / original["artifacts"][0]["path"]).read_bytes()
        )
        assert doc["provenance"]["created"] == original["provenance"]["created"]
    assert _tree(source) == before


def test_units_without_a_declared_position_are_listed(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    result = import_mib_cv_submission(
        source, tmp_path / "out", positions=_positions(tmp_path, {"last_token": {"rule": "last"}})
    )
    codes = [f.code for f in result.findings]
    assert codes.count("I121") == 4
    assert codes.count("I122") == 1
    expected = {f"/{CELL}/ResidualStream(Layer:{layer},Token:slot_operand_2)" for layer in range(4)}
    assert {f.pointer for f in result.findings if f.code == "I121"} == expected
    [summary] = [f for f in result.findings if f.code == "I122"]
    assert "4 of 8" in summary.message
    assert all(f.severity.value == "warning" for f in result.findings)
    named = [json.loads(p.read_text(encoding="utf-8"))["location"]["position"] for p in result.written]
    assert sorted(p["rule"] for p in named) == ["last"] * 4 + ["named"] * 4
    assert mibspec.verify(*result.written, recompute=False).valid


def test_without_positions_every_unit_is_listed(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    result = import_mib_cv_submission(source, tmp_path / "out")
    assert [f.code for f in result.findings].count("I121") == 8
    assert len(result.written) == 8


def _malicious(path: Path, marker: Path) -> None:
    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.mkdir, (str(marker),))

    torch.save({"model_info": {"featurizer_class": Payload()}, "state_dict": {}}, path)


@pytest.mark.slow
def test_a_pickle_with_a_callable_is_refused_and_never_runs(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    marker = tmp_path / "ran"
    [featurizer] = sorted((source / CELL).glob("ResidualStream(Layer:0,Token:last_token)_featurizer"))
    _malicious(featurizer, marker)
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert [(f.code, f.pointer) for f in result.findings] == [
        ("I118", f"/{CELL}/ResidualStream(Layer:0,Token:last_token)_featurizer")
    ]
    assert not marker.exists()
    assert not result.written
    assert not (tmp_path / "out").exists()
    # The payload is live: an unrestricted load, in a separate process, runs it.
    control = "import sys, torch; torch.load(sys.argv[1], weights_only=bool(0))"
    subprocess.run([sys.executable, "-c", control, str(featurizer)], check=False, capture_output=True)
    assert marker.exists()


def test_submitted_code_is_listed_and_never_run(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    marker = tmp_path / "ran"
    for name in ("featurizer.py", "token_position.py"):
        (source / name).write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    (source / "notes").mkdir()
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert sorted((f.code, f.pointer) for f in result.findings) == [
        ("I124", "/featurizer.py"),
        ("I124", "/notes"),
        ("I124", "/token_position.py"),
    ]
    assert len(result.written) == 8
    assert not marker.exists()


def _first_imported(tmp_path: Path) -> Path:
    """The first featurizer document imported from the bundled submission."""
    source = write_submission(tmp_path / "submission")
    return import_mib_cv_submission(
        source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS)
    ).written[0]


def _mibspec(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args], capture_output=True, text=True, check=False
    )


def _first_unit(source: Path) -> Path:
    return source / CELL / "ResidualStream(Layer:0,Token:last_token)"


def _save(path: Path, info: dict[str, Any]) -> None:
    torch.save({"model_info": info, "state_dict": {}}, path)


def _subspace_info(matrix: Any) -> dict[str, Any]:
    return {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": matrix.shape[1],
        "additional_config": {"rotation_matrix": matrix},
    }


def _break_class(unit: Path) -> str:
    _save(Path(f"{unit}_featurizer"), {"featurizer_class": "MyFeaturizerModule", "n_features": 4})
    return "_featurizer"


def _break_inverse_class(unit: Path) -> str:
    _save(
        Path(f"{unit}_inverse_featurizer"),
        {**_subspace_info(torch.eye(64, 4)), "inverse_featurizer_class": "X"},
    )
    return "_inverse_featurizer"


def _break_inverse_rotation(unit: Path) -> str:
    _save(Path(f"{unit}_inverse_featurizer"), _subspace_info(torch.eye(64, 4)))
    return "_inverse_featurizer"


def _drop_inverse(unit: Path) -> str:
    Path(f"{unit}_inverse_featurizer").unlink()
    return "_inverse_featurizer"


def _break_indices(unit: Path) -> str:
    Path(f"{unit}_indices").write_text("[0, -1]", encoding="utf-8")
    return "_indices"


def _not_a_pt(unit: Path) -> str:
    Path(f"{unit}_featurizer").write_bytes(b"not a zip file")
    return "_featurizer"


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (_break_class, "I119"),
        (_break_inverse_class, "I120"),
        (_break_inverse_rotation, "I120"),
        (_drop_inverse, "I120"),
        (_break_indices, "I101"),
        (_not_a_pt, "I101"),
    ],
    ids=["custom-class", "inverse-class", "inverse-rotation", "no-inverse", "bad-indices", "not-a-pt"],
)
def test_a_damaged_unit_is_located_and_nothing_is_written(tmp_path: Path, damage: Any, code: str) -> None:
    source = write_submission(tmp_path / "submission")
    suffix = damage(_first_unit(source))
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert [(f.code, f.pointer) for f in result.findings] == [
        (code, f"/{CELL}/ResidualStream(Layer:0,Token:last_token){suffix}")
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("mapping", "pointer"),
    [
        ([], ""),
        ({"last_token": {"rule": "somewhere"}}, "/last_token"),
        ({"last_token": {"rule": "named", "name": "last_token"}}, "/last_token"),
    ],
    ids=["not-an-object", "unknown-rule", "named-declares-nothing"],
)
def test_a_malformed_positions_file_is_coded(tmp_path: Path, mapping: Any, pointer: str) -> None:
    source = write_submission(tmp_path / "submission")
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, mapping))
    assert ("I123", pointer) in [(f.code, f.pointer) for f in result.findings]
    assert not result.written


def test_indices_only_units_are_identity_featurizers_of_the_model_width(tmp_path: Path) -> None:
    cell = tmp_path / "submission" / "4_answer_MCQA_Qwen2ForCausalLM_answer_pointer"
    cell.mkdir(parents=True)
    (cell / "ResidualStream(Layer-3,Token-correct_symbol)_indices").write_text("null", encoding="utf-8")
    (cell / "AttentionHead(Layer:2,Head:5,Token:last_token)_indices").write_text("[0, 1]", encoding="utf-8")
    result = import_mib_cv_submission(
        tmp_path / "submission", tmp_path / "out", positions=_positions(tmp_path, POSITIONS)
    )
    docs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in result.written}
    head = docs["AttentionHead-Layer-2-Head-5-Token-last_token"]
    # Qwen2.5-0.5B: d_model 896, 14 heads of 64 values
    assert (head["type"], head["input_dim"], head["n_features"], head["feature_indices"]) == (
        "identity",
        64,
        64,
        [0, 1],
    )
    assert head["location"] == {
        "layer": 2,
        "component": "attention_heads",
        "heads": [5],
        "position": {"rule": "last"},
    }
    residual = docs["ResidualStream-Layer-3-Token-correct_symbol"]
    assert (residual["input_dim"], "feature_indices" in residual) == (896, False)
    assert [f.code for f in result.findings] == ["I121", "I122"]


def test_import_export_import_gives_identical_documents(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    positions = _positions(tmp_path, POSITIONS)
    first = import_mib_cv_submission(source, tmp_path / "first", positions=positions)
    exported = export_mib_cv_submission(first.written, tmp_path / "exported")
    assert exported.findings == []
    assert (
        json.loads((tmp_path / "exported" / "token_positions.json").read_text(encoding="utf-8")) == POSITIONS
    )
    second = import_mib_cv_submission(tmp_path / "exported", tmp_path / "second", positions=positions)
    assert second.findings == []
    assert _tree(tmp_path / "first") == _tree(tmp_path / "second")


def test_exporting_the_bundled_report_gives_the_public_layout(tmp_path: Path) -> None:
    exported = export_mib_cv_submission([EXAMPLE / "report.json"], tmp_path / "exported")
    assert exported.findings == []
    names = sorted(p.name for p in (tmp_path / "exported" / CELL).iterdir())
    assert len(names) == 25  # three files per unit, and the variable's result file (method DAS)
    assert [n for n in names if n.endswith(".json")] == ["ones_carryarithmeticGPT2LMHeadModelDASresults.json"]
    assert "ResidualStream(Layer:2,Token:slot_operand_2)_inverse_featurizer" in names
    checkpoint = torch.load(
        tmp_path / "exported" / CELL / "ResidualStream(Layer:2,Token:slot_operand_2)_featurizer",
        weights_only=True,
    )
    [(_, doc, path)] = [
        u
        for u in _example_units()
        if u[1]["location"]["layer"] == 2 and u[1]["location"]["position"]["rule"] == "slot"
    ]
    matrix = checkpoint["model_info"]["additional_config"]["rotation_matrix"]
    assert np.array_equal(matrix.numpy(), _rotation(doc, path).T)
    assert checkpoint["model_info"]["featurizer_class"] == "SubspaceFeaturizerModule"
    indices = json.loads(
        (tmp_path / "exported" / CELL / "ResidualStream(Layer:2,Token:slot_operand_2)_indices").read_text()
    )
    assert indices == doc["feature_indices"]
    # the same files as the submission written independently above, read back
    import_mib_cv_submission(tmp_path / "exported", tmp_path / "a", positions=_positions(tmp_path, POSITIONS))
    import_mib_cv_submission(
        write_submission(tmp_path / "submission"), tmp_path / "b", positions=_positions(tmp_path, POSITIONS)
    )
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")


def test_a_featurizer_mib_cannot_hold_is_refused_on_export(tmp_path: Path) -> None:
    path = _first_imported(tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["error"] = "discard"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = export_mib_cv_submission([path], tmp_path / "exported")
    assert [f.code for f in result.findings] == ["I125"]
    assert not (tmp_path / "exported").exists()
    unnamed = tmp_path / "plain.json"
    shutil.copy(EXAMPLE / "das_ones_carry_l0_last.json", unnamed)
    assert [f.code for f in export_mib_cv_submission([unnamed], tmp_path / "e2").findings] == ["I125"]


@pytest.mark.slow
@pytest.mark.recompute
def test_an_imported_submission_recomputes_in_the_bundled_report(tmp_path: Path) -> None:
    folder = tmp_path / "report"
    shutil.copytree(EXAMPLE, folder)
    source = write_submission(tmp_path / "submission")
    imported = import_mib_cv_submission(
        source, folder / "imported", positions=_positions(tmp_path, POSITIONS)
    )
    assert imported.findings == []
    # Point every unit of the report at the imported featurizer of its location.
    by_location = {}
    for path in imported.written:
        doc = json.loads(path.read_text(encoding="utf-8"))
        by_location[json.dumps(doc["location"], sort_keys=True)] = path
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    artifacts = {a["id"]: a for a in report["artifacts"]}
    import hashlib

    for unit in report["claims"]["variables"][0]["units"]:
        path = by_location.pop(json.dumps(unit["location"], sort_keys=True))
        entry = artifacts[unit["featurizer"]]
        entry["path"] = path.relative_to(folder).as_posix()
        entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        entry["bytes"] = path.stat().st_size
    assert by_location == {}
    for _, _, original in _example_units():
        original_in_copy = folder / original.name
        original_in_copy.unlink()
        (original_in_copy.with_suffix(".safetensors")).unlink()
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert result.valid, [str(f) for f in result.findings]
    report_result = result.documents[0]
    assert report_result.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    assert report_result.comparisons
    assert all(c.within for c in report_result.comparisons)


@pytest.mark.slow
def test_cli_import_lists_undeclared_positions_and_export_says_positions_are_rules(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    done = _mibspec("import", "mib-submission", str(source), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("I121") == 8
    assert "I122" in done.stdout
    documents = sorted((tmp_path / "out" / CELL).glob("*.json"))
    exported = _mibspec("export", "mib-submission", *map(str, documents), "-o", str(tmp_path / "e"))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert "token_position.py" in exported.stdout
    # no rule declared: nothing to write but the listing says so
    assert json.loads((tmp_path / "e" / "token_positions.json").read_text(encoding="utf-8")) == {}


def test_the_export_never_overwrites_what_it_reads(tmp_path: Path) -> None:
    from mibspec.core.outputs import OutputPathError

    path = _first_imported(tmp_path)
    # a featurizer whose weights sit where the export writes its listing
    doc = json.loads(path.read_text(encoding="utf-8"))
    sidecar = path.parent / doc["artifacts"][0]["path"]
    clashing = path.parent / "mibspec_submission.json"
    shutil.copy(sidecar, clashing)
    doc["artifacts"][0]["path"] = clashing.name
    path.write_text(json.dumps(doc), encoding="utf-8")
    before = clashing.read_bytes()
    with pytest.raises(OutputPathError):
        export_mib_cv_submission([path], path.parent)
    assert clashing.read_bytes() == before


def test_the_export_reads_weights_only_from_the_featurizers_folder(tmp_path: Path) -> None:
    path = _first_imported(tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    outside = tmp_path / "elsewhere" / "weights.safetensors"
    outside.parent.mkdir()
    shutil.copy(path.parent / doc["artifacts"][0]["path"], outside)
    doc["artifacts"][0]["path"] = "../../elsewhere/weights.safetensors"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = export_mib_cv_submission([path], tmp_path / "exported")
    assert [f.code for f in result.findings] == ["I127"]
    assert not (tmp_path / "exported").exists()


def test_only_model_info_is_read_from_the_pt_files(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    unit = _first_unit(source)
    for suffix in ("_featurizer", "_inverse_featurizer"):
        checkpoint = torch.load(Path(f"{unit}{suffix}"), weights_only=True)
        # the later library layout: one dict with both state dicts and no 'state_dict'
        torch.save(
            {"model_info": checkpoint["model_info"], "featurizer_state_dict": {}}, Path(f"{unit}{suffix}")
        )
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert result.findings == []
    assert len(result.written) == 8


def test_an_exported_folder_is_read_back_with_its_own_positions(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    first = import_mib_cv_submission(source, tmp_path / "first", positions=_positions(tmp_path, POSITIONS))
    assert first.findings == []
    export_mib_cv_submission(first.written, tmp_path / "exported")
    second = import_mib_cv_submission(tmp_path / "exported", tmp_path / "second")  # no --positions
    assert second.findings == []
    assert _tree(tmp_path / "first") == _tree(tmp_path / "second")


def test_positions_that_contradict_the_submissions_own_are_refused(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    (source / "token_positions.json").write_text(json.dumps(POSITIONS), encoding="utf-8")
    other = {**POSITIONS, "last_token": {"rule": "index", "index": 0}}
    result = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, other))
    assert [(f.code, f.pointer) for f in result.findings] == [("I123", "/last_token")]
    assert result.written == []
    assert not (tmp_path / "out").exists()
    agreeing = import_mib_cv_submission(source, tmp_path / "out", positions=_positions(tmp_path, POSITIONS))
    assert agreeing.findings == []


def test_another_submissions_unit_never_replaces_an_imported_one(tmp_path: Path) -> None:
    positions = _positions(tmp_path, POSITIONS)
    first = import_mib_cv_submission(write_submission(tmp_path / "a"), tmp_path / "out", positions=positions)
    assert first.findings == []
    before = _tree(tmp_path / "out")
    other = write_submission(tmp_path / "b")
    unit = _first_unit(other)  # another method's weights for the same unit
    for suffix in ("_featurizer", "_inverse_featurizer"):
        saved = torch.load(Path(f"{unit}{suffix}"), weights_only=True)
        saved["model_info"]["additional_config"]["rotation_matrix"] *= -1.0
        torch.save(saved, Path(f"{unit}{suffix}"))
    result = import_mib_cv_submission(other, tmp_path / "out", positions=positions)
    assert [f.code for f in result.findings] == ["I126"]
    assert _tree(tmp_path / "out") == before
    exported = export_mib_cv_submission(first.written, tmp_path / "e")
    assert exported.findings == []
    (tmp_path / "e" / "token_positions.json").write_text("{}", encoding="utf-8")  # not this export's
    again = export_mib_cv_submission(first.written, tmp_path / "e")
    assert [f.code for f in again.findings] == ["I126"]


IOI_CELL = "ioi_task_GPT2LMHeadModel_output_token"


def _save_unit(
    cell: Path, unit_id: str, forward: str, inverse: str, config: dict[str, Any], **kw: Any
) -> None:
    """One unit as MIB's ``Featurizer.save_modules`` writes it (model_info, the modules' state
    dicts) and its indices."""
    info = {
        "featurizer_class": forward,
        "inverse_featurizer_class": inverse,
        "n_features": kw.get("n_features"),
        "additional_config": config,
    }
    state = kw.get("state", {})
    torch.save({"model_info": info, "state_dict": state}, cell / f"{unit_id}_featurizer")
    torch.save({"model_info": info, "state_dict": state}, cell / f"{unit_id}_inverse_featurizer")
    (cell / f"{unit_id}_indices").write_text(json.dumps(kw.get("indices")), encoding="utf-8")


def test_das_svd_pca_and_dbm_units_import_as_the_public_modules_compute(tmp_path: Path) -> None:
    """DAS (a parametrized orthogonal rotation), DBM+PCA (components of standardised
    activations, applied uncentred, a mask's indices) and DBM (identity with a mask's indices)
    on IOI's attention-head units at every token: the imported documents interchange as MIB's
    modules do, f = x·W, e = x − f·Wᵀ, x' = f'·Wᵀ + e (W the saved d × n matrix)."""
    from mibspec.metrics.featurizers import NumpyFeaturizer

    rng = np.random.default_rng(7)
    cell = tmp_path / "submission" / IOI_CELL
    cell.mkdir(parents=True)
    das, _ = np.linalg.qr(rng.normal(size=(64, 16)))  # d_head × n_features, orthonormal columns
    acts = rng.normal(size=(200, 64)) * rng.uniform(0.5, 3, size=64) + rng.normal(size=64)
    z = (acts - acts.mean(0)) / acts.std(0)
    pca = np.linalg.svd(z, full_matrices=False)[2][:10].T  # d × n: TruncatedSVD's components_, transposed
    subspace = ("SubspaceFeaturizerModule", "SubspaceInverseFeaturizerModule")
    _save_unit(
        cell,
        "AttentionHead(Layer:3,Head:0,Token:all)",
        *subspace,
        {"rotation_matrix": torch.tensor(das, dtype=torch.float32), "requires_grad": True},
        n_features=16,
        state={"rotate.parametrizations.weight.original": torch.zeros(64, 16)},
    )
    _save_unit(
        cell,
        "AttentionHead(Layer:4,Head:2,Token:all)",
        *subspace,
        {"rotation_matrix": torch.tensor(pca, dtype=torch.float32), "requires_grad": False},
        n_features=10,
        indices=[0, 3, 4],
    )
    _save_unit(
        cell,
        "AttentionHead(Layer:5,Head:1,Token:all)",
        "IdentityFeaturizerModule",
        "IdentityInverseFeaturizerModule",
        {},
        indices=[2, 7, 63],
    )
    result = import_mib_cv_submission(
        tmp_path / "submission", tmp_path / "out", positions=_positions(tmp_path, {"all": {"rule": "all"}})
    )
    assert result.findings == []
    assert mibspec.verify(*result.written, recompute=False).valid
    docs = {json.loads(p.read_text(encoding="utf-8"))["location"]["layer"]: p for p in result.written}
    base, source = rng.normal(size=(5, 64)), rng.normal(size=(5, 64))
    for layer, matrix, indices in ((3, das, list(range(16))), (4, pca, [0, 3, 4]), (5, None, [2, 7, 63])):
        doc = json.loads(docs[layer].read_text(encoding="utf-8"))
        assert doc["location"]["position"] == {"rule": "all"}
        assert doc["location"]["component"] == "attention_heads"
        assert doc["input_dim"] == 64
        weights = {}
        if matrix is not None:
            from safetensors.numpy import load_file

            weights = load_file(docs[layer].parent / doc["artifacts"][0]["path"])
        ours = NumpyFeaturizer(doc, weights).interchange(base, source)
        w = np.eye(64) if matrix is None else matrix.astype(np.float32).astype(np.float64)
        fb, fs = base @ w, source @ w
        fb[:, indices] = fs[:, indices]
        public = fb @ w.T + (base - (base @ w) @ w.T)
        np.testing.assert_allclose(ours, public, atol=1e-9)
        assert np.abs(ours - base).max() > 1e-2  # the interchange moved the base


def test_an_sae_unit_is_refused_saying_its_weights_are_not_in_the_files(tmp_path: Path) -> None:
    cell = tmp_path / "submission" / IOI_CELL
    cell.mkdir(parents=True)
    sae = ("SAEFeaturizerModule", "SAEInverseFeaturizerModule")
    _save_unit(cell, "ResidualStream(Layer:3,Token:last_token)", *sae, {}, n_features=24576, indices=[5])
    # MIB's own save writes only the indices of an SAE unit; they name latents past d_model
    (cell / "ResidualStream(Layer:4,Token:last_token)_indices").write_text("[12, 20000]", encoding="utf-8")
    result = import_mib_cv_submission(
        tmp_path / "submission", tmp_path / "out", positions=_positions(tmp_path, POSITIONS)
    )
    found = {(f.code, f.pointer): f.message for f in result.findings}
    assert set(found) == {
        ("I119", f"/{IOI_CELL}/ResidualStream(Layer:3,Token:last_token)_featurizer"),
        ("I119", f"/{IOI_CELL}/ResidualStream(Layer:4,Token:last_token)_indices"),
    }
    assert all("saves no featurizer file for an SAE" in message for message in found.values())
    assert not result.written
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- IOI Token:all units


def _submission(tmp_path: Path, *unit_ids: str) -> Path:
    cell = tmp_path / "submission" / IOI_CELL
    cell.mkdir(parents=True)
    for unit_id in unit_ids:
        (cell / f"{unit_id}_indices").write_text("[0, 5, 63]", encoding="utf-8")
    return tmp_path / "submission"


def _positions_file(tmp_path: Path, rules: Any) -> Path:
    path = tmp_path / "positions.json"
    path.write_text(json.dumps(rules, indent=2), encoding="utf-8")
    return path


def _locations(written: list[Path]) -> dict[str, dict[str, Any]]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in written if p.suffix == ".json"]
    return {d["extensions"]["org.mibspec:mib_unit"]["unit"]: d["location"] for d in docs}


def test_token_all_needs_no_declared_position(tmp_path: Path) -> None:
    """``all`` is read as IOI's position without a mapping; a name MIB's task code does not
    define still needs one (I121, summarised by I122)."""
    source = _submission(
        tmp_path,
        "AttentionHead(Layer:9,Head:6,Token:all)",
        "AttentionHead(Layer-10,Head-7,Token-all)",
        "AttentionHead(Layer:9,Head:9,Token:s2_name)",
    )
    result = import_mib_cv_submission(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [
        ("I121", f"/{IOI_CELL}/AttentionHead(Layer:9,Head:9,Token:s2_name)"),
        ("I122", ""),
    ]
    locations = _locations(result.written)
    assert locations["AttentionHead(Layer:9,Head:6,Token:all)"] == {
        "layer": 9,
        "component": "attention_heads",
        "position": {"rule": "all"},
        "heads": [6],
    }
    assert locations["AttentionHead(Layer-10,Head-7,Token-all)"]["position"] == {"rule": "all"}
    assert locations["AttentionHead(Layer:9,Head:9,Token:s2_name)"]["position"] == {
        "rule": "named",
        "name": "s2_name",
    }
    assert "1 of 3 unit(s) lack a declared token position" in result.findings[1].message


def test_a_declared_mapping_of_all_wins(tmp_path: Path) -> None:
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions_file(tmp_path, {"all": {"rule": "last"}})
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    assert result.findings == []
    assert _locations(result.written)["AttentionHead(Layer:9,Head:6,Token:all)"]["position"] == {
        "rule": "last"
    }


def test_all_mixed_with_an_index_is_refused_where_the_positions_file_says_it(tmp_path: Path) -> None:
    """Every token and token 3 at once: which one a unit reads would be a guess. The mapping is
    refused at its place in the positions file and nothing is written."""
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions_file(
        tmp_path, {"last_token": {"rule": "last"}, "all": {"rule": "all", "index": 3}}
    )
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    [finding] = result.findings
    assert (finding.code, finding.pointer) == ("I123", "/all/index")
    assert finding.line is not None
    assert '"index": 3' in positions.read_text(encoding="utf-8").splitlines()[finding.line - 1]
    assert "'index' does not apply to rule 'all'" in finding.message
    assert not result.written
    assert not (tmp_path / "out").exists()


def test_a_list_of_positions_for_all_is_refused(tmp_path: Path) -> None:
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions_file(tmp_path, {"all": [{"rule": "all"}, {"rule": "index", "index": 3}]})
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    [finding] = result.findings
    assert (finding.code, finding.pointer, finding.line) == ("I123", "/all", 2)
    assert "is not a token-position rule" in finding.message
    assert not result.written


def test_indices_beyond_a_heads_width_at_every_token_are_refused(tmp_path: Path) -> None:
    """An indices-only unit is the identity of its site: index 64 does not exist in a GPT-2
    head of 64 values, so the unit's real featurizer is missing (I119)."""
    source = _submission(tmp_path)
    unit = "AttentionHead(Layer:9,Head:6,Token:all)"
    (source / IOI_CELL / f"{unit}_indices").write_text("[3, 64]", encoding="utf-8")
    result = import_mib_cv_submission(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I119", f"/{IOI_CELL}/{unit}_indices")]
    assert "beyond the 64 values of the site" in result.findings[0].message
    assert not result.written
