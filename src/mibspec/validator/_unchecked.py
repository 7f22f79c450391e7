"""What a report's profile does not check (SPEC.md V-5), read from the profile and the spec.

A profile setting whose schema carries ``x-mibspec-unchecked`` (``documents.profile``) names
the value under which reports of a track are not checked for something: ``mib-2025``'s
``check_circuit_size: false`` leaves circuit sizes against k unchecked (K103). A profile's
``severity`` map turning a rule off, or an error into a warning, leaves what that rule checks
unenforced. Nothing here names a profile: the list follows from the profile's data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mibspec.core.spec import SPEC_VERSION, load_spec_json
from mibspec.core.tracks import TRACKS

from .rules import RULES

__all__ = ["NotChecked", "not_checked"]


@dataclass(frozen=True)
class NotChecked:
    """One thing a profile does not check.

    Attributes:
        setting: the profile key that decides it (``check_circuit_size``, ``severity.K106``).
        what: what goes unchecked, for people.
        codes: the rules that would have checked it.
    """

    setting: str
    what: str
    codes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "what": self.what, "codes": list(self.codes)}


def not_checked(profile: Mapping[str, Any], track: str | None) -> list[NotChecked]:
    """What ``profile`` does not check in a report of ``track``, in the order of the profile
    schema's settings, then of its severity map."""
    found = []
    properties = load_spec_json(SPEC_VERSION, "schemas/profile.schema.json")["properties"]
    for name, spec in properties.items():
        mark = spec.get("x-mibspec-unchecked")
        if mark and mark["track"] == track and name in profile and profile[name] == mark["when"]:
            codes = tuple(mark["codes"])
            found.append(NotChecked(name, mark["what"] + (f" ({', '.join(codes)})" if codes else ""), codes))
    catalogue = {entry["code"]: entry for entry in load_spec_json(SPEC_VERSION, "rules.json")["rules"]}
    for code, level in sorted((profile.get("severity") or {}).items()):
        entry = catalogue.get(code)
        if entry is None or not _concerns(code, track, RULES):
            continue
        if level == "off":
            what = f"{entry['symbol']} ({code} off)"
        elif entry["severity"] == "error" and level in ("warning", "info"):
            what = f"{entry['symbol']} ({code} only {'a warning' if level == 'warning' else 'information'})"
        else:
            continue  # as strict as the catalogue's severity, or stricter
        found.append(NotChecked(f"severity.{code}", what, (code,)))
    return found


def _concerns(code: str, track: str | None, rules: list[Any]) -> bool:
    """Whether ``code`` can be reported on a report of ``track`` or a document it references:
    a rule of another track's modules (``core.tracks``) cannot; a code no rule emits (the
    other stages) or a rule of every document can."""
    modules = [rule.fn.__module__ for rule in rules if code in rule.codes]
    if not modules:
        return True
    own = set(TRACKS[track].rules) if track in TRACKS else set()
    every_track = {module for entry in TRACKS.values() for module in entry.rules}
    return any(module in own or module not in every_track for module in modules)
