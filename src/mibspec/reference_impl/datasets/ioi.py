"""Indirect object identification (IOI) rows with the eight MIB counterfactual types.

A base prompt names two people in a first clause (``name_a``, ``name_b``) and repeats one
of them as the subject of a second clause (``name_c``); the expected continuation is the
other one, the indirect object::

    When Mary and John went to the store, John gave a book to   ->  " Mary"

Causal model (variables ``output_position`` and ``output_token``)::

    output_position = index in (name_a, name_b) of the name that is not name_c
                      (undefined when name_c matches neither or both)
    output_token    = " " + (name_a, name_b)[output_position]
    output          = output_token

Counterfactual types (MIB Table 6), written as (name_a, name_b, name_c) for a base
(A, B, S) with indirect object O and fresh names A', B', C' of the same split (X' is
the fresh name standing in for X)::

    abc                                   (A, B, C')   no defined answer
    random_names                          (A', B', S')
    io_s1_flip                            (B, A, S)
    io_s2_flip                            (A, B, O)
    io_s1_flip_io_s2_flip                 (B, A, O)
    random_names_io_s1_flip               (B', A', S')
    random_names_io_s2_flip               (A', B', O')
    random_names_io_s1_flip_io_s2_flip    (B', A', O')

Splits draw names, places and objects from disjoint parts of the word lists; the
templates are shared by all splits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    "COUNTERFACTUAL_TYPES",
    "TEMPLATES",
    "VARIABLES",
    "generate_ioi",
    "ioi_attributes",
    "ioi_interchange",
    "ioi_vocabulary_texts",
    "run_ioi_model",
]

TASK = "ioi"

TEMPLATES: tuple[str, ...] = (
    "When {name_a} and {name_b} went to the {place}, {name_c} gave a {object} to",
    "After {name_a} and {name_b} spent some time at the {place}, {name_c} offered a {object} to",
    "Then, {name_a} and {name_b} had a long argument at the {place}. "
    "Afterwards {name_c} handed a {object} to",
    "While {name_a} and {name_b} were working at the {place}, {name_c} passed a {object} to",
    "{name_a} and {name_b} went to the {place}. {name_c} brought a {object} to",
    "Friends {name_a} and {name_b} found a {object} at the {place}. {name_c} gave it to",
    "When {name_a} and {name_b} arrived at the {place}, {name_c} threw a {object} to",
    "The {place} was busy when {name_a} and {name_b} met. {name_c} sold a {object} to",
    "Yesterday {name_a} and {name_b} cleaned the {place}, and {name_c} lent a {object} to",
    "At the {place}, {name_a} and {name_b} talked for hours. Then {name_c} showed a {object} to",
    "{name_a} and {name_b} had lunch at the {place}. Later {name_c} sent a {object} to",
    "Before {name_a} and {name_b} left the {place}, {name_c} returned a {object} to",
)

COUNTERFACTUAL_TYPES: tuple[str, ...] = (
    "abc",
    "random_names",
    "io_s1_flip",
    "io_s2_flip",
    "io_s1_flip_io_s2_flip",
    "random_names_io_s1_flip",
    "random_names_io_s2_flip",
    "random_names_io_s1_flip_io_s2_flip",
)

VARIABLES: tuple[str, ...] = ("output_token", "output_position")


def ioi_attributes(split: str) -> dict[str, tuple[str, ...]]:
    """Names, places and objects of a split (disjoint from the other splits)."""
    return {
        "names": partition(wordlists.FIRST_NAMES, split),
        "places": partition(wordlists.PLACES, split),
        "objects": partition(wordlists.OBJECTS, split),
    }


def run_ioi_model(slots: Mapping[str, Any], interventions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run the IOI causal model on a prompt's slots.

    Args:
        slots: at least ``name_a``, ``name_b`` and ``name_c``.
        interventions: variables fixed to given values (``output_position``: 0, 1 or
            None; ``output_token``: a string or None) instead of being computed.

    Returns:
        ``output_position``, ``output_token`` and ``output`` (None when undefined).
    """
    fixed = dict(interventions or {})
    unknown = set(fixed) - set(VARIABLES)
    if unknown:
        raise ValueError(f"interventions: expected keys among {list(VARIABLES)}, got {sorted(unknown)}")
    names = (str(slots["name_a"]), str(slots["name_b"]))
    subject = str(slots["name_c"])
    matches = [i for i, name in enumerate(names) if name == subject]
    position: int | None = 1 - matches[0] if len(matches) == 1 else None
    position = fixed.get("output_position", position)
    token = f" {names[position]}" if position is not None else None
    token = fixed.get("output_token", token)
    return {"output_position": position, "output_token": token, "output": token}


def ioi_interchange(
    base_slots: Mapping[str, Any], source_slots: Mapping[str, Any], variable: str
) -> str | None:
    """Output of the causal model on the base with ``variable`` taken from the source run."""
    if variable not in VARIABLES:
        raise ValueError(f"variable: expected one of {list(VARIABLES)}, got {variable!r}")
    source_value = run_ioi_model(source_slots)[variable]
    return run_ioi_model(base_slots, {variable: source_value})["output"]


def _prompt(template: str, names: tuple[str, str, str], place: str, obj: str) -> dict[str, Any]:
    slots: dict[str, Any] = {
        "name_a": names[0],
        "name_b": names[1],
        "name_c": names[2],
        "place": place,
        "object": obj,
    }
    values = run_ioi_model(slots)
    slots["subject"] = names[2]
    if values["output_position"] is not None:
        slots["indirect_object"] = names[values["output_position"]]
    return prompt_object(template, slots, run_ioi_model, VARIABLES)


def _counterfactual_names(
    a: str, b: str, s: str, fresh: tuple[str, str, str]
) -> dict[str, tuple[str, str, str]]:
    fa, fb, fc = fresh
    o = b if s == a else a
    mapped = {a: fa, b: fb}
    return {
        "abc": (a, b, fc),
        "random_names": (fa, fb, mapped[s]),
        "io_s1_flip": (b, a, s),
        "io_s2_flip": (a, b, o),
        "io_s1_flip_io_s2_flip": (b, a, o),
        "random_names_io_s1_flip": (fb, fa, mapped[s]),
        "random_names_io_s2_flip": (fa, fb, mapped[o]),
        "random_names_io_s1_flip_io_s2_flip": (fb, fa, mapped[o]),
    }


def generate_ioi(split: str, n_rows: int, seed: int = 0) -> Dataset:
    """Generate IOI rows for one split.

    Args:
        split: ``train``, ``validation`` or ``test``.
        n_rows: number of rows.
        seed: seed of the local generator (same seed, same bytes).

    Returns:
        The rows and their metadata (no filter applied yet).
    """
    check_split(split)
    n_rows = check_count("n_rows", n_rows)
    seed = check_seed(seed)
    rng = split_rng(seed, TASK, split)
    attrs = ioi_attributes(split)
    rows = []
    for index in range(n_rows):
        template = pick(rng, TEMPLATES)
        a, b = pick_distinct(rng, attrs["names"], 2)
        s = a if rng.random() < 0.5 else b
        place = pick(rng, attrs["places"])
        obj = pick(rng, attrs["objects"])
        fresh = tuple(pick_distinct(rng, attrs["names"], 3, exclude=(a, b)))
        base = _prompt(template, (a, b, s), place, obj)
        cf_names = _counterfactual_names(a, b, s, (fresh[0], fresh[1], fresh[2]))
        counterfactuals = {t: _prompt(template, cf_names[t], place, obj) for t in COUNTERFACTUAL_TYPES}
        rows.append(build_row(TASK, split, index, base, counterfactuals, ioi_interchange, VARIABLES))
    parameters = {
        "n_rows": n_rows,
        "templates": len(TEMPLATES),
        "names": len(attrs["names"]),
        "places": len(attrs["places"]),
        "objects": len(attrs["objects"]),
        "subject_first_probability": 0.5,
    }
    meta = metadata(TASK, split, seed, parameters, COUNTERFACTUAL_TYPES, VARIABLES, len(rows))
    return Dataset(tuple(rows), meta)


def ioi_vocabulary_texts() -> tuple[str, ...]:
    """Texts containing every word an IOI prompt or answer of any split can contain."""
    blanks = {"name_a": "", "name_b": "", "name_c": "", "place": "", "object": ""}
    fillers = (*wordlists.FIRST_NAMES, *wordlists.PLACES, *wordlists.OBJECTS)
    return (*(t.format(**blanks) for t in TEMPLATES), *fillers)
