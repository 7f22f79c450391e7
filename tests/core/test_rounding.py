"""Declared rounding (SPEC.md C-10): the interval a printed number stands for, checked against
Python's own rounding and formatting, and which declaration applies to a number."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.core.rounding import (
    Rounding,
    accepted,
    claim_rounding,
    declared_rounding,
    intervals_meet,
    rounding_at,
)

_FINITE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(x=_FINITE, decimals=st.integers(min_value=0, max_value=8))
def test_a_value_lies_in_the_interval_of_its_rounding_to_decimals(x: float, decimals: int) -> None:
    printed = float(f"{x:.{decimals}f}")
    low, high = Rounding(decimals=decimals).interval(printed)
    slack = 1e-12 * max(1.0, abs(x))  # the float subtraction in the interval's ends
    assert low - slack <= x <= high + slack


@pytest.mark.slow
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


# --------------------------------------------------------------------------- C-11, C-12


@given(x=_FINITE, decimals=st.integers(min_value=0, max_value=8))
def test_a_number_printed_to_decimals_is_a_number_of_that_rounding(x: float, decimals: int) -> None:
    printed = float(f"{x:.{decimals}f}")
    assert Rounding(decimals=decimals).represents(printed)
    # One more digit than declared, and it is not (unless that digit is 0).
    longer = f"{printed:.{decimals + 1}f}"
    finer = float(longer[:-1] + "1")
    assert not Rounding(decimals=decimals).represents(finer)


@given(x=_FINITE.filter(lambda v: abs(v) > 1e-300), digits=st.integers(min_value=1, max_value=8))
def test_a_number_printed_to_significant_digits_is_a_number_of_that_rounding(x: float, digits: int) -> None:
    printed = float(f"{x:.{digits}g}")
    assert Rounding(significant_digits=digits).represents(printed)
    mantissa, _, exponent = f"{printed:.{digits - 1}e}".partition("e")
    finer = float(f"{mantissa}{'' if '.' in mantissa else '.'}1e{exponent}")
    assert not Rounding(significant_digits=digits).represents(finer)


@pytest.mark.parametrize(
    ("rounding", "value", "represents"),
    [
        (Rounding(decimals=0), 1.45, False),  # CPR 1.45 under "decimals": 0
        (Rounding(decimals=0), 0.0, True),
        (Rounding(decimals=0), 14.0, True),
        (Rounding(decimals=2), 0.963, False),
        (Rounding(decimals=3), 0.963, True),
        (Rounding(decimals=3), 1e-07, False),
        (Rounding(significant_digits=1), 0.049, False),
        (Rounding(significant_digits=3), 0.000999, True),
        (Rounding(significant_digits=3), 0.000999000999, False),
        (Rounding(significant_digits=2), 1200.0, True),
    ],
)
def test_represents(rounding: Rounding, value: float, represents: bool) -> None:
    assert rounding.represents(value) is represents


@pytest.mark.parametrize(
    ("declared", "coarsest", "value", "ok"),
    [
        (Rounding(decimals=2), [Rounding(decimals=2)], 0.97, True),
        (Rounding(decimals=3), [Rounding(decimals=2)], 0.97, True),  # finer is always fine
        (Rounding(decimals=1), [Rounding(decimals=2)], 0.9, False),
        (Rounding(decimals=0), [Rounding(decimals=2)], 1.0, False),
        # Significant digits against decimals: the last printed digit at the claimed value decides.
        (Rounding(significant_digits=2), [Rounding(decimals=2)], 0.97, True),  # 0.01 = 0.01
        (Rounding(significant_digits=2), [Rounding(decimals=2)], 1.5, False),  # 0.1 > 0.01
        (Rounding(significant_digits=3), [Rounding(decimals=3), Rounding(significant_digits=3)], 3.75, True),
        (Rounding(decimals=3), [Rounding(decimals=3), Rounding(significant_digits=3)], 0.0332, True),
        (Rounding(decimals=2), [Rounding(decimals=3), Rounding(significant_digits=2)], 0.0, False),
        (Rounding(significant_digits=3), [Rounding(decimals=3)], 0.0, True),  # a printed 0 is exact
        (Rounding(decimals=2), [], 0.5, False),  # a kind with no accepted rounding
    ],
)
def test_accepted(declared: Rounding, coarsest: list[Rounding], value: float, ok: bool) -> None:
    assert accepted(declared, coarsest, value) is ok
    # The same verdict from the half-units, computed independently.
    if coarsest and declared.unit_exponent(value) is not None:
        bounds = [b.half_unit(value) for b in coarsest if b.unit_exponent(value) is not None]
        assert ok == any(declared.half_unit(value) <= bound * (1 + 1e-12) for bound in bounds)


def test_a_rounding_applies_only_to_the_claims_the_catalogue_rounds() -> None:
    report = {
        "track": "saliency",
        "rounding": {"significant_digits": 1},
        "task": {"n_examples": 64},
        "claims": {"dominance": {"n_images": 64, "rate": 0.3}, "methods": [{"wiou": 0.5}]},
    }
    assert claim_rounding(report, "/claims/dominance/rate") == Rounding(significant_digits=1)
    assert claim_rounding(report, "/claims/methods/0/wiou") == Rounding(significant_digits=1)
    for count in ("/task/n_examples", "/claims/dominance/n_images", "/claims/dominance/n_dominant"):
        assert claim_rounding(report, count) is None
    assert claim_rounding({**report, "track": "nonsense"}, "/claims/dominance/rate") is None
    assert declared_rounding(report, "/claims/methods/0/wiou") == (
        Rounding(significant_digits=1),
        "/rounding",
    )
    report["claims"]["methods"][0]["rounding"] = {"decimals": 2}
    assert declared_rounding(report, "/claims/methods/0/wiou") == (
        Rounding(decimals=2),
        "/claims/methods/0/rounding",
    )
