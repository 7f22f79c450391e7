"""Stage 4: recompute a report's claims from its declared artifacts.

Each track names its recomputer in the track registry (``mibspec.core.tracks``),
imported only when the stage runs so that validation never imports torch. A recomputer is a function
``recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation`` (all three from
:mod:`mibspec.core`; the context is the document's :class:`RuleContext`, which the recomputer
only reads): it loads what the report declares, recomputes every claim it can and returns

* the comparisons — one per claimed number: where the claim is, what it is, the
  claimed value, the recomputed value and the tolerance (:class:`Comparison`);
  :func:`mismatch_findings` turns the ones outside tolerance into R103 findings;
* findings for what could not be recomputed (R104 with the reason and the pointer
  of the declaration at fault), and what it says besides (R106, R111, R114);
* the model files it used, for the receipt.

A recomputation stopped by the stage (its time limit, out of memory) still reports what it
had produced (:func:`mibspec.core.comparisons.produced_before`).

The claim catalogue (``mibspec.core.claims``) says which claims recomputation checks: every
comparison a recomputer returns must be at a claim whose row is marked ``recomputed``, with
the tolerance of the row's class (a defect of mibspec otherwise, never of the report), and a
claim of such a row that got no comparison is R130: it was not checked, so it is never
counted as reproduced.

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
from typing import Any, NamedTuple

from mibspec.core.claims import ClaimRow, claim_catalogue
from mibspec.core.comparisons import Comparison, Recomputation, produced_before, recompute_tolerance
from mibspec.core.findings import Finding
from mibspec.core.progress import NULL_PROGRESS, Progress
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.rounding import claim_rounding
from mibspec.core.spec import install_hint
from mibspec.core.tracks import TRACKS
from mibspec.core.work import over_limits

from ._catalogue import InternalError
from ._context import RuleContext, StageStatus

__all__ = [
    "RecomputeOutcome",
    "catalogued",
    "mismatch_findings",
    "recompute_gaps",
    "run_recompute",
    "unrecomputed_findings",
    "with_rounding",
]


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
    rounding (C-10): a printed value stands for every value that rounds to it. Only claims whose
    row of the claim catalogue names a kind of rounding are widened; counts stay exact."""
    widened = []
    for c in comparisons:
        rounding = None if c.claimed is None else claim_rounding(ctx.data, c.pointer)
        if rounding is not None and c.claimed is not None:
            c = dataclasses.replace(c, abs_tol=c.abs_tol + rounding.half_unit(c.claimed))
        widened.append(c)
    return widened


def catalogued(ctx: RuleContext, comparisons: Iterable[Comparison]) -> list[Comparison]:
    """The comparisons, each checked against the claim catalogue: its claim has a row marked
    ``recomputed`` and it uses the tolerance of the row's class.

    Raises:
        InternalError: a recomputer compared a claim the catalogue does not mark recomputed, or
            under another tolerance (a defect of mibspec: the catalogue and the recomputer disagree).
    """
    catalogue = claim_catalogue()
    track = ctx.data.get("track")
    checked = []
    for c in comparisons:
        row = catalogue.row(track, c.pointer)
        if row is None or row.check != "recomputed":
            what = "no row" if row is None else f"a row marked {row.check}"
            raise InternalError(
                f"the {track} recomputer compared {c.pointer} ({c.quantity}), which has {what} in the "
                "claim catalogue (spec/v1/claims.json)"
            )
        if (c.abs_tol, c.rel_tol) not in _tolerances(ctx, row):
            raise InternalError(
                f"the {track} recomputer compared {c.pointer} under (abs {c.abs_tol:g}, rel {c.rel_tol:g}), "
                f"not the {row.tolerance} tolerance its catalogue row names"
            )
        checked.append(c)
    return checked


def _tolerances(ctx: RuleContext, row: ClaimRow) -> list[tuple[float, float]]:
    """The ``(abs, rel)`` a comparison of a claim of ``row`` may use: its tolerance class under
    the report's profile (``recompute``: the model dtype's, or the consistency tolerance where
    recomputation involves no model)."""
    consistency = (float(ctx.profile["consistency"]["abs"]), float(ctx.profile["consistency"]["rel"]))
    if row.tolerance == "exact":
        return [(0.0, 0.0)]
    if row.tolerance == "consistency":
        return [consistency]
    model = ctx.data.get("model")
    dtype = model.get("dtype", "float32") if isinstance(model, dict) else "float32"
    return [recompute_tolerance(ctx.profile, dtype), consistency]


def recompute_gaps(ctx: RuleContext) -> list[tuple[str, str]]:
    """``(pointer, detail)`` for each declaration, read from the report alone, without which its
    recomputation cannot run: the track's ``gaps`` function (torch-free), imported by name."""
    track = TRACKS.get(str(ctx.data.get("track")))
    if track is None:
        return []
    module_name, function = track.gaps.split(":")
    gaps: Any = getattr(importlib.import_module(module_name), function)
    return list(gaps(ctx.data, ctx.profile))


def unrecomputed_findings(ctx: RuleContext, comparisons: Iterable[Comparison]) -> list[Finding]:
    """R130 for every claim the catalogue marks recomputed that no comparison checked."""
    compared = {c.pointer for c in comparisons if c.claimed is not None}
    return [
        ctx.finding("R130", claim.pointer, quantity=claim.row.label)
        for claim in claim_catalogue().instances(ctx.data)
        if claim.recomputed and claim.pointer not in compared
    ]


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
    context: RecomputeContext = ctx
    try:
        works = list(estimate(context))
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


class RecomputeOutcome(NamedTuple):
    """The recompute stage's status and detail, its findings and comparisons, and the model
    files the recomputation used (for the receipt)."""

    status: StageStatus
    detail: str | None
    findings: list[Finding]
    comparisons: list[Comparison]
    model_files: list[Any]


def run_recompute(ctx: RuleContext, progress: Progress = NULL_PROGRESS) -> RecomputeOutcome:
    track = ctx.data["track"]
    entry = TRACKS.get(track)
    if entry is None:
        finding = ctx.finding(
            "R102",
            "/track",
            detail=f"recomputation of {track} reports is not available in this version; "
            "the claims were checked for consistency only",
        )
        return RecomputeOutcome(
            StageStatus.SKIPPED, f"not available for the {track} track", [finding], [], []
        )
    target, needs = entry.recomputer, entry.recompute_needs
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        finding = ctx.finding(
            "R101",
            "",
            detail=f"recomputation needs {', '.join(missing)}: {install_hint('recompute')}, "
            "or pass --no-recompute to check the report without it",
        )
        return RecomputeOutcome(StageStatus.FAILED, "the recompute extra is not installed", [finding], [], [])
    too_much = _work_finding(ctx, entry.work)
    if too_much is not None:
        return RecomputeOutcome(
            StageStatus.FAILED, "the declared work is over the limits", [too_much], [], []
        )
    module_name, function = target.split(":")
    recompute: Any = getattr(importlib.import_module(module_name), function)
    return _run_recomputer(ctx, recompute, progress)


def _run_recomputer(ctx: RuleContext, recompute: Any, progress: Progress) -> RecomputeOutcome:
    """Run ``recompute`` under the time limit; its comparisons checked against the claim
    catalogue, widened by the claims' rounding, and the claims it did not reach (R130)."""
    context: RecomputeContext = ctx  # what the recomputer reads (mypy checks that it is one)
    limit = ctx.options.limits.max_recompute_seconds
    limit = math.inf if limit is None else limit
    deadline = _Deadline(progress, limit)
    try:
        with _timer(deadline):
            result: Recomputation = recompute(context, deadline if math.isfinite(limit) else progress)
    except RecomputeTimeLimitError as exc:
        produced = produced_before(exc)
        finding = ctx.finding(
            "R105",
            "",
            detail=f"recomputation stopped after its time limit of {limit:g} s, during: {exc}; "
            "no claim was checked",
        )
        detail = f"time limit of {limit:g} s reached"
        return RecomputeOutcome(
            StageStatus.FAILED, detail, [*produced.findings, finding], [], produced.model_files
        )
    except MemoryError as exc:  # an array the declared work needs (10**9 permutations) cannot exist
        produced = produced_before(exc)
        finding = ctx.finding(
            "R104",
            "",
            detail="the work the report declares does not fit in this machine's memory "
            f"({str(exc) or 'out of memory'}); no claim was checked",
        )
        findings = [*produced.findings, finding]
        return RecomputeOutcome(StageStatus.FAILED, "out of memory", findings, [], produced.model_files)
    comparisons = with_rounding(ctx, catalogued(ctx, result.comparisons))
    mismatches = mismatch_findings(ctx, comparisons)
    others = list(result.findings)
    # A recomputation that ran to its end compared every claim it recomputes; one that
    # stopped (R104) compared none, and says why.
    stopped = any(f.severity.value == "error" for f in others)
    missed = [] if stopped else unrecomputed_findings(ctx, comparisons)
    findings = others + mismatches + missed
    failed = any(f.severity.value == "error" for f in findings)
    return RecomputeOutcome(
        StageStatus.FAILED if failed else StageStatus.PASSED,
        _summary(result, others, mismatches, missed),
        findings,
        comparisons,
        list(result.model_files),
    )


def _summary(
    result: Recomputation, others: list[Finding], mismatches: list[Finding], missed: list[Finding]
) -> str:
    """The stage's detail: claims recomputed, how many were not reproduced (R103) or not
    recomputed at all (R130), and the recomputer's other errors (an input it could not use,
    R104), so a failure is never summarised by its successes alone."""
    checked = sum(c.claimed is not None for c in result.comparisons)
    detail = f"{checked} claim(s) recomputed, {len(mismatches)} not reproduced"
    if missed:
        detail += f", {len(missed)} not recomputed (R130)"
    other = [f.code for f in others if f.severity.value == "error"]
    if other:
        detail += f"; {len(other)} other error(s) ({', '.join(sorted(set(other)))})"
    return detail
