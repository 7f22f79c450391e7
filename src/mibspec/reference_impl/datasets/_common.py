"""Shared plumbing of the generators: splits, seeded RNGs, row assembly, JSON Lines I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mibspec.core.strict_json import JsonLinesError, read_json_lines

__all__: list[str] = []

T = TypeVar("T")

SPLITS: tuple[str, ...] = ("train", "validation", "test")

#: Fractions of every attribute list assigned to train, validation and test.
SPLIT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)

#: Seed of the fixed permutation that assigns attributes to splits. It is a constant, not
#: the generator seed, so that every seed sees the same attribute partition (and a
#: tokenizer built once covers every seed).
PARTITION_SEED = 20250

# Stream identifiers mixed into the seed so that tasks and splits draw independent streams.
_TASK_CODES = {"ioi": 1, "arithmetic": 2, "mcqa": 3, "ravel": 4}
_SPLIT_CODES = {"train": 1, "validation": 2, "test": 3}

GENERATOR_VERSION = "1.0.0"


@dataclass(frozen=True)
class Dataset:
    """Generated rows and the metadata that describes how they were made.

    Attributes:
        rows: one dict per example, in the JSON Lines row format of ``spec/v1/datasets.md``.
        metadata: ``task``, ``split``, ``generator``, ``counterfactual_types``,
            ``variables``, ``filters`` and ``rows`` (the row count).
    """

    rows: tuple[dict[str, Any], ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_jsonl(self) -> str:
        """The rows as canonical JSON Lines (see :func:`dumps_jsonl`)."""
        return dumps_jsonl(self.rows)


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {list(SPLITS)}, got {split!r}")
    return split


def check_count(name: str, value: int, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
        raise ValueError(f"seed: expected an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def split_rng(seed: int, task: str, split: str) -> np.random.Generator:
    """A local generator for one (seed, task, split) stream; never touches global state."""
    return np.random.default_rng([check_seed(seed), _TASK_CODES[task], _SPLIT_CODES[check_split(split)]])


def partition(items: Sequence[T], split: str) -> tuple[T, ...]:
    """The items assigned to ``split`` by the fixed partition.

    A permutation drawn from ``PARTITION_SEED`` orders the items; the first 80 % go to
    train, the next 10 % to validation, the rest to test. The three parts are disjoint and
    cover ``items``; the order inside a part is the original list order.
    """
    check_split(split)
    n = len(items)
    order = np.random.default_rng(PARTITION_SEED).permutation(n)
    n_train = math.floor(SPLIT_FRACTIONS[0] * n)
    n_validation = math.floor(SPLIT_FRACTIONS[1] * n)
    bounds = {
        "train": (0, n_train),
        "validation": (n_train, n_train + n_validation),
        "test": (n_train + n_validation, n),
    }
    lo, hi = bounds[split]
    chosen = sorted(int(i) for i in order[lo:hi])
    return tuple(items[i] for i in chosen)


def pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


def pick_distinct(
    rng: np.random.Generator, items: Sequence[T], k: int, *, exclude: Iterable[T] = ()
) -> list[T]:
    """``k`` distinct items in random order, none of them in ``exclude``."""
    banned = set(exclude)
    pool = [item for item in items if item not in banned]
    if len(pool) < k:
        raise ValueError(
            f"items: expected at least {k} candidates outside {sorted(map(str, banned))}, got {len(pool)}"
        )
    return [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]


def fill(template: str, slots: Mapping[str, Any]) -> str:
    """``template.format(**slots)`` with a clear error for a missing slot."""
    try:
        return template.format(**slots)
    except KeyError as err:
        raise ValueError(
            f"slots: template {template!r} needs slot {err.args[0]!r}, got {sorted(slots)}"
        ) from err


def prompt_object(
    template: str,
    slots: Mapping[str, Any],
    run_model: Callable[[Mapping[str, Any]], dict[str, Any]],
    variable_names: Sequence[str],
) -> dict[str, Any]:
    """One prompt of a row: text, expected continuation, causal variables, slots, template.

    ``answer`` and ``variables`` come from running the task's causal model on the slots,
    so they are derived, not written by hand.
    """
    values = run_model(slots)
    return {
        "prompt": fill(template, slots),
        "answer": values["output"],
        "variables": {name: values[name] for name in variable_names},
        "slots": {key: str(value) for key, value in slots.items()},
        "template": template,
    }


def build_row(
    task: str,
    split: str,
    index: int,
    base: dict[str, Any],
    counterfactuals: dict[str, dict[str, Any]],
    interchange: Callable[[Mapping[str, Any], Mapping[str, Any], str], str | None],
    intervened_variables: Sequence[str],
) -> dict[str, Any]:
    """Assemble a row, deriving ``interventions`` from the causal model.

    A variable is left out of ``interventions[t]`` when the causal model gives no output
    for it (for example the IOI ``abc`` counterfactual, whose output position is undefined).
    """
    interventions: dict[str, dict[str, str]] = {}
    for cf_type, cf in counterfactuals.items():
        expected: dict[str, str] = {}
        for variable in intervened_variables:
            value = interchange(base["slots"], cf["slots"], variable)
            if value is not None:
                expected[variable] = value
        interventions[cf_type] = expected
    return {
        "id": f"{task}-{split}-{index:06d}",
        "base": base,
        "counterfactuals": counterfactuals,
        "interventions": interventions,
    }


def metadata(
    task: str,
    split: str,
    seed: int,
    parameters: dict[str, Any],
    counterfactual_types: Sequence[str],
    variables: Sequence[str],
    n_rows: int,
) -> dict[str, Any]:
    return {
        "task": task,
        "split": split,
        "generator": {
            "name": f"mibspec.datasets.{task}",
            "version": GENERATOR_VERSION,
            "seed": seed,
            "parameters": {
                "partition_seed": PARTITION_SEED,
                "split_fractions": list(SPLIT_FRACTIONS),
                **parameters,
            },
        },
        "counterfactual_types": list(counterfactual_types),
        "variables": list(variables),
        "filters": [],
        "rows": n_rows,
    }


def dumps_row(row: Mapping[str, Any]) -> str:
    """One row as canonical JSON: sorted keys, no whitespace, UTF-8 text, NaN rejected."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps_jsonl(rows: Iterable[Mapping[str, Any]]) -> str:
    """Rows as JSON Lines: one canonical row per line, each line ending in ``\\n``."""
    return "".join(dumps_row(row) + "\n" for row in rows)


def dumps_metadata(meta: Mapping[str, Any]) -> str:
    return json.dumps(meta, sort_keys=True, ensure_ascii=False, allow_nan=False, indent=2) + "\n"


def write_dataset(dataset: Dataset, folder: str | Path, stem: str | None = None) -> tuple[Path, Path]:
    """Write ``<stem>.jsonl`` and ``<stem>.meta.json`` into ``folder``.

    Args:
        dataset: rows and metadata.
        folder: created if missing.
        stem: file name stem; defaults to the split name.

    Returns:
        The paths of the JSON Lines file and of the metadata file.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    name = stem or str(dataset.metadata.get("split", "rows"))
    rows_path = out / f"{name}.jsonl"
    meta_path = out / f"{name}.meta.json"
    # newline="" keeps "\n" line ends on every platform (byte-identical files).
    with rows_path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(dataset.to_jsonl())
    with meta_path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(dumps_metadata(dataset.metadata))
    return rows_path, meta_path


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read rows written by :func:`write_dataset`, each parsed as strictly as a document
    (unique keys, finite numbers, no unpaired surrogates)."""
    with Path(path).open("rb") as handle:
        try:
            rows = [row for _, row in read_json_lines(handle)]
        except JsonLinesError as exc:
            raise ValueError(f"rows: expected a strict JSON object on every line of {path}: {exc}") from exc
        if handle.tell() > 0:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                raise ValueError(f"path: expected every line of {path} to end in '\\n', the last does not")
    return rows
