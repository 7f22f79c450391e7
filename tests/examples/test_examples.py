"""The bundled examples verify, and the generated folders are reproducible from their scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.core.spec import KINDS
from mibspec.core.tracks import TRACKS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("track", list(TRACKS))
def test_example_report_verifies_without_recomputation(track: str) -> None:
    result = mibspec.verify(REPO / "examples" / track / "report.json", recompute=False)
    assert result.valid, [str(f) for f in result.findings]
    kinds = {doc.kind for doc in result.documents}
    assert "report" in kinds
    if track != "causal_bench":  # a CAUSAL-BENCH report carries its component sets inline
        assert len(result.documents) >= 2  # the referenced documents were verified too


def test_examples_cover_every_document_kind() -> None:
    seen: set[str] = set()
    for track in TRACKS:
        result = mibspec.verify(REPO / "examples" / track / "report.json", recompute=False)
        seen |= {doc.kind for doc in result.documents if doc.kind}
    assert seen == set(KINDS) - {"leaderboard"}


@pytest.mark.slow
@pytest.mark.parametrize("script", ["conformance/build_cases.py", "examples/build_examples.py"])
def test_generated_folders_match_their_scripts(script: str) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / script), "--check"], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


HUB_EXAMPLES = ["circuit", "causal_variable"]  # synthetic numbers on GPT-2 small from the hub


@pytest.mark.slow
@pytest.mark.recompute
@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}, "cannot be reached"),  # no network
        ({"HF_HUB_OFFLINE": "1"}, "offline"),
    ],
    ids=["unreachable", "offline"],
)
def test_structural_hub_examples_fail_at_once_with_one_r104(
    mibspec_cli: Any, tmp_path: Path, env: dict[str, str], reason: str
) -> None:
    """Without the hub model locally, each structural example gets one R104 at /model and
    nothing else: no download is retried, nothing but the findings is printed."""
    pytest.importorskip("torch")
    paths = [str(REPO / "examples" / track / "report.json") for track in HUB_EXAMPLES]
    done = mibspec_cli("verify", *paths, "-f", "json", env={"HF_HOME": str(tmp_path / "hf"), **env})
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == ""
    output = json.loads(done.stdout)
    reports = [doc for doc in output["documents"] if doc["kind"] == "report"]
    assert len(reports) == len(HUB_EXAMPLES)
    for doc in reports:
        assert [(f["code"], f["pointer"]) for f in doc["findings"]] == [("R104", "/model")]
        assert reason in doc["findings"][0]["message"]
        assert "--model-root" in doc["findings"][0]["message"]
    assert all(doc["valid"] for doc in output["documents"] if doc["kind"] != "report")


@pytest.mark.slow
@pytest.mark.parametrize("track", ["circuit", "causal_variable", "saliency"])
def test_structural_examples_say_so_in_their_own_output(track: str) -> None:
    """A synthetic example's text output names it structural; the JSON contract is unchanged."""
    report = REPO / "examples" / track / "report.json"
    text = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", str(report)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO.parent,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        timeout=600,
    )
    assert text.returncode == 1  # recomputation cannot reproduce synthetic numbers
    assert "  description: Structural example: the measured inputs" in text.stdout
    assert "verify it with --no-recompute" in text.stdout
    result = mibspec.verify(report, recompute=False)
    assert result.valid
    assert all("description" not in doc.to_json() for doc in result.documents)
