"""Declared rounding (spec 1.1, SPEC.md C-10 to C-12): which numbers a printed value stands for.

A report, or an object among its claims, may declare ``"rounding": {"decimals": d}`` or
``{"significant_digits": s}``. A number then stands for every value that rounds to it:
the closed interval ``[v − h, v + h]``, ``h`` the half-unit of its last printed digit
(``0.5·10^-d``; ``0.5·10^(e−s+1)`` with ``e`` the decimal exponent of ``v``). A number
follows the rounding of the closest object around it that declares one, else the
report's; without any declaration it is exact (``h = 0``).

A rounding applies only to the claims whose row of the claim catalogue (``core.claims``)
names a kind of rounding (:func:`claim_rounding`); counts, sizes and declarations are exact
whatever a report declares. A claim under a rounding must be a number of that rounding
(:meth:`Rounding.represents`, C-11), and the rounding must be no coarser than the report's
profile accepts for the claim's kind (:func:`accepted`, C-12).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .claims import claim_catalogue
from .integers import parse_int

__all__ = [
    "Rounding",
    "accepted",
    "claim_rounding",
    "declared_rounding",
    "intervals_meet",
    "rounding_at",
]


def _exponent(value: float) -> int:
    """The decimal exponent of the shortest decimal that reads back as ``value`` (not 0)."""
    return Decimal(repr(abs(float(value)))).adjusted()


def _digits(value: float) -> tuple[int, int]:
    """``(decimals, significant digits)`` of the shortest decimal that reads back as ``value``.

    >>> _digits(0.963), _digits(1.45), _digits(14.0), _digits(1200.0), _digits(1e-07)
    ((3, 3), (2, 3), (0, 2), (0, 2), (7, 1))
    """
    text = Decimal(repr(float(value))).normalize()
    _, digits, exponent = text.as_tuple()
    assert isinstance(exponent, int)  # finite
    return max(-exponent, 0), len(digits)


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

    def unit_exponent(self, value: float) -> int | None:
        """The exponent of the last printed digit of ``value`` (its unit is 10^exponent), or
        ``None`` when the value stands for itself (a zero printed to significant digits).

        >>> Rounding(decimals=2).unit_exponent(14.1), Rounding(significant_digits=3).unit_exponent(0.0332)
        (-2, -4)
        """
        if self.decimals is not None:
            return -self.decimals
        if value == 0 or not math.isfinite(value) or self.significant_digits is None:
            return None
        return _exponent(value) - self.significant_digits + 1

    def represents(self, value: float) -> bool:
        """Whether ``value`` is a number of this rounding: its shortest decimal has no more
        decimals (or significant digits) than declared (C-11).

        >>> Rounding(decimals=0).represents(1.45), Rounding(decimals=2).represents(1.45)
        (False, True)
        >>> two = Rounding(significant_digits=2)
        >>> two.represents(0.00123), two.represents(1200.0)
        (False, True)
        """
        if not math.isfinite(value) or value == 0:
            return True
        decimals, digits = _digits(value)
        if self.decimals is not None:
            return decimals <= self.decimals
        return self.significant_digits is not None and digits <= self.significant_digits

    def describe(self) -> str:
        """``2 decimals`` or ``3 significant digits``."""
        if self.decimals is not None:
            return f"{self.decimals} decimal{'' if self.decimals == 1 else 's'}"
        return f"{self.significant_digits} significant digit{'' if self.significant_digits == 1 else 's'}"


def accepted(declared: Rounding, coarsest: list[Rounding], value: float) -> bool:
    """Whether ``declared`` is no coarser, at ``value``, than one of the ``coarsest`` roundings a
    profile accepts for the claim's kind (C-12): its last printed digit is at most theirs.
    A value that stands for itself (a zero to significant digits) is always accepted; a kind
    with no accepted rounding accepts none.

    >>> accepted(Rounding(decimals=0), [Rounding(decimals=2)], 1.45)
    False
    >>> accepted(Rounding(significant_digits=3), [Rounding(decimals=3), Rounding(significant_digits=3)], 3.75)
    True
    """
    mine = declared.unit_exponent(value)
    if mine is None:
        return True
    allowed = [bound.unit_exponent(value) for bound in coarsest]
    return any(other is not None and mine <= other for other in allowed)


def declared_rounding(document: Any, pointer: str) -> tuple[Rounding, str] | None:
    """The rounding the closest object around ``pointer`` declares, with that object's
    ``rounding`` pointer; ``None`` when none does (whatever the number's kind).

    >>> declared_rounding({"rounding": {"decimals": 1}, "claims": {"x": 1.0}}, "/claims/x")
    (Rounding(decimals=1, significant_digits=None), '/rounding')
    """
    node = document
    found: tuple[Any, str] | None = None
    tokens = pointer.split("/")[1:] if pointer else []
    prefix = ""
    for token in tokens:
        if isinstance(node, Mapping):
            if "rounding" in node:
                found = (node["rounding"], f"{prefix}/rounding")
            node = node.get(token.replace("~1", "/").replace("~0", "~"))
        elif isinstance(node, list) and (index := parse_int(token)) is not None and index < len(node):
            node = node[index]
        else:
            break
        prefix = f"{prefix}/{token}"
    if found is None:
        return None
    rounding = Rounding.from_json(found[0])
    return None if rounding is None else (rounding, found[1])


def claim_rounding(document: Any, pointer: str) -> Rounding | None:
    """The rounding that applies to the claim at ``pointer`` of a report: the declared one
    (:func:`declared_rounding`) when the claim's row of the claim catalogue names a kind of
    rounding, else ``None`` (the claim is exact: counts, sizes and declarations are, whatever a
    report declares).

    >>> report = {"track": "circuit", "rounding": {"decimals": 2}, "task": {"n_examples": 40}}
    >>> claim_rounding(report, "/claims/cpr/value"), claim_rounding(report, "/task/n_examples")
    (Rounding(decimals=2, significant_digits=None), None)
    """
    if not isinstance(document, Mapping):
        return None
    row = claim_catalogue().row(document.get("track"), pointer)
    if row is None or row.rounding is None:
        return None
    found = declared_rounding(document, pointer)
    return None if found is None else found[0]


def rounding_at(document: Any, pointer: str) -> Rounding | None:
    """The ``rounding`` of the closest object on the way from the root to ``pointer`` that
    declares one (None when none does), whatever the number there. Checks use
    :func:`claim_rounding`, which applies it only to the claims a rounding may apply to.

    >>> doc = {"rounding": {"decimals": 3}, "claims": {"cpr": {"value": 0.5, "rounding": {"decimals": 1}}}}
    >>> rounding_at(doc, "/claims/cpr/value"), rounding_at(doc, "/claims/cmd/value")
    (Rounding(decimals=1, significant_digits=None), Rounding(decimals=3, significant_digits=None))
    """
    found = declared_rounding(document, pointer)
    return None if found is None else found[0]


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
