"""The local Hugging Face cache, read without the network: where a pinned repository's
snapshot is, which commits its branch names point at, and what to run when it is missing.

The cache layout (``huggingface_hub``'s, under ``HF_HUB_CACHE``)::

    models--<org>--<name>/                 datasets--<org>--<name>/ for a dataset
        refs/main                          the commit hash the branch "main" had when fetched
        snapshots/<40-hex commit>/...      the repository's files at that commit

``huggingface_hub`` is imported only where a snapshot is fetched; the cache folder and the
refs are read here directly, so the hints need no optional package.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

__all__ = ["RepoType", "cache_root", "cached_commits", "download_advice", "offline", "repo_folder"]

RepoType = Literal["model", "dataset"]

_COMMIT = re.compile(r"[0-9a-f]{40}")
_TRUE = {"1", "ON", "YES", "TRUE"}


def cache_root() -> Path:
    """The hub cache folder: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
    ``~/.cache/huggingface/hub`` (as ``huggingface_hub`` resolves it)."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def offline() -> bool:
    """Whether the environment forbids reaching the hub (``HF_HUB_OFFLINE``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE


def repo_folder(repo_id: str, repo_type: RepoType = "model") -> Path:
    """The cache folder of ``repo_id`` (which may not exist)."""
    return cache_root() / f"{repo_type}s--{repo_id.replace('/', '--')}"


def cached_commits(repo_id: str, repo_type: RepoType = "model") -> dict[str, str]:
    """The commits of ``repo_id`` in the cache: branch or tag name → 40-hex commit, from
    ``refs/``, plus each snapshot folder's commit under its own hash (so a snapshot fetched by
    hash is listed too). Empty when the repository is not cached."""
    folder = repo_folder(repo_id, repo_type)
    found: dict[str, str] = {}
    refs = folder / "refs"
    if refs.is_dir():
        for ref in sorted(refs.rglob("*")):
            if not ref.is_file() or ref.stat().st_size > 256:
                continue
            commit = ref.read_text(encoding="ascii", errors="replace").strip()
            if _COMMIT.fullmatch(commit):
                found[ref.relative_to(refs).as_posix()] = commit
    snapshots = folder / "snapshots"
    if snapshots.is_dir():
        for snapshot in sorted(snapshots.iterdir()):
            if snapshot.is_dir() and _COMMIT.fullmatch(snapshot.name):
                found.setdefault(snapshot.name, snapshot.name)
    return found


def download_advice(repo_id: str, revision: str | None, repo_type: RepoType = "model") -> str:
    """What to run, on a machine that can reach the hub, to put ``repo_id`` at ``revision``
    into the cache this process reads."""
    kind = " --repo-type dataset" if repo_type == "dataset" else ""
    at = f" --revision {revision}" if revision else ""
    return (
        f"fetch it with `hf download {repo_id}{kind}{at}` (huggingface_hub's command line) on a "
        f"machine that can reach the hub and copy {repo_folder(repo_id, repo_type).name}/ into "
        f"{cache_root()} (HF_HUB_CACHE)"
    )


def revision_hint(repo_id: str, repo_type: RepoType = "model") -> str:
    """Where to find the commit to pin ``repo_id`` to: the hash the local cache holds for its
    ``main`` branch when there is one, else the repository's commit list on the hub."""
    commits = cached_commits(repo_id, repo_type)
    if "main" in commits:
        return f"the local Hugging Face cache holds {repo_id} at commit {commits['main']} (refs/main)"
    if commits:
        listed = ", ".join(sorted(set(commits.values())))
        return f"the local Hugging Face cache holds {repo_id} at {listed}"
    prefix = "datasets/" if repo_type == "dataset" else ""
    return f"the commit list is at https://huggingface.co/{prefix}{repo_id}/commits/main"
