"""A circuit's metrics are those of its own pass whatever else is stacked with it, up to
floating-point reassociation (engine.md ME-10); so evaluations on the same model and batch
share them: each distinct circuit (and the mean of the mean ablation) is computed once.

Stacking changes the shapes of the matrix products, and with them the order in which some
CPUs' kernels sum: values are compared within ME-10's bound, never bit for bit. Repeating
the same call (the same shapes) gives the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mibspec.core.comparisons import REASSOCIATION  # noqa: E402
from mibspec.reference_impl.engine import (  # noqa: E402
    ActivationCache,
    _ablation,
    _evaluate,
    evaluate_circuits,
    graph_universe,
    load_model,
    random_model,
)
from mibspec.reference_impl.threads import one_thread  # noqa: E402

pytestmark = pytest.mark.recompute

N_EXAMPLES, SEQ = 6, 7
LENGTHS = (7, 5, 6, 3, 7, 4)
# sparse circuits reach few nodes, dense ones every node: both kinds get stacked
DENSITIES = (0.02, 0.03, 0.05, 0.1, 0.3, 0.6, 0.7, 0.8, 0.9, 0.95)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    with one_thread():
        yield


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Tiny float32 models (float32: rounding shows where float64 would hide it)."""
    return {
        family: load_model(
            random_model(family, tmp_path_factory.mktemp(family), seed=30 + i), dtype="float32"
        )
        for i, family in enumerate(("gpt2", "llama", "gemma2"))
    }


def _data(vocab: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[1] * n + [0] * (SEQ - n) for n in LENGTHS])
    return {
        "clean": torch.randint(0, vocab, (N_EXAMPLES, SEQ), generator=gen) * mask,
        "corrupted": torch.randint(0, vocab, (N_EXAMPLES, SEQ), generator=gen) * mask,
        "mask": mask,
        "correct": torch.randint(0, vocab, (N_EXAMPLES,), generator=gen),
        "counterfactual": torch.randint(0, vocab, (N_EXAMPLES,), generator=gen),
    }


def _circuits(weights: Any, seed: int) -> np.ndarray:
    universe = graph_universe(weights)
    rng = np.random.default_rng(seed)
    return np.stack([rng.random(universe.edge_mask.shape) < p for p in DENSITIES]) & universe.edge_mask[None]


def _assert_reassociated(got: np.ndarray, want: np.ndarray) -> None:
    """Equal within ME-10's float32 bound, relative to the largest value compared."""
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max(initial=0.0)), float(np.abs(got).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=0.0, atol=REASSOCIATION["float32"] * scale)


def _engine(weights: Any, data: dict[str, torch.Tensor], circuits: np.ndarray, **kw: Any) -> Any:
    args = (data["clean"], data["corrupted"], data["mask"], data["correct"], data["counterfactual"])
    return evaluate_circuits(weights, *args, circuits, batch_size=3, **kw)


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
@pytest.mark.parametrize("ablation", ["counterfactual", "mean"])
def test_a_circuits_metrics_do_not_depend_on_its_stack(
    models: dict[str, Any], family: str, ablation: str
) -> None:
    weights = models[family]
    data = _data(64, 1)
    circuits = _circuits(weights, 2)
    stacked = _engine(weights, data, circuits, ablation=ablation).circuits
    alone = np.stack([_engine(weights, data, c[None], ablation=ablation).circuits[0] for c in circuits])
    _assert_reassociated(stacked, alone)
    some = [1, 4, 6, 9]
    _assert_reassociated(_engine(weights, data, circuits[some], ablation=ablation).circuits, stacked[some])
    # the same call again: the same shapes, the same bytes
    again = _engine(weights, data, circuits, ablation=ablation).circuits
    assert again.tobytes() == stacked.tobytes()


def test_neuron_masked_circuits_do_not_depend_on_their_stack(models: dict[str, Any]) -> None:
    weights = models["llama"]
    data = _data(64, 3)
    circuits = _circuits(weights, 4)
    rng = np.random.default_rng(5)
    neurons = rng.random((len(circuits), weights.n_forward, weights.d_model)) < 0.8
    stacked = _engine(weights, data, circuits, neurons=neurons).circuits
    alone = [
        _engine(weights, data, c[None], neurons=n[None]).circuits[0]
        for c, n in zip(circuits, neurons, strict=True)
    ]
    _assert_reassociated(stacked, np.stack(alone))


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """A list that grows by one at each call of ``module.name`` (which still runs)."""
    calls: list[int] = []
    original = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of circuits of every patched pass."""
    counted: list[int] = []
    original = _evaluate._stacked_passes

    def counting(*args: Any, **kwargs: Any) -> Any:
        for group, values in original(*args, **kwargs):
            counted.append(len(group))
            yield group, values

    monkeypatch.setattr(_evaluate, "_stacked_passes", counting)
    return counted


@pytest.mark.parametrize("ablation", ["counterfactual", "mean"])
def test_shared_circuits_are_evaluated_once_with_the_values_of_each_alone(
    models: dict[str, Any], passes: list[int], monkeypatch: pytest.MonkeyPatch, ablation: str
) -> None:
    weights = models["llama"]
    data = _data(64, 6)
    circuits = _circuits(weights, 7)
    means = _count_calls(monkeypatch, _ablation, "mean_node_outputs")
    first, second = [0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 8, 9, 3]  # three shared, one repeated
    _engine(weights, data, circuits[sorted({*first, *second})], ablation=ablation)
    distinct = sum(passes)  # the patched circuits of both, each once
    passes.clear()
    alone = [_engine(weights, data, circuits[sel], ablation=ablation) for sel in (first, second)]
    evaluated_alone = sum(passes)
    passes.clear()
    means.clear()
    reuse = ActivationCache()
    shared = [
        _engine(weights, data, circuits[sel], ablation=ablation, reuse=reuse) for sel in (first, second)
    ]
    for a, b in zip(alone, shared, strict=True):
        # the unpatched runs and the edge counts are the same computation either way
        for name in ("clean", "empty", "n_edges"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
        _assert_reassociated(b.circuits, a.circuits)
    # alone, the shared circuits are evaluated by both (a repeat within one evaluation once)
    assert distinct < evaluated_alone
    assert sum(passes) == distinct
    assert len(means) == (1 if ablation == "mean" else 0)


def test_a_cache_never_serves_another_models_circuits(models: dict[str, Any], tmp_path: Path) -> None:
    data = _data(64, 8)
    reuse = ActivationCache()
    twin = load_model(random_model("llama", tmp_path, seed=99), dtype="float32")
    circuits = _circuits(models["llama"], 9)
    a = _engine(models["llama"], data, circuits, reuse=reuse)
    b = _engine(twin, data, circuits, reuse=reuse)
    assert b.circuits.tobytes() == _engine(twin, data, circuits).circuits.tobytes()
    assert a.circuits.tobytes() != b.circuits.tobytes()


@pytest.mark.parametrize("ablation", ["counterfactual", "mean"])
def test_a_batch_whose_metrics_are_all_kept_is_not_run_again(
    models: dict[str, Any], passes: list[int], monkeypatch: pytest.MonkeyPatch, ablation: str
) -> None:
    """A second evaluation of the same circuits runs nothing, even when the bound keeps no
    batch's runs (only the metrics fit); the values are those of the first, bit for bit.
    Other answer tokens on the same batches are other metrics."""
    weights = models["gpt2"]
    data = _data(64, 11)
    circuits = _circuits(weights, 12)
    runs = _count_calls(monkeypatch, _evaluate, "_unpatched_runs")
    alone = _engine(weights, data, circuits, ablation=ablation)
    assert len(runs) == 2  # 6 examples, 3 a batch
    sizing = ActivationCache(1 << 30)
    _engine(weights, data, circuits, ablation=ablation, reuse=sizing)
    one_batch = max(size for _, _, size in sizing._entries.values())  # a batch's runs: the largest
    # room for both batches' runs, for one, for none, and for one exactly (then the metrics
    # take the sixteenth the runs leave)
    for bound in (1 << 30, 2 * one_batch, one_batch - 1, -(-one_batch * 16 // 15)):
        reuse = ActivationCache(bound)
        runs.clear()
        passes.clear()
        first = _engine(weights, data, circuits, ablation=ablation, reuse=reuse)
        assert (len(runs), sum(passes) > 0) == (2, True)
        runs.clear()
        passes.clear()
        second = _engine(weights, data, circuits, ablation=ablation, reuse=reuse)
        assert (runs, passes) == ([], [])
        for name in ("circuits", "clean", "empty", "n_edges"):
            assert getattr(second, name).tobytes() == getattr(first, name).tobytes()
        _assert_reassociated(first.circuits, alone.circuits)
        other = dict(data, correct=(data["correct"] + 1) % 64)
        passes.clear()
        got = _engine(weights, other, circuits, ablation=ablation, reuse=reuse)
        assert sum(passes) > 0
        _assert_reassociated(got.circuits, _engine(weights, other, circuits, ablation=ablation).circuits)
