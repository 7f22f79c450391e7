"""``mibspec score <track>``: run a reference method and write a complete report.

Each track's command lives in its own module here (named by the track registry,
``mibspec.core.tracks``) and exposes
``register(app: typer.Typer) -> None``; the module imports only typer and the
standard library at import time (torch and friends are imported inside the
command), so ``mibspec --help`` stays fast.
"""

from __future__ import annotations
