"""The conventions on which mibspec and the public MIB code differ, as profile data, and
the parity command's behaviour where the public code is absent (no peers needed here).

* start token: the profile declares it, a report's ``settings.start_token`` overrides it,
  recomputation and the producer apply it;
* EAP-IG (inputs) interpolation points and the attribution scale, checked against
  identities of the public API (``eap`` is the gradient at the clean input, and at the
  corrupted input with the two prompts swapped);
* recorded circuit sizes: complete pruning under both profiles.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from mibspec.core.profiles import load_profile

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "circuit-ioi"
MODELS = REPO / "examples" / "models"


def test_profiles_declare_the_public_codes_conventions_only_under_mib_2025() -> None:
    mib, default = load_profile("mib-2025"), load_profile("default")
    assert (mib["start_token"], mib["ig_points"], mib["attribution_scale"]) == (
        "prepend",
        "left",
        "per_example_and_batch",
    )
    assert (default["start_token"], default["ig_points"], default["attribution_scale"]) == (
        "none",
        "right",
        "per_example",
    )
    assert mib["recorded_size"] == default["recorded_size"] == "complete_pruning"


def test_the_reports_start_token_wins_over_the_profiles() -> None:
    from mibspec.reference_impl.recompute.circuit import start_token_choice

    mib, default = load_profile("mib-2025"), load_profile("default")
    assert start_token_choice({}, mib) == "prepend"
    assert start_token_choice({}, default) == "none"
    assert start_token_choice({"start_token": "none"}, mib) == "none"
    assert start_token_choice({"start_token": "prepend"}, default) == "prepend"


def test_config_start_token_falls_back_to_the_end_token() -> None:
    from mibspec.reference_impl.recompute import config_start_token

    assert config_start_token({"bos_token_id": 5, "eos_token_id": 7}) == 5
    assert config_start_token({"bos_token_id": None, "eos_token_id": 7}) == 7
    assert config_start_token({"eos_token_id": [9, 10]}) == 9
    assert config_start_token({"bos_token_id": True}) is None
    assert config_start_token({}) is None


def test_tokenize_pairs_prepends_the_start_token_to_prompts_not_answers() -> None:
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    rows = [
        {
            "base": {"prompt": "a b", "answer": " c"},
            "counterfactuals": {"x": {"prompt": "d e", "answer": " f"}},
        },
        {"base": {"prompt": "a", "answer": " g"}, "counterfactuals": {"x": {"prompt": "d", "answer": " h"}}},
    ]
    vocab = {"a": 10, "b": 11, " c": 12, "d": 13, "e": 14, " f": 15, " g": 16, " h": 17}

    def encode(text: str) -> list[int]:
        return [vocab[text]] if text in vocab else [vocab[t] for t in text.split(" ")]

    plain = tokenize_pairs(rows, "x", encode, "/")
    started = tokenize_pairs(rows, "x", encode, "/", 99)
    assert started[0].tolist() == [[99, 10, 11], [99, 10, 0]]
    assert started[1].tolist() == [[99, 13, 14], [99, 13, 0]]
    assert started[2].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert started[3].tolist() == plain[3].tolist() == [12, 16]
    assert started[4].tolist() == plain[4].tolist() == [15, 17]


def _copy_example(tmp_path: Path, settings: dict | None = None, profile: str | None = None) -> Path:
    folder = tmp_path / "report"
    shutil.copytree(EXAMPLE, folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["settings"].update(settings or {})
    if profile is not None:
        report["profile"] = profile
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder / "report.json"


def _m_full_comparison(report: Path) -> tuple[float, float]:
    from mibspec import verify

    result = verify(report, model_roots=[MODELS])
    comparison = next(c for c in result.documents[0].comparisons if c.pointer == "/claims/m_full")
    return comparison.claimed, comparison.recomputed


@pytest.mark.recompute
@pytest.mark.slow
def test_recomputation_uses_the_declared_start_token(tmp_path: Path) -> None:
    """The example's claims were computed without a start token: declaring one (in the report,
    or through mib-2025 when the report is silent) changes what is recomputed, by the
    same amount both ways."""
    from mibspec.reference_impl.engine import evaluate_circuits, load_model
    from mibspec.reference_impl.recompute import ModelSource, encode_function
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    claimed, silent = _m_full_comparison(_copy_example(tmp_path / "a"))
    _, declared = _m_full_comparison(_copy_example(tmp_path / "b", {"start_token": "prepend"}))
    _, by_profile = _m_full_comparison(_copy_example(tmp_path / "c", profile="mib-2025"))
    _, overridden = _m_full_comparison(_copy_example(tmp_path / "d", {"start_token": "none"}, "mib-2025"))

    model_dir = MODELS / "tiny-gpt2"
    rows = [json.loads(line) for line in (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    encode = encode_function(ModelSource(str(model_dir), None, local=True))
    start = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))["bos_token_id"]
    tokens = tokenize_pairs(rows, "io_s2_flip", encode, "/", start)
    model = load_model(model_dir)
    expected = float(evaluate_circuits(model, *tokens, np.zeros((1, 479), dtype=bool)).clean.mean())

    assert silent == pytest.approx(claimed, rel=1e-6)
    assert overridden == pytest.approx(claimed, rel=1e-6)
    assert declared == pytest.approx(expected, rel=1e-9)
    assert by_profile == pytest.approx(expected, rel=1e-9)
    assert abs(declared - claimed) > 0.1


@pytest.fixture(scope="module")
def pairs() -> dict:
    from mibspec.reference_impl.engine import load_model
    from mibspec.reference_impl.recompute import ModelSource, encode_function
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    model_dir = MODELS / "tiny-gpt2"
    lines = (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()[:7]
    encode = encode_function(ModelSource(str(model_dir), None, local=True))
    tokens = tokenize_pairs([json.loads(line) for line in lines], "io_s2_flip", encode, "/")
    return {"model": load_model(model_dir, dtype="float64"), "tokens": tokens}


@pytest.mark.slow
@pytest.mark.recompute
def test_left_interpolation_points_start_at_the_corrupted_input(pairs: dict) -> None:
    """α ∈ {0, ½}: the gradient at α = 0 is EAP's on the swapped pair (sign flipped, as the
    activation difference flips), the one at α = ½ follows from α ∈ {½, 1} minus EAP's."""
    from mibspec.reference_impl.engine import attribute_edges

    model = pairs["model"]
    ids, cids, mask, correct, counter = pairs["tokens"]
    left = attribute_edges(
        model, ids, cids, mask, correct, counter, method="eap-ig", steps=2, ig_points="left"
    )
    right = attribute_edges(model, ids, cids, mask, correct, counter, method="eap-ig", steps=2)
    eap = attribute_edges(model, ids, cids, mask, correct, counter, method="eap")
    swapped = attribute_edges(model, cids, ids, mask, correct, counter, method="eap")
    np.testing.assert_allclose(left, (-swapped + 2 * right - eap) / 2, rtol=1e-9, atol=1e-12)
    assert not np.allclose(left, right, rtol=1e-3)


@pytest.mark.slow
@pytest.mark.recompute
@pytest.mark.parametrize("method", ["eap", "eap-ig"])
def test_batch_scale_divides_each_batchs_contribution_by_its_size(pairs: dict, method: str) -> None:
    from mibspec.reference_impl.engine import attribute_edges

    model = pairs["model"]
    ids, cids, mask, correct, counter = pairs["tokens"]
    n, batch = ids.shape[0], 3  # batches of 3, 3 and 1
    scaled = attribute_edges(
        model,
        ids,
        cids,
        mask,
        correct,
        counter,
        method=method,
        batch_size=batch,
        scale="per_example_and_batch",
    )
    expected = np.zeros_like(scaled)
    for start in range(0, n, batch):
        sl = slice(start, min(n, start + batch))
        part = attribute_edges(model, ids[sl], cids[sl], mask[sl], correct[sl], counter[sl], method=method)
        expected += part / n  # each batch: its per-example mean, then over the examples
    np.testing.assert_allclose(scaled, expected, rtol=1e-9, atol=1e-15)


def test_attribution_refuses_unknown_conventions(pairs: dict) -> None:
    from mibspec.reference_impl.engine import attribute_edges

    with pytest.raises(ValueError, match="ig_points"):
        attribute_edges(pairs["model"], *pairs["tokens"], ig_points="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale"):
        attribute_edges(pairs["model"], *pairs["tokens"], scale="sum")  # type: ignore[arg-type]


def test_sizes_are_counted_after_pruning_to_a_fixed_point() -> None:
    """A chain input → a0.h0 → a1.h0 → logits broken at a1.h0 → logits: one pruning round
    (drop nodes without in- or out-edges, then their edges) leaves input → a0.h0, a second
    round removes it; the recorded size is that of the fixed point, 0."""
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=1, parallel_attn_mlp=False, d_model=4))
    circuit = np.zeros(universe.n_edges, dtype=bool)
    circuit[universe.edge_ids(["input->a0.h0<q>", "a0.h0->a1.h0<q>"])] = True
    assert universe.weighted_edge_count(circuit, prune=False) == 2
    assert universe.weighted_edge_count(circuit) == 0


def test_find_peers_says_where_it_looked(tmp_path: Path) -> None:
    from mibspec.parity import PeerUnavailableError, find_peers

    with pytest.raises(PeerUnavailableError, match="MIBSPEC_PEERS"):
        find_peers(tmp_path)


def test_parity_command_exits_2_without_the_public_code(mibspec_cli, tmp_path: Path) -> None:
    done = mibspec_cli("parity", "circuit", str(EXAMPLE / "report.json"), "--peers", str(tmp_path))
    assert done.returncode == 2
    assert "public MIB code was not found" in done.stderr


def test_parity_command_exits_2_without_the_public_codes_environment(mibspec_cli, tmp_path: Path) -> None:
    peers = tmp_path / "peers"
    for marker in ("eap-ig/src/eap/evaluate.py", "mib-circuit-track/MIB_circuit_track/evaluation.py"):
        (peers / marker).parent.mkdir(parents=True, exist_ok=True)
        (peers / marker).write_text("", encoding="utf-8")
    env = {"MIBSPEC_PEER_ENV": str(tmp_path / "no-env"), "MIBSPEC_PEER_PYTHON": ""}
    done = mibspec_cli("parity", "circuit", str(EXAMPLE / "report.json"), "--peer", str(peers), env=env)
    assert done.returncode == 2
    assert "no environment for the public code" in done.stderr
    assert "--build-env" in done.stderr


def test_a_parity_row_agrees_within_the_profiles_tolerance() -> None:
    from mibspec.parity import ParityRow

    scalar = ParityRow("m(N)", 10.0, 10.0 + 1e-5 + 1e-4 * 0.99, True, 1e-5, 1e-5)
    assert scalar.ok
    assert not ParityRow("m(N)", 10.0, 10.0 + 1e-5 + 1e-4 * 1.01, True, 1e-5, 1e-5).ok
    assert scalar.group == "m(N)"
    # vectors are judged against their largest public value, without an absolute term
    vector = ParityRow("EAP edge scores", 1e-3, 1e-3 + 1e-8, True, 1e-5, 1e-5, scale=2e-3)
    assert vector.ok
    assert vector.group == "EAP edge scores"
    assert not ParityRow("EAP edge scores", 1e-3, 1e-3 + 3e-8, True, 1e-5, 1e-5, scale=2e-3).ok
    assert ParityRow("x", 0.0, 1e-9, False, 1e-5, 1e-5).as_dict()["rel_diff"] is None


def _rows(public_means: tuple[float, float], our_means: tuple[float, float]):  # type: ignore[no-untyped-def]
    from mibspec.parity._circuit import _Rows

    rows = _Rows(1e-5, 1e-5, prepend=True)
    rows.means = (public_means, our_means)
    return rows


def test_f_keeps_its_plain_tolerance_when_the_means_agree_whatever_the_denominator() -> None:
    # m(N) − m(∅) = 1e-3: the old propagation of the means' tolerance allowed |Δf| up to
    # about 1e-5·(1 + |f| + |1 − f|)·10 / 1e-3 ≈ 0.3 here; equal means leave f's own tolerance
    rows = _rows((10.001, 10.0), (10.001, 10.0))
    assert rows.f_tolerance(0.5, 0.5, 10.0005, 10.0005) == pytest.approx(1e-5)
    rows.add_f("f(0.1) signed, report circuit", 0.5, 0.5 + 2e-5, True, m_public=10.0005, m_ours=10.0005)
    mean_row, f_row = rows.rows
    assert (mean_row.quantity, mean_row.group) == (
        "mean m, k=0.1 signed, report circuit",
        "m(k): each circuit's mean metric",
    )
    assert mean_row.ok  # the circuit's mean agrees
    assert not f_row.ok  # f moved by 2e-5 > 1e-5 + 1e-5·0.5 with nothing in the means explaining it


def test_f_widens_by_the_measured_difference_of_the_means_over_the_denominator() -> None:
    # closed form: (|Δm| + |1 − f|·|Δm(∅)| + |f|·|Δm(N)|) / |m(N) − m(∅)|, public denominator
    rows = _rows((2.0, 1.0), (2.0 + 4e-6, 1.0 - 2e-6))
    f = 0.25
    expected = 1e-5 + (3e-6 + 0.75 * 2e-6 + 0.25 * 4e-6) / 1.0
    assert rows.f_tolerance(f, 0.26, 1.25, 1.25 + 3e-6) == pytest.approx(expected, rel=1e-9)
    # without the circuit's means, each side's is rebuilt from its f, m(N) and m(∅)
    rebuilt = (1.0 - 2e-6) + 0.25 * (1.0 + 6e-6)
    assert rows.f_tolerance(f, 0.25) == pytest.approx(1e-5 + (abs(1.25 - rebuilt) + 1.5e-6 + 1e-6), rel=1e-9)


def test_an_f_row_without_means_has_the_profiles_tolerance() -> None:
    from mibspec.parity._circuit import _Rows

    rows = _Rows(1e-5, 1e-5, prepend=True)
    rows.add_f("f(0.5) signed, neuron circuit", 0.4, 0.4 + 1.3e-5, True)
    [row] = rows.rows
    assert row.ok
    assert row.abs_tol == 1e-5
    assert not _rows((1.0, 1.0), (1.0, 1.0)).f_tolerance(0.5, 0.5) < float("inf")  # undefined f


@pytest.mark.recompute
@pytest.mark.slow
def test_the_producer_writes_under_mib_2025_and_verify_recomputes_it(tmp_path: Path) -> None:
    """``score circuit --profile mib-2025`` prepends the start token and says so; verify then
    recomputes the same numbers, and a copy that drops the declaration does not match."""
    import mibspec
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    run = score_circuit(
        CircuitOptions(
            model_dir=MODELS / "tiny-gpt2",
            dataset_path=EXAMPLE / "dataset.json",
            out_dir=tmp_path / "out",
            counterfactual_type="io_s2_flip",
            method="random",
            profile="mib-2025",
        )
    )
    report = json.loads(run.report.read_text(encoding="utf-8"))
    assert report["profile"] == "mib-2025"
    assert report["settings"]["start_token"] == "prepend"
    assert mibspec.verify(run.report, model_roots=[MODELS]).valid
    claimed = json.loads((EXAMPLE / "report.json").read_text(encoding="utf-8"))["claims"]["m_full"]
    assert abs(run.m_full - claimed) > 0.1  # the example has no start token
    report["settings"]["start_token"] = "none"
    run.report.write_text(json.dumps(report), encoding="utf-8")
    assert not mibspec.verify(run.report, model_roots=[MODELS]).valid


def _plant_peers(folder: Path) -> None:
    for marker in ("eap-ig/src/eap/evaluate.py", "mib-circuit-track/MIB_circuit_track/evaluation.py"):
        (folder / marker).parent.mkdir(parents=True, exist_ok=True)
        (folder / marker).write_text("", encoding="utf-8")


@pytest.mark.parametrize("checkout", [True, False])
def test_find_peers_has_no_default_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkout: bool
) -> None:
    """Only ``--peers`` or ``$MIBSPEC_PEERS`` name the public code: a ``shared/peers`` beside a
    source checkout or above the package is never run, installed or not."""
    from mibspec.parity import PeerUnavailableError, _peer, find_peers

    _plant_peers(tmp_path / "shared" / "peers")  # two levels above the checkout
    repo = tmp_path / "home" / "repo"
    module = repo / "src" / "mibspec" / "parity" / "_peer.py"
    module.parent.mkdir(parents=True)
    module.write_text("", encoding="utf-8")
    if checkout:
        (repo / "pyproject.toml").write_text("", encoding="utf-8")
    _plant_peers(tmp_path / "home" / "shared" / "peers")  # beside the checkout
    monkeypatch.setattr(_peer, "__file__", str(module))
    monkeypatch.delenv("MIBSPEC_PEERS", raising=False)
    with pytest.raises(PeerUnavailableError) as refused:
        find_peers()
    message = str(refused.value)
    assert "--peers PATH" in message
    assert "MIBSPEC_PEERS=PATH" in message
    assert "eap-ig/src/eap/evaluate.py" in message
    assert "mib-circuit-track/MIB_circuit_track/evaluation.py" in message
    monkeypatch.setenv("MIBSPEC_PEERS", str(tmp_path / "shared" / "peers"))
    assert find_peers() == (tmp_path / "shared" / "peers").resolve()
    beside = tmp_path / "home" / "shared" / "peers"
    assert find_peers(beside) == beside.resolve()  # --peers wins over the variable


def test_a_folder_without_the_public_code_names_what_it_lacks(tmp_path: Path) -> None:
    from mibspec.parity import PeerUnavailableError, find_peers

    (tmp_path / "eap-ig" / "src" / "eap").mkdir(parents=True)
    (tmp_path / "eap-ig" / "src" / "eap" / "evaluate.py").write_text("", encoding="utf-8")
    with pytest.raises(PeerUnavailableError) as refused:
        find_peers(tmp_path)
    message = str(refused.value)
    assert f"at {tmp_path} (--peers {tmp_path})" in message
    assert "lacks mib-circuit-track/MIB_circuit_track/evaluation.py;" in message


def test_parity_command_exits_2_when_no_location_is_given(mibspec_cli) -> None:
    done = mibspec_cli("parity", "circuit", str(EXAMPLE / "report.json"), env={"MIBSPEC_PEERS": ""})
    assert done.returncode == 2
    assert "pass --peers PATH or set MIBSPEC_PEERS=PATH" in done.stderr


def _gemma2_inputs(tmp_path: Path, window: int) -> object:
    """CircuitInputs over the parity harness's tiny Gemma-2 (with ``window``) and three IOI rows."""
    from mibspec.parity import RANDOM_MODELS, CircuitInputs, random_model_dir
    from mibspec.reference_impl.engine import random_model

    model = random_model_dir("tiny-gemma2", tmp_path, MODELS / "tiny-gpt2")
    family, shape = RANDOM_MODELS["tiny-gemma2"]
    random_model(family, model, vocab_size=855, **{**shape, "sliding_window": window})
    lines = (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    empty = np.zeros((0,), dtype=np.float32)
    return CircuitInputs(
        {}, model, "gemma2", [json.loads(x) for x in lines], "io_s2_flip", empty, empty, [], 3
    )


@pytest.mark.recompute
def test_the_public_gemma2_layer_order_is_a_difference_only_when_the_window_bites(tmp_path: Path) -> None:
    from mibspec.parity import public_model_difference

    inputs = _gemma2_inputs(tmp_path / "w4", 4)
    config = json.loads((inputs.model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["layer_types"][:2] == ["sliding_attention", "full_attention"]
    # TransformerLens 2.18's gemma-2-2b configuration: global first, then local
    public_order = {"attn_types": ["global", "local", "global", "local"]}
    note = public_model_difference(inputs, public_order)
    assert note is not None
    assert "layers [0, 1, 2, 3]" in note
    assert "window 4 <" in note
    config_order = {"attn_types": ["local", "global", "local", "global"]}
    assert public_model_difference(inputs, config_order) is None
    # a window no sequence outgrows masks nothing: the order does not matter (gemma-2-2b on MIB)
    assert public_model_difference(_gemma2_inputs(tmp_path / "w64", 64), public_order) is None


def test_parity_command_refuses_a_report_that_does_not_verify(mibspec_cli, tmp_path: Path) -> None:
    """The report is verified before the public code is looked for or anything it points to is
    read: a circuit artifact moved out of the report's folder is named and nothing is compared."""
    folder = tmp_path / "report"
    shutil.copytree(EXAMPLE, folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    for artifact in report["artifacts"]:
        if artifact["id"] == report["claims"]["circuit"]:
            artifact["path"] = "../elsewhere.json"
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    done = mibspec_cli("parity", "circuit", str(folder / "report.json"), "--peers", str(tmp_path / "none"))
    assert done.returncode == 2
    assert "does not verify" in done.stderr
    assert "public MIB code was not found" not in done.stderr  # refused before looking for it
