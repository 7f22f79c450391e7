"""The recompute context (``mibspec.core.recompute_context``): a protocol mypy checks, with
exactly what recomputers read, and the validator's rule context is one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mibspec.core.comparisons import Recomputation, produced_before
from mibspec.core.recompute_context import RecomputeContext

REPO = Path(__file__).resolve().parents[2]

#: What a recomputer may read, and nothing else (a new member is a decision, made here too).
MEMBERS = {
    "data",
    "folder",
    "profile",
    "artifacts",
    "broken_artifacts",
    "limits",
    "model_roots",
    "device",
    "batch_size",
    "session",
    "finding",
    "load_json",
}

_SNIPPET = """
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.strict_json import DEFAULT_LIMITS, Limits, ParsedDocument


class Complete:
    data: dict[str, Any] = {}
    folder: Path = Path()
    profile: Mapping[str, Any] = {}
    artifacts: Mapping[str, Mapping[str, Any]] = {}
    broken_artifacts: AbstractSet[str] = frozenset()
    limits: Limits = DEFAULT_LIMITS
    model_roots: Sequence[Path] = ()
    device: str = "cpu"
    batch_size: int | str | None = None
    session: object | None = None

    def finding(
        self, code: str, pointer: str = "", /, *, hint: str | None = None,
        data: dict[str, Any] | None = None, **params: Any,
    ) -> Finding:
        raise NotImplementedError

    def load_json(self, path: Path) -> ParsedDocument:
        raise NotImplementedError


class WithoutDevice:
    data: dict[str, Any] = {}
    folder: Path = Path()


class WrongDevice(Complete):
    device: int = 0  # type: ignore[assignment]


def accepted() -> RecomputeContext:
    return Complete()


def refused() -> RecomputeContext:
    return WithoutDevice()  # refused


def mistyped() -> RecomputeContext:
    return WrongDevice()  # refused
"""


def test_the_protocol_names_exactly_what_recomputers_read() -> None:
    declared = {name for name in vars(RecomputeContext) if not name.startswith("_")}
    assert declared == MEMBERS


@pytest.mark.slow  # mypy from a cold cache: about 45 s of CPU (a few with the checkout's cache)
def test_mypy_accepts_a_complete_context_and_refuses_others(tmp_path: Path) -> None:
    """Run as ``.ci/run`` runs mypy (the project's configuration), on a module using the protocol.

    The checkout's own mypy cache (``.ci/run`` type-checks the package before the tests) is
    copied in when there is one: mypy checks each cached module against its source, so a
    stale entry is re-analysed, and the checkout's cache is never written."""
    cache = REPO / ".mypy_cache"
    if cache.is_dir():
        shutil.copytree(cache, tmp_path / "cache")
    snippet = tmp_path / "snippet.py"
    text = textwrap.dedent(_SNIPPET).lstrip()
    snippet.write_text(text, encoding="utf-8")
    refused = [str(n) for n, line in enumerate(text.splitlines(), 1) if line.endswith("# refused")]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(snippet),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={"MYPYPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == refused, done.stdout + done.stderr
    assert all('expected "RecomputeContext"' in line for line in errors), errors


def test_a_stopped_recomputation_hands_over_what_it_produced() -> None:
    out = Recomputation()
    try:
        with out.until_stopped():
            out.model_files.append("config.json")
            raise MemoryError
    except MemoryError as exc:
        stopped: Any = exc
    assert produced_before(stopped) is out
    assert produced_before(KeyboardInterrupt()).model_files == []  # nothing was said
