"""The rule catalogue (``spec/v1/rules.json``): stable codes, symbols, messages."""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from typing import Any

from mibspec._resources import load_spec_json

from ._findings import Severity

__all__ = ["Catalogue", "RuleInfo", "catalogue"]


@dataclass(frozen=True)
class RuleInfo:
    code: str
    symbol: str
    severity: Severity
    stage: str
    requirement: str
    summary: str
    message: str

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
def catalogue(spec_version: str = "1.0") -> Catalogue:
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
        )
        for entry in raw["rules"]
    )
    return Catalogue(raw["spec_version"], dict(raw["families"]), rules, tuple(raw["retired"]))
