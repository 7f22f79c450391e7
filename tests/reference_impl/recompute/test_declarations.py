"""What keeps a report from being recomputed is said where it is declared, with the next step:
a hub dataset pin is not rows (R104 when recomputation is asked for, an R112 warning under
--no-recompute, SPEC.md R-3, R-7), and a report's split is its dataset document's (D106, D-6)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.core.profiles import load_profile
from mibspec.importers import ImportOptions
from mibspec.importers._options import OptionError
from mibspec.reference_impl.recompute.declarations import recompute_gaps

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
HUB = {"id": "mib-bench/ioi", "revision": "0123456789abcdef0123456789abcdef01234567"}
PINNED = f"{HUB['id']}@{HUB['revision']}"


def _example(tmp_path: Path, name: str, edit: Any) -> Path:
    """A copy of a shipped example with its report edited by ``edit(report)``."""
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder, symlinks=True)
    if (EXAMPLES / "models").is_dir() and not (tmp_path / "models").exists():
        (tmp_path / "models").symlink_to(EXAMPLES / "models")
    path = folder / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    edit(report)
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _without_dataset(hub: dict[str, str] | None) -> Any:
    def edit(report: dict[str, Any]) -> None:
        del report["task"]["dataset"]
        report["artifacts"] = [a for a in report["artifacts"] if a["id"] != "dataset"]
        if hub is not None:
            report["task"]["hub_dataset"] = dict(hub)

    return edit


def _findings(result: Any, code: str) -> list[Any]:
    return [f for f in result.findings if f.code == code]


def test_no_recompute_warns_that_a_hub_pin_holds_no_rows_and_names_the_next_step(tmp_path: Path) -> None:
    path = _example(tmp_path, "circuit-ioi", _without_dataset(HUB))
    result = mibspec.verify(path, recompute=False)
    assert result.valid  # a warning does not change the verdict (V-2)
    [warning] = _findings(result, "R112")
    assert warning.severity.value == "warning"
    assert warning.pointer == "/task/dataset"
    assert PINNED in warning.message
    assert "task.hub_dataset" in warning.message
    assert f"mibspec import mib-dataset {PINNED}" in warning.message
    assert "mibspec verify-submission" in warning.message


def test_without_any_dataset_the_warning_says_none_is_declared(tmp_path: Path) -> None:
    path = _example(tmp_path, "circuit-ioi", _without_dataset(None))
    [warning] = _findings(mibspec.verify(path, recompute=False), "R112")
    assert warning.pointer == "/task/dataset"
    assert "declares no dataset" in warning.message
    assert "mibspec import mib-dataset ID@REV" in warning.message


def test_a_recomputable_report_gets_no_warning(tmp_path: Path) -> None:
    result = mibspec.verify(EXAMPLES / "circuit-ioi" / "report.json", recompute=False)
    assert _findings(result, "R112") == []


def test_every_gap_is_reported_at_its_own_pointer(tmp_path: Path) -> None:
    def edit(report: dict[str, Any]) -> None:
        _without_dataset(HUB)(report)
        report["settings"]["padding_side"] = "left"

    result = mibspec.verify(_example(tmp_path, "circuit-ioi", edit), recompute=False)
    assert sorted(f.pointer for f in _findings(result, "R112")) == ["/settings/padding_side", "/task/dataset"]


def test_the_warning_fails_the_command_only_with_error_on_warning(tmp_path: Path) -> None:
    path = _example(tmp_path, "circuit-ioi", _without_dataset(HUB))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-m", "mibspec", "verify", "--no-recompute", *extra, str(path)]
        return subprocess.run(args, capture_output=True, text=True, check=False)

    plain = run()
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "R112" in plain.stdout
    strict = run("--error-on-warning")
    assert strict.returncode == 1
    ignored = run("--ignore", "R112")
    assert ignored.returncode == 0
    assert "R112" not in ignored.stdout


def test_recomputation_asked_for_fails_with_the_same_message(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    path = _example(tmp_path, "circuit-ioi", _without_dataset(HUB))
    result = mibspec.verify(path, recompute=True)
    assert not result.valid
    assert _findings(result, "R112") == []  # asked for: R104 says it, as an error
    [error] = _findings(result, "R104")
    assert error.pointer == "/task/dataset"
    assert f"mibspec import mib-dataset {PINNED}" in error.message
    assert "mibspec verify-submission" in error.message


def test_a_causal_variable_gap_is_said_once(tmp_path: Path) -> None:
    path = _example(tmp_path, "causal-variable-ioi", _without_dataset(HUB))
    result = mibspec.verify(path, recompute=False)
    [v110] = [f for f in _findings(result, "V110") if f.pointer == "/task/dataset"]
    assert PINNED in v110.message
    assert "mib-dataset" in v110.message
    assert [f for f in _findings(result, "R112") if f.pointer == "/task/dataset"] == []


def test_a_transformer_behaviour_needs_a_dataset_document() -> None:
    report = json.loads((EXAMPLES / "causal-bench-tiny-gpt2" / "report.json").read_text(encoding="utf-8"))
    assert recompute_gaps(report, load_profile("default")) == []
    _without_dataset(HUB)(report)
    [(pointer, detail)] = recompute_gaps(report, load_profile("default"))
    assert pointer == "/task/dataset"
    assert PINNED in detail
    planted = json.loads((EXAMPLES / "causal-bench-planted" / "report.json").read_text(encoding="utf-8"))
    assert recompute_gaps(planted, load_profile("default")) == []  # built from the report alone


# --------------------------------------------------------------------------- the split (D-6)


def test_a_report_whose_split_is_not_its_datasets_fails(tmp_path: Path) -> None:
    def edit(report: dict[str, Any]) -> None:
        report["task"]["split"] = "validation"

    dataset = json.loads((EXAMPLES / "circuit-ioi" / "dataset.json").read_text(encoding="utf-8"))
    assert dataset["split"] == "test"
    result = mibspec.verify(_example(tmp_path, "circuit-ioi", edit), recompute=False)
    assert not result.valid
    [finding] = _findings(result, "D106")
    assert finding.pointer == "/task/split"
    assert "'validation'" in finding.message
    assert "'test'" in finding.message


def test_an_import_refuses_a_split_its_dataset_document_does_not_hold() -> None:
    dataset = str(EXAMPLES / "circuit-ioi" / "dataset.json")
    with pytest.raises(OptionError) as refused:
        ImportOptions(dataset=dataset, split="validation").check()
    assert "--split validation" in refused.value.detail
    assert "'test' split" in refused.value.detail
    assert ImportOptions(dataset=dataset, split="test").check() is not None
    assert ImportOptions(dataset=dataset).check() is not None


def test_the_import_command_writes_nothing_on_a_split_mismatch(tmp_path: Path) -> None:
    results = {
        "method_name": "EAP-IG",
        "results": [
            {
                "model_id": "gpt2",
                "scores": {
                    "ioi": {
                        metric: {"edge_counts": [32, 32491], "faithfulness": [0.1, 0.99]}
                        for metric in ("CPR", "CMD")
                    }
                },
            }
        ],
    }
    source = tmp_path / "results.json"
    source.write_text(json.dumps(results), encoding="utf-8")
    out = tmp_path / "out"
    dataset = str(EXAMPLES / "circuit-ioi" / "dataset.json")
    args = ["mib-circuit-results", str(source), "-o", str(out), "--dataset", dataset, "--split", "validation"]
    run = subprocess.run(
        [sys.executable, "-m", "mibspec", "import", *args], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "I111" in run.stdout
    assert "'test' split" in run.stdout
    assert not out.exists()
