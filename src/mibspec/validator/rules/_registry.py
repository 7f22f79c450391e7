"""The rule registry. Each rule is a small function ``(doc, ctx) -> Iterator[Finding]``.

Rules register with :func:`rule`, declaring the codes they may emit, the document
kinds they apply to and, for a report rule, the track (a rule never tests the track
itself); the registry test checks that every catalogue code of the rules stage is
emitted by some rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.rounding import claim_rounding, intervals_meet
from mibspec.core.tracks import TRACKS

from .._catalogue import InternalError
from .._context import RuleContext

__all__ = ["RULES", "Rule", "compare", "interval", "rule", "run_rules", "with_defaults"]

RuleFn = Callable[[dict[str, Any], RuleContext], Iterator[Finding]]


@dataclass(frozen=True)
class Rule:
    name: str
    fn: RuleFn
    codes: tuple[str, ...]
    kinds: frozenset[str] | None
    description: str
    #: The report track the rule checks (``None``: every document of its kinds).
    track: str | None = None

    def applies_to(self, ctx: RuleContext) -> bool:
        """Whether the document in ``ctx`` is of one of the rule's kinds (and its track)."""
        if self.kinds is not None and ctx.kind not in self.kinds:
            return False
        return self.track is None or ctx.data.get("track") == self.track


RULES: list[Rule] = []


def rule(
    name: str,
    *,
    codes: tuple[str, ...],
    kinds: tuple[str, ...] | None = None,
    track: str | None = None,
) -> Callable[[RuleFn], RuleFn]:
    """Register a rule function under ``name``; with ``track``, it checks the reports of that
    track only (``kinds`` is then ``("report",)``)."""
    if track is not None and track not in TRACKS:
        raise InternalError(f"rule {name!r} names an unknown track {track!r}")
    if track is not None:
        kinds = ("report",)

    def register(fn: RuleFn) -> RuleFn:
        doc = (fn.__doc__ or "").strip().splitlines()
        RULES.append(
            Rule(name, fn, codes, frozenset(kinds) if kinds else None, doc[0] if doc else name, track)
        )
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


def interval(ctx: RuleContext, pointer: str, value: float) -> tuple[float, float]:
    """The values the number at ``pointer`` stands for under the declared rounding (C-10):
    ``(value, value)`` when none applies, or when the claim catalogue says no rounding applies
    to that number (counts, sizes, declarations)."""
    rounding = claim_rounding(ctx.data, pointer) if ctx.kind == "report" else None
    return (value, value) if rounding is None else rounding.interval(value)


def compare(
    ctx: RuleContext,
    code: str,
    pointer: str,
    claimed: float,
    recomputed: float,
    *,
    bounds: tuple[float, float] | None = None,
    **params: Any,
) -> Iterator[Finding]:
    """A finding when a claimed value is outside the profile's consistency tolerance of the
    value recomputed from the claimed parts; both values go into the message and the data.

    Under a declared rounding (C-10) the claim stands for an interval, and ``bounds`` are the
    least and greatest values the formula takes over the intervals of its inputs (default: the
    recomputed value itself, for inputs that are exact); the claim holds when the two meet.
    """
    tolerance = ctx.profile.consistency
    derived = (recomputed, recomputed) if bounds is None else bounds
    if not intervals_meet(interval(ctx, pointer, claimed), derived, tolerance["abs"], tolerance["rel"]):
        yield ctx.finding(
            code,
            pointer,
            claimed=claimed,
            recomputed=recomputed,
            data={"claimed": claimed, "recomputed": recomputed},
            **params,
        )


def run_rules(ctx: RuleContext) -> list[Finding]:
    """Run every rule that applies to the document's kind and track, in registration order."""
    findings: list[Finding] = []
    for entry in RULES:
        if not entry.applies_to(ctx):
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
