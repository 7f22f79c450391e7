"""The row format of counterfactual datasets (datasets.md DS-2, DS-3) in the rules stage (V112).

Anchors: the rows the reference generators write for every task (which the spec describes)
pass; each hostile row below departs from DS-2/DS-3 in the one way its name says, and is
refused with V112 without recomputation (a row ``{}`` passed ``--no-recompute`` before).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.reference_impl.datasets import generate
from mibspec.reference_impl.datasets.rows import fill_template, row_problems

REPO = Path(__file__).resolve().parents[3]
CF = ["random_names", "abc"]


def _row() -> dict[str, Any]:
    def prompt(name: str, answer: str | None) -> dict[str, Any]:
        return {
            "prompt": f"Then {name} gave it to",
            "answer": answer,
            "variables": {"output_token": answer},
            "slots": {"name": name},
            "template": "Then {name} gave it to",
        }

    return {
        "id": "ioi-test-000000",
        "base": prompt("Mary", " John"),
        "counterfactuals": {"random_names": prompt("Anna", " Bob"), "abc": prompt("Carl", None)},
        "interventions": {"random_names": {"output_token": " Bob"}, "abc": {}},
    }


@pytest.mark.parametrize("task", ["ioi", "arithmetic", "mcqa", "ravel"])
def test_the_generators_rows_have_the_row_format(task: str) -> None:
    dataset = generate(task, "test", n_rows=12, seed=3)
    cf_types = list(dataset.metadata["counterfactual_types"])
    for row in dataset.rows:
        assert row_problems(row, cf_types) == [], row["id"]


def _without(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda row: row.pop(key)


HOSTILE: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "empty-row": (lambda row: row.clear(), ""),
    "no-id": (_without("id"), ""),
    "extra-key": (lambda row: row.update(weight=1), ""),
    "id-not-a-string": (lambda row: row.update(id=7), "/id"),
    "base-not-an-object": (lambda row: row.update(base="Mary"), "/base"),
    "base-answer-null": (lambda row: row["base"].update(answer=None), "/base/answer"),
    "prompt-not-a-string": (lambda row: row["base"].update(prompt=["x"]), "/base/prompt"),
    "slot-not-a-string": (lambda row: row["base"]["slots"].update(name=3), "/base/slots"),
    "template-not-the-prompt": (
        lambda row: row["base"].update(template="Then {name} gave"),
        "/base/template",
    ),
    "template-attribute": (lambda row: row["base"].update(template="{name.__class__}"), "/base/template"),
    "template-padding": (lambda row: row["base"].update(template="{name:>1000000000}"), "/base/template"),
    "template-index": (lambda row: row["base"].update(template="{0}"), "/base/template"),
    "template-unknown-slot": (lambda row: row["base"].update(template="{place}"), "/base/template"),
    "template-unbalanced": (lambda row: row["base"].update(template="Then {name"), "/base/template"),
    "counterfactual-missing": (lambda row: row["counterfactuals"].pop("abc"), "/counterfactuals"),
    "counterfactual-undeclared": (lambda row: row["counterfactuals"].update(other={}), "/counterfactuals"),
    "counterfactual-prompt-keys": (
        lambda row: row["counterfactuals"]["abc"].pop("slots"),
        "/counterfactuals/abc",
    ),
    "interventions-missing-type": (lambda row: row["interventions"].pop("abc"), "/interventions"),
    "interventions-not-objects": (
        lambda row: row["interventions"].update(abc=[" Bob"]),
        "/interventions/abc",
    ),
    "choices-without-key": (lambda row: row.update(choices=[{"label": "A", "text": "x"}]), ""),
    "answer-key-not-a-label": (
        lambda row: row.update(choices=[{"label": "A", "text": "x"}], answer_key="B"),
        "/answer_key",
    ),
    "answer-key-not-the-answer": (
        lambda row: row.update(choices=[{"label": "A", "text": "x"}], answer_key="A"),
        "/base/answer",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_each_departure_from_the_row_format_is_named(name: str) -> None:
    change, pointer = HOSTILE[name]
    row = _row()
    assert row_problems(row, CF) == []
    change(row)
    problems = row_problems(row, CF)
    assert problems
    assert pointer in [p for p, _ in problems], problems


def test_a_template_is_filled_without_evaluating_anything() -> None:
    assert fill_template("{a} and {{b}}", {"a": "x"}) == "x and {b}"
    tracemalloc.start()
    for template in ("{a:>1000000000}", "{a!r}", "{a.upper}", "{a[0]}"):
        with pytest.raises(ValueError, match="not a slot name"):
            fill_template(template, {"a": "x"})
    assert tracemalloc.get_traced_memory()[1] < 10 * 1024 * 1024
    tracemalloc.stop()


def _repin(document: Path, name: str) -> None:
    data = (document.parent / name).read_bytes()
    doc = json.loads(document.read_text(encoding="utf-8"))
    for artifact in doc["artifacts"]:
        if artifact["path"] == name:
            artifact["bytes"], artifact["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    document.write_text(json.dumps(doc), encoding="utf-8")


def _with_rows(tmp_path: Path, change: Callable[[list[dict[str, Any]]], Any]) -> Path:
    """A copy of the circuit example whose dataset rows are changed (every file re-pinned)."""
    folder = tmp_path / "circuit"
    shutil.copytree(REPO / "examples" / "circuit", folder)
    rows = [json.loads(line) for line in (folder / "dataset.jsonl").read_bytes().splitlines()]
    change(rows)
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    (folder / "dataset.jsonl").write_bytes(data)
    meta = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    meta["artifacts"][0]["rows"] = len(rows)
    (folder / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")
    _repin(folder / "dataset.json", "dataset.jsonl")
    _repin(folder / "report.json", "dataset.json")
    return folder


def _with_row_3(tmp_path: Path, change: Callable[[dict[str, Any]], Any]) -> Path:
    return _with_rows(tmp_path, lambda rows: change(rows[2]))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda row: row.clear(), "row 3 (None) at /: a row holds exactly"),
        (lambda row: row["base"]["variables"].clear() or row["base"].pop("variables"), "lacks variables"),
    ],
)
def test_a_malformed_row_is_v112_without_recomputation(
    tmp_path: Path, change: Callable[[dict[str, Any]], Any], said: str
) -> None:
    folder = _with_row_3(tmp_path, change)
    result = mibspec.verify(folder / "report.json", recompute=False)
    findings = [(f.code, f.pointer, f.message) for doc in result.documents for f in doc.findings]
    v112 = [f for f in findings if f[0] == "V112"]
    assert [(code, pointer) for code, pointer, _ in v112] == [("V112", "/examples")]
    assert said in v112[0][2]
    assert not result.valid  # the report's dataset is not conformant (A107)


def test_many_malformed_rows_are_listed_ten_at_a_time(tmp_path: Path) -> None:
    def change(rows: list[dict[str, Any]]) -> None:
        rows.extend(copy.deepcopy(rows[:4]))
        for i, row in enumerate(rows):
            row["id"] = f"row-{i}"
            row.pop("interventions")

    folder = _with_rows(tmp_path, change)
    result = mibspec.verify(folder / "dataset.json", recompute=False)
    v112 = [f for f in result.findings if f.code == "V112"]
    assert len(v112) == 11
    assert v112[-1].message == "4 more problem(s) not listed"
