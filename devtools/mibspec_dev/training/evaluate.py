"""Task accuracy and logit differences of a model on generated rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedModel

from .loop import Example, encode_examples, last_position_logits

__all__ = ["evaluate_rows"]


def _stats(values: np.ndarray) -> dict[str, float]:
    return {
        "mean": float(values.mean()),
        "std": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "median": float(np.median(values)),
        "min": float(values.min()),
        "fraction_positive": float((values > 0).mean()),
    }


def evaluate_rows(
    model: PreTrainedModel,
    tokenize: Callable[[str], Sequence[int]],
    rows: Sequence[Mapping[str, Any]],
    task: str,
) -> dict[str, Any]:
    """Top-1 accuracy and logit differences on rows of one task.

    Accuracy: the argmax over the whole vocabulary at the prompt's last position equals
    the answer token, for the base prompts and for each counterfactual type whose answer
    is defined. Logit difference, per counterfactual type with a defined answer that
    differs from the base answer: logit(base answer) − logit(counterfactual answer) on the
    base prompt (the circuit track's metric on the unpatched model).

    Returns:
        ``{"rows", "accuracy": {"base", <cf type>...}, "logit_difference": {<cf type>:
        {"mean", "std", "median", "min", "fraction_positive", "rows"}}}``.
    """
    if not rows:
        raise ValueError(f"rows: expected at least one {task} row, got none")
    groups: dict[str, list[Mapping[str, Any]]] = {"base": [row["base"] for row in rows]}
    for cf_type in rows[0]["counterfactuals"]:
        prompts = [row["counterfactuals"][cf_type] for row in rows]
        if all(p["answer"] is not None for p in prompts):
            groups[cf_type] = prompts
    accuracy: dict[str, float] = {}
    base_logits: torch.Tensor | None = None
    for name, prompts in groups.items():
        data = encode_examples([Example(p["prompt"], p["answer"], task) for p in prompts], tokenize)
        logits = last_position_logits(model, data)
        accuracy[name] = float((logits.argmax(-1) == data.targets).double().mean())
        if name == "base":
            base_logits = logits.double()
    assert base_logits is not None
    base_ids = torch.tensor([tokenize(row["base"]["answer"])[0] for row in rows])
    differences: dict[str, dict[str, float]] = {}
    for cf_type in groups:
        if cf_type == "base":
            continue
        keep = [
            i
            for i, row in enumerate(rows)
            if row["counterfactuals"][cf_type]["answer"] != row["base"]["answer"]
        ]
        if not keep:
            continue
        cf_ids = torch.tensor([tokenize(rows[i]["counterfactuals"][cf_type]["answer"])[0] for i in keep])
        index = torch.tensor(keep)
        diff = base_logits[index, base_ids[index]] - base_logits[index, cf_ids]
        differences[cf_type] = {**_stats(diff.numpy()), "rows": len(keep)}
    return {"rows": len(rows), "accuracy": accuracy, "logit_difference": differences}
