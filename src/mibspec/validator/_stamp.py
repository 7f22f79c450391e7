"""What a report's verdict rests on (SPEC.md CL-2): each of its numbers, by how this run checked it.

Every number of a report (and every component set and tensor the claim catalogue lists) falls
in one group, in this order of precedence:

* ``recomputed``: recomputation compared it with the value it recomputed (a comparison with
  the claimed value in the recompute stage's list);
* ``derived``: a consistency rule of the rules stage, which passed, compared it with the value
  its formula gives on other claims (its row names ``derived_from``);
* ``declared``: a declaration (its row's check, or a recomputed row that also names what the
  rules compare it with, such as a circuit report's edge total, when recomputation did not run),
  which a rule compares with the artifact, document or profile it describes, or which
  recomputation runs with;
* ``structure``: only the schema constrained it: its row checks nothing more, or the check
  that would have (recomputation) did not run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mibspec.core.claims import ClaimInstance, claim_catalogue
from mibspec.core.comparisons import Comparison

__all__ = ["GROUPS", "ClaimStamp", "claim_stamp"]

#: The groups, in the order the outputs list them.
GROUPS = ("recomputed", "derived", "declared", "structure")


@dataclass
class ClaimStamp:
    """The pointers of a report's numbers by group (:data:`GROUPS`), and their labels."""

    groups: dict[str, list[str]] = field(default_factory=lambda: {group: [] for group in GROUPS})
    #: Each pointer's row of the claim catalogue, as ``(label, pattern)``.
    rows: dict[str, tuple[str, str]] = field(default_factory=dict)

    def count(self, group: str) -> int:
        return len(self.groups[group])

    def summary(self, group: str) -> str:
        """A group for people: each row's label with its pointer, or with its count and pattern.

        >>> stamp = ClaimStamp()
        >>> stamp.groups["derived"] = ["/claims/cpr/value"]
        >>> stamp.rows["/claims/cpr/value"] = ("CPR", "/claims/cpr/value")
        >>> stamp.summary("derived")
        'CPR (/claims/cpr/value)'
        """
        seen: dict[tuple[str, str], list[str]] = {}
        for pointer in self.groups[group]:
            seen.setdefault(self.rows[pointer], []).append(pointer)
        parts = []
        for (label, pattern), pointers in seen.items():
            parts.append(
                f"{label} ({pointers[0]})" if len(pointers) == 1 else f"{label} ×{len(pointers)} ({pattern})"
            )
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            group: {"count": len(pointers), "pointers": list(pointers)}
            for group, pointers in self.groups.items()
        }


def _group(claim: ClaimInstance, compared: set[str], rules_passed: bool) -> str:
    if claim.pointer in compared:
        return "recomputed"
    if claim.row.derived_from and rules_passed:
        return "derived"
    if claim.row.check == "declaration" or claim.row.compared_with:
        return "declared"
    return "structure"


def claim_stamp(
    document: dict[str, Any], comparisons: Iterable[Comparison], rules_passed: bool
) -> ClaimStamp:
    """The stamp of a schema-valid report: its numbers grouped by how this run checked them."""
    compared = {c.pointer for c in comparisons if c.claimed is not None}
    stamp = ClaimStamp()
    for claim in claim_catalogue().instances(document):
        stamp.groups[_group(claim, compared, rules_passed)].append(claim.pointer)
        stamp.rows[claim.pointer] = (claim.row.label, claim.row.pointer)
    return stamp
