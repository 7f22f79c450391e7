"""The work a report declares for its recomputation, estimated before any of it is done.

Sizes and counts a report declares drive the recomputation: a planted model's layers and
heads, the permutations of a convergence test, the trials and permutations of a Shapley
ground truth, the rows of a dataset, the circuits of a curve, the units of a
causal-variable report. Each track's estimator (named by its track descriptor,
``mibspec.core.tracks``) turns them into :class:`Work` items: at least how many seconds the
step takes at the fastest rates below, and at least how many bytes it holds at once. The
recompute stage compares every item with its :class:`~mibspec.core.strict_json.Limits`
(``max_recompute_seconds`` and ``max_recompute_bytes``) before the recomputation starts;
work over a limit is R125 at the declaration that asks for it, and nothing is recomputed.

The estimates are lower bounds at generous rates, so that only work that cannot finish
within the limits on any machine this runs on is refused; what is refused here would have
run for hours or been stopped by the system for its memory. What passes is still bounded
by the time limit while it runs (R105).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from mibspec.core.strict_json import Limits

__all__ = [
    "CALLS_PER_SECOND",
    "ELEMENTS_PER_SECOND",
    "MIN_REFUSED_SECONDS",
    "MULTIPLY_ADDS_PER_SECOND",
    "Work",
    "over_limits",
]

#: numpy element operations per second in one process (a memory-bound pass over bytes).
ELEMENTS_PER_SECOND = 1e10
#: Python-level steps per second: a behaviour evaluated with its own random generator, one
#: model call.
CALLS_PER_SECOND = 1e6
#: Multiply-adds per second of a model's forward pass: on a CPU, and on an accelerator.
MULTIPLY_ADDS_PER_SECOND = {"cpu": 1e12, "accelerator": 1e15}


@dataclass(frozen=True)
class Work:
    """One step of a recomputation, as its declarations size it.

    Attributes:
        pointer: the declaration that asks for the work (where R125 points).
        what: the step, for the message ("circuit discovery on the 8L/8007H planted model").
        seconds: at least this long at the rates of this module.
        bytes: at least this much memory held at once.
    """

    pointer: str
    what: str
    seconds: float = 0.0
    bytes: float = 0.0


#: Work estimated under this many seconds is never refused for its time: the estimates are
#: not that precise, and the time limit stops it while it runs (R105).
MIN_REFUSED_SECONDS = 1.0


def over_limits(works: Iterable[Work], limits: Limits) -> tuple[Work, str, str] | None:
    """The first item over ``limits`` (its memory first, then its time): the item, why, and
    the limit's option (``--max-recompute-bytes`` or ``--max-recompute-seconds``); ``None``
    when all fit. A time limit of ``None`` or infinity bounds no time; an item estimated
    under :data:`MIN_REFUSED_SECONDS` is not refused for its time."""
    seconds = limits.max_recompute_seconds
    bound = max(seconds, MIN_REFUSED_SECONDS) if seconds is not None and math.isfinite(seconds) else None
    for work in works:
        if work.bytes > limits.max_recompute_bytes:
            limit = _size(limits.max_recompute_bytes)
            why = f"holds at least {_size(work.bytes)} at once, over the limit of {limit}"
            return work, why, "--max-recompute-bytes"
        if bound is not None and work.seconds > bound:
            why = (
                f"takes at least {_duration(work.seconds)} at the fastest this implementation computes, "
                f"over the limit of {seconds:g} s"
            )
            return work, why, "--max-recompute-seconds"
    return None


def _size(value: float) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} bytes"


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.3g} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} hours"
    return f"{seconds:.3g} s"
