"""Declared rounding that cannot loosen a check (SPEC.md C-11, C-12, B-2).

A rounding widens what a claim stands for; these rules keep it honest. Each claim a rounding
applies to (its row of the claim catalogue names a kind of rounding) must be a number of that
rounding (C130); the rounding must be no coarser than the report's profile accepts for the
claim's kind (C131, once per declaration and kind); and a p-value of the ``plus_one``
convention, which never reaches zero, is not printed as 0 whatever the rounding (B110).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.claims import claim_catalogue
from mibspec.core.conventions import convention
from mibspec.core.findings import Finding
from mibspec.core.rounding import Rounding, accepted, declared_rounding

from .._context import RuleContext
from ._registry import rule


def _coarsest(ctx: RuleContext, kind: str) -> list[Rounding]:
    bounds = (ctx.profile.get("coarsest_rounding") or {}).get(kind) or []
    return [found for found in (Rounding.from_json(bound) for bound in bounds) if found is not None]


def _shown(roundings: list[Rounding]) -> str:
    return " or ".join(r.describe() for r in roundings) or "none"


@rule("declared-rounding", kinds=("report",), codes=("C130", "C131", "B110"))
def declared_rounding_rule(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Every claim under a declared rounding is a number of it, the rounding is no coarser than
    the profile accepts for the claim's kind, and a plus_one p-value is not printed as 0."""
    exceeded: set[tuple[str, str]] = set()
    for claim in claim_catalogue().instances(doc):
        kind = claim.row.rounding
        if kind is None or not claim.row.numeric:
            continue
        found = declared_rounding(doc, claim.pointer)
        if found is None:
            continue
        rounding, where = found
        value = float(claim.value)
        if not rounding.represents(value):
            yield ctx.finding(
                "C130",
                claim.pointer,
                quantity=claim.row.label,
                value=claim.value,
                rounding=rounding.describe(),
                declared=where,
            )
        coarsest = _coarsest(ctx, kind)
        if (where, kind) not in exceeded and not accepted(rounding, coarsest, value):
            exceeded.add((where, kind))
            yield ctx.finding(
                "C131",
                where,
                rounding=rounding.describe(),
                kind=kind,
                claim=claim.pointer,
                value=claim.value,
                profile=ctx.profile["name"],
                coarsest=_shown(coarsest),
            )
        if kind == "p_value" and value <= 0 and _plus_one(ctx, doc):
            yield ctx.finding("B110", claim.pointer, rounding=rounding.describe())


def _plus_one(ctx: RuleContext, doc: dict[str, Any]) -> bool:
    return bool(convention(ctx.profile, doc, "p_convention").value == "plus_one")
