"""Stage 4: recompute a report's claims from its declared artifacts.

Each track names its recomputer in the track registry (``mibspec.core.tracks``),
imported only when the stage runs so that validation never imports torch. A recomputer is a function
``recompute(ctx: RuleContext, progress: Progress) -> Recomputation`` (the last two from
:mod:`mibspec.core`): it loads what the report declares, recomputes every claim it can
and returns

* the comparisons — one per claimed number: where the claim is, what it is, the
  claimed value, the recomputed value and the tolerance (:class:`Comparison`);
  :func:`mismatch_findings` turns the ones outside tolerance into R103 findings;
* findings for what could not be recomputed (R104 with the reason and the pointer
  of the declaration at fault).

A track without a recomputer, or a machine without the ``recompute`` extra,
yields a finding and a stage status that says so: the stage is never reported as
passed unless it ran, and it fails when a claim could not be checked.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import time
from collections.abc import Iterable
from typing import Any

from mibspec.core.comparisons import Comparison, Recomputation
from mibspec.core.findings import Finding
from mibspec.core.progress import NULL_PROGRESS, Progress
from mibspec.core.rounding import rounding_at
from mibspec.core.spec import install_hint
from mibspec.core.tracks import TRACKS

from ._context import RuleContext, StageStatus

__all__ = ["mismatch_findings", "run_recompute", "with_rounding"]


def mismatch_findings(ctx: RuleContext, comparisons: Iterable[Comparison]) -> list[Finding]:
    """R103 for every comparison outside its tolerance."""
    findings = []
    for c in comparisons:
        if c.within:
            continue
        assert c.claimed is not None
        findings.append(
            ctx.finding(
                "R103",
                c.pointer,
                quantity=c.quantity,
                claimed=_short(c.claimed),
                recomputed=_short(c.recomputed),
                tolerance=f"{c.tolerance:.3g}",
                data={"claimed": c.claimed, "recomputed": c.recomputed, "tolerance": c.tolerance},
            )
        )
    return findings


def with_rounding(ctx: RuleContext, comparisons: Iterable[Comparison]) -> list[Comparison]:
    """Each comparison, its absolute tolerance widened by the half-unit of the claim's declared
    rounding (C-10): a printed value stands for every value that rounds to it."""
    widened = []
    for c in comparisons:
        rounding = None if c.claimed is None else rounding_at(ctx.data, c.pointer)
        if rounding is not None and c.claimed is not None:
            c = dataclasses.replace(c, abs_tol=c.abs_tol + rounding.half_unit(c.claimed))
        widened.append(c)
    return widened


def _short(value: float) -> str:
    return f"{value:.6g}"


class RecomputeTimeLimitError(Exception):
    """Raised from a progress step once the recompute stage has run past its time limit."""


class _Deadline:
    """Forwards progress and stops the recomputation once ``limit`` seconds have passed.

    Recomputers report progress at every batch, unit or image, so the check is cooperative:
    the stage stops at the first step after the limit, never in the middle of one.
    """

    def __init__(self, progress: Progress, limit: float) -> None:
        self.progress, self.limit = progress, limit
        self.started = time.monotonic()
        self.task = "starting"

    def _check(self) -> None:
        if time.monotonic() - self.started > self.limit:
            raise RecomputeTimeLimitError(self.task)

    def start(self, description: str, total: int) -> None:
        self._check()
        self.task = description
        self.progress.start(description, total)

    def advance(self, steps: int = 1) -> None:
        self.progress.advance(steps)
        self._check()


def run_recompute(
    ctx: RuleContext, progress: Progress = NULL_PROGRESS
) -> tuple[StageStatus, str | None, list[Finding], list[Comparison]]:
    track = ctx.data["track"]
    entry = TRACKS.get(track)
    if entry is None:
        finding = ctx.finding(
            "R102",
            "/track",
            detail=f"recomputation of {track} reports is not available in this version; "
            "the claims were checked for consistency only",
        )
        return StageStatus.SKIPPED, f"not available for the {track} track", [finding], []
    target, needs = entry.recomputer, entry.recompute_needs
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        finding = ctx.finding(
            "R101",
            "",
            detail=f"recomputation needs {', '.join(missing)}: {install_hint('recompute')}, "
            "or pass --no-recompute to check the report without it",
        )
        return StageStatus.FAILED, "the recompute extra is not installed", [finding], []
    module_name, function = target.split(":")
    recompute: Any = getattr(importlib.import_module(module_name), function)
    limit = ctx.options.limits.max_recompute_seconds
    try:
        result: Recomputation = recompute(ctx, progress if limit is None else _Deadline(progress, limit))
    except RecomputeTimeLimitError as exc:
        finding = ctx.finding(
            "R105",
            "",
            detail=f"recomputation stopped after its time limit of {limit:g} s, during: {exc}; "
            "no claim was checked",
        )
        return (
            StageStatus.FAILED,
            f"time limit of {limit:g} s reached",
            [*ctx.recompute_findings, finding],
            [],
        )
    except MemoryError as exc:  # an array the declared work needs (10**9 permutations) cannot exist
        finding = ctx.finding(
            "R104",
            "",
            detail="the work the report declares does not fit in this machine's memory "
            f"({str(exc) or 'out of memory'}); no claim was checked",
        )
        return StageStatus.FAILED, "out of memory", [*ctx.recompute_findings, finding], []
    comparisons = with_rounding(ctx, result.comparisons)
    mismatches = mismatch_findings(ctx, comparisons)
    others = list(ctx.recompute_findings) + list(result.findings)
    findings = others + mismatches
    failed = any(f.severity.value == "error" for f in findings)
    return (
        (StageStatus.FAILED if failed else StageStatus.PASSED),
        _summary(result, others, mismatches),
        findings,
        comparisons,
    )


def _summary(result: Recomputation, others: list[Finding], mismatches: list[Finding]) -> str:
    """The stage's detail: claims recomputed, how many were not reproduced (R103), and the
    recomputer's other errors (an input it could not use, R104), so a failure is never
    summarised by its successes alone."""
    checked = sum(c.claimed is not None for c in result.comparisons)
    detail = f"{checked} claim(s) recomputed, {len(mismatches)} not reproduced"
    other = [f.code for f in others if f.severity.value == "error"]
    if other:
        detail += f"; {len(other)} other error(s) ({', '.join(sorted(set(other)))})"
    return detail
