"""Progress of the recompute stage on a terminal (stderr), or nowhere."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from mibspec.core.display import visible

__all__ = ["TerminalProgress"]


class TerminalProgress:
    """A rich progress bar on stderr, shown only when stderr is a terminal.

    Use as a context manager; :meth:`start` and :meth:`advance` implement
    :class:`mibspec.core.progress.Progress`.
    """

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> TerminalProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}", markup=False),  # descriptions name methods, units
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=sys.stderr),
                transient=True,
            )
            self._progress.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)
            self._progress = None

    def start(self, description: str, total: int) -> None:
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(visible(description), total=total)

    def advance(self, steps: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, steps)
