"""RAVEL-style attribute retrieval rows: the country, continent or language of a city.

::

    The country of Paris is       ->  " France"
    The continent of Paris is     ->  " Europe"
    The language of Paris is      ->  " French"

Causal model (MIB App. G.5.3; variables ``Country``, ``Continent``, ``Language`` and
``queried_attribute``)::

    Country, Continent, Language = lookup(city)
    output = the value of the queried attribute (undefined when no attribute is queried)

Interchanging an attribute variable from a counterfactual changes the output only when
the base queries that attribute.

Counterfactual types::

    attribute        another city of the split, another queried attribute
    same_attribute   another city of the split, the same queried attribute
    mention          another city of the split in a sentence that queries nothing
                     (the stand-in for MIB's Wikipedia sentences; no defined answer)

Every template has five words, so base and counterfactual prompts have the same length
under a word-level tokenizer. Splits draw cities from disjoint parts of the city list.
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
    "ATTRIBUTES",
    "COUNTERFACTUAL_TYPES",
    "MENTION_TEMPLATES",
    "QUERY_TEMPLATES",
    "VARIABLES",
    "generate_ravel",
    "ravel_cities",
    "ravel_interchange",
    "ravel_vocabulary_texts",
    "run_ravel_model",
]

TASK = "ravel"

ATTRIBUTES: tuple[str, ...] = ("Country", "Continent", "Language")

QUERY_TEMPLATES: dict[str, str] = {
    "Country": "The country of {city} is",
    "Continent": "The continent of {city} is",
    "Language": "The language of {city} is",
}
MENTION_TEMPLATES: tuple[str, ...] = (
    "{city} is a big city",
    "We flew to {city} today",
    "The streets of {city} shine",
)

COUNTERFACTUAL_TYPES: tuple[str, ...] = ("attribute", "same_attribute", "mention")
VARIABLES: tuple[str, ...] = (*ATTRIBUTES, "queried_attribute")

_TABLE = {city: dict(zip(ATTRIBUTES, values, strict=True)) for city, *values in wordlists.CITIES}


def ravel_cities(split: str) -> tuple[str, ...]:
    """Cities of a split (disjoint between splits)."""
    return partition(tuple(city for city, *_ in wordlists.CITIES), split)


def run_ravel_model(
    slots: Mapping[str, Any], interventions: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Run the attribute-lookup causal model on a prompt's slots (``city``, ``attribute``).

    Args:
        slots: the city and the queried attribute (empty string when none is queried).
        interventions: fixed values (strings such as ``" France"``) for attribute variables.

    Returns:
        The attribute values, ``queried_attribute`` (None when none) and ``output``.
    """
    fixed = dict(interventions or {})
    unknown = set(fixed) - set(ATTRIBUTES)
    if unknown:
        raise ValueError(f"interventions: expected keys among {list(ATTRIBUTES)}, got {sorted(unknown)}")
    city = str(slots["city"])
    if city not in _TABLE:
        raise ValueError(f"slots: expected a known city, got {city!r}")
    values: dict[str, Any] = {name: f" {value}" for name, value in _TABLE[city].items()}
    values.update(fixed)
    queried = str(slots["attribute"]) or None
    values["queried_attribute"] = queried
    values["output"] = values[queried] if queried is not None else None
    return values


def ravel_interchange(
    base_slots: Mapping[str, Any], source_slots: Mapping[str, Any], variable: str
) -> str | None:
    """Output of the causal model on the base with ``variable`` taken from the source run."""
    if variable not in ATTRIBUTES:
        raise ValueError(f"variable: expected one of {list(ATTRIBUTES)}, got {variable!r}")
    source_value = run_ravel_model(source_slots)[variable]
    return run_ravel_model(base_slots, {variable: source_value})["output"]


def _query(city: str, attribute: str) -> dict[str, Any]:
    return prompt_object(
        QUERY_TEMPLATES[attribute], {"city": city, "attribute": attribute}, run_ravel_model, VARIABLES
    )


def generate_ravel(split: str, n_rows: int, seed: int = 0) -> Dataset:
    """Generate attribute-retrieval rows for one split.

    Args:
        split: ``train``, ``validation`` or ``test``.
        n_rows: number of rows; the queried attribute cycles so each gets a third.
        seed: seed of the local generator (same seed, same bytes).

    Returns:
        The rows and their metadata.
    """
    check_split(split)
    n_rows = check_count("n_rows", n_rows)
    seed = check_seed(seed)
    rng = split_rng(seed, TASK, split)
    cities = ravel_cities(split)
    rows = []
    for index in range(n_rows):
        # Balanced queried attributes: interventions on a variable then change the output
        # for a third of the bases (MIB balances the same way per evaluated variable).
        attribute = ATTRIBUTES[index % len(ATTRIBUTES)]
        city = pick(rng, cities)
        other_city, same_city, mention_city = (
            pick_distinct(rng, cities, 1, exclude=(city,))[0] for _ in range(3)
        )
        other_attribute = pick_distinct(rng, ATTRIBUTES, 1, exclude=(attribute,))[0]
        mention = pick(rng, MENTION_TEMPLATES)
        counterfactuals = {
            "attribute": _query(other_city, other_attribute),
            "same_attribute": _query(same_city, attribute),
            "mention": prompt_object(
                mention, {"city": mention_city, "attribute": ""}, run_ravel_model, VARIABLES
            ),
        }
        rows.append(
            build_row(
                TASK, split, index, _query(city, attribute), counterfactuals, ravel_interchange, ATTRIBUTES
            )
        )
    parameters = {
        "n_rows": n_rows,
        "cities": len(cities),
        "query_templates": len(QUERY_TEMPLATES),
        "mention_templates": len(MENTION_TEMPLATES),
    }
    meta = metadata(TASK, split, seed, parameters, COUNTERFACTUAL_TYPES, ATTRIBUTES, len(rows))
    return Dataset(tuple(rows), meta)


def ravel_vocabulary_texts() -> tuple[str, ...]:
    """Texts containing every word a RAVEL-style prompt or answer can contain."""
    words = [word for entry in wordlists.CITIES for word in entry]
    return (*(t.format(city="") for t in (*QUERY_TEMPLATES.values(), *MENTION_TEMPLATES)), *words)
