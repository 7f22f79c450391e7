"""Loading and the unpatched functional forward, against the transformers forward."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mibspec.parity import RANDOM_MODELS
from mibspec.reference_impl.engine import (
    SUPPORTED_ARCHITECTURES,
    from_transformers,
    load_model,
    random_model,
    run_model,
)
from mibspec.reference_impl.threads import one_thread

pytestmark = pytest.mark.recompute

FAMILIES = ("gpt2", "llama", "qwen2", "gemma2")
LENGTHS = (9, 6, 3, 9)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    # Tiny tensors: thread hand-offs cost more than they save.
    with one_thread():
        yield


def _batch(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    T = max(LENGTHS)
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in LENGTHS])
    ids = torch.randint(0, vocab, (len(LENGTHS), T), generator=gen)
    return ids, mask


def _hf(path: Path, dtype: torch.dtype) -> Any:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, attn_implementation="eager", trust_remote_code=False
    )
    return model.eval()


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dirs = {
        family: random_model(family, tmp_path_factory.mktemp(family), seed=i)
        for i, family in enumerate(FAMILIES)
    }
    # Llama 3.1 frequency scaling, a Qwen2 layer with a sliding window, GPT-2 per-layer scaling
    dirs["llama3_rope"] = random_model(
        "llama",
        tmp_path_factory.mktemp("llama3"),
        seed=7,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    )
    dirs["qwen2_window"] = random_model(
        "qwen2",
        tmp_path_factory.mktemp("qwen2w"),
        seed=8,
        use_sliding_window=True,
        sliding_window=3,
        max_window_layers=1,
    )
    dirs["gpt2_inverse"] = random_model(
        "gpt2", tmp_path_factory.mktemp("gpt2i"), seed=9, scale_attn_by_inverse_layer_idx=True
    )
    # the parity harness's Qwen2 and Gemma-2 (tied embeddings, rotary base 1e6; heads narrower
    # than d_model / n_heads, a window of 4 under prompts of 9)
    for name, (family, shape) in RANDOM_MODELS.items():
        dirs[name] = random_model(family, tmp_path_factory.mktemp(name), vocab_size=64, **shape)
    return dirs


VARIANTS = (*FAMILIES, "llama3_rope", "qwen2_window", "gpt2_inverse", *RANDOM_MODELS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_match_transformers_float32(model_dirs: dict[str, Path], variant: str) -> None:
    path = model_dirs[variant]
    weights = load_model(path)
    ids, mask = _batch(weights.vocab_size, 1)
    ours = run_model(weights, ids, mask).logits
    with torch.no_grad():
        ref = _hf(path, torch.float32)(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert ours.dtype == torch.float32
    np.testing.assert_allclose(ours[real].numpy(), ref[real].numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_bfloat16_logits_match_transformers(model_dirs: dict[str, Path], family: str) -> None:
    weights = load_model(model_dirs[family], dtype="bfloat16")
    ids, mask = _batch(weights.vocab_size, 2)
    ours = run_model(weights, ids, mask).logits
    with torch.no_grad():
        ref = _hf(model_dirs[family], torch.bfloat16)(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    assert ours.dtype == torch.bfloat16
    scale = float(ref[real].float().abs().max())
    np.testing.assert_allclose(ours[real].float().numpy(), ref[real].float().numpy(), atol=0.03 * scale)


@pytest.mark.parametrize("family", FAMILIES)
def test_node_outputs_sum_to_the_residual_stream(model_dirs: dict[str, Path], family: str) -> None:
    weights = load_model(model_dirs[family], dtype="float64")
    ids, mask = _batch(weights.vocab_size, 3)
    out = run_model(weights, ids, mask, node_outputs=True)
    nodes = out.node_outputs
    assert nodes is not None
    H = weights.n_heads
    assert nodes.shape == (len(LENGTHS), ids.shape[1], 1 + weights.n_layers * (H + 1), weights.d_model)
    hf = _hf(model_dirs[family], torch.float32)
    with torch.no_grad():
        hidden = hf(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    real = mask.bool()
    residual = nodes[:, :, 0]
    for layer in range(weights.n_layers):
        # transformers' hidden_states[l] is the residual stream entering layer l
        np.testing.assert_allclose(
            residual[real].numpy(), hidden[layer][real].double().numpy(), atol=2e-5, rtol=2e-5
        )
        heads = nodes[:, :, 1 + layer * (H + 1) : 1 + layer * (H + 1) + H].sum(2)
        post = weights.layers[layer].norm_attn_out
        if post is not None:
            # Gemma-2: the heads' summed outputs are normalised together before the residual
            rms = torch.sqrt((heads * heads).mean(-1, keepdim=True) + post.eps)
            heads = heads / rms * (1 + post.weight)
        residual = residual + heads + nodes[:, :, 1 + layer * (H + 1) + H]
    # exactness in float64: the residual the engine normalises is the sum of the node outputs
    np.testing.assert_allclose(residual.numpy(), out.residual.numpy(), atol=1e-12, rtol=1e-12)


def test_run_model_accepts_numpy_and_default_mask(model_dirs: dict[str, Path]) -> None:
    weights = load_model(model_dirs["gpt2"])
    ids, _ = _batch(weights.vocab_size, 4)
    a = run_model(weights, ids.numpy()).logits
    b = run_model(weights, ids, torch.ones_like(ids)).logits
    assert torch.equal(a, b)


def test_repeated_runs_are_identical(model_dirs: dict[str, Path]) -> None:
    weights = load_model(model_dirs["qwen2"])
    ids, mask = _batch(weights.vocab_size, 5)
    assert torch.equal(run_model(weights, ids, mask).logits, run_model(weights, ids, mask).logits)


def test_from_transformers_reads_the_same_weights(model_dirs: dict[str, Path]) -> None:
    hf = _hf(model_dirs["llama"], torch.float32)
    a = from_transformers(hf)
    b = load_model(model_dirs["llama"])
    ids, mask = _batch(b.vocab_size, 6)
    assert torch.equal(run_model(a, ids, mask).logits, run_model(b, ids, mask).logits)
    assert a.architecture == "LlamaForCausalLM"
    assert a.n_kv_heads == 2
    assert a.n_heads == 4


# ---------------------------------------------------------------------------- refusals


def _copy(src: Path, dst: Path, **config_changes: Any) -> Path:
    shutil.copytree(src, dst)
    cfg_file = dst / "config.json"
    cfg = json.loads(cfg_file.read_text())
    cfg.update(config_changes)
    cfg_file.write_text(json.dumps(cfg))
    return dst


def test_remote_code_is_refused(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    path = _copy(model_dirs["gpt2"], tmp_path / "m", auto_map={"AutoModelForCausalLM": "modeling.MyModel"})
    with pytest.raises(ValueError, match="auto_map"):
        load_model(path)


def test_unsupported_architecture_is_named(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    path = _copy(model_dirs["gpt2"], tmp_path / "m", architectures=["GPTNeoXForCausalLM"])
    with pytest.raises(ValueError, match="GPTNeoXForCausalLM"):
        load_model(path)
    bare = _copy(model_dirs["gpt2"], tmp_path / "n", architectures=None, model_type="opt")
    with pytest.raises(ValueError, match="opt"):
        load_model(bare)
    with pytest.raises(ValueError, match="unsupported architecture"):
        from_transformers(torch.nn.Linear(2, 2))
    assert set(SUPPORTED_ARCHITECTURES) == {
        "GPT2LMHeadModel",
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "Gemma2ForCausalLM",
    }


def test_length_dependent_rope_is_refused(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    path = random_model(
        "llama",
        tmp_path / "m",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    )
    with pytest.raises(ValueError, match="dynamic"):
        load_model(path)


def test_hub_ids_need_a_pinned_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="revision"):
        load_model("openai-community/gpt2")
    with pytest.raises(ValueError, match="revision"):
        load_model("openai-community/gpt2", revision="main")
    with pytest.raises(ValueError, match="revision"):
        load_model("openai-community/gpt2", revision="A" * 40)


def test_bad_local_arguments(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dtype"):
        load_model(model_dirs["gpt2"], dtype="int8")
    with pytest.raises(ValueError, match="revision"):
        load_model(model_dirs["gpt2"], revision="0" * 40)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"config\.json"):
        load_model(tmp_path / "empty")
    with pytest.raises(ValueError, match="existing local directory"):
        load_model(tmp_path / "missing")


def test_bad_token_batches_are_named(model_dirs: dict[str, Path]) -> None:
    weights = load_model(model_dirs["gpt2"])
    ids, mask = _batch(weights.vocab_size, 7)
    with pytest.raises(ValueError, match="input_ids"):
        run_model(weights, ids[0])
    with pytest.raises(ValueError, match="input_ids"):
        run_model(weights, ids.float())
    with pytest.raises(ValueError, match="input_ids"):
        run_model(weights, ids + weights.vocab_size)
    with pytest.raises(ValueError, match="attention_mask"):
        run_model(weights, ids, mask[:, 1:])
    with pytest.raises(ValueError, match="attention_mask"):
        run_model(weights, ids, mask * 2)
    left = torch.flip(mask, dims=[1])
    with pytest.raises(ValueError, match="right padding"):
        run_model(weights, ids, left)
    holes = mask.clone()
    holes[0, 2] = 0
    with pytest.raises(ValueError, match="right padding"):
        run_model(weights, ids, holes)
    with pytest.raises(ValueError, match="positions"):
        run_model(weights, torch.zeros((1, 65), dtype=torch.long))
