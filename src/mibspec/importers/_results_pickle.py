"""The results file MIB's circuit-track evaluator writes, read through the restricted unpickler.

``run_evaluation.py`` pickles, per task and model, a dict of plain Python numbers
(``weighted_edge_counts`` and ``faithfulnesses``: lists of floats over the grid; ``area_under``,
``area_from_1``, ``average``: floats) to ``<task>_<model>_<split>_abs-<True|False>.pkl``, the
task spelled with ``-`` for ``_``. The file carries no task, model or split: its name does.
``abs-False`` is the curve of circuits ranked by signed score (CPR), ``abs-True`` by |score| (CMD).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mibspec.validator import load_profile

from ._safe_pickle import UnsafePickleError, load_results_pickle
from .eap_ig import _MalformedError

__all__ = ["RESULTS_PATTERN", "ResultsName", "read_results", "results_name"]

RESULTS_PATTERN = "<task>_<model>_<split>_abs-<True|False>.pkl"
_RESULTS = re.compile(r"^(?P<name>.+)_(?P<split>train|validation|test)_abs-(?P<abs>True|False)\.pkl$")
_KEYS = ("weighted_edge_counts", "faithfulnesses", "area_under", "area_from_1")


@dataclass(frozen=True)
class ResultsName:
    """What a results file's name says: its folder name ``<task>_<model>``, split and ranking."""

    folder: str
    split: str
    ranking: str

    @property
    def task(self) -> str:
        return self.folder.split("_")[0]

    @property
    def model(self) -> str:
        return self.folder.split("_")[-1]


def results_name(name: str) -> ResultsName | None:
    """The parts of a results file's name, or ``None`` when it is not named as MIB names one
    (``<task>_<model>`` being two non-empty parts)."""
    match = _RESULTS.match(name)
    if match is None:
        return None
    parts = match["name"].split("_")
    if len(parts) != 2 or not all(parts):
        return None
    return ResultsName(match["name"], match["split"], "absolute" if match["abs"] == "True" else "signed")


def read_results(file: Path) -> dict[str, Any]:
    """The curve and areas of the results file ``file``: ``weighted_edge_counts`` and
    ``faithfulnesses`` as lists of floats over the ``mib-2025`` grid, ``area_under`` and
    ``area_from_1`` as floats.

    Raises:
        _MalformedError: I109 for a pickle the restricted unpickler refuses, I101 for another
            structure, I112 for a curve over another grid (``_file`` names ``file``).
    """
    try:
        data = load_results_pickle(file)
    except UnsafePickleError as exc:
        raise _MalformedError("I109", "", detail=str(exc), _file=file) from None
    except OSError as exc:
        raise _MalformedError("I101", "", detail=f"cannot be read: {exc.strerror}", _file=file) from None
    if isinstance(data, dict) and "TPR" in data and "faithfulnesses" not in data:
        raise _MalformedError(
            "I101",
            "",
            detail="an InterpBench AUROC results file (TPR, FPR); only faithfulness results "
            "(CPR, CMD) become reports",
            _file=file,
        )
    if not isinstance(data, dict) or not all(k in data for k in _KEYS):
        raise _MalformedError(
            "I101", "", detail=f"a results file is a dict with {', '.join(_KEYS)}", _file=file
        )
    return {key: _numbers(data[key], key, file) for key in _KEYS}


def _numbers(value: Any, key: str, file: Path) -> Any:
    import numpy as np

    grid = load_profile("mib-2025").grid
    listed = key in _KEYS[:2]
    if listed:
        if not isinstance(value, (list, tuple)) and not (isinstance(value, np.ndarray) and value.ndim == 1):
            raise _MalformedError("I101", "", detail=f"{key} must be a list of numbers", _file=file)
        if len(value) != len(grid):  # before an array is turned into Python numbers
            raise _MalformedError(
                "I112", "", detail=f"{key} has {len(value)} values for a grid of {len(grid)}", _file=file
            )
        items = value.tolist() if isinstance(value, np.ndarray) else list(value)
    else:
        items = [value]
    items = [v.item() if isinstance(v, np.generic) else v for v in items]
    # an integer beyond the float range (10**400) is not a finite number either
    numbers = [
        float(v)
        for v in items
        if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= sys.float_info.max
    ]
    if len(numbers) != len(items) or not all(math.isfinite(v) for v in numbers):
        raise _MalformedError("I101", "", detail=f"{key} must hold finite numbers", _file=file)
    if key == _KEYS[0] and any(number < 0 for number in numbers):
        raise _MalformedError("I101", "", detail=f"{key} must not be negative", _file=file)
    return numbers if listed else numbers[0]
