"""The bundled examples verify, and the generated folders are reproducible from their scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mibspec
from mibspec.core.spec import KINDS

REPO = Path(__file__).resolve().parents[2]
TRACKS = ["circuit", "causal_variable", "causal_bench", "saliency"]


@pytest.mark.parametrize("track", TRACKS)
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


@pytest.mark.parametrize("script", ["conformance/build_cases.py", "examples/build_examples.py"])
def test_generated_folders_match_their_scripts(script: str) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / script), "--check"], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
