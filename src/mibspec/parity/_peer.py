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
_CONTENTS = (
    "eap-ig/ (a clone of the EAP-IG library at the commit MIB pins: eap-ig/src/eap/evaluate.py) and "
    "mib-circuit-track/ (a clone of MIB's circuit track: mib-circuit-track/MIB_circuit_track/evaluation.py)"
)
DRIVER = Path(__file__).with_name("_peer_driver.py")


class PeerUnavailableError(RuntimeError):
    """The public code or its environment is not there; the message says what to do."""


def find_peers(explicit: str | Path | None = None) -> Path:
    """The folder holding the public code (``eap-ig/`` and ``mib-circuit-track/``):
    ``explicit`` (``--peers``), else ``$MIBSPEC_PEERS``. There is no default: a folder found
    by position (beside the package, above it) is wrong for an installed package and could
    run code planted there.

    Raises:
        PeerUnavailableError: neither was given, or the folder does not hold the public code;
            the message says what to set and what the folder must contain.
    """
    if explicit:
        folder, given = Path(explicit), f"--peers {explicit}"
    elif os.environ.get(PEERS_ENV):
        folder, given = Path(os.environ[PEERS_ENV]), f"{PEERS_ENV}={os.environ[PEERS_ENV]}"
    else:
        raise PeerUnavailableError(
            f"the location of the public MIB code is not given: pass --peers PATH or set {PEERS_ENV}=PATH, "
            f"PATH a folder holding {_CONTENTS}"
        )
    missing = [marker for marker in _MARKERS if not (folder / marker).is_file()]
    if missing:
        raise PeerUnavailableError(
            f"the public MIB code was not found at {folder} ({given}): it lacks {', '.join(missing)}; "
            f"pass --peers PATH or set {PEERS_ENV}=PATH, PATH a folder holding {_CONTENTS}"
        )
    return folder.resolve()


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
