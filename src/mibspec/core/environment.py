"""The environment variables mibspec reads as numbers, declared once and read through
:func:`environment_int`.

The command line checks them all at start-up (:func:`check_environment`), before any work,
so that a bad value is a usage error naming the variable (exit 2), not a failure after a
whole verification. An unset or empty variable means its default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .integers import parse_int

__all__ = ["NUMERIC_VARIABLES", "EnvironmentValueError", "check_environment", "environment_int"]


class EnvironmentValueError(ValueError):
    """An environment variable holds a value mibspec cannot use (a usage error, exit 2)."""


@dataclass(frozen=True)
class NumericVariable:
    """A variable holding a non-negative whole number up to ``maximum``."""

    name: str
    maximum: int
    meaning: str


#: Every environment variable read as a number, by name.
NUMERIC_VARIABLES: dict[str, NumericVariable] = {
    v.name: v
    for v in (
        # 0 means "not set", as for shutil.get_terminal_size.
        NumericVariable("COLUMNS", 999_999, "the width of the text output in columns (0: not set)"),
        NumericVariable(
            "MIBSPEC_ACTIVATION_CACHE_BYTES", 10**18 - 1, "the bytes recomputation keeps activations in"
        ),
        # The last second of the year 9999, the last a timestamp can name.
        NumericVariable("SOURCE_DATE_EPOCH", 253_402_300_799, "the creation time, in seconds since 1970"),
    )
}


def environment_int(name: str) -> int | None:
    """The value of the numeric environment variable ``name``; ``None`` when unset or empty.

    Raises:
        EnvironmentValueError: the value is not ASCII digits up to the variable's maximum.
    """
    variable = NUMERIC_VARIABLES[name]
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    value = parse_int(raw.strip(), max_digits=len(str(variable.maximum)))
    if value is None or value > variable.maximum:
        shown = raw if len(raw) <= 40 else raw[:39] + "…"
        raise EnvironmentValueError(
            f"environment variable {name}={shown!r}: expected {variable.meaning}, "
            f"a whole number from 0 to {variable.maximum} in ASCII digits"
        )
    return value


def check_environment() -> None:
    """Check every numeric environment variable.

    Raises:
        EnvironmentValueError: the first one whose value cannot be used.
    """
    for name in NUMERIC_VARIABLES:
        environment_int(name)
