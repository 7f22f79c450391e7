"""Small models with seeded random weights, saved as safetensors (tests and benchmarks).

Weights are drawn from a local ``torch.Generator``; the library's own initialisation
(which draws from the global generator) runs inside ``torch.random.fork_rng`` so the
caller's global state is untouched, and every parameter is then overwritten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

__all__ = ["FAMILIES", "random_model"]

FAMILIES: tuple[str, ...] = ("gpt2", "llama", "qwen2", "gemma2")


def _config(family: str, n_layers: int, n_heads: int, d_model: int, vocab_size: int, **extra: Any) -> Any:
    import transformers

    if family == "gpt2":
        kw: dict[str, Any] = {
            "n_layer": n_layers,
            "n_head": n_heads,
            "n_embd": d_model,
            "vocab_size": vocab_size,
            "n_positions": 64,
            "bos_token_id": 0,
            "eos_token_id": 0,
        }
        return transformers.GPT2Config(**{**kw, **extra})
    common: dict[str, Any] = {
        "num_hidden_layers": n_layers,
        "num_attention_heads": n_heads,
        "num_key_value_heads": max(1, n_heads // 2),
        "hidden_size": d_model,
        "intermediate_size": 2 * d_model,
        "vocab_size": vocab_size,
        "max_position_embeddings": 64,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "pad_token_id": None,
    }
    if family == "llama":
        return transformers.LlamaConfig(**{**common, **extra})
    if family == "qwen2":
        return transformers.Qwen2Config(**{**common, **extra})
    if family == "gemma2":
        gemma: dict[str, Any] = {
            "head_dim": d_model // n_heads,
            "query_pre_attn_scalar": d_model // n_heads,
            "attn_logit_softcapping": 5.0,
            "final_logit_softcapping": 3.0,
            "sliding_window": 4,
        }
        return transformers.Gemma2Config(**{**common, **gemma, **extra})
    raise ValueError(f"family: expected one of {list(FAMILIES)}, got {family!r}")


def random_model(
    family: str,
    directory: str | Path,
    *,
    n_layers: int = 2,
    n_heads: int = 4,
    d_model: int = 32,
    vocab_size: int = 64,
    seed: int = 0,
    **config: Any,
) -> Path:
    """Write a randomly initialised causal LM of a supported family to ``directory``.

    Matrices are ``N(0, 1/fan_in)``, embeddings ``N(0, 1)``, biases ``N(0, 0.1²)``, norm
    gains ``1 + N(0, 0.1²)`` (Gemma-2 stores the offset, so ``N(0, 0.1²)``).

    Args:
        family: ``gpt2``, ``llama``, ``qwen2`` or ``gemma2``.
        directory: where ``config.json`` and ``model.safetensors`` are written.
        n_layers, n_heads, d_model, vocab_size: shape (Llama/Qwen2/Gemma-2 use
            ``n_heads // 2`` key/value heads and an MLP of width ``2·d_model``).
        seed: seed of the local generator.
        config: extra config fields (override the defaults above).

    Returns:
        The directory.
    """
    from transformers import AutoModelForCausalLM

    cfg = _config(family, n_layers, n_heads, d_model, vocab_size, **config)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    conv1d = family == "gpt2"
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "norm" in name or name.split(".")[-2].startswith("ln"):
                value = noise * 0.1 if (family == "gemma2" or name.endswith("bias")) else 1.0 + noise * 0.1
            elif name.endswith("bias"):
                value = noise * 0.1
            elif "wte" in name or "wpe" in name or "embed_tokens" in name:
                value = noise
            else:
                fan_in = p.shape[0] if conv1d else p.shape[1]
                value = noise / fan_in**0.5
            p.copy_(value.to(p.dtype))
    out = Path(directory)
    model.save_pretrained(out, safe_serialization=True)
    return out
