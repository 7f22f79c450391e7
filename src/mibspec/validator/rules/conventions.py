"""Conventions a report declares against its profile's (``mibspec.core.conventions``, PR-3)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.conventions import ALWAYS_BINDING, conventions
from mibspec.core.findings import Finding

from .._context import RuleContext
from ._registry import rule


@rule("report-conventions", kinds=("report",), codes=("C122",))
def report_conventions(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """A report declares no other value for a convention its profile makes binding."""
    for found in conventions(ctx.profile, doc):
        if found.name in ALWAYS_BINDING:
            continue  # grid and checker have codes of their own (K101, V108)
        for pointer, declared, required in found.conflicts():
            yield ctx.finding(
                "C122",
                pointer,
                convention=found.name,
                declared=declared,
                required=required,
                profile=ctx.profile["name"],
            )
