"""Every importer that writes a report takes --model-revision, --dataset and --split (SPEC.md
I-4), and the EAP-IG graph importer only the first (a circuit document has no task): an imported MIB
results file can pass A111, carries its dataset, and the leaderboard tabulates the unpinned
ones in rows marked as such."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mibspec
from mibspec.importers import ImportOptions, import_mib_causal_results, import_mib_circuit_results
from mibspec.pages.leaderboard import build_leaderboard, render_markdown

REPO = Path(__file__).resolve().parents[2]
REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"


def _circuit_results(folder: Path, method: str = "EAP-IG") -> Path:
    counts = [32, 64, 162, 324, 649, 1624, 3249, 6498, 16245, 32491]
    values = [0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9, 0.97, 0.99]
    block = {"edge_counts": counts, "faithfulness": values}
    payload = {
        "method_name": method,
        "results": [{"model_id": "gpt2", "scores": {"ioi": {"CPR": block, "CMD": block}}}],
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps(payload))
    return path


def _errors(path: Path) -> list[str]:
    return [f.code for f in mibspec.verify(path, recompute=False).findings if f.severity.value == "error"]


def test_a_model_revision_makes_imported_results_pass(tmp_path: Path) -> None:
    source = _circuit_results(tmp_path)
    pinned = import_mib_circuit_results(source, tmp_path / "pinned", ImportOptions(model_revision=REVISION))
    [path] = pinned.written
    assert _errors(path) == []
    assert json.loads(path.read_text())["model"]["revision"] == REVISION
    [bare] = import_mib_circuit_results(source, tmp_path / "bare").written
    assert _errors(bare) == ["A111"]


def test_a_dataset_document_is_copied_beside_the_report(tmp_path: Path) -> None:
    source = _circuit_results(tmp_path)
    options = ImportOptions(
        model_revision=REVISION, dataset=str(REPO / "examples" / "circuit-ioi" / "dataset.json"), split="test"
    )
    [path] = import_mib_circuit_results(source, tmp_path / "out", options).written
    report = json.loads(path.read_text())
    assert report["task"]["dataset"] == "dataset"
    assert report["task"]["split"] == "test"
    assert (path.parent / "dataset.json").read_bytes() == (
        REPO / "examples" / "circuit-ioi" / "dataset.json"
    ).read_bytes()
    assert (path.parent / "dataset.jsonl").is_file()
    assert _errors(path) == []


def test_causal_results_take_the_options_too(tmp_path: Path) -> None:
    report = json.loads((REPO / "examples" / "causal-variable-ioi" / "report.json").read_text())
    unit = report["claims"]["variables"][0]["units"][0]
    key = f"[[AtomicModelUnit(id='ResidualStream(Layer-{unit['location']['layer']},Token-last_token)')]]"
    dataset = {
        cf: {
            "model_unit": {
                key: {
                    "metadata": {"layer": unit["location"]["layer"], "position": "last_token"},
                    "output_token": {"average_score": 0.5, "scores": [0.5]},
                }
            }
        }
        for cf in unit["scores"]
    }
    source = tmp_path / "results.json"
    source.write_text(
        json.dumps({"method_name": "DAS", "model_name": "gpt2", "task_name": "ioi", "dataset": dataset})
    )
    pinned = import_mib_causal_results(
        source, tmp_path / "out", ImportOptions(model_revision=REVISION, dataset=f"mib-bench/ioi@{'b' * 40}")
    )
    assert pinned.ok, [str(f) for f in pinned.findings]
    [path] = pinned.written
    data = json.loads(path.read_text())
    assert data["model"]["revision"] == REVISION
    assert data["task"]["hub_dataset"] == {"id": "mib-bench/ioi", "revision": "b" * 40}
    assert "A111" not in _errors(path)


def test_leaderboard_tabulates_unpinned_imports_marked(tmp_path: Path) -> None:
    import_mib_circuit_results(_circuit_results(tmp_path / "src-a", "A"), tmp_path / "board" / "a")
    options = ImportOptions(model_revision=REVISION)
    import_mib_circuit_results(_circuit_results(tmp_path / "src-b", "B"), tmp_path / "board" / "b", options)
    board = build_leaderboard(tmp_path / "board")
    assert board.rejected == []
    assert sorted((e.method, e.unpinned) for e in board.entries) == [("A (unpinned)", True), ("B", False)]
    assert "| A (unpinned) |" in render_markdown(board)


@pytest.mark.slow
def test_cli_options(tmp_path: Path) -> None:
    source = _circuit_results(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mibspec", "import", *args], capture_output=True, text=True
        )

    ok = run("mib-circuit-results", str(source), "-o", str(tmp_path / "a"), "--model-revision", REVISION)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = run("mib-circuit-results", str(source), "-o", str(tmp_path / "b"), "--model-revision", "main")
    assert bad.returncode == 1
    assert "I111" in bad.stdout
    graph = REPO / "examples" / "circuit-ioi" / "circuit.json"
    usage = run("eap-ig", str(graph), "-o", str(tmp_path / "c"), "--split", "test")
    assert usage.returncode == 2
    assert "No such option '--split'" in usage.stderr
    assert not (tmp_path / "c").exists()
