"""Counts and places a document declares, checked without recomputation: a report's example
count against its dataset (D105, SPEC.md D-5) and a shortcut dataset's patches against its
images (B102, B-3). Each passed ``--no-recompute`` before; the expected codes and pointers
are written from the spec, the dataset sizes read from the example files themselves."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mibspec

REPO = Path(__file__).resolve().parents[3]


def _copy(tmp_path: Path, example: str, document: str, change: Callable[[dict[str, Any]], None]) -> Path:
    folder = tmp_path / example
    shutil.copytree(REPO / "examples" / example, folder)
    path = folder / document
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _found(path: Path) -> list[tuple[str, str]]:
    result = mibspec.verify(path, recompute=False)
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings if doc.path == str(path)]


def _rows(folder: Path) -> int:
    dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    return next(a["rows"] for a in dataset["artifacts"] if a["id"] == dataset["examples"])


@pytest.mark.parametrize("count", [2**64, 0, "rows+1", "rows-1"])
def test_a_task_example_count_other_than_the_datasets_is_d105(tmp_path: Path, count: Any) -> None:
    rows = _rows(REPO / "examples" / "circuit")
    value = {"rows+1": rows + 1, "rows-1": rows - 1}.get(count, count)
    path = _copy(tmp_path, "circuit", "report.json", lambda d: d["task"].update(n_examples=value))
    assert _found(path) == [("D105", "/task/n_examples")]


def test_a_unit_scoring_more_pairs_than_the_dataset_has_is_d105(tmp_path: Path) -> None:
    rows = _rows(REPO / "examples" / "causal-variable-arithmetic")

    def change(data: dict[str, Any]) -> None:
        data["claims"]["variables"][0]["units"][1]["n_examples"]["ones_carry"] = rows + 1

    path = _copy(tmp_path, "causal-variable-arithmetic", "report.json", change)
    assert _found(path) == [("D105", "/claims/variables/0/units/1/n_examples/ones_carry")]


@pytest.mark.parametrize(
    ("locations", "expected"),
    [
        ([[], [0, 0]], [("S116", "/perturbation/locations/0")]),
        ([[1], [0, 0]], [("S116", "/perturbation/locations/0")]),
        ([[0, 0, 0], [0, 0]], [("S116", "/perturbation/locations/0")]),
        ([[0, 0]], [("B102", "/perturbation/locations")]),
        ([[0, 0], [27, 0]], [("B102", "/perturbation/locations/1")]),
        ([[0, 0], [0, 10**30]], [("B102", "/perturbation/locations/1")]),
    ],
)
def test_shortcut_patch_locations_fit_the_images(
    tmp_path: Path, locations: list[list[int]], expected: list[tuple[str, str]]
) -> None:
    def change(data: dict[str, Any]) -> None:
        data["n_classes"] = 2
        data["perturbation"]["locations"] = locations
        data["perturbation"]["kernels"]["shape"][0] = 2

    path = _copy(tmp_path, "saliency-digits", "dataset.json", change)
    found = [f for f in _found(path) if f[0] in ("S116", "B102")]
    assert found == expected


def test_the_example_patches_fit(tmp_path: Path) -> None:
    data = json.loads((REPO / "examples" / "saliency-digits" / "dataset.json").read_text(encoding="utf-8"))
    height = data["image_shape"][1]
    side = int(data["perturbation"]["patch_size"] ** 0.5)
    assert all(row + side <= height for row, _ in data["perturbation"]["locations"])
    assert _found(REPO / "examples" / "saliency-digits" / "dataset.json") == []
