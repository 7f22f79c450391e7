"""The limit pre-check is one pass whose Python-level work is bounded by the limits, whatever
the text's length (tests/hardening/test_limits.py checks that its counts are exact)."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.core import strict_json as _parse
from mibspec.core.strict_json import _check_limits


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


@pytest.mark.slow
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
