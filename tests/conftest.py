"""Shared fixtures: a runner for the command line, paths to the repository's data."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: The conformance suite of spec 1.0, read from the repository.
CONFORMANCE = REPO / "conformance" / "v1"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing in the test suite may reach a model hub.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


CliRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def mibspec_cli() -> CliRun:
    """Run ``python -m mibspec ARGS`` in a fresh process (exit codes, stdout, stderr)."""

    def run(
        *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
        # Run outside the source tree so `-m mibspec` imports the installed package.
        return subprocess.run(
            [sys.executable, "-m", "mibspec", *args],
            capture_output=True,
            text=True,
            cwd=cwd or tempfile.gettempdir(),
            env=full_env,
            timeout=600,
            check=False,
        )

    return run
