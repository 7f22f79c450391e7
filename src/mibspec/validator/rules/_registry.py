"""The rule registry. Each rule is a small function ``(doc, ctx) -> Iterator[Finding]``.

Rules register with :func:`rule`, declaring the codes they may emit and the
document kinds they apply to; the registry test checks that every catalogue code
of the rules stage is emitted by some rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mibspec.core.comparisons import within
from mibspec.core.findings import Finding

from .._catalogue import InternalError
from .._context import RuleContext

__all__ = ["RULES", "Rule", "compare", "rule", "run_rules", "with_defaults"]

RuleFn = Callable[[dict[str, Any], RuleContext], Iterator[Finding]]


@dataclass(frozen=True)
class Rule:
    name: str
    fn: RuleFn
    codes: tuple[str, ...]
    kinds: frozenset[str] | None
    description: str


RULES: list[Rule] = []


def rule(
    name: str, *, codes: tuple[str, ...], kinds: tuple[str, ...] | None = None
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule function under ``name``."""

    def register(fn: RuleFn) -> RuleFn:
        doc = (fn.__doc__ or "").strip().splitlines()
        RULES.append(Rule(name, fn, codes, frozenset(kinds) if kinds else None, doc[0] if doc else name))
        return fn

    return register


def with_defaults(ctx: RuleContext, value: dict[str, Any], definition: str) -> dict[str, Any]:
    """``value`` with the schema's defaults for ``$defs/<definition>`` filled in.

    Defaults live in the schema only; rules read them from there rather than repeating them.
    """
    properties = ctx.schema.schema["$defs"][definition]["properties"]
    filled = {key: spec["default"] for key, spec in properties.items() if "default" in spec}
    filled.update(value)
    return filled


def compare(
    ctx: RuleContext, code: str, pointer: str, claimed: float, recomputed: float, **params: Any
) -> Iterator[Finding]:
    """A finding when a claimed value is outside the profile's consistency tolerance of the
    value recomputed from the claimed parts; both values go into the message and the data."""
    tolerance = ctx.profile.consistency
    if not within(claimed, recomputed, tolerance["abs"], tolerance["rel"]):
        yield ctx.finding(
            code,
            pointer,
            claimed=claimed,
            recomputed=recomputed,
            data={"claimed": claimed, "recomputed": recomputed},
            **params,
        )


def run_rules(ctx: RuleContext) -> list[Finding]:
    """Run every rule that applies to the document's kind, in registration order."""
    findings: list[Finding] = []
    for entry in RULES:
        if entry.kinds is not None and ctx.kind not in entry.kinds:
            continue
        try:
            produced = list(entry.fn(ctx.data, ctx))
        except InternalError:
            raise
        except Exception as exc:  # a rule must never crash on a schema-valid document
            raise InternalError(f"rule {entry.name!r} failed on {ctx.path}: {exc!r}") from exc
        for finding in produced:
            if finding.code not in entry.codes:
                raise InternalError(f"rule {entry.name!r} emitted undeclared code {finding.code}")
        findings.extend(produced)
    return findings
