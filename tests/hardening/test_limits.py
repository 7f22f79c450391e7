"""The value and depth limits agree with counts taken on the parsed value (an independent walk).

P110 fires exactly when the document holds more JSON values than ``max_values`` (every
scalar, array and object; keys are not values) and P106 exactly when nesting is deeper
than ``max_depth``, whatever the whitespace and whatever brackets, commas and escapes the
strings hold.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.core.strict_json import _check_limits
from mibspec.validator import Limits, parse_json_bytes

pytestmark = pytest.mark.slow

TRICKY_TEXT = st.text(alphabet='[]{},:"\\ aé\n\t\u2028😀', max_size=12)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TRICKY_TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TRICKY_TEXT, children, max_size=5),
    max_leaves=40,
)


def count_values(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(count_values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(count_values(v) for v in value)
    return 1


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def spaced(text: str, rng: random.Random) -> str:
    """Insignificant whitespace after structural characters outside strings."""
    out, in_string, escaped = [], False, False
    for char in text:
        out.append(char)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[]{},:" and rng.random() < 0.5:
            out.append(rng.choice([" ", "\n", "\t", "\r\n  "]))
    return "".join(out)


def symbols(text: str, **limits: int) -> list[str]:
    return [p.symbol for p in parse_json_bytes(text.encode("utf-8"), limits=Limits(**limits)).problems]


@settings(max_examples=300, deadline=None)
@given(value=VALUES, rng=st.randoms(use_true_random=False), ascii_only=st.booleans())
def test_value_limit_counts_exactly(value: Any, rng: random.Random, ascii_only: bool) -> None:
    document = {"v": value}
    text = spaced(json.dumps(document, ensure_ascii=ascii_only), rng)
    count = count_values(document)
    assert symbols(text, max_values=count) == []
    assert symbols(text, max_values=count - 1) == ["too-many-values"]


@settings(max_examples=300, deadline=None)
@given(value=VALUES, rng=st.randoms(use_true_random=False))
def test_depth_limit_is_exact(value: Any, rng: random.Random) -> None:
    document = {"v": value}
    text = spaced(json.dumps(document, ensure_ascii=False), rng)
    levels = depth(document)
    assert symbols(text, max_depth=levels) == []
    assert symbols(text, max_depth=levels - 1) == ["nesting-too-deep"]


_FORMER_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def former_counts(text: str) -> tuple[int, int, int | None]:
    """(depth, values, offset of the first bracket at that depth) by the former formulas:
    strings emptied, then 1 + commas + containers - empty ones, and a walk of the brackets.
    (On well-formed text every string closes, so these regular expressions never restart.)"""
    bare = _FORMER_STRING.sub('""', text).translate(str.maketrans("", "", " \t\r\n"))
    values = 1 + bare.count(",") + bare.count("[") + bare.count("{") - bare.count("[]") - bare.count("{}")
    level = deepest = 0
    first_at: dict[int, int] = {}
    for match in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text, re.DOTALL):
        if match.group() in "[{":
            level += 1
            first_at.setdefault(level, match.start())
            deepest = max(deepest, level)
        elif match.group() in "]}":
            level -= 1
    return deepest, values, first_at.get(deepest)


@settings(max_examples=300, deadline=None)
@given(value=VALUES, rng=st.randoms(use_true_random=False), ascii_only=st.booleans())
def test_the_one_pass_pre_check_agrees_with_the_former_counts(
    value: Any, rng: random.Random, ascii_only: bool
) -> None:
    document = {"v": value}
    text = spaced(json.dumps(document, ensure_ascii=ascii_only), rng)
    levels, count, deepest_at = former_counts(text)
    assert (levels, count) == (depth(document), count_values(document))
    assert _check_limits(text, levels, count) is None
    too_deep = _check_limits(text, levels - 1, count)
    assert too_deep is not None
    assert (too_deep.symbol, too_deep.offset) == ("nesting-too-deep", deepest_at)
    too_many = _check_limits(text, levels, count - 1)
    assert too_many is not None
    assert too_many.symbol == "too-many-values"
