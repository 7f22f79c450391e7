"""Recomputation of causal-variable claims, end to end through the command line.

MIB's IOI units read attention heads at every token (``AttentionHead(Layer:l,Head:h,Token:all)``,
the position rule ``all``). A report of such units, written by ``mibspec score causal-variable``
on the shipped tiny GPT-2, verifies with every claim recomputed; a claim moved beyond its
tolerance is R103 at its place, located in the file. The intervention itself is checked
against per-example hooks in ``tests/causal_variable/test_intervention.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import CliRun, SmallDataset

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"

pytestmark = [pytest.mark.recompute, pytest.mark.slow]

_SCORE = [
    *("score", "causal-variable", "--method", "full_vector", "--component", "attention_heads"),
    *("--head", "0", "--head", "2", "--layer", "2", "--layer", "3", "--position", "all"),
    *("--variable", "output_token", "-c", "random_names", "-c", "io_s2_flip"),
]


@pytest.fixture(scope="module")
def every_token(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> Path:
    """The folder ``score causal-variable`` writes: full-vector featurizers of heads 0 and 2 at
    layers 2 and 3, at every token, scored on 48 rows of the shipped IOI test split."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("every-token")
    dataset = small_ioi_dataset(root, 48)
    out = root / "report"
    args = [*_SCORE, "-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset), "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={**os.environ, "NO_COLOR": "1", "SOURCE_DATE_EPOCH": "1748856600", "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out


def _copy(source: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(source, target)
    path = target / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    change(report)
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _findings(stdout: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = json.loads(stdout)
    return {(f["code"], f["pointer"]): f for d in out["documents"] for f in d["findings"]}


def test_the_written_units_read_every_token_of_the_heads(every_token: Path) -> None:
    report = json.loads((every_token / "report.json").read_text(encoding="utf-8"))
    [variable] = report["claims"]["variables"]
    assert [u["location"] for u in variable["units"]] == [
        {"layer": layer, "component": "attention_heads", "position": {"rule": "all"}, "heads": [0, 2]}
        for layer in (2, 3)
    ]
    for unit in variable["units"]:
        featurizer = json.loads((every_token / f"{unit['featurizer'].replace('-', '_')}.json").read_text())
        assert featurizer["type"] == "identity"
        assert featurizer["location"] == unit["location"]
        assert featurizer["input_dim"] == 2 * 16  # two heads of d_model 64 / 4 heads
        assert set(unit["scores"]) == {"random_names", "io_s2_flip"}
        assert all(0 < n <= 48 for n in unit["n_examples"].values())


def test_an_honest_report_verifies_with_every_claim_recomputed(
    every_token: Path, mibspec_cli: CliRun
) -> None:
    done = mibspec_cli(
        "verify", str(every_token / "report.json"), "--model-root", str(MODELS), "--format", "json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    [report] = [d for d in out["documents"] if d["kind"] == "report"]
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert not [f for f in report["findings"] if f["severity"] in ("error", "warning")]


def test_a_unit_score_moved_beyond_tolerance_is_r103_where_it_is_claimed(
    every_token: Path, tmp_path: Path, mibspec_cli: CliRun
) -> None:
    """The layer-3 unit's score on one set is moved by 0.5 (tolerance about 1e-5 relative) and
    the aggregates are moved with it, so that the claims agree with each other: only
    recomputation can tell."""

    def move(report: dict[str, Any]) -> None:
        variable = report["claims"]["variables"][0]
        unit = variable["units"][1]
        unit["scores"]["io_s2_flip"] += 0.5
        mean = sum(unit["scores"].values()) / len(unit["scores"])
        variable["per_layer"]["3"] = mean
        variable["average"] = (variable["per_layer"]["2"] + mean) / 2
        variable["best"] = min(variable["per_layer"]["2"], mean)  # MSE: lower is better

    path = _copy(every_token, tmp_path / "moved", move)
    done = mibspec_cli("verify", str(path), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = _findings(done.stdout)
    codes = {code for code, _ in found}
    assert "C112" not in codes  # the tampered claims are consistent with each other
    moved = found[("R103", "/claims/variables/0/units/1/scores/io_s2_flip")]
    assert moved["severity"] == "error"
    assert moved["line"] >= 1
    assert moved["column"] >= 1
    text = path.read_text(encoding="utf-8").splitlines()
    assert '"io_s2_flip"' in text[moved["line"] - 1]
    assert ("R103", "/claims/variables/0/per_layer/3") in found
    assert ("R103", "/claims/variables/0/average") in found
    # the other unit's claims were recomputed and agree
    assert not [p for c, p in found if c == "R103" and p.startswith("/claims/variables/0/units/0")]


def test_a_move_within_tolerance_passes(every_token: Path, tmp_path: Path, mibspec_cli: CliRun) -> None:
    def nudge(report: dict[str, Any]) -> None:
        unit = report["claims"]["variables"][0]["units"][0]
        unit["scores"]["random_names"] *= 1 + 1e-9

    path = _copy(every_token, tmp_path / "nudged", nudge)
    done = mibspec_cli("verify", str(path), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr


def _pin(entries: list[dict[str, Any]], ident: str, data: bytes) -> None:
    entry = next(a for a in entries if a["id"] == ident)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))


def test_prompts_of_different_lengths_at_every_token_are_r104_never_skipped(
    every_token: Path, tmp_path: Path, mibspec_cli: CliRun
) -> None:
    """Every random_names counterfactual starts with "So, ": its token i is no longer the base's
    token i. The rows still fill their templates and the files are re-pinned, so only
    recomputation can see it; it stops at the unit's position, naming the row."""
    folder = tmp_path / "longer"
    shutil.copytree(every_token, folder)
    rows = []
    for line in (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("prompt", "template"):
            row["counterfactuals"]["random_names"][key] = "So, " + row["counterfactuals"]["random_names"][key]
        rows.append(json.dumps(row))
    data = ("\n".join(rows) + "\n").encode()
    (folder / "dataset.jsonl").write_bytes(data)
    dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    _pin(dataset["artifacts"], "rows", data)
    data = json.dumps(dataset, indent=2).encode()
    (folder / "dataset.json").write_bytes(data)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    _pin(report["artifacts"], report["task"]["dataset"], data)
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    done = mibspec_cli("verify", str(folder / "report.json"), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = _findings(done.stdout)
    assert set(found) == {("R104", "/claims/variables/0/units/0/location/position")}
    [finding] = found.values()
    assert "rule 'all' writes the counterfactual's token i at the base's token i" in finding["message"]
    assert "random_names prompt" in finding["message"]
    assert finding["line"] >= 1
