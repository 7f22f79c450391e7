"""Rules on a report's task that hold in every track: the examples it counts and the split it
names are its dataset's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding

from .._context import RuleContext
from ._registry import rule
from .causal_variable import declared_examples, task_dataset


@rule("task-example-count", kinds=("report",), codes=("D105",))
def task_example_count(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The task's example count is the number of examples its dataset declares."""
    task = doc.get("task") or {}
    declared = declared_examples(ctx, task.get("dataset"))
    if declared is None or task.get("n_examples") is None:
        return
    count, what = declared
    if task["n_examples"] != count:
        yield ctx.finding(
            "D105",
            "/task/n_examples",
            detail=f"the task counts {task['n_examples']} examples; its dataset declares {count} {what}",
        )


@rule("task-split", kinds=("report",), codes=("D106",))
def task_split(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The task's split is the split of its dataset document: the claims were computed on the
    rows the document holds, which are of that split."""
    task = doc.get("task") or {}
    dataset = task_dataset(ctx, task.get("dataset"))
    if dataset is None or task.get("split") is None or dataset.get("split") is None:
        return
    if task["split"] != dataset["split"]:
        yield ctx.finding(
            "D106",
            "/task/split",
            detail=f"the task names the split {task['split']!r}; its dataset document "
            f"({ctx.artifacts[task['dataset']]['path']}) holds the {dataset['split']!r} split",
        )
