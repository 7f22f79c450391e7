"""Argument checks of the circuit evaluation and attribution.

Each check raises ``ValueError`` naming the argument, what was expected and what was
received, and returns the argument in the form the engine computes with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.graph import GraphUniverse

from . import _forward
from ._weights import ModelWeights

__all__ = [
    "check_ablation",
    "check_ablation_values",
    "check_answers",
    "check_circuits",
    "check_examples",
    "check_mean_set",
    "check_neurons",
    "check_positive_int",
]


def check_positive_int(value: object, name: str) -> int:
    """``value`` as an int, which must be at least 1 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def check_answers(model: ModelWeights, value: object, name: str, n: int) -> torch.Tensor:
    """``(n,)`` token ids in the model's vocabulary, as an int64 tensor."""
    arr = np.asarray(value.cpu().numpy() if torch.is_tensor(value) else value)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name}: expected {n} integer token ids, got dtype {arr.dtype} and shape {arr.shape}"
        )
    if n and (arr.min() < 0 or arr.max() >= model.vocab_size):
        raise ValueError(
            f"{name}: token ids must lie in [0, {model.vocab_size}), got range [{arr.min()}, {arr.max()}]"
        )
    return torch.as_tensor(arr.astype(np.int64), device=model.device)


def check_examples(
    model: ModelWeights,
    clean_ids: object,
    corrupted_ids: object,
    attention_mask: object,
    correct: object,
    counterfactual: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clean and counterfactual inputs with one shared mask, and the two answers per example.

    Returns:
        ``(clean_ids, corrupted_ids, mask, tokens)``: ``(N, T)`` long tensors, and
        ``(N, 2)`` token ids (correct, counterfactual).
    """
    ids, cids, mask = _forward.check_token_pair(model, clean_ids, corrupted_ids, attention_mask)
    N = ids.shape[0]
    tokens = torch.stack(
        [
            check_answers(model, correct, "correct", N),
            check_answers(model, counterfactual, "counterfactual", N),
        ],
        dim=1,
    )
    return ids, cids, mask, tokens


def check_circuits(universe: GraphUniverse, circuits: object) -> NDArray[np.bool_]:
    """Edge circuits as bool ``(K, n_forward, n_backward)``, from that form or canonical edge order."""
    arr = np.asarray(circuits)
    if arr.dtype != np.bool_:
        raise ValueError(f"circuits: expected a boolean array, got dtype {arr.dtype}")
    if arr.ndim == 2 and arr.shape[1] == universe.n_edges:
        out = np.zeros((arr.shape[0], universe.n_forward, universe.n_backward), dtype=np.bool_)
        out[:, universe.edge_mask] = arr
        return out
    if arr.ndim == 3 and arr.shape[1:] == universe.edge_mask.shape:
        outside = arr & ~universe.edge_mask[None]
        if outside.any():
            k, f, d = (int(x) for x in np.argwhere(outside)[0])
            raise ValueError(
                f"circuits: cells without an edge must be False; circuit {k} has "
                f"{universe.forward_names[f]}->{universe.backward_names[d]}"
            )
        return arr
    raise ValueError(
        f"circuits: expected shape (K, {universe.n_edges}) (canonical edge order) or "
        f"(K, {universe.n_forward}, {universe.n_backward}), got {arr.shape}"
    )


def check_neurons(model: ModelWeights, neurons: object, k: int) -> NDArray[np.bool_] | None:
    """Neuron masks, bool ``(k, n_forward, d_model)``, or ``None`` when not given."""
    if neurons is None:
        return None
    arr = np.asarray(neurons)
    shape = (k, model.n_forward, model.d_model)
    if arr.dtype != np.bool_ or arr.shape != shape:
        raise ValueError(
            f"neurons: expected a boolean array of shape {shape}, got dtype {arr.dtype} and shape {arr.shape}"
        )
    return arr


def check_ablation(ablation: object, choices: Sequence[str]) -> None:
    """``ablation`` must be one of ``choices``."""
    if ablation not in choices:
        raise ValueError(f"ablation: expected one of {list(choices)}, got {ablation!r}")


def check_ablation_values(model: ModelWeights, ablation: str, ablation_values: object) -> torch.Tensor | None:
    """The per-node vectors of the ``optimal`` ablation in the model dtype, ``None`` otherwise.

    They are required by ``optimal`` and refused with any other ablation.
    """
    if ablation == "optimal":
        if ablation_values is None:
            raise ValueError("ablation_values: required with ablation='optimal', got None")
        vals = torch.as_tensor(np.asarray(ablation_values, dtype=np.float64))
        if tuple(vals.shape) != (model.n_forward, model.d_model) or not bool(torch.isfinite(vals).all()):
            raise ValueError(
                f"ablation_values: expected finite values of shape ({model.n_forward}, {model.d_model}), "
                f"got shape {tuple(vals.shape)}"
            )
        return vals.to(device=model.device, dtype=model.dtype)
    if ablation_values is not None:
        raise ValueError(f"ablation_values: only accepted with ablation='optimal', got ablation={ablation!r}")
    return None


def check_mean_set(ablation: str, mean_ids: object, mean_mask: object) -> None:
    """A token set to average over is accepted with the ``mean`` ablation only."""
    if ablation != "mean" and (mean_ids is not None or mean_mask is not None):
        raise ValueError(f"mean_ids: only accepted with ablation='mean', got ablation={ablation!r}")
