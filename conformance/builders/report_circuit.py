"""Report cases of the circuit track (ids ``circuit-…``)."""

from __future__ import annotations

import numpy as np

from ._common import GPT2_SMALL, GRID, Folder, Json, case, read_json, rehash, save
from ._graphs import INTERPBENCH_UNIVERSE, curve_values, edges_at, mib_auroc, planted_truth, trapezoid
from ._inputs import das_featurizer
from ._reports import INTERPBENCH_PATH, circuit_report, circuit_setup


@case(
    "report",
    "DK-1 A-6 A-7 A-8",
    "GPT-2 small on IOI: EAP-IG scores over all 32,491 edges, circuits at the ten grid points for both "
    "rankings, CPR and CMD as trapezoids of the curves.",
)
def circuit_gpt2_small_ioi(folder: Folder) -> None:
    save(folder, circuit_report(folder, "gpt2"))


@case(
    "report",
    "DK-1 A-6 A-7",
    "The InterpBench model (1,108 edges) with an edge AUROC (rank statistic) against its ground-truth "
    "circuit.",
)
def circuit_interpbench_auroc(folder: Folder) -> None:
    save(folder, circuit_report(folder, "interpbench", auroc=True))


@case("report", "DK-1 S-4", "A circuit report declaring the mib-2025 compatibility profile.")
def circuit_mib_2025_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["profile"] = "mib-2025"
    save(folder, doc)


@case("report", "DK-1 S-3", "A circuit report with uncertainties, seeds and a local model.")
def circuit_with_uncertainty(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cpr"]["uncertainty"] = {
        "kind": "standard_error",
        "value": 0.0121,
        "n": 5,
        "method": "bootstrap",
    }
    doc["claims"]["curves"][0]["points"][4]["uncertainty"] = {
        "kind": "confidence_interval",
        "lower": 0.65,
        "upper": 0.79,
        "level": 0.95,
        "method": "bootstrap",
    }
    doc["seeds"] = [{"purpose": "bootstrap resampling", "value": 2025}]
    save(folder, doc)


@case(
    "report",
    "D-5",
    "task.n_examples is 2^64 on a dataset of 3 rows.",
    ("D105", "/task/n_examples"),
)
def circuit_example_count_not_the_datasets(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["task"]["n_examples"] = 2**64
    save(folder, doc)


@case(
    "report",
    "D-6",
    "A report on the validation split of IOI, whose dataset document holds the validation split.",
)
def circuit_split_of_the_dataset(folder: Folder) -> None:
    doc = circuit_report(folder)
    dataset = read_json(folder, "dataset.json")
    dataset["split"] = doc["task"]["split"] = "validation"
    save(folder, dataset, "dataset.json")
    save(folder, rehash(folder, doc))


@case(
    "report",
    "D-6",
    "task.split names the validation split; the dataset document holds the test split.",
    ("D106", "/task/split"),
)
def circuit_split_not_the_datasets(folder: Folder) -> None:
    doc = circuit_report(folder)
    assert read_json(folder, "dataset.json")["split"] == "test"
    doc["task"]["split"] = "validation"
    save(folder, doc)


@case("report", "S-1", 'spec_version "2.0" is not a version this spec defines.', ("S102", "/spec_version"))
def circuit_unknown_spec_version(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["spec_version"] = "2.0"
    save(folder, doc)


@case("report", "S-3 DK-1", 'track "circuits" is not one of the four tracks.', ("S113", "/track"))
def circuit_unknown_track(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["track"] = "circuits"
    save(folder, doc)


@case("report", "S-4", "The report names a profile that does not exist.", ("S104", "/profile"))
def circuit_unknown_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["profile"] = "mib-2024"
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A curve point at k = 0 (the grid has no k = 0 point; k must be > 0).",
    ("S114", "/claims/curves/0/points/0/k"),
)
def circuit_k_zero(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][0]["k"] = 0
    save(folder, doc)


@case(
    "report",
    "K-1",
    "The grid leaves out k = 0.001 (curves and areas follow it), so it is not the profile's grid.",
    ("K101", "/settings/grid"),
)
def circuit_grid_not_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["settings"]["grid"] = list(GRID[1:])
    for curve in doc["claims"]["curves"]:
        curve["points"] = curve["points"][1:]
    signed, absolute = doc["claims"]["curves"]
    doc["claims"]["cpr"]["value"] = trapezoid(GRID[1:], curve_values(signed))
    doc["claims"]["cmd"]["value"] = trapezoid(GRID[1:], [abs(1 - f) for f in curve_values(absolute)])
    save(folder, doc)


@case(
    "report",
    "K-1",
    "One point of the signed curve sits at k = 0.003, off the grid (and so off its circuit's k).",
    ("K102", "/claims/curves/0"),
    ("K109", "/claims/curves/0/points/1/circuit"),
)
def circuit_curve_off_grid(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][1]["k"] = 0.003
    save(folder, doc)


@case(
    "report",
    "K-2",
    "The circuit at k = 0.05 claims one edge more than floor(0.05 * |E|) (and than its circuit has).",
    ("K103", "/claims/curves/0/points/5/n_edges"),
    ("K109", "/claims/curves/0/points/5/circuit"),
)
def circuit_too_many_edges(folder: Folder) -> None:
    doc = circuit_report(folder)
    point = doc["claims"]["curves"][0]["points"][5]
    point["n_edges"] = edges_at(point["k"], doc["claims"]["n_edges"]) + 1
    save(folder, doc)


@case(
    "report",
    "K-2 K-9",
    "The weighted size at k = 0.1 exceeds 0.1 * |E| (and is not the size of the point's circuit).",
    ("K103", "/claims/curves/1/points/6/weighted_size"),
    ("K111", "/claims/curves/1/points/6/weighted_size"),
)
def circuit_weighted_size_too_large(folder: Folder) -> None:
    doc = circuit_report(folder)
    point = doc["claims"]["curves"][1]["points"][6]
    point["weighted_size"] = point["k"] * doc["claims"]["n_edges"] + 1.0
    save(folder, doc)


@case(
    "report",
    "K-7",
    "The point at k = 0.5 of the signed curve names circuit 999; the circuit document lists 20.",
    ("K109", "/claims/curves/0/points/8/circuit"),
)
def circuit_point_names_unlisted_circuit(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][8]["circuit"] = 999
    save(folder, doc)


@case(
    "report",
    "K-7 K-9",
    "The point at k = 0.5 of the signed curve names the circuit listed at k = 1 (all edges): its k and "
    "edge count are not that circuit's, nor is its weighted size.",
    ("K109", "/claims/curves/0/points/8/circuit"),
    ("K111", "/claims/curves/0/points/8/weighted_size"),
)
def circuit_point_names_another_circuit(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][8]["circuit"] = 9
    save(folder, doc)


@case(
    "report",
    "C-1",
    "The claimed CPR is 0.01 above the trapezoid of the signed curve.",
    ("C101", "/claims/cpr/value"),
)
def circuit_cpr_inconsistent(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cpr"]["value"] += 0.01
    save(folder, doc)


@case(
    "report",
    "C-1",
    "CMD computed from the signed curve while settings.ranking.cmd declares the absolute one.",
    ("C102", "/claims/cmd/value"),
)
def circuit_cmd_from_wrong_ranking(folder: Folder) -> None:
    doc = circuit_report(folder)
    signed = doc["claims"]["curves"][0]
    doc["claims"]["cmd"]["value"] = trapezoid(GRID, [abs(1 - f) for f in curve_values(signed)])
    save(folder, doc)


@case(
    "report",
    "C-2",
    "settings.ranking.cmd names the absolute ranking but only the signed curve is claimed.",
    ("C103", "/settings/ranking/cmd"),
)
def circuit_missing_absolute_curve(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"] = doc["claims"]["curves"][:1]
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A negative CMD (an area of |1 - f| cannot be negative).",
    ("S114", "/claims/cmd/value"),
)
def circuit_negative_cmd(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cmd"]["value"] = -0.1
    save(folder, doc)


@case("report", "M-1", "A hub model without its pinned revision.", ("A111", "/model"))
def circuit_hub_model_without_revision(folder: Folder) -> None:
    doc = circuit_report(folder)
    # without GPT-2 small's config, which declares another graph universe than the circuit's (K110)
    doc["model"] = {key: value for key, value in GPT2_SMALL.items() if key not in ("revision", "config")}
    save(folder, doc)


@case(
    "report", "S-3", "A hub revision that is a branch name, not a 40-hex commit.", ("S115", "/model/revision")
)
def circuit_revision_not_commit(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["model"] = {**GPT2_SMALL, "revision": "main"}
    save(folder, doc)


@case(
    "report",
    "S-3",
    "An additional property inside settings (documents are closed).",
    ("S112", "/settings/tie_break"),
)
def circuit_settings_additional_property(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["settings"]["tie_break"] = "random"
    save(folder, doc)


@case("report", "S-3", "CMD given as a string.", ("S110", "/claims/cmd/value"))
def circuit_cmd_not_a_number(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cmd"]["value"] = str(doc["claims"]["cmd"]["value"])
    save(folder, doc)


@case(
    "report",
    "A-6",
    "circuit.json is declared as a circuit document but holds a featurizer.",
    ("A107", "/artifacts/0/kind"),
)
def circuit_artifact_of_wrong_kind(folder: Folder) -> None:
    doc = circuit_report(folder)
    for name in ("circuit.json", "circuit.safetensors"):
        (folder.root / name).unlink()
    das_featurizer(folder, name="circuit.json")
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-6 A-3",
    "The referenced circuit document is itself invalid (its sidecar's hash differs); "
    "the finding belongs to circuit.json and the report is invalid through it.",
    ("A103", "/artifacts/0/sha256", "circuit.json"),
    ("A107", "/artifacts/0"),
)
def circuit_referenced_circuit_invalid(folder: Folder) -> None:
    doc = circuit_report(folder)
    circuit = read_json(folder, "circuit.json")
    circuit["artifacts"][0]["sha256"] = "0" * 64
    save(folder, circuit, "circuit.json")
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-7",
    'claims.circuit names an artifact that does not declare "kind": "circuit".',
    ("A107", "/claims/circuit"),
)
def circuit_reference_without_kind(folder: Folder) -> None:
    doc = circuit_report(folder)
    del doc["artifacts"][0]["kind"]
    save(folder, doc)


@case(
    "report",
    "A-7",
    "claims.circuit names an artifact id the report does not declare.",
    ("A109", "/claims/circuit"),
)
def circuit_undeclared_reference(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["circuit"] = "circuits"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "The AUROC ground truth names the dataset artifact, which is not a circuit document.",
    ("A107", "/claims/auroc/ground_truth"),
)
def circuit_ground_truth_not_a_circuit(folder: Folder) -> None:
    doc = circuit_report(folder, "interpbench", auroc=True)
    doc["claims"]["auroc"]["ground_truth"] = "dataset"
    save(folder, doc)


@case(
    "report",
    "A-1",
    "An artifact path climbs out of the report's folder with '..'.",
    ("A101", "/artifacts/1/path"),
)
def circuit_artifact_path_dotdot(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "../invalid/dataset.json"
    save(folder, doc)


@case("report", "A-1", "An absolute artifact path.", ("A101", "/artifacts/1/path"))
def circuit_artifact_path_absolute(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "/srv/mib/ioi/dataset.json"
    save(folder, doc)


@case("report", "A-1", "A Windows path with a drive letter and backslashes.", ("A101", "/artifacts/1/path"))
def circuit_artifact_path_windows(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "C:\\mib\\ioi\\dataset.json"
    save(folder, doc)


@case(
    "report",
    "A-1",
    "A relative path written with backslashes (artifact paths are POSIX).",
    ("A101", "/artifacts/1/path"),
)
def circuit_artifact_path_backslash(folder: Folder) -> None:
    doc = circuit_report(folder)
    (folder.root / "data").mkdir()
    (folder.root / "dataset.json").rename(folder.root / "data" / "dataset.json")
    doc["artifacts"][1]["path"] = "data\\dataset.json"
    save(folder, doc)


@case("report", "A-1", 'Two artifacts share the id "circuit".', ("A108", "/artifacts/2/id"))
def circuit_duplicate_artifact_id(folder: Folder) -> None:
    doc = circuit_report(folder)
    folder.safetensors("extra.safetensors", {"scores": np.zeros(4, dtype=np.float32)})
    doc["artifacts"].append(
        folder.artifact("circuit", "scores", "extra.safetensors", "application/x-safetensors")
    )
    save(folder, doc)


# --------------------------------------------------------------------------- edge totals, point sizes, AUROC


@case(
    "report",
    "K-8 K-2",
    "claims.n_edges is 10^9 while the circuit document's graph (and the model's configuration) has 479 "
    "edges: circuit sizes are bounded by the graph's total, never the claimed one.",
    ("K110", "/claims/n_edges"),
)
def circuit_edge_total_not_graph(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["n_edges"] = 10**9
    save(folder, doc)


@case(
    "report",
    "K-9",
    "The empty circuit at k = 0.001 claims a weighted size of 0.05; its row prunes to 0 edges.",
    ("K111", "/claims/curves/0/points/0/weighted_size"),
)
def circuit_weighted_size_not_recorded(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][0]["weighted_size"] = 0.05
    save(folder, doc)


def _rebuilt_points(doc: Json) -> Json:
    """The points without their circuit rows: each is the top floor(k · |E|) edges of the scores."""
    for curve in doc["claims"]["curves"]:
        for point in curve["points"]:
            del point["circuit"]
    return doc


@case(
    "report",
    "K-9 MC-12",
    "Points that name no circuit row: each is rebuilt from the circuit document's edge scores, and its "
    "edge count and weighted size are those of the rebuilt circuit.",
)
def circuit_points_rebuilt_from_scores(folder: Folder) -> None:
    save(folder, _rebuilt_points(circuit_report(folder)))


@case(
    "report",
    "K-9",
    "A point rebuilt from the scores claims one edge more of weighted size at k = 0.5 than its circuit "
    "keeps after pruning (still within k · |E|).",
    ("K111", "/claims/curves/1/points/8/weighted_size"),
)
def circuit_rebuilt_point_size_off(folder: Folder) -> None:
    doc = _rebuilt_points(circuit_report(folder))
    doc["claims"]["curves"][1]["points"][8]["weighted_size"] -= 1.0
    save(folder, doc)


@case(
    "report",
    "K-9",
    "A report without a circuit document whose point at k = 0.1 declares an edge count and a weighted "
    "size: no circuit they could be checked against.",
    ("K112", "/claims/curves/0/points/6/n_edges"),
    ("K112", "/claims/curves/0/points/6/weighted_size"),
)
def circuit_point_size_without_circuit(folder: Folder) -> None:
    doc = circuit_report(folder)
    del doc["claims"]["circuit"]
    doc["artifacts"] = [a for a in doc["artifacts"] if a["id"] != "circuit"]
    for name in ("circuit.json", "circuit.safetensors"):
        (folder.root / name).unlink()
    for c, curve in enumerate(doc["claims"]["curves"]):
        for p, point in enumerate(curve["points"]):
            del point["circuit"]
            if (c, p) != (0, 6):
                del point["n_edges"], point["weighted_size"]
    save(folder, doc)


@case(
    "report",
    "K-10",
    "Two curves of the signed ranking (the second a copy of the first).",
    ("K113", "/claims/curves/1/ranking"),
)
def circuit_duplicate_curve_ranking(folder: Folder) -> None:
    doc = circuit_report(folder)
    signed = doc["claims"]["curves"][0]
    doc["claims"]["curves"][1] = {"ranking": "signed", "points": [dict(p) for p in signed["points"]]}
    doc["settings"]["ranking"]["cmd"] = "signed"
    doc["claims"]["cmd"]["value"] = trapezoid(GRID, [abs(1 - f) for f in curve_values(signed)])
    save(folder, doc)


@case(
    "report",
    "C-13 MC-10",
    "The InterpBench edge AUROC under MIB's convention (ceil(k · n) edges per grid point, trapezoid over "
    "FPR normalised by its last value).",
)
def circuit_interpbench_auroc_mib(folder: Folder) -> None:
    doc = circuit_report(folder, "interpbench", auroc=True)
    _, _, scores, _ = circuit_setup("interpbench")
    truth = planted_truth(INTERPBENCH_UNIVERSE, INTERPBENCH_PATH)
    doc["claims"]["auroc"] = {
        **doc["claims"]["auroc"],
        "convention": "mib",
        "value": mib_auroc(scores, truth, GRID),
    }
    save(folder, doc)


@case(
    "report",
    "C-13 MC-9",
    "The claimed AUROC is 0.02 below the rank statistic of the edge scores against the ground truth.",
    ("C125", "/claims/auroc/value"),
)
def circuit_auroc_inconsistent(folder: Folder) -> None:
    doc = circuit_report(folder, "interpbench", auroc=True)
    doc["claims"]["auroc"]["value"] -= 0.02
    save(folder, doc)


@case(
    "report",
    "C-13",
    "The AUROC's ground truth is the report's own circuit document, whose 20 rows are not one true edge "
    "set: nothing to recompute the AUROC against.",
    ("C126", "/claims/auroc"),
)
def circuit_auroc_ground_truth_not_one_row(folder: Folder) -> None:
    doc = circuit_report(folder, "interpbench", auroc=True)
    doc["claims"]["auroc"]["ground_truth"] = "circuit"
    save(folder, doc)


# --------------------------------------------------------------------------- declared rounding (1.1)


def _printed_curves(doc: Json) -> Json:
    """Faithfulness, CPR, CMD, m(N) and m(∅) to two decimals, with the rounding declared on the
    report (every claim a rounding applies to is a number of it, C-11)."""
    for key in ("m_full", "m_empty"):
        doc["claims"][key] = round(doc["claims"][key], 2)
    for curve in doc["claims"]["curves"]:
        for point in curve["points"]:
            point["faithfulness"] = round(point["faithfulness"], 2)
    for key in ("cpr", "cmd"):
        doc["claims"][key]["value"] = round(doc["claims"][key]["value"], 2)
    doc["rounding"] = {"decimals": 2}
    return doc


@case(
    "report",
    "C-10 C-1",
    "Faithfulness, CPR and CMD printed to two decimals with the rounding declared: the areas hold "
    "within the rounding of the curve and of themselves.",
)
def circuit_rounding_declared(folder: Folder) -> None:
    save(folder, _printed_curves(circuit_report(folder)))


@case(
    "report",
    "C-10 C-1",
    "Printed to two decimals as declared, but CPR is 0.02 off: beyond what the rounding allows.",
    ("C101", "/claims/cpr/value"),
)
def circuit_rounding_cpr_beyond(folder: Folder) -> None:
    doc = _printed_curves(circuit_report(folder))
    doc["claims"]["cpr"]["value"] = round(doc["claims"]["cpr"]["value"] + 0.02, 2)
    save(folder, doc)


@case(
    "report",
    "C-11 C-10",
    "Printed to two decimals as declared, but CPR is claimed with three: 0.971 is not a number of "
    "that rounding, though the curve's rounding would allow it.",
    ("C130", "/claims/cpr/value"),
)
def circuit_rounding_claim_not_printed(folder: Folder) -> None:
    doc = _printed_curves(circuit_report(folder))
    doc["claims"]["cpr"]["value"] = round(doc["claims"]["cpr"]["value"] + 0.001, 3)
    save(folder, doc)


@case(
    "report",
    "C-12 C-10",
    "Every claim printed to zero decimals as declared: each is a number of that rounding and CPR "
    "holds within it, but the default profile accepts no rounding coarser than two decimals for "
    "faithfulness, CPR, CMD and the mean metrics (one finding per kind, at the declaration).",
    ("C131", "/rounding"),
)
def circuit_rounding_coarser_than_profile(folder: Folder) -> None:
    doc = _printed_curves(circuit_report(folder))
    claims = doc["claims"]
    for key in ("m_full", "m_empty"):
        claims[key] = round(claims[key], 0) + 0.0
    for curve in claims["curves"]:
        for point in curve["points"]:
            point["faithfulness"] = round(point["faithfulness"], 0) + 0.0
    for key in ("cpr", "cmd"):
        claims[key]["value"] = round(claims[key]["value"], 0) + 0.0
    doc["rounding"] = {"decimals": 0}
    save(folder, doc)


@case(
    "report",
    "S-7",
    "A report migrated from a 1.0 document that did not verify (it declared a rounding, which 1.0 "
    "refuses): the migration recorded the input's finding, and the document is not conformant until "
    "it is fixed and the record removed.",
    ("C127", "/extensions/mibspec:migration"),
)
def circuit_migrated_from_invalid(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["extensions"] = {
        "mibspec:migration": {
            "from": "1.0",
            "to": "1.1",
            "input_findings": [
                {
                    "document": "document.json",
                    "code": "S112",
                    "pointer": "/rounding",
                    "message": "unexpected property 'rounding'",
                }
            ],
        }
    }
    save(folder, doc)
