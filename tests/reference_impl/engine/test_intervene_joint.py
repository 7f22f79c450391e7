"""Joint interventions (MV-10): several sites written in one forward pass, against hooks.

Independent anchor: the transformers model of the same folder, one prompt at a time, with a
forward pre-hook on the output projection of every layer the unit touches. The source run
records each site's head values at every token; the base run replaces them, site by site as
the pass reaches them, with the float64 numpy feature map of that site's featurizer. The
engine runs all pairs in one right-padded batch with its own forward.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mibspec.metrics.featurizers import NumpyFeaturizer
from mibspec.reference_impl.threads import one_thread

pytestmark = pytest.mark.recompute
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
CF_TYPE = "io_s1_flip_io_s2_flip"
#: (layer, head) of each site: two heads of layer 1 as separate sites, one of layer 3
SITES = ((1, 2), (1, 0), (3, 1))


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    with one_thread():
        yield


def _featurizer(e: int, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(e, 3)))
    return {"type": "subspace", "n_features": 3, "feature_indices": [0, 2]}, {
        "rotation": np.ascontiguousarray(q.T)
    }


def _o_proj(hf: Any, family: str, layer: int) -> Any:
    return (
        hf.transformer.h[layer].attn.c_proj if family == "gpt2" else hf.model.layers[layer].self_attn.o_proj
    )


def _slow_joint_logits(
    hf: Any, family: str, e: int, featurizers: list[NumpyFeaturizer], base: list[int], source: list[int]
) -> np.ndarray:
    """The base's last logits with every site's head values at every token taken from the
    source run through that site's featurizer (the pair has one length: rule ``all``)."""
    captured: dict[int, np.ndarray] = {}

    def hooks(action: Any) -> list[Any]:
        handles = []
        for layer in sorted({layer for layer, _ in SITES}):
            mine = [(i, head) for i, (at, head) in enumerate(SITES) if at == layer]

            def pre(mod: Any, args: tuple[Any, ...], mine: list[tuple[int, int]] = mine) -> Any:
                return action(args[0], mine)

            handles.append(_o_proj(hf, family, layer).register_forward_pre_hook(pre))
        return handles

    def capture(t: Any, mine: list[tuple[int, int]]) -> None:
        for i, head in mine:
            captured[i] = t[0, :, head * e : (head + 1) * e].double().numpy()

    def interchange(t: Any, mine: list[tuple[int, int]]) -> Any:
        t = t.clone()
        for i, head in mine:
            for pos in range(t.shape[1]):
                now = t[0, pos, head * e : (head + 1) * e].double().numpy()
                new = featurizers[i].interchange(now[None], captured[i][pos][None])[0]
                t[0, pos, head * e : (head + 1) * e] = torch.as_tensor(new, dtype=t.dtype)
        return (t,)

    for handle_list, ids in ((hooks(capture), source), (hooks(interchange), base)):
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0, -1].double().numpy()
        for handle in handle_list:
            handle.remove()
    return logits


def _pairs(tokenizer: Any) -> list[tuple[list[int], list[int]]]:
    lines = (REPO / "examples" / "datasets" / "ioi" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    pairs = []
    for line in lines[:60]:
        row = json.loads(line)
        base = list(tokenizer.encode(row["base"]["prompt"], add_special_tokens=False).ids)
        source = list(
            tokenizer.encode(row["counterfactuals"][CF_TYPE]["prompt"], add_special_tokens=False).ids
        )
        if len(base) == len(source):
            pairs.append((base, source))
    by_length = {len(b): (b, s) for b, s in pairs}
    return list(by_length.values())[:4]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_heads_of_several_layers_in_one_pass_match_per_example_hooks(
    loaded: dict[str, tuple[Any, Any, Any]], family: str
) -> None:
    from mibspec.reference_impl.engine import (
        JointWrite,
        Site,
        TorchFeaturizer,
        forward_sites,
        intervened_logits,
    )

    model, hf, tokenizer = loaded[family]
    e = model.d_head
    docs = [_featurizer(e, seed) for seed in range(len(SITES))]
    sites = [Site(layer, "attention_heads", (head,)) for layer, head in SITES]
    pairs = _pairs(tokenizer)
    assert len(pairs) >= 3
    assert len({len(b) for b, _ in pairs}) > 1  # padding is exercised

    def batch(which: int) -> tuple[Any, Any]:
        ids = torch.zeros((len(pairs), max(len(p[which]) for p in pairs)), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(pairs):
            ids[i, : len(p[which])], mask[i, : len(p[which])] = torch.tensor(p[which]), 1
        return ids, mask

    rows = torch.tensor([i for i, (b, _) in enumerate(pairs) for _ in b])
    positions = torch.tensor([at for b, _ in pairs for at in range(len(b))])
    with torch.no_grad():
        _, recorded = forward_sites(model, *batch(1), record=sites)
        sources = [torch.cat([recorded[s][i, : len(b)] for i, (b, _) in enumerate(pairs)]) for s in sites]
        torch_featurizers = [TorchFeaturizer(doc, weights) for doc, weights in docs]
        joint = [
            JointWrite(s, f, v) for s, f, v in zip(sites[1:], torch_featurizers[1:], sources[1:], strict=True)
        ]
        got = intervened_logits(
            model, *batch(0), sites[0], positions, sources[0], torch_featurizers[0], rows=rows, joint=joint
        )
        first_only = intervened_logits(
            model, *batch(0), sites[0], positions, sources[0], torch_featurizers[0], rows=rows
        )
    numpy_featurizers = [NumpyFeaturizer(doc, weights) for doc, weights in docs]
    for i, (base, source) in enumerate(pairs):
        expected = _slow_joint_logits(hf, family, e, numpy_featurizers, base, source)
        np.testing.assert_allclose(got[i].double().numpy(), expected, atol=2e-4, rtol=1e-4)
    # the further sites changed the output: the joint run is not the first site's alone
    assert float((got - first_only).abs().max()) > 1e-3


def test_a_site_written_twice_in_one_intervention_is_refused(loaded: dict[str, tuple[Any, Any, Any]]) -> None:
    from mibspec.reference_impl.engine import (
        JointWrite,
        Site,
        TorchFeaturizer,
        greedy_tokens,
        intervened_logits,
    )

    model = loaded["gpt2"][0]
    doc, weights = _featurizer(model.d_head, 0)
    featurizer = TorchFeaturizer(doc, weights)
    site = Site(1, "attention_heads", (2,))
    ids, mask = torch.tensor([[1, 2, 3]]), torch.ones((1, 3), dtype=torch.long)
    at, src = torch.tensor([2]), torch.zeros((1, model.d_head))
    with pytest.raises(ValueError, match="written twice"):
        intervened_logits(
            model, ids, mask, site, at, src, featurizer, joint=[JointWrite(site, featurizer, src)]
        )
    with pytest.raises(ValueError, match="need a first site"):
        greedy_tokens(model, ids, mask, 2, joint=[JointWrite(site, featurizer, src)])
