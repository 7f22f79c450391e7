"""A restricted unpickler for the results files MIB's circuit-track evaluator writes.

``run_evaluation.py`` pickles a dict of lists and floats. A pickle can name any
importable callable and have it called while it is read; this unpickler resolves only
the few names that rebuild numpy arrays and numpy scalars, and refuses every other
name before it is imported, so a pickle that would run code fails and nothing runs.
Plain containers, strings, numbers, booleans and ``None`` need no name at all.

Sizes are bounded by the file: numpy pickles an array as an empty array rebuilt by
``_reconstruct(ndarray, (0,), b'b')``, then filled from bytes the file holds (its state).
``ndarray`` itself is never called (``ndarray((10**9,))`` would allocate what the file
claims), and ``_reconstruct`` is called only with those arguments; anything else is refused.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

__all__ = ["MAX_PICKLE_BYTES", "UnsafePickleError", "load_results_pickle"]

#: A results file holds a few dozen numbers; anything far larger is not one.
MAX_PICKLE_BYTES = 64 * 1024 * 1024

_ALLOWED = {
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
}
_RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}
_NUMERIC_KINDS = set("biufc")


class UnsafePickleError(Exception):
    """The pickle is refused (I109): what it needed that is not allowed."""


class _ArrayType:
    """What the pickle gets for ``numpy.ndarray``: an argument of ``_reconstruct``, never called."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsafePickleError(
            "the pickle calls numpy.ndarray directly (an array of any claimed size); "
            "refused, nothing was allocated"
        )


_ARRAY = _ArrayType()


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> Any:
    """numpy's ``_reconstruct`` with the only arguments numpy's pickles give it: an empty array."""
    import numpy as np

    if subtype is not _ARRAY or shape != (0,) or dtype != b"b":
        raise UnsafePickleError(
            "the pickle rebuilds an array otherwise than numpy pickles one; refused, nothing was allocated"
        )
    return np.empty((0,), dtype=np.int8)


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("numpy", "ndarray"):
            return _ARRAY
        if (module, name) in _RECONSTRUCT:
            return _reconstruct
        if (module, name) not in _ALLOWED:
            raise UnsafePickleError(
                f"the pickle needs {module}.{name}, which a results file never needs; "
                "refused, nothing was run"
            )
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("the pickle refers to persistent objects; refused, nothing was run")


def _check(value: Any, depth: int = 0) -> None:
    import numpy as np

    if depth > 64:
        raise UnsafePickleError("the pickle nests containers more than 64 deep")
    if isinstance(value, dict):
        for key, item in value.items():
            _check(key, depth + 1)
            _check(item, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _check(item, depth + 1)
    elif isinstance(value, np.ndarray | np.generic):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise UnsafePickleError(f"the pickle holds a numpy array of dtype {value.dtype}, not of numbers")
    elif value is not None and not isinstance(value, (str, bytes, int, float, complex, bool)):
        raise UnsafePickleError(f"the pickle holds a {type(value).__name__}")


def load_results_pickle(path: Path) -> Any:
    """The plain data in ``path``.

    Raises:
        UnsafePickleError: the file is too large, is not a pickle, or needs anything but
            containers, strings, numbers and numpy arrays of numbers.
    """
    size = path.stat().st_size
    if size > MAX_PICKLE_BYTES:
        raise UnsafePickleError(f"{size} bytes, over the limit of {MAX_PICKLE_BYTES} for a results file")
    data = path.read_bytes()
    try:
        value = _Restricted(io.BytesIO(data)).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # a malformed pickle is a property of the input
        raise UnsafePickleError(f"not a readable pickle: {type(exc).__name__}: {exc}") from None
    _check(value)
    return value
