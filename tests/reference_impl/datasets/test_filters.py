"""Split disjointness and the equal-token-length filter (no torch)."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.reference_impl.datasets import (
    SPLITS,
    Dataset,
    equal_token_length_filter,
    generate,
    prompt_token_lengths,
)
from mibspec.reference_impl.datasets.ioi import ioi_attributes
from mibspec.reference_impl.datasets.mcqa import mcqa_objects

N_ROWS = 300


def _prompts(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield row["base"]
    yield from row["counterfactuals"].values()


def _collect(task: str, split: str, extract: Callable[[dict[str, Any]], set[Any]]) -> set[Any]:
    out: set[Any] = set()
    for row in generate(task, split, N_ROWS, seed=0).rows:
        out |= extract(row)
    return out


def _assert_disjoint(parts: dict[str, set[Any]]) -> None:
    for (s1, a), (s2, b) in itertools.combinations(parts.items(), 2):
        assert a, s1
        assert not a & b, f"{s1} and {s2} share {sorted(map(str, a & b))[:5]}"


@pytest.mark.parametrize("slot", ["names", "place", "object"])
def test_ioi_attributes_disjoint(slot: str) -> None:
    keys = ("name_a", "name_b", "name_c") if slot == "names" else (slot,)

    def extract(row: dict[str, Any]) -> set[str]:
        return {p["slots"][k] for p in _prompts(row) for k in keys}

    parts = {split: _collect("ioi", split, extract) for split in SPLITS}
    _assert_disjoint(parts)
    declared = "names" if slot == "names" else slot + "s"
    for split, used in parts.items():
        assert used <= set(ioi_attributes(split)[declared])


def test_arithmetic_operand_pairs_disjoint() -> None:
    def extract(row: dict[str, Any]) -> set[frozenset[int]]:
        chosen = (row["base"], row["counterfactuals"]["random_operands"])
        return {frozenset((int(p["slots"]["operand_1"]), int(p["slots"]["operand_2"]))) for p in chosen}

    _assert_disjoint({split: _collect("arithmetic", split, extract) for split in SPLITS})


def test_mcqa_objects_disjoint() -> None:
    def extract(row: dict[str, Any]) -> set[str]:
        return {p["slots"]["object"] for p in _prompts(row)}

    parts = {split: _collect("mcqa", split, extract) for split in SPLITS}
    _assert_disjoint(parts)
    for split, used in parts.items():
        assert used <= {o for o, _ in mcqa_objects(split)}


def test_ravel_cities_disjoint() -> None:
    def extract(row: dict[str, Any]) -> set[str]:
        return {p["slots"]["city"] for p in _prompts(row)}

    _assert_disjoint({split: _collect("ravel", split, extract) for split in SPLITS})


def test_mcqa_base_states_the_prototypical_colour() -> None:
    table = {o: c for split in SPLITS for o, c in mcqa_objects(split)}
    for row in generate("mcqa", "train", 50, seed=2).rows:
        assert table[row["base"]["slots"]["object"]] == row["base"]["slots"]["color"]


# ---------------------------------------------------------------- equal-token-length filter


def _slow_filter(rows: tuple[dict[str, Any], ...], tokenize: Callable[[str], list[int]]) -> list[str]:
    kept = []
    for row in rows:
        reference = len(tokenize(row["base"]["prompt"]))
        same = True
        for cf in row["counterfactuals"].values():
            if len(tokenize(cf["prompt"])) != reference:
                same = False
        if same:
            kept.append(row["id"])
    return kept


def _char_chunks(width: int) -> Callable[[str], list[int]]:
    def tokenize(text: str) -> list[int]:
        return [ord(c) for c in text[::width]]

    return tokenize


def _words(text: str) -> list[int]:
    return [len(w) for w in text.split()]


@given(
    task=st.sampled_from(["ioi", "arithmetic", "mcqa", "ravel"]),
    seed=st.integers(min_value=0, max_value=10_000),
    width=st.integers(min_value=1, max_value=6),
)
@settings(max_examples=25, deadline=None)
def test_filter_matches_slow_check(task: str, seed: int, width: int) -> None:
    ds = generate(task, "test", 25, seed=seed)
    for tokenize in (_char_chunks(width), _words):
        out = equal_token_length_filter(ds, tokenize, "test-tokenizer")
        assert [row["id"] for row in out.rows] == _slow_filter(ds.rows, tokenize)
        assert out.metadata["rows"] == len(out.rows)
        record = out.metadata["filters"][-1]
        assert record == {
            "name": "equal_token_length",
            "tokenizer": "test-tokenizer",
            "kept": len(out.rows),
            "dropped": len(ds.rows) - len(out.rows),
        }
        # Kept rows are untouched; the input dataset is not modified.
        by_id = {row["id"]: row for row in ds.rows}
        assert all(row is by_id[row["id"]] for row in out.rows)
        assert ds.metadata["filters"] == []
        assert ds.metadata["rows"] == 25


def test_filter_records_accumulate_and_lengths_are_reported() -> None:
    ds = generate("ioi", "test", 10, seed=0)
    once = equal_token_length_filter(ds, _words, "words")
    twice = equal_token_length_filter(once, _char_chunks(1), "chars")
    assert [f["tokenizer"] for f in twice.metadata["filters"]] == ["words", "chars"]
    lengths = prompt_token_lengths(ds.rows[0], _words)
    assert set(lengths) == {"base", *ds.rows[0]["counterfactuals"]}
    assert lengths["base"] == len(ds.rows[0]["base"]["prompt"].split())


def test_filter_drops_everything_when_lengths_differ() -> None:
    ds = generate("mcqa", "test", 10, seed=0)
    # Each prompt tokenizes to a length no other prompt of its row shares.
    out = equal_token_length_filter(
        ds, lambda text: list(range(zlib.crc32(text.encode()) % 1000 + 1000)), "hash"
    )
    assert out.rows == ()
    assert out.metadata["filters"][-1]["dropped"] == 10


@pytest.mark.parametrize(
    ("tokenize", "tokenizer", "argument"),
    [("not callable", "x", "tokenize"), (_words, "", "tokenizer")],
)
def test_filter_rejects_bad_arguments(tokenize: Any, tokenizer: str, argument: str) -> None:
    ds = Dataset(rows=(), metadata={"filters": [], "rows": 0})
    with pytest.raises(ValueError, match=argument):
        equal_token_length_filter(ds, tokenize, tokenizer)
