"""The built-in mechanisms agree with the shipped datasets and with the spec's closed forms.

Independent anchors: the shipped rows were written by the dataset generators
(``reference_impl.datasets``), a separate implementation of the same causal models; the
IOI target is checked against ``metrics.causal_variable.ioi_target`` and hand-computed
values (MIB App. G.5.4: no intervention 2.774, token flipped 1.4, position flipped
−1.262); the carry example is MIB Fig. 6 (17 + 25 with the carry of 30 + 47 gives 32).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from mibspec.metrics.causal_models import (
    causal_model_document,
    check_causal_model,
    check_row,
    interchange_output,
    ioi_logit_names,
    ioi_target,
)
from mibspec.metrics.causal_variable import ioi_target as metric_target

REPO = Path(__file__).resolve().parents[2]
TASKS = ("ioi", "arithmetic", "mcqa", "ravel")


def _dataset(task: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = REPO / "examples" / "datasets" / task
    meta = json.loads((folder / "test.meta.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in (folder / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    return meta, rows


@pytest.mark.parametrize("task", TASKS)
def test_every_shipped_row_follows_its_causal_model(task: str) -> None:
    meta, rows = _dataset(task)
    model = causal_model_document(task)
    assert check_causal_model(model) == []
    for row in rows:
        assert check_row(model, row, meta["variables"], meta["counterfactual_types"]) == [], row["id"]


@pytest.mark.parametrize("task", TASKS)
def test_a_hand_edited_expected_output_is_found(task: str) -> None:
    meta, rows = _dataset(task)
    model = causal_model_document(task)
    row = copy.deepcopy(rows[3])
    cf_type = meta["counterfactual_types"][-1]
    variable = next(v for v in meta["variables"] if v in row["interventions"][cf_type])
    row["interventions"][cf_type][variable] = " nonsense"
    problems = check_row(model, row, meta["variables"], meta["counterfactual_types"])
    assert [p for p, _ in problems] == [f"/interventions/{cf_type}/{variable}"]


def test_wrong_answer_and_variables_are_found() -> None:
    _, rows = _dataset("arithmetic")
    row = copy.deepcopy(rows[0])
    row["base"]["answer"] = " 0"
    row["base"]["variables"]["ones_carry"] = 1 - row["base"]["variables"]["ones_carry"]
    pointers = {p for p, _ in check_row(causal_model_document("arithmetic"), row, ["ones_carry"], [])}
    assert pointers == {"/base/answer", "/base/variables/ones_carry"}


def test_carry_interchange_is_mib_figure_6() -> None:
    model = causal_model_document("arithmetic")
    base = {"slots": {"operand_1": "17", "operand_2": "25"}}
    source = {"slots": {"operand_1": "30", "operand_2": "47"}}
    assert interchange_output(model, base, source, "ones_carry") == " 32"
    assert interchange_output(model, source, base, "ones_carry") == " 87"


def test_answer_pointer_interchange_takes_the_base_label_at_the_source_position() -> None:
    model = causal_model_document("mcqa")
    slots = {f"label_{i}": label for i, label in enumerate("ABCD")}
    base = {
        "slots": {
            **slots,
            "color": "red",
            **{f"option_{i}": c for i, c in enumerate(["red", "blue", "tan", "gray"])},
        }
    }
    source = {
        "slots": {
            **{f"label_{i}": label for i, label in enumerate("WXYZ")},
            "color": "pink",
            **{f"option_{i}": c for i, c in enumerate(["jade", "lime", "pink", "gold"])},
        }
    }
    assert interchange_output(model, base, source, "answer_pointer") == " C"
    assert interchange_output(model, base, source, "answer") == " Y"


def test_ioi_targets_are_the_paper_fit() -> None:
    params = {"bias": 0.069, "token_coeff": 0.687, "position_coeff": 2.018}
    base = {"slots": {"name_a": "Ann", "name_b": "Bob", "name_c": "Bob"}}  # IO Ann at position 0
    same = {"slots": {"name_a": "Ann", "name_b": "Bob", "name_c": "Bob"}}
    swapped = {"slots": {"name_a": "Bob", "name_b": "Ann", "name_c": "Ann"}}  # IO Bob, still at position 0
    other_names = {"slots": {"name_a": "Cid", "name_b": "Dee", "name_c": "Cid"}}  # IO Dee at 1
    assert ioi_target(params, base, same, "output_token") == pytest.approx(2.774)
    assert ioi_target(params, base, same, "output_position") == pytest.approx(2.774)
    assert ioi_target(params, base, other_names, "output_token") == pytest.approx(1.4)
    assert ioi_target(params, base, other_names, "output_position") == pytest.approx(-1.262)
    assert ioi_target(params, base, swapped, "output_position") == pytest.approx(2.774)
    for source in (same, other_names, swapped):
        for variable, signal_of in (("output_token", "token_signal"), ("output_position", "position_signal")):
            value = ioi_target(params, base, source, variable)
            for signal in (1, -1):
                signals = {"token_signal": 1, "position_signal": 1, signal_of: signal}
                if metric_target(**signals) == pytest.approx(value):
                    break
            else:
                pytest.fail(f"{variable} target {value} is not a value of the MIB linear model")
    assert (
        ioi_target(params, base, {"slots": {"name_a": "A", "name_b": "B", "name_c": "C"}}, "output_token")
        is None
    )
    assert ioi_logit_names(base) == (" Ann", " Bob")


def test_incomplete_causal_models_are_reported() -> None:
    doc = causal_model_document("ioi")
    del doc["parameters"]["bias"]
    doc["variables"] = doc["variables"][:1]
    assert {p for p, _ in check_causal_model(doc)} == {"/parameters", "/variables"}
    carry = causal_model_document("arithmetic", {"operator": "*"})
    assert [p for p, _ in check_causal_model(carry)] == ["/parameters/operator"]
