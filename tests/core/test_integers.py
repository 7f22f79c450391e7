"""``mibspec.core.integers`` (the one parser of integers written as text) and
``mibspec.core.environment`` (the numeric environment variables, read through it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.core.environment import (
    NUMERIC_VARIABLES,
    EnvironmentValueError,
    check_environment,
    environment_int,
)
from mibspec.core.integers import parse_int


@given(st.integers(min_value=0, max_value=10**18 - 1))
def test_every_integer_of_up_to_18_digits_reads_back(value: int) -> None:
    assert parse_int(str(value)) == value
    assert parse_int(f"-{value}", signed=True) == -value
    assert parse_int(f"+{value}", signed=True) == value


@pytest.mark.slow
@given(st.text(max_size=30))
def test_only_ascii_digits_are_read(text: str) -> None:
    value = parse_int(text, signed=True)
    body = text[1:] if text[:1] in "+-" and text else text
    if value is None:
        assert not (0 < len(body) <= 18 and all(c in "0123456789" for c in body))
    else:
        assert all(c in "0123456789" for c in body)
        assert value == int(text)


@pytest.mark.parametrize(
    "text", ["", "²", "٣", "1_0", " 1", "1 ", "0x1", "1e3", "-1", "+1", "9" * 19, "9" * 5000, "١٢"]
)
def test_what_int_or_isdigit_would_take_is_refused(text: str) -> None:
    assert parse_int(text) is None


def test_the_digit_cap_is_the_callers() -> None:
    assert parse_int("123", max_digits=2) is None
    assert parse_int("12", max_digits=2) == 12
    assert parse_int(12) is None  # type: ignore[arg-type]  (text only)


@pytest.mark.parametrize("name", sorted(NUMERIC_VARIABLES))
def test_a_numeric_variable_is_read_or_refused_by_name(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.delenv(name, raising=False)
    assert environment_int(name) is None
    monkeypatch.setenv(name, "  ")
    assert environment_int(name) is None
    monkeypatch.setenv(name, " 120 ")
    assert environment_int(name) == 120
    for bad in ("²", "-1", "1.5", "abc", str(NUMERIC_VARIABLES[name].maximum + 1), "9" * 5000):
        monkeypatch.setenv(name, bad)
        with pytest.raises(EnvironmentValueError, match=name) as refused:
            environment_int(name)
        assert len(str(refused.value)) < 400  # a 5,000-digit value is not repeated whole
        with pytest.raises(EnvironmentValueError, match=name):
            check_environment()
