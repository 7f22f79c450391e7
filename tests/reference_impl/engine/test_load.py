"""The loader builds the model over the bytes it read: the tensors are views of the file's
bytes, transposes are written over them, and the result is the model transformers builds.

Independent anchors: safetensors' own reader (the tensors), transformers' forward (the
logits) and a module read with copies (``from_transformers(copy=True)``, the weights).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mibspec.reference_impl.engine import from_transformers, load_model_from_bytes, random_model, read_config
from mibspec.reference_impl.engine._load import _tensors
from mibspec.reference_impl.threads import one_thread

pytestmark = pytest.mark.recompute

FAMILIES = ("gpt2", "llama", "qwen2", "gemma2")


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    with one_thread():
        yield


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {family: random_model(family, tmp_path_factory.mktemp(family), seed=7) for family in FAMILIES}


def _load(folder: Path, dtype: str, data: Any) -> Any:
    config = read_config((folder / "config.json").read_bytes(), "config.json")
    return load_model_from_bytes(config, {"model.safetensors": data}, dtype=dtype)


def _weights(model: Any) -> dict[str, torch.Tensor]:
    import dataclasses

    found = {}
    for field in dataclasses.fields(model):
        value = getattr(model, field.name)
        if isinstance(value, torch.Tensor):
            found[field.name] = value
    for i, layer in enumerate(model.layers):
        for field in dataclasses.fields(layer):
            value = getattr(layer, field.name)
            if isinstance(value, torch.Tensor):
                found[f"{i}.{field.name}"] = value
            elif dataclasses.is_dataclass(value):
                found[f"{i}.{field.name}.weight"] = value.weight  # type: ignore[union-attr]
    return found


def test_views_hold_what_safetensors_reads(tmp_path: Path) -> None:
    from safetensors.torch import load, save

    tensors = {
        "a": torch.arange(7, dtype=torch.bfloat16),  # odd length: the next tensor's offset
        "b": torch.randn(3, 5, dtype=torch.float32),
        "c": torch.arange(4, dtype=torch.int64),
        "empty": torch.zeros(0, 3),
        "h": torch.randn(2, 2, dtype=torch.float16),
    }
    data = save(tensors)
    ours, theirs = _tensors(bytearray(data), "t"), load(data)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert ours[name].dtype == theirs[name].dtype
        assert ours[name].shape == theirs[name].shape
        assert torch.equal(ours[name], theirs[name]), name


def test_overlapping_byte_ranges_are_refused() -> None:
    # two tensors over the same bytes: written in place, one would change the other
    entry = b'{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
    entry = b'{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
    header = b'{"a":' + entry + b',"b":' + entry + b"}"
    data = bytearray(struct.pack("<Q", len(header)) + header + bytes(8))
    with pytest.raises(ValueError, match="overlap"):
        _tensors(data, "model.safetensors")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_in_place_model_is_the_copied_model(model_dirs: dict[str, Path], family: str, dtype: str) -> None:
    folder = model_dirs[family]
    raw = (folder / "model.safetensors").read_bytes()
    in_place, copied = _load(folder, dtype, bytearray(raw)), _load(folder, dtype, raw)
    a, b = _weights(in_place), _weights(copied)
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].shape == b[name].shape, name
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("family", FAMILIES)
def test_in_place_model_computes_what_transformers_computes(model_dirs: dict[str, Path], family: str) -> None:
    from transformers import AutoModelForCausalLM

    from mibspec.reference_impl.engine import run_model

    folder = model_dirs[family]
    model = _load(folder, "float32", bytearray((folder / "model.safetensors").read_bytes()))
    ids = torch.randint(0, model.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))
    hf = AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", trust_remote_code=False
    ).eval()
    with torch.no_grad():
        ref = hf(input_ids=ids).logits
    np.testing.assert_allclose(run_model(model, ids).logits.numpy(), ref.numpy(), atol=1e-5, rtol=1e-5)


def test_reading_with_copies_leaves_the_module_as_it_was(model_dirs: dict[str, Path]) -> None:
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model_dirs["llama"], trust_remote_code=False)
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    from_transformers(hf)
    assert all(torch.equal(before[k], v) for k, v in hf.state_dict().items())
