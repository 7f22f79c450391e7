"""Model weights rearranged per head, independent of the module code that produced them.

The engine never calls a module's ``forward``; it reads parameters once into these frozen
records and computes everything from them (``_ops``, ``_forward``, ``_evaluate``).

Layouts (``d`` = d_model, ``H`` query heads, ``G`` key/value heads, ``e`` = head dim,
``f`` = MLP width):

* ``w_qkv`` ``(d, H + 2G, e)``: the query heads, then the key heads, then the value
  heads, input side first, so the unpatched path computes q, k and v with one product;
  ``w_q`` ``(d, H, e)``, ``w_k`` / ``w_v`` ``(d, G, e)`` are views into it;
* ``w_o`` ``(H, e, d)``: one ``(e, d)`` block per head, whose product with the head's
  mixed values is the head's contribution to the residual stream;
* MLP: ``w_in`` ``(d, f)`` (GPT-2 ``c_fc``; gated families: ``up_proj``), ``w_gate``
  ``(d, f)`` or ``None``, ``w_out`` ``(f, d)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["LayerWeights", "ModelWeights", "NormKind", "NormWeights"]

NormKind = Literal["layer", "rms", "rms_offset"]


@dataclass(frozen=True, eq=False)
class NormWeights:
    """One normalisation layer.

    ``layer``: ``(x - mean) / sqrt(var + eps) * w + b`` (GPT-2).
    ``rms``: ``w * (x / sqrt(mean(x²) + eps))`` (Llama, Qwen2).
    ``rms_offset``: ``(x / sqrt(mean(x²) + eps)) * (1 + w)`` (Gemma-2).
    """

    kind: NormKind
    weight: torch.Tensor
    bias: torch.Tensor | None
    eps: float


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One transformer block (pre-norm; Gemma-2 adds output norms on both sublayers)."""

    norm_attn: NormWeights
    w_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    n_heads: int
    n_kv_heads: int
    w_o: torch.Tensor
    b_o: torch.Tensor | None
    norm_attn_out: NormWeights | None
    norm_mlp: NormWeights
    w_in: torch.Tensor
    b_in: torch.Tensor | None
    w_gate: torch.Tensor | None
    w_out: torch.Tensor
    b_out: torch.Tensor | None
    norm_mlp_out: NormWeights | None
    attn_scale: float
    sliding_window: int | None

    def _part(self, x: torch.Tensor | None, which: int) -> torch.Tensor | None:
        if x is None:
            return None
        H, G = self.n_heads, self.n_kv_heads
        lo, hi = ((0, H), (H, H + G), (H + G, H + 2 * G))[which]
        return x[:, lo:hi] if x.ndim == 3 else x[lo:hi]

    @property
    def w_q(self) -> torch.Tensor:
        """``(d, H, e)`` query projection (a view)."""
        out = self._part(self.w_qkv, 0)
        assert out is not None
        return out

    @property
    def w_k(self) -> torch.Tensor:
        """``(d, G, e)`` key projection (a view)."""
        out = self._part(self.w_qkv, 1)
        assert out is not None
        return out

    @property
    def w_v(self) -> torch.Tensor:
        """``(d, G, e)`` value projection (a view)."""
        out = self._part(self.w_qkv, 2)
        assert out is not None
        return out

    @property
    def b_q(self) -> torch.Tensor | None:
        """``(H, e)`` query bias or ``None``."""
        return self._part(self.b_qkv, 0)

    @property
    def b_k(self) -> torch.Tensor | None:
        """``(G, e)`` key bias or ``None``."""
        return self._part(self.b_qkv, 1)

    @property
    def b_v(self) -> torch.Tensor | None:
        """``(G, e)`` value bias or ``None``."""
        return self._part(self.b_qkv, 2)


@dataclass(frozen=True, eq=False)
class ModelWeights:
    """A decoder-only language model as plain tensors.

    Attributes:
        architecture: the transformers class name it was read from, e.g. ``GPT2LMHeadModel``.
        family: ``gpt2``, ``llama``, ``qwen2`` or ``gemma2``.
        source: local directory or hub id the weights came from.
        revision: the pinned 40-hex commit for hub ids, else ``None``.
        dtype: the dtype every tensor is stored and computed in.
        n_layers, n_heads, n_kv_heads, d_model, d_head, vocab_size: shape constants.
        w_embed: ``(V, d)`` token embedding.
        embed_scale: multiplier applied to token embeddings (Gemma-2: ``sqrt(d)`` rounded to
            ``dtype``), or ``None``.
        w_pos: ``(n_ctx, d)`` learned absolute positions (GPT-2), or ``None``.
        rope_inv_freq: ``(e/2,)`` float32 rotary inverse frequencies, or ``None``.
        rope_scale: factor applied to the rotary cos/sin tables.
        layers: one record per block.
        norm_final: the norm before the unembedding.
        w_unembed: ``(V, d)`` unembedding rows.
        b_unembed: ``(V,)`` or ``None``.
        attn_softcap: tanh soft-capping of attention scores (Gemma-2), or ``None``.
        final_softcap: tanh soft-capping of the logits (Gemma-2), or ``None``.
        activation: MLP nonlinearity name (``gelu_tanh``, ``gelu``, ``silu``, ``relu``).
        parallel_attn_mlp: always ``False`` for the supported families.
        max_positions: the longest sequence the model takes (GPT-2: ``n_positions``, the rows
            of ``w_pos``; rotary families: ``max_position_embeddings``), or ``None`` when
            not known.
    """

    architecture: str
    family: str
    source: str
    revision: str | None
    dtype: torch.dtype
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_model: int
    d_head: int
    vocab_size: int
    w_embed: torch.Tensor
    embed_scale: torch.Tensor | None
    w_pos: torch.Tensor | None
    rope_inv_freq: torch.Tensor | None
    rope_scale: float
    layers: tuple[LayerWeights, ...]
    norm_final: NormWeights
    w_unembed: torch.Tensor
    b_unembed: torch.Tensor | None
    attn_softcap: float | None
    final_softcap: float | None
    activation: str
    parallel_attn_mlp: bool = False
    max_positions: int | None = None

    @property
    def n_forward(self) -> int:
        """Number of source nodes in the EAP-IG graph: ``1 + L·(H + 1)``."""
        return 1 + self.n_layers * (self.n_heads + 1)

    @property
    def kv_group(self) -> torch.Tensor:
        """``(H,)`` key/value head read by each query head (grouped-query attention)."""
        return torch.arange(self.n_heads, device=self.device) // (self.n_heads // self.n_kv_heads)

    @property
    def device(self) -> torch.device:
        """The device every tensor of the model is on (each computation runs there)."""
        return self.w_embed.device

    def to(self, device: str | torch.device) -> ModelWeights:
        """The model with every tensor on ``device`` (itself when they are there already)."""
        target = torch.device(device)
        if target == self.device:
            return self
        moved: ModelWeights = _moved(self, target)
        return moved

    @property
    def post_norm_heads(self) -> bool:
        """True when a layer's head outputs are normalised together before the residual."""
        return any(layer.norm_attn_out is not None for layer in self.layers)


def _moved(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor inside (records, tuples) moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_moved(item, device) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _moved(getattr(value, f.name), device) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value
