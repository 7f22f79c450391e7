"""The rule catalogue (``spec/v1/rules.json``): stable codes, symbols, messages; the
findings built from it."""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from typing import Any

from mibspec.core.findings import Finding, Severity
from mibspec.core.spec import SPEC_VERSION, load_spec_json
from mibspec.core.strict_json import PARSE_CODES, ParsedDocument

__all__ = [
    "PARSE_CODES",
    "Catalogue",
    "InternalError",
    "RuleInfo",
    "catalogue",
    "make_finding",
    "parse_findings",
]


class InternalError(RuntimeError):
    """A defect in mibspec itself (exit code 3), never a property of the input."""


@dataclass(frozen=True)
class RuleInfo:
    code: str
    symbol: str
    severity: Severity
    stage: str
    requirement: str
    summary: str
    message: str
    #: Further requirements the rule checks (metrics/*.md, datasets.md, SPEC.md), besides ``requirement``.
    enforces: tuple[str, ...] = ()

    def format(self, params: dict[str, Any]) -> str:
        """Fill the message template; a missing parameter is shown, never an exception."""
        return string.Formatter().vformat(self.message, (), _Lenient(params))


class _Lenient(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class Catalogue:
    spec_version: str
    families: dict[str, str]
    rules: tuple[RuleInfo, ...]
    retired: tuple[dict[str, str], ...]

    @functools.cached_property
    def by_code(self) -> dict[str, RuleInfo]:
        return {rule.code: rule for rule in self.rules}

    @functools.cached_property
    def by_symbol(self) -> dict[str, RuleInfo]:
        return {rule.symbol: rule for rule in self.rules}

    def get(self, code_or_symbol: str) -> RuleInfo:
        found = self.by_code.get(code_or_symbol.upper()) or self.by_symbol.get(code_or_symbol)
        if found is None:
            raise KeyError(code_or_symbol)
        return found


@functools.lru_cache(maxsize=4)
def catalogue(spec_version: str = SPEC_VERSION) -> Catalogue:
    raw = load_spec_json(spec_version, "rules.json")
    rules = tuple(
        RuleInfo(
            code=entry["code"],
            symbol=entry["symbol"],
            severity=Severity(entry["severity"]),
            stage=entry["stage"],
            requirement=entry["requirement"],
            summary=entry["summary"],
            message=entry["message"],
            enforces=tuple(entry.get("enforces", ())),
        )
        for entry in raw["rules"]
    )
    return Catalogue(raw["spec_version"], dict(raw["families"]), rules, tuple(raw["retired"]))


def make_finding(
    cat: Catalogue,
    profile: Any,
    code: str,
    pointer: str = "",
    /,
    *,
    hint: str | None = None,
    data: dict[str, Any] | None = None,
    **params: Any,
) -> Finding:
    """A finding for ``code`` with the catalogue's message and severity (or the profile's).

    Raises:
        InternalError: the code is not in the catalogue.
    """
    try:
        info = cat.by_code[code]
    except KeyError as exc:
        raise InternalError(f"rule code {code} is not in the catalogue") from exc
    severity = info.severity
    override = getattr(profile, "severity", {}).get(code) if profile is not None else None
    if override and override != "off":
        severity = Severity(override)
    return Finding(
        code=code,
        severity=severity,
        message=info.format(params),
        pointer=pointer,
        hint=hint,
        data=data or {},
    )


def parse_findings(parsed: ParsedDocument, cat: Catalogue, *, hints: bool = True) -> list[Finding]:
    """A finding for each of a parsed file's problems, at the problem's line:column when
    its offset is known (``None`` otherwise); with the parser's hint when ``hints``."""
    findings = []
    for problem in parsed.problems:
        finding = make_finding(
            cat,
            None,
            PARSE_CODES[problem.symbol],
            problem.pointer,
            hint=problem.hint if hints else None,
            detail=problem.message,
        )
        findings.append(finding.located(*parsed.position_of(problem.offset)))
    return findings
