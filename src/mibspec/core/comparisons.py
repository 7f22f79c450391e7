"""Claimed numbers against recomputed ones, under a profile's ``(abs, rel)`` tolerance.

The validator's rules compare a claim with the value recomputed from the report's own
parts (the profile's ``consistency`` tolerance); the recompute stage compares it with the
value recomputed from the declared artifacts (the profile's ``recompute`` tolerance for
the model's dtype). Both pass a claim when ``|claimed − recomputed| ≤ abs + rel·|recomputed|``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .findings import Finding

__all__ = ["Comparison", "Recomputation", "recompute_tolerance", "tolerance", "within"]


def tolerance(recomputed: float, abs_tol: float, rel_tol: float) -> float:
    """The allowed ``|claimed − recomputed|``: ``abs_tol + rel_tol·|recomputed|``."""
    return abs_tol + rel_tol * abs(recomputed)


def within(claimed: float, recomputed: float, abs_tol: float, rel_tol: float) -> bool:
    """``|claimed − recomputed| ≤ abs_tol + rel_tol·|recomputed|``.

    >>> within(1.05, 1.0, 0.0, 0.1), within(1.2, 1.0, 0.0, 0.1)
    (True, False)
    """
    return abs(claimed - recomputed) <= tolerance(recomputed, abs_tol, rel_tol)


def recompute_tolerance(profile: Mapping[str, Any], dtype: str) -> tuple[float, float]:
    """The profile's ``(abs, rel)`` recomputation tolerance for a model dtype."""
    table = profile["recompute"]
    entry = table.get(dtype) or table["float32"]
    return float(entry["abs"]), float(entry["rel"])


@dataclass(frozen=True)
class Comparison:
    """One claimed number next to its recomputation.

    Attributes:
        pointer: JSON pointer of the claimed value in the report.
        quantity: what the number is, for people (``"faithfulness, signed, k=0.01"``).
        claimed: the value the report states (``None`` when the report states none and
            the recomputed value is shown for information).
        recomputed: the value recomputed from the declared artifacts.
        abs_tol, rel_tol: the claim passes when
            ``|claimed − recomputed| ≤ abs_tol + rel_tol·|recomputed|``.
    """

    pointer: str
    quantity: str
    claimed: float | None
    recomputed: float
    abs_tol: float
    rel_tol: float

    @property
    def tolerance(self) -> float:
        return tolerance(self.recomputed, self.abs_tol, self.rel_tol)

    @property
    def within(self) -> bool:
        if self.claimed is None:
            return True
        if not (math.isfinite(self.claimed) and math.isfinite(self.recomputed)):
            return self.claimed == self.recomputed
        return within(self.claimed, self.recomputed, self.abs_tol, self.rel_tol)

    def to_json(self) -> dict[str, Any]:
        return {
            "pointer": self.pointer,
            "quantity": self.quantity,
            "claimed": self.claimed,
            "recomputed": self.recomputed,
            "tolerance": self.tolerance,
            "within": self.within,
        }


@dataclass
class Recomputation:
    """What a recomputer returns: a comparison per claimed number it recomputed, and
    findings for what it could not recompute (R104 with the pointer at fault)."""

    comparisons: list[Comparison] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
