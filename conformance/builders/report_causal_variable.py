"""Report cases of the causal-variable track (ids ``causal-variable-…``)."""

from __future__ import annotations

from ._common import Folder, Json, case, read_json, rehash, save
from ._reports import causal_variable_report, joint_heads_report, mcqa_report, variable_claim


@case(
    "report",
    "DK-1 A-6 A-7 A-8",
    "GPT-2 small on IOI: four DAS featurizers (layers 3 and 4, last token and "
    "second subject mention) aligned to the output position; MSE, lower is better.",
)
def causal_variable_ioi_das(folder: Folder) -> None:
    save(folder, causal_variable_report(folder))


@case("report", "DK-1 A-6 A-7", "Qwen2.5-0.5B on MCQA: the full-vector baseline at three layers (IIA).")
def causal_variable_mcqa_full_vector(folder: Folder) -> None:
    save(folder, mcqa_report(folder))


@case(
    "report",
    "S-3 DK-1",
    'metric "accuracy" is not defined (IIA or MSE).',
    ("S113", "/claims/variables/0/metric"),
)
def causal_variable_unknown_metric(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["metric"] = "accuracy"
    save(folder, doc)


@case(
    "report",
    "C-7",
    "An MSE variable (lower is better) reports the worst layer as its best.",
    ("C112", "/claims/variables/0/best"),
)
def causal_variable_highest_takes_max_for_mse(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    variable = doc["claims"]["variables"][0]
    variable["best"] = max(variable["per_layer"].values())
    save(folder, doc)


@case(
    "report",
    "C-7 MV-5",
    "One unit is scored on the symbol counterfactuals only; its mean would be taken over the sets "
    "that happen to have it.",
    ("C112", "/claims/variables/0/units"),
)
def causal_variable_unit_missing_a_set(folder: Folder) -> None:
    doc = mcqa_report(folder)
    unit = doc["claims"]["variables"][0]["units"][1]
    unit["scores"].pop("answer_position")
    unit.get("n_examples", {}).pop("answer_position", None)
    save(folder, doc)


@case(
    "report",
    "C-7",
    "A per-layer score that is not the best unit of its layer.",
    ("C112", "/claims/variables/0/per_layer/3"),
)
def causal_variable_per_layer_inconsistent(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    doc["claims"]["variables"][0]["per_layer"]["3"] += 0.5
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "An interchange-intervention accuracy of 1.2 for one unit and counterfactual set.",
    ("S114", "/claims/variables/0/units/0/scores/symbol"),
)
def causal_variable_iia_above_one(folder: Folder) -> None:
    doc = mcqa_report(folder)
    unit = doc["claims"]["variables"][0]["units"][0]
    unit["scores"]["symbol"] = 1.2
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "An MSE variable declared higher-is-better.",
    ("S113", "/claims/variables/0/better"),
)
def causal_variable_mse_higher_is_better(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    doc["claims"]["variables"][0]["better"] = "higher"
    save(folder, doc)


@case("report", "S-3 DK-1", "A variable without any model unit.", ("S116", "/claims/variables/0/units"))
def causal_variable_no_units(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"] = []
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    'per_layer keyed by "layer_12" instead of the layer number.',
    ("S115", "/claims/variables/0/per_layer"),
)
def causal_variable_per_layer_key(folder: Folder) -> None:
    doc = mcqa_report(folder)
    per_layer = doc["claims"]["variables"][0]["per_layer"]
    doc["claims"]["variables"][0]["per_layer"] = {
        f"layer_{k}" if k == "12" else k: v for k, v in per_layer.items()
    }
    save(folder, doc)


@case("report", "S-3 DK-1", 'checker "fuzzy" is not defined.', ("S113", "/settings/checker"))
def causal_variable_unknown_checker(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["settings"]["checker"] = "fuzzy"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "A unit's featurizer names the dataset artifact, which is not a featurizer document.",
    ("A107", "/claims/variables/0/units/1/featurizer"),
)
def causal_variable_featurizer_not_a_featurizer(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"][1]["featurizer"] = "dataset"
    save(folder, doc)


@case(
    "report",
    "A-6 A-8",
    "A referenced DAS featurizer is itself invalid (its rotation's declared shape differs from the sidecar).",
    ("A110", "/weights/rotation/shape", "das_l4_s2.json"),
    ("V102", "/weights/rotation/shape", "das_l4_s2.json"),
    ("A107", "/artifacts/5"),
)
def causal_variable_referenced_featurizer_invalid(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    featurizer = read_json(folder, "das_l4_s2.json")
    featurizer["weights"]["rotation"]["shape"] = [1, 1024]
    save(folder, featurizer, "das_l4_s2.json")
    save(folder, rehash(folder, doc))


@case("report", "A-1", 'Two artifacts share the id "full-vector-l16".', ("A108", "/artifacts/4/id"))
def causal_variable_duplicate_artifact_id(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["artifacts"][4]["id"] = "full-vector-l16"
    doc["claims"]["variables"][0]["units"][2]["featurizer"] = "full-vector-l16"
    save(folder, doc)


@case(
    "report",
    "CV-3",
    "A unit at layer 30 of a 24-layer model whose featurizer reads layer 20.",
    ("V105", "/claims/variables/0/units/2/location/layer"),
    ("V105", "/claims/variables/0/units/2/location"),
)
def causal_variable_unit_outside_model(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"][2]["location"]["layer"] = 30
    variable = doc["claims"]["variables"][0]
    variable["per_layer"] = {"12": 0.375, "16": 0.625, "30": 0.875}
    variable["average"], variable["best"] = 0.625, 0.875
    save(folder, doc)


@case(
    "report",
    "CV-3",
    "The model is declared with d_model 1024; the featurizers read 896 values.",
    *(("V105", f"/claims/variables/0/units/{u}/featurizer") for u in range(3)),
)
def causal_variable_featurizer_width(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["model"] = {**doc["model"], "config": {**doc["model"]["config"], "d_model": 1024, "n_heads": 16}}
    save(folder, doc)


@case(
    "report",
    "CV-6 PR-2",
    "A default-profile report that checks answers as substrings (the mib-2025 rule).",
    ("V108", "/settings/checker"),
)
def causal_variable_checker_not_profile(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["settings"]["checker"] = "substring"
    save(folder, doc)


@case("report", "CV-6 PR-2", "A mib-2025 report with the substring checker.")
def causal_variable_mib_2025_substring(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["profile"] = "mib-2025"
    doc["settings"]["checker"] = "substring"
    save(folder, doc)


@case(
    "report",
    "CV-6 PR-3",
    "A mib-2025 report that names no checker: its profile's substring checker applies.",
)
def causal_variable_mib_2025_checker_from_profile(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["profile"] = "mib-2025"
    doc["settings"].pop("checker", None)
    save(folder, doc)


@case(
    "report",
    "CV-6",
    "Scores on a counterfactual set the dataset does not have, a count for an unscored set, "
    "and an MSE claimed under the answer-pointer causal model.",
    ("V109", "/claims/variables/0/metric"),
    ("V109", "/claims/variables/0/units/0/scores/color_noun"),
    ("V109", "/claims/variables/0/units/0/n_examples/noun"),
    ("V109", "/claims/variables/0/units/1/scores/color_noun"),
    ("V109", "/claims/variables/0/units/2/scores/color_noun"),
)
def causal_variable_unknown_sets(folder: Folder) -> None:
    doc = mcqa_report(folder)
    variable = doc["claims"]["variables"][0]
    for unit in variable["units"]:
        unit["scores"]["color_noun"] = unit["scores"]["symbol"]
        unit["n_examples"]["color_noun"] = 4
    variable["units"][0]["n_examples"]["noun"] = 4
    doc["claims"]["variables"][0] = variable_claim(variable["name"], "mse", "lower", variable["units"])
    save(folder, doc)


@case(
    "report",
    "CV-7 MV-8",
    "As imported from a MIB result file: two units declare no featurizer, one of them at a position "
    "known only by name. Warnings: the claims are consistent, recomputation would fail with R104.",
    warnings=(
        ("V110", "/claims/variables/0/units/0"),
        ("V110", "/claims/variables/0/units/1/location/position"),
    ),
)
def causal_variable_not_recomputable(folder: Folder) -> None:
    doc = mcqa_report(folder)
    units = doc["claims"]["variables"][0]["units"]
    del units[0]["featurizer"], units[1]["featurizer"]
    units[1]["location"]["position"] = {"rule": "named", "name": "correct_symbol"}
    save(folder, doc)


@case(
    "report",
    "CV-2 MV-8",
    "As imported from a MIB result file (no featurizers): one unit reads every token and also "
    "names an index, another lists heads at a residual-stream location.",
    ("V104", "/claims/variables/0/units/0/location/position/index"),
    ("V104", "/claims/variables/0/units/1/location/heads"),
    warnings=(("V110", "/claims/variables/0/units/0"),),  # one per kind of gap: the first unit
)
def causal_variable_unit_location_incomplete(folder: Folder) -> None:
    doc = mcqa_report(folder)
    units = doc["claims"]["variables"][0]["units"]
    del units[0]["featurizer"], units[1]["featurizer"]
    units[0]["location"]["position"] = {"rule": "all", "index": -1}
    units[1]["location"]["heads"] = [3]
    save(folder, doc)


# --------------------------------------------------------------------------- spec 1.0 and 1.1 names


def _as_1_0(doc: Json) -> Json:
    """The report written to spec 1.0: a variable's best score is called ``highest``."""
    doc["spec_version"] = "1.0"
    doc["claims"]["variables"] = [
        {("highest" if key == "best" else key): value for key, value in variable.items()}
        for variable in doc["claims"]["variables"]
    ]
    return doc


@case(
    "report",
    "S-1 C-7",
    "A spec 1.0 report names each variable's best score highest, as 1.0 does (for MSE, the lowest error).",
)
def causal_variable_highest_in_1_0(folder: Folder) -> None:
    save(folder, _as_1_0(causal_variable_report(folder)))


@case(
    "report",
    "S-1 S-3",
    "A spec 1.1 report with the 1.0 name highest instead of best.",
    ("S112", "/claims/variables/0/highest"),
    ("S111", "/claims/variables/0"),
)
def causal_variable_highest_in_1_1(folder: Folder) -> None:
    doc = _as_1_0(causal_variable_report(folder))
    doc["spec_version"] = "1.1"
    save(folder, doc)


@case(
    "report",
    "C-10 C-7",
    "Unit scores, per-layer scores, Average and best printed to two decimals with the rounding "
    "declared on each variable: the aggregates hold within it.",
)
def causal_variable_rounding_declared(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    for variable in doc["claims"]["variables"]:
        for unit in variable["units"]:
            unit["scores"] = {name: round(score, 2) for name, score in unit["scores"].items()}
        variable["per_layer"] = {layer: round(value, 2) for layer, value in variable["per_layer"].items()}
        variable["average"], variable["best"] = round(variable["average"], 2), round(variable["best"], 2)
        variable["rounding"] = {"decimals": 2}
    save(folder, doc)


# --------------------------------------------------------------------------- joint units (spec 1.2)


@case(
    "report",
    "CV-8 MV-10 CV-3",
    "MIB's IOI unit: three attention heads of layers 7 and 8 at every token, intervened on together, "
    "each with its own featurizer; the unit counts under layer 7.",
)
def causal_variable_joint_heads(folder: Folder) -> None:
    save(folder, joint_heads_report(folder))


@case(
    "report",
    "CV-8",
    "A joint unit whose second site writes the location's head again and whose third sits below "
    "the location's layer.",
    ("V113", "/claims/variables/0/units/0/joint_sites/0"),
    ("V113", "/claims/variables/0/units/0/joint_sites/1/layer"),
    ("V105", "/claims/variables/0/units/0/joint_sites/0"),
    ("V105", "/claims/variables/0/units/0/joint_sites/1"),
)
def causal_variable_joint_sites_overlap(folder: Folder) -> None:
    doc = joint_heads_report(folder)
    sites = doc["claims"]["variables"][0]["units"][0]["joint_sites"]
    sites[0]["heads"] = [3]  # the location's head; its featurizer reads head 9 (V105)
    sites[1]["layer"] = 6  # its featurizer reads layer 8 (V105)
    save(folder, doc)


@case(
    "report",
    "S-6 CV-8",
    "A spec 1.1 report with a joint unit: joint_sites is new in 1.2.",
    ("S112", "/claims/variables/0/units/0/joint_sites"),
)
def causal_variable_joint_sites_in_1_1(folder: Folder) -> None:
    doc = joint_heads_report(folder)
    doc["spec_version"] = "1.1"
    save(folder, doc)
