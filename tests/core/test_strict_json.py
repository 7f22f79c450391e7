"""Strict JSON parsing: every malformed input becomes a located problem, never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.validator import Limits, parse_json_bytes


def problems(raw: bytes, **limits: int) -> list[tuple[str, str, tuple[int | None, int | None]]]:
    doc = parse_json_bytes(raw, limits=Limits(**limits))
    return [(p.symbol, p.pointer, doc.position_of(p.offset)) for p in doc.problems]


def test_valid_document_has_no_problems() -> None:
    doc = parse_json_bytes(b'{"a": [1, 2.5, "x", true, null], "b": {"c": -0.0}}')
    assert doc.ok
    assert doc.data == {"a": [1, 2.5, "x", True, None], "b": {"c": -0.0}}


def test_duplicate_key_is_located_at_the_second_key() -> None:
    raw = b'{\n  "a": 1,\n  "b": {"x": 1, "x": 2}\n}'
    assert problems(raw) == [("duplicate-key", "/b/x", (3, 17))]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", "-1e999"])
def test_non_finite_numbers_are_rejected(literal: str) -> None:
    raw = f'{{"v": [{literal}]}}'.encode()
    assert problems(raw) == [("non-finite-number", "/v/0", (1, 8))]


def test_byte_order_mark_is_rejected() -> None:
    assert problems(b"\xef\xbb\xbf{}") == [("byte-order-mark", "", (1, 1))]


def test_invalid_utf8_is_located() -> None:
    raw = b'{"a": "ok",\n "b": "\xff"}'
    [(symbol, _, position)] = problems(raw)
    assert symbol == "invalid-utf8"
    assert position == (2, 8)


def test_syntax_error_position_comes_from_the_parser() -> None:
    [(symbol, _, position)] = problems(b'{"a": 1,\n "b": }')
    assert symbol == "invalid-json"
    assert position == (2, 7)


def test_deep_nesting_is_refused_without_recursion() -> None:
    raw = b"[" * 100_000 + b"]" * 100_000
    [(symbol, _, position)] = problems(raw)
    assert symbol == "nesting-too-deep"
    assert position == (1, 65)


def test_depth_limit_counts_brackets_inside_strings_correctly() -> None:
    # 70 brackets inside a string are text, not nesting.
    raw = json.dumps({"s": "[" * 70}).encode()
    assert problems(raw) == []


def test_size_limit_is_checked_before_parsing() -> None:
    raw = json.dumps({"a": "x" * 2000}).encode()
    assert [p[0] for p in problems(raw, max_bytes=1000)] == ["file-too-large"]


def test_huge_integer_literal_is_a_problem_not_a_crash() -> None:
    raw = b'{"n": ' + b"9" * 5000 + b"}"
    assert [p[0] for p in problems(raw)] == ["invalid-json"]


def test_locate_maps_pointers_to_keys_and_values() -> None:
    doc = parse_json_bytes(b'{"x": {"y": [true, {"z": 3}]},\n  "a/b": "v"}')
    assert doc.locate("/x/y/1/z") == (1, 26)
    assert doc.locate("/x/y/1/z", prefer_key=True) == (1, 21)
    assert doc.locate("/a~1b") == (2, 10)
    assert doc.locate("/a~1b", prefer_key=True) == (2, 3)
    assert doc.locate("/x/y/0") == (1, 14)
    assert doc.locate("/missing") == (1, 1)  # falls back to the nearest parent (the root)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(json_values)
def test_round_trip_of_any_strict_json(value: object) -> None:
    raw = json.dumps({"v": value}).encode()
    doc = parse_json_bytes(raw)
    assert doc.ok
    assert doc.data == {"v": value}


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(json_values)
def test_every_value_pointer_is_located(value: object) -> None:
    text = json.dumps({"v": value}, indent=1)
    doc = parse_json_bytes(text.encode())
    index = doc.source_map
    # Each located offset starts a JSON value that decodes on its own.
    decoder = json.JSONDecoder()
    for pointer, offset in index.values.items():
        parsed, _ = decoder.raw_decode(text, offset)
        node: object = doc.data
        for token in pointer.split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]  # type: ignore[index]
        assert parsed == node
