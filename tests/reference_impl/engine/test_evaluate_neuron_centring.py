"""Neuron masks in TransformerLens's coordinates (``centre_neurons``, engine.md ME-7).

TransformerLens centres the writing weights of LayerNorm models (embeddings, every head's
output projection, every MLP's output projection, their biases): each node's output has mean
zero over the residual coordinates, which the LayerNorms reading it cannot see, so the
model computes the same function, but masking a coordinate of a centred output is not
masking it in the model's own output. The baseline: the naive per-slot forward of
``test_evaluate`` run on a copy of the transformers model whose writing weights are
centred by hand (the unembedding untied and left as it was); the engine with
``centre_neurons`` on the unchanged weights must give its metrics.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, load_model, random_model
from mibspec.reference_impl.threads import one_thread

sys.path.insert(0, str(Path(__file__).parent))
from test_evaluate import Naive, _data, naive_metrics

pytestmark = pytest.mark.recompute


def _centred(hf: Any) -> Any:
    """A copy of a GPT-2 module with every writing weight and bias centred over the residual."""
    out = copy.deepcopy(hf)
    with torch.no_grad():
        out.lm_head.weight = torch.nn.Parameter(hf.lm_head.weight.detach().clone())
        for weight in (out.transformer.wte.weight, out.transformer.wpe.weight):
            weight -= weight.mean(-1, keepdim=True)
        for block in out.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):  # Conv1D: (in, out)
                proj.weight -= proj.weight.mean(-1, keepdim=True)
                proj.bias -= proj.bias.mean()
    return out


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    path = random_model("gpt2", tmp_path_factory.mktemp("gpt2"), seed=21)
    hf = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float64, attn_implementation="eager", trust_remote_code=False
    )
    return load_model(path, dtype="float64"), hf.eval()


def test_centred_neuron_masks_are_masks_of_the_centred_model(gpt2: tuple[Any, Any]) -> None:
    weights, hf = gpt2
    universe = graph_universe(weights)
    data = _data(64, 31)
    rng = np.random.default_rng(32)
    circuits = np.stack([rng.random(universe.edge_mask.shape) < p for p in (0.3, 0.7, 1.0)])
    circuits &= universe.edge_mask[None]
    neurons = rng.random((3, universe.n_forward, weights.d_model)) < 0.5
    with one_thread():
        want = naive_metrics(Naive(_centred(hf)), data, circuits, neurons=neurons)
        plain = naive_metrics(Naive(hf), data, circuits, neurons=neurons)
    args = (data["clean"], data["corrupted"], data["mask"], data["correct"], data["counterfactual"], circuits)
    got = evaluate_circuits(weights, *args, neurons=neurons, centre_neurons=True)
    np.testing.assert_allclose(got.circuits, want, atol=1e-10, rtol=1e-10)
    # the coordinates matter: the model's own masks give other values
    assert np.abs(plain - want).max() > 1e-6
    np.testing.assert_allclose(
        evaluate_circuits(weights, *args, neurons=neurons).circuits, plain, atol=1e-10, rtol=1e-10
    )


def test_centring_changes_nothing_without_partial_masks(gpt2: tuple[Any, Any]) -> None:
    weights, _ = gpt2
    universe = graph_universe(weights)
    data = _data(64, 33)
    rng = np.random.default_rng(34)
    circuits = (
        np.stack([rng.random(universe.edge_mask.shape) < p for p in (0.2, 0.6)]) & universe.edge_mask[None]
    )
    whole = np.zeros((2, universe.n_forward, weights.d_model), dtype=bool)
    whole[:, rng.random(universe.n_forward) < 0.7] = True  # whole nodes kept or dropped
    args = (data["clean"], data["corrupted"], data["mask"], data["correct"], data["counterfactual"], circuits)
    centred = evaluate_circuits(weights, *args, neurons=whole, centre_neurons=True).circuits
    plain = evaluate_circuits(weights, *args, neurons=whole).circuits
    np.testing.assert_allclose(centred, plain, atol=1e-10, rtol=1e-10)
