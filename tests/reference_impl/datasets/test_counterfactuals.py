"""Counterfactual structure and intervention expectations, re-derived independently.

The expectations here are computed from the prompt text (parsed with regular
expressions) or from the slots with logic written in this file; the generators'
causal-model functions are only called where a paper table supplies the expected value.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.reference_impl.datasets import (
    arithmetic_interchange,
    generate,
    generate_arithmetic,
    generate_ioi,
    generate_mcqa,
    generate_ravel,
    ioi_interchange,
    mcqa_interchange,
)

SEEDS = st.integers(min_value=0, max_value=2**32)
SPLIT = st.sampled_from(["train", "validation", "test"])


# ---------------------------------------------------------------- IOI


def _ioi_triple(obj: dict[str, Any]) -> tuple[str, str, str]:
    s = obj["slots"]
    return s["name_a"], s["name_b"], s["name_c"]


def _ioi_io(a: str, b: str, c: str) -> str | None:
    if c == a and c != b:
        return b
    if c == b and c != a:
        return a
    return None


@given(seed=SEEDS, split=SPLIT)
@settings(max_examples=20, deadline=None)
def test_ioi_counterfactual_structure(seed: int, split: str) -> None:
    for row in generate_ioi(split, 5, seed).rows:
        a, b, s = _ioi_triple(row["base"])
        assert a != b
        assert s in (a, b)
        o = b if s == a else a
        cfs = {t: _ioi_triple(cf) for t, cf in row["counterfactuals"].items()}
        fa, fb, _ = cfs["random_names"]
        fresh_c = cfs["abc"][2]
        assert len({a, b, fa, fb, fresh_c}) == 5
        f = {a: fa, b: fb}
        # MIB Table 6, column by column.
        assert cfs["abc"] == (a, b, fresh_c)
        assert cfs["random_names"] == (fa, fb, f[s])
        assert cfs["io_s1_flip"] == (b, a, s)
        assert cfs["io_s2_flip"] == (a, b, o)
        assert cfs["io_s1_flip_io_s2_flip"] == (b, a, o)
        assert cfs["random_names_io_s1_flip"] == (fb, fa, f[s])
        assert cfs["random_names_io_s2_flip"] == (fa, fb, f[o])
        assert cfs["random_names_io_s1_flip_io_s2_flip"] == (fb, fa, f[o])
        # Everything but the names is shared with the base.
        for cf in row["counterfactuals"].values():
            assert cf["template"] == row["base"]["template"]
            assert cf["slots"]["place"] == row["base"]["slots"]["place"]
            assert cf["slots"]["object"] == row["base"]["slots"]["object"]


@given(seed=SEEDS, split=SPLIT)
@settings(max_examples=20, deadline=None)
def test_ioi_answers_and_interventions(seed: int, split: str) -> None:
    for row in generate_ioi(split, 5, seed).rows:
        base = row["base"]
        a, b, c = _ioi_triple(base)
        assert base["answer"] == f" {_ioi_io(a, b, c)}"
        # The prompt names the first-clause names before the second-clause subject.
        words = re.findall(r"\w+", base["prompt"])
        assert words.index(a) < words.index(b) < len(words) - 1 - words[::-1].index(c)
        for cf_type, cf in row["counterfactuals"].items():
            ca, cb, cc = _ioi_triple(cf)
            io = _ioi_io(ca, cb, cc)
            assert cf["answer"] == (None if io is None else f" {io}")
            expected: dict[str, str] = {}
            if io is not None:
                position = 0 if io == ca else 1
                expected["output_position"] = f" {(a, b)[position]}"
                expected["output_token"] = f" {io}"
            assert row["interventions"][cf_type] == expected, cf_type


def test_ioi_interchange_on_mib_table_6() -> None:
    # Base "Nick and John ..., Nick ..." (answer John); IO S1 flip "John and Nick ..., Nick".
    base = {"name_a": "Nick", "name_b": "John", "name_c": "Nick"}
    s1_flip = {"name_a": "John", "name_b": "Nick", "name_c": "Nick"}
    assert ioi_interchange(base, s1_flip, "output_token") == " John"
    assert ioi_interchange(base, s1_flip, "output_position") == " Nick"
    abc = {"name_a": "Nick", "name_b": "John", "name_c": "Bob"}
    assert ioi_interchange(base, abc, "output_position") is None


# ---------------------------------------------------------------- arithmetic

_OPERANDS = re.compile(r"(\d+)\D+?(\d+)")


def _operands(prompt: str) -> tuple[int, int]:
    match = _OPERANDS.search(prompt)
    assert match is not None, prompt
    return int(match.group(1)), int(match.group(2))


def _carry(x: int, y: int) -> int:
    return 1 if (x % 10) + (y % 10) > 9 else 0


@given(seed=SEEDS, split=SPLIT)
@settings(max_examples=20, deadline=None)
def test_arithmetic_answers_edits_and_interventions(seed: int, split: str) -> None:
    for row in generate_arithmetic(split, 5, seed).rows:
        x, y = _operands(row["base"]["prompt"])
        assert row["base"]["answer"] == f" {x + y}"
        for cf_type, cf in row["counterfactuals"].items():
            p, q = _operands(cf["prompt"])
            assert cf["answer"] == f" {p + q}"
            assert 0 <= p <= 99
            assert 0 <= q <= 99
            if cf_type == "ones_digit_operand_1":
                assert p // 10 == x // 10
                assert p % 10 != x % 10
                assert q == y
            elif cf_type == "ones_digit_operand_2":
                assert q // 10 == y // 10
                assert q % 10 != y % 10
                assert p == x
            elif cf_type == "tens_digit_operand_1":
                assert p % 10 == x % 10
                assert p // 10 != x // 10
                assert q == y
            elif cf_type == "tens_digit_operand_2":
                assert q % 10 == y % 10
                assert q // 10 != y // 10
                assert p == x
            elif cf_type == "ones_carry":
                assert (p // 10, q // 10) == (x // 10, y // 10)
                assert _carry(p, q) != _carry(x, y)
            elif cf_type == "tens_carry":
                assert (p % 10, q % 10) == (x % 10, y % 10)
                tens = lambda u, v: int(u // 10 + v // 10 + _carry(u, v) > 9)  # noqa: E731
                assert tens(p, q) != tens(x, y)
            else:
                assert {p, q} != {x, y} or (p, q) != (x, y)
            # Interchanging the carry moves the sum by ten per unit of carry difference.
            expected = x + y + 10 * (_carry(p, q) - _carry(x, y))
            assert row["interventions"][cf_type] == {"ones_carry": f" {expected}"}


def test_arithmetic_paper_examples() -> None:
    # MIB Figure 6: base 17 + 25, counterfactual 30 + 47, carry interchanged -> 32.
    base, source = {"operand_1": 17, "operand_2": 25}, {"operand_1": 30, "operand_2": 47}
    assert arithmetic_interchange(base, source, "ones_carry") == " 32"
    # MIB Table 8: 27 + 64 and its "different ones digit carry value" 21 + 60.
    assert (
        arithmetic_interchange(
            {"operand_1": 27, "operand_2": 64}, {"operand_1": 21, "operand_2": 60}, "ones_carry"
        )
        == " 81"
    )
    # Ones digits summing to exactly ten carry (the paper's prose says "> 10"; its Fig. 14, "> 9").
    assert (
        arithmetic_interchange(
            {"operand_1": 10, "operand_2": 10}, {"operand_1": 3, "operand_2": 7}, "ones_carry"
        )
        == " 30"
    )


# ---------------------------------------------------------------- MCQA

_STATED = re.compile(r"The (\w+) is (\w+)\.")
_OPTION = re.compile(r"^(\w)\. (\w+)$", re.MULTILINE)


def _parse_mcqa(prompt: str) -> tuple[str, str, list[str], list[str]]:
    stated = _STATED.search(prompt)
    assert stated is not None
    options = _OPTION.findall(prompt)
    assert len(options) == 4, prompt
    return stated.group(1), stated.group(2), [lab for lab, _ in options], [col for _, col in options]


@given(seed=SEEDS, split=SPLIT)
@settings(max_examples=20, deadline=None)
def test_mcqa_answers_edits_and_interventions(seed: int, split: str) -> None:
    for row in generate_mcqa(split, 5, seed).rows:
        obj, color, labels, options = _parse_mcqa(row["base"]["prompt"])
        assert labels == ["A", "B", "C", "D"]
        assert len(set(options)) == 4
        pointer = options.index(color)
        assert row["base"]["answer"] == f" {labels[pointer]}"
        assert row["answer_key"] == labels[pointer]
        expected_choices = [{"label": lab, "text": opt} for lab, opt in zip(labels, options, strict=True)]
        assert row["choices"] == expected_choices
        for cf_type, cf in row["counterfactuals"].items():
            c_obj, c_color, c_labels, c_options = _parse_mcqa(cf["prompt"])
            assert c_options.count(c_color) == 1
            assert len(set(c_labels)) == 4
            c_pointer = c_options.index(c_color)
            assert cf["answer"] == f" {c_labels[c_pointer]}"
            assert (c_obj != obj) == ("noun" in cf_type)
            assert (c_color != color) == ("color" in cf_type)
            assert (c_pointer != pointer) == ("answer_position" in cf_type)
            if "symbol" in cf_type:
                assert c_labels == ["1", "2", "3", "4"]
            elif "random_letter" in cf_type:
                assert not set(c_labels) & {"A", "B", "C", "D"}
            else:
                assert c_labels == labels
            # Distractors are kept (only swapped or recoloured where the type says so).
            assert set(c_options) - {c_color} == set(options) - {color}
            assert row["interventions"][cf_type] == {
                "answer_pointer": f" {labels[c_pointer]}",
                "answer": f" {c_labels[c_pointer]}",
            }


def test_mcqa_interchange_on_mib_table_9() -> None:
    def slots(labels: str, options: list[str], color: str) -> dict[str, str]:
        out = {"color": color, "object": "salmon"}
        for i in range(4):
            out[f"label_{i}"], out[f"option_{i}"] = labels[i], options[i]
        return out

    base = slots("ABCD", ["gray", "black", "white", "pink"], "pink")
    position_letter = slots("EZFL", ["gray", "black", "pink", "white"], "pink")
    # Pointer from the counterfactual (position 3 -> C in the base); answer token from it (F).
    assert mcqa_interchange(base, position_letter, "answer_pointer") == " C"
    assert mcqa_interchange(base, position_letter, "answer") == " F"


# ---------------------------------------------------------------- RAVEL-style

_QUERY = re.compile(r"^The (country|continent|language) of (\w+) is$")


@given(seed=SEEDS)
@settings(max_examples=10, deadline=None)
def test_ravel_interventions(seed: int) -> None:
    # Facts are read from the generated prompts themselves: every queried (city, attribute)
    # pair with its answer, collected over many rows.
    ds = generate_ravel("train", 60, seed)
    facts: dict[tuple[str, str], str] = {}
    for row in ds.rows:
        for obj in (row["base"], *row["counterfactuals"].values()):
            match = _QUERY.match(obj["prompt"])
            if match:
                facts[(match.group(2), match.group(1).capitalize())] = obj["answer"]
    for row in ds.rows:
        match = _QUERY.match(row["base"]["prompt"])
        assert match is not None
        queried = match.group(1).capitalize()
        for cf_type, cf in row["counterfactuals"].items():
            city = cf["slots"]["city"]
            assert city != row["base"]["slots"]["city"]
            for variable, value in row["interventions"][cf_type].items():
                if variable == queried:
                    if (city, variable) in facts:
                        assert value == facts[(city, variable)]
                else:
                    assert value == row["base"]["answer"]
            if cf_type == "mention":
                assert _QUERY.match(cf["prompt"]) is None
                assert cf["answer"] is None
            else:
                same = _QUERY.match(cf["prompt"])
                assert same is not None
                assert (same.group(1).capitalize() == queried) == (cf_type == "same_attribute")


def test_ravel_queries_are_balanced() -> None:
    rows = generate("ravel", "test", 30, seed=0).rows
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["base"]["slots"]["attribute"]] = counts.get(row["base"]["slots"]["attribute"], 0) + 1
    assert counts == {"Country": 10, "Continent": 10, "Language": 10}


def test_interchange_rejects_unknown_variable() -> None:
    with pytest.raises(ValueError, match="variable"):
        ioi_interchange(
            {"name_a": "A", "name_b": "B", "name_c": "A"},
            {"name_a": "A", "name_b": "B", "name_c": "B"},
            "subject",
        )
