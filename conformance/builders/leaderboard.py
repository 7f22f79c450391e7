"""Cases of kind ``leaderboard``: circuit-track tables with Average and Score."""

from __future__ import annotations

import copy
import math

from ._common import Folder, Json, case, document, save


def leaderboard_row(method: str, cells: dict[tuple[str, str], float]) -> Json:
    """A row whose Average and Score are written out from MC-11 (mean, mean of sigmoids)."""
    values = list(cells.values())
    return {
        "method": method,
        "cells": [{"task": task, "model": model, "value": value} for (task, model), value in cells.items()],
        "average": math.fsum(values) / len(values),
        "score": math.fsum(1.0 / (1.0 + math.exp(-v)) for v in values) / len(values),
    }


def leaderboard_document() -> Json:
    """CPR and CMD tables in the shape of MIB's circuit tabs (two methods, three cells), under the
    profile that reproduces MIB's conventions."""
    cpr = {("ioi", "gpt2"): 0.92, ("mcqa", "gpt2"): 0.71, ("ioi", "qwen2.5"): 1.18}
    cmd = {("ioi", "gpt2"): 0.05, ("mcqa", "gpt2"): 0.21, ("ioi", "qwen2.5"): 0.12}
    return document(
        "leaderboard",
        {
            "track": "circuit",
            "title": "Circuit localization leaderboard",
            "tables": [
                {
                    "metric": "cpr",
                    "profile": "mib-2025",
                    "rows": [
                        leaderboard_row("EAP-IG", cpr),
                        leaderboard_row("Random", {("ioi", "gpt2"): 0.03}),
                    ],
                },
                {
                    "metric": "cmd",
                    "profile": "mib-2025",
                    "rows": [
                        leaderboard_row("EAP-IG", cmd),
                        leaderboard_row("Random", {("ioi", "gpt2"): 0.97}),
                    ],
                },
            ],
        },
    )


@case("leaderboard", "DK-7 C-9", "CPR and CMD tables: Average and Score follow from each row's cells.")
def leaderboard_two_tables(folder: Folder) -> None:
    save(folder, leaderboard_document())


@case(
    "leaderboard",
    "C-9",
    "A Score quoted with the CMD negated (σ(−x) instead of σ(x)), and an Average over one cell too many.",
    ("C115", "/tables/1/rows/0/score"),
    ("C115", "/tables/0/rows/0/average"),
)
def leaderboard_aggregates_inconsistent(folder: Folder) -> None:
    doc = leaderboard_document()
    row = doc["tables"][1]["rows"][0]
    row["score"] = math.fsum(1.0 / (1.0 + math.exp(c["value"])) for c in row["cells"]) / len(row["cells"])
    cpr_row = doc["tables"][0]["rows"][0]
    cpr_row["average"] = math.fsum(c["value"] for c in cpr_row["cells"]) / (len(cpr_row["cells"]) + 1)
    save(folder, doc)


@case(
    "leaderboard",
    "C-9",
    "The CPR table of one profile twice, a method twice in a table, and a cell twice in a row.",
    ("C116", "/tables/2/metric"),
    ("C116", "/tables/0/rows/2/method"),
    ("C116", "/tables/0/rows/2/cells/1"),
)
def leaderboard_duplicates(folder: Folder) -> None:
    doc = leaderboard_document()
    cpr = doc["tables"][0]
    cpr["rows"].append(leaderboard_row("Random", {("ioi", "gpt2"): 0.03, ("ioi ", "gpt2"): 0.5}))
    cpr["rows"][2]["cells"][1]["task"] = "ioi"
    doc["tables"].append(copy.deepcopy(cpr))
    doc["tables"][2]["rows"] = doc["tables"][2]["rows"][:1]
    save(folder, doc)


@case(
    "leaderboard",
    "DK-7",
    "A Score above 1 and a table of an unknown metric.",
    ("S114", "/tables/0/rows/0/score"),
    ("S113", "/tables/1/metric"),
)
def leaderboard_schema(folder: Folder) -> None:
    doc = leaderboard_document()
    doc["tables"][0]["rows"][0]["score"] = 1.5
    doc["tables"][1]["metric"] = "auroc"
    save(folder, doc)


@case(
    "leaderboard",
    "DK-7 C-9",
    "CPR and CMD tables per profile: reports verified under default and under mib-2025 are ranked in "
    "tables of their own, never in one column.",
)
def leaderboard_tables_per_profile(folder: Folder) -> None:
    doc = leaderboard_document()
    for table in copy.deepcopy(doc["tables"]):
        table["profile"] = "default"
        table["rows"] = [
            leaderboard_row("EAP-IG (inputs)", {("ioi", "tiny-gpt2"): 0.9634, ("mcqa", "tiny-gpt2"): 0.5})
        ]
        doc["tables"].append(table)
    save(folder, doc)


@case(
    "leaderboard",
    "C-9",
    "A spec 1.1 table that does not say which profile its cells were verified under.",
    ("S111", "/tables/1"),
)
def leaderboard_table_without_profile(folder: Folder) -> None:
    doc = leaderboard_document()
    del doc["tables"][1]["profile"]
    save(folder, doc)


@case(
    "leaderboard",
    "C-9",
    "A spec 1.0 leaderboard with a profile on a table (1.0 tables have none).",
    ("S112", "/tables/0/profile"),
)
def leaderboard_profile_1_0(folder: Folder) -> None:
    doc = leaderboard_document()
    doc["spec_version"] = "1.0"
    del doc["tables"][1]["profile"]
    save(folder, doc)
