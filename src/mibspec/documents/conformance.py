"""The ``expected.json`` of a conformance case."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._base import Closed

__all__ = ["Expectation", "ExpectedFinding"]


class ExpectedFinding(Closed):
    code: str = Field(pattern=r"^[A-Z][0-9]{3}$")
    pointer: str = Field(description="JSON pointer of the finding ('' is the root)")
    document: str | None = Field(
        default=None, description="for findings in a referenced document: its path relative to the case"
    )


class Expectation(Closed):
    """What an implementation must report for one case. Never message prose."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    kind: str
    verdict: Literal["valid", "invalid"]
    requirements: list[str] = Field(min_length=1, description="SPEC.md requirement ids tested")
    description: str = Field(min_length=1)
    document: str = Field(default="document.json", description="file to verify, relative to the case")
    findings: list[ExpectedFinding] = Field(
        default_factory=list, description="every error-level finding, exactly (code and pointer)"
    )
    warnings: list[ExpectedFinding] = Field(
        default_factory=list, description="warnings that must be present (others are allowed)"
    )
    max_bytes: int | None = Field(default=None, ge=1, description="limit to run the case with")
    max_depth: int | None = Field(default=None, ge=1, description="limit to run the case with")
