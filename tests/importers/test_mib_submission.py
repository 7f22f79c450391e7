"""MIB circuit-track submission folders: one importance file or nine circuits, results read by
a restricted unpickler, options that pin the model and name the dataset, the way back
(export mib-submission), and recomputation on a shipped tiny model laid out as MIB's folder."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _mib_files import REPO, edge_names, graph, write

import mibspec
from mibspec.exporters import export_mib_submission
from mibspec.importers import SubmissionOptions, import_mib_submission

GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _trapezoid(ys: list[float]) -> float:
    return sum((GRID[i + 1] - GRID[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(GRID) - 1))


def _results(seed: int) -> dict[str, Any]:
    """A results dict as MIB's run_evaluation.py pickles it (faithfulness 1 at k = 1)."""
    rng = np.random.default_rng(seed)
    faithfulness = [*np.round(rng.random(9), 6).tolist(), 1.0]
    return {
        "weighted_edge_counts": [float(int(k * 479)) for k in GRID],
        "area_under": _trapezoid(faithfulness),
        "area_from_1": _trapezoid([abs(1 - f) for f in faithfulness]),
        "average": sum(faithfulness) / len(faithfulness),
        "faithfulnesses": faithfulness,
    }


def _importance_folder(root: Path, name: str = "ioi_tiny") -> Path:
    folder = root / name
    write(folder / "importances.json", graph(4, 4, 16, seed=3, chosen=0.0))
    for flag, seed in (("False", 1), ("True", 2)):
        (folder / f"{name}_validation_abs-{flag}.pkl").write_bytes(pickle.dumps(_results(seed)))
    return folder


def _nine_folder(root: Path, sizes: list[int], name: str = "ioi_tiny") -> Path:
    folder = root / name
    edges = edge_names(4, 4)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(edges))
    for i, size in enumerate(sizes):
        data = graph(4, 4, 16, seed=i, scores=False)
        chosen = {edges[j] for j in order[:size]}  # nested, like circuits cut from one ranking
        for edge, entry in data["edges"].items():
            entry["in_graph"] = edge in chosen
        write(folder / f"circuit_{i}.json", data)
    return folder


def _options(**kwargs: Any) -> SubmissionOptions:
    return SubmissionOptions(**{"architecture": "GPT2LMHeadModel", "method": "m", **kwargs})


def test_importance_folder_with_results_gives_a_pinned_report_that_verifies(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    options = _options(model_revision=REVISION, dataset=f"mib-bench/ioi@{'a' * 40}")
    result = import_mib_submission(folder, tmp_path / "out", options)
    assert result.ok, [str(f) for f in result.findings]
    report_path = tmp_path / "out" / "ioi_tiny" / "report.json"
    assert report_path in result.written
    verified = mibspec.verify(report_path, recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]
    report = json.loads(report_path.read_text())
    assert report["model"]["revision"] == REVISION
    assert report["task"]["hub_dataset"] == {"id": "mib-bench/ioi", "revision": "a" * 40}
    assert report["task"]["split"] == "validation"
    signed, absolute = _results(1), _results(2)  # what _importance_folder pickled
    assert report["claims"]["cpr"]["value"] == signed["area_under"]
    assert report["claims"]["cmd"]["value"] == absolute["area_from_1"]
    curves = {c["ranking"]: [p["faithfulness"] for p in c["points"]] for c in report["claims"]["curves"]}
    assert curves == {"signed": signed["faithfulnesses"], "absolute": absolute["faithfulnesses"]}


def test_without_a_model_revision_the_report_is_unpinned(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    assert import_mib_submission(folder, tmp_path / "out", _options()).ok
    verified = mibspec.verify(tmp_path / "out" / "ioi_tiny" / "report.json", recompute=False)
    assert [f.code for f in verified.findings if f.severity.value == "error"] == ["A111"]


def test_nine_circuits_are_placed_on_the_grid_by_size(tmp_path: Path) -> None:
    limits = [int(k * 479) for k in GRID[:9]]  # floor(k·|E|) for the 479 edges of 4 layers × 4 heads
    sizes = list(reversed(limits))  # files in any order: placed by size
    folder = _nine_folder(tmp_path / "method", sizes)
    result = import_mib_submission(folder, tmp_path / "out", _options(method=None))
    assert result.ok, [str(f) for f in result.findings]
    assert not (tmp_path / "out" / "ioi_tiny" / "report.json").exists()
    assert len(result.notes) == 1
    assert "no results file" in result.notes[0]
    document = json.loads((tmp_path / "out" / "ioi_tiny" / "circuit.json").read_text())
    assert [c["k"] for c in document["circuits"]] == GRID
    assert [c["n_edges"] for c in document["circuits"]] == [*limits, 479]
    assert mibspec.verify(tmp_path / "out" / "ioi_tiny" / "circuit.json", recompute=False).valid


def test_a_circuit_over_its_grid_point_is_named(tmp_path: Path) -> None:
    limits = [int(k * 479) for k in GRID[:9]]
    sizes = [*limits[:4], limits[4] + 1, *limits[5:]]
    folder = _nine_folder(tmp_path / "method", sizes)
    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I108"]
    assert "circuit_4.json" in result.findings[0].message
    assert not (tmp_path / "out").exists()


def test_missing_circuits_are_named(tmp_path: Path) -> None:
    folder = _nine_folder(tmp_path / "method", [0] * 8)
    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I107"]
    assert "1 circuit file(s) missing" in result.findings[0].message


def test_a_folder_not_named_task_model_is_refused(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method", name="ioi")
    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I110"]


def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    control = tmp_path / "control"

    class Payload:
        def __init__(self, path: Path) -> None:
            self.path = path

        def __reduce__(self) -> tuple[Any, ...]:
            return (exec, (f"open({str(self.path)!r}, 'w').write('ran')",))

    folder = _importance_folder(tmp_path / "method")
    hostile = {**_results(1), "faithfulnesses": Payload(marker)}
    (folder / "ioi_tiny_validation_abs-False.pkl").write_bytes(pickle.dumps(hostile))
    # The same pickle with another target does run code under a plain pickle.load.
    probe = pickle.dumps({**_results(1), "faithfulnesses": Payload(control)})
    subprocess.run(
        [sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
        input=probe,
        check=True,
    )
    assert control.exists()

    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I109"]
    assert "builtins.exec" in result.findings[0].message
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


def test_malformed_options_are_refused(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    for options in (
        _options(model_revision="main"),
        _options(dataset="mib-bench/ioi"),
        _options(split="dev"),
    ):
        result = import_mib_submission(folder, tmp_path / "out", options)
        assert [f.code for f in result.findings] == ["I111"]


def test_import_export_import_is_the_identity(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "a" / "method")
    options = _options(model_revision=REVISION)
    assert import_mib_submission(folder, tmp_path / "first", options).ok
    export_mib_submission([tmp_path / "first" / "ioi_tiny" / "report.json"], tmp_path / "b" / "method")
    assert import_mib_submission(tmp_path / "b" / "method", tmp_path / "second", options).ok
    for name in ("circuit.json", "circuit.safetensors", "report.json"):
        first = (tmp_path / "first" / "ioi_tiny" / name).read_bytes()
        assert first == (tmp_path / "second" / "ioi_tiny" / name).read_bytes(), name


def test_nine_circuits_round_trip(tmp_path: Path) -> None:
    limits = [int(k * 479) for k in GRID[:9]]
    folder = _nine_folder(tmp_path / "a" / "method", limits)
    for flag, seed in (("False", 1), ("True", 2)):
        (folder / f"ioi_tiny_test_abs-{flag}.pkl").write_bytes(pickle.dumps(_results(seed)))
    options = _options(model_revision=REVISION)
    assert import_mib_submission(folder, tmp_path / "first", options).ok
    written = export_mib_submission([tmp_path / "first" / "ioi_tiny" / "report.json"], tmp_path / "b" / "m")
    assert len([p for p in written if p.name.startswith("circuit_")]) == 9
    assert import_mib_submission(tmp_path / "b" / "m", tmp_path / "second", options).ok
    for name in ("circuit.json", "circuit.safetensors", "report.json"):
        first = (tmp_path / "first" / "ioi_tiny" / name).read_bytes()
        assert first == (tmp_path / "second" / "ioi_tiny" / name).read_bytes(), name


@pytest.mark.slow
def test_cli_imports_a_submission_and_exports_it(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-submission",
            str(folder),
            "-o",
            str(tmp_path / "out"),
            "--model-revision",
            REVISION,
            "--architecture",
            "GPT2LMHeadModel",
            "--method",
            "m",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "export",
            "mib-submission",
            str(tmp_path / "out" / "ioi_tiny" / "report.json"),
            "-o",
            str(tmp_path / "back"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "back" / "ioi_tiny" / "importances.json").is_file()


@pytest.mark.slow
@pytest.mark.recompute
def test_shipped_tiny_model_as_a_mib_folder_recomputes(tmp_path: Path) -> None:
    """The shipped IOI example, laid out as a MIB submission (importance file + the results
    files MIB's evaluator writes), imported with a revision and the dataset, recomputes."""
    pytest.importorskip("torch")
    example = REPO / "examples" / "circuit-ioi"
    export_mib_submission([example / "report.json"], tmp_path / "submission" / "eap-ig")
    folder = tmp_path / "submission" / "eap-ig" / "ioi_tiny-gpt2"
    assert sorted(p.name for p in folder.iterdir()) == [
        "importances.json",
        "ioi_tiny-gpt2_test_abs-False.pkl",
        "ioi_tiny-gpt2_test_abs-True.pkl",
    ]
    options = SubmissionOptions(
        model_revision=REVISION,
        dataset=str(example / "dataset.json"),
        counterfactual_type="io_s2_flip",
        architecture="GPT2LMHeadModel",
        model_files=REPO / "examples" / "models" / "tiny-gpt2",
    )
    result = import_mib_submission(folder, tmp_path / "out", options)
    assert result.ok, [str(f) for f in result.findings]
    report = tmp_path / "out" / "ioi_tiny-gpt2" / "report.json"
    # The example's numbers were computed without a start token, which MIB's folder layout
    # cannot say; the imported report (mib-2025, whose profile prepends one) declares it.
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["profile"] == "mib-2025"
    assert "start_token" not in document["settings"]
    document["settings"]["start_token"] = "none"
    report.write_text(json.dumps(document, indent=2), encoding="utf-8")
    checked = mibspec.verify(report, recompute=False)
    assert checked.valid, [str(f) for f in checked.findings]
    verified = mibspec.verify(report, recompute=True, model_roots=[REPO / "examples" / "models"])
    stage = verified.documents[0].stages[mibspec.validator.Stage.RECOMPUTE]
    assert stage[0].value == "passed", (stage, [str(f) for f in verified.findings])
    assert verified.valid, [str(f) for f in verified.findings]


def test_nine_circuits_of_different_graphs_are_refused(tmp_path: Path) -> None:
    folder = _nine_folder(tmp_path / "method", [0] * 9)
    write(folder / "circuit_8.json", graph(3, 4, 16, seed=8, scores=False, chosen=0.0))
    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I112"]
    assert "circuit_8.json" in result.findings[0].message


def test_results_of_another_grid_are_refused(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    short = {**_results(1), "faithfulnesses": _results(1)["faithfulnesses"][:9]}
    (folder / "ioi_tiny_validation_abs-False.pkl").write_bytes(pickle.dumps(short))
    result = import_mib_submission(folder, tmp_path / "out", _options())
    assert [f.code for f in result.findings] == ["I112"]


@pytest.mark.parametrize("architecture", ["gpt2", "GPT2LMHeadModel", "tiny-cnn-v1", "GPT2 LMHeadModel", ""])
def test_an_architecture_is_a_model_class_name(tmp_path: Path, architecture: str) -> None:
    folder = _importance_folder(tmp_path / "method")
    result = import_mib_submission(folder, tmp_path / "out", _options(architecture=architecture))
    if architecture in ("gpt2", "GPT2LMHeadModel"):  # both have the form of a class name
        assert result.ok, [str(f) for f in result.findings]
        return
    assert [f.code for f in result.findings] == ["I111"]
    assert "not a model class name" in result.findings[0].message
    assert not (tmp_path / "out").exists()


def test_an_architecture_must_be_the_one_the_model_files_name(tmp_path: Path) -> None:
    folder = _importance_folder(tmp_path / "method")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    wrong = _options(architecture="LlamaForCausalLM", model_files=model)
    result = import_mib_submission(folder, tmp_path / "out", wrong)
    assert [f.code for f in result.findings] == ["I111"]
    assert "'GPT2LMHeadModel'" in result.findings[0].message
    assert not (tmp_path / "out").exists()
    right = _options(architecture="GPT2LMHeadModel", model_files=model)
    assert import_mib_submission(folder, tmp_path / "out", right).ok


def test_imported_sizes_are_the_circuits_recorded_sizes_not_mibs(tmp_path: Path) -> None:
    """MIB's results record sizes after one pruning round (PR-5); the report records each
    point's circuit as the profile says (complete pruning, K-9), computed here by a slow
    loop: the top ⌊k·479⌋ edges by score, then every edge off an input → logits path dropped."""
    from safetensors.numpy import load_file

    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    folder = _importance_folder(tmp_path / "method")
    assert import_mib_submission(folder, tmp_path / "out", _options(model_revision=REVISION)).ok
    out = tmp_path / "out" / "ioi_tiny"
    report = json.loads((out / "report.json").read_text())
    scores = load_file(str(out / "circuit.safetensors"))["scores"].astype(np.float64)
    universe = GraphUniverse(GraphConfig(4, 4))
    source = [int(s) for s in universe.edge_src]
    target = [int(universe.node_of_slot[d]) for d in universe.edge_dst]  # -1: logits

    def slow_size(kept: list[int]) -> float:
        reached = {0}
        for node in range(1, universe.n_forward):
            if any(source[i] in reached and target[i] == node for i in kept):
                reached.add(node)
        reaches = {-1}
        for node in range(universe.n_forward - 1, -1, -1):
            if any(source[i] == node and target[i] in reaches for i in kept):
                reaches.add(node)
        return float(sum(1 for i in kept if source[i] in reached and target[i] in reaches))

    curves = {c["ranking"]: c["points"] for c in report["claims"]["curves"]}
    for ranking, key in (("signed", lambda i: -scores[i]), ("absolute", lambda i: -abs(scores[i]))):
        order = sorted(range(479), key=lambda i: (key(i), i))
        expected = [slow_size(order[: int(Fraction(str(k)) * 479)]) for k in GRID]
        assert [p["weighted_size"] for p in curves[ranking]] == expected
    assert expected != _results(2)["weighted_edge_counts"]  # not the counts the pickle holds
    assert mibspec.verify(out / "report.json", recompute=False).valid


# --- results from anywhere (--results), options used or refused, nine circuits with scores ------


def _results_file(root: Path, name: str, seed: int) -> Path:
    """A results pickle where MIB's run_evaluation.py writes it: results/<method>_<ablation>_<level>/."""
    path = root / "results" / "m_patching_edge" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(_results(seed)))
    return path


def _without_provenance(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    document.pop("provenance")
    return document


def test_results_given_from_anywhere_give_the_report_results_in_the_folder_give(tmp_path: Path) -> None:
    inside = _importance_folder(tmp_path / "a" / "m")
    assert import_mib_submission(inside, tmp_path / "in", _options(model_revision=REVISION)).ok
    bare = tmp_path / "b" / "m" / "ioi_tiny"
    bare.mkdir(parents=True)
    (bare / "importances.json").write_bytes((inside / "importances.json").read_bytes())
    given = tuple(_results_file(tmp_path, p.name, 0) for p in sorted(inside.glob("*.pkl")))
    for mine, theirs in zip(given, sorted(inside.glob("*.pkl")), strict=True):
        mine.write_bytes(theirs.read_bytes())
    before = [p.read_bytes() for p in given]
    result = import_mib_submission(
        bare.parent, tmp_path / "out", _options(model_revision=REVISION, results=given)
    )
    assert result.ok, [str(f) for f in result.findings]
    report = tmp_path / "out" / "ioi_tiny" / "report.json"
    assert _without_provenance(report) == _without_provenance(tmp_path / "in" / "ioi_tiny" / "report.json")
    assert mibspec.verify(report, recompute=False).valid
    assert [p.read_bytes() for p in given] == before  # inputs are only read
    assert not any(p.name == "report.json" for p in bare.iterdir())


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("ioi_other_validation_abs-False.pkl", "names the folder ioi_other"),
        ("ioi_tiny_results.pkl", "not named"),
        ("ioi_tiny_validation_abs-False.pkl", "already has results"),
    ],
    ids=["no-folder", "not-named", "folder-has-it"],
)
def test_a_results_file_matching_no_folder_or_a_taken_one_is_refused(
    tmp_path: Path, name: str, words: str
) -> None:
    folder = _importance_folder(tmp_path / "m")  # holds ioi_tiny_validation_abs-{False,True}.pkl
    given = _results_file(tmp_path, name, 3)
    result = import_mib_submission(folder, tmp_path / "out", _options(results=(given,)))
    assert [f.code for f in result.findings] == ["I112"]
    assert words in result.findings[0].message
    assert str(given) in result.findings[0].message
    assert (result.findings[0].line, result.findings[0].column) == (1, 1)
    assert not (tmp_path / "out").exists()


def test_two_results_files_for_one_folder_split_and_ranking_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "m" / "ioi_tiny"
    write(folder / "importances.json", graph(4, 4, 16, seed=3, chosen=0.0))
    first = _results_file(tmp_path / "x", "ioi_tiny_test_abs-True.pkl", 1)
    second = _results_file(tmp_path / "y", "ioi_tiny_test_abs-True.pkl", 2)
    result = import_mib_submission(folder.parent, tmp_path / "out", _options(results=(first, second)))
    assert [f.code for f in result.findings] == ["I112"]
    assert str(second) in result.findings[0].message
    assert str(first) in result.findings[0].message


def test_a_model_revision_without_results_is_recorded_in_the_circuit_document(tmp_path: Path) -> None:
    folder = tmp_path / "m" / "ioi_gpt2"
    write(folder / "importances.json", graph(12, 12, 16, seed=3, chosen=0.0))
    result = import_mib_submission(
        folder.parent, tmp_path / "out", SubmissionOptions(model_revision=REVISION)
    )
    assert result.ok, [str(f) for f in result.findings]
    circuit = tmp_path / "out" / "ioi_gpt2" / "circuit.json"
    model = json.loads(circuit.read_text())["model"]
    assert (model["id"], model["revision"]) == ("gpt2", REVISION)
    assert mibspec.verify(circuit, recompute=False).findings == []
    # a model the folder name does not describe is refused, not dropped
    tiny = _nine_folder(tmp_path / "n", [0] * 9)
    refused = import_mib_submission(tiny, tmp_path / "o", SubmissionOptions(model_revision=REVISION))
    assert [f.code for f in refused.findings] == ["I110"]


def test_report_options_without_any_results_are_refused(tmp_path: Path) -> None:
    folder = _nine_folder(tmp_path / "m", [int(k * 479) for k in GRID[:9]])
    for options, flags in (
        (_options(), "--method"),
        (_options(method=None, split="test", counterfactual_type="abc"), "--split, --counterfactual-type"),
    ):
        result = import_mib_submission(folder, tmp_path / "out", options)
        assert [f.code for f in result.findings] == ["I111"]
        assert result.findings[0].message.startswith(f"{flags}: recorded in reports only")
        assert not (tmp_path / "out").exists()


def _scored_nine_folder(root: Path, *, same_scores: bool = True) -> tuple[Path, dict[str, dict[str, Any]]]:
    """Nine circuit files as EAP-IG's Graph.to_json writes circuits cut from one ranking: every
    edge with its score and in_graph; the top floor(k·|E|) edges by score in the circuit."""
    folder = root / "ioi_tiny"
    edges = edge_names(4, 4)
    written = {}
    for i, k in enumerate(GRID[:9]):
        data = graph(4, 4, 16, seed=0 if same_scores else i)
        ranked = sorted(edges, key=lambda e: -data["edges"][e]["score"])
        chosen = set(ranked[: int(k * len(edges))])
        for edge, entry in data["edges"].items():
            entry["in_graph"] = edge in chosen
        name = f"circuit_{i}.json"
        write(folder / name, data)
        written[name] = data
    return folder, written


def _loader_keys() -> tuple[set[str], set[str], set[str]]:
    """The keys EAP-IG's public Graph.from_json indexes (``d[...]``, ``node_dict[...]``,
    ``info[...]``), read from its source."""
    import ast

    from _mib_files import peers

    root = peers()
    if root is None:
        pytest.skip("the public EAP-IG code is not beside the checkout")
    tree = ast.parse((root / "eap-ig" / "src" / "eap" / "graph.py").read_text())
    [loader] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "from_json"]
    found: dict[str, set[str]] = {"d": set(), "node_dict": set(), "info": set()}
    for node in ast.walk(loader):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in found
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.ctx, ast.Load)
        ):
            found[node.value.id].add(node.slice.value)
    # keys read only after an `in` check are optional; in_graph is read unconditionally
    return found["d"], {"in_graph"} & found["node_dict"], found["info"]


def test_nine_circuits_with_scores_round_trip_with_their_scores(tmp_path: Path) -> None:
    folder, sources = _scored_nine_folder(tmp_path / "a" / "m")
    for flag, seed in (("False", 1), ("True", 2)):
        _results_file(tmp_path, f"ioi_tiny_test_abs-{flag}.pkl", seed)
    given = tuple(sorted((tmp_path / "results").rglob("*.pkl")))
    options = _options(model_revision=REVISION, results=given)
    result = import_mib_submission(folder.parent, tmp_path / "first", options)
    assert result.ok, [str(f) for f in result.findings]
    assert result.notes == []
    document = json.loads((tmp_path / "first" / "ioi_tiny" / "circuit.json").read_text())
    assert document["scores"]["shape"] == [479]
    report = tmp_path / "first" / "ioi_tiny" / "report.json"
    assert mibspec.verify(report, recompute=False).valid
    written = export_mib_submission([report], tmp_path / "b" / "m")
    exported = {p.name: p for p in written if p.name.startswith("circuit_")}
    assert len(exported) == 9
    top, node_keys, edge_keys = _loader_keys()
    assert edge_keys == {"score", "in_graph"}  # what the public loader reads per edge
    # the source files, in the order of their sizes, against the exported files (by k)
    for name, data in sources.items():
        k = GRID[int(name.split("_")[1].split(".")[0])]
        back = json.loads(exported[f"circuit_{k:g}.json"].read_text())
        assert top <= set(back)
        assert all(node_keys <= set(entry) for node, entry in back["nodes"].items() if node != "logits")
        assert all(edge_keys <= set(entry) for entry in back["edges"].values())
        assert {e for e, v in back["edges"].items() if v["in_graph"]} == {
            e for e, v in data["edges"].items() if v["in_graph"]
        }
        assert {e: v["score"] for e, v in back["edges"].items()} == {
            e: v["score"] for e, v in data["edges"].items()
        }
    again = _options(model_revision=REVISION)  # the exported folder holds its results
    assert import_mib_submission(tmp_path / "b" / "m", tmp_path / "second", again).ok
    for name in ("circuit.json", "circuit.safetensors"):
        first = (tmp_path / "first" / "ioi_tiny" / name).read_bytes()
        assert first == (tmp_path / "second" / "ioi_tiny" / name).read_bytes(), name


def test_binary_nine_circuits_export_a_score_on_every_edge(tmp_path: Path) -> None:
    limits = [int(k * 479) for k in GRID[:9]]
    folder = _nine_folder(tmp_path / "a" / "m", limits)
    for flag, seed in (("False", 1), ("True", 2)):
        (folder / f"ioi_tiny_test_abs-{flag}.pkl").write_bytes(pickle.dumps(_results(seed)))
    assert import_mib_submission(folder, tmp_path / "first", _options(model_revision=REVISION)).ok
    written = export_mib_submission([tmp_path / "first" / "ioi_tiny" / "report.json"], tmp_path / "b" / "m")
    _, _, edge_keys = _loader_keys()
    for path in (p for p in written if p.name.startswith("circuit_")):
        back = json.loads(path.read_text())
        assert all(edge_keys <= set(entry) for entry in back["edges"].values())
        assert all(entry["score"] != entry["score"] for entry in back["edges"].values())  # NaN: no score


def test_nine_circuits_with_different_scores_keep_the_circuits_and_say_so(tmp_path: Path) -> None:
    folder, _ = _scored_nine_folder(tmp_path / "m", same_scores=False)
    result = import_mib_submission(folder.parent, tmp_path / "out", _options(method=None))
    assert result.ok, [str(f) for f in result.findings]
    assert any("edge scores of its circuit files were not kept" in note for note in result.notes)
    document = json.loads((tmp_path / "out" / "ioi_tiny" / "circuit.json").read_text())
    assert "scores" not in document
    assert len(document["circuits"]) == 10


def test_cli_takes_results_from_anywhere(tmp_path: Path) -> None:
    folder = tmp_path / "m" / "ioi_tiny"
    write(folder / "importances.json", graph(4, 4, 16, seed=3, chosen=0.0))
    given = [_results_file(tmp_path, f"ioi_tiny_test_abs-{flag}.pkl", 1) for flag in ("False", "True")]
    args = [sys.executable, "-m", "mibspec", "import", "mib-submission", str(folder.parent)]
    args += ["-o", str(tmp_path / "out"), "--model-revision", REVISION, "--architecture", "GPT2LMHeadModel"]
    for path in given:
        args += ["--results", str(path)]
    run = subprocess.run(args, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "out" / "ioi_tiny" / "report.json").read_text())
    assert [c["ranking"] for c in report["claims"]["curves"]] == ["signed", "absolute"]
    assert report["task"]["split"] == "test"
