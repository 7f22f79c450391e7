"""Documents migrated from a version under which they did not verify (SPEC.md S-7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.spec import MIGRATION_EXTENSION

from .._context import RuleContext
from ._registry import rule


@rule("migrated-invalid", codes=("C127",))
def migrated_invalid(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """A document whose migration recorded the findings of its input (``mibspec migrate
    --keep-invalid``) is not conformant: migrating never makes a document verify."""
    extensions = doc.get("extensions")
    record = extensions.get(MIGRATION_EXTENSION) if isinstance(extensions, dict) else None
    if record is None:
        return
    findings = record.get("input_findings") if isinstance(record, dict) else None
    codes = sorted(
        {str(f.get("code")) for f in findings if isinstance(f, dict)} if isinstance(findings, list) else set()
    )
    yield ctx.finding(
        "C127",
        f"/extensions/{MIGRATION_EXTENSION}",
        codes=", ".join(codes) or "findings it does not list",
    )
