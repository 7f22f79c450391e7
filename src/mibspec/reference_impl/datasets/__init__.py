"""Counterfactual dataset generators for the MIB tasks (pure Python and numpy).

Each generator returns a :class:`Dataset`: rows in the JSON Lines format of
``spec/v1/datasets.md`` and a metadata dict (task, split, generator, counterfactual
types, variables, filters, row count). Expected outputs under interventions are derived
from each task's causal model (``run_*_model`` and ``*_interchange``).

Example:
    >>> from mibspec.reference_impl.datasets import generate
    >>> ds = generate("ioi", "test", n_rows=2, seed=0)
    >>> sorted(ds.rows[0])
    ['base', 'counterfactuals', 'id', 'interventions']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._common import SPLITS, Dataset, dumps_jsonl, read_jsonl, write_dataset
from .arithmetic import arithmetic_interchange, generate_arithmetic, run_arithmetic_model
from .filters import Tokenize, equal_token_length_filter, prompt_token_lengths
from .ioi import generate_ioi, ioi_interchange, run_ioi_model
from .mcqa import generate_mcqa, mcqa_interchange, run_mcqa_model
from .ravel import generate_ravel, ravel_interchange, run_ravel_model

__all__ = [
    "SPLITS",
    "TASKS",
    "Dataset",
    "Tokenize",
    "arithmetic_interchange",
    "dumps_jsonl",
    "equal_token_length_filter",
    "generate",
    "generate_arithmetic",
    "generate_ioi",
    "generate_mcqa",
    "generate_ravel",
    "ioi_interchange",
    "lexicon",
    "mcqa_interchange",
    "prompt_token_lengths",
    "ravel_interchange",
    "read_jsonl",
    "run_arithmetic_model",
    "run_ioi_model",
    "run_mcqa_model",
    "run_ravel_model",
    "vocabulary_texts",
    "write_dataset",
]

_GENERATORS: dict[str, Callable[..., Dataset]] = {
    "ioi": generate_ioi,
    "arithmetic": generate_arithmetic,
    "mcqa": generate_mcqa,
    "ravel": generate_ravel,
}

#: Task names accepted by :func:`generate`.
TASKS: tuple[str, ...] = tuple(_GENERATORS)


def generate(task: str, split: str, n_rows: int, seed: int = 0, **parameters: Any) -> Dataset:
    """Generate rows of ``task`` (one of :data:`TASKS`) for ``split``.

    Extra keyword arguments go to the task's generator (e.g. ``operand_max`` for
    arithmetic).
    """
    if task not in _GENERATORS:
        raise ValueError(f"task: expected one of {list(TASKS)}, got {task!r}")
    return _GENERATORS[task](split, n_rows, seed, **parameters)


def lexicon() -> dict[str, tuple[str, ...]]:
    """The word lists behind the generators, across all splits.

    Keys: ``names``, ``places``, ``objects`` (IOI), ``colored_objects``, ``colors``
    (MCQA), ``cities`` (RAVEL-style).
    """
    from . import wordlists

    return {
        "names": wordlists.FIRST_NAMES,
        "places": wordlists.PLACES,
        "objects": wordlists.OBJECTS,
        "colored_objects": tuple(o for o, _ in wordlists.COLOURED_OBJECTS),
        "colors": wordlists.COLOURS,
        "cities": tuple(c for c, *_ in wordlists.CITIES),
    }


def vocabulary_texts(tasks: tuple[str, ...] = TASKS) -> tuple[str, ...]:
    """Texts that together contain every word any generator can emit, for every split.

    A word-level tokenizer built from these (after its pre-tokenizer) maps no generated
    prompt or answer to the unknown token.
    """
    from .arithmetic import arithmetic_vocabulary_texts
    from .ioi import ioi_vocabulary_texts
    from .mcqa import mcqa_vocabulary_texts
    from .ravel import ravel_vocabulary_texts

    sources = {
        "ioi": ioi_vocabulary_texts,
        "arithmetic": arithmetic_vocabulary_texts,
        "mcqa": mcqa_vocabulary_texts,
        "ravel": ravel_vocabulary_texts,
    }
    unknown = set(tasks) - set(sources)
    if unknown:
        raise ValueError(f"tasks: expected names among {list(TASKS)}, got {sorted(unknown)}")
    return tuple(text for task in tasks for text in sources[task]())
