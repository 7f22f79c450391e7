"""The track registry: one descriptor per track, and every layer finds its part there.

A track is declared once, in ``mibspec.core.tracks``: the tests below add a fake descriptor
to ``TRACKS`` and see it reach the ``score`` commands, the report union's check, the
conformance counters and the HTML page, with nothing else registered.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from typing import Any, get_args

import pytest

from mibspec.cli.table import COMMANDS, Command, score_commands
from mibspec.core.claims import claim_catalogue
from mibspec.core.conventions import REPORT_CONVENTIONS
from mibspec.core.spec import spec_dir
from mibspec.core.tracks import TRACKS, Track, track_of_case
from mibspec.documents.report import Report, report_models, track_of
from mibspec.validator.rules import RULES, rule
from mibspec.validator.rules._registry import Rule

RULES_FOLDER = Path(__file__).resolve().parents[2] / "src" / "mibspec" / "validator" / "rules"


def test_the_registry_holds_exactly_the_tracks_of_the_report_schema() -> None:
    union = get_args(get_args(Report)[0])
    typed = {get_args(model.model_fields["track"].annotation)[0] for model in union}
    schema = json.loads((spec_dir() / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    assert set(TRACKS) == typed
    assert set(schema["properties"]["track"]["enum"]) == set(TRACKS)
    branches = {branch["if"]["properties"]["track"]["const"] for branch in schema["allOf"]}
    assert branches == set(TRACKS)


def test_the_objects_that_may_declare_rounding_are_found_in_each_report_model() -> None:
    from mibspec.documents import report

    for model, published in report._PUBLISHED_ORDER.items():
        assert sorted(published, key=repr) == sorted(report.rounded_objects(model), key=repr), model
    paths = [path for path, _ in report.rounded_objects(report.SaliencyReport)]
    assert paths == [("claims", "dominance"), ("claims", "methods", "*")]
    assert ("claims", "curves", "*", "points", "*") in dict(report.rounded_objects(report.CircuitReport))


def test_the_claim_catalogue_and_the_conventions_are_keyed_by_the_registry() -> None:
    assert {row.track for row in claim_catalogue().rows} == {"*", *TRACKS}
    assert set(REPORT_CONVENTIONS) == set(TRACKS)
    assert REPORT_CONVENTIONS["causal_bench"] == {"p_convention": "/settings/p_convention"}


def test_the_score_commands_are_the_registrys_in_its_order() -> None:
    listed = [entry for entry in COMMANDS if isinstance(entry, Command) and entry.name.startswith("score ")]
    assert [entry.name for entry in listed] == [f"score {track.word}" for track in TRACKS.values()]
    assert [entry.target for entry in listed] == [track.score_command for track in TRACKS.values()]
    bench = next(entry for entry in listed if entry.name == "score causal-bench")
    assert bench.target == "mibspec.cli.score_causal_bench:score_causal_bench_command"


# --------------------------------------------------------------------------- a fake extra track

#: A track declared only here (its rules, recomputer and command do not exist: nothing runs them).
TOY = Track(
    name="toy_paint",
    rules=(),
    recomputer="mibspec.reference_impl.recompute.toy_paint:recompute",
    recompute_needs=(),
    work="mibspec.reference_impl.recompute.work:toy_paint",
    gaps="mibspec.reference_impl.recompute.declarations:toy_paint_gaps",
    score_command="mibspec.cli.toy_paint:score_toy_paint_command",
    score_summary="Paint pixels and write a report.",
    claims_table="mibspec.pages.claims:saliency_claims",
    figures=("saliency",),
    conventions={"checker": "/settings/checker"},
)


@pytest.fixture
def with_toy(monkeypatch: pytest.MonkeyPatch) -> dict[str, Track]:
    tracks = {**TRACKS, TOY.name: TOY}
    monkeypatch.setattr("mibspec.core.tracks.TRACKS", tracks)
    return tracks


def test_a_new_descriptor_gets_its_score_command(with_toy: dict[str, Track]) -> None:
    commands = score_commands(with_toy)
    assert commands[-1] == Command("score toy-paint", TOY.score_command, TOY.score_summary)
    assert commands[:-1] == score_commands(TRACKS)


def test_a_new_descriptor_without_a_report_model_fails_the_union_check(with_toy: dict[str, Track]) -> None:
    assert report_models(TRACKS) == get_args(get_args(Report)[0])
    with pytest.raises(TypeError, match=r"no model for \['toy_paint'\]"):
        report_models(with_toy)
    with pytest.raises(TypeError, match=r"no track descriptor for \['saliency'\]"):
        report_models([name for name in TRACKS if name != "saliency"])
    # The union's order is the order of the published schema's branches.
    schema = json.loads((spec_dir() / "schemas" / "report.schema.json").read_text(encoding="utf-8"))
    branches = [branch["if"]["properties"]["track"]["const"] for branch in schema["allOf"]]
    assert [track_of(model) for model in report_models(TRACKS)] == branches


def test_a_new_descriptor_counts_its_conformance_cases(
    with_toy: dict[str, Track], suite_minimum: Any
) -> None:
    case = {"kind": "report", "id": "toy-paint-too-bright", "verdict": "invalid"}
    assert suite_minimum.group(case) == "report/toy_paint"
    assert suite_minimum.group({**case, "id": "causal-bench-x"}) == "report/causal_bench"
    assert suite_minimum.group({**case, "id": "pixels-x"}) == "report/?"
    assert track_of_case("toy-paint-too-bright") == "toy_paint"
    assert track_of_case("circuit-document-x") == "circuit"


def test_a_new_descriptor_gets_its_claims_table_on_the_page(
    with_toy: dict[str, Track], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.pages import html

    monkeypatch.setattr(html, "TRACKS", with_toy)  # the page module holds the registry it imported
    claims = {
        "clean_accuracy": 1.0,
        "perturbed_accuracy": 0.25,
        "dominance": {"n_images": 4, "n_dominant": 2, "rate": 0.5},
        "methods": [{"name": "paint", "hit_accuracy": 0.75, "wiou": 0.5}],
    }
    page = html._claims({"kind": "report", "track": "toy_paint", "claims": claims})
    assert page.startswith("<h2>Claims</h2>")
    assert "<td>paint</td>" in page
    assert '<td class="num">0.75</td>' in page
    assert html._claims({"kind": "report", "track": "toy_paint_2", "claims": claims}) == ""


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
