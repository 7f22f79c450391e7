"""``mibspec import mib-submission`` and ``export mib-submission`` on both tracks' folders:
the layout is detected, each track's options are refused on the other track's folders, and a
folder of neither or of both layouts is a coded finding (I107)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_mib_cv_submission import CELL, POSITIONS, write_submission
from test_mib_submission import REVISION, _importance_folder

from mibspec.cli import app
from mibspec.importers import import_mib_cv_submission, submission_layout

pytest.importorskip("torch")


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _positions(tmp_path: Path) -> Path:
    path = tmp_path / "positions.json"
    path.write_text(json.dumps(POSITIONS), encoding="utf-8")
    return path


def _outputs(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _import_circuit(folder: Path, out: Path) -> None:
    code, stdout, stderr = _run(
        "import", "mib-submission", folder, "-o", out, "--model-revision", REVISION,
        "--architecture", "GPT2LMHeadModel", "--method", "m",
    )  # fmt: skip
    assert code == 0, stdout + stderr


def test_layouts_are_told_apart_by_the_importers_criteria(tmp_path: Path) -> None:
    circuit = _importance_folder(tmp_path / "c" / "method")
    cv = write_submission(tmp_path / "cv")
    assert submission_layout(circuit.parent).track == "circuit"  # a folder of <task>_<model> folders
    assert submission_layout(circuit).track == "circuit"  # one <task>_<model> folder
    assert submission_layout(cv).track == "causal_variable"
    (tmp_path / "empty").mkdir()
    assert submission_layout(tmp_path / "empty").track is None


def test_causal_variable_folder_imports_through_the_single_command(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    positions = _positions(tmp_path)
    code, out, err = _run(
        "import", "mib-submission", source, "-o", tmp_path / "out", "--positions", positions
    )
    assert code == 0, out + err
    assert (tmp_path / "out" / CELL).is_dir()
    # the command writes what the causal-variable importer writes
    direct = import_mib_cv_submission(source, tmp_path / "direct", positions=positions)
    assert direct.ok, direct.findings
    assert direct.written
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "direct")


def test_circuit_folder_still_imports_through_the_single_command(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    _import_circuit(folder, tmp_path / "out")
    assert (tmp_path / "out" / "ioi_tiny" / "report.json").is_file()


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--model-revision", REVISION),
        ("--dataset", f"mib-bench/arithmetic@{'a' * 40}"),
        ("--split", "test"),
        ("--counterfactual-type", "x"),
        ("--architecture", "GPT2LMHeadModel"),
        ("--method", "m"),
    ],
)
def test_circuit_options_on_a_causal_variable_folder_are_usage_errors(
    tmp_path: Path, option: str, value: str
) -> None:
    source = write_submission(tmp_path / "submission")
    code, out, err = _run("import", "mib-submission", source, "-o", tmp_path / "out", option, value)
    assert code == 2, out + err
    assert option in err
    assert "causal-variable" in err
    assert not (tmp_path / "out").exists()


def test_positions_on_a_circuit_folder_is_a_usage_error(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    code, out, err = _run(
        "import", "mib-submission", folder, "-o", tmp_path / "out", "--positions", _positions(tmp_path)
    )
    assert code == 2, out + err
    assert "--positions" in err
    assert "circuit-track" in err
    assert not (tmp_path / "out").exists()


def test_folder_of_neither_layout_is_i107_naming_both(tmp_path: Path) -> None:
    source = tmp_path / "submission"
    (source / "notes").mkdir(parents=True)
    (source / "notes" / "readme.txt").write_text("hello", encoding="utf-8")
    code, out, err = _run("import", "mib-submission", source, "-o", tmp_path / "out", "-f", "json")
    assert code == 1, out + err
    findings = [f for doc in json.loads(out)["documents"] for f in doc["findings"]]
    assert [f["code"] for f in findings] == ["I107"]
    assert "<task>_<model>" in findings[0]["message"]
    assert "<TASK>_<MODEL>_<VARIABLE>" in findings[0]["message"]
    assert not (tmp_path / "out").exists()


def test_folder_of_both_layouts_is_i107_naming_both(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    _importance_folder(source)
    code, out, err = _run(
        "import", "mib-submission", source, "-o", tmp_path / "out", "--positions", _positions(tmp_path)
    )
    assert code == 1, out + err
    assert "I107" in out
    assert "ioi_tiny/" in out
    assert f"{CELL}/" in out
    assert not (tmp_path / "out").exists()


def test_export_writes_the_track_of_the_reports_and_imports_back(tmp_path: Path) -> None:
    source = write_submission(tmp_path / "submission")
    positions = _positions(tmp_path)
    assert (
        _run("import", "mib-submission", source, "-o", tmp_path / "first", "--positions", positions)[0] == 0
    )
    documents = sorted((tmp_path / "first" / CELL).glob("*.json"))
    code, out, err = _run("export", "mib-submission", *documents, "-o", tmp_path / "exported")
    assert code == 0, out + err
    # the exported folder's own listing files are not circuit-track graphs
    assert (tmp_path / "exported" / "token_positions.json").is_file()
    assert submission_layout(tmp_path / "exported").track == "causal_variable"
    code, out, err = _run(
        "import", "mib-submission", tmp_path / "exported", "-o", tmp_path / "second", "--positions", positions
    )
    assert code == 0, out + err
    assert _outputs(tmp_path / "first") == _outputs(tmp_path / "second")


def test_export_of_reports_of_both_tracks_is_a_usage_error(tmp_path: Path) -> None:
    circuit = _importance_folder(tmp_path / "method")
    _import_circuit(circuit, tmp_path / "c")
    source = write_submission(tmp_path / "submission")
    assert _run("import", "mib-submission", source, "-o", tmp_path / "cv")[0] == 0
    featurizer = sorted((tmp_path / "cv" / CELL).glob("*.json"))[0]
    code, out, err = _run(
        "export",
        "mib-submission",
        tmp_path / "c" / "ioi_tiny" / "report.json",
        featurizer,
        "-o",
        tmp_path / "e",
    )
    assert code == 2, out + err
    assert "one track" in err
    assert not (tmp_path / "e").exists()


def test_layout_detection_lists_a_bounded_number_of_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mibspec.importers._layout as layout_module

    folder = _importance_folder(tmp_path / "method")
    assert submission_layout(folder.parent).track == "circuit"
    listed: list[Path] = []
    original = Path.iterdir

    def counting(self: Path):  # type: ignore[no-untyped-def]
        for entry in original(self):
            listed.append(entry)
            yield entry

    monkeypatch.setattr(Path, "iterdir", counting)
    monkeypatch.setattr(layout_module, "MAX_ENTRIES", 2)  # the folder holds 3 files
    layout = submission_layout(folder.parent)
    assert layout.track is None
    assert "more than 2 entries" in layout.problem(folder.parent)
    assert len(listed) <= 2 + 2  # the budget, plus one entry past it per listing cut
