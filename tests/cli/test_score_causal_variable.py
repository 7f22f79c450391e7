"""``mibspec score causal-variable`` through the command line: its joint units of heads.

What the written reports hold and that they verify is tested with the producer, in
``tests/reference_impl/recompute/test_causal_variable_joint.py``; here, how ``--joint-head``
is read and refused: usage errors (exit 2) before anything is loaded or written (each refusal
is tested quickly with the producer function, in ``tests/reference_impl/scoring``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import CliRun, SmallDataset

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "models" / "tiny-gpt2"
DATASET = REPO / "examples" / "datasets" / "ioi" / "test.meta.json"


def _score(mibspec_cli: CliRun, out: Path, *args: str) -> tuple[int, str]:
    command = ("score", "causal-variable", "-m", str(MODEL), "-d", str(DATASET), "-o", str(out))
    done = mibspec_cli(*command, "--position", "last", *args)
    return done.returncode, done.stderr


@pytest.mark.slow  # each process imports the producer (torch) to refuse
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--joint-head", "1:0", "--joint-head", "3,1"), "expected LAYER:HEAD"),
        (("--joint-head", "1:0", "--joint-head", "3:1", "--layer", "1"), "leave out layers and heads"),
        (
            (
                "--method",
                "full_vector",
                "--joint-head",
                "1:0",
                "--joint-head",
                "3:1",
                "--component",
                "mlp_output",
            ),
            "component is 'mlp_output'",
        ),
    ],
)
def test_joint_heads_the_run_cannot_score_are_usage_errors(
    mibspec_cli: CliRun, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    code, stderr = _score(mibspec_cli, tmp_path / "out", *args)
    assert code == 2, stderr
    assert message in stderr
    assert not (tmp_path / "out").exists()


def test_the_help_says_what_joint_heads_do(mibspec_cli: CliRun) -> None:
    shown = mibspec_cli("score", "causal-variable", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "--joint-head <layer:head>" in text
    assert "one forward pass, each through its own featurizer" in text
    assert "featurizers together, through that one pass" in text


@pytest.mark.slow
@pytest.mark.recompute
def test_joint_heads_without_a_component_write_attention_head_sites(
    mibspec_cli: CliRun, tmp_path: Path, small_ioi_dataset: SmallDataset
) -> None:
    """Without ``--component``, joint heads are attention-head sites (the default component,
    the residual stream, would be refused)."""
    import json

    pytest.importorskip("torch")
    dataset = small_ioi_dataset(tmp_path, 16)
    done = mibspec_cli(
        *("score", "causal-variable", "-m", str(MODEL), "-d", str(dataset), "-o", str(tmp_path / "out")),
        *("--method", "full_vector", "--position", "last", "--variable", "output_position"),
        *("-c", "random_names", "--joint-head", "2:1", "--joint-head", "0:3", "--train-rows", "40"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    [unit] = report["claims"]["variables"][0]["units"]
    assert unit["location"] == {
        "layer": 0,
        "component": "attention_heads",
        "position": {"rule": "last"},
        "heads": [3],
    }
    assert [(s["layer"], s["heads"]) for s in unit["joint_sites"]] == [(2, [1])]
