"""What the tests against the public MIB code share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def public_code() -> tuple[Path, Path]:
    """The public code's folder and the Python of its environment: ``$MIBSPEC_PEERS``, else the
    code beside this checkout (mibspec has no default); skipped, saying why, when absent."""
    from mibspec.parity import PeerUnavailableError, find_peers, peer_python

    try:
        beside = None if os.environ.get("MIBSPEC_PEERS") else REPO.parent / "shared" / "peers"
        return find_peers(beside), peer_python()
    except PeerUnavailableError as exc:
        pytest.skip(f"the public MIB code cannot be run here: {exc}")
