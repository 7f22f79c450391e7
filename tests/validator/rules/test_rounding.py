"""A declared rounding cannot loosen a check (SPEC.md C-11, C-12, B-2).

The attacks are the ones a declared rounding made possible: on the bundled circuit-ioi report
(CPR 0.963 and CMD 0.049 recomputed), ``"rounding": {"decimals": 0}`` with CPR 1.45 and CMD 0;
the same with every claim printed at zero decimals; significant digits; a per-claim rounding;
and on the planted CAUSAL-BENCH report a convergence test printed to zero decimals with p = 0.
Each must be refused by the rules stage, before any recomputation.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import mibspec

REPO = Path(__file__).resolve().parents[3]
CIRCUIT = REPO / "examples" / "circuit-ioi"
BENCH = REPO / "examples" / "causal_bench"


@pytest.fixture(scope="module")
def circuit_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("circuit-ioi") / "circuit-ioi"
    shutil.copytree(CIRCUIT, target)
    return target


def _errors(doc: dict[str, Any], folder: Path, name: str = "edited.json") -> set[tuple[str, str]]:
    (folder / name).write_text(json.dumps(doc), encoding="utf-8")
    result = mibspec.verify(folder / name, recompute=False)
    return {(f.code, f.pointer) for f in result.documents[0].errors}


def _report(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "report.json").read_text(encoding="utf-8"))


def test_the_example_is_conformant_as_shipped(circuit_copy: Path) -> None:
    assert _errors(_report(circuit_copy), circuit_copy) == set()


def test_a_coarse_rounding_does_not_let_a_false_cpr_through(circuit_copy: Path) -> None:
    doc = _report(circuit_copy)
    doc["rounding"] = {"decimals": 0}
    doc["claims"]["cpr"]["value"] = 1.45
    doc["claims"]["cmd"]["value"] = 0.0
    found = _errors(doc, circuit_copy)
    assert ("C130", "/claims/cpr/value") in found  # 1.45 is not a number of zero decimals
    assert ("C131", "/rounding") in found  # and zero decimals is coarser than default accepts
    assert ("C130", "/claims/m_full") in found  # every rounded claim is held to it
    assert ("C130", "/claims/curves/0/points/5/faithfulness") in found


@pytest.mark.slow
def test_claims_printed_at_a_coarse_rounding_are_refused_for_the_rounding(circuit_copy: Path) -> None:
    doc = _report(circuit_copy)
    claims = doc["claims"]
    doc["rounding"] = {"decimals": 0}
    for key in ("m_full", "m_empty"):
        claims[key] = float(round(claims[key]))
    for curve in claims["curves"]:
        for point in curve["points"]:
            point["faithfulness"] = float(round(point["faithfulness"]))
    claims["cpr"]["value"], claims["cmd"]["value"] = 1.0, 0.0
    assert _errors(doc, circuit_copy) == {("C131", "/rounding")}
    # At the profile's coarsest rounding (two decimals) the same lie is a consistency error.
    doc = _report(circuit_copy)
    doc["rounding"] = {"decimals": 2}
    for key in ("m_full", "m_empty"):
        doc["claims"][key] = round(doc["claims"][key], 2)
    for curve in doc["claims"]["curves"]:
        for point in curve["points"]:
            point["faithfulness"] = round(point["faithfulness"], 2)
    doc["claims"]["cmd"]["value"] = round(doc["claims"]["cmd"]["value"], 2)
    doc["claims"]["cpr"]["value"] = 1.45
    assert _errors(doc, circuit_copy) == {("C101", "/claims/cpr/value")}


@pytest.mark.slow
def test_significant_digits_and_per_claim_roundings_are_bounded_too(circuit_copy: Path) -> None:
    doc = _report(circuit_copy)
    doc["rounding"] = {"significant_digits": 1}
    found = _errors(doc, circuit_copy)
    assert ("C131", "/rounding") in found
    assert ("C130", "/claims/cpr/value") in found
    doc = _report(circuit_copy)
    doc["claims"]["cpr"]["rounding"] = {"decimals": 1}
    doc["claims"]["cpr"]["value"] = round(doc["claims"]["cpr"]["value"], 1)
    assert _errors(doc, circuit_copy) == {("C131", "/claims/cpr/rounding")}


def test_a_rounding_does_not_touch_counts_or_declarations(circuit_copy: Path) -> None:
    """Edge counts, weighted sizes, k and the example count are exact: a rounding declared on
    the points does not make them numbers of it, nor widen their checks."""
    doc = _report(circuit_copy)
    point = doc["claims"]["curves"][0]["points"][9]
    point["rounding"] = {"decimals": 2}
    point["faithfulness"] = round(point["faithfulness"], 2)
    point["weighted_size"] = 240.123456  # not a number of two decimals, and never rounded
    found = _errors(doc, circuit_copy)
    assert not {code for code, _ in found} & {"C130", "C131"}


@pytest.fixture(scope="module")
def bench_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("causal_bench") / "causal_bench"
    shutil.copytree(BENCH, target)
    return target


def test_a_p_value_printed_as_zero_is_refused_under_plus_one(bench_copy: Path) -> None:
    doc = _report(bench_copy)
    assert doc.get("profile", "default") == "default"
    convergence = doc["claims"]["convergence"]
    edited = copy.deepcopy(doc)
    edited["claims"]["convergence"]["rounding"] = {"decimals": 0}
    for key in ("j_obs", "null_mean", "null_std", "z"):
        edited["claims"]["convergence"][key] = float(round(convergence[key]))
    edited["claims"]["convergence"]["p"] = 0.0
    found = _errors(edited, bench_copy)
    assert ("B110", "/claims/convergence/p") in found
    assert ("C131", "/claims/convergence/rounding") in found
    # Under the paper convention (mib-2025) a p of 0 is a count of 0: no B110.
    edited["profile"] = "mib-2025"
    edited["settings"]["p_convention"] = "paper"
    assert ("B110", "/claims/convergence/p") not in _errors(edited, bench_copy)


def test_the_leaderboard_rejects_a_coarsely_rounded_report(circuit_copy: Path, tmp_path: Path) -> None:
    """The report that `"decimals": 0` let through with CPR 1.45 is rejected, not ranked first."""
    from mibspec.pages.leaderboard import build_leaderboard

    folder = tmp_path / "board" / "rounded"
    shutil.copytree(circuit_copy, folder)
    doc = _report(folder)
    doc["rounding"] = {"decimals": 0}
    doc["claims"]["cpr"]["value"], doc["claims"]["cmd"]["value"] = 1.45, 0.0
    (folder / "report.json").write_text(json.dumps(doc), encoding="utf-8")
    board = build_leaderboard(tmp_path / "board")
    assert board.entries == []
    [rejected] = board.rejected
    assert {"C130", "C131"} <= set(rejected.codes)
