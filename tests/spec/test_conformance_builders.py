"""The conformance builder (``conformance/builders``): one module of cases per kind, base documents
valid under the typed models."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pydantic
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def builders(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "conformance"))
    return importlib.import_module("builders")


def test_each_module_holds_the_cases_of_its_kind(builders: ModuleType) -> None:
    from builders._common import cases_of

    assert [c.id for c in builders.CASES] == [c.id for m in builders.MODULES for c in cases_of(m)]
    for module in builders.MODULES:
        name = module.__name__.removeprefix("builders.")
        cases = cases_of(module)
        assert cases, name
        if name.startswith("report_"):
            track = name.removeprefix("report_").replace("_", "-")
            assert {c.kind for c in cases} == {"report"}, name
            assert all(c.id.startswith(f"{track}-") for c in cases), name
        else:
            assert {c.kind for c in cases} == {"json" if name == "json_parsing" else name}, name


def test_base_documents_are_checked_against_their_typed_model(builders: ModuleType) -> None:
    from builders._common import document

    made = document("causal_model", {"task": "ioi", "mechanism": "ioi_linear"} | _ONE_VARIABLE)
    assert list(made)[:2] == ["spec_version", "kind"]
    with pytest.raises(pydantic.ValidationError):
        document("causal_model", {"task": "ioi", "mechanism": "no_such_mechanism"} | _ONE_VARIABLE)


def test_base_documents_are_dumped_in_their_model_s_field_order(builders: ModuleType) -> None:
    from builders._common import document

    made = document("causal_model", _ONE_VARIABLE | {"mechanism": "ioi_linear", "task": "ioi"})
    assert list(made) == ["spec_version", "kind", "task", "mechanism", "variables", "outputs"]


_ONE_VARIABLE = {"variables": [{"name": "x"}], "outputs": ["x"]}


def test_the_readme_coverage_section_is_the_one_the_builder_writes(builders: ModuleType) -> None:
    from builders._readme import BEGIN, END, coverage_section

    text = (REPO / "conformance" / "README.md").read_text(encoding="utf-8")
    section = text.split(BEGIN + "\n", 1)[1].split("\n" + END, 1)[0]
    assert section == coverage_section(builders.CASES)
    assert "| `report`, track `saliency` |" in section


def test_the_coverage_table_has_a_row_for_a_new_track(
    builders: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from builders import _readme

    from mibspec.core.tracks import TRACKS

    toy = dataclasses.replace(TRACKS["saliency"], name="toy_paint")
    monkeypatch.setattr("mibspec.core.tracks.TRACKS", {**TRACKS, "toy_paint": toy})
    case = dataclasses.replace(builders.CASES[-1], kind="report", verdict="invalid", id="toy-paint-dim")
    assert _readme.group(case) == ("report", "toy_paint")
    assert "| `report`, track `toy_paint` | 0 | 1 |" in _readme.coverage_section([*builders.CASES, case])
