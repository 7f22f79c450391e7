"""The figures of a report: what the causal-variable layer × position figure puts in a row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mibspec.pages.figures import _row_label, render_figures

REPO = Path(__file__).resolve().parents[2]
JOINT = REPO / "conformance" / "v1" / "report" / "valid" / "causal-variable-joint-heads"


def test_a_joint_unit_has_a_row_of_its_own_beside_its_locations_single_unit() -> None:
    """A joint unit and a unit at its location alone are different interventions: their rows
    differ, so the figure never keeps the better of the two as if they were one place."""
    report = json.loads((JOINT / "document.json").read_text(encoding="utf-8"))
    joint = report["claims"]["variables"][0]["units"][0]
    alone = {key: value for key, value in joint.items() if key != "joint_sites"}
    assert _row_label(alone, False) == "all h3"
    assert _row_label(joint, False) == "all h3 +2 joint sites"
    one_more = {**joint, "joint_sites": joint["joint_sites"][:1]}
    assert _row_label(one_more, True) == "attention_heads @ all h3 +1 joint site"


def test_the_joint_case_is_drawn() -> None:
    pytest.importorskip("matplotlib")
    report = json.loads((JOINT / "document.json").read_text(encoding="utf-8"))
    figures, skipped = render_figures(report, JOINT, image_format="svg")
    assert not skipped
    assert [figure.name for figure in figures] == ["layer_position"]
