"""The track registry: one descriptor per track, and every layer finds its part there."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import get_args

import pytest

from mibspec.cli.table import COMMANDS, Command
from mibspec.core.spec import spec_dir
from mibspec.core.tracks import TRACKS
from mibspec.documents.report import Report
from mibspec.validator.rules import RULES, rule
from mibspec.validator.rules._registry import Rule

RULES_FOLDER = Path(__file__).resolve().parents[3] / "src" / "mibspec" / "validator" / "rules"


def test_the_registry_holds_exactly_the_tracks_of_the_report_schema() -> None:
    union = get_args(get_args(Report)[0])
    typed = {get_args(model.model_fields["track"].annotation)[0] for model in union}
    schema = (spec_dir() / "schemas" / "report.schema.json").read_text(encoding="utf-8")
    assert set(TRACKS) == typed
    assert all(f'"{name}"' in schema for name in TRACKS)


@pytest.mark.parametrize("name", list(TRACKS))
def test_each_part_a_track_names_exists(name: str) -> None:
    track = TRACKS[name]
    for module in track.rules:
        importlib.import_module(module)
    module, _, function = track.recomputer.partition(":")
    assert importlib.util.find_spec(module) is not None
    assert f"def {function}(" in Path(importlib.util.find_spec(module).origin or "").read_text("utf-8")
    module, _, function = track.score_command.partition(":")
    assert callable(getattr(importlib.import_module(module), function))
    assert track.score_command in {entry.target for entry in COMMANDS if isinstance(entry, Command)}
    assert track.figures


def test_every_report_rule_declares_its_track() -> None:
    report_rules = [r for r in RULES if r.kinds is not None and "report" in r.kinds]
    tracked = {r.track for r in report_rules if r.track is not None}
    assert tracked == set(TRACKS)
    # The rules that apply to every report's track: the artifact-level one, the conventions a
    # report states against its profile's (the tracks' conventions are listed in core.conventions),
    # declared roundings (the tracks' claims are listed in the claim catalogue), and the task's
    # example count and split against its dataset's.
    expected = {"model-pinned", "report-conventions", "declared-rounding", "task-example-count", "task-split"}
    assert {r.name for r in report_rules if r.track is None} == expected


def test_no_rule_tests_the_track_by_hand() -> None:
    """A rule module never reads ``doc["track"]``: the registry selects rules by track."""
    for path in sorted(RULES_FOLDER.glob("*.py")):
        if path.name == "_registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == "track":
                pytest.fail(f"{path.name}:{node.lineno} reads the track itself")


def test_a_rule_cannot_name_an_unknown_track() -> None:
    from mibspec.validator import InternalError

    with pytest.raises(InternalError, match="unknown track"):
        rule("nowhere", codes=("C101",), track="pixels")


def test_a_tracked_rule_applies_to_its_track_only() -> None:
    class Ctx:
        def __init__(self, kind: str, track: str | None) -> None:
            self.kind, self.data = kind, {"track": track} if track else {}

    tracked = Rule("r", lambda doc, ctx: iter(()), ("C101",), frozenset({"report"}), "r", "circuit")
    assert tracked.applies_to(Ctx("report", "circuit"))  # type: ignore[arg-type]
    assert not tracked.applies_to(Ctx("report", "saliency"))  # type: ignore[arg-type]
    assert not tracked.applies_to(Ctx("circuit", None))  # type: ignore[arg-type]
