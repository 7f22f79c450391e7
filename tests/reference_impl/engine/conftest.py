"""Fixtures shared by the engine's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

MODELS = Path(__file__).resolve().parents[3] / "examples" / "models"


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple[Any, Any, Any]]:
    """Per family (tiny GPT-2 and tiny Llama): the engine's model, the transformers model of
    the same folder (the independent anchor) and the tokenizer."""
    pytest.importorskip("torch")
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from mibspec.reference_impl.engine import load_model

    out = {}
    for family in ("gpt2", "llama"):
        folder = MODELS / f"tiny-{family}"
        hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False).eval()
        out[family] = (load_model(folder), hf, Tokenizer.from_file(str(folder / "tokenizer.json")))
    return out
