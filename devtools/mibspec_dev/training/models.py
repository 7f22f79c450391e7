"""Tiny GPT-2 and Llama configurations, initialised reproducibly."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedModel

from .tokenizer import EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS

__all__ = ["TINY_GPT2", "TINY_LLAMA", "TinyModelSpec", "build_config", "init_model"]

Family = Literal["gpt2", "llama"]


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of a tiny causal LM.

    Attributes:
        name: folder name of the shipped model, e.g. ``tiny-gpt2``.
        family: ``gpt2`` (``GPT2LMHeadModel``) or ``llama`` (``LlamaForCausalLM``).
        d_model: residual stream width.
        n_layers: transformer blocks.
        n_heads: attention heads (query heads for Llama).
        n_kv_heads: key/value heads (Llama grouped-query attention; GPT-2 ignores it).
        d_mlp: MLP hidden width.
        max_positions: longest sequence the position embeddings cover.
    """

    name: str
    family: Family
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_mlp: int
    max_positions: int = 64

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


TINY_GPT2 = TinyModelSpec("tiny-gpt2", "gpt2", d_model=64, n_layers=4, n_heads=4, n_kv_heads=4, d_mlp=256)
TINY_LLAMA = TinyModelSpec("tiny-llama", "llama", d_model=64, n_layers=4, n_heads=4, n_kv_heads=2, d_mlp=172)


def build_config(spec: TinyModelSpec, vocab_size: int) -> GPT2Config | LlamaConfig:
    """The ``transformers`` config of ``spec`` for a vocabulary of ``vocab_size`` tokens.

    Dropout is off (tiny data, bitwise-reproducible training); input and output
    embeddings are tied, which lets a copying head read and write the same token vectors.
    """
    if spec.d_model % spec.n_heads:
        raise ValueError(
            f"spec: expected d_model divisible by n_heads, got {spec.d_model} and {spec.n_heads}"
        )
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size: expected more than {len(SPECIAL_TOKENS)} tokens, got {vocab_size}")
    pad_id, eos_id = SPECIAL_TOKENS.index(PAD_TOKEN), SPECIAL_TOKENS.index(EOS_TOKEN)
    if spec.family == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_positions=spec.max_positions,
            n_embd=spec.d_model,
            n_layer=spec.n_layers,
            n_head=spec.n_heads,
            n_inner=spec.d_mlp,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=eos_id,
            eos_token_id=eos_id,
            pad_token_id=pad_id,
            tie_word_embeddings=True,
        )
    if spec.family == "llama":
        if spec.n_heads % spec.n_kv_heads:
            raise ValueError(
                f"spec: expected n_heads divisible by n_kv_heads, got {spec.n_heads}, {spec.n_kv_heads}"
            )
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=spec.d_model,
            intermediate_size=spec.d_mlp,
            num_hidden_layers=spec.n_layers,
            num_attention_heads=spec.n_heads,
            num_key_value_heads=spec.n_kv_heads,
            max_position_embeddings=spec.max_positions,
            attention_dropout=0.0,
            bos_token_id=eos_id,
            eos_token_id=eos_id,
            pad_token_id=pad_id,
            tie_word_embeddings=True,
        )
    raise ValueError(f"spec.family: expected 'gpt2' or 'llama', got {spec.family!r}")


def init_model(spec: TinyModelSpec, vocab_size: int, seed: int) -> PreTrainedModel:
    """A freshly initialised model; the same seed gives the same weights.

    ``transformers`` initialises from torch's global generator, so the construction runs
    inside ``torch.random.fork_rng`` with a fixed seed: the caller's RNG state is
    restored afterwards.
    """
    config = build_config(spec, vocab_size)
    model: PreTrainedModel
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config) if isinstance(config, GPT2Config) else LlamaForCausalLM(config)
    model.eval()
    return model
