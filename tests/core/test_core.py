"""The shared core: file hashes, pointers, tolerances, progress and spec constants."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

import mibspec
from mibspec import documents
from mibspec.core import (
    KINDS,
    SPEC_VERSION,
    Comparison,
    escape_pointer_token,
    join_pointer,
    load_profile,
    recompute_tolerance,
    sha256_file,
    spec_dir,
    start_task,
    within,
)


def test_sha256_file_reads_in_blocks_and_matches_hashlib(tmp_path: Path) -> None:
    data = bytes(range(256)) * 9000  # over two 1 MiB blocks, not a multiple of one
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert sha256_file(empty) == hashlib.sha256(b"").hexdigest()
    with pytest.raises(FileNotFoundError):
        sha256_file(tmp_path / "missing")


def test_pointer_tokens_are_escaped_tilde_first() -> None:
    assert escape_pointer_token("~1") == "~01"  # "~" first, or "~1" would read back as "/"
    assert join_pointer(["a/b", 0, "~"]) == "/a~1b/0/~0"
    assert join_pointer([]) == ""
    assert join_pointer(["x"], base="/claims") == "/claims/x"


def test_within_is_abs_plus_rel_of_the_recomputed_value() -> None:
    # Binary fractions, so that the boundary is exact.
    assert within(1.25, 1.0, 0.125, 0.125)  # |0.25| ≤ 0.125 + 0.125·1
    assert not within(1.25 + 2**-20, 1.0, 0.125, 0.125)
    assert within(-2.0, -3.0, 0.0, 0.375)  # the relative part scales with |recomputed|: 1.125
    assert not within(-3.0, -2.0, 0.0, 0.375)  # here it is 0.75


def test_comparison_uses_the_same_tolerance_and_handles_non_finite_values() -> None:
    c = Comparison("/x", "x", 1.25, 1.0, 0.125, 0.125)
    assert c.within
    assert c.tolerance == 0.25
    assert not Comparison("/x", "x", 1.5, 1.0, 0.125, 0.125).within
    assert Comparison("/x", "x", None, 1.0, 0.0, 0.0).within  # shown for information only
    assert Comparison("/x", "x", math.inf, math.inf, 0.0, 0.0).within
    assert not Comparison("/x", "x", math.nan, math.nan, 1.0, 1.0).within
    assert json.loads(json.dumps(c.to_json()))["within"] is True


def test_recompute_tolerance_falls_back_to_float32() -> None:
    profile = load_profile("default")
    table = profile["recompute"]
    assert recompute_tolerance(profile, "float32") == (table["float32"]["abs"], table["float32"]["rel"])
    assert recompute_tolerance(profile, "no-such-dtype") == recompute_tolerance(profile, "float32")


class _Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def start(self, description: str, total: int) -> None:
        self.events.append(("start", (description, total)))

    def advance(self, steps: int = 1) -> None:
        self.events.append(("advance", steps))


def test_task_turns_steps_done_so_far_into_advances() -> None:
    log = _Log()
    advance_to = start_task(log, "examples", 10)
    for done in (3, 3, 7, 10):
        advance_to(done)
    assert log.events == [
        ("start", ("examples", 10)),
        ("advance", 3),
        ("advance", 0),
        ("advance", 4),
        ("advance", 3),
    ]
    start_task(None, "nowhere", 5)(5)  # no progress: nothing to call, nothing raised


def test_spec_constants_are_the_ones_the_package_and_the_models_use() -> None:
    assert mibspec.SPEC_VERSION == documents.SPEC_VERSION == SPEC_VERSION
    assert (spec_dir() / "rules.json").is_file()
    kinds = {path.stem.removesuffix(".schema") for path in (spec_dir() / "schemas").glob("*.schema.json")}
    assert set(KINDS) <= kinds
    assert tuple(documents.KINDS) == KINDS  # the typed models cover every kind, in the spec's order
