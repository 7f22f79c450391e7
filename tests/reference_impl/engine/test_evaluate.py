"""Patched circuit evaluation against a naive per-slot implementation written here.

The naive implementation reads the transformers modules' parameters, rebuilds every
destination slot's input with explicit loops over sources (no caching, no reachability
shortcut, no stacking), prunes with its own fixed-point loop, and uses its own norm and
attention formulas; its full-circuit run is anchored to the transformers forward.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mibspec.reference_impl.engine import (
    _evaluate,
    evaluate_circuits,
    graph_universe,
    load_model,
    mean_node_outputs,
    node_circuit_edges,
    random_model,
)
from mibspec.reference_impl.engine._chunks import chunks
from mibspec.reference_impl.engine._graph_index import graph_index, read_only
from mibspec.reference_impl.engine._mixing import mix, sparse_is_cheaper
from mibspec.reference_impl.threads import one_thread

pytestmark = pytest.mark.recompute

FAMILIES = ("gpt2", "llama", "qwen2", "gemma2")
N_EXAMPLES, SEQ = 5, 7
LENGTHS = (7, 5, 6, 3, 7)


# ---------------------------------------------------------------------------- naive model


class Naive:
    """Slow reference: one loop iteration per source, per destination slot, per head."""

    def __init__(self, hf: Any) -> None:
        self.hf = hf
        self.family = {
            "GPT2LMHeadModel": "gpt2",
            "LlamaForCausalLM": "llama",
            "Qwen2ForCausalLM": "qwen2",
            "Gemma2ForCausalLM": "gemma2",
        }[type(hf).__name__]
        cfg = hf.config
        if self.family == "gpt2":
            self.blocks = list(hf.transformer.h)
            self.L, self.H, self.d = cfg.n_layer, cfg.n_head, cfg.n_embd
            self.G = self.H
            self.e = self.d // self.H
        else:
            self.blocks = list(hf.model.layers)
            self.L, self.H, self.d = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.hidden_size
            self.G = cfg.num_key_value_heads
            self.e = getattr(cfg, "head_dim", None) or self.d // self.H
        self.nf = 1 + self.L * (self.H + 1)
        self.nb = self.L * (3 * self.H + 1) + 1

    # indices, spelled out from the naming convention
    def head(self, layer: int, h: int) -> int:
        return 1 + layer * (self.H + 1) + h

    def mlp_node(self, layer: int) -> int:
        return 1 + layer * (self.H + 1) + self.H

    def slot(self, layer: int, kind: str, h: int = 0) -> int:
        base = layer * (3 * self.H + 1)
        return base + {"q": 0, "k": self.H, "v": 2 * self.H}[kind] + h if kind != "m" else base + 3 * self.H

    def n_sources(self, slot: int) -> int:
        if slot == self.nb - 1:
            return self.nf
        layer, within = divmod(slot, 3 * self.H + 1)
        return 1 + layer * (self.H + 1) + (self.H if within == 3 * self.H else 0)

    def is_head(self, f: int) -> bool:
        return f > 0 and (f - 1) % (self.H + 1) != self.H

    def layer_of(self, f: int) -> int:
        return (f - 1) // (self.H + 1)

    # model pieces
    def norm(self, x: torch.Tensor, mod: Any) -> torch.Tensor:
        if self.family == "gpt2":
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            return (x - mu) / torch.sqrt(var + mod.eps) * mod.weight + mod.bias
        eps = getattr(mod, "variance_epsilon", None) or mod.eps
        y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
        return y * (1 + mod.weight) if self.family == "gemma2" else y * mod.weight

    def embed(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        if self.family == "gpt2":
            return self.hf.transformer.wte.weight[ids] + self.hf.transformer.wpe.weight[pos]
        x = self.hf.model.embed_tokens.weight[ids]
        if self.family == "gemma2":
            x = x * torch.tensor(math.sqrt(self.d), dtype=torch.float32).to(x.dtype)
        return x

    def project(self, layer: int, kind: str, h: int, x: torch.Tensor) -> torch.Tensor:
        block = self.blocks[layer]
        if self.family == "gpt2":
            att = block.attn
            col = {"q": 0, "k": 1, "v": 2}[kind] * self.d + h * self.e
            return x @ att.c_attn.weight[:, col : col + self.e] + att.c_attn.bias[col : col + self.e]
        lin = getattr(block.self_attn, f"{kind}_proj")
        g = h if kind == "q" else h // (self.H // self.G)
        out = x @ lin.weight[g * self.e : (g + 1) * self.e].T
        if lin.bias is not None:
            out = out + lin.bias[g * self.e : (g + 1) * self.e]
        return out

    def head_output(self, layer: int, h: int, z: torch.Tensor) -> torch.Tensor:
        block = self.blocks[layer]
        if self.family == "gpt2":
            w, b = block.attn.c_proj.weight[h * self.e : (h + 1) * self.e], block.attn.c_proj.bias
        else:
            w, b = (
                block.self_attn.o_proj.weight[:, h * self.e : (h + 1) * self.e].T,
                block.self_attn.o_proj.bias,
            )
        out = z @ w
        return out if b is None else out + b / self.H

    def scale(self, layer: int) -> float:
        if self.family == "gemma2":
            return float(self.hf.config.query_pre_attn_scalar) ** -0.5
        return self.e**-0.5

    def window(self, layer: int) -> int | None:
        types = getattr(self.hf.config, "layer_types", None)
        if types and types[layer] == "sliding_attention":
            return int(self.hf.config.sliding_window)
        return None

    def attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        scores = q @ k.transpose(-1, -2) * self.scale(layer)
        cap = getattr(self.hf.config, "attn_logit_softcapping", None) if self.family == "gemma2" else None
        if cap is not None:
            scores = cap * torch.tanh(scores / cap)
        T = q.shape[-2]
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        ok = (j <= i)[None] & mask.bool()[:, None, :]
        w = self.window(layer)
        if w is not None:
            ok = ok & (i - j < w)[None]
        # padding query rows may have no visible key; give them a uniform row instead of NaN
        scores = torch.where(ok, scores, torch.full_like(scores, -1e30))
        return torch.softmax(scores, dim=-1) @ v

    def mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        block = self.blocks[layer]
        if self.family == "gpt2":
            return block.mlp(self.norm(x, block.ln_2))
        if self.family == "gemma2":
            out = block.mlp(self.norm(x, block.pre_feedforward_layernorm))
            return self.norm(out, block.post_feedforward_layernorm)
        return block.mlp(self.norm(x, block.post_attention_layernorm))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.family == "gpt2":
            out = self.norm(x, self.hf.transformer.ln_f) @ self.hf.lm_head.weight.T
        else:
            out = self.norm(x, self.hf.model.norm) @ self.hf.lm_head.weight.T
        cap = getattr(self.hf.config, "final_logit_softcapping", None) if self.family == "gemma2" else None
        return out if cap is None else cap * torch.tanh(out / cap)

    # the patched forward
    def run(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        edges: np.ndarray,
        ablated: list[torch.Tensor],
        neurons: np.ndarray | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Final-position-agnostic logits ``(N, T, V)`` and every node's output."""
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        out: list[torch.Tensor | None] = [None] * self.nf
        embedded = self.embed(ids, pos)
        out[0] = embedded

        def carried(f: int, slot: int) -> torch.Tensor:
            o = out[f]
            assert o is not None
            if not edges[f, slot]:
                return ablated[f]
            if neurons is None:
                return o
            keep = torch.as_tensor(neurons[f], dtype=o.dtype)
            return keep * o + (1 - keep) * ablated[f]

        def slot_input(slot: int) -> torch.Tensor:
            total = torch.zeros_like(embedded)
            groups: dict[int, torch.Tensor] = {}
            for f in range(self.n_sources(slot)):
                value = carried(f, slot)
                if self.family == "gemma2" and self.is_head(f):
                    layer = self.layer_of(f)
                    groups[layer] = groups.get(layer, 0) + value
                else:
                    total = total + value
            for layer, s in groups.items():
                total = total + self.norm(s, self.blocks[layer].post_attention_layernorm)
            return total

        rope = None
        if self.family != "gpt2":
            rope = self.hf.model.rotary_emb(embedded, pos)
        for layer in range(self.L):
            block = self.blocks[layer]
            ln = block.ln_1 if self.family == "gpt2" else block.input_layernorm
            for h in range(self.H):
                q, k, v = (
                    self.project(layer, kind, h, self.norm(slot_input(self.slot(layer, kind, h)), ln))
                    for kind in "qkv"
                )
                if rope is not None:
                    cos, sin = rope
                    q = q * cos + torch.cat((-q[..., self.e // 2 :], q[..., : self.e // 2]), -1) * sin
                    k = k * cos + torch.cat((-k[..., self.e // 2 :], k[..., : self.e // 2]), -1) * sin
                out[self.head(layer, h)] = self.head_output(layer, h, self.attend(layer, q, k, v, mask))
            out[self.mlp_node(layer)] = self.mlp(layer, slot_input(self.slot(layer, "m")))
        final = slot_input(self.nb - 1)
        return self.logits(final), [o for o in out if o is not None]


def naive_prune(nv: Naive, edges: np.ndarray) -> np.ndarray:
    """EAP-IG's iterative prune, to a fixed point, one edge at a time."""
    e = edges.copy()
    changed = True
    while changed:
        changed = False
        has_in = [f == 0 for f in range(nv.nf)]
        has_out = [False] * nv.nf
        for f in range(nv.nf):
            for s in range(nv.nb):
                if e[f, s]:
                    has_out[f] = True
                    if s != nv.nb - 1:
                        has_in[_owner(nv, s)] = True
        for f in range(nv.nf):
            for s in range(nv.nb):
                if not e[f, s]:
                    continue
                dst_alive = s == nv.nb - 1 or has_out[_owner(nv, s)]
                if not has_in[f] or not dst_alive:
                    e[f, s] = False
                    changed = True
    return e


def _owner(nv: Naive, slot: int) -> int:
    layer, within = divmod(slot, 3 * nv.H + 1)
    if within == 3 * nv.H:
        return nv.mlp_node(layer)
    return nv.head(layer, within % nv.H)


def naive_metrics(
    nv: Naive,
    data: dict[str, torch.Tensor],
    circuits: np.ndarray,
    *,
    ablation: str = "counterfactual",
    neurons: np.ndarray | None = None,
    prune: bool = True,
) -> np.ndarray:
    """``(K, N)`` metric of each circuit, computed one circuit at a time."""
    full = np.zeros((nv.nf, nv.nb), dtype=bool)
    for s in range(nv.nb):
        full[: nv.n_sources(s), s] = True
    mask = data["mask"]
    with torch.no_grad():
        _, corrupted_nodes = nv.run(data["corrupted"], mask, full, [])
        if ablation == "counterfactual":
            ablated = corrupted_nodes
        elif ablation == "zero":
            ablated = [torch.zeros_like(o) for o in corrupted_nodes]
        else:
            w = mask.to(corrupted_nodes[0].dtype)[..., None]
            ablated = [((o * w).sum((0, 1)) / w.sum()).expand_as(o) for o in corrupted_nodes]
        read = mask.sum(1) - 1
        rows = []
        for k, circuit in enumerate(circuits):
            edges = naive_prune(nv, circuit) if prune else circuit
            logits, _ = nv.run(data["clean"], mask, edges, ablated, None if neurons is None else neurons[k])
            at = logits[torch.arange(len(read)), read]
            m = at.gather(1, data["correct"][:, None]) - at.gather(1, data["counterfactual"][:, None])
            rows.append(m[:, 0].double().numpy())
    return np.stack(rows)


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    # Tiny tensors: thread hand-offs cost more than they save, and on a shared machine
    # they make the timings erratic.
    with one_thread():
        yield


def _data(vocab: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[1] * n + [0] * (SEQ - n) for n in LENGTHS])
    clean = torch.randint(0, vocab, (N_EXAMPLES, SEQ), generator=gen) * mask
    corrupted = torch.randint(0, vocab, (N_EXAMPLES, SEQ), generator=gen) * mask
    return {
        "clean": clean,
        "corrupted": corrupted,
        "mask": mask,
        "correct": torch.randint(0, vocab, (N_EXAMPLES,), generator=gen),
        "counterfactual": torch.randint(0, vocab, (N_EXAMPLES,), generator=gen),
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any, Naive]]:
    """Tiny float64 models of every family: (engine weights, transformers module, naive)."""
    from transformers import AutoModelForCausalLM

    built = {}
    for i, family in enumerate(FAMILIES):
        path = random_model(family, tmp_path_factory.mktemp(family), seed=10 + i)
        hf = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float64, attn_implementation="eager", trust_remote_code=False
        )
        hf.eval()
        built[family] = (load_model(path, dtype="float64"), hf, Naive(hf))
    return built


def _random_circuits(universe: Any, seed: int, densities: tuple[float, ...]) -> np.ndarray:
    rng = np.random.default_rng(seed)
    draws = [rng.random(universe.edge_mask.shape) < p for p in densities]
    return np.stack(draws) & universe.edge_mask[None]


def _engine(weights: Any, data: dict[str, torch.Tensor], circuits: np.ndarray, **kw: Any) -> Any:
    return evaluate_circuits(
        weights,
        data["clean"],
        data["corrupted"],
        data["mask"],
        data["correct"],
        data["counterfactual"],
        circuits,
        **kw,
    )


DENSITIES = (0.03, 0.1, 0.3, 0.6, 0.95)

# ---------------------------------------------------------------------------- tests


@pytest.mark.parametrize("family", FAMILIES)
def test_naive_full_circuit_is_the_transformers_forward(models: dict[str, Any], family: str) -> None:
    _, hf, nv = models[family]
    data = _data(64, 1)
    # float32 reference: transformers' float64 Gemma-2 path produces NaN on padded rows
    hf32 = copy.deepcopy(hf).to(torch.float32)
    full = np.zeros((nv.nf, nv.nb), dtype=bool)
    for s in range(nv.nb):
        full[: nv.n_sources(s), s] = True
    with torch.no_grad():
        ours, _ = nv.run(data["clean"], data["mask"], full, [])
        ref = hf32(input_ids=data["clean"], attention_mask=data["mask"]).logits
    real = data["mask"].bool()
    np.testing.assert_allclose(ours[real].numpy(), ref[real].double().numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_counterfactual_patching_matches_naive(models: dict[str, Any], family: str) -> None:
    weights, _, nv = models[family]
    data = _data(64, 2)
    circuits = _random_circuits(graph_universe(weights), 3, DENSITIES)
    got = _engine(weights, data, circuits)
    want = naive_metrics(nv, data, circuits)
    np.testing.assert_allclose(got.circuits, want, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("ablation", ["mean", "zero"])
def test_mean_and_zero_ablation_match_naive(models: dict[str, Any], family: str, ablation: str) -> None:
    weights, _, nv = models[family]
    data = _data(64, 4)
    circuits = _random_circuits(graph_universe(weights), 5, DENSITIES)
    got = _engine(weights, data, circuits, ablation=ablation)
    want = naive_metrics(nv, data, circuits, ablation=ablation)
    np.testing.assert_allclose(got.circuits, want, atol=1e-10, rtol=1e-10)
    empty = naive_metrics(nv, data, np.zeros((1, nv.nf, nv.nb), dtype=bool), ablation=ablation)[0]
    np.testing.assert_allclose(got.empty, empty, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("family", ["gpt2", "gemma2"])
@pytest.mark.parametrize("ablation", ["counterfactual", "mean"])
def test_neuron_masks_match_naive(models: dict[str, Any], family: str, ablation: str) -> None:
    weights, _, nv = models[family]
    data = _data(64, 6)
    circuits = _random_circuits(graph_universe(weights), 7, (0.2, 0.5, 0.9))
    rng = np.random.default_rng(8)
    neurons = rng.random((3, nv.nf, nv.d)) < 0.6
    got = _engine(weights, data, circuits, neurons=neurons, ablation=ablation)
    want = naive_metrics(nv, data, circuits, neurons=neurons, ablation=ablation)
    np.testing.assert_allclose(got.circuits, want, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_and_full_circuits_are_the_plain_runs(models: dict[str, Any], family: str) -> None:
    weights, hf, _ = models[family]
    data = _data(64, 9)
    universe = graph_universe(weights)
    circuits = np.stack([np.zeros_like(universe.edge_mask), universe.edge_mask.copy()])
    got = _engine(weights, data, circuits)
    read = data["mask"].sum(1) - 1
    hf32 = copy.deepcopy(hf).to(torch.float32)
    with torch.no_grad():
        for ids, want_row in ((data["corrupted"], got.empty), (data["clean"], got.clean)):
            logits = hf32(input_ids=ids, attention_mask=data["mask"]).logits.double()
            at = logits[torch.arange(N_EXAMPLES), read]
            m = (at.gather(1, data["correct"][:, None]) - at.gather(1, data["counterfactual"][:, None]))[:, 0]
            np.testing.assert_allclose(want_row, m.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(got.circuits[0], got.empty)
    np.testing.assert_array_equal(got.circuits[1], got.clean)
    assert got.n_edges.tolist() == [0, universe.n_edges]


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_stacking_and_batch_size_do_not_change_values(models: dict[str, Any], family: str) -> None:
    weights, _, _ = models[family]
    data = _data(64, 11)
    # dense circuits reach every node, so they are stacked together
    circuits = _random_circuits(graph_universe(weights), 12, (*DENSITIES, 0.7, 0.8, 0.9))
    stacked = _engine(weights, data, circuits, batch_size=N_EXAMPLES, memory_budget=2**34)
    alone = _engine(weights, data, circuits, batch_size=N_EXAMPLES, memory_budget=1)
    one_by_one = np.stack([_engine(weights, data, c[None], batch_size=2).circuits[0] for c in circuits])
    small_batches = _engine(weights, data, circuits, batch_size=1)
    for other in (alone.circuits, one_by_one, small_batches.circuits):
        np.testing.assert_allclose(stacked.circuits, other, atol=1e-12, rtol=1e-12)
    np.testing.assert_allclose(stacked.clean, small_batches.clean, atol=1e-12, rtol=1e-12)


def test_float32_stacking_and_batches_agree(tmp_path: Path) -> None:
    weights = load_model(random_model("qwen2", tmp_path, seed=3), dtype="float32")
    data = _data(64, 13)
    circuits = _random_circuits(graph_universe(weights), 14, DENSITIES)
    a = _engine(weights, data, circuits, batch_size=N_EXAMPLES)
    b = _engine(weights, data, circuits, batch_size=2, memory_budget=1)
    np.testing.assert_allclose(a.circuits, b.circuits, atol=1e-6, rtol=1e-6)
    assert a.circuits.dtype == np.float64


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_16bit_circuits_are_evaluated_alone_whatever_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str
) -> None:
    """ME-10: a 16-bit circuit's values are those of its pass alone (its products' shapes must
    not depend on the other circuits of the evaluation); float32 still stacks."""
    weights = load_model(random_model("llama", tmp_path, seed=5), dtype=dtype)
    data = _data(64, 17)
    # dense circuits reach every node: stacked together in float32
    circuits = _random_circuits(graph_universe(weights), 19, (0.7, 0.8, 0.9, 0.95))
    sizes: list[int] = []
    original = _evaluate.PatchedPass

    def counting(*args: Any, **kwargs: Any) -> Any:
        run = original(*args, **kwargs)
        sizes.append(run.st.C)
        return run

    monkeypatch.setattr(_evaluate, "PatchedPass", counting)
    together = _engine(weights, data, circuits, batch_size=N_EXAMPLES, memory_budget=2**34)
    if dtype == "float32":
        assert max(sizes) > 1
        return
    assert sizes
    assert set(sizes) == {1}
    for i, circuit in enumerate(circuits):
        alone = _engine(weights, data, circuit[None], batch_size=N_EXAMPLES, memory_budget=2**34)
        np.testing.assert_array_equal(together.circuits[i], alone.circuits[0])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), density=st.floats(0.02, 0.9))
def test_pruning_never_changes_counterfactual_values(
    models: dict[str, Any], seed: int, density: float
) -> None:
    # Under counterfactual patching an edge from an unreachable source carries the corrupted
    # value it would carry anyway, and an edge into a dead end cannot reach the logits, so
    # the naive run of the unpruned circuit must agree with the engine (which prunes).
    weights, _, nv = models["gpt2"]
    data = _data(64, 15)
    circuits = _random_circuits(graph_universe(weights), seed, (density,))
    got = _engine(weights, data, circuits)
    want = naive_metrics(nv, data, circuits, prune=False)
    np.testing.assert_allclose(got.circuits, want, atol=1e-10, rtol=1e-10)


def test_node_circuits_map_to_edges_between_kept_nodes(models: dict[str, Any]) -> None:
    weights, _, nv = models["gpt2"]
    universe = graph_universe(weights)
    rng = np.random.default_rng(16)
    nodes = rng.random((3, nv.nf)) < 0.5
    nodes[:, 0] = True
    edges = node_circuit_edges(universe, nodes)
    for k in range(3):
        for f in range(nv.nf):
            for s in range(nv.nb):
                expected = (
                    bool(nodes[k, f])
                    and f < nv.n_sources(s)
                    and (s == nv.nb - 1 or bool(nodes[k, _owner(nv, s)]))
                )
                assert edges[k, f, s] == expected
    data = _data(64, 17)
    np.testing.assert_allclose(
        _engine(weights, data, edges).circuits, naive_metrics(nv, data, edges), atol=1e-10, rtol=1e-10
    )


def test_optimal_ablation_with_the_mean_vectors_is_mean_ablation(models: dict[str, Any]) -> None:
    weights, _, _ = models["qwen2"]
    data = _data(64, 18)
    circuits = _random_circuits(graph_universe(weights), 19, DENSITIES)
    means = mean_node_outputs(weights, data["corrupted"], data["mask"])
    a = _engine(weights, data, circuits, ablation="mean")
    b = _engine(weights, data, circuits, ablation="optimal", ablation_values=means.numpy())
    np.testing.assert_array_equal(a.circuits, b.circuits)


def test_mean_over_another_token_set(models: dict[str, Any]) -> None:
    weights, _, _ = models["gpt2"]
    data = _data(64, 20)
    other = _data(64, 21)
    circuits = _random_circuits(graph_universe(weights), 22, (0.3,))
    a = _engine(weights, data, circuits, ablation="mean", mean_ids=other["clean"], mean_mask=other["mask"])
    means = mean_node_outputs(weights, other["clean"], other["mask"])
    b = _engine(weights, data, circuits, ablation="optimal", ablation_values=means.numpy())
    np.testing.assert_array_equal(a.circuits, b.circuits)


def test_mean_node_outputs_is_the_token_mean(models: dict[str, Any]) -> None:
    weights, _, nv = models["llama"]
    data = _data(64, 23)
    full = np.zeros((nv.nf, nv.nb), dtype=bool)
    for s in range(nv.nb):
        full[: nv.n_sources(s), s] = True
    with torch.no_grad():
        _, nodes = nv.run(data["corrupted"], data["mask"], full, [])
    want = np.zeros((nv.nf, nv.d))
    count = 0
    for n in range(N_EXAMPLES):
        for t in range(LENGTHS[n]):
            count += 1
            for f in range(nv.nf):
                want[f] += nodes[f][n, t].numpy()
    got = mean_node_outputs(weights, data["corrupted"], data["mask"], batch_size=2)
    np.testing.assert_allclose(got.numpy(), want / count, atol=1e-12)


# ---------------------------------------------------------------------------- bad input


def test_bad_arguments_are_named(models: dict[str, Any]) -> None:
    weights, _, _ = models["gpt2"]
    data = _data(64, 24)
    universe = graph_universe(weights)
    good = universe.edge_mask[None].copy()
    with pytest.raises(ValueError, match="ablation"):
        _engine(weights, data, good, ablation="resample")
    with pytest.raises(ValueError, match="circuits"):
        _engine(weights, data, good.astype(int))
    with pytest.raises(ValueError, match="circuits"):
        _engine(weights, data, good[:, :, :-1])
    with pytest.raises(ValueError, match="neurons"):
        _engine(weights, data, good, neurons=np.ones((1, universe.n_forward, 3), dtype=bool))
    with pytest.raises(ValueError, match="ablation_values"):
        _engine(weights, data, good, ablation="optimal")
    with pytest.raises(ValueError, match="ablation_values"):
        _engine(weights, data, good, ablation_values=np.zeros((universe.n_forward, weights.d_model)))
    with pytest.raises(ValueError, match="batch_size"):
        _engine(weights, data, good, batch_size=0)
    with pytest.raises(ValueError, match="memory_budget"):
        _engine(weights, data, good, memory_budget=-1)
    with pytest.raises(ValueError, match="correct"):
        evaluate_circuits(
            weights,
            data["clean"],
            data["corrupted"],
            data["mask"],
            data["correct"][:2],
            data["counterfactual"],
            good,
        )
    with pytest.raises(ValueError, match="counterfactual"):
        evaluate_circuits(
            weights,
            data["clean"],
            data["corrupted"],
            data["mask"],
            data["correct"],
            data["counterfactual"] + 1000,
            good,
        )
    with pytest.raises(ValueError, match="corrupted_ids"):
        evaluate_circuits(
            weights,
            data["clean"],
            data["corrupted"][:, :-1],
            data["mask"],
            data["correct"],
            data["counterfactual"],
            good,
        )
    bad_mask = data["mask"].clone()
    bad_mask[0, 0] = 0
    with pytest.raises(ValueError, match="attention_mask"):
        evaluate_circuits(
            weights, data["clean"], data["corrupted"], bad_mask, data["correct"], data["counterfactual"], good
        )
    outside = good.copy()
    outside[0, -1, 0] = True
    with pytest.raises(ValueError, match="circuits"):
        _engine(weights, data, outside)


def test_edge_vectors_are_accepted(models: dict[str, Any]) -> None:
    weights, _, _ = models["gpt2"]
    data = _data(64, 25)
    universe = graph_universe(weights)
    circuits = _random_circuits(universe, 26, (0.2, 0.5))
    vectors = circuits[:, universe.edge_mask]
    a = _engine(weights, data, circuits)
    b = _engine(weights, data, vectors)
    np.testing.assert_array_equal(a.circuits, b.circuits)
    np.testing.assert_array_equal(a.n_edges, [universe.prune(c).sum() for c in circuits])


def test_repeated_evaluation_is_identical(models: dict[str, Any]) -> None:
    weights, _, _ = models["gemma2"]
    data = _data(64, 27)
    circuits = _random_circuits(graph_universe(weights), 28, DENSITIES)
    a = _engine(weights, data, circuits, ablation="mean")
    b = _engine(weights, data, circuits, ablation="mean")
    np.testing.assert_array_equal(a.circuits, b.circuits)
    np.testing.assert_array_equal(a.empty, b.empty)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_bfloat16_evaluation_tracks_float32(tmp_path: Path, family: str) -> None:
    path = random_model(family, tmp_path, seed=29)
    data = _data(64, 30)
    low = load_model(path, dtype="bfloat16")
    high = load_model(path, dtype="float32")
    circuits = _random_circuits(graph_universe(high), 31, DENSITIES)
    a = _engine(low, data, circuits)
    b = _engine(high, data, circuits)
    assert a.circuits.dtype == np.float64
    scale = float(np.abs(b.clean).max())
    # bf16 keeps about three significant digits per operation (ME-10)
    np.testing.assert_allclose(a.circuits, b.circuits, atol=0.05 * scale)
    np.testing.assert_allclose(a.clean, b.clean, atol=0.05 * scale)


def test_circuits_are_stacked_by_reachable_set_and_budget() -> None:
    reach = np.zeros((5, 20), dtype=bool)
    reach[0, :3] = True  # 3 nodes
    reach[1, :3] = True
    reach[2, [0, 1, 5]] = True  # union with the first two: 4 nodes, within 3 + 2
    reach[3, :18] = True
    reach[4, :19] = True
    order = np.arange(5)
    groups = [g.tolist() for g in chunks(order, reach, lambda n: 10 * n, budget=10**6)]
    assert groups == [[0, 1, 2], [3, 4]]
    # the budget splits a group: 2 circuits × 10 bytes × 19 nodes > 300
    groups = [g.tolist() for g in chunks(order, reach, lambda n: 10 * n, budget=300)]
    assert groups == [[0, 1, 2], [3], [4]]


@pytest.mark.parametrize("family", ["gpt2", "gemma2"])
@pytest.mark.parametrize("mixing", ["dense", "sparse"])
def test_dense_and_sparse_mixing_match_naive(
    models: dict[str, Any], family: str, mixing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slot inputs summed by a dense 0/1 product or edge by edge: the same values, run to run
    weights, _, nv = models[family]
    data = _data(64, 32)
    circuits = _random_circuits(graph_universe(weights), 33, DENSITIES)
    monkeypatch.setattr(_evaluate, "_MIXING", mixing)
    got = _engine(weights, data, circuits, memory_budget=2**34)
    again = _engine(weights, data, circuits, memory_budget=2**34)
    np.testing.assert_array_equal(got.circuits, again.circuits)
    np.testing.assert_allclose(got.circuits, naive_metrics(nv, data, circuits), atol=1e-10, rtol=1e-10)


def test_float32_dense_and_sparse_mixing_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = load_model(random_model("gpt2", tmp_path, seed=34), dtype="float32")
    data = _data(64, 35)
    circuits = _random_circuits(graph_universe(weights), 36, (*DENSITIES, 0.7, 0.8, 0.9))
    runs = {}
    for mixing in ("auto", "dense", "sparse"):
        monkeypatch.setattr(_evaluate, "_MIXING", mixing)
        runs[mixing] = _engine(weights, data, circuits, memory_budget=2**34).circuits
        again = _engine(weights, data, circuits, memory_budget=2**34).circuits
        np.testing.assert_array_equal(runs[mixing], again)
    for mixing in ("auto", "sparse"):
        np.testing.assert_allclose(runs[mixing], runs["dense"], atol=1e-6, rtol=1e-6)


def test_mix_chooses_per_circuit() -> None:
    rng = np.random.default_rng(37)
    k, s, n = 6, 40, 50
    w = np.zeros((3, k, s), dtype=bool)
    w[0] = rng.random((k, s)) < 0.9  # dense: the batched product
    w[1, :, 0] = True  # one edge per slot: sums of rows
    w[1, 2] = False  # a slot without any edge is zero
    w[2] = rng.random((k, s)) < 0.05
    choice = [sparse_is_cheaper(int(c.sum()), k, s) for c in w]
    assert choice == [False, True, True]
    rows = torch.from_numpy(rng.standard_normal((3, s, n)))
    got = mix(w, rows)
    want = torch.einsum("cks,csn->ckn", torch.from_numpy(w.astype(np.float64)), rows)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12, rtol=1e-12)
    assert not got[1, 2].any()


# ---------------------------------------------------------------------------- read positions


def _needed_everywhere_by_paths(universe: Any, circuit: np.ndarray) -> np.ndarray:
    """Nodes with a circuit path, through nodes reachable from input, into a k or v slot.

    Written from the definition, one depth-first search per node over explicit edges.
    """
    reach = universe.reachable_from_input(circuit)
    names = universe.backward_names
    node_of = {}
    for s, name in enumerate(names):
        if name != "logits":
            node_of[s] = universe.forward_index(name.split("<")[0])
    spreads = [name.endswith(("<k>", "<v>")) for name in names]
    out: np.ndarray = np.zeros(universe.n_forward, dtype=bool)
    for start in range(1, universe.n_forward):
        stack, seen = [start], {start}
        while stack and not out[start]:
            f = stack.pop()
            for s in np.flatnonzero(circuit[f]):
                if s not in node_of or not reach[node_of[s]]:
                    continue
                if spreads[s]:
                    out[start] = True
                    break
                if node_of[s] not in seen:
                    seen.add(node_of[s])
                    stack.append(node_of[s])
    return out & reach


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_read_only_nodes_follow_their_definition(models: dict[str, Any], family: str) -> None:
    weights, _, _ = models[family]
    universe = graph_universe(weights)
    ix = graph_index(weights, universe)
    circuits = np.stack([universe.prune(c) for c in _random_circuits(universe, 40, DENSITIES)])
    reach = np.stack([universe.reachable_from_input(c) for c in circuits])
    everywhere = np.stack([_needed_everywhere_by_paths(universe, c) for c in circuits])
    for k in range(len(circuits)):
        got = read_only(ix, circuits[k : k + 1], reach[k : k + 1])
        np.testing.assert_array_equal(got[1:] & reach[k, 1:], ~everywhere[k, 1:] & reach[k, 1:])
    # a stack computes a node at every position when one of its circuits needs that
    stacked = read_only(ix, circuits, reach)
    np.testing.assert_array_equal(stacked[1:], ~everywhere.any(axis=0)[1:])
    assert (~everywhere[:, 1:] & reach[:, 1:]).any(), "the circuits should have read-only nodes"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("ablation", ["counterfactual", "mean"])
def test_mlps_computed_at_read_positions_only_match_naive(
    models: dict[str, Any], family: str, ablation: str
) -> None:
    weights, _, nv = models[family]
    universe = graph_universe(weights)
    ix = graph_index(weights, universe)
    data = _data(64, 41)
    circuits = _random_circuits(universe, 42, (0.3, 0.6, 0.9))
    # in the second circuit the first MLP feeds no k or v slot: read only unless a q or MLP
    # slot it feeds is needed everywhere
    spreads = np.array([n.endswith(("<k>", "<v>")) for n in universe.backward_names])
    circuits[1, ix.mlp[0], spreads] = False
    # the last MLP, fed by input, feeds only the logits: read only in every circuit
    circuits[:, 0, ix.slot_mlp[-1]] = True
    circuits[:, ix.mlp[-1], ix.slot_logits] = True
    pruned = np.stack([universe.prune(c) for c in circuits])
    reach = np.stack([universe.reachable_from_input(c) for c in pruned])
    read_only_mlps = [
        int((read_only(ix, pruned[k : k + 1], reach[k : k + 1]) & reach[k])[ix.mlp].sum())
        for k in range(len(circuits))
    ]
    assert all(n > 0 for n in read_only_mlps), read_only_mlps
    assert read_only_mlps[1] >= 2, read_only_mlps
    want = naive_metrics(nv, data, circuits, ablation=ablation)
    alone = _engine(weights, data, circuits, ablation=ablation, memory_budget=1)
    stacked = _engine(weights, data, circuits, ablation=ablation, memory_budget=2**34)
    np.testing.assert_allclose(alone.circuits, want, atol=1e-10, rtol=1e-10)
    np.testing.assert_allclose(stacked.circuits, want, atol=1e-10, rtol=1e-10)


def test_batches_are_cut_to_their_longest_row_and_reported(models: dict[str, Any]) -> None:
    weights, _, nv = models["llama"]
    data = _data(64, 43)
    circuits = _random_circuits(graph_universe(weights), 44, (0.2, 0.7))
    # four more padding columns than any row needs
    padded = {
        key: torch.cat([value, torch.zeros((N_EXAMPLES, 4), dtype=value.dtype)], dim=1)
        if value.ndim == 2
        else value
        for key, value in data.items()
    }
    seen: list[int] = []
    got = _engine(weights, padded, circuits, batch_size=2, progress=seen.append)
    plain = _engine(weights, data, circuits, batch_size=2)
    np.testing.assert_array_equal(got.circuits, plain.circuits)
    np.testing.assert_allclose(got.circuits, naive_metrics(nv, data, circuits), atol=1e-10, rtol=1e-10)
    assert seen == [2, 4, 5]  # examples done after each batch
