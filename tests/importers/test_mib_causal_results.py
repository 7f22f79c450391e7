"""``mibspec import mib-causal-results``: MIB causal-variable result files as reports.

The result files are built here from the bundled causal-variable reports, written in the
public file layout (scores per counterfactual dataset and model unit). The imported
aggregates are checked against a slow loop written out in the test and against the
bundled reports' own claims, which `mibspec verify` recomputes elsewhere. The IOI files at
the end are in the layout of MIB's IOI evaluation (``ioi_evaluate_submission.py`` runs
CausalAbstraction's ``PatchAttentionHeads``): one entry per model-unit list, keyed by the list's
text ``[[AtomicModelUnit(id='AttentionHead(Layer:l,Head:h,Token:all)'), ...]]``, with
``metadata`` naming the first unit's layer, head and position only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.importers import import_mib_causal_results
from mibspec.validator import Stage, StageStatus

REPO = Path(__file__).resolve().parents[2]


def _position_name(position: dict[str, Any]) -> str:
    if position["rule"] == "last":
        return "last_token"
    return f"{position['rule']}_{position.get('slot') or position.get('token') or position.get('index')}"


def _unit_key(location: dict[str, Any]) -> str:
    token = _position_name(location["position"])
    return f"[[AtomicModelUnit(id='ResidualStream(Layer-{location['layer']},Token-{token})')]]"


def _public_file(example: str, tmp_path: Path, *, model_name: str = "gpt2") -> tuple[Path, dict[str, Any]]:
    """The bundled report's unit scores in the public result-file layout."""
    report = json.loads((REPO / "examples" / example / "report.json").read_text(encoding="utf-8"))
    dataset: dict[str, Any] = {}
    for variable in report["claims"]["variables"]:
        for unit in variable["units"]:
            key = _unit_key(unit["location"])
            position = _position_name(unit["location"]["position"])
            for cf, score in unit["scores"].items():
                entry = dataset.setdefault(cf, {"model_unit": {}})["model_unit"].setdefault(
                    key, {"metadata": {"layer": unit["location"]["layer"], "position": position}}
                )
                entry[variable["name"]] = {"average_score": score, "scores": [score]}
    payload = {
        "method_name": report["method"]["name"],
        "model_name": model_name,
        "task_name": report["task"]["name"],
        "dataset": dataset,
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path, report


def _slow_aggregate(units: list[dict[str, Any]], lower: bool) -> tuple[dict[int, float], float, float]:
    """Mean over counterfactual sets per unit, best unit per layer, mean and best over layers."""
    best = min if lower else max
    per_layer: dict[int, float] = {}
    for unit in units:
        mean = sum(unit["scores"].values()) / len(unit["scores"])
        layer = unit["location"]["layer"]
        per_layer[layer] = mean if layer not in per_layer else best(per_layer[layer], mean)
    values = [per_layer[layer] for layer in sorted(per_layer)]
    return per_layer, sum(values) / len(values), best(values)


@pytest.mark.parametrize(
    ("example", "metric"), [("causal-variable-ioi", "mse"), ("causal-variable-arithmetic", "iia")]
)
def test_imported_aggregates_equal_the_slow_loop_and_the_bundled_claims(
    tmp_path: Path, example: str, metric: str
) -> None:
    source, original = _public_file(example, tmp_path)
    result = import_mib_causal_results(source, tmp_path / "out")
    assert result.ok, result.findings
    [path] = result.written
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["profile"] == "mib-2025"
    assert report["model"]["id"] == "gpt2"
    claimed = {v["name"]: v for v in original["claims"]["variables"]}
    for variable in report["claims"]["variables"]:
        assert variable["metric"] == metric
        assert variable["better"] == ("lower" if metric == "mse" else "higher")
        assert len(variable["units"]) == len(claimed[variable["name"]]["units"])
        per_layer, average, best = _slow_aggregate(variable["units"], lower=metric == "mse")
        assert {int(k): v for k, v in variable["per_layer"].items()} == pytest.approx(per_layer, rel=1e-12)
        assert variable["average"] == pytest.approx(average, rel=1e-12)
        assert variable["best"] == pytest.approx(best, rel=1e-12)
        assert "highest" not in variable  # spec 1.1 names it by what it is
        bundled = claimed[variable["name"]]
        assert variable["per_layer"] == pytest.approx(bundled["per_layer"], rel=1e-12)
        bundled_best = bundled["best"] if "best" in bundled else bundled["highest"]  # a 1.0 bundle
        assert (variable["average"], variable["best"]) == pytest.approx(
            (bundled["average"], bundled_best), rel=1e-12
        )
        # Positions: the last token maps to the rule, the slot functions stay names.
        rules = {u["location"]["position"]["rule"] for u in variable["units"]}
        assert rules == {"last", "named"}


def test_verify_lists_what_the_imported_report_lacks(tmp_path: Path) -> None:
    source, _ = _public_file("causal-variable-ioi", tmp_path)
    [path] = import_mib_causal_results(source, tmp_path / "out").written
    verified = mibspec.verify(path, recompute=False)
    found = sorted((f.code, f.pointer, f.severity.value) for f in verified.findings)
    assert found == [
        ("A111", "/model", "error"),
        ("V110", "/claims/variables/0/units/0", "warning"),
        ("V110", "/claims/variables/0/units/1/location/position", "warning"),
        ("V110", "/claims/variables/1/units/0", "warning"),
        ("V110", "/claims/variables/1/units/1/location/position", "warning"),
        ("V110", "/task/dataset", "warning"),
    ]
    details = " ".join(f.message for f in verified.findings)
    assert "8 of 8 units of 'output_position' declare no featurizer" in details
    assert "slot_name_c" in details
    # The aggregates themselves agree with the unit scores: no C112.
    assert "C112" not in {f.code for f in verified.findings}


def test_a_tampered_aggregate_is_caught_by_the_rules(tmp_path: Path) -> None:
    source, _ = _public_file("causal-variable-arithmetic", tmp_path)
    [path] = import_mib_causal_results(source, tmp_path / "out").written
    report = json.loads(path.read_text(encoding="utf-8"))
    report["claims"]["variables"][0]["average"] += 0.05
    path.write_text(json.dumps(report), encoding="utf-8")
    findings = {(f.code, f.pointer) for f in mibspec.verify(path, recompute=False).findings}
    assert ("C112", "/claims/variables/0/average") in findings


@pytest.mark.recompute
def test_recompute_reports_every_missing_declaration_as_r104(tmp_path: Path) -> None:
    """The bundled report, recomputable as shipped, loses three featurizers and a position: the
    recompute stage names each gap (R104) at the pointers V110 warned about."""
    pytest.importorskip("torch")
    folder = tmp_path / "report"
    shutil.copytree(REPO / "examples" / "causal-variable-ioi", folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    units = report["claims"]["variables"][1]["units"]
    del units[2]["featurizer"], units[3]["featurizer"], units[5]["featurizer"]
    units[3]["location"]["position"] = {"rule": "named", "name": "io_position"}
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    verified = mibspec.verify(folder / "report.json", model_roots=[REPO / "examples" / "models"])
    by_code: dict[str, set[str]] = {}
    for finding in verified.findings:
        by_code.setdefault(finding.code, set()).add(finding.pointer)
    expected = {"/claims/variables/1/units/2", "/claims/variables/1/units/3/location/position"}
    assert by_code.get("V110") == expected
    assert by_code.get("R104") == expected
    assert not verified.valid
    report_result = verified.documents[0]
    assert report_result.kind == "report"
    assert report_result.stages[Stage.RECOMPUTE][0] is StageStatus.FAILED


def test_attention_head_units_and_class_names(tmp_path: Path) -> None:
    unit = "[[AtomicModelUnit(id='AttentionHead(Layer-2,Head-5,Token-correct_symbol)')]]"
    payload = {
        "method_name": "DAS",
        "model_name": "Qwen2ForCausalLM",
        "task_name": "4_answer_MCQA",
        "dataset": {
            cf: {"model_unit": {unit: {"answer_pointer": {"average_score": score}}}}
            for cf, score in (
                ("answerPosition_counterfactual_test", 0.5),
                ("symbol_counterfactual_test", 0.75),
            )
        },
    }
    source = tmp_path / "mcqa.json"
    source.write_text(json.dumps(payload), encoding="utf-8")
    [path] = import_mib_causal_results(source, tmp_path / "out").written
    assert path.parent.name == "4_answer_MCQA_Qwen2ForCausalLM_DAS_answer_pointer"
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["model"]["id"] == "Qwen/Qwen2.5-0.5B"
    [variable] = report["claims"]["variables"]
    [imported] = variable["units"]
    assert imported["location"] == {
        "layer": 2,
        "component": "attention_heads",
        "heads": [5],
        "position": {"rule": "named", "name": "correct_symbol"},
    }
    assert (variable["average"], variable["best"]) == (0.625, 0.625)
    assert variable["per_layer"] == {"2": 0.625}


def test_head_and_layer_from_metadata(tmp_path: Path) -> None:
    unit = "[[AtomicModelUnit(id='AttentionHead(Token-last_token)')]]"
    entry = {"metadata": {"layer": 3, "head": 7, "position": "last_token"}, "answer": {"average_score": 0.25}}
    payload = {
        "method_name": "DBM",
        "model_name": "gpt2",
        "task_name": "ARC_easy",
        "dataset": {"symbol_test": {"model_unit": {unit: entry}}},
    }
    source = tmp_path / "arc.json"
    source.write_text(json.dumps(payload), encoding="utf-8")
    [path] = import_mib_causal_results(source, tmp_path / "out").written
    [variable] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"]
    assert variable["units"][0]["location"] == {
        "layer": 3,
        "component": "attention_heads",
        "heads": [7],
        "position": {"rule": "last"},
    }


_UNIT = "[[AtomicModelUnit(id='ResidualStream(Layer-1,Token-last_token)')]]"


def _payload(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "method_name": "m",
        "model_name": "gpt2",
        "task_name": "arithmetic",
        "dataset": {"a_test": {"model_unit": {_UNIT: {"ones_carry": {"average_score": 0.5}}}}},
    }
    payload.update(changes)
    return payload


@pytest.mark.parametrize(
    ("payload", "code", "pointer"),
    [
        ([], "I101", ""),
        (_payload(dataset={}), "I101", ""),
        (_payload(method_name=3), "I101", "/method_name"),
        (_payload(model_name="gpt5"), "I102", "/model_name"),
        (_payload(dataset={"a_test": []}), "I101", "/dataset/a_test"),
        (
            _payload(dataset={"a/b": {"model_unit": {"Embedding(Layer-0)": {"x": {"average_score": 1}}}}}),
            "I101",
            "/dataset/a~1b/model_unit/Embedding(Layer-0)",
        ),
        (
            _payload(dataset={"a": {"model_unit": {_UNIT: {"x": {"average_score": "high"}}}}}),
            "I101",
            f"/dataset/a/model_unit/{_UNIT}/x/average_score",
        ),
        (
            _payload(
                dataset={"a": {"model_unit": {_UNIT: {"metadata": {"layer": 40}, "x": {"average_score": 1}}}}}
            ),
            "I101",
            f"/dataset/a/model_unit/{_UNIT}",
        ),
        (
            _payload(
                dataset={
                    "a": {"model_unit": {_UNIT: {"x": {"average_score": 1}}}},
                    "b": {"model_unit": {_UNIT.replace("Layer-1", "Layer-2"): {"x": {"average_score": 1}}}},
                }
            ),
            "I101",
            "/dataset",
        ),
        (
            _payload(dataset={"a": {"model_unit": {_UNIT: {"metadata": {}}}}}),
            "I101",
            f"/dataset/a/model_unit/{_UNIT}",
        ),
    ],
    ids=[
        "not-an-object",
        "no-dataset",
        "method-not-text",
        "unknown-model",
        "set-not-object",
        "unknown-unit-kind",
        "score-not-number",
        "layer-outside-model",
        "unit-missing-from-a-set",
        "unit-without-scores",
    ],
)
def test_malformed_files_give_located_codes(tmp_path: Path, payload: Any, code: str, pointer: str) -> None:
    source = tmp_path / "results.json"
    source.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    before = source.read_bytes()
    result = import_mib_causal_results(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [(code, pointer)]
    assert all(f.line is not None and f.line >= 1 for f in result.findings)
    assert not result.written
    assert not (tmp_path / "out").exists()
    assert source.read_bytes() == before


def test_truncated_and_non_finite_files_give_parse_codes(tmp_path: Path) -> None:
    source = tmp_path / "results.json"
    text = json.dumps(_payload())
    source.write_text(text[: len(text) // 2], encoding="utf-8")
    assert [f.code for f in import_mib_causal_results(source, tmp_path / "out").findings] == ["P101"]
    source.write_text(text.replace("0.5", "NaN"), encoding="utf-8")
    assert [f.code for f in import_mib_causal_results(source, tmp_path / "out").findings] == ["P103"]


@pytest.mark.slow
def test_cli_imports_and_verifies(tmp_path: Path) -> None:
    source, original = _public_file("causal-variable-arithmetic", tmp_path)
    variables = sorted(v["name"] for v in original["claims"]["variables"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-causal-results",
            str(source),
            "-o",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "A111" in done.stdout
    assert "V110" in done.stdout
    assert (tmp_path / "o" / "_".join(["arithmetic_gpt2_DAS", *variables]) / "report.json").is_file()


@pytest.mark.parametrize("separator", ["-", ":"])
@pytest.mark.parametrize("with_metadata", [True, False], ids=["metadata", "no-metadata"])
@pytest.mark.parametrize(
    ("unit", "location"),
    [
        (
            "ResidualStream(Layer{s}1,Token{s}last_token)",
            {"layer": 1, "component": "residual_post", "position": {"rule": "last"}},
        ),
        (
            "AttentionHead(Layer{s}2,Head{s}3,Token{s}all)",
            {
                "layer": 2,
                "component": "attention_heads",
                "heads": [3],
                "position": {"rule": "all"},  # MIB's IOI position: every token
            },
        ),
    ],
    ids=["residual", "head"],
)
def test_unit_ids_parse_in_both_separator_forms(
    tmp_path: Path, separator: str, with_metadata: bool, unit: str, location: dict[str, Any]
) -> None:
    unit_id = unit.format(s=separator)
    entry: dict[str, Any] = {"ones_carry": {"average_score": 0.5}}
    if with_metadata:
        name = {"last": "last_token", "all": "all"}[location["position"]["rule"]]
        entry["metadata"] = {"layer": location["layer"], "position": name}
    for key in (f"[[AtomicModelUnit(id='{unit_id}')]]", unit_id):
        source = tmp_path / "results.json"
        payload = _payload(dataset={"a_test": {"model_unit": {key: entry}}})
        source.write_text(json.dumps(payload), encoding="utf-8")
        result = import_mib_causal_results(source, tmp_path / "out")
        assert result.findings == []
        [path] = result.written
        [variable] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"]
        assert variable["units"][0]["location"] == location


def test_a_unit_id_without_its_layer_is_still_refused(tmp_path: Path) -> None:
    key = "ResidualStream(Layer;1,Token:last_token)"
    source = tmp_path / "results.json"
    source.write_text(json.dumps(_payload(dataset={"a": {"model_unit": {key: {"x": {"average_score": 1}}}}})))
    result = import_mib_causal_results(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I101", f"/dataset/a/model_unit/{key}")]


# --------------------------------------------------------------------------- IOI Token:all units


def _key(*heads: tuple[int, int], separator: str = ":") -> str:
    s = separator
    atoms = ", ".join(
        f"AtomicModelUnit(id='AttentionHead(Layer{s}{layer},Head{s}{h},Token{s}all)')" for layer, h in heads
    )
    return f"[[{atoms}]]"


def _ioi_file(tmp_path: Path, units: dict[str, float]) -> Path:
    """An IOI result file scoring each unit key on two counterfactual sets (the second set
    scores a unit 0.25 higher)."""
    dataset: dict[str, Any] = {}
    for offset, cf in ((0.0, "s1_io_flip_test"), (0.25, "s2_io_flip_test")):
        block = dataset.setdefault(cf, {"model_unit": {}})["model_unit"]
        for key, score in units.items():
            first = key.split("AttentionHead(")[1]
            layer, head = (int(part.split(":")[-1].split("-")[-1]) for part in first.split(",")[:2])
            block[key] = {
                "metadata": {"layer": layer, "head": head, "position": "all"},
                "output_token": {"average_score": score + offset, "scores": [score + offset]},
            }
    payload = {
        "method_name": "submission",
        "model_name": "GPT2LMHeadModel",
        "task_name": "ioi_task",
        "dataset": dataset,
    }
    path = tmp_path / "ioi_output_token.json"
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


@pytest.mark.parametrize("separator", [":", "-"])
def test_token_all_imports_as_the_rule_all(tmp_path: Path, separator: str) -> None:
    """One head per unit, and two heads of one layer scored jointly: each unit's location reads
    its heads at every token."""
    one = _key((9, 6), separator=separator)
    joint = _key((7, 3), (7, 9), separator=separator)
    source = _ioi_file(tmp_path, {one: 1.5, joint: 0.5})
    result = import_mib_causal_results(source, tmp_path / "out")
    assert result.findings == []
    [path] = result.written
    [variable] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"]
    assert [(u["id"], u["location"]) for u in variable["units"]] == [
        (joint, {"layer": 7, "component": "attention_heads", "heads": [3, 9], "position": {"rule": "all"}}),
        (one, {"layer": 9, "component": "attention_heads", "heads": [6], "position": {"rule": "all"}}),
    ]
    # IOI is scored by squared error: per layer and best are minima of the per-unit means
    assert variable["per_layer"] == {"7": 0.625, "9": 1.625}
    assert (variable["average"], variable["best"]) == (1.125, 0.625)


def test_a_unit_joining_two_positions_is_refused(tmp_path: Path) -> None:
    key = (
        "[[AtomicModelUnit(id='ResidualStream(Layer:4,Token:all)'), "
        "AtomicModelUnit(id='ResidualStream(Layer:4,Token:last_token)')]]"
    )
    payload = {
        "method_name": "submission",
        "model_name": "gpt2",
        "task_name": "ioi_task",
        "dataset": {
            "s1_io_flip_test": {
                "model_unit": {
                    key: {
                        "metadata": {"layer": 4, "position": "all"},
                        "output_token": {"average_score": 0.5},
                    }
                }
            }
        },
    }
    source = tmp_path / "results.json"
    source.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    result = import_mib_causal_results(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [
        ("I101", f"/dataset/s1_io_flip_test/model_unit/{key}")
    ]
    assert "positions 'all, last_token'" in result.findings[0].message
    assert not result.written
