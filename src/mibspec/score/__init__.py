"""``mibspec score <track>``: run a reference method and write a complete report.

Each track's command lives in its own module here and exposes
``register(app: typer.Typer) -> None``; the module imports only typer and the
standard library at import time (torch and friends are imported inside the
command), so ``mibspec --help`` stays fast.
"""

from __future__ import annotations

#: Modules (under ``mibspec.score``) whose ``register`` adds a ``score`` subcommand.
TRACK_MODULES: tuple[str, ...] = ("circuit", "causal_variable", "saliency", "causal_bench")
