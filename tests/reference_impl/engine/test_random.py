"""Seeded random models (``engine.random_model``): the same seed writes the same weights,
the caller's global generator is left alone, and the weights follow the stated scales."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from mibspec.reference_impl.engine import FAMILIES, random_model  # noqa: E402

pytestmark = pytest.mark.recompute


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_same_seed_writes_the_same_weights_and_another_seed_others(family: str, tmp_path: Path) -> None:
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = _weights(random_model(family, tmp_path / "a", seed=3))
    assert torch.equal(torch.random.get_rng_state(), before)  # the global generator is untouched
    b = _weights(random_model(family, tmp_path / "b", seed=3))
    c = _weights(random_model(family, tmp_path / "c", seed=4))
    assert (tmp_path / "a" / "config.json").is_file()
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_matrices_are_scaled_by_their_fan_in(tmp_path: Path) -> None:
    """Llama's projections are ``(out, in)``: entries ``N(0, 1/in)``, so ``in · var ≈ 1``."""
    weights = _weights(random_model("llama", tmp_path, d_model=64, n_heads=4, seed=0))
    up = weights["model.layers.0.mlp.up_proj.weight"].double()  # (2·64, 64)
    assert up.shape == (128, 64)
    assert up.shape[1] * float(up.var()) == pytest.approx(1.0, rel=0.1)
    gain = weights["model.layers.0.input_layernorm.weight"].double()
    assert float(gain.mean()) == pytest.approx(1.0, abs=0.05)  # 1 + N(0, 0.1²)


def test_an_unknown_family_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="family"):
        random_model("mamba", tmp_path)
