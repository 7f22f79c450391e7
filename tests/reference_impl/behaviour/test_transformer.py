"""The transformer behaviour (MB-17) against the engine and the transformers forward, and the
transformer report end to end: produce, verify with recomputation, tamper, break inputs.

Independent anchors: per-example metrics of node coalitions from the engine's edge-level
patching of ``node_circuit_edges({input} ∪ S)``; gradient attribution from the engine's EAP
edge scores summed over each component's out-edges; the full-model metric from the
transformers forward pass; subset behaviours from a loop over examples.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mibspec

pytestmark = pytest.mark.recompute

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"
DATASET = REPO / "examples" / "datasets" / "ioi"
EXAMPLE = REPO / "examples" / "causal-bench-tiny-gpt2"


def _tokens(model_name: str, n: int) -> tuple[Any, ...]:
    from mibspec.reference_impl.recompute import ModelSource, encode_function
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    encode = encode_function(ModelSource(str(MODELS / model_name), None, local=True))
    lines = (DATASET / "test.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    return tokenize_pairs([json.loads(line) for line in lines], "io_s2_flip", encode, "x")


@pytest.fixture(scope="module", params=["tiny-gpt2", "tiny-llama"])
def setup(request: pytest.FixtureRequest) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    from mibspec.reference_impl.engine import load_model
    from mibspec.reference_impl.threads import one_thread

    with one_thread():
        yield load_model(MODELS / request.param), _tokens(request.param, 6)


def test_coalitions_match_engine_node_circuits(setup: tuple[Any, ...]) -> None:
    from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour
    from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, node_circuit_edges

    model, tokens = setup
    rng = np.random.default_rng(3)
    for ablation in ("counterfactual", "mean", "zero"):
        behaviour = TransformerBehaviour(model, *tokens, ablation=ablation)
        n = len(behaviour.universe)
        active = np.concatenate([rng.random((2, n)) < 0.5, np.ones((2, n), bool), np.zeros((1, n), bool)])
        active[2, rng.integers(n)] = False  # a leave-one-out coalition
        ours = behaviour.example_metrics(active)
        nodes = np.concatenate([np.ones((len(active), 1), bool), active], axis=1)  # input always on
        engine = evaluate_circuits(
            model, *tokens, node_circuit_edges(graph_universe(model), nodes), ablation=ablation, batch_size=6
        )
        np.testing.assert_allclose(ours, engine.circuits, rtol=0, atol=2e-4, err_msg=ablation)
        np.testing.assert_allclose(behaviour.m_full, engine.circuits[3], rtol=0, atol=2e-4, err_msg=ablation)


def test_full_model_matches_transformers_forward() -> None:
    from transformers import AutoModelForCausalLM

    from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour
    from mibspec.reference_impl.engine import load_model

    ids, cids, mask, correct, counter = _tokens("tiny-gpt2", 5)
    behaviour = TransformerBehaviour(load_model(MODELS / "tiny-gpt2"), ids, cids, mask, correct, counter)
    hf = AutoModelForCausalLM.from_pretrained(MODELS / "tiny-gpt2", trust_remote_code=False).eval()
    expected = []
    for i in range(5):
        length = int(mask[i].sum())
        with torch.no_grad():
            logits = hf(torch.tensor(ids[i : i + 1, :length])).logits[0, -1].double()
        expected.append(float(logits[correct[i]] - logits[counter[i]]))
    np.testing.assert_allclose(behaviour.m_full, expected, rtol=0, atol=1e-4)


def test_attribution_is_eap_summed_over_out_edges(setup: tuple[Any, ...]) -> None:
    from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour
    from mibspec.reference_impl.engine import attribute_edges, graph_universe

    model, tokens = setup
    behaviour = TransformerBehaviour(model, *tokens)
    universe = graph_universe(model)
    edges = attribute_edges(model, *tokens, method="eap", batch_size=6)
    matrix = np.zeros(universe.edge_mask.shape)
    matrix[universe.edge_mask] = edges
    per_node = matrix.sum(axis=1)[1:]  # every out-edge of each head and MLP; `input` excluded
    np.testing.assert_allclose(behaviour.example_attribution().mean(axis=1), per_node, rtol=1e-4, atol=1e-6)
    scale = float(behaviour.m_full.mean() - behaviour.m_empty.mean())
    np.testing.assert_allclose(behaviour.attribution(), np.abs(per_node) / scale, rtol=1e-4, atol=1e-6)


def test_subset_behaviour_is_a_ratio_of_means(setup: tuple[Any, ...]) -> None:
    from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour

    model, tokens = setup
    behaviour = TransformerBehaviour(model, *tokens)
    subset = [0, 2, 5]
    active = np.random.default_rng(1).random((4, len(behaviour.universe))) < 0.6
    values = behaviour.behaviour(subset)(active)
    per_example = behaviour.example_metrics(active)
    for row in range(4):
        mean = sum(per_example[row, i] for i in subset) / 3
        full = sum(behaviour.m_full[i] for i in subset) / 3
        empty = sum(behaviour.m_empty[i] for i in subset) / 3
        assert values[row] == pytest.approx((mean - empty) / (full - empty), rel=1e-12)
    everything = np.ones((1, len(behaviour.universe)), bool)
    assert behaviour.behaviour(subset)(everything)[0] == 1.0
    assert behaviour.behaviour(subset)(~everything)[0] == 0.0


# --------------------------------------------------------------------------- reports


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mibspec.reference_impl.scoring.causal_bench import CausalBenchOptions, score_causal_bench

    folder = tmp_path_factory.mktemp("cb") / "tiny-gpt2"
    run = score_causal_bench(
        CausalBenchOptions(
            folder,
            behaviour="transformer",
            model_dir=MODELS / "tiny-gpt2",
            dataset_path=DATASET / "test.meta.json",
            counterfactual_type="io_s2_flip",
            n_examples=12,
            subsample_size=6,
            ablation="mean",
        )
    )
    return run.report


@pytest.mark.slow
def test_small_transformer_report_verifies_with_recomputation(small_report: Path) -> None:
    result = mibspec.verify(small_report, model_roots=[MODELS])
    assert result.valid, _codes(result)
    report = result.documents[0]
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    data = json.loads(small_report.read_text(encoding="utf-8"))
    assert "ground_truth" not in data
    assert "scaling" not in data["claims"]
    assert data["settings"]["perturbation"] == {"kind": "subsample", "subsample_size": 6}
    n_sets = sum(2 + len(m["runs"]) for m in data["claims"]["methods"])
    assert sum(c.quantity.find("components not reproduced") >= 0 for c in report.comparisons) >= n_sets
    assert all(c.within for c in report.comparisons)


@pytest.mark.slow
def test_tampered_transformer_claim_gives_r103(small_report: Path, tmp_path: Path) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(small_report.parent, folder)
    data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    point = data["claims"]["threshold_sensitivity"]["points"][2]["metrics"]
    point["C"] -= 0.003  # C is checked by recomputation only; keep the composite consistent
    from mibspec.metrics import causal_bench as cb

    if "composite" in point:
        point["composite"] = cb.composite({k: point[k] for k in cb.COMPOSITE_KEYS})
    (folder / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    codes = _codes(result)
    assert ("R103", "/claims/threshold_sensitivity/points/2/metrics/C") in codes
    assert {code for code, _ in codes} == {"R103"}


def test_missing_model_or_torch_gives_r104(small_report: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = mibspec.verify(small_report)  # no model root
    assert _codes(missing) == [("R104", "/model/path")]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    no_torch = mibspec.verify(small_report, model_roots=[MODELS])
    assert _codes(no_torch) == [("R104", "/behaviour")]
    assert "torch" in no_torch.documents[0].findings[0].message


@pytest.mark.slow
def test_transformer_producer_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from mibspec.reference_impl.scoring.causal_bench import CausalBenchOptions, score_causal_bench

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    digests = []
    for name in ("a", "b"):
        run = score_causal_bench(
            CausalBenchOptions(
                tmp_path / name,
                behaviour="transformer",
                model_dir=MODELS / "tiny-llama",
                dataset_path=DATASET / "test.meta.json",
                counterfactual_type="io_s2_flip",
                n_examples=8,
                subsample_size=5,
                n_runs=3,
            )
        )
        digests.append(
            {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.report.parent.iterdir()}
        )
    assert digests[0] == digests[1]
    # io_s1_flip keeps the answer, so m(C) = m(∅) = 0: the normalisation is degenerate (MB-2)
    with pytest.raises(ValueError, match="denominator"):
        score_causal_bench(
            CausalBenchOptions(
                tmp_path / "c",
                behaviour="transformer",
                model_dir=MODELS / "tiny-llama",
                dataset_path=DATASET / "test.meta.json",
                counterfactual_type="io_s1_flip",
                n_examples=4,
            )
        )


@pytest.mark.slow
def test_bundled_tiny_gpt2_example_verifies_with_recomputation() -> None:
    result = mibspec.verify(EXAMPLE / "report.json", model_roots=[MODELS])
    assert result.valid, _codes(result)
    comparisons = result.documents[0].comparisons
    assert len(comparisons) > 150
    assert all(c.within and c.claimed is not None for c in comparisons)
