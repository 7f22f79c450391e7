"""Cases of kind ``causal_model``: the built-in mechanisms of IOI, MCQA and arithmetic."""

from __future__ import annotations

from ._common import PROVENANCE, Folder, case, save
from ._inputs import arithmetic_causal_model, ioi_causal_model, mcqa_causal_model


@case("causal_model", "DK-5", "Two-digit addition: operand digits, the ones carry and the output digits.")
def arithmetic_two_digit_carry(folder: Folder) -> None:
    save(folder, arithmetic_causal_model())


@case("causal_model", "DK-5", "IOI: the paper's linear fit of the logit difference.")
def ioi_linear_fit(folder: Folder) -> None:
    save(folder, ioi_causal_model())


@case("causal_model", "DK-5", "MCQA: the answer pointer selects the answer symbol.")
def mcqa_answer_pointer(folder: Folder) -> None:
    save(folder, mcqa_causal_model())


@case("causal_model", "S-1", "The document does not declare its spec version.", ("S101", ""))
def missing_spec_version(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    del doc["spec_version"]
    save(folder, doc)


@case("causal_model", "S-1", "spec_version given as a number.", ("S102", "/spec_version"))
def spec_version_as_number(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["spec_version"] = 1.0
    save(folder, doc)


@case(
    "causal_model",
    "S-3 DK-5",
    'mechanism "python_callable" is not a built-in mechanism.',
    ("S113", "/mechanism"),
)
def unknown_mechanism(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["mechanism"] = "python_callable"
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "A causal model without variables.", ("S116", "/variables"))
def no_variables(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["variables"] = []
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "A variable without a name.", ("S111", "/variables/2"))
def variable_without_name(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    del doc["variables"][2]["name"]
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "outputs given as a string instead of a list.", ("S110", "/outputs"))
def outputs_not_a_list(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["outputs"] = "result"
    save(folder, doc)


@case(
    "causal_model", "S-3", "provenance.created is not an RFC 3339 date-time.", ("S115", "/provenance/created")
)
def created_not_rfc3339(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["provenance"] = {**PROVENANCE, "created": "02/06/2025 09:30"}
    save(folder, doc)


@case(
    "causal_model",
    "CV-4",
    "An ioi_linear model without its position coefficient.",
    ("V106", "/parameters"),
)
def ioi_linear_without_position_coeff(folder: Folder) -> None:
    doc = ioi_causal_model()
    del doc["parameters"]["position_coeff"]
    save(folder, doc)


@case(
    "causal_model",
    "CV-4",
    "A two_digit_carry model for subtraction, without its carry variable.",
    ("V106", "/variables"),
    ("V106", "/parameters/operator"),
)
def carry_model_for_subtraction(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["parameters"]["operator"] = "-"
    doc["variables"] = [v for v in doc["variables"] if v["name"] != "ones_carry"]
    save(folder, doc)
