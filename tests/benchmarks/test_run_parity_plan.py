"""``benchmarks/parity/run_parity.py``: which comparisons a run plans, and with what."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from _scripts import load_script

run_parity = load_script("benchmarks/parity/run_parity.py", "run_parity")


def _args(all_quantities: bool) -> argparse.Namespace:
    return argparse.Namespace(
        models=["gpt2-small-shape", "tiny-gpt2", "tiny-llama"],
        tasks=["ioi", "mcqa"],
        all_quantities=all_quantities,
    )


@pytest.mark.parametrize("every", [False, True])
def test_gpt2_small_shape_compares_every_quantity_only_when_asked(every: bool) -> None:
    plan = run_parity._plan(_args(every))
    wide = [extra for name, _, task, _, extra in plan if name == "gpt2-small-shape"]
    assert wide == [("gpt2-small-shape", every)]
    # the tiny models compare every quantity on IOI either way
    tiny = {name: extra for name, _, task, _, extra in plan if task == "ioi" and name.startswith("tiny")}
    assert tiny == {"tiny-gpt2": ("tiny-gpt2", True), "tiny-llama": ("tiny-llama", True)}
    # the non-IOI tasks take the quantities the flag names
    quantities = [extra[2] for _, _, task, _, extra in plan if task == "mcqa"]
    assert quantities
    assert all(q == (run_parity.TASKS if every else run_parity.TASK_TASKS) for q in quantities)


def test_the_wide_models_comparisons_are_what_the_plan_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_compare_ioi`` hands the public side the shape's reduced list unless every quantity is
    asked for."""
    seen: list[tuple[str, ...]] = []

    class _Inputs:
        family = "gpt2"

    monkeypatch.setattr(run_parity, "model_report", lambda model, folder: Path("report.json"))
    monkeypatch.setattr(run_parity, "load_circuit_inputs", lambda report, roots: _Inputs())

    def compare(inputs, report, peers, python, order, tasks):  # type: ignore[no-untyped-def]
        seen.append(tasks)
        return {}, 0

    monkeypatch.setattr(run_parity, "_compare_model", compare)
    for every in (False, True):
        run_parity._compare_ioi("gpt2-small-shape", every, Path("."), Path("."), Path("."))
    assert seen == [run_parity.SHAPE_TASKS, run_parity.TASKS]
