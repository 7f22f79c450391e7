"""Declared rounding (spec 1.1, SPEC.md C-10): which numbers a printed value stands for.

A report, or an object among its claims, may declare ``"rounding": {"decimals": d}`` or
``{"significant_digits": s}``. A number then stands for every value that rounds to it:
the closed interval ``[v − h, v + h]``, ``h`` the half-unit of its last printed digit
(``0.5·10^-d``; ``0.5·10^(e−s+1)`` with ``e`` the decimal exponent of ``v``). A number
follows the rounding of the closest object around it that declares one, else the
report's; without any declaration it is exact (``h = 0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .integers import parse_int

__all__ = ["Rounding", "intervals_meet", "rounding_at"]


@dataclass(frozen=True)
class Rounding:
    """A declared rounding: ``decimals`` or ``significant_digits`` (exactly one is set)."""

    decimals: int | None = None
    significant_digits: int | None = None

    @classmethod
    def from_json(cls, value: Any) -> Rounding | None:
        """The rounding a schema-valid ``rounding`` object declares (None for anything else)."""
        if not isinstance(value, Mapping):
            return None
        decimals, digits = value.get("decimals"), value.get("significant_digits")
        if isinstance(decimals, int) and not isinstance(decimals, bool):
            return cls(decimals=decimals)
        if isinstance(digits, int) and not isinstance(digits, bool) and digits >= 1:
            return cls(significant_digits=digits)
        return None

    def half_unit(self, value: float) -> float:
        """Half a unit of the last printed digit of ``value``.

        >>> Rounding(decimals=3).half_unit(0.65), Rounding(significant_digits=2).half_unit(-1234.0)
        (0.0005, 50.0)
        >>> Rounding(significant_digits=3).half_unit(0.0)
        0.0
        """
        if self.decimals is not None:
            return 0.5 * 10.0**-self.decimals
        if value == 0 or not math.isfinite(value) or self.significant_digits is None:
            return 0.0  # a printed zero has no leading digit: it stands for itself
        # The exponent of the shortest decimal that reads back as ``value``: exact, unlike log10.
        exponent = Decimal(repr(abs(float(value)))).adjusted()
        return 0.5 * 10.0 ** (exponent - self.significant_digits + 1)

    def interval(self, value: float) -> tuple[float, float]:
        """``[value − h, value + h]``."""
        half = self.half_unit(value)
        return value - half, value + half


def rounding_at(document: Any, pointer: str) -> Rounding | None:
    """The rounding that applies to the number at ``pointer``: the ``rounding`` of the
    closest object on the way from the root to it that declares one (None when none does).

    >>> doc = {"rounding": {"decimals": 3}, "claims": {"cpr": {"value": 0.5, "rounding": {"decimals": 1}}}}
    >>> rounding_at(doc, "/claims/cpr/value"), rounding_at(doc, "/claims/cmd/value")
    (Rounding(decimals=1, significant_digits=None), Rounding(decimals=3, significant_digits=None))
    """
    node = document
    found = None
    tokens = pointer.split("/")[1:] if pointer else []
    for token in tokens:
        if isinstance(node, Mapping):
            if "rounding" in node:
                found = node["rounding"]
            node = node.get(token.replace("~1", "/").replace("~0", "~"))
        elif isinstance(node, list) and (index := parse_int(token)) is not None and index < len(node):
            node = node[index]
        else:
            break
    return Rounding.from_json(found)


def intervals_meet(
    claimed: tuple[float, float], derived: tuple[float, float], abs_tol: float, rel_tol: float
) -> bool:
    """Whether the claimed interval meets the derived one widened by ``abs_tol + rel_tol·|bound|``
    (with point intervals: ``|claimed − derived| ≤ abs_tol + rel_tol·|derived|``).

    >>> intervals_meet((0.6495, 0.6505), (0.6497, 0.6498), 1e-9, 0.0)
    True
    >>> intervals_meet((0.6495, 0.6505), (0.6507, 0.6508), 1e-9, 0.0)
    False
    """
    low, high = derived
    if math.isnan(low) or math.isnan(high):
        return False
    slack_low = abs_tol + rel_tol * abs(low) if math.isfinite(low) else 0.0
    slack_high = abs_tol + rel_tol * abs(high) if math.isfinite(high) else 0.0
    return claimed[1] >= low - slack_low and claimed[0] <= high + slack_high
