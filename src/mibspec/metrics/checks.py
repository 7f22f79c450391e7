"""Input validation shared by the metric modules.

Every check raises ``ValueError`` whose message names the argument, what was
expected and what was received, so a caller (the validator in particular) can
surface the message unchanged.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "as_bool_array",
    "as_float_array",
    "check_choice",
    "check_finite_scalar",
    "check_int",
    "describe",
]


def describe(value: Any) -> str:
    """Short description of a received value for error messages."""
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def check_finite_scalar(value: Any, name: str) -> float:
    """Return ``value`` as a finite Python float.

    Raises:
        ValueError: if ``value`` is not a real number (bools excluded) or is not finite.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a finite real number; got {describe(value)}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be a finite real number; got {result!r}")
    return result


def check_int(value: Any, name: str, *, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as a Python int inside ``[minimum, maximum]``.

    Raises:
        ValueError: if ``value`` is not an integer (bools excluded) or is out of range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer; got {describe(value)}")
    result = int(value)
    if result < minimum or (maximum is not None and result > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be an integer >= {minimum}{upper}; got {result}")
    return result


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        ValueError: otherwise.
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {describe(value)}")
    return value


def as_float_array(
    value: Any,
    name: str,
    *,
    ndim: int | None = None,
    allow_empty: bool = False,
) -> NDArray[np.float64]:
    """Convert ``value`` to a float64 array of finite numbers.

    Args:
        value: array-like of real numbers (bools are rejected).
        name: argument name for error messages.
        ndim: required number of dimensions, or None for any.
        allow_empty: whether a zero-size array is accepted.

    Raises:
        ValueError: on non-numeric or boolean input, wrong ``ndim``, emptiness, or
            non-finite entries (NaN or infinity).
    """
    array = np.asarray(value)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise ValueError(f"{name} must be an array of real numbers; got {describe(array)}")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array; got {describe(array)}")
    if not allow_empty and array.size == 0:
        raise ValueError(f"{name} must not be empty; got {describe(array)}")
    result = array.astype(np.float64)
    finite = np.isfinite(result)
    if not finite.all():
        bad = int(np.flatnonzero(~finite.ravel())[0])
        raise ValueError(
            f"{name} must contain only finite values; got {result.ravel()[bad]!r} at flat index {bad}"
        )
    return result


def as_bool_array(value: Any, name: str, *, shape: tuple[int, ...] | None = None) -> NDArray[np.bool_]:
    """Convert ``value`` to a boolean array.

    Boolean arrays are taken as they are; integer arrays are accepted when every
    entry is 0 or 1. Floats are rejected so that scores are never mistaken for a mask.

    Raises:
        ValueError: on any other dtype, on integers outside {0, 1}, or on a shape
            different from ``shape``.
    """
    array = np.asarray(value)
    if array.size == 0 and array.dtype.kind in "iuf":
        # an empty list converts to float64; it holds no value that could be a score
        array = array.astype(np.bool_)
    if array.dtype != np.bool_:
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"{name} must be a boolean array; got {describe(array)}")
        if array.size and not np.isin(array, (0, 1)).all():
            raise ValueError(f"{name} must be a boolean array (integers 0/1 accepted); got other integers")
        array = array.astype(np.bool_)
    if shape is not None and array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}; got shape {array.shape}")
    return array
