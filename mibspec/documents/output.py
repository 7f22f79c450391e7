"""The machine-readable output of ``mibspec verify --format json`` (a stable contract)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._base import Closed

__all__ = ["DocumentOutput", "FindingOutput", "StageOutput", "VerificationOutput"]


class FindingOutput(Closed):
    code: str = Field(pattern=r"^[A-Z][0-9]{3}$")
    severity: Literal["error", "warning", "info"]
    message: str
    pointer: str
    line: int | None = Field(ge=1)
    column: int | None = Field(ge=1)
    hint: str | None = None
    data: dict[str, Any] | None = None


class StageOutput(Closed):
    name: Literal["parse", "schema", "rules", "recompute"]
    status: Literal["passed", "failed", "skipped", "not_run"]
    detail: str | None = None


class DocumentOutput(Closed):
    path: str
    kind: str | None
    valid: bool
    findings: list[FindingOutput]
    stages: list[StageOutput]
    referenced_by: str | None = None


class VerificationOutput(Closed):
    valid: bool
    spec_version: str
    tool: dict[str, str]
    profile: str | None = None
    documents: list[DocumentOutput]
