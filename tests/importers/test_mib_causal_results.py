"""MIB's IOI result files: units at every token (``Token:all``) and joint units.

The files are written here in the layout of MIB's IOI evaluation (``ioi_evaluate_submission.py``
runs CausalAbstraction's ``PatchAttentionHeads``): one entry per model-unit list, keyed by the
list's text ``[[AtomicModelUnit(id='AttentionHead(Layer:l,Head:h,Token:all)'), ...]]``, with
``metadata`` naming the first unit's layer, head and position only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mibspec.importers import import_mib_causal_results


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


def test_a_unit_joining_heads_of_several_layers_is_refused_at_its_key(tmp_path: Path) -> None:
    """MIB's IOI evaluation scores all submitted heads as one unit; its metadata names the first
    head's layer only. Read by the metadata, the other layers' heads would be filed under the
    first layer: the unit is refused instead, located in the file, and nothing is written."""
    key = _key((7, 3), (8, 6), (9, 6))
    source = _ioi_file(tmp_path, {key: 0.75})
    result = import_mib_causal_results(source, tmp_path / "out")
    [finding] = result.findings
    assert finding.code == "I101"
    assert finding.pointer == f"/dataset/s1_io_flip_test/model_unit/{key}"
    assert finding.line is not None
    assert finding.column is not None
    assert key[:30] in source.read_text(encoding="utf-8").splitlines()[finding.line - 1]
    assert "layers '7, 8, 9'" in finding.message
    assert "cannot be imported" in finding.message
    assert not result.written
    assert not (tmp_path / "out").exists()


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
