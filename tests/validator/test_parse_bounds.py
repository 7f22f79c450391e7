"""The limit pre-check: one pass whose Python-level work is bounded by the limits, and the same
depth and value count as before on every well-formed text.

The counts it must agree with are taken two independent ways: on the parsed value, and with
the former formula on the text (strings emptied, then 1 + commas + containers - empty ones;
depth by walking the remaining brackets).
"""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.validator import _parse
from mibspec.validator._parse import _check_limits

TRICKY_TEXT = st.text(alphabet='[]{},:"\\ aé\n\t\u2028😀', max_size=10)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TRICKY_TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TRICKY_TEXT, children, max_size=5),
    max_leaves=40,
)
LAYOUTS = st.sampled_from(
    [
        {},
        {"indent": 0},
        {"indent": 2},
        {"indent": "\t"},
        {"separators": (",", ":")},
        {"indent": 1, "separators": (" ,  ", " : ")},
    ]
)


def walk_counts(value: Any) -> tuple[int, int]:
    """(depth, values) of a parsed value: containers nest one level, keys are not values."""
    if isinstance(value, dict | list):
        children = list(value.values()) if isinstance(value, dict) else value
        counts = [walk_counts(child) for child in children]
        return 1 + max((d for d, _ in counts), default=0), 1 + sum(n for _, n in counts)
    return 0, 1


_FORMER_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def former_counts(text: str) -> tuple[int, int, int | None]:
    """(depth, values, offset of the first bracket past each depth) by the former formulas."""
    bare = _FORMER_STRING.sub('""', text).translate(str.maketrans("", "", " \t\r\n"))
    values = 1 + bare.count(",") + bare.count("[") + bare.count("{") - bare.count("[]") - bare.count("{}")
    depth = deepest = 0
    first_at: dict[int, int] = {}
    for match in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text, re.DOTALL):
        if match.group() in "[{":
            depth += 1
            first_at.setdefault(depth, match.start())
            deepest = max(deepest, depth)
        elif match.group() in "]}":
            depth -= 1
    return deepest, values, first_at.get(deepest)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, layout=LAYOUTS, ascii_only=st.booleans())
def test_pre_check_agrees_with_the_former_counts_on_valid_json(
    value: Any, layout: dict[str, Any], ascii_only: bool
) -> None:
    text = json.dumps({"v": value}, ensure_ascii=ascii_only, **layout)
    depth, values = walk_counts({"v": value})
    former_depth, former_values, deepest_at = former_counts(text)
    assert (former_depth, former_values) == (depth, values)
    assert _check_limits(text, depth, values) is None
    too_deep = _check_limits(text, depth - 1, values)
    assert too_deep is not None
    assert too_deep.symbol == "nesting-too-deep"
    assert too_deep.offset == deepest_at
    too_many = _check_limits(text, depth, values - 1)
    assert too_many is not None
    assert too_many.symbol == "too-many-values"


class CountingPattern:
    """A compiled pattern whose ``match`` calls are counted: the pre-check's Python-level steps."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, text: str, pos: int) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(text, pos)


def pre_check_steps(text: str, max_depth: int, max_values: int) -> int:
    counter = CountingPattern(_parse._EVENT)
    with mock.patch.object(_parse, "_EVENT", counter):
        _check_limits(text, max_depth, max_values)
    return counter.calls


@settings(max_examples=300, deadline=None)
@given(
    piece=st.text(alphabet='[]{},:"\\ 0a', max_size=60),
    repeat=st.integers(1, 400),
    max_depth=st.integers(1, 8),
    max_values=st.integers(1, 30),
)
def test_pre_check_steps_are_bounded_by_the_limits_not_the_length(
    piece: str, repeat: int, max_depth: int, max_values: int
) -> None:
    # Commas and opening brackets each add a value, a closing bracket needs an opening one
    # before it, and a run of empty containers is followed by one of those or by the end:
    # at most 2 × (values + (values + 1)) + 1 events, and one last match that finds none.
    assert pre_check_steps(piece * repeat, max_depth, max_values) <= 4 * max_values + 4


def test_hostile_texts_take_steps_bounded_by_the_limits() -> None:
    hostile = [
        "[" * 65 + '"' + '\\"' * 200_000,  # the unterminated string that used to be re-read at every quote
        '"' * 400_000,
        "[]" * 200_000,
        "[" * 3 + "[]," * 100_000,
        "]" * 400_000,
        "[" + " " * 400_000 + "1" + "]" * 10,
        "{" + ":" * 400_000,
    ]
    for text in hostile:
        assert pre_check_steps(text, 64, 1000) <= 4 * 1000 + 4
