"""The ``mibspec-verify`` pre-commit hook, run by the real ``pre-commit`` tool.

A snapshot of this source tree is committed in a temporary git repository (the main
repository's git state is never touched); a second temporary repository uses it as its
hook repository, pinned to that commit. pre-commit installs mibspec from the snapshot
into its own environment (from the package index, so this is slow) and runs the hook on
a conformant report, a broken report, and a JSON file the hook must not receive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
#: What `pip install` needs from the tree, and the hook definition.
SNAPSHOT_FILES = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml")
SNAPSHOT_DIRS = ("src", "spec")


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        [
            "git",
            "-c",
            "user.name=mibspec tests",
            "-c",
            "user.email=tests@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def _snapshot(target: Path) -> str:
    """Copy the package sources into ``target``, commit them there, return the commit."""
    target.mkdir()
    for name in SNAPSHOT_FILES:
        shutil.copy2(REPO / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SNAPSHOT_DIRS:
        shutil.copytree(REPO / name, target / name, ignore=ignore)
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "snapshot of the working tree")
    return _git(target, "rev-parse", "HEAD")


def _pre_commit(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--color", "never", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


def test_hook_definition() -> None:
    [hook] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "mibspec-verify"
    assert hook["pass_filenames"] is True
    assert hook["language"] == "python"
    assert hook["entry"].split()[:2] == ["mibspec", "verify"]


@pytest.mark.slow
def test_pre_commit_runs_the_hook(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    rev = _snapshot(tmp_path / "hooks")
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    _git(consumer, "init", "-q")
    config = {"repos": [{"repo": str(tmp_path / "hooks"), "rev": rev, "hooks": [{"id": "mibspec-verify"}]}]}
    (consumer / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    (consumer / "good").mkdir()
    shutil.copy(REPO / "examples" / "causal_bench" / "report.json", consumer / "good" / "report.json")
    (consumer / "bad").mkdir()
    (consumer / "bad" / "run.report.json").write_text(
        '{"spec_version": "1.0", "kind": "report"}\n', encoding="utf-8"
    )
    (consumer / "notes.json").write_text("{not json", encoding="utf-8")  # not a report: never passed
    _git(consumer, "add", "-A")
    home = tmp_path / "pre-commit-home"

    good = _pre_commit(consumer, home, "mibspec-verify", "--files", "good/report.json", "notes.json")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    everything = _pre_commit(consumer, home, "--all-files")
    assert everything.returncode == 1, everything.stdout + everything.stderr
    assert "Failed" in everything.stdout
    assert "bad/run.report.json" in everything.stdout
    assert "S111" in everything.stdout
    assert "notes.json" not in everything.stdout
    assert "good/report.json report: conformant" in everything.stdout  # both reports were passed
