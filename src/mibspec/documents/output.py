"""The machine-readable output of ``mibspec verify --format json`` (a stable contract)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ._base import Closed

__all__ = [
    "ClaimGroup",
    "ClaimsOutput",
    "ComparisonOutput",
    "DocumentOutput",
    "FindingOutput",
    "NotCheckedOutput",
    "StageOutput",
    "VerificationOutput",
]


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


class ComparisonOutput(Closed):
    pointer: str = Field(description="JSON pointer of the claimed value")
    quantity: str
    claimed: float | None = Field(description="null when the report states no value for it")
    recomputed: float
    tolerance: float = Field(ge=0, description="abs + rel·|recomputed| from the profile")
    within: bool


class ClaimGroup(Closed):
    count: int = Field(ge=0)
    pointers: list[str] = Field(description="JSON pointers of the report's values in this group")


class ClaimsOutput(Closed):
    """A report's numbers (and the component sets and tensors of the claim catalogue) by how this
    run checked them (SPEC.md CL-2)."""

    recomputed: ClaimGroup = Field(description="compared with the value recomputation gave")
    derived: ClaimGroup = Field(description="compared with the value its formula gives on other claims")
    declared: ClaimGroup = Field(
        description="declarations: compared with the artifact, document or profile they describe, "
        "or run with by recomputation"
    )
    structure: ClaimGroup = Field(description="checked for structure only (the schema)")


class NotCheckedOutput(Closed):
    setting: str = Field(
        description="the profile key that decides it, e.g. `check_circuit_size`, `severity.K106`"
    )
    what: str = Field(description="what goes unchecked")
    codes: list[str] = Field(description="the rules that would have checked it")


class DocumentOutput(Closed):
    path: str
    kind: str | None
    valid: bool
    findings: list[FindingOutput]
    stages: list[StageOutput]
    referenced_by: str | None = None
    recomputed: list[ComparisonOutput] | None = Field(
        default=None, description="the recompute stage's claimed and recomputed values"
    )
    claims: ClaimsOutput | None = Field(
        default=None,
        description="a report that passed its schema: which of its numbers were recomputed, derived, "
        "declared or checked for structure only",
    )
    profile: str | None = Field(
        default=None, description="a report's profile: the one it was checked under (spec 1.1)"
    )
    not_checked: list[NotCheckedOutput] | None = Field(
        default=None,
        description="a report's: what its profile does not check (SPEC.md V-5; spec 1.1), from the "
        "profile's data; empty when it checks everything",
    )


class VerificationOutput(Closed):
    valid: bool
    spec_version: str
    tool: dict[str, str]
    profile: str | None = None
    documents: list[DocumentOutput]
