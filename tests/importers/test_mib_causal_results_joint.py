"""MIB's IOI result files whose one unit joins heads of several layers, imported as a joint
unit (spec 1.2, SPEC.md CV-7 and CV-8).

The file is in the layout of MIB's IOI evaluation (``ioi_evaluate_submission.py`` runs
CausalAbstraction's ``PatchAttentionHeads`` over every submitted head at once): one key listing
every head, ``[[AtomicModelUnit(id='AttentionHead(Layer:l,Head:h,Token:all)'), ...]]``, in the
order the submission's featurizer files were found, with ``metadata`` naming the first listed
head's layer, head and position only. The expected sites are written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.importers import import_mib_causal_results

#: The heads as MIB lists them (not sorted): three heads of layers 7 and 8.
HEADS = ((8, 6), (7, 9), (7, 3))
SETS = {"s1_io_flip_test": 0.25, "s2_io_flip_test": 0.75}


def _key(heads: tuple[tuple[int, int], ...], separator: str = ":", token: str = "all") -> str:
    s = separator
    return (
        "[["
        + ", ".join(
            f"AtomicModelUnit(id='AttentionHead(Layer{s}{layer},Head{s}{head},Token{s}{token})')"
            for layer, head in heads
        )
        + "]]"
    )


def _file(tmp_path: Path, key: str, metadata: dict[str, Any] | None = None, model: str = "gpt2") -> Path:
    first_layer, first_head = HEADS[0]
    meta = metadata or {"layer": first_layer, "head": first_head, "position": "all"}
    payload = {
        "method_name": "submission",
        "model_name": model,
        "task_name": "ioi_task",
        "dataset": {
            cf: {
                "model_unit": {
                    key: {
                        "metadata": meta,
                        "output_token": {"average_score": score, "scores": [score, score]},
                    }
                }
            }
            for cf, score in SETS.items()
        },
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "ioi_output_token.json"
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def _units(path: Path) -> list[dict[str, Any]]:
    [variable] = json.loads(path.read_text(encoding="utf-8"))["claims"]["variables"]
    units: list[dict[str, Any]] = variable["units"]
    return units


@pytest.mark.parametrize("separator", [":", "-"])
def test_heads_of_two_layers_import_as_one_joint_unit(tmp_path: Path, separator: str) -> None:
    key = _key(HEADS, separator)
    result = import_mib_causal_results(_file(tmp_path, key), tmp_path / "out")
    assert result.findings == []
    [path] = result.written
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["spec_version"] == "1.2"
    [unit] = _units(path)
    assert unit["id"] == key
    # the lowest (layer, head) is the location; the others follow by (layer, head)
    assert unit["location"] == {
        "layer": 7,
        "component": "attention_heads",
        "heads": [3],
        "position": {"rule": "all"},
    }
    assert unit["joint_sites"] == [
        {"layer": 7, "component": "attention_heads", "heads": [9]},
        {"layer": 8, "component": "attention_heads", "heads": [6]},
    ]
    assert unit["scores"] == SETS
    [variable] = document["claims"]["variables"]
    # one unit, counted under its location's layer: the mean of its two sets
    assert variable["per_layer"] == {"7": 0.5}
    assert (variable["average"], variable["best"]) == (0.5, 0.5)


def test_the_imported_joint_unit_verifies_with_only_what_results_lack(tmp_path: Path) -> None:
    """No V104, V105 or V113: the joint unit is well formed. What is missing is what every
    imported result file lacks: the model's pin (A111) and the featurizers and dataset (V110)."""
    [path] = import_mib_causal_results(_file(tmp_path, _key(HEADS)), tmp_path / "out").written
    verified = mibspec.verify(path, recompute=False)
    found = sorted((f.code, f.pointer, f.severity.value) for f in verified.findings)
    assert found == [
        ("A111", "/model", "error"),
        ("V110", "/claims/variables/0/units/0", "warning"),
        ("V110", "/task/dataset", "warning"),
    ]


@pytest.mark.parametrize(
    "metadata",
    [{"layer": 0, "head": 0, "position": "all"}, {"layer": 11, "position": "last_token"}, {}],
    ids=["another-layer", "another-position", "none"],
)
def test_metadata_changes_nothing_in_a_joint_unit(tmp_path: Path, metadata: dict[str, Any]) -> None:
    key = _key(HEADS)
    [reference] = import_mib_causal_results(_file(tmp_path / "a", key), tmp_path / "a" / "out").written
    [changed] = import_mib_causal_results(
        _file(tmp_path / "b", key, metadata), tmp_path / "b" / "out"
    ).written
    assert _units(changed) == _units(reference)
    left = json.loads(reference.read_text(encoding="utf-8"))["claims"]
    right = json.loads(changed.read_text(encoding="utf-8"))["claims"]
    assert left == right


def test_heads_of_one_layer_stay_one_location_listing_them(tmp_path: Path) -> None:
    """As in spec 1.1: a unit of one layer is one location, its heads in the key's order."""
    key = _key(((7, 9), (7, 3)))
    metadata = {"layer": 7, "head": 9, "position": "all"}
    [path] = import_mib_causal_results(_file(tmp_path, key, metadata), tmp_path / "out").written
    [unit] = _units(path)
    assert unit["location"] == {
        "layer": 7,
        "component": "attention_heads",
        "heads": [9, 3],
        "position": {"rule": "all"},
    }
    assert "joint_sites" not in unit


def _refused(tmp_path: Path, key: str, model: str = "gpt2") -> tuple[str, str, str]:
    source = _file(tmp_path, key, model=model)
    result = import_mib_causal_results(source, tmp_path / "out")
    [finding] = result.findings
    assert finding.line is not None
    assert key[:30] in source.read_text(encoding="utf-8").splitlines()[finding.line - 1]
    assert not result.written
    assert not (tmp_path / "out").exists()
    return finding.code, finding.pointer, finding.message


def test_a_joint_unit_of_two_positions_is_refused_at_its_key(tmp_path: Path) -> None:
    key = _key(HEADS[:2]).replace("Token:all)')]]", "Token:last_token)')]]")
    code, pointer, message = _refused(tmp_path, key)
    assert (code, pointer) == ("I101", f"/dataset/s1_io_flip_test/model_unit/{key}")
    assert "positions 'all, last_token'" in message


def test_a_joint_unit_of_two_components_is_refused_at_its_key(tmp_path: Path) -> None:
    key = (
        "[[AtomicModelUnit(id='AttentionHead(Layer:7,Head:3,Token:all)'), "
        "AtomicModelUnit(id='ResidualStream(Layer:8,Token:all)')]]"
    )
    code, pointer, message = _refused(tmp_path, key)
    assert (code, pointer) == ("I101", f"/dataset/s1_io_flip_test/model_unit/{key}")
    assert "AttentionHead, ResidualStream" in message


@pytest.mark.parametrize(
    ("heads", "what"),
    [(((7, 3), (8, 12)), "heads '12'"), (((7, 3), (12, 0)), "layer '12'")],
    ids=["head-12-of-12", "layer-12-of-12"],
)
def test_a_joint_site_outside_the_model_is_refused(tmp_path: Path, heads: Any, what: str) -> None:
    key = _key(heads)
    code, pointer, message = _refused(tmp_path, key)
    assert (code, pointer) == ("I101", f"/dataset/s1_io_flip_test/model_unit/{key}")
    assert f"{what} is not in the model" in message or f"{what} are not in the model" in message


def test_a_joint_unit_atom_without_its_head_is_refused(tmp_path: Path) -> None:
    key = (
        "[[AtomicModelUnit(id='AttentionHead(Layer:7,Head:3,Token:all)'), "
        "AtomicModelUnit(id='AttentionHead(Layer:8,Token:all)')]]"
    )
    code, pointer, message = _refused(tmp_path, key)
    assert (code, pointer) == ("I101", f"/dataset/s1_io_flip_test/model_unit/{key}")
    assert "must name its layer, token, head" in message


def test_a_head_listed_twice_is_v113_after_import(tmp_path: Path) -> None:
    """The import keeps what the file says; the repeated head writes what the location writes,
    which the rules refuse where it stands."""
    key = _key(((7, 3), (8, 6), (7, 3)))
    result = import_mib_causal_results(_file(tmp_path, key), tmp_path / "out")
    assert result.findings == []
    [path] = result.written
    [unit] = _units(path)
    assert unit["joint_sites"][0] == {"layer": 7, "component": "attention_heads", "heads": [3]}
    verified = mibspec.verify(path, recompute=False)
    v113 = [f for f in verified.findings if f.code == "V113"]
    assert [(f.pointer, f.severity.value) for f in v113] == [
        ("/claims/variables/0/units/0/joint_sites/0", "error")
    ]
    assert "/claims/variables/0/units/0/location writes too" in v113[0].message
    assert not verified.valid
