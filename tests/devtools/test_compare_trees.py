"""Cross-machine comparison of generated folders: floats within a tolerance, the rest exact."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from mibspec.core.sidecars import write_safetensors
from mibspec_dev.compare_trees import DEFAULT_REL, compare_trees, compare_values


def test_values_agree_within_the_relative_tolerance() -> None:
    value = 0.45470454384196357
    assert compare_values({"x": [value]}, {"x": [math.nextafter(value, 1.0)]}) == []
    assert compare_values({"x": [value]}, {"x": [value * (1 + 100 * DEFAULT_REL)]}) == ["/x/0"]


def test_everything_but_floats_must_match_exactly() -> None:
    assert compare_values({"n": 3}, {"n": 4}) == ["/n"]
    assert compare_values({"b": True}, {"b": 1}) == ["/b"]
    assert compare_values({"s": "a"}, {"s": "b"}) == ["/s"]
    assert compare_values({"a": 1, "b": 2}, {"b": 2, "a": 1}) == ["/"]  # key order is part of the bytes
    assert compare_values([1.0, 2.0], [1.0]) == ["/"]
    assert compare_values({"a/b": {"c~": 1.0}}, {"a/b": {"c~": 2.0}}) == ["/a~1b/c~0"]
    assert compare_values({"x": float("nan")}, {"x": float("nan")}) == []


def test_hashes_are_left_to_the_files_they_pin() -> None:
    assert compare_values({"sha256": "0" * 64, "size": 1}, {"sha256": "f" * 64, "size": 1}) == []


def _tree(root: Path, value: float, tensor: float) -> Path:
    root.mkdir()
    (root / "report.json").write_text(json.dumps({"claims": {"cpr": value}}))
    (root / "rows.jsonl").write_text(json.dumps({"m": value}) + "\n" + json.dumps({"m": 1.0}) + "\n")
    write_safetensors(root / "circuit.safetensors", {"scores": np.full((2, 3), tensor)})
    np.save(root / "map.npy", np.full((4,), tensor), allow_pickle=False)
    (root / "README.md").write_text(f"value {value}\n")
    os.symlink("report.json", root / "link.json")
    return root


def test_trees_differing_in_the_last_bits_agree(tmp_path: Path) -> None:
    x = 0.1 + 0.2
    want = _tree(tmp_path / "a", x, x)
    have = _tree(tmp_path / "b", x, math.nextafter(x, 1.0))
    (have / "report.json").write_text(json.dumps({"claims": {"cpr": math.nextafter(x, 1.0)}}))
    assert compare_trees(want, have) == []
    assert compare_trees(want, have, exact=True) == ["circuit.safetensors", "map.npy", "report.json"]


def test_trees_name_each_real_difference(tmp_path: Path) -> None:
    want = _tree(tmp_path / "a", 0.25, 0.5)
    have = _tree(tmp_path / "b", 0.26, 0.51)
    (have / "extra.json").write_text("{}")
    (have / "link.json").unlink()
    os.symlink("rows.jsonl", have / "link.json")
    assert compare_trees(want, have) == [
        "README.md",
        "circuit.safetensors",
        "extra.json",
        "link.json",
        "map.npy",
        "report.json",
        "rows.jsonl",
    ]
