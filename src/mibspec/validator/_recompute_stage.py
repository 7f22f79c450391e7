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

import contextlib
import dataclasses
import importlib
import importlib.util
import math
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from mibspec.core.comparisons import Comparison, Recomputation
from mibspec.core.findings import Finding
from mibspec.core.progress import NULL_PROGRESS, Progress
from mibspec.core.rounding import rounding_at
from mibspec.core.spec import install_hint
from mibspec.core.tracks import TRACKS
from mibspec.core.work import over_limits

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


class RecomputeTimeLimitError(BaseException):
    """Raised once the recompute stage has run past its time limit: from a progress step, or
    from the timer between two Python steps. A ``BaseException``, like ``KeyboardInterrupt``,
    so that no ``except Exception`` of a recomputer turns it into another finding."""


class _Deadline:
    """Forwards progress and stops the recomputation once ``limit`` seconds have passed.

    Recomputers report progress at every batch, unit or image, and the stage stops at the
    first step after the limit. A step that runs far longer than declared (a loop that
    reports no progress) is stopped by :func:`_timer` instead.
    """

    def __init__(self, progress: Progress, limit: float) -> None:
        self.progress, self.limit = progress, limit
        self.started = time.monotonic()
        self.task = "starting"

    def remaining(self) -> float:
        return self.limit - (time.monotonic() - self.started)

    def _check(self) -> None:
        if self.remaining() < 0:
            raise RecomputeTimeLimitError(self.task)

    def start(self, description: str, total: int) -> None:
        self._check()
        self.task = description
        self.progress.start(description, total)

    def advance(self, steps: int = 1) -> None:
        self.progress.advance(steps)
        self._check()


@contextlib.contextmanager
def _timer(deadline: _Deadline) -> Iterator[None]:
    """Raise :class:`RecomputeTimeLimitError` in this thread when ``deadline`` passes, wherever
    the recomputation is (between two Python steps; a call into numpy or torch returns first).

    A POSIX interval timer (``SIGALRM``), used only in the main thread and when no other
    handler is installed for it; elsewhere the progress steps alone enforce the limit. The
    timer is disarmed and the previous handler restored when the block ends.
    """
    usable = (
        hasattr(signal, "setitimer")
        and math.isfinite(deadline.limit)
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)
    )
    if not usable:
        yield
        return
    armed = [True]

    def expire(signum: int, frame: Any) -> None:
        if armed[0]:  # a signal delivered after the block ended is ignored
            raise RecomputeTimeLimitError(deadline.task)

    previous = signal.signal(signal.SIGALRM, expire)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(deadline.remaining(), 0.001))
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _work_finding(ctx: RuleContext, work_function: str) -> Finding | None:
    """R125 when the work the report declares is over the limits (:mod:`mibspec.core.work`)."""
    module_name, function = work_function.split(":")
    estimate: Any = getattr(importlib.import_module(module_name), function)
    try:
        works = list(estimate(ctx))
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, OSError):
        return None  # a declaration the estimate cannot read: the recomputer says what is wrong
    over = over_limits(works, ctx.options.limits)
    if over is None:
        return None
    work, why, option = over
    return ctx.finding(
        "R125",
        work.pointer,
        detail=f"{work.what} {why} ({option}); nothing was recomputed and no claim was checked",
    )


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
    too_much = _work_finding(ctx, entry.work)
    if too_much is not None:
        return StageStatus.FAILED, "the declared work is over the limits", [too_much], []
    module_name, function = target.split(":")
    recompute: Any = getattr(importlib.import_module(module_name), function)
    limit = ctx.options.limits.max_recompute_seconds
    limit = math.inf if limit is None else limit
    deadline = _Deadline(progress, limit)
    try:
        with _timer(deadline):
            result: Recomputation = recompute(ctx, deadline if math.isfinite(limit) else progress)
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
