"""Edge attribution: EAP, EAP-IG (inputs) and a seeded random baseline (reference methods).

Normative text: ``spec/v1/metrics/engine.md`` (section "Reference attribution methods").
For an edge ``s → d`` of the EAP-IG graph and one example,

    score(s → d) = (o_s(clean) − o_s(corrupted)) · ḡ_d

summed over positions and averaged over examples, where ``o_s`` is the output of source
``s`` (the ``input`` node, a head, an MLP) in the unpatched run and ``ḡ_d`` the gradient
of the metric ``m = logit(correct) − logit(counterfactual)`` at the read position with
respect to the input of destination slot ``d`` (one slot per head and q/k/v, one per MLP,
and ``logits``):

* EAP: ``ḡ_d`` is the gradient on the clean input;
* EAP-IG (inputs): ``ḡ_d`` is the mean of the gradients over ``steps`` runs whose
  ``input`` node output is ``o_input(corrupted) + (j/steps)·(o_input(clean) −
  o_input(corrupted))``, j = 1..steps (every other node computed normally); with
  ``ig_points="left"``, j = 0..steps−1 instead (the public EAP-IG code's points);
* random: independent standard normal scores from a seeded local generator.

With ``scale="per_example_and_batch"`` each batch's contribution is also divided by the
batch's size (the public code differentiates a batch-mean metric and then divides by the
number of examples).

A positive score says that restoring the edge from the corrupted to the clean run raises
the metric (to first order). The gradient per slot is taken by giving every slot its own
copy of the residual stream, ``x_d = x + z_d`` with ``z_d = 0``, and differentiating with
respect to ``z_d``. Models with post-attention norms (Gemma-2) are not supported: there a
destination reads the norm of its own sum of head outputs (ME-4), which is not additive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from numpy.typing import NDArray

from ..devices import wide, wide_device
from . import _forward, _ops
from ._evaluate import graph_universe
from ._inputs import check_examples
from ._weights import ModelWeights

__all__ = ["ATTRIBUTION_METHODS", "AttributionMethod", "attribute_edges", "slot_gradients"]

AttributionMethod = Literal["eap", "eap-ig", "random"]
ATTRIBUTION_METHODS: tuple[str, ...] = ("eap", "eap-ig", "random")
IG_POINTS: tuple[str, ...] = ("right", "left")
ATTRIBUTION_SCALES: tuple[str, ...] = ("per_example", "per_example_and_batch")


def _forward_with_slots(
    model: ModelWeights,
    x0: torch.Tensor,
    mask: torch.Tensor,
    tokens: torch.Tensor,
    offsets: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Differentiable forward from the ``input`` node output ``x0`` ``(N, T, d)``.

    Returns the per-example metric ``(N,)`` (float64) and the slot offsets, one tensor per
    layer of shape ``(N, 3H + 1, T, d)`` (q heads, k heads, v heads, MLP) and a last one of
    shape ``(N, 1, T, d)`` for ``logits``: zeros requiring grad, or the given ``offsets``
    (added to the slot inputs as they are).
    """
    N, T, d = x0.shape
    H, G = model.n_heads, model.n_kv_heads
    positions = _ops.positions_from_mask(mask)
    rope = _ops.rope_tables(model, positions)
    read = mask.sum(1) - 1
    masks: dict[int | None, torch.Tensor] = {}
    given = offsets
    used: list[torch.Tensor] = []
    group = model.kv_group
    x = x0
    for layer in model.layers:
        if layer.sliding_window not in masks:
            masks[layer.sliding_window] = _ops.causal_mask(mask, layer.sliding_window)
        z_off = (
            torch.zeros((N, 3 * H + 1, T, d), dtype=x.dtype, device=x.device, requires_grad=True)
            if given is None
            else given[len(used)]
        )
        used.append(z_off)
        slots = x.unsqueeze(1) + z_off[:, : 3 * H]  # (N, 3H, T, d)
        h = _ops.norm(slots, layer.norm_attn)
        w = layer.w_qkv  # (d, H + 2G, e)
        w_slots = torch.cat([w[:, :H], w[:, H + group], w[:, H + G + group]], dim=1)  # (d, 3H, e)
        qkv = _ops.matmul(h, w_slots.permute(1, 0, 2).unsqueeze(0))  # (N, 3H, T, e)
        if layer.b_qkv is not None:
            b = layer.b_qkv
            b_slots = torch.cat([b[:H], b[H + group], b[H + G + group]], dim=0)  # (3H, e)
            qkv = qkv + b_slots[None, :, None, :]
        q, k, v = qkv[:, :H], qkv[:, H : 2 * H], qkv[:, 2 * H :]
        if rope is not None:
            cos, sin = rope[0].unsqueeze(1), rope[1].unsqueeze(1)
            q, k = _ops.rotate(q, cos, sin), _ops.rotate(k, cos, sin)
        zs = _ops.attention(
            q,
            k,
            v,
            masks[layer.sliding_window],
            layer.attn_scale,
            model.attn_softcap,
            layer.sliding_window is not None,
        )
        x = x + _forward.head_outputs(model, layer, zs).sum(1)
        mlp_in = x + z_off[:, 3 * H]
        x = x + _ops.mlp(_ops.norm(mlp_in, layer.norm_mlp), layer, model.activation)
    z_final = (
        torch.zeros((N, 1, T, d), dtype=x.dtype, device=x.device, requires_grad=True)
        if given is None
        else given[len(used)]
    )
    used.append(z_final)
    final = x + z_final[:, 0]
    index = read.view(-1, 1, 1).expand(N, 1, d)
    hidden = final.gather(1, index).squeeze(1)
    logits = wide(_ops.unembed_rows(model, hidden, tokens))
    return logits[:, 0] - logits[:, 1], used


def slot_gradients(
    model: ModelWeights, x0: torch.Tensor, mask: torch.Tensor, tokens: torch.Tensor
) -> torch.Tensor:
    """Gradient of Σ_examples m with respect to every slot input: ``(n_backward, N, T, d)``.

    Slot order is the graph universe's backward order (per layer the q heads, k heads,
    v heads, the MLP; ``logits`` last).
    """
    with torch.enable_grad():
        metric, offsets = _forward_with_slots(model, x0, mask, tokens)
        grads = torch.autograd.grad(metric.sum(), offsets)
    return torch.cat([g.transpose(0, 1) for g in grads], dim=0)


def attribute_edges(
    model: ModelWeights,
    clean_ids: object,
    corrupted_ids: object,
    attention_mask: object,
    correct: object,
    counterfactual: object,
    *,
    method: AttributionMethod = "eap-ig",
    steps: int = 5,
    seed: int = 0,
    batch_size: int = 20,
    ig_points: Literal["right", "left"] = "right",
    scale: Literal["per_example", "per_example_and_batch"] = "per_example",
    progress: Callable[[int], None] | None = None,
) -> NDArray[np.float64]:
    """Edge scores in canonical edge order, ``(n_edges,)`` float64.

    Args:
        model: weights from :func:`load_model`.
        clean_ids, corrupted_ids, attention_mask, correct, counterfactual: as for
            :func:`evaluate_circuits` (right padded, one shared mask).
        method: ``eap``, ``eap-ig`` or ``random`` (see the module docstring).
        steps: interpolation steps of ``eap-ig`` (≥ 1).
        seed: seed of the ``random`` method's local generator.
        batch_size: examples per pass (scores do not depend on it beyond float rounding,
            except under ``scale="per_example_and_batch"``).
        ig_points: ``right`` (α = j/steps, j = 1..steps) or ``left`` (j = 0..steps−1).
        scale: ``per_example`` or ``per_example_and_batch`` (see the module docstring).
        progress: called with the number of examples done after each batch.

    Raises:
        ValueError: on a malformed argument, naming it.
    """
    _check_options(model, method, steps, batch_size, ig_points, scale)
    universe = graph_universe(model)
    if method == "random":
        rng = np.random.default_rng(seed)
        return rng.standard_normal(universe.n_edges)
    if model.post_norm_heads:
        # A destination then reads norm(Σ heads) per destination (ME-4): a head's edge is not an
        # additive term of the slot input, so the score below would not be its first-order effect.
        raise ValueError("model: attribution does not support post-attention norms (Gemma-2) yet")
    ids, cids, mask, tokens = check_examples(
        model, clean_ids, corrupted_ids, attention_mask, correct, counterfactual
    )
    N = ids.shape[0]
    total = torch.zeros(
        (universe.n_forward, universe.n_backward), dtype=torch.float64, device=wide_device(model.device)
    )
    for start in range(0, N, batch_size):
        sl = slice(start, min(N, start + batch_size))
        b_mask = mask[sl]
        clean = _forward.trace(model, ids[sl], b_mask).nodes  # (n_forward, B, T, d)
        corrupted = _forward.trace(model, cids[sl], b_mask).nodes
        diff = wide(clean - corrupted) * wide(b_mask)[None, :, :, None]
        if method == "eap":
            grad = wide(slot_gradients(model, clean[0].clone(), b_mask, tokens[sl]))
        else:
            grad = torch.zeros(
                (universe.n_backward, *clean.shape[1:]), dtype=torch.float64, device=total.device
            )
            first = 1 if ig_points == "right" else 0
            for j in range(first, first + steps):
                x0 = corrupted[0] + (j / steps) * (clean[0] - corrupted[0])
                grad += wide(slot_gradients(model, x0, b_mask, tokens[sl]))
            grad /= steps
        batch = torch.einsum("fntd,bntd->fb", diff, grad)
        total += batch if scale == "per_example" else batch / (sl.stop - sl.start)
        if progress is not None:
            progress(sl.stop)
    scores = (total / N).cpu().numpy()
    return universe.from_matrix(np.where(universe.edge_mask, scores, 0.0)).astype(np.float64)


def _check_options(
    model: ModelWeights, method: object, steps: object, batch_size: object, ig_points: object, scale: object
) -> None:
    """``attribute_edges``'s options, each refused with a ValueError naming it."""
    if method not in ATTRIBUTION_METHODS:
        raise ValueError(f"method: expected one of {list(ATTRIBUTION_METHODS)}, got {method!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
    if ig_points not in IG_POINTS:
        raise ValueError(f"ig_points: expected one of {list(IG_POINTS)}, got {ig_points!r}")
    if scale not in ATTRIBUTION_SCALES:
        raise ValueError(f"scale: expected one of {list(ATTRIBUTION_SCALES)}, got {scale!r}")
    if model.parallel_attn_mlp:
        raise ValueError("model: attribution supports sequential attention and MLP blocks only")
