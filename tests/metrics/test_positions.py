"""Declared token positions resolve on the shipped prompts to the tokens a reader would point at.

Independent anchor: the shipped tokenizer is word level (whitespace separates words, every
punctuation character is a token), so the expected index of a word is found by splitting
the prompt with a regular expression written here and counting, not through the
tokenizer's offsets that the resolver uses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mibspec.metrics.positions import PositionError, resolve_position, resolve_positions, slot_spans

REPO = Path(__file__).resolve().parents[2]
TOKENIZER = REPO / "examples" / "models" / "tiny-gpt2" / "tokenizer.json"


def _rows(task: str, n: int = 20) -> list[dict[str, Any]]:
    lines = (REPO / "examples" / "datasets" / task / "test.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:n]]


def _words(text: str) -> list[str]:
    return re.findall(r"[^\s\W]+|[^\w\s]", text)


@pytest.fixture(scope="module")
def encode() -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(TOKENIZER))

    def run(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        out = tokenizer.encode(text, add_special_tokens=False)
        return list(out.ids), [tuple(o) for o in out.offsets]

    return run


def _resolve(position: dict[str, Any], prompt: dict[str, Any], encode: Any) -> int:
    ids, offsets = encode(prompt["prompt"])
    return resolve_position(position, prompt, ids, offsets, lambda text: encode(text)[0])


def test_word_split_matches_the_tokenizer(encode: Any) -> None:
    for row in _rows("ioi") + _rows("mcqa") + _rows("arithmetic"):
        assert len(encode(row["base"]["prompt"])[0]) == len(_words(row["base"]["prompt"]))


def test_ioi_subject_second_mention_by_placeholder_and_by_value(encode: Any) -> None:
    for row in _rows("ioi"):
        base = row["base"]
        words = _words(base["prompt"])
        subject = base["slots"]["subject"]
        mentions = [i for i, w in enumerate(words) if w == subject]
        assert len(mentions) == 2
        assert _resolve({"rule": "slot", "slot": "name_c"}, base, encode) == mentions[1]
        by_value = {"rule": "slot", "slot": "subject", "match": "value", "occurrence": 1}
        assert _resolve(by_value, base, encode) == mentions[1]
        first = {"rule": "slot", "slot": "subject", "match": "value", "occurrence": 0}
        assert _resolve(first, base, encode) == mentions[0]
        assert _resolve({"rule": "last"}, base, encode) == len(words) - 1
        assert _resolve({"rule": "index", "index": -2}, base, encode) == len(words) - 2


def test_mcqa_correct_choice_label_follows_the_answer_pointer(encode: Any) -> None:
    for row in _rows("mcqa"):
        for prompt in (row["base"], *row["counterfactuals"].values()):
            pointer = prompt["variables"]["answer_pointer"]
            if pointer is None:
                continue
            label = prompt["slots"][f"label_{pointer}"]
            words = _words(prompt["prompt"])
            # the label opens a line and is followed by "."
            lines = prompt["prompt"].split("\n")
            line = next(i for i, text in enumerate(lines) if text.startswith(f"{label}. "))
            expected = len(_words("\n".join(lines[:line]))) if line else 0
            assert words[expected] == label
            position = {"rule": "slot", "slot": "label_{answer_pointer}"}
            assert _resolve(position, prompt, encode) == expected


def test_arithmetic_second_operand_and_token_occurrences(encode: Any) -> None:
    for row in _rows("arithmetic"):
        base = row["base"]
        words = _words(base["prompt"])
        operand = str(base["variables"]["operand_2"])
        expected = max(i for i, w in enumerate(words) if w == operand)
        assert _resolve({"rule": "slot", "slot": "operand_2", "subtoken": "last"}, base, encode) == expected
        assert _resolve({"rule": "last_occurrence", "token": operand}, base, encode) == expected
        first = str(base["variables"]["operand_1"])
        assert _resolve({"rule": "first_occurrence", "token": first}, base, encode) == words.index(first)


def test_unresolvable_positions_raise(encode: Any) -> None:
    base = _rows("ioi", 1)[0]["base"]
    n = len(_words(base["prompt"]))
    cases = [
        {"rule": "index", "index": n},
        {"rule": "index", "index": -n - 1},
        {"rule": "first_occurrence", "token": "zebra"},
        {"rule": "slot", "slot": "name_c", "occurrence": 1},
        {"rule": "slot", "slot": "subject", "match": "value", "occurrence": 2},
        {"rule": "slot", "slot": "no_such_slot"},
        {"rule": "slot", "slot": "label_{answer_pointer}"},
        {"rule": "slot"},
    ]
    for position in cases:
        with pytest.raises(PositionError):
            _resolve(position, base, encode)


def test_all_names_every_token_and_one_rule_names_one(encode: Any) -> None:
    base = _rows("ioi", 1)[0]["base"]
    ids, offsets = encode(base["prompt"])
    words = len(_words(base["prompt"]))  # one token per word with this tokenizer

    def positions(position: dict[str, Any]) -> tuple[int, ...]:
        return resolve_positions(position, base, ids, offsets, lambda text: encode(text)[0])

    assert positions({"rule": "all"}) == tuple(range(words))
    assert positions({"rule": "last"}) == (words - 1,)
    assert positions({"rule": "index", "index": 2}) == (2,)
    with pytest.raises(PositionError, match="every token"):
        _resolve({"rule": "all"}, base, encode)  # one index cannot stand for every token
    with pytest.raises(PositionError, match="no tokens"):
        resolve_positions({"rule": "all"}, base, [], [], lambda text: encode(text)[0])


def test_a_template_that_does_not_give_the_prompt_is_refused() -> None:
    prompt = {"prompt": "A and B", "template": "{x} and {y}", "slots": {"x": "A", "y": "C"}}
    with pytest.raises(PositionError, match="differs from the prompt"):
        slot_spans(prompt, "x")
    prompt["slots"]["y"] = "B"
    assert slot_spans(prompt, "y") == [(6, 7)]
