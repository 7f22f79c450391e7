"""Four-choice colour questions (MCQA) with the nine MIB counterfactual types.

A prompt states an object's colour and asks for it among four labelled options::

    Question: The banana is yellow. What color is the banana?
    A. gray
    B. black
    C. white
    D. yellow
    Answer:                                              ->  " D"

Causal model (MIB §4.2; variables ``answer_pointer`` and ``answer``)::

    answer_pointer = index (0..3) of the option equal to the stated colour
    answer         = " " + label[answer_pointer]
    output         = answer

Interchanging ``answer_pointer`` from a counterfactual gives the base's label at the
counterfactual's position; interchanging ``answer`` gives the counterfactual's answer.

Counterfactual types (MIB Table 9)::

    noun                          another object of the same split, same stated colour
    color                         another stated colour (not among the distractors),
                                  written in the correct option's place
    noun_color                    both
    answer_position               the correct option swapped with another position
    symbol                        labels 1, 2, 3, 4 instead of A, B, C, D
    random_letter                 four distinct random letters outside A–D
    answer_position_random_letter, answer_position_symbol, answer_position_color
                                  the combinations

Base prompts state the object's prototypical colour; counterfactual prompts may state
another one (as in MIB). Splits draw objects from disjoint parts of the object list;
colours are shared (there are only eleven).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import wordlists
from ._common import (
    Dataset,
    build_row,
    check_count,
    check_seed,
    check_split,
    metadata,
    partition,
    pick,
    pick_distinct,
    prompt_object,
    split_rng,
)

__all__ = [
    "COLORS",
    "COUNTERFACTUAL_TYPES",
    "TEMPLATES",
    "VARIABLES",
    "generate_mcqa",
    "mcqa_interchange",
    "mcqa_objects",
    "mcqa_vocabulary_texts",
    "run_mcqa_model",
]

TASK = "mcqa"

_OPTIONS = (
    "\n{label_0}. {option_0}\n{label_1}. {option_1}\n{label_2}. {option_2}\n{label_3}. {option_3}\nAnswer:"
)
TEMPLATES: tuple[str, ...] = (
    "Question: The {object} is {color}. What color is the {object}?" + _OPTIONS,
    "The {object} is {color}. Question: What is the color of the {object}?" + _OPTIONS,
)

COUNTERFACTUAL_TYPES: tuple[str, ...] = (
    "noun",
    "color",
    "noun_color",
    "answer_position",
    "symbol",
    "random_letter",
    "answer_position_random_letter",
    "answer_position_symbol",
    "answer_position_color",
)

VARIABLES: tuple[str, ...] = ("answer_pointer", "answer")

COLORS: tuple[str, ...] = wordlists.COLOURS
_N_CHOICES = 4
_LETTERS = tuple("ABCD")
_SYMBOLS = tuple("1234")
_RANDOM_LETTER_POOL = tuple(c for c in string.ascii_uppercase if c not in _LETTERS)


def mcqa_objects(split: str) -> tuple[tuple[str, str], ...]:
    """(object, prototypical colour) pairs of a split (objects disjoint between splits)."""
    return partition(wordlists.COLOURED_OBJECTS, split)


def run_mcqa_model(
    slots: Mapping[str, Any], interventions: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Run the answer-pointer causal model on a prompt's slots.

    Args:
        slots: ``color``, ``option_0``..``option_3`` and ``label_0``..``label_3``.
        interventions: fixed values for ``answer_pointer`` (0..3 or None) or ``answer``.

    Returns:
        ``answer_pointer``, ``answer`` and ``output`` (None when undefined).
    """
    fixed = dict(interventions or {})
    unknown = set(fixed) - set(VARIABLES)
    if unknown:
        raise ValueError(f"interventions: expected keys among {list(VARIABLES)}, got {sorted(unknown)}")
    options = [str(slots[f"option_{i}"]) for i in range(_N_CHOICES)]
    labels = [str(slots[f"label_{i}"]) for i in range(_N_CHOICES)]
    hits = [i for i, option in enumerate(options) if option == str(slots["color"])]
    pointer: int | None = hits[0] if len(hits) == 1 else None
    pointer = fixed.get("answer_pointer", pointer)
    answer = f" {labels[pointer]}" if pointer is not None else None
    answer = fixed.get("answer", answer)
    return {"answer_pointer": pointer, "answer": answer, "output": answer}


def mcqa_interchange(
    base_slots: Mapping[str, Any], source_slots: Mapping[str, Any], variable: str
) -> str | None:
    """Output of the causal model on the base with ``variable`` taken from the source run."""
    if variable not in VARIABLES:
        raise ValueError(f"variable: expected one of {list(VARIABLES)}, got {variable!r}")
    source_value = run_mcqa_model(source_slots)[variable]
    return run_mcqa_model(base_slots, {variable: source_value})["output"]


def _slots(obj: str, color: str, options: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    slots: dict[str, Any] = {"object": obj, "color": color}
    for i in range(_N_CHOICES):
        slots[f"label_{i}"] = labels[i]
        slots[f"option_{i}"] = options[i]
    return slots


def _swap(options: Sequence[str], i: int, j: int) -> list[str]:
    out = list(options)
    out[i], out[j] = out[j], out[i]
    return out


def _replace(options: Sequence[str], i: int, value: str) -> list[str]:
    out = list(options)
    out[i] = value
    return out


def _counterfactual_slots(
    rng: np.random.Generator,
    objects: Sequence[tuple[str, str]],
    obj: str,
    color: str,
    options: list[str],
    pointer: int,
) -> dict[str, dict[str, Any]]:
    new_obj = pick_distinct(rng, [o for o, _ in objects], 1, exclude=(obj,))[0]
    new_color = pick_distinct(rng, COLORS, 1, exclude=options)[0]
    new_pointer = pick_distinct(rng, range(_N_CHOICES), 1, exclude=(pointer,))[0]
    letters = pick_distinct(rng, _RANDOM_LETTER_POOL, _N_CHOICES)
    moved = _swap(options, pointer, new_pointer)
    return {
        "noun": _slots(new_obj, color, options, _LETTERS),
        "color": _slots(obj, new_color, _replace(options, pointer, new_color), _LETTERS),
        "noun_color": _slots(new_obj, new_color, _replace(options, pointer, new_color), _LETTERS),
        "answer_position": _slots(obj, color, moved, _LETTERS),
        "symbol": _slots(obj, color, options, _SYMBOLS),
        "random_letter": _slots(obj, color, options, letters),
        "answer_position_random_letter": _slots(obj, color, moved, letters),
        "answer_position_symbol": _slots(obj, color, moved, _SYMBOLS),
        "answer_position_color": _slots(obj, new_color, _replace(moved, new_pointer, new_color), _LETTERS),
    }


def generate_mcqa(split: str, n_rows: int, seed: int = 0) -> Dataset:
    """Generate four-choice colour questions for one split.

    Args:
        split: ``train``, ``validation`` or ``test``.
        n_rows: number of rows.
        seed: seed of the local generator (same seed, same bytes).

    Returns:
        The rows (with base ``choices`` and ``answer_key``) and their metadata.
    """
    check_split(split)
    n_rows = check_count("n_rows", n_rows)
    seed = check_seed(seed)
    rng = split_rng(seed, TASK, split)
    objects = mcqa_objects(split)
    rows = []
    for index in range(n_rows):
        template = pick(rng, TEMPLATES)
        obj, color = pick(rng, objects)
        pointer = int(rng.integers(_N_CHOICES))
        options = pick_distinct(rng, COLORS, _N_CHOICES - 1, exclude=(color,))
        options.insert(pointer, color)
        base = prompt_object(template, _slots(obj, color, options, _LETTERS), run_mcqa_model, VARIABLES)
        cf_slots = _counterfactual_slots(rng, objects, obj, color, options, pointer)
        counterfactuals = {
            t: prompt_object(template, cf_slots[t], run_mcqa_model, VARIABLES) for t in COUNTERFACTUAL_TYPES
        }
        row = build_row(TASK, split, index, base, counterfactuals, mcqa_interchange, VARIABLES)
        row["choices"] = [{"label": lab, "text": text} for lab, text in zip(_LETTERS, options, strict=True)]
        row["answer_key"] = _LETTERS[pointer]
        rows.append(row)
    parameters = {
        "n_rows": n_rows,
        "n_choices": _N_CHOICES,
        "templates": len(TEMPLATES),
        "objects": len(objects),
        "colors": len(COLORS),
    }
    meta = metadata(TASK, split, seed, parameters, COUNTERFACTUAL_TYPES, VARIABLES, len(rows))
    return Dataset(tuple(rows), meta)


def mcqa_vocabulary_texts() -> tuple[str, ...]:
    """Texts containing every word an MCQA prompt or answer of any split can contain."""
    blanks = dict.fromkeys(
        ["object", "color"] + [f"{k}_{i}" for k in ("label", "option") for i in range(4)], ""
    )
    return (
        *(t.format(**blanks) for t in TEMPLATES),
        *(o for o, _ in wordlists.COLOURED_OBJECTS),
        *COLORS,
        *string.ascii_uppercase,
        *_SYMBOLS,
    )
