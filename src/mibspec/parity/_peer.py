"""Finding the public MIB code and its own environment, and running the peer driver in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = [
    "PEERS_ENV",
    "PEER_ENV_DIR_ENV",
    "PEER_PYTHON_ENV",
    "PEER_REQUIREMENTS",
    "PeerResult",
    "PeerUnavailableError",
    "build_peer_env",
    "default_env_dir",
    "find_peers",
    "peer_python",
    "run_peer",
]

PEERS_ENV = "MIBSPEC_PEERS"
PEER_PYTHON_ENV = "MIBSPEC_PEER_PYTHON"
PEER_ENV_DIR_ENV = "MIBSPEC_PEER_ENV"
# Installed in two steps: torch first (its CPU wheel), then the rest against it.
PEER_REQUIREMENTS: tuple[tuple[str, ...], ...] = (
    ("torch==2.13.0",),
    ("transformer-lens==2.18.0", "transformers==4.57.6", "numpy==1.26.4", "pyarrow==21.0.0", "matplotlib"),
)
_MARKERS = ("eap-ig/src/eap/evaluate.py", "mib-circuit-track/MIB_circuit_track/evaluation.py")
DRIVER = Path(__file__).with_name("_peer_driver.py")


class PeerUnavailableError(RuntimeError):
    """The public code or its environment is not there; the message says what to do."""


def _repo_default() -> Path | None:
    """``../shared/peers`` beside the source checkout this package runs from (the folder
    holding ``pyproject.toml`` and ``src/mibspec``), or ``None`` for an installed package.

    Only that one path: no folder above it is searched, so a ``shared/peers`` planted higher
    up is never run.
    """
    repo = Path(__file__).resolve().parents[3]
    if (repo / "pyproject.toml").is_file() and (repo / "src" / "mibspec").is_dir():
        return repo.parent / "shared" / "peers"
    return None


def find_peers(explicit: str | Path | None = None) -> Path:
    """The folder holding ``eap-ig/`` and ``mib-circuit-track/``: ``explicit``, else
    ``$MIBSPEC_PEERS``, else ``../shared/peers`` beside the source checkout (never a folder
    found by searching upwards).

    Raises:
        PeerUnavailableError: the folder does not hold the public code, or none was given
            and mibspec does not run from a source checkout.
    """
    if explicit:
        folder: Path | None = Path(explicit)
    elif os.environ.get(PEERS_ENV):
        folder = Path(os.environ[PEERS_ENV])
    else:
        folder = _repo_default()
    if folder is not None and all((folder / marker).is_file() for marker in _MARKERS):
        return folder.resolve()
    where = f"at {folder}" if folder is not None else "(no location given)"
    raise PeerUnavailableError(
        f"the public MIB code was not found {where} (set {PEERS_ENV} or pass --peer to a "
        "folder holding eap-ig/ and mib-circuit-track/)"
    )


def default_env_dir() -> Path:
    """``$MIBSPEC_PEER_ENV``, else ``$XDG_CACHE_HOME/mibspec/peer-env`` (``~/.cache`` by default)."""
    if os.environ.get(PEER_ENV_DIR_ENV):
        return Path(os.environ[PEER_ENV_DIR_ENV])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mibspec" / "peer-env"


def _works(python: Path) -> bool:
    if not python.is_file():
        return False
    probe = [str(python), "-c", "import transformer_lens, transformers, torch, einops"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=600, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def build_peer_env(env_dir: Path, log: Any = None) -> Path:
    """Create the public code's virtual environment at ``env_dir`` (minutes: it downloads
    torch and TransformerLens) and return its Python.

    Raises:
        PeerUnavailableError: a step failed; the message names it.
    """
    out = log if log is not None else sys.stderr
    python = env_dir / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", str(env_dir)]]
    steps += [[str(python), "-m", "pip", "install", "--quiet", *group] for group in PEER_REQUIREMENTS]
    for step in steps:
        print("  $ " + " ".join(step), file=out, flush=True)
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PeerUnavailableError(
                f"building the peer environment failed at {' '.join(step)}:\n{done.stderr}"
            )
    return python


def peer_python(*, build: bool = False, env_dir: Path | None = None) -> Path:
    """The Python of the public code's environment: ``$MIBSPEC_PEER_PYTHON``, else the
    environment at ``env_dir`` (:func:`default_env_dir`), built there first when ``build``.

    Raises:
        PeerUnavailableError: no working environment (and ``build`` is false or failed).
    """
    if os.environ.get(PEER_PYTHON_ENV):
        python = Path(os.environ[PEER_PYTHON_ENV])
        if _works(python):
            return python
        raise PeerUnavailableError(
            f"{PEER_PYTHON_ENV}={python} cannot import transformer_lens, transformers and torch"
        )
    folder = env_dir or default_env_dir()
    python = folder / "bin" / "python"
    if _works(python):
        return python
    if build:
        python = build_peer_env(folder)
        if _works(python):
            return python
    raise PeerUnavailableError(
        f"no environment for the public code at {folder} (build it with `python benchmarks/parity/"
        f"run_parity.py --build-env`, or point {PEER_PYTHON_ENV} at a Python with "
        + ", ".join(p for group in PEER_REQUIREMENTS for p in group)
        + ")"
    )


class PeerResult(dict):  # type: ignore[type-arg]
    """The driver's ``result.json`` plus ``logits`` (a numpy array) when it wrote them."""


def run_peer(python: Path, job: dict[str, Any], *, timeout: float = 3600.0) -> PeerResult:
    """Run the peer driver on ``job`` in a fresh temporary folder and read its results.

    Raises:
        PeerUnavailableError: the driver failed (its stderr is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="mibspec-parity-") as tmp:
        folder = Path(tmp)
        (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(
            {
                "OMP_NUM_THREADS": str(job.get("threads", 1)),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "TQDM_DISABLE": "1",
            }
        )
        start = time.perf_counter()
        done = subprocess.run(
            [str(python), str(DRIVER), str(folder)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise PeerUnavailableError(
                f"the public code failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
            )
        result = PeerResult(json.loads((folder / "result.json").read_text(encoding="utf-8")))
        result["wall_seconds"] = time.perf_counter() - start
        logits = folder / "logits.safetensors"
        if logits.is_file():
            from safetensors.numpy import load_file

            result["logits"] = load_file(str(logits))["logits"]
        return result
