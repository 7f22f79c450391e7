"""What a patched evaluation holds beside the weights, and the rule bounding it (engine.md ME-9).

Independent anchors: the parameter bytes safetensors' own reader finds in the model file;
per-query-head q/k/v projections built directly from the model's q, k and v blocks and its
key-value groups; a plain forward of the corrupted examples alone; the batch size
``verify`` passes to the engine, read where it is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import mibspec
from mibspec.reference_impl import engine
from mibspec.reference_impl.engine import _forward, random_model
from mibspec.reference_impl.engine._chunks import MAX_STACK_BYTES, stack_budget
from mibspec.reference_impl.engine._patched_forward import HeadWeights
from mibspec.reference_impl.threads import one_thread

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    with one_thread():
        yield


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    # grouped-query attention with 4 query heads per key-value head, biases on q/k/v
    folder = random_model(
        "qwen2", tmp_path_factory.mktemp("qwen2"), seed=3, n_heads=8, num_key_value_heads=2, d_model=64
    )
    return folder, engine.load_model(folder)


def test_weight_bytes_are_the_parameters_of_the_file(qwen: tuple[Path, Any]) -> None:
    folder, model = qwen
    tensors = load_file(folder / "model.safetensors")
    # a tied unembedding is the embedding's storage: counted once, as in the file
    expected = sum(t.numel() * t.element_size() for t in tensors.values())
    expected += model.rope_inv_freq.numel() * 4  # the rotary frequencies, float32, not in the file
    assert engine.weight_bytes(model) == expected
    assert engine.activation_budget(model) == max(expected // 4, 2**28)


def test_head_weights_project_each_slot_like_its_query_head(qwen: tuple[Path, Any]) -> None:
    _, model = qwen
    H, G = model.n_heads, model.n_kv_heads
    group = [h * G // H for h in range(H)]  # query head h reads key-value head h // (H / G)
    heads = HeadWeights(model)
    rng = np.random.default_rng(0)
    chosen = [np.arange(3 * H), np.array([0, 1, 2, 3, 4, 6, 7, H, H + 1]), np.array([H + 3, 2 * H + 5])]
    chosen += [np.flatnonzero(rng.random(3 * H) < 0.4) for _ in range(20)]
    for li, layer in enumerate(model.layers):
        blocks = [layer.w_q, layer.w_k, layer.w_v]  # (d, H or G, e)
        biases = [layer.b_q, layer.b_k, layer.b_v]
        for slots in chosen:
            if not len(slots):
                continue
            w, b = heads.slots(li, slots)
            for row, slot in enumerate(slots.tolist()):
                kind, h = divmod(slot, H)
                column = h if kind == 0 else group[h]
                assert torch.equal(w[row], blocks[kind][:, column])
                assert b is not None
                assert torch.equal(b[row], biases[kind][column])


def test_16bit_head_weights_are_views_of_the_weights(qwen: tuple[Path, Any]) -> None:
    """The products copy 16-bit operands to float32 anyway: no second copy of q/k/v is kept."""
    folder, model = qwen
    low = engine.load_model(folder, dtype="bfloat16")
    heads = HeadWeights(low)
    assert not heads.keep
    w, _ = heads.get(0)
    assert w.untyped_storage().data_ptr() == low.layers[0].w_qkv.untyped_storage().data_ptr()
    assert not heads.cache
    # in float32 the permuted layout is built once per layer and kept
    wide = HeadWeights(model)
    w32, _ = wide.get(0)
    assert wide.keep
    assert w32.is_contiguous()
    assert 0 in wide.cache
    for slots in (np.arange(3 * model.n_heads), np.array([1, model.n_heads + 2])):
        a, _ = heads.slots(0, slots)
        b, _ = wide.slots(0, slots)
        assert torch.equal(a.float(), b.to(torch.bfloat16).float())


def test_the_ablation_state_is_the_corrupted_run_alone(qwen: tuple[Path, Any]) -> None:
    _, model = qwen
    rng = np.random.default_rng(1)
    ids = torch.as_tensor(rng.integers(0, model.vocab_size, (6, 7)))
    mask = torch.ones_like(ids)
    mask[4, 5:] = 0
    final, kept = _forward.trace_rows(model, ids, mask, slice(3, 6), head_nodes=False)
    alone = _forward.trace(model, ids[3:], mask[3:], head_nodes=False)
    assert final.shape[0] == 6
    for got, want in [(kept.final, alone.final), (kept.nodes[0], alone.nodes[0])]:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for name in ("slot_pre", "slot_mid", "q", "k", "v", "z"):
        for got, want in zip(getattr(kept, name), getattr(alone, name), strict=True):
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_stack_budget_is_what_the_state_leaves() -> None:
    class Fake:
        layers = ()

    model: Any = Fake()
    # no tensors: the activation budget is its floor, 256 MiB
    assert stack_budget(model, 0) == MAX_STACK_BYTES
    assert stack_budget(model, 2**27) == 2**28 - 2**27
    assert stack_budget(model, 2**30) == 1  # a pass still holds one circuit


def test_verify_caps_the_batch_by_the_activation_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    evaluate = engine.evaluate_circuits

    def spy(*args: Any, **kwargs: Any) -> Any:
        sizes.append(kwargs["batch_size"])
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(engine, "evaluate_circuits", spy)
    monkeypatch.setattr(engine, "activation_batch", lambda model, per_example: 3)
    example = REPO / "examples" / "circuit-ioi"  # float32, declares a larger batch
    models = REPO / "examples" / "models"
    result = mibspec.verify(example / "report.json", model_roots=[models])
    assert result.valid
    assert sizes == [3]
    sizes.clear()
    given = mibspec.verify(example / "report.json", model_roots=[models], batch_size=5)
    assert given.valid
    assert sizes == [5]
