"""Declared rounding (SPEC.md C-10): the interval a printed number stands for, checked against
Python's own rounding and formatting, and which declaration applies to a number."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.core.rounding import Rounding, intervals_meet, rounding_at

_FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(x=_FINITE, decimals=st.integers(min_value=0, max_value=8))
def test_a_value_lies_in_the_interval_of_its_rounding_to_decimals(x: float, decimals: int) -> None:
    printed = float(f"{x:.{decimals}f}")
    low, high = Rounding(decimals=decimals).interval(printed)
    slack = 1e-12 * max(1.0, abs(x))  # the float subtraction in the interval's ends
    assert low - slack <= x <= high + slack


@given(x=_FINITE.filter(lambda v: v != 0), digits=st.integers(min_value=1, max_value=8))
def test_a_value_lies_in_the_interval_of_its_rounding_to_significant_digits(x: float, digits: int) -> None:
    printed = float(f"{x:.{digits}g}")
    low, high = Rounding(significant_digits=digits).interval(printed)
    slack = 1e-12 * max(1.0, abs(x))
    assert low - slack <= x <= high + slack


def test_the_interval_is_no_wider_than_half_a_unit_of_the_last_digit() -> None:
    """Values just beyond the half-unit print differently: the interval is as tight as it can be."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        digits = int(rng.integers(1, 6))
        printed = float(f"{rng.uniform(-100, 100):.{digits}g}")
        if printed == 0:
            continue
        low, high = Rounding(significant_digits=digits).interval(printed)
        width = high - low
        for outside in (low - 1e-3 * width, high + 1e-3 * width):
            assert float(f"{outside:.{digits}g}") != printed
        decimals = digits
        printed = round(rng.uniform(-100, 100), decimals)
        low, high = Rounding(decimals=decimals).interval(printed)
        for outside in (low - 1e-3 * (high - low), high + 1e-3 * (high - low)):
            assert round(outside, decimals) != printed


@pytest.mark.parametrize(
    ("rounding", "value", "half"),
    [
        (Rounding(decimals=3), 0.65, 0.0005),
        (Rounding(decimals=0), 12.0, 0.5),
        (Rounding(significant_digits=3), 0.0352, 0.00005),
        (Rounding(significant_digits=3), 3.75, 0.005),
        (Rounding(significant_digits=2), 1000.0, 50.0),  # 1.0e3: the exponent comes from the value
        (Rounding(significant_digits=3), 0.0, 0.0),
    ],
)
def test_half_unit(rounding: Rounding, value: float, half: float) -> None:
    assert math.isclose(rounding.half_unit(value), half, rel_tol=1e-12, abs_tol=0.0)


def test_the_closest_declaration_applies() -> None:
    doc = {
        "rounding": {"decimals": 3},
        "claims": {
            "methods": [
                {"metrics": {"F": 1.0, "rounding": {"significant_digits": 2}}},
                {"metrics": {"F": 1.0}},
            ],
            "a/b": {"rounding": {"decimals": 1}, "value": 2.0},
        },
    }
    assert rounding_at(doc, "/claims/methods/0/metrics/F") == Rounding(significant_digits=2)
    assert rounding_at(doc, "/claims/methods/1/metrics/F") == Rounding(decimals=3)
    assert rounding_at(doc, "/claims/a~1b/value") == Rounding(decimals=1)
    assert rounding_at({"claims": {"x": 1.0}}, "/claims/x") is None
    assert rounding_at(doc, "/claims/methods/7/metrics/F") == Rounding(decimals=3)  # past the data


def test_without_rounding_intervals_meet_is_the_point_tolerance() -> None:
    rng = np.random.default_rng(1)
    for _ in range(1000):
        claimed, derived = rng.normal(size=2)
        abs_tol, rel_tol = 10.0 ** rng.uniform(-9, -1, size=2)
        expected = abs(claimed - derived) <= abs_tol + rel_tol * abs(derived)
        assert intervals_meet((claimed, claimed), (derived, derived), abs_tol, rel_tol) == expected
