"""mibspec against the public MIB circuit code, run in its own environment (``-m parity``).

Skipped, saying why, when the public code (``$MIBSPEC_PEERS``, else ``../shared/peers`` beside this checkout)
or its environment (``$MIBSPEC_PEER_PYTHON`` or the cached one; build it with
``python benchmarks/parity/run_parity.py --build-env``) is absent. One run of the public
code on the IOI example report (about three minutes on two cores) feeds every test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.parity, pytest.mark.recompute]

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "examples" / "circuit-ioi" / "report.json"
MODELS = REPO / "examples" / "models"
TASKS = ("logits", "circuits_patching", "curve", "circuits_mean", "nodes", "EAP", "EAP-IG-inputs")


@pytest.fixture(scope="module")
def compared(public_code: tuple[Path, Path]) -> dict[str, Any]:
    from mibspec.parity import circuit_parity, load_circuit_inputs

    peers, python = public_code
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


#: The tiny random models of the leaderboard's other two families (mibspec.parity.RANDOM_MODELS).
RANDOM = ("tiny-qwen2", "tiny-gemma2")
_RUNS: dict[tuple[str, str], dict[str, Any]] = {}
_INPUTS: dict[str, Any] = {}


def _random_run(name: str, layer_order: str, root: Path) -> dict[str, Any]:
    """One comparison of a random model's report (written once per model), by profile and quantity."""
    from mibspec.parity import (
        RANDOM_MODELS,
        PeerUnavailableError,
        circuit_parity,
        circuit_report,
        find_peers,
        load_circuit_inputs,
        peer_python,
        random_model_dir,
        report_method,
    )

    if (name, layer_order) not in _RUNS:
        try:
            peers, python = find_peers(), peer_python()
        except PeerUnavailableError as exc:
            pytest.skip(f"the public MIB code cannot be run here: {exc}")
        method = report_method(RANDOM_MODELS[name][0])
        if name not in _INPUTS:
            model = random_model_dir(name, root / "models", MODELS / "tiny-gpt2")
            report = circuit_report(model, REPO / "examples" / "circuit-ioi" / "dataset.json", root, method)
            _INPUTS[name] = load_circuit_inputs(report, [root / "models"])
        _, by_profile = circuit_parity(
            _INPUTS[name], peers, python, ("mib-2025", "default"), TASKS, layer_order=layer_order
        )
        _RUNS[(name, layer_order)] = {
            profile: {row.quantity: row for row in rows} for profile, rows in by_profile.items()
        }
    return _RUNS[(name, layer_order)]


@pytest.fixture(scope="module")
def random_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("parity-random")


def test_qwen2_reproduces_every_value_mib_2025_promises(random_root: Path) -> None:
    rows = _random_run("tiny-qwen2", "public", random_root)["mib-2025"]
    promised = {row.group for row in rows.values() if row.promised}
    assert {"m(N)", "m(∅)", "CPR", "CMD", "EAP edge scores", "EAP-IG (inputs) edge scores"} <= promised
    assert {"f(k), MIB's top-n circuits", "node circuits: m(∅), f(k)", "logits (log-softmax)"} <= promised
    assert [row.quantity for row in rows.values() if row.promised and not row.ok] == []


def test_gemma2_differs_only_by_the_public_codes_layer_order(random_root: Path) -> None:
    # as MIB loads it, TransformerLens's Gemma-2 slides the window in the layers the config
    # makes global: with a window shorter than the prompts the model computes other values
    public = _random_run("tiny-gemma2", "public", random_root)["mib-2025"]
    logits = public["log-softmax logits (same tokens)"]
    assert not logits.promised
    assert "layer" in logits.note
    assert logits.abs_diff > 1e-2
    assert not any(row.promised for row in public.values())
    # the same public path with each layer's attention as the config says agrees everywhere
    fixed = _random_run("tiny-gemma2", "config", random_root)["mib-2025"]
    promised = {row.group for row in fixed.values() if row.promised}
    assert {"logits (log-softmax)", "m(N)", "m(∅)", "CPR", "CMD", "node circuits: m(∅), f(k)"} <= promised
    assert not any("edge scores" in row.group for row in fixed.values())  # mibspec: not for post-norms
    assert [row.quantity for row in fixed.values() if row.promised and not row.ok] == []
