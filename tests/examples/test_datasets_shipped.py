"""The shipped test splits are exactly what their metadata says regenerates them (no torch)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from mibspec.reference_impl.datasets import equal_token_length_filter, generate, read_jsonl

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "datasets"
TASKS = ("ioi", "arithmetic", "mcqa", "ravel")


def _tokenize(folder: str) -> Callable[[str], list[int]]:
    tokenizer = Tokenizer.from_file(str(REPO / folder / "tokenizer.json"))

    def tokenize(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return tokenize


@pytest.mark.parametrize("task", TASKS)
def test_shipped_split_regenerates_byte_for_byte(task: str) -> None:
    meta = json.loads((SHIPPED / task / "test.meta.json").read_text(encoding="utf-8"))
    generator = meta["generator"]
    assert meta["task"] == task
    assert meta["split"] == "test"
    extra = {k: v for k, v in generator["parameters"].items() if k in ("operand_min", "operand_max")}
    ds = generate(task, meta["split"], generator["parameters"]["n_rows"], generator["seed"], **extra)
    assert ds.metadata["generator"] == generator
    for record in meta["filters"]:
        assert record["name"] == "equal_token_length"
        ds = equal_token_length_filter(ds, _tokenize(record["tokenizer"]), record["tokenizer"])
    assert ds.metadata == meta
    assert ds.to_jsonl().encode("utf-8") == (SHIPPED / task / "test.jsonl").read_bytes()


@pytest.mark.parametrize("task", TASKS)
def test_shipped_rows_have_equal_token_lengths(task: str) -> None:
    meta = json.loads((SHIPPED / task / "test.meta.json").read_text(encoding="utf-8"))
    rows = read_jsonl(SHIPPED / task / "test.jsonl")
    assert len(rows) == meta["rows"] == meta["filters"][-1]["kept"]
    assert 100 <= len(rows) <= 200
    tokenize = _tokenize(meta["filters"][-1]["tokenizer"])
    for row in rows:
        lengths = {len(tokenize(p["prompt"])) for p in (row["base"], *row["counterfactuals"].values())}
        assert len(lengths) == 1, row["id"]
