"""Rules on a report's task that hold in every track: the examples it counts are its dataset's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.pointers import escape_pointer_token

from .._context import RuleContext
from ._registry import rule
from .causal_variable import _document


def _declared_examples(ctx: RuleContext, ident: Any) -> tuple[int, str] | None:
    """The number of examples the task's dataset document declares, and what they are: the
    rows of a counterfactual dataset's JSON Lines artifact, the images of a shortcut
    dataset. ``None`` when the document cannot be read (its own checks say why)."""
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    kind = (artifact or {}).get("kind")
    if kind == "counterfactual_dataset":
        dataset = _document(ctx, ident, kind)
        if dataset is None:
            return None
        entry: dict[str, Any] = next((a for a in dataset["artifacts"] if a["id"] == dataset["examples"]), {})
        rows = entry.get("rows")
        return (rows, "rows") if isinstance(rows, int) else None
    if kind == "shortcut_dataset":
        dataset = _document(ctx, ident, kind)
        if dataset is None:
            return None
        return dataset["clean_images"]["shape"][0], "images"
    return None


@rule("task-example-count", kinds=("report",), codes=("D105",))
def task_example_count(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The task's example count is its dataset's, and no unit scores more pairs than it has."""
    task = doc.get("task") or {}
    declared = _declared_examples(ctx, task.get("dataset"))
    if declared is None:
        return
    count, what = declared
    if task.get("n_examples") is not None and task["n_examples"] != count:
        yield ctx.finding(
            "D105",
            "/task/n_examples",
            detail=f"the task counts {task['n_examples']} examples; its dataset declares {count} {what}",
        )
    if doc.get("track") != "causal_variable":
        return
    for v, variable in enumerate(doc["claims"]["variables"]):
        for u, unit in enumerate(variable["units"]):
            for name, n in (unit.get("n_examples") or {}).items():
                if n > count:
                    yield ctx.finding(
                        "D105",
                        f"/claims/variables/{v}/units/{u}/n_examples/{escape_pointer_token(name)}",
                        detail=f"{n} pairs scored on a dataset of {count} {what}",
                    )
