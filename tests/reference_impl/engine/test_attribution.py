"""Edge attribution (EAP, EAP-IG, random) against the patching engine and finite differences.

* With every slot offset at zero, the differentiable forward gives the metric of the plain
  forward (itself anchored to transformers in test_forward.py).
* Offsetting slot ``d`` by ``−(o_s(clean) − o_s(corrupted))`` is exactly the full circuit
  minus the edge ``s → d`` under counterfactual patching, as the engine evaluates it: this
  ties every slot's offset to the right place in the graph.
* The EAP score of an edge equals the central finite difference of that offset path at 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mibspec.reference_impl.engine import (
    _forward,
    _ops,
    evaluate_circuits,
    graph_universe,
    load_model,
    random_model,
    run_model,
)
from mibspec.reference_impl.engine._attribution import _forward_with_slots, attribute_edges

pytestmark = pytest.mark.recompute

FAMILIES = ("gpt2", "llama", "qwen2")
N, T = 3, 6


@pytest.fixture(scope="module", params=FAMILIES)
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    directory = tmp_path_factory.mktemp(request.param)
    random_model(request.param, directory, seed=3)
    model = load_model(directory, dtype="float64")
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 64, (N, T))
    cids = rng.integers(0, 64, (N, T))
    mask = np.ones((N, T), dtype=np.int64)
    mask[1, 4:] = 0
    return {
        "model": model,
        "ids": ids,
        "cids": cids,
        "mask": mask,
        "correct": np.array([1, 2, 3]),
        "cf": np.array([4, 5, 6]),
    }


def _offset_metric(s: dict[str, object], slot: int, delta: torch.Tensor) -> np.ndarray:
    """Per-example metric of the clean run with slot ``slot``'s input shifted by ``delta``."""
    model = s["model"]
    ids, mask = _forward.check_tokens(model, s["ids"], s["mask"])
    tokens = torch.tensor(np.stack([s["correct"], s["cf"]], axis=1))
    x0 = _forward.embed(model, ids, _ops.positions_from_mask(mask))
    with torch.no_grad():
        _, offsets = _forward_with_slots(model, x0, mask, tokens)
    per_layer = 3 * model.n_heads + 1
    layer, index = divmod(slot, per_layer)
    shifted = [o.detach().clone() for o in offsets]
    shifted[layer][:, index] += delta
    with torch.no_grad():
        metric, _ = _forward_with_slots(model, x0, mask, tokens, shifted)
    return metric.numpy()


def _diff(s: dict[str, object]) -> torch.Tensor:
    model = s["model"]
    ids, mask = _forward.check_tokens(model, s["ids"], s["mask"])
    cids, _ = _forward.check_tokens(model, s["cids"], s["mask"])
    clean = _forward.trace(model, ids, mask).nodes
    corrupted = _forward.trace(model, cids, mask).nodes
    return (clean - corrupted) * mask[None, :, :, None]


def test_zero_offsets_give_the_plain_forward(setup: dict[str, object]) -> None:
    s = setup
    model = s["model"]
    logits = run_model(model, s["ids"], s["mask"]).logits.numpy()
    read = s["mask"].sum(1) - 1
    expected = [logits[i, read[i], s["correct"][i]] - logits[i, read[i], s["cf"][i]] for i in range(N)]
    ids, mask = _forward.check_tokens(model, s["ids"], s["mask"])
    x0 = _forward.embed(model, ids, _ops.positions_from_mask(mask))
    tokens = torch.tensor(np.stack([s["correct"], s["cf"]], axis=1))
    metric, _ = _forward_with_slots(model, x0, mask, tokens)
    np.testing.assert_allclose(metric.detach().numpy(), expected, rtol=0, atol=1e-10)


def _sample_edges(universe) -> list[int]:  # type: ignore[no-untyped-def]
    names = universe.edge_names()
    wanted = []
    for pattern in ("<q>", "<k>", "<v>", "->m0", "->m1", "->logits"):
        hits = [i for i, name in enumerate(names) if pattern in name]
        wanted += [hits[0], hits[-1]]
    return sorted(set(wanted))


@pytest.mark.slow
def test_slot_offsets_are_the_engine_edges(setup: dict[str, object]) -> None:
    s = setup
    model = s["model"]
    universe = graph_universe(model)
    diff = _diff(s)
    edges = _sample_edges(universe)
    circuits = np.ones((len(edges), universe.n_edges), dtype=bool)
    circuits[np.arange(len(edges)), edges] = False
    engine = evaluate_circuits(model, s["ids"], s["cids"], s["mask"], s["correct"], s["cf"], circuits)
    for row, e in enumerate(edges):
        src, dst = int(universe.edge_src[e]), int(universe.edge_dst[e])
        ours = _offset_metric(s, dst, -diff[src])
        np.testing.assert_allclose(
            ours, engine.circuits[row], rtol=0, atol=1e-9, err_msg=universe.edge_name(e)
        )


def test_eap_scores_are_the_directional_derivatives(setup: dict[str, object]) -> None:
    s = setup
    model = s["model"]
    universe = graph_universe(model)
    scores = attribute_edges(
        model, s["ids"], s["cids"], s["mask"], s["correct"], s["cf"], method="eap", batch_size=2
    )
    diff = _diff(s)
    h = 1e-5
    for e in _sample_edges(universe):
        src, dst = int(universe.edge_src[e]), int(universe.edge_dst[e])
        plus = _offset_metric(s, dst, h * diff[src])
        minus = _offset_metric(s, dst, -h * diff[src])
        finite = float(np.mean((plus - minus) / (2 * h)))
        assert scores[e] == pytest.approx(finite, rel=1e-6, abs=1e-8), universe.edge_name(e)


def test_eap_ig_with_one_step_is_eap_and_random_is_seeded(setup: dict[str, object]) -> None:
    s = setup
    model = s["model"]
    args = (model, s["ids"], s["cids"], s["mask"], s["correct"], s["cf"])
    eap = attribute_edges(*args, method="eap")
    np.testing.assert_allclose(attribute_edges(*args, method="eap-ig", steps=1), eap, rtol=1e-12, atol=1e-12)
    assert not np.allclose(attribute_edges(*args, method="eap-ig", steps=4), eap)
    first = attribute_edges(*args, method="random", seed=5)
    assert np.array_equal(first, attribute_edges(*args, method="random", seed=5))
    assert np.array_equal(first, np.random.default_rng(5).standard_normal(graph_universe(model).n_edges))
    with pytest.raises(ValueError, match="method"):
        attribute_edges(*args, method="acdc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steps"):
        attribute_edges(*args, method="eap-ig", steps=0)


def test_post_attention_norms_are_refused(tmp_path: Path) -> None:
    random_model("gemma2", tmp_path, seed=0)
    model = load_model(tmp_path)
    ids = np.zeros((1, 3), dtype=np.int64)
    with pytest.raises(ValueError, match="post-attention norms"):
        attribute_edges(model, ids, ids, None, [1], [2], method="eap")


def test_batch_size_does_not_change_scores(setup: dict[str, object], tmp_path: Path) -> None:
    s = setup
    args = (s["model"], s["ids"], s["cids"], s["mask"], s["correct"], s["cf"])
    np.testing.assert_allclose(
        attribute_edges(*args, method="eap-ig", batch_size=1),
        attribute_edges(*args, method="eap-ig", batch_size=3),
        rtol=1e-10,
        atol=1e-12,
    )
