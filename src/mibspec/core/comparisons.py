"""Claimed numbers against recomputed ones, under a profile's ``(abs, rel)`` tolerance.

The validator's rules compare a claim with the value recomputed from the report's own
parts (the profile's ``consistency`` tolerance); the recompute stage compares it with the
value recomputed from the declared artifacts (the profile's ``recompute`` tolerance for
the model's dtype). Both pass a claim when ``|claimed − recomputed| ≤ abs + rel·|recomputed|``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .findings import Finding

__all__ = [
    "REASSOCIATION",
    "Comparison",
    "Recomputation",
    "first_difference",
    "produced_before",
    "recompute_tolerance",
    "tolerance",
    "within",
]

#: How far two evaluations of the same quantity may differ when only the shape of the
#: computation differs (batch size, circuits stacked together, a group of reports): by
#: floating-point reassociation inside matrix products, relative to the largest magnitude
#: among the values compared (engine.md ME-10). Outputs that carry such values agree within
#: it, never bit for bit: the order of a product's sums depends on the CPU's kernels.
REASSOCIATION: dict[str, float] = {"float32": 1e-6, "float64": 1e-13}


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
    """Everything a recomputer produces, returned to the recompute stage.

    Attributes:
        comparisons: one per claimed number it recomputed.
        findings: what it could not recompute (R104 with the pointer at fault), and what it
            reports besides (R106 unpinned model files, R111 cached digests, R114 a batch
            size kept), in the order they arose.
        model_files: the model files it used (``ModelFile``: name, resolved path, SHA-256
            and size of the bytes used, whether the digest came from the file-hash cache),
            for the receipt.
    """

    comparisons: list[Comparison] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    model_files: list[Any] = field(default_factory=list)

    def extend(self, other: Recomputation) -> None:
        """Add what ``other`` produced after what this one holds."""
        self.comparisons.extend(other.comparisons)
        self.findings.extend(other.findings)
        self.model_files.extend(other.model_files)

    @contextlib.contextmanager
    def until_stopped(self) -> Iterator[Recomputation]:
        """Run a recomputation producing into this one; when it is stopped from outside (the
        stage's time limit, out of memory), the exception that stops it carries what was
        produced so far (:func:`produced_before`), so that it is still reported."""
        try:
            yield self
        except BaseException as exc:
            vars(exc).setdefault(_PRODUCED, self)
            raise


_PRODUCED = "mibspec_recomputation"


def produced_before(exc: BaseException) -> Recomputation:
    """What a recomputation stopped by ``exc`` had produced (empty when it said nothing)."""
    produced = vars(exc).get(_PRODUCED)
    return produced if isinstance(produced, Recomputation) else Recomputation()


def first_difference(a: Any, b: Any, rel_tol: float, pointer: str = "") -> str | None:
    """The JSON pointer of the first place where two JSON values disagree, else None.

    Objects must have the same keys and arrays the same lengths; strings, booleans, None
    and integers must be equal; floats may differ by ``rel_tol·max(1, |a|, |b|)`` (a float
    and an integer of equal value agree). Used to compare two outputs of the same
    verification computed in differently shaped ways (ME-10).

    >>> first_difference({"x": [1.0, 0.5]}, {"x": [1.0, 0.5000001]}, 1e-6) is None
    True
    >>> first_difference({"x": [1.0, 0.5], "ok": True}, {"x": [1.0, 0.6], "ok": True}, 1e-6)
    '/x/1'
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if a.keys() != b.keys():
            return pointer or "/"
        for key in a:
            token = str(key).replace("~", "~0").replace("/", "~1")
            found = first_difference(a[key], b[key], rel_tol, f"{pointer}/{token}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return pointer or "/"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, rel_tol, f"{pointer}/{i}")
            if found is not None:
                return found
        return None
    numbers = (int, float)
    if (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and (isinstance(a, float) or isinstance(b, float))
    ):
        if math.isfinite(a) and math.isfinite(b):
            close = abs(a - b) <= rel_tol * max(1.0, abs(a), abs(b))
        else:
            close = a == b or (math.isnan(a) and math.isnan(b))
        return None if close else (pointer or "/")
    return None if type(a) is type(b) and a == b else (pointer or "/")
