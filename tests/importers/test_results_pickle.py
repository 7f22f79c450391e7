"""``import mib-circuit-results`` on the pickle MIB's run_evaluation.py writes: the same report
as from the leaderboard JSON of the same curve; task, model and split from the file name; bad
pickles refused with located findings (never a traceback, never a plain ``pickle.load``).

MIB's ``run_evaluation.py`` pickles ``{"weighted_edge_counts", "area_under", "area_from_1",
"average", "faithfulnesses"}`` to ``results/<method>_<ablation>_<level>/<task>_<model>_<split>_
abs-<True|False>.pkl`` (task with ``-`` for ``_``). Its numbers are plain Python floats: the
faithfulnesses are arithmetic on ``Tensor.mean().item()``, the counts ``float(...)`` or
``.item()``, the areas sums of those; no numpy or torch scalar reaches the pickle. The tests
build the dict the same way, with ``pickle.dumps`` and the default protocol.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.importers import ImportOptions, import_mib_circuit_results

GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
#: A faithfulness curve with f(1) = 1, as the full circuit (the clean run) gives.
CURVE = [0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9, 0.97, 1.0]
GPT2_EDGES = 32491


def _trapezoid(ys: list[float]) -> float:
    return sum((GRID[i + 1] - GRID[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(GRID) - 1))


def _evaluator_dict(curve: list[float]) -> dict[str, Any]:
    """The dict run_evaluation.py pickles, its areas computed as evaluate_area_under_curve does."""
    return {
        "weighted_edge_counts": [float(int(k * GPT2_EDGES)) for k in GRID],
        "area_under": _trapezoid(curve),
        "area_from_1": _trapezoid([abs(1.0 - f) for f in curve]),
        "average": sum(curve) / len(curve),
        "faithfulnesses": list(curve),
    }


def _pickle(root: Path, name: str, data: Any, folder: str = "EAP-IG_patching_edge") -> Path:
    path = root / "results" / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return path


def _leaderboard(root: Path, curve: list[float]) -> Path:
    counts = [int(k * GPT2_EDGES) for k in GRID]
    block = {"edge_counts": counts, "faithfulness": curve}
    payload = {
        "method_name": "EAP-IG",
        "results": [{"model_id": "gpt2", "scores": {"ioi": {"CPR": block, "CMD": block}}}],
    }
    path = root / "leaderboard.json"
    path.write_text(json.dumps(payload))
    return path


@pytest.mark.parametrize(("flag", "ranking"), [("False", "signed"), ("True", "absolute")])
def test_a_results_pickle_gives_the_report_the_leaderboard_json_gives(
    tmp_path: Path, flag: str, ranking: str
) -> None:
    source = _pickle(tmp_path, f"ioi_gpt2_test_abs-{flag}.pkl", _evaluator_dict(CURVE))
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert result.ok, [str(f) for f in result.findings]
    [path] = result.written
    # a folder per curve: the other ranking's pickle of the same method lands beside it
    assert path == tmp_path / "out" / f"ioi_gpt2_EAP-IG_test_{ranking}" / "report.json"
    report = json.loads(path.read_text())
    from_json = import_mib_circuit_results(_leaderboard(tmp_path, CURVE), tmp_path / "json")
    expected = json.loads(from_json.written[0].read_text())
    for key in ("profile", "track", "kind"):
        assert report[key] == expected[key]
    assert report["model"] == expected["model"]
    assert report["task"] == {"name": "ioi", "split": "test"}  # the split from the file name
    assert report["method"]["name"] == "EAP-IG"  # from MIB's folder <method>_<ablation>_<level>
    settings = {k: v for k, v in report["settings"].items() if k != "ranking"}
    assert settings == {k: v for k, v in expected["settings"].items() if k != "ranking"}
    assert report["settings"]["ranking"] == {"cpr": ranking, "cmd": ranking}
    [curve] = report["claims"]["curves"]
    [same] = [c for c in expected["claims"]["curves"] if c["ranking"] == ranking]
    assert curve == same
    assert report["claims"]["n_edges"] == expected["claims"]["n_edges"] == GPT2_EDGES
    # the areas are the evaluator's; with f(1) = 1 they are the leaderboard's too
    assert report["claims"]["cpr"]["value"] == pytest.approx(_trapezoid(CURVE), abs=1e-12)
    assert report["claims"]["cpr"]["value"] == pytest.approx(expected["claims"]["cpr"]["value"], abs=1e-12)
    assert report["claims"]["cmd"]["value"] == pytest.approx(expected["claims"]["cmd"]["value"], abs=1e-12)
    verified = mibspec.verify(path, recompute=False)
    # unpinned, and never recomputable (no dataset, no circuit): R112 says so
    assert [(f.code, f.pointer) for f in verified.findings] == [
        ("A111", "/model"),
        ("R112", "/task/dataset"),
        ("R112", "/claims/circuit"),
    ]


def test_a_task_named_with_a_dash_is_the_task_with_an_underscore(tmp_path: Path) -> None:
    source = _pickle(tmp_path, "arc-easy_llama3_validation_abs-False.pkl", _evaluator_dict(CURVE))
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert result.ok, [str(f) for f in result.findings]
    report = json.loads(result.written[0].read_text())
    assert report["task"] == {"name": "arc_easy", "split": "validation"}
    assert report["model"]["id"] == "llama3"


def test_a_model_revision_is_recorded_and_another_split_refused(tmp_path: Path) -> None:
    source = _pickle(tmp_path, "ioi_gpt2_test_abs-False.pkl", _evaluator_dict(CURVE))
    revision = "0123456789abcdef0123456789abcdef01234567"
    result = import_mib_circuit_results(source, tmp_path / "out", ImportOptions(model_revision=revision))
    assert json.loads(result.written[0].read_text())["model"]["revision"] == revision
    # pinned: no A111; still never recomputable (no dataset, no circuit), which R112 warns of
    verified = mibspec.verify(result.written[0], recompute=False)
    assert [(f.code, f.pointer) for f in verified.findings] == [
        ("R112", "/task/dataset"),
        ("R112", "/claims/circuit"),
    ]
    refused = import_mib_circuit_results(source, tmp_path / "other", ImportOptions(split="validation"))
    assert [f.code for f in refused.findings] == ["I111"]
    assert not (tmp_path / "other").exists()


class _RunsCode:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.path)!r}, 'w').write('ran')",))


@pytest.mark.parametrize(
    ("name", "data", "code", "words"),
    [
        ("results.pkl", _evaluator_dict(CURVE), "I101", "its name must"),
        ("ioi_gpt7_test_abs-False.pkl", _evaluator_dict(CURVE), "I102", "gpt7"),
        ("ioi_gpt2_test_abs-False.pkl", {"faithfulnesses": CURVE}, "I101", "area_under"),
        ("ioi_gpt2_test_abs-False.pkl", {**_evaluator_dict(CURVE), "faithfulnesses": CURVE[:9]}, "I112", "9"),
        ("ioi_gpt2_test_abs-False.pkl", {**_evaluator_dict(CURVE), "area_under": "x"}, "I101", "finite"),
        ("ioi_interpbench_test_abs-False.pkl", {"TPR": [0.5], "FPR": [0.1]}, "I101", "InterpBench"),
        ("ioi_gpt2_test_abs-False.pkl", [1, 2], "I101", "a dict"),
    ],
    ids=["unnamed", "unknown-model", "missing-keys", "short-curve", "not-a-number", "auroc", "a-list"],
)
def test_bad_results_pickles_are_located_findings(
    tmp_path: Path, name: str, data: Any, code: str, words: str
) -> None:
    source = _pickle(tmp_path, name, data)
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert [f.code for f in result.findings] == [code]
    finding = result.findings[0]
    assert (finding.line, finding.column) == (1, 1)
    assert words in finding.message
    assert not (tmp_path / "out").exists()


def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = {**_evaluator_dict(CURVE), "faithfulnesses": _RunsCode(marker)}
    source = _pickle(tmp_path, "ioi_gpt2_test_abs-False.pkl", data)
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert [f.code for f in result.findings] == ["I109"]
    assert "builtins.exec" in result.findings[0].message
    assert not marker.exists()


def test_a_truncated_pickle_is_refused(tmp_path: Path) -> None:
    source = _pickle(tmp_path, "ioi_gpt2_test_abs-False.pkl", _evaluator_dict(CURVE))
    source.write_bytes(source.read_bytes()[:40])
    result = import_mib_circuit_results(source, tmp_path / "out")
    assert [f.code for f in result.findings] == ["I109"]
    assert result.findings[0].message.startswith("ioi_gpt2_test_abs-False.pkl: ")


def test_cli_imports_a_results_pickle(tmp_path: Path) -> None:
    source = _pickle(tmp_path, "ioi_gpt2_test_abs-True.pkl", _evaluator_dict(CURVE))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-circuit-results",
            str(source),
            "-o",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
    )
    # exit 1 only for the unpinned model (A111); the pickle itself was read
    assert "UTF-8" not in run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "A111" in run.stdout
    assert (tmp_path / "o" / "ioi_gpt2_EAP-IG_test_absolute" / "report.json").is_file()
    bad = tmp_path / "bad" / "ioi_gpt2_test_abs-True.pkl"
    bad.parent.mkdir()
    bad.write_bytes(b"\x80\x04\x95garbage")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-circuit-results",
            str(bad),
            "-o",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "I109" in run.stdout
    assert "Traceback" not in run.stderr


def test_both_rankings_of_one_method_import_together(tmp_path: Path) -> None:
    # MIB writes one pickle per ranking (abs-False, abs-True) beside each other
    sources = [
        _pickle(tmp_path, f"ioi_gpt2_test_abs-{flag}.pkl", _evaluator_dict(CURVE))
        for flag in ("False", "True")
    ]
    result = import_mib_circuit_results(sources, tmp_path / "out")
    assert result.ok, [str(f) for f in result.findings]
    assert sorted(p.parent.name for p in result.written) == [
        "ioi_gpt2_EAP-IG_test_absolute",
        "ioi_gpt2_EAP-IG_test_signed",
    ]
