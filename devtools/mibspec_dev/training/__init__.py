"""Tokenizer building and deterministic training of tiny causal LMs (torch).

``tokenizer`` builds the word-level tokenizer, ``models`` the tiny GPT-2 and Llama
shapes, ``loop`` the training loop, ``evaluate`` the accuracy and logit-difference
report, ``recipe`` the end-to-end regeneration of the shipped datasets and models
(entry point: ``examples/models/train.py``), ``ravel`` the RAVEL attribute-retrieval
model (entry point: ``examples/models/train_ravel.py``).
"""

from __future__ import annotations

from .evaluate import evaluate_rows
from .loop import EncodedExamples, Example, TrainingConfig, encode_examples, last_position_logits, train_model
from .models import TINY_GPT2, TINY_LLAMA, TinyModelSpec, build_config, init_model
from .recipe import Recipe, build_tokenizer, run, structured_embeddings, train_one, write_models_md
from .tokenizer import build_word_tokenizer, load_word_tokenizer, save_tokenizer_files, tokenize_function

__all__ = [
    "TINY_GPT2",
    "TINY_LLAMA",
    "EncodedExamples",
    "Example",
    "Recipe",
    "TinyModelSpec",
    "TrainingConfig",
    "build_config",
    "build_tokenizer",
    "build_word_tokenizer",
    "encode_examples",
    "evaluate_rows",
    "init_model",
    "last_position_logits",
    "load_word_tokenizer",
    "run",
    "save_tokenizer_files",
    "structured_embeddings",
    "tokenize_function",
    "train_model",
    "train_one",
    "write_models_md",
]
