"""How long computations (recomputation, producers, the engines' loops) report progress.

One interface, :class:`Progress`: ``start(description, total)`` begins a task and
``advance(steps)`` counts steps done. Loops that know how many steps are done so far
(the engines call ``progress(done)`` after each batch) get their callback from
:func:`start_task`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["NULL_PROGRESS", "Progress", "start_task"]


class Progress(Protocol):
    """Where a long computation reports how far it got (a progress bar, a log, nothing)."""

    def start(self, description: str, total: int) -> None:
        """Begin a task of ``total`` steps (replaces the previous task)."""

    def advance(self, steps: int = 1) -> None:
        """``steps`` more steps of the current task are done."""


class _NullProgress:
    def start(self, description: str, total: int) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass


#: Progress reported nowhere.
NULL_PROGRESS: Progress = _NullProgress()


def start_task(progress: Progress | None, description: str, total: int) -> Callable[[int], None]:
    """Start a task on ``progress`` (``None``: nowhere) and return ``advance_to(done)``,
    which takes the number of steps done so far.

    >>> class Log:
    ...     def start(self, description, total): print("start", description, total)
    ...     def advance(self, steps=1): print("advance", steps)
    >>> advance_to = start_task(Log(), "examples", 5)
    start examples 5
    >>> advance_to(2); advance_to(5)
    advance 2
    advance 3
    """
    target = NULL_PROGRESS if progress is None else progress
    target.start(description, total)
    state = {"done": 0}

    def advance_to(done: int) -> None:
        target.advance(done - state["done"])
        state["done"] = done

    return advance_to
