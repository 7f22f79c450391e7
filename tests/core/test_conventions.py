"""The effective convention of a report: its own declaration, else its profile's; a binding
profile's value wins, and the conflict is visible."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mibspec.core.conventions import (
    ALWAYS_BINDING,
    BINDABLE,
    REPORT_CONVENTIONS,
    convention,
    conventions,
    effective_settings,
)
from mibspec.core.profiles import known_profiles, load_profile
from mibspec.core.spec import spec_dir
from mibspec.core.tracks import TRACKS
from mibspec.documents.report import report_models, track_of

SPEC = spec_dir()
REPORT_MODELS = report_models(TRACKS)
SRC = Path(__file__).resolve().parents[2] / "src" / "mibspec"


def _report(track: str, **settings: object) -> dict[str, object]:
    return {"track": track, "settings": dict(settings), "claims": {}}


def _other(value: object) -> object:
    """A value of the same convention that differs from ``value``."""
    alternatives = {
        "plus_one": "paper",
        "paper": "plus_one",
        "floor": "ceil",
        "ceil": "floor",
        "exact_token": "substring",
        "substring": "exact_token",
        "mib": "rank",
        "rank": "mib",
    }
    return alternatives[value]  # type: ignore[index]


SCALARS = [
    ("causal_bench", "p_convention"),
    ("causal_variable", "checker"),
    ("circuit", "edge_count_rounding"),
]


@pytest.mark.parametrize("profile_name", known_profiles())
@pytest.mark.parametrize(("track", "name"), SCALARS)
def test_a_silent_report_gets_its_profiles_convention(profile_name: str, track: str, name: str) -> None:
    profile = load_profile(profile_name)
    found = convention(profile, _report(track), name)
    assert found.declared is None
    assert found.value == profile[name]
    assert found.conflicts() == []
    assert effective_settings(profile, _report(track))[name] == profile[name]


@pytest.mark.parametrize(("track", "name"), SCALARS)
def test_a_declaration_applies_unless_the_profile_binds_it(track: str, name: str) -> None:
    base = dict(load_profile("default"))
    declared = _other(base[name])
    free = {**base, "binding": []}
    found = convention(free, _report(track, **{name: declared}), name)
    if name in ALWAYS_BINDING:
        assert found.value == base[name]
        assert found.conflicts() == [(f"/settings/{name}", declared, base[name])]
    else:
        assert found.value == declared
        assert found.conflicts() == []
    bound = {**base, "binding": [name] if name in BINDABLE else []}
    found = convention(bound, _report(track, **{name: declared}), name)
    assert found.value == base[name]
    assert found.conflicts() == [(f"/settings/{name}", declared, base[name])]


def test_ranking_is_resolved_per_metric() -> None:
    profile = {**dict(load_profile("default")), "binding": []}
    report = _report("circuit", ranking={"cpr": "absolute"})
    found = convention(profile, report, "ranking")
    assert found.value == {**profile["ranking"], "cpr": "absolute"}
    bound = convention({**profile, "binding": ["ranking"]}, report, "ranking")
    assert bound.value == profile["ranking"]
    assert bound.conflicts() == [("/settings/ranking/cpr", "absolute", profile["ranking"]["cpr"])]


def test_a_convention_stated_in_the_claims_is_read_there() -> None:
    profile = {**dict(load_profile("default")), "binding": ["auroc_convention"]}
    report = {"track": "circuit", "settings": {}, "claims": {"auroc": {"convention": "mib"}}}
    found = convention(profile, report, "auroc_convention")
    assert found.declared == "mib"
    assert found.conflicts() == [("/claims/auroc/convention", "mib", profile["auroc_convention"])]
    assert "auroc_convention" not in effective_settings(profile, report)


def test_the_default_profile_binds_the_p_value_convention() -> None:
    profile = load_profile("default")
    found = convention(profile, _report("causal_bench", p_convention="paper"), "p_convention")
    assert found.value == "plus_one"
    assert found.conflicts() == [("/settings/p_convention", "paper", "plus_one")]


def test_every_report_convention_is_a_profile_key_and_a_report_field() -> None:
    profile_schema = json.loads((SPEC / "schemas" / "profile.schema.json").read_text(encoding="utf-8"))
    report_schema = json.loads((SPEC / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    # Each track's settings object, by the typed report model of the track.
    settings = {
        track_of(model): model.model_fields["settings"].annotation.__name__ for model in REPORT_MODELS
    }
    for track, names in REPORT_CONVENTIONS.items():
        for name, pointer in names.items():
            assert name in profile_schema["required"], name
            if pointer.startswith("/settings/"):
                fields = report_schema["$defs"][settings[track]]["properties"]
                assert pointer.removeprefix("/settings/") in fields
    binding = profile_schema["properties"]["binding"]["items"]["enum"]
    assert tuple(binding) == BINDABLE
    assert set(BINDABLE).isdisjoint(ALWAYS_BINDING)
    assert set(BINDABLE) | ALWAYS_BINDING == {n for names in REPORT_CONVENTIONS.values() for n in names}


def test_every_track_with_conventions_lists_them_in_order() -> None:
    profile = load_profile("mib-2025")
    names = [c.name for c in conventions(profile, _report("circuit", grid=[0.5, 1.0], ranking={}))]
    assert names == list(REPORT_CONVENTIONS["circuit"])
    assert conventions(profile, _report("saliency")) == []


# Rules and recomputers read the conventions a report can state only through core.conventions.
_NAMES = "p_convention|edge_count_rounding|checker|ranking"
_DIRECT_READ = re.compile(rf"""settings"?\]?\s*(\[\s*["']({_NAMES})["']\s*\]|\.get\(\s*["']({_NAMES})["'])""")


@pytest.mark.parametrize(
    "path",
    [
        *sorted((SRC / "validator" / "rules").glob("*.py")),
        *sorted((SRC / "reference_impl" / "recompute").glob("*.py")),
    ],
    ids=lambda p: p.name,
)
def test_rules_and_recomputers_read_conventions_through_core(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not _DIRECT_READ.search(text), _DIRECT_READ.search(text)
