"""``mibspec score causal-bench`` through the command line: tables, exit codes, usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import mibspec


@pytest.mark.slow
def test_score_planted_writes_a_report_that_verifies(mibspec_cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "planted"
    done = mibspec_cli(
        "score", "causal-bench", "-o", str(out), "--layers", "3", "--heads", "2", "--seed", "5"
    )
    assert done.returncode == 0, done.stderr
    assert "conformant without recomputation" in done.stdout
    for text in (
        "method",
        "circuit_discovery",
        "convergence: J_obs",
        "majority:",
        "threshold sensitivity",
        "composite under weight configurations",
        "F1 across planted model sizes",
        "12L/12H",
    ):
        assert text in done.stdout, text
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["behaviour"] | {"seed": 5} == report["behaviour"]
    assert (report["behaviour"]["n_layers"], report["behaviour"]["n_heads"]) == (3, 2)
    assert len(report["universe"]) == 3 * 2 + 3
    checked = mibspec.verify(out / "report.json")  # with recomputation
    assert checked.valid
    assert checked.documents[0].comparisons
    assert all(c.within for c in checked.documents[0].comparisons)


def test_usage_errors_exit_2(mibspec_cli: Any, tmp_path: Path) -> None:
    no_model = mibspec_cli("score", "causal-bench", "-o", str(tmp_path / "a"), "--behaviour", "transformer")
    assert no_model.returncode == 2
    assert "--model" in no_model.stderr
    stray = mibspec_cli("score", "causal-bench", "-o", str(tmp_path / "b"), "--model", str(tmp_path))
    assert stray.returncode == 2
    assert "--behaviour transformer" in stray.stderr


@pytest.mark.slow
def test_a_study_too_large_for_the_verifier_is_refused_before_any_work(
    mibspec_cli: Any, tmp_path: Path
) -> None:
    """--layers 100000 --heads 100000 grew to 13.9 GB: now the options are sized first
    (10,000,100,000 component ids alone would take 931 GiB), exit 2, nothing written."""
    import time

    for args, said in (
        (("--layers", "100000", "--heads", "100000"), "10000100000 component ids"),
        (("--layers", "8", "--heads", "8007"), "circuit discovery over 64064 components"),
        (("--permutations", str(10**12)), "1000000000000 null draws"),
        (("--runs", str(10**9)), "over the limit of 3600 s"),
    ):
        start = time.monotonic()
        done = mibspec_cli("score", "causal-bench", "-o", str(tmp_path / "out"), *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("mibspec: error: n_layers, n_heads, n_runs, n_permutations: ")
        assert said in done.stderr
        assert "choose a smaller study" in done.stderr
        assert time.monotonic() - start < 60
        assert not (tmp_path / "out").exists()
