"""Two-operand addition rows with the MIB arithmetic counterfactual types.

Prompts follow the six addition templates of MIB Table 7; the expected continuation is
the sum as one number written after a space (``" 91"``).

Causal model (MIB Fig. 14; variables ``operand_1``, ``operand_2``, ``ones_carry``,
``result``), with x = operand_1, y = operand_2 and digits x = 10·x₁₀ + x₁::

    ones_carry = 1 if x₁ + y₁ ≥ 10 else 0
    result     = 10·(x₁₀ + y₁₀ + ones_carry) + (x₁ + y₁) mod 10
    output     = " " + str(result)

The paper's text writes the carry condition as x₁ + y₁ > 10; its Figure 14 ("exceeds 9")
and ordinary addition use ≥ 10, which is what this model does. Interventions are derived
for ``ones_carry`` (the variable the MIB causal-variable track localises).

Counterfactual types (MIB Table 8)::

    random_operands       another operand pair of the same split
    ones_digit_operand_1  operand 1 with a different ones digit (tens kept)
    ones_digit_operand_2  operand 2 with a different ones digit
    tens_digit_operand_1  operand 1 with a different tens digit (ones kept)
    tens_digit_operand_2  operand 2 with a different tens digit
    ones_carry            both ones digits redrawn so that ones_carry flips, tens kept
    tens_carry            both tens digits redrawn so that the tens column's carry
                          (x₁₀ + y₁₀ + ones_carry ≥ 10) flips, ones kept

Splits partition the unordered operand pairs {x, y} (both orders of a pair belong to the
same split). Base operands and ``random_operands`` come from the split's pairs; the
digit-edit counterfactuals are determined by the base and may land on a pair of another
split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import (
    Dataset,
    build_row,
    check_count,
    check_seed,
    check_split,
    metadata,
    partition,
    pick,
    prompt_object,
    split_rng,
)

__all__ = [
    "COUNTERFACTUAL_TYPES",
    "INTERVENED_VARIABLES",
    "TEMPLATES",
    "VARIABLES",
    "arithmetic_interchange",
    "arithmetic_pairs",
    "arithmetic_vocabulary_texts",
    "generate_arithmetic",
    "run_arithmetic_model",
]

TASK = "arithmetic"

TEMPLATES: tuple[str, ...] = (
    "Q: How much is {operand_1} plus {operand_2}? A:",
    "Q: What is {operand_1} plus {operand_2}? A:",
    "Q: What is the result of {operand_1} plus {operand_2}? A:",
    "The sum of {operand_1} and {operand_2} is:",
    "{operand_1}+{operand_2}=",
    "{operand_1} + {operand_2} =",
)

COUNTERFACTUAL_TYPES: tuple[str, ...] = (
    "random_operands",
    "ones_digit_operand_1",
    "ones_digit_operand_2",
    "tens_digit_operand_1",
    "tens_digit_operand_2",
    "ones_carry",
    "tens_carry",
)

VARIABLES: tuple[str, ...] = ("operand_1", "operand_2", "ones_carry", "result")
INTERVENED_VARIABLES: tuple[str, ...] = ("ones_carry",)

_OPERAND_MIN, _OPERAND_MAX = 0, 99


def _check_range(operand_min: int, operand_max: int) -> tuple[int, int]:
    lo = check_count("operand_min", operand_min, minimum=0)
    hi = check_count("operand_max", operand_max, minimum=0)
    if not (lo < hi <= _OPERAND_MAX):
        raise ValueError(f"operand_max: expected operand_min < operand_max <= {_OPERAND_MAX}, got {lo}..{hi}")
    return lo, hi


def arithmetic_pairs(
    split: str, operand_min: int = _OPERAND_MIN, operand_max: int = _OPERAND_MAX
) -> tuple[tuple[int, int], ...]:
    """Unordered operand pairs (x ≤ y) assigned to ``split``."""
    lo, hi = _check_range(operand_min, operand_max)
    pairs = [(x, y) for x in range(lo, hi + 1) for y in range(x, hi + 1)]
    return partition(pairs, split)


def run_arithmetic_model(
    slots: Mapping[str, Any], interventions: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Run the carry causal model on a prompt's slots (``operand_1``, ``operand_2``).

    Args:
        slots: the two operands (strings or integers).
        interventions: fixed values for ``ones_carry`` (0 or 1).

    Returns:
        ``operand_1``, ``operand_2``, ``ones_carry``, ``result`` and ``output``.
    """
    fixed = dict(interventions or {})
    unknown = set(fixed) - set(INTERVENED_VARIABLES)
    if unknown:
        raise ValueError(
            f"interventions: expected keys among {list(INTERVENED_VARIABLES)}, got {sorted(unknown)}"
        )
    x, y = int(slots["operand_1"]), int(slots["operand_2"])
    carry = fixed.get("ones_carry", int(x % 10 + y % 10 >= 10))
    result = 10 * (x // 10 + y // 10 + carry) + (x % 10 + y % 10) % 10
    return {"operand_1": x, "operand_2": y, "ones_carry": carry, "result": result, "output": f" {result}"}


def arithmetic_interchange(
    base_slots: Mapping[str, Any], source_slots: Mapping[str, Any], variable: str
) -> str | None:
    """Output of the causal model on the base with ``variable`` taken from the source run."""
    if variable not in INTERVENED_VARIABLES:
        raise ValueError(f"variable: expected one of {list(INTERVENED_VARIABLES)}, got {variable!r}")
    source_value = run_arithmetic_model(source_slots)[variable]
    return run_arithmetic_model(base_slots, {variable: source_value})["output"]


def _edits(x: int, y: int, lo: int, hi: int) -> dict[str, list[tuple[int, int]]]:
    """Every operand pair each digit-edit counterfactual may use, in a fixed order."""

    def ok(p: int, q: int) -> bool:
        return lo <= p <= hi and lo <= q <= hi

    x10, x1, y10, y1 = divmod(x, 10) + divmod(y, 10)
    carry = int(x1 + y1 >= 10)
    tens_carry = int(x10 + y10 + carry >= 10)
    digits = range(10)
    out: dict[str, list[tuple[int, int]]] = {
        "ones_digit_operand_1": [(10 * x10 + d, y) for d in digits if d != x1],
        "ones_digit_operand_2": [(x, 10 * y10 + d) for d in digits if d != y1],
        "tens_digit_operand_1": [(10 * t + x1, y) for t in digits if t != x10],
        "tens_digit_operand_2": [(x, 10 * t + y1) for t in digits if t != y10],
        "ones_carry": [
            (10 * x10 + p, 10 * y10 + q) for p in digits for q in digits if int(p + q >= 10) != carry
        ],
        "tens_carry": [
            (10 * s + x1, 10 * t + y1)
            for s in digits
            for t in digits
            if int(s + t + carry >= 10) != tens_carry
        ],
    }
    return {name: [pq for pq in pairs if ok(*pq)] for name, pairs in out.items()}


def _choose(
    rng: np.random.Generator, candidates: list[tuple[int, int]], name: str, base: tuple[int, int]
) -> tuple[int, int]:
    if not candidates:
        raise ValueError(
            f"operand_min/operand_max: the range leaves no {name!r} counterfactual for base operands {base}"
        )
    return pick(rng, candidates)


def _prompt(template: str, operands: tuple[int, int]) -> dict[str, Any]:
    slots = {"operand_1": operands[0], "operand_2": operands[1]}
    return prompt_object(template, slots, run_arithmetic_model, VARIABLES)


def generate_arithmetic(
    split: str,
    n_rows: int,
    seed: int = 0,
    *,
    operand_min: int = _OPERAND_MIN,
    operand_max: int = _OPERAND_MAX,
) -> Dataset:
    """Generate addition rows for one split.

    Args:
        split: ``train``, ``validation`` or ``test``.
        n_rows: number of rows.
        seed: seed of the local generator (same seed, same bytes).
        operand_min: smallest operand (default 0).
        operand_max: largest operand, at most 99 (default 99).

    Returns:
        The rows and their metadata (no filter applied yet).
    """
    check_split(split)
    n_rows = check_count("n_rows", n_rows)
    seed = check_seed(seed)
    lo, hi = _check_range(operand_min, operand_max)
    rng = split_rng(seed, TASK, split)
    pairs = arithmetic_pairs(split, lo, hi)
    if len(pairs) < 2:
        raise ValueError(
            f"operand_min/operand_max: expected at least 2 operand pairs in split {split!r}, got {len(pairs)}"
        )

    def ordered(pair: tuple[int, int]) -> tuple[int, int]:
        return pair if rng.random() < 0.5 else (pair[1], pair[0])

    rows = []
    for index in range(n_rows):
        template = pick(rng, TEMPLATES)
        base_index = int(rng.integers(len(pairs)))
        x, y = ordered(pairs[base_index])
        other = int(rng.integers(len(pairs) - 1))
        other += other >= base_index  # any pair of the split but the base's own
        chosen = {"random_operands": ordered(pairs[other])}
        for name, candidates in _edits(x, y, lo, hi).items():
            chosen[name] = _choose(rng, candidates, name, (x, y))
        counterfactuals = {t: _prompt(template, chosen[t]) for t in COUNTERFACTUAL_TYPES}
        rows.append(
            build_row(
                TASK,
                split,
                index,
                _prompt(template, (x, y)),
                counterfactuals,
                arithmetic_interchange,
                INTERVENED_VARIABLES,
            )
        )
    parameters = {
        "n_rows": n_rows,
        "operator": "+",
        "operand_min": lo,
        "operand_max": hi,
        "templates": len(TEMPLATES),
        "operand_pairs": len(pairs),
    }
    meta = metadata(TASK, split, seed, parameters, COUNTERFACTUAL_TYPES, INTERVENED_VARIABLES, len(rows))
    return Dataset(tuple(rows), meta)


def arithmetic_vocabulary_texts() -> tuple[str, ...]:
    """Texts containing every word an addition prompt or answer can contain."""
    blanks = {"operand_1": "", "operand_2": ""}
    numbers = tuple(str(n) for n in range(2 * _OPERAND_MAX + 1))
    return (*(t.format(**blanks) for t in TEMPLATES), *numbers)
