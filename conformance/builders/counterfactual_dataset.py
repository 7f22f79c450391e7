"""Cases of kind ``counterfactual_dataset``: IOI, MCQA and arithmetic rows in JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Callable

from ._common import Folder, Json, case, rehash, save
from ._inputs import DATASET_ROWS, REPORT_ROWS, das_featurizer, generated, write_dataset


def ioi_document(folder: Folder) -> Json:
    """The IOI dataset of ``ioi-five-rows``, written as the case's document."""
    return write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")


def document_with_causal_model(folder: Folder, task: str) -> Json:
    """The task's dataset with its causal model (``causal_model.json``), written as the case's document."""
    return write_dataset(folder, task=task, name="document.json", causal_model="causal_model.json")


@case(
    "counterfactual_dataset",
    "DK-4 A-5",
    "IOI: five base prompts, each with its eight counterfactual prompts and the expected outputs under "
    "interchange interventions.",
)
def ioi_five_rows(folder: Folder) -> None:
    ioi_document(folder)


@case(
    "counterfactual_dataset", "DK-4 A-5 A-6", "MCQA colour questions with their answer-pointer causal model."
)
def mcqa_with_causal_model(folder: Folder) -> None:
    document_with_causal_model(folder, "mcqa")


@case("counterfactual_dataset", "DK-4 A-5 A-6", "Two-digit addition with the carry causal model.")
def arithmetic_with_causal_model(folder: Folder) -> None:
    document_with_causal_model(folder, "arithmetic")


@case(
    "counterfactual_dataset",
    "A-5",
    "The JSON Lines file has 5 rows, 6 are declared.",
    ("A106", "/artifacts/0/rows"),
)
def jsonl_row_count_mismatch(folder: Folder) -> None:
    doc = ioi_document(folder)
    doc["artifacts"][0]["rows"] = 6
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-5",
    "Line 3 of the JSON Lines file is an array, not an object.",
    ("A106", "/artifacts/0"),
)
def jsonl_non_object_line(folder: Folder) -> None:
    doc = ioi_document(folder)
    rows = list(generated("ioi", DATASET_ROWS).rows)
    rows[2] = [rows[2]["base"]["prompt"], rows[2]["base"]["answer"]]
    folder.jsonl("dataset.jsonl", rows)
    save(folder, rehash(folder, doc))


@case("counterfactual_dataset", "A-5", "Line 2 of the JSON Lines file is not JSON.", ("A106", "/artifacts/0"))
def jsonl_invalid_line(folder: Folder) -> None:
    _dataset_with_row_2(folder, lambda line: line[:-40])


def _dataset_with_row_2(folder: Folder, change: Callable[[bytes], bytes]) -> None:
    """A dataset whose second JSON Lines row is ``change(row)`` (the file re-pinned)."""
    doc = ioi_document(folder)
    lines = (folder.root / "dataset.jsonl").read_bytes().split(b"\n")
    lines[1] = change(lines[1])
    folder.write("dataset.jsonl", b"\n".join(lines))
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "A-5 P-3",
    "Line 2 of the JSON Lines file holds NaN: rows are parsed as strictly as documents.",
    ("A106", "/artifacts/0"),
)
def jsonl_non_finite_row(folder: Folder) -> None:
    _dataset_with_row_2(folder, lambda line: line[:-1] + b',"weight":NaN}')


@case(
    "counterfactual_dataset",
    "A-5 P-2",
    "Line 2 of the JSON Lines file repeats a key: rows are parsed as strictly as documents.",
    ("A106", "/artifacts/0"),
)
def jsonl_duplicate_key_row(folder: Folder) -> None:
    _dataset_with_row_2(folder, lambda line: line[:-1] + b',"id":"again"}')


@case(
    "counterfactual_dataset",
    "A-5 DS-1",
    "Line 2 of the JSON Lines file is empty, before the five rows it declares: every line holds a row.",
    ("A106", "/artifacts/0"),
)
def jsonl_blank_line(folder: Folder) -> None:
    _dataset_with_row_2(folder, lambda line: b"\n" + line)


def _dataset_with_rows(folder: Folder, change: Callable[[list[Json]], None]) -> None:
    """The IOI dataset with its rows changed by ``change`` (the file re-pinned)."""
    doc = ioi_document(folder)
    rows = [json.loads(json.dumps(row)) for row in generated("ioi", DATASET_ROWS).rows]
    change(rows)
    folder.jsonl("dataset.jsonl", rows)
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "DS-2",
    "Row 3 is the empty object {}: a row holds id, base, counterfactuals and interventions.",
    ("V112", "/examples"),
)
def row_empty_object(folder: Folder) -> None:
    _dataset_with_rows(folder, lambda rows: rows.__setitem__(2, {}))


@case(
    "counterfactual_dataset",
    "DS-2 DS-3",
    "Row 2 lacks one of the declared counterfactual types and its base prompt lacks its template.",
    ("V112", "/examples"),
)
def row_missing_counterfactual_and_template(folder: Folder) -> None:
    def change(rows: list[Json]) -> None:
        rows[1]["counterfactuals"].pop(sorted(rows[1]["counterfactuals"])[0])
        del rows[1]["base"]["template"]

    _dataset_with_rows(folder, change)


@case(
    "counterfactual_dataset",
    "DS-3",
    "Row 4's base template, filled with its slots, is not its prompt.",
    ("V112", "/examples"),
)
def row_template_is_not_the_prompt(folder: Folder) -> None:
    def change(rows: list[Json]) -> None:
        rows[3]["base"]["prompt"] = rows[3]["base"]["prompt"] + " again"

    _dataset_with_rows(folder, change)


@case("counterfactual_dataset", "DS-2", "Rows 1 and 5 have the same id.", ("V112", "/examples"))
def row_id_used_twice(folder: Folder) -> None:
    def change(rows: list[Json]) -> None:
        rows[4]["id"] = rows[0]["id"]

    _dataset_with_rows(folder, change)


@case(
    "counterfactual_dataset", "A-5", "A JSON Lines artifact without its row count.", ("A106", "/artifacts/0")
)
def jsonl_without_rows(folder: Folder) -> None:
    doc = ioi_document(folder)
    del doc["artifacts"][0]["rows"]
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-4",
    "JSON Lines rows stored in a file named .json.",
    ("A105", "/artifacts/0/media_type"),
)
def jsonl_wrong_extension(folder: Folder) -> None:
    write_dataset(folder, n_rows=DATASET_ROWS, name="document.json", rows_file="dataset_rows.json")


@case(
    "counterfactual_dataset",
    "DS-10",
    "A dataset that declares neither its generator nor the released file it was imported from.",
    ("V111", ""),
)
def origin_undeclared(folder: Folder) -> None:
    doc = ioi_document(folder)
    del doc["generator"]
    save(folder, doc)


@case("counterfactual_dataset", "S-3 DK-4", 'split "dev" is not defined.', ("S113", "/split"))
def unknown_split(folder: Folder) -> None:
    doc = ioi_document(folder)
    doc["split"] = "dev"
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "S-3 DK-4",
    "A dataset without any counterfactual type.",
    ("S116", "/counterfactual_types"),
)
def no_counterfactual_types(folder: Folder) -> None:
    doc = ioi_document(folder)
    doc["counterfactual_types"] = []
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-6",
    "causal_model.json is declared a causal model but holds a featurizer.",
    ("A107", "/artifacts/1/kind"),
)
def causal_model_artifact_holds_featurizer(folder: Folder) -> None:
    doc = document_with_causal_model(folder, "arithmetic")
    das_featurizer(folder, name="causal_model.json")
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "A-7",
    'causal_model names an artifact declared without "kind".',
    ("A107", "/causal_model"),
)
def causal_model_reference_without_kind(folder: Folder) -> None:
    doc = document_with_causal_model(folder, "arithmetic")
    del doc["artifacts"][1]["kind"]
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-1",
    "The rows file is a symbolic link to a file of a sibling case: the link "
    "resolves outside the document's folder.",
    ("A101", "/artifacts/0/path"),
)
def symlink_escape_to_sibling(folder: Folder) -> None:
    doc = ioi_document(folder)
    (folder.root / "dataset.jsonl").unlink()
    folder.symlink("dataset.jsonl", "../../valid/ioi-five-rows/dataset.jsonl")
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-3",
    "The rows file's SHA-256 differs from the declared one (one row edited after hashing, same size).",
    ("A103", "/artifacts/0/sha256"),
)
def sha256_mismatch(folder: Folder) -> None:
    doc = ioi_document(folder)
    path = folder.root / "dataset.jsonl"
    data = bytearray(path.read_bytes())
    at = data.index(b'"prompt":"') + len(b'"prompt":"')
    data[at : at + 1] = data[at : at + 1].swapcase()
    path.write_bytes(bytes(data))
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-3",
    "The declared byte size is one byte short.",
    ("A104", "/artifacts/0/bytes"),
)
def byte_size_mismatch(folder: Folder) -> None:
    doc = ioi_document(folder)
    doc["artifacts"][0]["bytes"] -= 1
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "S-3 A-3",
    "A SHA-256 written in upper case (the pattern is lower-case hex).",
    ("S115", "/artifacts/0/sha256"),
)
def sha256_upper_case(folder: Folder) -> None:
    doc = ioi_document(folder)
    doc["artifacts"][0]["sha256"] = doc["artifacts"][0]["sha256"].upper()
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "CV-5 DS-6",
    "An interchange output written by hand: row 2's expected output under io_s2_flip is the base answer.",
    ("V107", "/examples"),
)
def intervention_not_from_causal_model(folder: Folder) -> None:
    doc = document_with_causal_model(folder, "ioi")
    rows = [dict(row) for row in generated("ioi", REPORT_ROWS["ioi"]).rows]
    rows[1] = json.loads(json.dumps(rows[1]))
    rows[1]["interventions"]["io_s2_flip"]["output_position"] = rows[1]["base"]["answer"]
    folder.jsonl("dataset.jsonl", rows)
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "CV-5",
    "The dataset declares a variable its causal model cannot intervene on.",
    ("V107", "/variables/1"),
)
def variable_outside_mechanism(folder: Folder) -> None:
    doc = document_with_causal_model(folder, "arithmetic")
    doc["variables"] = ["ones_carry", "tens_carry"]
    save(folder, doc)
