"""A transformer's task behaviour as a CAUSAL-BENCH behaviour over heads and MLPs.

Components are the model's attention heads and MLPs, named and ordered as in the planted
model (``L{l}.attn_head[{h}]`` for every head of layer l, then ``L{l}.mlp``); they are the
EAP-IG forward nodes without ``input``. For a coalition S of active components and one
example, the model runs on the clean prompt with every component outside S replaced by its
ablation value (the declared ablation: its output on the counterfactual prompt, its mean
output over the counterfactual prompts' tokens, or zero); the token and position embeddings
are always the clean ones. This is the node-circuit semantics of the engine
(``node_circuit_edges`` of ``{input} ∪ S``): a component in S reads the clean outputs of the
other members and the ablation values of everything else. The per-example metric is
``m = logit(correct) − logit(counterfactual answer)`` at the last prompt position (float64),
and the behaviour of S on an example set E is the normalised logit difference

    β_E(S) = (m̄_E(S) − m̄_E(∅)) / (m̄_E(C) − m̄_E(∅)),

m̄_E the mean over E, so ``β_E(C) = 1`` and ``β_E(∅) = 0`` exactly. Normative text:
``spec/v1/metrics/causal_bench.md`` (MB-17).

Every coalition is evaluated once over all examples and cached, so behaviours on subsets
of the examples (the seed perturbations of the stability metric) cost nothing extra for
coalitions already seen.

Gradient attribution (MB-18) is first-order activation patching per component:
``a_i(c) = Σ_{t,k} (o_c − ā_c)[i, t, k] · ∂m_i/∂o_c[i, t, k]`` on the clean run, where
``o_c`` is the component's clean output and ``ā_c`` its ablation value; on E the score is
``|mean_{i∈E} a_i(c)| / (m̄_E(C) − m̄_E(∅))``, the linear estimate of ``β_E(C) − β_E(C∖{c})``.

This module imports torch; only the recompute stage and ``mibspec score`` import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from mibspec.metrics.causal_bench import DegenerateBehaviourError
from mibspec.metrics.checks import as_bool_array, describe

from ..devices import wide
from ..engine import ModelWeights, _forward, _ops, mean_node_outputs
from ..engine._inputs import check_examples
from .planted import component_universe

__all__ = ["TRANSFORMER_ABLATIONS", "TransformerBehaviour"]

TRANSFORMER_ABLATIONS: tuple[str, ...] = ("counterfactual", "mean", "zero")


class TransformerBehaviour:
    """Cached per-example metrics of component coalitions of a model on a token batch.

    Args:
        model: weights from :func:`mibspec.reference_impl.engine.load_model` (models with
            post-attention norms are not supported: their heads do not enter the residual
            stream one by one).
        clean_ids: ``(n, T)`` clean prompts, right padded.
        corrupted_ids: ``(n, T)`` counterfactual prompts with the same attention mask.
        attention_mask: ``(n, T)`` 0/1.
        correct: ``(n,)`` token of the clean answer.
        counterfactual: ``(n,)`` token of the counterfactual answer.
        ablation: ``counterfactual``, ``mean`` (each component's mean output over every
            non-padding token of the counterfactual prompts) or ``zero``.
        memory_budget: bytes a stacked pass over several coalitions may use.
        min_denominator: smallest accepted ``|m̄_E(C) − m̄_E(∅)|``.

    Raises:
        ValueError: on malformed arguments, naming them.
    """

    def __init__(
        self,
        model: ModelWeights,
        clean_ids: object,
        corrupted_ids: object,
        attention_mask: object,
        correct: object,
        counterfactual: object,
        *,
        ablation: str = "counterfactual",
        memory_budget: int = 2**27,
        min_denominator: float = 1e-6,
    ) -> None:
        if ablation not in TRANSFORMER_ABLATIONS:
            raise ValueError(f"ablation: expected one of {list(TRANSFORMER_ABLATIONS)}, got {ablation!r}")
        if model.post_norm_heads or model.parallel_attn_mlp:
            raise ValueError("model: only sequential blocks without post-attention norms are supported")
        ids, cids, mask, tokens = check_examples(
            model, clean_ids, corrupted_ids, attention_mask, correct, counterfactual
        )
        n = ids.shape[0]
        self.model = model
        self.ablation = ablation
        self.n_examples = n
        self.min_denominator = float(min_denominator)
        self.universe: tuple[str, ...] = component_universe(model.n_layers, model.n_heads)
        self._ids, self._mask = ids, mask
        self._tokens = tokens
        positions = _ops.positions_from_mask(mask)
        self._positions = positions
        self._read = mask.sum(1) - 1
        with torch.inference_mode():
            self._clean_input = _forward.embed(model, ids, positions)
            if ablation == "counterfactual":
                nodes = _forward.trace(model, cids, mask).nodes  # (n_forward, n, T, d)
            elif ablation == "mean":
                nodes = mean_node_outputs(model, cids, mask)[:, None, None, :]
            else:
                nodes = torch.zeros(
                    (model.n_forward, 1, 1, model.d_model), dtype=model.dtype, device=model.device
                )
        self._ablated = nodes
        T, d = ids.shape[1], model.d_model
        per_coalition = n * T * d * model.dtype.itemsize * (model.n_heads + 4)
        self._stack = max(1, int(memory_budget) // per_coalition)
        self._cache: dict[bytes, NDArray[np.float64]] = {}
        self.evaluations = 0
        everything = np.ones((1, len(self.universe)), dtype=np.bool_)
        nothing = np.zeros((1, len(self.universe)), dtype=np.bool_)
        metrics = self.example_metrics(np.concatenate([everything, nothing]))
        self.m_full: NDArray[np.float64] = metrics[0]
        self.m_empty: NDArray[np.float64] = metrics[1]
        self._attribution: NDArray[np.float64] | None = None

    # ------------------------------------------------------------------ coalitions

    def _check_active(self, active: Any) -> NDArray[np.bool_]:
        array = np.asarray(active)
        if array.ndim != 2:
            raise ValueError(
                f"active: expected a 2-D boolean array (B, {len(self.universe)}); got {describe(array)}"
            )
        return as_bool_array(array, "active", shape=(array.shape[0], len(self.universe)))

    def example_metrics(self, active: Any) -> NDArray[np.float64]:
        """Per-example metric ``m`` of each coalition: ``(B, N)`` bool → ``(B, n)`` float64."""
        rows = self._check_active(active)
        keys = [np.packbits(row).tobytes() for row in rows]
        todo: dict[bytes, int] = {}
        for key, b in zip(keys, range(rows.shape[0]), strict=True):
            if key not in self._cache and key not in todo:
                todo[key] = b
        pending = list(todo.items())
        for start in range(0, len(pending), self._stack):
            chunk = pending[start : start + self._stack]
            values = self._evaluate(rows[[b for _, b in chunk]])
            for (key, _), value in zip(chunk, values, strict=True):
                value.setflags(write=False)
                self._cache[key] = value
        self.evaluations += len(pending)
        if not keys:
            return np.zeros((0, self.n_examples), dtype=np.float64)
        return np.stack([self._cache[key] for key in keys])

    def _evaluate(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        """One stacked pass over K coalitions; returns ``(K, n)``."""
        with torch.inference_mode():
            hidden, rows = self._run(active, offsets=None)
            metric = _ops.logit_difference(self.model, hidden[self._index(rows)], self._tokens)
        return metric.cpu().numpy().copy()

    def _index(self, index: NDArray[Any]) -> torch.Tensor:
        """A numpy index or mask as a tensor on the model's device."""
        return torch.from_numpy(np.ascontiguousarray(index)).to(self.model.device)

    def _run(
        self, active: NDArray[np.bool_], offsets: list[torch.Tensor] | None
    ) -> tuple[torch.Tensor, NDArray[np.int64]]:
        """Residuals entering the final norm at the read positions, with inactive components ablated.

        Coalitions that agree on every component up to a layer share that layer's input, so
        each layer is computed once per distinct prefix of the active pattern (greedy
        reductions evaluate coalitions that differ in one component, which roughly halves
        the work). Returns the ``(U, n, d)`` distinct results and, per coalition, its row.
        With ``offsets`` (one ``(n, T, d)`` tensor per component) each component's output is
        shifted by its offset before the ablation is applied (for gradients).
        """
        model = self.model
        L, H = model.n_layers, model.n_heads
        n, T, d = self._clean_input.shape
        x = self._clean_input.unsqueeze(0)  # (U, n, T, d), U distinct prefixes
        row_of = np.zeros(active.shape[0], dtype=np.int64)
        ablated = self._ablated
        read = self._read
        for li, layer in enumerate(model.layers):
            U = x.shape[0]
            positions = self._positions.repeat(U, 1)
            flat = x.reshape(U * n, T, d)
            q, k, v = _forward.qkv_shared(model, layer, flat, _ops.rope_tables(model, positions))
            allowed = _ops.causal_mask(self._mask.repeat(U, 1), layer.sliding_window)
            z = _ops.attention(
                q, k, v, allowed, layer.attn_scale, model.attn_softcap, layer.sliding_window is not None
            )
            base = li * (H + 1)  # component index of the layer's first head
            last = li == L - 1
            # regroup by (prefix row, this layer's head pattern)
            groups, first, row_of = _regroup(row_of, active[:, base : base + H])
            parent = self._index(groups[:, 0])
            chosen = active[first, base : base + H]  # (G, H)
            a_heads = ablated[1 + base : 1 + base + H]  # (H, n or 1, T or 1, d)
            if offsets is None:
                z = z.view(U, n, H, T, -1)
                if last:  # only the read positions reach the logits
                    x, z, a_heads = (
                        self._at_read(x, 1, 2),
                        self._at_read(z, 1, 3),
                        self._at_read(a_heads, 1, 2),
                    )
                x = x[parent] + self._mix_heads(layer, z[parent], chosen, a_heads)
            else:
                heads = _forward.head_outputs(model, layer, z).view(U, n, H, T, d)
                heads = heads + torch.stack(offsets[base : base + H], dim=1).unsqueeze(0)
                keep = self._index(chosen).view(-1, 1, H, 1, 1)
                mixed = torch.where(keep, heads[parent], a_heads.transpose(0, 1).unsqueeze(0).to(heads.dtype))
                x = x[parent] + mixed.sum(2)
                if last:
                    x = _ops.gather_read(x, read)
            groups, first, row_of = _regroup(row_of, active[:, base + H : base + H + 1])
            parent_np = np.ascontiguousarray(groups[:, 0])
            keep_mlp = active[first, base + H]
            a_mlp = ablated[1 + base + H]
            if last:
                a_mlp = self._at_read(a_mlp, 0, 1)
            out = x[self._index(parent_np)]
            needed = np.flatnonzero(keep_mlp)
            if needed.size:
                source = self._index(parent_np[needed])
                m = _ops.mlp(_ops.norm(x[source], layer.norm_mlp), layer, model.activation)
                if offsets is not None:
                    offset = offsets[base + H]
                    m = m + (_ops.gather_read(offset, read) if last else offset).unsqueeze(0)
                out[self._index(needed)] += m
            dropped = np.flatnonzero(~keep_mlp)
            if dropped.size:
                out[self._index(dropped)] += a_mlp.to(out.dtype)
            x = out
        return x, row_of

    def _at_read(self, x: torch.Tensor, examples_axis: int, time_axis: int) -> torch.Tensor:
        """``x`` at each example's read position: the time axis is removed (a broadcast time
        axis of size 1 is simply dropped)."""
        if x.shape[time_axis] == 1:
            return x.squeeze(time_axis)
        shape = [1] * x.ndim
        shape[examples_axis] = -1
        size = list(x.shape)
        size[time_axis] = 1
        return x.gather(time_axis, self._read.view(shape).expand(size)).squeeze(time_axis)

    def _mix_heads(
        self, layer: Any, z: torch.Tensor, chosen: NDArray[np.bool_], a_heads: torch.Tensor
    ) -> torch.Tensor:
        """Σ_h of head h's output where chosen, else its ablation value, per group.

        ``z``: ``(G, n, H, [T,] e)`` mixed values; ``chosen``: ``(G, H)``; ``a_heads``:
        ``(H, n or 1, [T or 1,] d)``. The chosen heads' outputs are one product of the masked
        mixed values with the output projection, plus ``b_O`` times the chosen fraction.
        """
        model = self.model
        H, e, d = model.n_heads, model.d_head, model.d_model
        G = z.shape[0]
        keep = self._index(chosen.astype(np.float32)).to(z.dtype)
        shape = (G, 1, H) + (1,) * (z.ndim - 3)
        masked = (z * keep.view(shape)).movedim(2, -2)  # (G, n, [T,] H, e)
        out = masked.reshape(*masked.shape[:-2], H * e) @ layer.w_o.reshape(H * e, d)
        if layer.b_o is not None:
            fraction = keep.sum(1) / H
            out = out + layer.b_o * fraction.view((G,) + (1,) * (out.ndim - 1))
        dropped = self._index((~chosen).astype(np.float32)).to(a_heads.dtype)
        return out + torch.einsum("gh,h...->g...", dropped, a_heads).to(out.dtype)

    # ------------------------------------------------------------------ behaviours

    def _examples(self, examples: Sequence[int] | NDArray[np.integer] | None) -> NDArray[np.int64]:
        if examples is None:
            return np.arange(self.n_examples, dtype=np.int64)
        index = np.asarray(examples)
        if (
            index.ndim != 1
            or index.size == 0
            or not np.issubdtype(index.dtype, np.integer)
            or index.min() < 0
            or index.max() >= self.n_examples
        ):
            raise ValueError(
                f"examples: expected a non-empty 1-D array of indices in [0, {self.n_examples}); "
                f"got {describe(index)}"
            )
        return index.astype(np.int64)

    def _means(self, index: NDArray[np.int64]) -> tuple[float, float]:
        full = float(self.m_full[index].mean())
        empty = float(self.m_empty[index].mean())
        if not abs(full - empty) >= self.min_denominator:
            raise DegenerateBehaviourError(full - empty, self.min_denominator)
        return full, empty

    def behaviour(self, examples: Sequence[int] | NDArray[np.integer] | None = None) -> _SubsetBehaviour:
        """β on the given examples (all by default), a batched CAUSAL-BENCH behaviour.

        Raises:
            DegenerateBehaviourError: if the full and empty means coincide on the examples.
        """
        index = self._examples(examples)
        full, empty = self._means(index)
        return _SubsetBehaviour(self, index, full, empty)

    def example_attribution(self) -> NDArray[np.float64]:
        """``(N, n)`` per-example first-order patching effect ``a_i(c)`` of every component."""
        if self._attribution is None:
            self._attribution = self._compute_attribution()
        return self._attribution

    def _compute_attribution(self) -> NDArray[np.float64]:
        model = self.model
        N = len(self.universe)
        with torch.inference_mode():
            clean = _forward.trace(model, self._ids, self._mask).nodes[1:]  # (N, n, T, d)
        weight = wide(self._mask[None, :, :, None])
        diff = (wide(clean) - wide(self._ablated[1:])) * weight
        with torch.enable_grad():
            offsets = [
                torch.zeros(
                    self._clean_input.shape, dtype=model.dtype, device=model.device, requires_grad=True
                )
                for _ in range(N)
            ]
            hidden, _ = self._run(np.ones((1, N), dtype=np.bool_), offsets)
            metric = _ops.logit_difference(model, hidden[0], self._tokens)
            grads = torch.autograd.grad(metric.sum(), offsets)
        grad = wide(torch.stack(grads))  # (N, n, T, d)
        return torch.einsum("cntd,cntd->cn", diff, grad).cpu().numpy().copy()

    def attribution(self, examples: Sequence[int] | NDArray[np.integer] | None = None) -> NDArray[np.float64]:
        """Gradient-attribution magnitudes on the examples, ``|mean a_i(c)| / (m̄(C) − m̄(∅))``."""
        index = self._examples(examples)
        full, empty = self._means(index)
        per_example = self.example_attribution()
        return np.abs(per_example[:, index].mean(axis=1) / (full - empty))


def _regroup(
    row_of: NDArray[np.int64], pattern: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Distinct ``(row, pattern)`` pairs: their keys ``(G, 1 + p)``, a coalition of each, and
    each coalition's group (groups sorted by key, so the order is deterministic)."""
    keys = np.concatenate([row_of[:, None], pattern.astype(np.int64)], axis=1)
    groups, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return groups, first, inverse.reshape(-1).astype(np.int64)


class _SubsetBehaviour:
    """β_E for a fixed example set E (see the module docstring); callable on ``(B, N)`` masks."""

    def __init__(self, source: TransformerBehaviour, index: NDArray[np.int64], full: float, empty: float):
        self.source = source
        self.examples = index
        self.universe = source.universe
        self.m_full = full
        self.m_empty = empty

    def __call__(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        metrics = self.source.example_metrics(active)
        means = metrics[:, self.examples].mean(axis=1)
        return (means - self.m_empty) / (self.m_full - self.m_empty)

    def attribution(self) -> NDArray[np.float64]:
        """Gradient-attribution magnitudes on E (see :meth:`TransformerBehaviour.attribution`)."""
        return self.source.attribution(self.examples)
