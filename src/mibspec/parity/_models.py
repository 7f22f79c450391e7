"""The tiny random-weight models the parity harness compares beyond the shipped ones, and
the circuit reports it writes for them.

Qwen2 and Gemma-2 are the two families of MIB's leaderboard (Qwen2.5-0.5B, gemma-2-2b) with
no shipped tiny model: the harness writes one of each with seeded random weights and every
structural option of the real configuration switched on, with the shipped tiny tokenizer
(855 tokens, ``<eos>`` = 2 starting prompts).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "ATTRIBUTION_TASKS",
    "RANDOM_MODELS",
    "SHAPE_ROWS",
    "WIDE_MODELS",
    "circuit_report",
    "first_rows",
    "random_model_dir",
    "report_method",
]

RANDOM_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    # biases on q/k/v (always, in Qwen2), tied embeddings, grouped-query attention (2 heads
    # per key/value head), the checkpoint's rotary base
    "tiny-qwen2": (
        "qwen2",
        {
            "n_layers": 4,
            "n_heads": 4,
            "d_model": 64,
            "seed": 1,
            "tie_word_embeddings": True,
            "rope_theta": 1_000_000.0,
        },
    ),
    # soft-capping of attention scores and of logits (caps low enough to bend random
    # weights' values), sliding-window attention on alternate layers with a window (4)
    # shorter than the prompts, norms before and after each sublayer, embedding scaling,
    # GQA, RMSNorm with 1 + w, heads narrower than d_model / n_heads (as 8 · 256 < 2304) with
    # the score scale sqrt(query_pre_attn_scalar) = sqrt(head width), tied embeddings
    "tiny-gemma2": (
        "gemma2",
        {
            "n_layers": 4,
            "n_heads": 4,
            "d_model": 48,
            "seed": 2,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 4,
            "attn_logit_softcapping": 5.0,
            "final_logit_softcapping": 3.0,
        },
    ),
}
#: A random GPT-2 of GPT-2 small's shape (12 layers, 12 heads, d_model 768, 32,491 edges),
#: with the shipped tiny tokenizer's vocabulary: the accumulation of patched inputs over
#: 158 source nodes at real width, on a few IOI rows (:data:`SHAPE_ROWS`).
WIDE_MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt2-small-shape": ("gpt2", {"n_layers": 12, "n_heads": 12, "d_model": 768, "seed": 7}),
}
#: IOI rows the GPT-2-small-shaped run evaluates (the public evaluator costs about half a
#: second per row and circuit at that width on one core).
SHAPE_ROWS = 8
#: The parity tasks that compare edge scores (mibspec's attribution against the public one).
ATTRIBUTION_TASKS = ("EAP", "EAP-IG-inputs")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
_VOCAB = 855
_EOS, _PAD = 2, 0


def random_model_dir(name: str, root: Path, tokenizer_dir: Path) -> Path:
    """Write the random model ``name`` (:data:`RANDOM_MODELS`, :data:`WIDE_MODELS`) to ``root / name`` with
    the tokenizer files of ``tokenizer_dir`` (the shipped ``tiny-gpt2``'s) and return it."""
    from mibspec.reference_impl.engine import random_model

    family, shape = {**RANDOM_MODELS, **WIDE_MODELS}[name]
    folder = random_model(
        family,
        Path(root) / name,
        vocab_size=_VOCAB,
        bos_token_id=_EOS,
        eos_token_id=_EOS,
        pad_token_id=_PAD,
        **shape,
    )
    for file in _TOKENIZER_FILES:
        shutil.copy(Path(tokenizer_dir) / file, folder / file)
    return folder


def report_method(family: str) -> str:
    """The producer's scoring method for a model family: EAP-IG, except for Gemma-2, whose
    post-attention norms mibspec's attribution does not handle (``metrics/engine.md``
    ME-4): seeded random scores there, which rank edges just as well for a comparison of
    evaluations."""
    return "random" if family == "gemma2" else "eap-ig"


def circuit_report(model_dir: Path, dataset: Path, folder: Path, method: str = "eap-ig") -> Path:
    """A circuit report written by mibspec's producer (``method``, counterfactual
    ``io_s2_flip``) for ``model_dir`` on ``dataset``, under ``folder``."""
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    run = score_circuit(
        CircuitOptions(
            model_dir=Path(model_dir),
            dataset_path=Path(dataset),
            out_dir=Path(folder) / f"circuit-ioi-{Path(model_dir).name}",
            counterfactual_type="io_s2_flip",
            method=method,
        )
    )
    return Path(run.report)


def first_rows(dataset: Path, n_rows: int, folder: Path) -> Path:
    """A copy of the dataset document ``dataset`` under ``folder`` holding its first ``n_rows``
    rows (its rows artifact rewritten with their hash, size and count)."""
    import hashlib
    import json

    doc = json.loads(Path(dataset).read_text(encoding="utf-8"))
    entry = doc["artifacts"][0]
    lines = (Path(dataset).parent / entry["path"]).read_bytes().splitlines(keepends=True)[:n_rows]
    data = b"".join(lines)
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / entry["path"]).write_bytes(data)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), rows=len(lines))
    for step in doc.get("filters", []):
        step["kept"], step["dropped"] = len(lines), 0
    out = Path(folder) / Path(dataset).name
    out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return out
