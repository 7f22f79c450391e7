"""Row format, determinism and I/O of the counterfactual dataset generators (no torch)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.reference_impl.datasets import (
    SPLITS,
    TASKS,
    Dataset,
    dumps_jsonl,
    generate,
    read_jsonl,
    write_dataset,
)

EXPECTED_TYPES = {
    "ioi": {
        "abc", "random_names", "io_s1_flip", "io_s2_flip", "io_s1_flip_io_s2_flip",
        "random_names_io_s1_flip", "random_names_io_s2_flip", "random_names_io_s1_flip_io_s2_flip",
    },
    "arithmetic": {
        "random_operands", "ones_digit_operand_1", "ones_digit_operand_2", "tens_digit_operand_1",
        "tens_digit_operand_2", "ones_carry", "tens_carry",
    },
    "mcqa": {
        "noun", "color", "noun_color", "answer_position", "symbol", "random_letter",
        "answer_position_random_letter", "answer_position_symbol", "answer_position_color",
    },
    "ravel": {"attribute", "same_attribute", "mention"},
}  # fmt: skip
EXPECTED_VARIABLES = {
    "ioi": {"output_token", "output_position"},
    "arithmetic": {"operand_1", "operand_2", "ones_carry", "result"},
    "mcqa": {"answer_pointer", "answer"},
    "ravel": {"Country", "Continent", "Language", "queried_attribute"},
}
INTERVENED = {
    "ioi": {"output_token", "output_position"},
    "arithmetic": {"ones_carry"},
    "mcqa": {"answer_pointer", "answer"},
    "ravel": {"Country", "Continent", "Language"},
}
# Counterfactual types whose causal model defines no output.
NULL_ANSWER = {("ioi", "abc"), ("ravel", "mention")}


def _check_prompt(obj: Any, task: str, *, base: bool, cf_type: str = "") -> None:
    assert set(obj) == {"prompt", "answer", "variables", "slots", "template"}
    assert isinstance(obj["prompt"], str)
    assert obj["prompt"]
    assert obj["prompt"] == obj["template"].format(**obj["slots"])
    assert all(isinstance(v, str) for v in obj["slots"].values())
    assert set(obj["variables"]) == EXPECTED_VARIABLES[task]
    if not base and (task, cf_type) in NULL_ANSWER:
        assert obj["answer"] is None
    else:
        answer = obj["answer"]
        assert isinstance(answer, str)
        # One word after a single space: the continuation appended to the prompt.
        assert answer.startswith(" ")
        assert answer[1:]
        assert " " not in answer[1:]
        assert not obj["prompt"].endswith((" ", "\n"))


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("split", SPLITS)
def test_rows_are_well_formed(task: str, split: str) -> None:
    ds = generate(task, split, 40, seed=3)
    assert len(ds.rows) == 40 == ds.metadata["rows"]
    ids = [row["id"] for row in ds.rows]
    assert ids == [f"{task}-{split}-{i:06d}" for i in range(40)]
    for row in ds.rows:
        expected_keys = {"id", "base", "counterfactuals", "interventions"}
        if task == "mcqa":
            expected_keys |= {"choices", "answer_key"}
        assert set(row) == expected_keys
        _check_prompt(row["base"], task, base=True)
        assert set(row["counterfactuals"]) == EXPECTED_TYPES[task]
        for cf_type, cf in row["counterfactuals"].items():
            _check_prompt(cf, task, base=False, cf_type=cf_type)
        assert set(row["interventions"]) == EXPECTED_TYPES[task]
        for per_type in row["interventions"].values():
            assert set(per_type) <= INTERVENED[task]
            assert all(isinstance(v, str) and v.startswith(" ") for v in per_type.values())


@pytest.mark.parametrize("task", TASKS)
def test_metadata(task: str) -> None:
    ds = generate(task, "validation", 5, seed=11)
    meta = ds.metadata
    assert set(meta) == {"task", "split", "generator", "counterfactual_types", "variables", "filters", "rows"}
    assert meta["task"] == task
    assert meta["split"] == "validation"
    assert meta["rows"] == 5
    assert meta["generator"]["name"] == f"mibspec.datasets.{task}"
    assert meta["generator"]["seed"] == 11
    assert meta["generator"]["version"]
    assert meta["generator"]["parameters"]["n_rows"] == 5
    assert set(meta["counterfactual_types"]) == EXPECTED_TYPES[task]
    assert set(meta["variables"]) == INTERVENED[task]
    assert meta["filters"] == []
    json.dumps(meta, allow_nan=False)


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_bytes(task: str) -> None:
    first = generate(task, "test", 30, seed=7).to_jsonl().encode("utf-8")
    second = generate(task, "test", 30, seed=7).to_jsonl().encode("utf-8")
    other = generate(task, "test", 30, seed=8).to_jsonl().encode("utf-8")
    assert first == second
    assert first != other


@given(seed=st.integers(min_value=0, max_value=2**64 - 1), task=st.sampled_from(TASKS))
@settings(max_examples=15, deadline=None)
def test_determinism_for_any_seed(seed: int, task: str) -> None:
    assert (
        generate(task, "train", 3, seed=seed).to_jsonl() == generate(task, "train", 3, seed=seed).to_jsonl()
    )


def test_splits_draw_independent_streams() -> None:
    # Same seed, different split: different attribute pools, so different rows.
    a = generate("arithmetic", "train", 5, seed=0).rows
    b = generate("arithmetic", "test", 5, seed=0).rows
    assert [r["base"]["prompt"] for r in a] != [r["base"]["prompt"] for r in b]


@pytest.mark.parametrize("task", TASKS)
def test_jsonl_is_canonical(task: str, tmp_path: Path) -> None:
    ds = generate(task, "test", 12, seed=1)
    rows_path, meta_path = write_dataset(ds, tmp_path / task)
    raw = rows_path.read_bytes()
    assert raw.endswith(b"\n")
    assert b"\r" not in raw
    lines = raw.decode("utf-8").split("\n")[:-1]
    assert len(lines) == 12
    for line, row in zip(lines, ds.rows, strict=True):
        # Keys sorted, compact separators, no NaN: the canonical encoding, independently spelled.
        assert line == json.dumps(
            row, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    assert read_jsonl(rows_path) == [json.loads(line) for line in lines]
    assert json.loads(meta_path.read_text(encoding="utf-8")) == ds.metadata
    assert dumps_jsonl(ds.rows) == raw.decode("utf-8")


def test_read_jsonl_rejects_nan_and_missing_newline(tmp_path: Path) -> None:
    bad = tmp_path / "nan.jsonl"
    bad.write_text('{"x": NaN}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="rows"):
        read_jsonl(bad)
    unterminated = tmp_path / "end.jsonl"
    unterminated.write_text('{"x": 1}', encoding="utf-8")
    with pytest.raises(ValueError, match="path"):
        read_jsonl(unterminated)


def test_dumps_rejects_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        dumps_jsonl([{"x": math.nan}])


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"task": "arc", "split": "test", "n_rows": 1}, "task"),
        ({"task": "ioi", "split": "dev", "n_rows": 1}, "split"),
        ({"task": "ioi", "split": "test", "n_rows": 0}, "n_rows"),
        ({"task": "mcqa", "split": "test", "n_rows": 1, "seed": -1}, "seed"),
        ({"task": "mcqa", "split": "test", "n_rows": True}, "n_rows"),
        ({"task": "arithmetic", "split": "test", "n_rows": 1, "operand_max": 100}, "operand_max"),
        (
            {"task": "arithmetic", "split": "test", "n_rows": 1, "operand_min": 50, "operand_max": 40},
            "operand_max",
        ),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        generate(**kwargs)


def test_dataset_is_immutable_value() -> None:
    ds = generate("ioi", "test", 2, seed=0)
    assert isinstance(ds, Dataset)
    with pytest.raises(AttributeError):
        ds.rows = ()  # type: ignore[misc]
