"""mibspec against the public MIB circuit code on every circuit task besides IOI (``-m parity``).

Per task, rows are generated in the layout of MIB's released files and written as one; the
public side reads that file with its own loader (``HFEAPDataset``: filter, prompts, answer
tokens) and metric, mibspec imports it and recomputes. The model is ``tiny-gpt2-bpe`` (a
random GPT-2 whose byte-level BPE tokenizer tells ``"A"`` from ``" A"``). Skipped, saying
why, when the public code or its environment is absent (see ``test_public_code.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.parity, pytest.mark.recompute]

TASKS = ("logits", "circuits_patching", "curve", "nodes", "EAP-IG-inputs")
PUBLIC_TASKS = ("mcqa", "arc_easy", "arc_challenge", "arithmetic_addition", "arithmetic_subtraction")
_RUNS: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity-tasks")


def _compared(task: str, root: Path, public_code: tuple[Path, Path]) -> dict[str, Any]:
    """One comparison per task (rows generated, imported and scored once), by profile and quantity."""
    from mibspec.parity import circuit_parity, load_circuit_inputs, task_model_dir, task_report

    if task not in _RUNS:
        peers, python = public_code
        model = task_model_dir(root / "models")
        report = task_report(task, model, root, n_rows=20)
        inputs = load_circuit_inputs(report, [root / "models"])
        assert inputs.task == task
        _, by_profile = circuit_parity(inputs, peers, python, ("mib-2025", "default"), TASKS)
        _RUNS[task] = {profile: {row.quantity: row for row in rows} for profile, rows in by_profile.items()}
    return _RUNS[task]


@pytest.mark.parametrize("task", PUBLIC_TASKS)
def test_mib_2025_reproduces_the_public_code_on_the_task(
    task: str, root: Path, public_code: tuple[Path, Path]
) -> None:
    rows = _compared(task, root, public_code)["mib-2025"]
    promised = {row.group for row in rows.values() if row.promised}
    assert {"m(N)", "m(∅)", "CPR", "CMD", "logits (log-softmax)", "EAP-IG (inputs) edge scores"} <= promised
    assert {
        "rows read (public loader)",
        "answer tokens (public loader)",
        "node circuits: m(∅), f(k)",
    } <= promised
    assert rows["rows the loader keeps"].public == rows["rows the loader keeps"].mibspec == 20
    assert [row.quantity for row in rows.values() if row.promised and not row.ok] == []


@pytest.mark.parametrize("task", PUBLIC_TASKS)
def test_default_reads_the_answer_after_its_space(
    task: str, root: Path, public_code: tuple[Path, Path]
) -> None:
    rows = _compared(task, root, public_code)["default"]
    assert rows["log-softmax logits (same tokens)"].ok  # the model agrees
    answers = rows["answer ids unlike the public loader's"]
    assert not answers.promised
    assert answers.mibspec == 20  # every row: " A" is not "A", " 52" is not "52"
    assert not rows["m(N)"].promised
    assert rows["m(N)"].abs_diff > 1e-3


#: One task per family beyond GPT-2 (the full matrix is benchmarks/parity/run_parity.py's).
FAMILY_TASKS = (("llama", "mcqa"), ("qwen2", "arithmetic_subtraction"), ("gemma2", "arc_easy"))


@pytest.mark.parametrize(("family", "task"), FAMILY_TASKS)
def test_mib_2025_reproduces_the_public_code_on_each_familys_tokenizer(
    family: str, task: str, root: Path, public_code: tuple[Path, Path]
) -> None:
    """The family's task model (its tokenizer scheme on the labels), the public loader on the
    released rows, and neuron-level curves on an RMS-norm model, under ``mib-2025``."""
    from mibspec.parity import circuit_parity, load_circuit_inputs, report_method, task_model_dir, task_report

    peers, python = public_code
    model = task_model_dir(root / "models", family)
    report = task_report(
        task, model, root / family, n_rows=12, method=report_method(family), profile="mib-2025"
    )
    inputs = load_circuit_inputs(report, [root / "models"])
    _, by_profile = circuit_parity(
        inputs, peers, python, ("mib-2025",), ("logits", "circuits_patching", "curve", "neurons")
    )
    rows = {row.quantity: row for row in by_profile["mib-2025"]}
    promised = {row.group for row in rows.values() if row.promised}
    assert {"m(N)", "m(∅)", "CPR", "CMD", "m(k): each circuit's mean metric", "neuron-level CPR"} <= promised
    assert rows["answer ids unlike the public loader's"].mibspec == 0
    assert rows["rows the loader keeps"].public == rows["rows the loader keeps"].mibspec == 12
    assert [row.quantity for row in rows.values() if row.promised and not row.ok] == []
