"""mibspec against the public MIB circuit code, run in its own environment (``-m parity``).

Skipped, saying why, when the public code (``$MIBSPEC_PEERS``, else ``../shared/peers`` beside this checkout)
or its environment (``$MIBSPEC_PEER_PYTHON`` or the cached one; build it with
``python benchmarks/parity/run_parity.py --build-env``) is absent. One run of the public
code on the IOI example report (about three minutes on two cores) feeds every test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.parity, pytest.mark.recompute]

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "examples" / "circuit-ioi" / "report.json"
MODELS = REPO / "examples" / "models"
TASKS = ("logits", "circuits_patching", "curve", "circuits_mean", "nodes", "EAP", "EAP-IG-inputs")


@pytest.fixture(scope="module")
def compared() -> dict[str, Any]:
    from mibspec.parity import (
        PeerUnavailableError,
        circuit_parity,
        find_peers,
        load_circuit_inputs,
        peer_python,
    )

    try:
        # $MIBSPEC_PEERS, else the public code beside this checkout (mibspec has no default)
        beside = None if os.environ.get("MIBSPEC_PEERS") else REPO.parent / "shared" / "peers"
        peers, python = find_peers(beside), peer_python()
    except PeerUnavailableError as exc:
        pytest.skip(f"the public MIB code cannot be run here: {exc}")
    inputs = load_circuit_inputs(REPORT, [MODELS])
    _, by_profile = circuit_parity(inputs, peers, python, ("mib-2025", "default"), TASKS)
    return {profile: {row.quantity: row for row in rows} for profile, rows in by_profile.items()}


def test_mib_2025_reproduces_every_value_it_promises(compared: dict[str, Any]) -> None:
    rows = compared["mib-2025"]
    promised = {row.group for row in rows.values() if row.promised}
    assert {"m(N)", "m(∅)", "CPR", "CMD", "EAP edge scores", "EAP-IG (inputs) edge scores"} <= promised
    assert {"f(k), MIB's top-n circuits", "node circuits: m(∅), f(k)", "logits (log-softmax)"} <= promised
    assert [row.quantity for row in rows.values() if row.promised and not row.ok] == []


def test_default_differs_where_the_spec_names_a_convention(compared: dict[str, Any]) -> None:
    rows = compared["default"]
    assert rows["log-softmax logits (same tokens)"].ok  # the model itself agrees
    for quantity in ("m(N)", "CPR (signed)", "EAP-IG-inputs edge scores", "EAP edge scores"):
        assert not rows[quantity].promised
        assert rows[quantity].rel_diff > 1e-3, quantity  # start token, points and scale differ


def test_named_differences_are_measured_not_promised(compared: dict[str, Any]) -> None:
    for rows in compared.values():
        mean = [row for row in rows.values() if row.group.startswith("mean ablation")]
        sizes = [row for row in rows.values() if row.group == "recorded circuit sizes"]
        assert mean
        assert sizes
        assert not any(row.promised for row in mean + sizes)
        assert any(row.abs_diff > 1e-3 for row in mean)
        assert any(row.abs_diff >= 1 for row in sizes)  # one pruning round keeps dangling edges
