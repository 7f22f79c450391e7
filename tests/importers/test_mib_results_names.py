"""Results imports keep every input: names carry what tells two inputs apart, two inputs
under one name are refused, and a report another source wrote is never replaced (I126,
SPEC.md I-7). An unpinned import says which option to pass and where the commit is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mibspec.importers import import_mib_causal_results, import_mib_circuit_results

GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
UNIT = "[[AtomicModelUnit(id='ResidualStream(Layer-3,Token-last_token)')]]"


def _causal_file(path: Path, variable: str, score: float = 0.5, model: str = "gpt2") -> Path:
    """A result file as MIB writes one: one variable, the method named ``submission``."""
    payload = {
        "method_name": "submission",
        "model_name": model,
        "task_name": "4_answer_MCQA",
        "dataset": {
            cf: {
                "model_unit": {
                    UNIT: {
                        "metadata": {"layer": 3, "position": "last_token"},
                        variable: {"average_score": score},
                    }
                }
            }
            for cf in ("answerPosition_counterfactual_test", "symbol_counterfactual_test")
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _circuit_file(path: Path, method: str) -> Path:
    curve = {"edge_counts": [float(int(k * 32491)) for k in GRID], "faithfulness": [0.5] * 9 + [1.0]}
    results = [{"model_id": "gpt2", "scores": {"ioi": {"CPR": curve, "CMD": curve}}}]
    path.write_text(json.dumps({"method_name": method, "results": results}), encoding="utf-8")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_three_variables_give_three_reports(tmp_path: Path) -> None:
    variables = ["answer", "answer_pointer", "answer_pointer-answer"]  # the last a joint target
    sources = [_causal_file(tmp_path / f"r{i}.json", v) for i, v in enumerate(variables)]
    result = import_mib_causal_results(sources, tmp_path / "out")
    assert result.ok, result.findings
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in result.written]
    assert sorted(r["claims"]["variables"][0]["name"] for r in reports) == sorted(variables)
    assert sorted(p.parent.name for p in result.written) == sorted(
        f"4_answer_MCQA_gpt2_submission_{v}" for v in variables
    )


def test_two_files_of_one_variable_are_refused_and_nothing_written(tmp_path: Path) -> None:
    first = _causal_file(tmp_path / "a" / "results.json", "answer", 0.5)
    second = _causal_file(tmp_path / "b" / "other.json", "answer", 0.7)
    result = import_mib_causal_results([first, second], tmp_path / "out")
    assert [f.code for f in result.findings] == ["I126"]
    assert "results.json" in result.findings[0].message
    assert "other.json" in result.findings[0].message
    assert result.written == []
    assert not (tmp_path / "out").exists()


def test_a_report_from_another_source_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _causal_file(tmp_path / "first.json", "answer", 0.5)
    assert import_mib_causal_results(first, out).ok
    before = _files(out)
    second = _causal_file(tmp_path / "second.json", "answer", 0.9)
    result = import_mib_causal_results(second, out)
    assert [f.code for f in result.findings] == ["I126"]
    message = result.findings[0].message
    assert "first.json" in message
    assert "second.json" in message
    assert _files(out) == before


def test_the_same_source_imported_again_replaces_its_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    source = _causal_file(tmp_path / "results.json", "answer", 0.5)
    assert import_mib_causal_results(source, out).ok
    _causal_file(source, "answer", 0.25)
    revision = "0" * 40
    from mibspec.importers import ImportOptions

    [path] = import_mib_causal_results(source, out, ImportOptions(model_revision=revision)).written
    report = json.loads(path.read_text(encoding="utf-8"))
    assert report["model"]["revision"] == revision
    assert report["claims"]["variables"][0]["best"] == 0.25


def test_a_folder_holding_other_files_is_not_written_into(tmp_path: Path) -> None:
    out = tmp_path / "out"
    source = _causal_file(tmp_path / "results.json", "answer")
    (out / "4_answer_MCQA_gpt2_submission_answer").mkdir(parents=True)
    mine = out / "4_answer_MCQA_gpt2_submission_answer" / "report.json"
    mine.write_text('{"kept": true}', encoding="utf-8")
    result = import_mib_causal_results(source, out)
    assert [f.code for f in result.findings] == ["I126"]
    assert mine.read_text(encoding="utf-8") == '{"kept": true}'


def test_circuit_results_of_two_methods_are_both_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    sources = [_circuit_file(tmp_path / f"{m}.json", m) for m in ("eap", "eap-ig")]
    assert import_mib_circuit_results(sources[0], out).ok
    result = import_mib_circuit_results(sources[1], out)  # a second run into the same folder
    assert result.ok, result.findings
    assert sorted(p.name for p in out.iterdir()) == ["ioi_gpt2_eap", "ioi_gpt2_eap-ig"]


def test_cli_takes_several_files_and_names_the_revision_to_pass(tmp_path: Path) -> None:
    commit = "1234567890abcdef1234567890abcdef12345678"
    cache = tmp_path / "hf"
    (cache / "models--Qwen--Qwen2.5-0.5B" / "refs").mkdir(parents=True)
    (cache / "models--Qwen--Qwen2.5-0.5B" / "refs" / "main").write_text(commit, encoding="ascii")
    sources = [
        _causal_file(tmp_path / f"r{v}.json", v, model="qwen2.5") for v in ("answer", "answer_pointer")
    ]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-causal-results",
            *map(str, sources),
            "-o",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"},
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert len(list((tmp_path / "out").iterdir())) == 2
    a111 = [line for line in done.stdout.splitlines() if " A111 error:" in line]
    assert len(a111) == 2
    assert all("--model-revision" in line and "Qwen/Qwen2.5-0.5B" in line for line in a111)
    assert done.stdout.count(commit) == 2
