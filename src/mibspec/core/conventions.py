"""The conventions a report is checked and recomputed under: its own declaration, else its profile's.

A profile (``spec/v1/profiles/<name>.json``) declares every convention; a report may state
some of them itself (``settings.p_convention``, ``settings.edge_count_rounding``, …). The
effective convention is the report's declaration when it makes one, else the profile's —
never a schema default. A profile may list conventions in ``binding``: for those the
profile's value applies whatever the report declares, and a report declaring another value
is reported (C122). ``grid`` and ``checker`` are always binding, with codes of their own
(K101, V108). Rules and recomputers read conventions only through :func:`convention`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .tracks import TRACKS

__all__ = [
    "ALWAYS_BINDING",
    "BINDABLE",
    "PER_TASK",
    "REPORT_CONVENTIONS",
    "Convention",
    "convention",
    "conventions",
    "effective_settings",
]

#: Where a report of each track states a convention of its profile (JSON pointers), as each
#: track's descriptor declares it (:mod:`mibspec.core.tracks`).
REPORT_CONVENTIONS: dict[str, dict[str, str]] = {
    name: dict(track.conventions) for name, track in TRACKS.items()
}

#: Conventions the profile's value applies to whatever a report declares, each with its own code.
ALWAYS_BINDING: frozenset[str] = frozenset({"grid", "checker"})

#: Conventions a profile may make binding through its ``binding`` list (conflicts: C122).
BINDABLE: tuple[str, ...] = (
    "edge_count_rounding",
    "ranking",
    "auroc_convention",
    "start_token",
    "answer_token",
    "p_convention",
)

#: Conventions a profile declares per task (an object keyed by the report's ``task.name``),
#: each with the value that applies to a task the profile does not list.
PER_TASK: dict[str, Any] = {"answer_token": "as_written"}

_MISSING = object()


@dataclass(frozen=True)
class Convention:
    """One convention as it applies to one report.

    Attributes:
        name: the profile key (``p_convention``, ``ranking``, …).
        value: the effective value: the report's declaration, else the profile's; the
            profile's when the convention is binding (for ``ranking``, per metric).
        pointer: where the report states it.
        declared: the report's own value, ``None`` when the report is silent.
        profile_value: the profile's value.
        binding: whether the profile's value wins over the report's.
    """

    name: str
    value: Any
    pointer: str
    declared: Any
    profile_value: Any
    binding: bool

    def conflicts(self) -> list[tuple[str, Any, Any]]:
        """``(pointer, declared, required)`` for each declared value a binding profile overrides."""
        if not self.binding or self.declared is None:
            return []
        if isinstance(self.profile_value, Mapping) and isinstance(self.declared, Mapping):
            return [
                (f"{self.pointer}/{key}", value, self.profile_value[key])
                for key, value in self.declared.items()
                if key in self.profile_value and value != self.profile_value[key]
            ]
        if self.declared != self.profile_value:
            return [(self.pointer, self.declared, self.profile_value)]
        return []


def _at(document: Mapping[str, Any], pointer: str) -> Any:
    node: Any = document
    for part in pointer.split("/")[1:]:
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _binding(profile: Mapping[str, Any], name: str) -> bool:
    return name in ALWAYS_BINDING or name in (profile.get("binding") or ())


def convention(profile: Mapping[str, Any], report: Mapping[str, Any], name: str) -> Convention:
    """The convention ``name`` as it applies to ``report`` under ``profile``.

    Raises:
        KeyError: ``name`` is not a convention a report of the report's track states.
    """
    pointer = REPORT_CONVENTIONS[str(report.get("track"))][name]
    found = _at(report, pointer)
    declared = None if found is _MISSING else found
    required = profile[name]
    if name in PER_TASK:  # the profile's value for the report's task
        task = _at(report, "/task/name")
        required = dict(required).get(task if isinstance(task, str) else "", PER_TASK[name])
    binding = _binding(profile, name)
    if declared is None:
        value = required
    elif isinstance(required, Mapping) and isinstance(declared, Mapping):
        # Per metric: a metric the report names takes its value unless the profile binds it.
        value = {**declared, **required} if binding else {**required, **declared}
    else:
        value = required if binding else declared
    return Convention(name, value, pointer, declared, required, binding)


def conventions(profile: Mapping[str, Any], report: Mapping[str, Any]) -> list[Convention]:
    """Every convention a report of the report's track can state, in a fixed order."""
    names = REPORT_CONVENTIONS.get(str(report.get("track")), {})
    return [convention(profile, report, name) for name in names]


def effective_settings(profile: Mapping[str, Any], report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's ``settings`` with every convention stated there resolved by :func:`convention`
    (silent ones filled in from the profile, binding ones the profile's), for recomputers that
    pass settings on as a whole."""
    settings = dict(report.get("settings") or {})
    for name, pointer in REPORT_CONVENTIONS.get(str(report.get("track")), {}).items():
        if pointer == f"/settings/{name}":
            settings[name] = convention(profile, report, name).value
    return settings
