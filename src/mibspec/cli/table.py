"""Every ``mibspec`` command, in one table: the only place commands are registered.

An entry names a command (its words, ``"schema list"``), the ``module:function`` that
implements it and the summary its group's ``--help`` lists; a group entry names a command
group and its help. The application is built from this table (:mod:`mibspec.cli._lazy`),
and a command's module is imported only when that command runs or shows its own help: so
``mibspec verify`` never imports the importers, the exporters, the parity harness or the
``score`` commands. A command's full help is its function's docstring, whose first paragraph
is the summary here (``tests/cli/test_table.py`` checks that they agree).

The ``score`` commands are not listed here: each track's descriptor (:mod:`mibspec.core.tracks`)
names its command and summary, and :func:`score_commands` lists one ``score <track>`` command
per track, in the descriptors' order.

This module imports only the standard library and the track descriptors (which import nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mibspec.core.tracks import TRACKS, Track

__all__ = ["COMMANDS", "Command", "Group", "score_commands"]


@dataclass(frozen=True)
class Command:
    """A command: ``name`` its words after ``mibspec``, ``target`` the ``module:function``
    implementing it, ``summary`` the first paragraph of that function's docstring. A command
    has one name: no two entries share a ``target``."""

    name: str
    target: str
    summary: str


@dataclass(frozen=True)
class Group:
    """A command group: ``name`` its words after ``mibspec``, ``help`` what ``--help`` says."""

    name: str
    help: str


_CLI = "mibspec.cli"


def score_commands(tracks: Mapping[str, Track]) -> tuple[Command, ...]:
    """``mibspec score <word>`` for every track, as its descriptor names it."""
    return tuple(
        Command(f"score {track.word}", track.score_command, track.score_summary) for track in tracks.values()
    )


#: The commands and groups, in the order ``--help`` lists them.
COMMANDS: tuple[Command | Group, ...] = (
    Command(
        "verify",
        f"{_CLI}.verify:verify_command",
        "Check documents: strict parsing, schema, rules, then recomputation of claims.",
    ),
    Command(
        "verify-submission",
        f"{_CLI}.verify_submission:verify_submission_command",
        "Import a MIB submission with its dataset and model pin, verify it with recomputation.",
    ),
    Command(
        "verify-receipt",
        f"{_CLI}.receipt:verify_receipt_command",
        "Re-hash the files a receipt lists (no recomputation); exit 1 listing what changed.",
    ),
    Command(
        "rules",
        f"{_CLI}.rules:rules_command",
        "List the rule catalogue, or explain one rule, or show the spec's requirement coverage.",
    ),
    Command(
        "cite",
        f"{_CLI}.cite:cite_command",
        "How to cite the spec version and the exact schema bundle a report was checked with.",
    ),
    Command(
        "html",
        f"{_CLI}.html:html_command",
        "Verify a report and summarise it in one self-contained HTML page with figures.",
    ),
    Command(
        "leaderboard",
        f"{_CLI}.leaderboard:leaderboard_command",
        "Verify every report below DIR and tabulate the conformant circuit reports (CPR, CMD).",
    ),
    Command(
        "migrate",
        f"{_CLI}.migrate:migrate_command",
        "Migrate a document to another spec version (atomic write; the input is kept unless --in-place).",
    ),
    Group("schema", "List, show and export the spec's JSON Schemas."),
    Command(
        "schema list",
        f"{_CLI}.schema:schema_list_command",
        "List the schemas of the spec version: kind (what `schema show` takes), file and $id.",
    ),
    Command(
        "schema show",
        f"{_CLI}.schema:schema_show_command",
        "Print one schema as JSON: `mibspec schema show report`.",
    ),
    Command(
        "schema export",
        f"{_CLI}.schema:schema_export_command",
        "Write the spec version's schema bundle into a folder (for editors and offline hooks).",
    ),
    Group("import", "Convert files written by other tools into mibspec documents."),
    Command(
        "import eap-ig",
        f"{_CLI}.imports:import_eap_ig_command",
        "Import an EAP-IG graph as a circuit document, then verify what was written.",
    ),
    Command(
        "import mib-submission",
        f"{_CLI}.imports:import_mib_submission_command",
        "Import a MIB submission folder of either track, then verify what was written.",
    ),
    Command(
        "import mib-circuit-results",
        f"{_CLI}.imports:import_mib_circuit_results_command",
        "Import MIB circuit results as reports, then verify them (exit 1 lists what they lack).",
    ),
    Command(
        "import mib-causal-results",
        f"{_CLI}.imports:import_mib_causal_results_command",
        "Import MIB causal-variable results as reports, then verify them (exit 1 lists what they lack).",
    ),
    Command(
        "import mib-dataset",
        f"{_CLI}.imports:import_mib_dataset_command",
        "Import MIB's released dataset files as counterfactual datasets, then verify them.",
    ),
    Group("score", "Run a reference method on a model and a dataset and write a complete report."),
    *score_commands(TRACKS),
    Group("export", "Write mibspec documents in the file formats of other tools."),
    Command(
        "export eap-ig",
        f"{_CLI}.exports:export_eap_ig_command",
        "Write a circuit document as a graph EAP-IG's Graph.from_json or Graph.from_pt loads.",
    ),
    Command(
        "export mib-submission",
        f"{_CLI}.exports:export_mib_submission_command",
        "Write reports as a MIB submission folder of their track: circuit reports as one "
        "<task>_<model> folder each, causal-variable reports as their featurizers' unit files and "
        "MIB's result file of their unit scores (token positions as declared rules, "
        "token_positions.json, never as code).",
    ),
    Group("conformance", "Run the conformance suite."),
    Command(
        "conformance run",
        f"{_CLI}.conformance:conformance_run_command",
        "Run the conformance suite and report CTRF JSON or JUnit XML (exit 1 when a case fails).",
    ),
    Group("parity", "Run the public MIB code (in its own environment) on a report's inputs and compare."),
    Command(
        "parity circuit",
        f"{_CLI}.parity:parity_circuit_command",
        "Print the public code's and mibspec's values side by side; exit 1 when a value the "
        "profile promises to reproduce differs beyond its float32 tolerance, 2 when the report "
        "does not verify or the public code or its environment is missing.",
    ),
    Command(
        "parity causal-variable",
        f"{_CLI}.parity:parity_causal_variable_command",
        "Print pyvene's and mibspec's intervened values side by side per unit and counterfactual "
        "set; exit 1 when a value differs beyond its float32 tolerance, 2 when the report does not "
        "verify or pyvene or its environment is missing.",
    ),
)
