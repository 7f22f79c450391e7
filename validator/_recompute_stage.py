"""Stage 4: recompute a report's claims from its declared artifacts.

Each track plugs in a recomputer, imported only when the stage runs so that
validation never imports torch. A track without a recomputer, or a machine
without the ``recompute`` extra, yields a finding and a stage status that says
so: the stage is never reported as passed unless it ran.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ._engine import RuleContext, StageStatus
from ._findings import Finding

__all__ = ["RECOMPUTERS", "run_recompute"]

#: track → (``module:function`` of the recomputer, the extra's modules it needs).
RECOMPUTERS: dict[str, tuple[str, tuple[str, ...]]] = {}


def run_recompute(ctx: RuleContext) -> tuple[StageStatus, str | None, list[Finding]]:
    track = ctx.data["track"]
    entry = RECOMPUTERS.get(track)
    if entry is None:
        finding = ctx.finding(
            "R102",
            "/track",
            detail=f"recomputation of {track} reports is not available in this version; "
            "the claims were checked for consistency only",
        )
        return StageStatus.SKIPPED, f"not available for the {track} track", [finding]
    target, needs = entry
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    if missing:
        finding = ctx.finding(
            "R101",
            "",
            detail=f"recomputation needs {', '.join(missing)}; install mibspec[recompute] "
            "or pass --no-recompute to check the report without it",
        )
        return StageStatus.FAILED, "the recompute extra is not installed", [finding]
    module_name, function = target.split(":")
    recompute: Any = getattr(importlib.import_module(module_name), function)
    findings: list[Finding] = list(recompute(ctx))
    failed = any(f.severity.value == "error" for f in findings)
    return (StageStatus.FAILED if failed else StageStatus.PASSED), None, findings
