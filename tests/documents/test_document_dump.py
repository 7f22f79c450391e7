"""Documents built from the typed models: one serialiser, tags written once."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from mibspec.core.spec import SPEC_VERSION
from mibspec.documents import KINDS, CircuitReport, document_bytes, dump, parse_document
from mibspec.documents.kinds import (
    CausalModel,
    CausalVariable,
    Circuit,
    GraphSpec,
    Leaderboard,
    LeaderboardCell,
    LeaderboardRow,
    LeaderboardTable,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mibspec"

#: Modules that still write a ``"spec_version"`` key in a dict display, with the reason.
SPEC_VERSION_KEY_ALLOWED = {
    # The JSON output of `mibspec verify` and the validator's context: not documents.
    "verification/output_formats.py",
    "validator/_context.py",
}


def _causal_model(**fields: object) -> CausalModel:
    return CausalModel(
        task="ioi", mechanism="ioi_linear", variables=[CausalVariable(name="x")], outputs=["x"], **fields
    )


def test_tags_are_written_though_never_set() -> None:
    data = dump(_causal_model())
    assert data["spec_version"] == SPEC_VERSION
    assert data["kind"] == "causal_model"
    assert list(data)[:2] == ["spec_version", "kind"]


def test_a_reports_track_is_written_though_never_set() -> None:
    data = json.loads((ROOT / "examples" / "circuit" / "report.json").read_text(encoding="utf-8"))
    fields = {k: v for k, v in data.items() if k not in ("spec_version", "kind", "track")}
    report = CircuitReport.model_validate(fields)
    assert list(dump(report))[:3] == ["spec_version", "kind", "track"]
    assert dump(report)["track"] == "circuit"


def test_fields_not_set_are_left_out_and_defaults_set_are_kept() -> None:
    data = dump(_causal_model(parameters={}))
    assert not {"description", "artifacts", "provenance"} & set(data)
    assert data["parameters"] == {}
    graph = dump(Circuit(graph=GraphSpec(n_layers=1, n_heads=1, n_edges=3)))["graph"]
    assert graph == {"n_layers": 1, "n_heads": 1, "n_edges": 3}


def test_keys_follow_the_field_order_whatever_the_order_given() -> None:
    model = CausalModel(
        parameters={"b": 1, "a": 2},
        outputs=["x"],
        variables=[CausalVariable(description="d", name="x")],
        mechanism="ioi_linear",
        task="ioi",
        description="text",
    )
    data = dump(model)
    assert list(data) == [
        "spec_version",
        "kind",
        "description",
        "task",
        "mechanism",
        "variables",
        "outputs",
        "parameters",
    ]
    assert list(data["variables"][0]) == ["name", "description"]
    assert list(data["parameters"]) == ["b", "a"]  # a dictionary keeps its own order


def test_a_leaderboard_s_description_follows_its_title() -> None:
    row = LeaderboardRow(
        method="m", cells=[LeaderboardCell(task="ioi", model="gpt2", value=0.5)], average=0.5, score=0.6
    )
    board = Leaderboard(description="d", title="t", tables=[LeaderboardTable(metric="cpr", rows=[row])])
    assert list(dump(board)) == ["spec_version", "kind", "track", "title", "description", "tables"]


def test_document_bytes_is_the_project_s_json_layout() -> None:
    model = _causal_model(description="naïve")
    text = document_bytes(model)
    assert text == (json.dumps(dump(model), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    assert "naïve".encode() in text


@pytest.mark.parametrize(
    "path",
    [
        "examples/circuit/circuit.json",
        "examples/circuit/report.json",
        "examples/causal-bench-planted/report.json",
        "examples/causal-bench-tiny-gpt2/report.json",
        "examples/circuit-ioi/report.json",
        "examples/saliency-digits/report.json",
        "examples/saliency/dataset.json",
        "examples/causal_variable/causal_model.json",
        # Written from their models by examples/build_examples.py.
        "examples/causal_variable/report.json",
        "examples/causal_variable/das_output_position_l6_s2.json",
        "examples/saliency/report.json",
        "examples/causal-bench-table1/report.json",
        "examples/causal_bench/report.json",
        # Base documents of the conformance builders, dumped from their models.
        "conformance/v1/report/valid/causal-variable-ioi-das/document.json",
        "conformance/v1/report/valid/saliency-two-methods/document.json",
        "conformance/v1/featurizer/valid/sae-subject-slot/document.json",
    ],
)
def test_round_trip_model_bytes_model(path: str) -> None:
    raw = (ROOT / path).read_bytes()
    data = json.loads(raw)
    model = parse_document(data["kind"], data)
    written = document_bytes(model)
    assert written == raw
    again = json.loads(written)
    assert parse_document(again["kind"], again) == model


def test_every_kind_writes_its_tags() -> None:
    for kind, (model, _) in KINDS.items():
        if kind == "report":
            continue
        assert model.model_fields["kind"].default == kind
        assert model.model_fields["spec_version"].default == SPEC_VERSION


def _dict_keys(tree: ast.AST) -> list[int]:
    return [
        key.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for key in node.keys
        if isinstance(key, ast.Constant) and key.value == "spec_version"
    ]


def _writers() -> dict[str, Path]:
    """The modules that write documents: the package's (named relative to it; the models and
    ``core`` excepted), the examples' builder and the conformance builders (named from the root).
    The conformance builders' invalid cases may still set ``doc["spec_version"]`` on a dumped
    base document: a subscript, not a dict display."""
    modules = {
        path.relative_to(PACKAGE).as_posix(): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ("documents", "core")
    }
    others = [
        ROOT / "examples" / "build_examples.py",
        *sorted((ROOT / "conformance" / "builders").glob("*.py")),
    ]
    modules |= {path.relative_to(ROOT).as_posix(): path for path in others}
    return modules


def test_the_scan_covers_the_examples_and_conformance_builders() -> None:
    names = set(_writers())
    assert {"examples/build_examples.py", "conformance/builders/_common.py"} <= names
    assert {"pages/leaderboard.py", "reference_impl/scoring/circuit.py"} <= names
    tree = ast.parse('doc = {"spec_version": "1.1"}\ndoc["spec_version"] = "2.0"\n')
    assert _dict_keys(tree) == [1]  # the subscript assignment is not a dict display


@pytest.mark.slow
def test_documents_are_not_written_as_dicts_with_a_spec_version() -> None:
    found = {}
    for name, path in _writers().items():
        lines = _dict_keys(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[name] = lines
    unexpected = {name: lines for name, lines in found.items() if name not in SPEC_VERSION_KEY_ALLOWED}
    assert not unexpected, f"build these documents from mibspec.documents models: {unexpected}"
    stale = SPEC_VERSION_KEY_ALLOWED - set(found)
    assert not stale, f"no longer write a spec_version dict key; take them off the list: {sorted(stale)}"
