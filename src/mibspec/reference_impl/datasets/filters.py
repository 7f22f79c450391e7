"""Filters applied to generated rows, each recorded in the dataset metadata."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ._common import Dataset

__all__ = ["Tokenize", "equal_token_length_filter", "prompt_token_lengths"]

#: Any callable mapping a prompt string to its token ids (e.g. a ``tokenizers`` encoder).
Tokenize = Callable[[str], Sequence[int]]


def prompt_token_lengths(row: Mapping[str, Any], tokenize: Tokenize) -> dict[str, int]:
    """Token count of the base prompt (key ``"base"``) and of every counterfactual prompt."""
    lengths = {"base": len(tokenize(row["base"]["prompt"]))}
    for cf_type, cf in row["counterfactuals"].items():
        lengths[cf_type] = len(tokenize(cf["prompt"]))
    return lengths


def equal_token_length_filter(dataset: Dataset, tokenize: Tokenize, tokenizer: str) -> Dataset:
    """Keep the rows whose base and counterfactual prompts all have the same token count.

    Position-by-position patching needs base and counterfactual to align token by token;
    rows where any prompt differs in length are dropped (never truncated or padded).

    Args:
        dataset: generated rows and metadata.
        tokenize: maps a prompt to its token ids, without special tokens that the model
            would not see either.
        tokenizer: identifier recorded in the metadata (a path or a hub id).

    Returns:
        A new dataset: kept rows in their original order with their original ids, and
        metadata with an ``equal_token_length`` entry appended to ``filters`` and
        ``rows`` updated.
    """
    if not callable(tokenize):
        raise ValueError(f"tokenize: expected a callable str -> list[int], got {type(tokenize).__name__}")
    if not isinstance(tokenizer, str) or not tokenizer:
        raise ValueError(f"tokenizer: expected a non-empty identifier string, got {tokenizer!r}")
    kept = tuple(row for row in dataset.rows if len(set(prompt_token_lengths(row, tokenize).values())) == 1)
    record = {
        "name": "equal_token_length",
        "tokenizer": tokenizer,
        "kept": len(kept),
        "dropped": len(dataset.rows) - len(kept),
    }
    meta = dict(dataset.metadata)
    meta["filters"] = [*meta.get("filters", []), record]
    meta["rows"] = len(kept)
    return replace(dataset, rows=kept, metadata=meta)
