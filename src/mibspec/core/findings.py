"""Findings: what every stage of the validator reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Finding", "Severity"]


class Severity(str, enum.Enum):
    """How much a finding matters. Errors make a document non-conformant."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    """One problem found in a document.

    Attributes:
        code: stable rule code from the catalogue (``spec/v1/rules.json``).
        severity: error, warning or info (the profile may override the default).
        message: short, human-readable statement of the problem.
        pointer: RFC 6901 JSON pointer into the document ("" is the root).
        line: 1-based line of the pointed value, when known.
        column: 1-based column (in characters) of the pointed value, when known.
        hint: what to do about it, when there is something useful to say.
        data: machine-readable details (for example ``claimed`` and ``recomputed``).
    """

    code: str
    severity: Severity
    message: str
    pointer: str = ""
    line: int | None = None
    column: int | None = None
    hint: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def located(self, line: int | None, column: int | None) -> Finding:
        return replace(self, line=line, column=column)

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}" if self.line is not None else "-"
        text = f"{where} {self.code} [{self.severity.value}] {self.message}"
        if self.pointer:
            text += f" (at {self.pointer or '/'})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "pointer": self.pointer,
            "line": self.line,
            "column": self.column,
        }
        if self.hint:
            out["hint"] = self.hint
        if self.data:
            out["data"] = self.data
        return out
