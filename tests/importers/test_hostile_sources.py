"""Hostile inputs to the importers and exporters.

Names that climb out of the output folder, links out of a submission, small files that claim
gigabytes, integers ``int`` refuses, inputs written under one name, scores beyond float32,
and torch's advice to load a refused file unsafely. In every case: a coded finding or a
usage error, nothing written outside the output folder, nothing read outside the folder
given, bounded memory (the files that claim gigabytes run in a process whose address space
is limited, so an allocation of their size fails there), never an internal error.
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _mib_files import REPO, graph, node_names, write

import mibspec
from mibspec.exporters import export_mib_cv_submission, export_mib_submission
from mibspec.importers import (
    SubmissionOptions,
    import_eap_ig,
    import_mib_causal_results,
    import_mib_circuit_results,
    import_mib_cv_submission,
    import_mib_dataset,
    import_mib_submission,
)

GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
CELL = "arithmetic_GPT2LMHeadModel_ones_carry"
#: Address space of the processes that get files claiming gigabytes: the interpreter with
#: torch takes about 0.9 GiB of it, so an allocation of a few GiB fails there.
LIMIT_BYTES = 3 * 1024**3


def _tree(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def _written_outside(root: Path, before: set[Path], out: Path) -> list[Path]:
    """What appeared below ``root`` since ``before`` and is neither ``out`` (nor a folder
    above it) nor below it."""
    return [p for p in _tree(root) - before if p != out and p not in out.parents and out not in p.parents]


def _codes(result: Any) -> list[str]:
    return [f.code for f in result.findings]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _mibspec_limited(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m mibspec ARGS`` in a process of at most :data:`LIMIT_BYTES` of address space."""
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        preexec_fn=_limited,
    )


def _json_codes(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [f["code"] for doc in json.loads(done.stdout)["documents"] for f in doc["findings"]]


def _results(seed: int, **changes: Any) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    faithfulness = [*np.round(rng.random(9), 6).tolist(), 1.0]
    return {
        "weighted_edge_counts": [float(int(k * 479)) for k in GRID],
        "area_under": 0.5,
        "area_from_1": 0.5,
        "average": sum(faithfulness) / len(faithfulness),
        "faithfulnesses": faithfulness,
        **changes,
    }


def _importance_folder(folder: Path, **changes: Any) -> Path:
    """A MIB circuit-track folder: an importance file and both results files."""
    write(folder / "importances.json", graph(4, 4, 16, seed=3, chosen=0.0))
    name = folder.name
    for flag, seed in (("False", 1), ("True", 2)):
        (folder / f"{name}_validation_abs-{flag}.pkl").write_bytes(pickle.dumps(_results(seed, **changes)))
    return folder


OPTIONS = SubmissionOptions(architecture="GPT2LMHeadModel", method="m")


# --- 1. the export names its folders as the import does ----------------------------------------


def _circuit_report(folder: Path, task: str) -> Path:
    shutil.copytree(REPO / "examples" / "circuit-ioi", folder)
    path = folder / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    report["task"]["name"] = task
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


@pytest.mark.parametrize("task", ["../../escaped", "ABSOLUTE", "a/../../../b", ".."])
def test_the_export_keeps_a_hostile_task_name_inside_the_output_folder(tmp_path: Path, task: str) -> None:
    if task == "ABSOLUTE":
        task = str(tmp_path / "absolute")
    report = _circuit_report(tmp_path / "in", task)
    out = tmp_path / "a" / "b" / "out"
    before = _tree(tmp_path)
    written = export_mib_submission([report], out)
    assert written
    assert all(out.resolve() in path.resolve().parents for path in written)
    assert _written_outside(tmp_path, before, out) == []
    # and the import reads the folder back under the same name
    result = import_mib_submission(out, tmp_path / "back", OPTIONS)
    assert result.ok, [str(f) for f in result.findings]
    assert {p.parent.name for p in result.written} == {p.parent.name for p in written}


def test_two_reports_for_one_folder_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    from mibspec.exporters import ExportError

    first = _circuit_report(tmp_path / "one", "a/b")
    second = _circuit_report(tmp_path / "two", "a b")  # the same folder once made safe
    with pytest.raises(ExportError, match="would both be written"):
        export_mib_submission([first, second], tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- 2. nothing is read through a link out of the submission -------------------------------------


@pytest.mark.parametrize("linked", ["task folder", "importance file", "results file"])
def test_a_link_out_of_a_circuit_submission_is_refused(tmp_path: Path, linked: str) -> None:
    outside = _importance_folder(tmp_path / "outside" / "ioi_tiny")
    folder = tmp_path / "method" / "ioi_tiny"
    if linked == "task folder":
        folder.parent.mkdir()
        folder.symlink_to(outside, target_is_directory=True)
    else:
        _importance_folder(folder)
        name = "importances.json" if linked == "importance file" else "ioi_tiny_validation_abs-False.pkl"
        (folder / name).unlink()
        (folder / name).symlink_to(outside / name)
    result = import_mib_submission(tmp_path / "method", tmp_path / "out", OPTIONS)
    assert _codes(result) == ["I127"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_command_refuses_a_linked_task_folder(tmp_path: Path, mibspec_cli: Any) -> None:
    outside = _importance_folder(tmp_path / "outside" / "ioi_tiny")
    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "ioi_tiny").symlink_to(outside, target_is_directory=True)
    done = mibspec_cli(
        "import", "mib-submission", str(tmp_path / "method"), "-o", str(tmp_path / "out"), "-f", "json",
        "--architecture", "GPT2LMHeadModel",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert _json_codes(done) == ["I127"]
    assert not (tmp_path / "out").exists()


def _cv_unit(folder: Path, unit_id: str, matrix: Any = None) -> None:
    """One causal-variable unit: a subspace featurizer (``matrix``, d_model × n_features)."""
    torch = pytest.importorskip("torch")
    folder.mkdir(parents=True, exist_ok=True)
    matrix = torch.eye(8)[:, :2].contiguous() if matrix is None else matrix
    info = {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": int(matrix.shape[1]),
        "additional_config": {"rotation_matrix": matrix},
    }
    for suffix in ("_featurizer", "_inverse_featurizer"):
        torch.save({"model_info": info, "state_dict": {}}, folder / f"{unit_id}{suffix}")
    (folder / f"{unit_id}_indices").write_text("[0, 1]", encoding="utf-8")


UNIT = "ResidualStream(Layer:3,Token:last_token)"


@pytest.mark.parametrize("linked", ["_featurizer", "_indices", "folder"])
def test_a_link_out_of_a_causal_variable_submission_is_refused(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside" / CELL
    _cv_unit(outside, UNIT)
    cell = tmp_path / "submission" / CELL
    if linked == "folder":
        cell.parent.mkdir()
        cell.symlink_to(outside, target_is_directory=True)
    else:
        _cv_unit(cell, UNIT)
        (cell / f"{UNIT}{linked}").unlink()
        (cell / f"{UNIT}{linked}").symlink_to(outside / f"{UNIT}{linked}")
    result = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert "I127" in _codes(result)
    assert not (tmp_path / "out").exists()


def test_a_link_inside_the_submission_is_followed(tmp_path: Path) -> None:
    cell = tmp_path / "submission" / CELL
    _cv_unit(tmp_path / "submission" / "kept", UNIT)
    cell.symlink_to(tmp_path / "submission" / "kept", target_is_directory=True)
    result = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert not [f for f in result.findings if f.severity.value == "error"], [str(f) for f in result.findings]
    assert result.written


# --- 3. a .pt file is bounded by its bytes, not by the sizes it claims ----------------------------


def _pt_graph(path: Path, d_model: int, **tensors: Any) -> Path:
    torch = pytest.importorskip("torch")
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(2, 2))
    torch.save(
        {
            "cfg": {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": d_model},
            "src_nodes": list(universe.forward_names),
            "dst_nodes": list(universe.backward_names),
            "edges_scores": torch.zeros(universe.n_forward, universe.n_backward),
            **tensors,
        },
        path,
    )
    return path


def _import_eap_ig_limited(source: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    out = str(tmp_path / "out")
    return _mibspec_limited("import", "eap-ig", str(source), "-o", out, "-f", "json", cwd=tmp_path)


@pytest.mark.slow
def test_a_stride_zero_tensor_in_a_pt_graph_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    n = len(node_names(2, 2))
    huge = torch.zeros(1).expand(n, 10**8)  # 2.8 KB on disk, 5.6 GB once copied as float64
    source = _pt_graph(tmp_path / "graph.pt", 10**8, neurons_scores=huge)
    assert source.stat().st_size < 10_000
    done = _import_eap_ig_limited(source, tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert _json_codes(done) == ["I128"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_d_model_of_gigabytes_is_refused_before_neuron_arrays_are_made(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    n = len(node_names(2, 2))
    source = _pt_graph(tmp_path / "graph.pt", 10**9, neurons_scores=torch.zeros(n, 4))
    done = _import_eap_ig_limited(source, tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert _json_codes(done) == ["I128"]


@pytest.mark.slow
def test_a_stride_zero_rotation_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    _cv_unit(tmp_path / "submission" / CELL, UNIT, torch.zeros(1, 1).expand(60_000, 60_000))
    done = _mibspec_limited(
        "import", "mib-submission", str(tmp_path / "submission"), "-o", str(tmp_path / "out"), "-f", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "I128" in _json_codes(done)


# --- 4. the results unpickler ---------------------------------------------------------------------


class _Allocate:
    """Pickles as a direct call of numpy.ndarray with a shape of 1.6 GB."""

    def __reduce__(self) -> Any:
        return (np.ndarray, ((200_000_000,), "f8"))


@pytest.mark.slow
def test_a_pickle_that_calls_the_array_constructor_is_refused(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method" / "ioi_tiny")
    payload = _results(1, weighted_edge_counts=_Allocate())
    (folder / "ioi_tiny_validation_abs-False.pkl").write_bytes(pickle.dumps(payload))
    done = _mibspec_limited(
        "import", "mib-submission", str(tmp_path / "method"), "-o", str(tmp_path / "out"), "-f", "json",
        "--architecture", "GPT2LMHeadModel", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert _json_codes(done) == ["I109"]


def test_arrays_pickled_by_numpy_are_still_read(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method" / "ioi_tiny")
    results = _results(1)
    results["faithfulnesses"] = np.array(results["faithfulnesses"])
    results["area_under"] = np.float64(0.5)
    (folder / "ioi_tiny_validation_abs-False.pkl").write_bytes(pickle.dumps(results))
    result = import_mib_submission(tmp_path / "method", tmp_path / "out", OPTIONS)
    assert result.ok, [str(f) for f in result.findings]


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_an_integer_beyond_the_float_range_in_results_is_coded(tmp_path: Path, value: int) -> None:
    _importance_folder(tmp_path / "method" / "ioi_tiny", area_under=value)
    result = import_mib_submission(tmp_path / "method", tmp_path / "out", OPTIONS)
    assert _codes(result) == ["I101"]
    assert not (tmp_path / "out").exists()


# --- 5. integers in names, rows and the environment -----------------------------------------------


def _causal_results(path: Path, unit: str) -> Path:
    key = f"[[AtomicModelUnit(id='{unit}')]]"
    data = {
        "method_name": "m",
        "model_name": "gpt2",
        "task_name": "arithmetic",
        "dataset": {"a_test": {"model_unit": {key: {"ones_carry": {"average_score": 0.5}}}}},
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("layer", ["²", "٣", "1_0", " 3", "9" * 5000])
def test_a_layer_that_is_not_ascii_digits_is_coded(tmp_path: Path, layer: str) -> None:
    source = _causal_results(tmp_path / "results.json", f"ResidualStream(Layer-{layer},Token-last_token)")
    result = import_mib_causal_results(source, tmp_path / "out")
    assert _codes(result) == ["I101"]
    assert len(result.findings[0].message) < 1000


@pytest.mark.parametrize("layer", ["²", "9" * 5000])
def test_a_unit_file_name_with_such_a_layer_is_coded(tmp_path: Path, layer: str) -> None:
    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    name = f"ResidualStream(Layer:{layer[:200]},Token:last_token)_indices"  # a file name has 255 bytes
    (cell / name).write_text("null", encoding="utf-8")
    result = import_mib_cv_submission(tmp_path / "submission", tmp_path / "out")
    assert _codes(result) == ["I101"]


@pytest.mark.parametrize("label", ["²", "٣", "9" * 5000])
def test_a_dataset_label_that_is_not_ascii_digits_is_coded(tmp_path: Path, label: str) -> None:
    rows = [
        {
            "prompt": "What is 12 + 34?",
            "label": label,
            "operator": "+",
            "random_counterfactual": {"prompt": "What is 15 + 37?", "label": "52", "operator": "+"},
        }
    ]
    source = tmp_path / "test.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = import_mib_dataset([source], tmp_path / "out")
    assert _codes(result) == ["I116"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("variable", ["COLUMNS", "MIBSPEC_ACTIVATION_CACHE_BYTES", "SOURCE_DATE_EPOCH"])
@pytest.mark.parametrize("value", ["²", "12abc", "9" * 5000])
def test_a_bad_numeric_environment_variable_is_a_usage_error_before_any_work(
    mibspec_cli: Any, variable: str, value: str
) -> None:
    report = REPO / "examples" / "circuit" / "report.json"
    done = mibspec_cli("verify", str(report), "--no-recompute", env={variable: value})
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert variable in done.stderr
    assert done.stdout == ""  # nothing was verified


# --- 13. inputs written under one name --------------------------------------------------------------


def _circuit_results(path: Path, entries: list[tuple[str, str]]) -> Path:
    curve = {"edge_counts": [float(int(k * 32491)) for k in GRID], "faithfulness": [0.5] * 9 + [1.0]}
    results = [{"model_id": model, "scores": {task: {"CPR": curve, "CMD": curve}}} for task, model in entries]
    path.write_text(json.dumps({"method_name": "m", "results": results}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "entries",
    [
        [("a/b", "gpt2"), ("a-b", "gpt2")],  # one name once made safe
        [("ioi", "gpt2"), ("ioi", "gpt2")],  # one task and model listed twice
        [("IOI", "gpt2"), ("ioi", "gpt2")],  # one folder on a case-insensitive file system
    ],
)
def test_results_written_under_one_name_are_refused(tmp_path: Path, entries: list[tuple[str, str]]) -> None:
    source = _circuit_results(tmp_path / "results.json", entries)
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert _codes(result) == ["I126"]
    assert result.findings[0].pointer == "/results/1/scores/" + entries[1][0].replace("/", "~1")
    assert not (tmp_path / "out").exists()


def test_results_of_distinct_names_are_all_written(tmp_path: Path) -> None:
    entries = [("ioi", "gpt2"), ("mcqa", "gpt2"), ("ioi", "llama3")]
    source = _circuit_results(tmp_path / "results.json", entries)
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert result.ok
    assert sorted(p.parent.name for p in result.written) == ["ioi_gpt2_m", "ioi_llama3_m", "mcqa_gpt2_m"]


# --- 15. scores beyond float32 --------------------------------------------------------------------


@pytest.mark.parametrize("score", [1.7e308, -1.7e308, 3.5e38])
def test_an_edge_score_beyond_float32_is_refused(tmp_path: Path, score: float) -> None:
    data = graph(2, 2, 8, seed=0)
    first = next(iter(data["edges"]))
    data["edges"][first]["score"] = score
    result = import_eap_ig(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert _codes(result) == ["I105"]
    assert result.findings[0].pointer == f"/edges/{first}/score"
    assert "float32" in result.findings[0].message
    assert not (tmp_path / "out").exists()


def test_a_node_score_beyond_float32_is_refused(tmp_path: Path) -> None:
    data = graph(2, 2, 8, seed=0, node_scores=True)
    data["nodes"]["a0.h0"]["score"] = 1.7e308
    result = import_eap_ig(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert _codes(result) == ["I105"]
    assert not (tmp_path / "out").exists()


def test_a_pt_score_beyond_float32_is_refused(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(2, 2))
    scores = torch.zeros(universe.n_forward, universe.n_backward, dtype=torch.float64)
    scores[0, 0] = 1.7e308
    source = _pt_graph(tmp_path / "graph.pt", 8, edges_scores=scores)
    result = import_eap_ig(source, tmp_path / "out")
    assert _codes(result) == ["I105"]
    assert not (tmp_path / "out").exists()


def test_the_largest_float32_score_is_imported_and_verifies(tmp_path: Path) -> None:
    data = graph(2, 2, 8, seed=0)
    data["edges"][next(iter(data["edges"]))]["score"] = float(np.finfo(np.float32).max)
    result = import_eap_ig(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert result.ok
    assert mibspec.verify(result.written[0], recompute=False).valid


# --- 16. no advice to load unsafely ---------------------------------------------------------------


class _Runs:
    def __reduce__(self) -> Any:
        return (os.system, ("true",))


def test_a_refused_pt_file_is_explained_without_the_unsafe_advice(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    source = tmp_path / "graph.pt"
    torch.save({"cfg": _Runs()}, source)
    result = import_eap_ig(source, tmp_path / "out")
    assert _codes(result) == ["I101"]
    message = result.findings[0].message
    assert "system" in message
    assert "nothing in it was run" in message
    for advice in ("weights_only", "Re-running", "trusted source", "safe_globals"):
        assert advice not in message


# --- exporters living with the importers ------------------------------------------------------------


def _imported_featurizer(tmp_path: Path) -> Path:
    _cv_unit(tmp_path / "submission" / CELL, UNIT)
    result = import_mib_cv_submission(tmp_path / "submission", tmp_path / "imported")
    assert result.written, [str(f) for f in result.findings]
    return result.written[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("folder", "arithmetic_/../../../../escaped_ones_carry"),
        ("unit", "ResidualStream(Layer:3,Token:x/../../../../../escaped)"),
    ],
)
def test_the_causal_variable_export_keeps_hostile_names_inside(tmp_path: Path, key: str, value: str) -> None:
    path = _imported_featurizer(tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["extensions"]["org.mibspec:mib_unit"][key] = value
    path.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "a" / "b" / "out"
    before = _tree(tmp_path)
    result = export_mib_cv_submission([path], out)
    assert _written_outside(tmp_path, before, out) == []
    if key == "unit":
        assert _codes(result) == ["I125"]
    else:
        assert result.ok
        assert all(out.resolve() in p.resolve().parents for p in result.written)


# --- found by fuzzing (tests/fuzz/import_fuzzlib.py) ------------------------------------------------


def test_an_integer_literal_of_4400_digits_in_a_graph_is_p101(tmp_path: Path) -> None:
    text = json.dumps(graph(2, 2, 8, seed=0)).replace('"n_layers": 2', '"n_layers": ' + "9" * 4400, 1)
    (tmp_path / "graph.json").write_text(text, encoding="utf-8")
    result = import_eap_ig(tmp_path / "graph.json", tmp_path / "out")
    assert _codes(result) == ["P101"]
    # located at the value holding it (the cfg object): int() does not say where it stopped
    assert (result.findings[0].pointer, result.findings[0].line, result.findings[0].column) == ("/cfg", 1, 9)


@pytest.mark.parametrize("d_model", [2**26 + 1, 2**63, 10**4000])
def test_a_declared_d_model_beyond_any_neuron_array_is_refused(tmp_path: Path, d_model: int) -> None:
    data = graph(2, 2, 8, seed=0)
    data["cfg"]["d_model"] = d_model
    result = import_eap_ig(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I128", "/cfg/d_model")]
    assert not (tmp_path / "out").exists()


def test_pt_neuron_tensors_need_the_graphs_d_model(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    n = len(node_names(2, 2))
    source = _pt_graph(tmp_path / "graph.pt", 8, neurons_scores=torch.zeros(n, 8))
    graph_dict = torch.load(source, weights_only=True)
    del graph_dict["cfg"]["d_model"]
    torch.save(graph_dict, source)
    result = import_eap_ig(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I101", "/cfg")]


def test_negative_edge_counts_in_results_are_coded(tmp_path: Path) -> None:
    source = _circuit_results(tmp_path / "results.json", [("ioi", "gpt2")])
    data = json.loads(source.read_text(encoding="utf-8"))
    data["results"][0]["scores"]["ioi"]["CMD"]["edge_counts"][3] = -1
    source.write_text(json.dumps(data), encoding="utf-8")
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I101", "/results/0/scores/ioi/CMD")]
    counts = _results(1)["weighted_edge_counts"]
    _importance_folder(tmp_path / "method" / "ioi_tiny", weighted_edge_counts=[-1.0, *counts[1:]])
    assert _codes(import_mib_submission(tmp_path / "method", tmp_path / "out2", OPTIONS)) == ["I101"]


def test_a_model_id_that_is_not_a_string_is_coded(tmp_path: Path) -> None:
    source = _circuit_results(tmp_path / "results.json", [("ioi", "gpt2")])
    data = json.loads(source.read_text(encoding="utf-8"))
    data["results"][0]["model_id"] = ["gpt2"]
    source.write_text(json.dumps(data), encoding="utf-8")
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I102", "/results/0/model_id")]


@pytest.mark.parametrize("text", ["null", "3", '"x"'])
def test_a_result_file_that_is_not_an_object_is_located(tmp_path: Path, text: str) -> None:
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    for importer in (import_mib_causal_results, import_mib_circuit_results):
        [finding] = importer(tmp_path / "results.json", tmp_path / "out").findings
        assert (finding.code, finding.line, finding.column) == ("I101", 1, 1)


@pytest.mark.parametrize("record", [None, 3, "x", [], {"unit": 3, "folder": ["x"]}])
def test_the_export_reads_a_featurizers_free_form_extension_with_care(tmp_path: Path, record: Any) -> None:
    path = _imported_featurizer(tmp_path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["extensions"]["org.mibspec:mib_unit"] = record
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = export_mib_cv_submission([path], tmp_path / "out")
    assert _codes(result) == ["I125"]  # it no longer names its submission folder
    assert not (tmp_path / "out").exists()
