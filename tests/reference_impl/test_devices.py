"""Devices and batch sizes of recomputation: device names, tensors created on the model's
device, the explicit CPU path against the default, and automatic batch sizes that halve on
out-of-memory and give exactly what the batch size they settle on gives.

Only the CPU is assumed; what needs CUDA is skipped where none is present. Two checks stand
in for an accelerator: every tensor the engine creates names a device (a torch function mode
watches the factories), and the forward runs on the ``meta`` device, where any tensor left on
the CPU fails the operation that meets it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import mibspec
from mibspec.reference_impl import devices
from mibspec.reference_impl.devices import DeviceError, parse_batch_size, parse_device, resolve_device
from mibspec.reference_impl.engine import (
    Site,
    TorchFeaturizer,
    _evaluate,
    attribute_edges,
    evaluate_circuits,
    forward_sites,
    graph_universe,
    greedy_tokens,
    intervened_logits,
    load_model,
    random_model,
)

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
NO_CUDA = not torch.cuda.is_available()
NO_MPS = not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available())
SRC = str(REPO / "src" / "mibspec" / "reference_impl")


# ------------------------------------------------------------------------------ device names


@pytest.mark.parametrize("name", ["cpu", "CPU", " cuda ", "cuda:0", "cuda:12", "mps", "auto"])
def test_device_names_are_accepted(name: str) -> None:
    assert parse_device(name) == name.strip().lower()


@pytest.mark.parametrize("name", ["meta", "gpu", "cuda:", "cuda:x", "cuda:01", "xla", "", None, 0])
def test_other_device_names_are_refused(name: object) -> None:
    with pytest.raises(DeviceError, match="expected cpu, cuda, cuda:N, mps or auto"):
        parse_device(name)


def test_cpu_resolves_to_itself() -> None:
    assert resolve_device("cpu") == "cpu"


@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is present: it is not refused")
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "cuda:3"])
def test_absent_cuda_is_refused(name: str) -> None:
    with pytest.raises(DeviceError, match="no CUDA device"):
        resolve_device(name)


@pytest.mark.skipif(not NO_MPS, reason="an MPS device is present: it is not refused")
def test_absent_mps_is_refused() -> None:
    with pytest.raises(DeviceError, match="no MPS device"):
        resolve_device("mps")


@pytest.mark.skipif(not (NO_CUDA and NO_MPS), reason="an accelerator is present: auto picks it")
def test_auto_is_the_cpu_without_an_accelerator() -> None:
    assert resolve_device("auto") == "cpu"


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA device")
def test_auto_and_cuda_resolve_to_the_current_cuda_device() -> None:
    current = f"cuda:{torch.cuda.current_device()}"
    assert resolve_device("auto") == current
    assert resolve_device("cuda") == current
    with pytest.raises(DeviceError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.parametrize(("value", "expected"), [(3, 3), ("7", 7), ("auto", "auto"), (" AUTO", "auto")])
def test_batch_sizes(value: object, expected: object) -> None:
    assert parse_batch_size(value) == expected


@pytest.mark.parametrize("value", [0, -1, "0", "1.5", "many", True, 2.0, None])
def test_bad_batch_sizes_are_refused(value: object) -> None:
    with pytest.raises(ValueError, match="batch_size: expected a positive integer or 'auto'"):
        parse_batch_size(value)


def test_auto_batch_size_uses_a_fraction_of_the_free_memory() -> None:
    free = 10_000
    fits = int(free * devices.MEMORY_FRACTION) // 100
    assert devices.auto_batch_size("cpu", 100, 1000, free=free) == fits
    assert devices.auto_batch_size("cpu", 100, 7, free=free) == 7  # never more than the examples
    assert devices.auto_batch_size("cpu", 10**9, 7, free=free) == 1  # never fewer than one
    assert devices.free_memory("cpu") > 0


def test_the_api_refuses_a_bad_device_or_batch_size() -> None:
    report = REPO / "examples" / "circuit-ioi" / "report.json"
    with pytest.raises(DeviceError):
        mibspec.verify(report, device="meta")
    with pytest.raises(ValueError, match="batch_size"):
        mibspec.verify(report, batch_size=0)
    # without recomputation the device is checked for its form only, never looked for
    assert mibspec.verify(report, recompute=False, device="cuda:3").valid


# ------------------------------------------------------------------------ the engine's device


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {family: random_model(family, root / family, seed=5) for family in ("gpt2", "llama", "gemma2")}


def _inputs(seed: int = 1) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 64, (5, 6))
    cids = rng.integers(0, 64, (5, 6))
    mask = np.ones_like(ids)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    return ids, cids, mask, rng.integers(0, 64, 5), rng.integers(0, 64, 5)


def _circuits(model: Any, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    universe = graph_universe(model)
    circuits = rng.random((4, universe.n_edges)) < 0.4
    neurons = rng.random((4, model.n_forward, model.d_model)) < 0.7
    return circuits, neurons


def _featurizer(d: int, device: str | None = None) -> TorchFeaturizer:
    rotation = np.linalg.qr(np.random.default_rng(3).standard_normal((d, d)))[0][:3]
    doc = {"type": "subspace", "n_features": 3, "feature_indices": [0, 2]}
    return TorchFeaturizer(doc, {"rotation": rotation}, device=device)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_explicit_cpu_gives_the_default_results(models: dict[str, Path], family: str) -> None:
    default, explicit = load_model(models[family]), load_model(models[family], device="cpu")
    assert default.device == explicit.device == torch.device("cpu")
    ids, cids, mask, correct, counter = _inputs()
    circuits, neurons = _circuits(default)
    for ablation in ("counterfactual", "mean"):
        a = evaluate_circuits(
            default, ids, cids, mask, correct, counter, circuits, neurons=neurons, ablation=ablation
        )
        b = evaluate_circuits(
            explicit, ids, cids, mask, correct, counter, circuits, neurons=neurons, ablation=ablation
        )
        assert np.array_equal(a.circuits, b.circuits)
        assert np.array_equal(a.clean, b.clean)
    site = Site(1, "residual_post")
    t_ids, t_mask = torch.as_tensor(ids), torch.as_tensor(mask)
    positions = torch.as_tensor(mask.sum(1) - 1)
    sources = torch.as_tensor(
        np.random.default_rng(4).standard_normal((5, default.d_model)), dtype=torch.float32
    )
    with torch.no_grad():
        a = intervened_logits(default, t_ids, t_mask, site, positions, sources, _featurizer(default.d_model))
        b = intervened_logits(
            explicit, t_ids, t_mask, site, positions, sources, _featurizer(default.d_model, device="cpu")
        )
    assert torch.equal(a, b)


class _Factories(TorchFunctionMode):
    """Records every tensor factory called from the reference implementation without a device."""

    WATCHED = frozenset(
        {
            torch.zeros,
            torch.ones,
            torch.empty,
            torch.full,
            torch.arange,
            torch.tensor,
            torch.as_tensor,
            torch.randn,
            torch.rand,
            torch.randint,
            torch.eye,
            torch.linspace,
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self.undeviced: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in self.WATCHED and kwargs.get("device") is None:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(SRC):
                self.undeviced.append(f"{caller.f_code.co_filename}:{caller.f_lineno} {func.__name__}")
        return func(*args, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_the_engine_names_a_device_for_every_tensor_it_creates(models: dict[str, Path], family: str) -> None:
    from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour

    model = load_model(models[family])
    ids, cids, mask, correct, counter = _inputs()
    circuits, neurons = _circuits(model)
    site = Site(0, "attention_heads", (0, 2))
    featurizer = TorchFeaturizer(
        {"type": "subspace", "n_features": 2}, {"rotation": np.eye(2 * model.d_head)[:2]}, device=model.device
    )
    with _Factories() as watch:
        for ablation in ("counterfactual", "mean", "zero"):
            evaluate_circuits(
                model, ids, cids, mask, correct, counter, circuits, neurons=neurons, ablation=ablation
            )
        if family != "gemma2":  # attribution refuses post-attention norms
            attribute_edges(model, ids, cids, mask, correct, counter, method="eap-ig", steps=2)
            behaviour = TransformerBehaviour(model, ids, cids, mask, correct, counter, ablation="zero")
            behaviour.example_metrics(np.random.default_rng(0).random((3, len(behaviour.universe))) < 0.5)
            behaviour.example_attribution()
        t_ids, t_mask = torch.as_tensor(ids), torch.as_tensor(mask)
        positions = torch.as_tensor(mask.sum(1) - 1)
        sources = torch.zeros((5, 2 * model.d_head))
        greedy_tokens(
            model, t_ids, t_mask, 3, site=site, positions=positions, sources=sources, featurizer=featurizer
        )
    assert not watch.undeviced, "\n".join(sorted(set(watch.undeviced)))


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])
def test_the_forward_runs_where_the_model_is(models: dict[str, Path], family: str) -> None:
    # On the meta device an operation that meets a tensor left on the CPU fails.
    model = load_model(models[family]).to("meta")
    assert model.device.type == "meta"
    assert model.layers[0].w_qkv.device.type == "meta"
    ids, _, mask, _, _ = _inputs()
    t_ids, t_mask = torch.as_tensor(ids), torch.as_tensor(mask)
    site = Site(1, "residual_post")
    logits, recorded = forward_sites(model, t_ids, t_mask, record=[site])
    assert logits.device.type == "meta"
    assert recorded[site].device.type == "meta"
    featurizer = _featurizer(model.d_model, device="meta")
    positions = torch.as_tensor(mask.sum(1) - 1)
    out = intervened_logits(
        model, t_ids, t_mask, site, positions, torch.zeros((5, model.d_model)), featurizer
    )
    assert out.shape == (5, model.vocab_size)
    assert out.device.type == "meta"


# -------------------------------------------------------------------- batch sizes on recompute


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: Any) -> Path:
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    tmp = tmp_path_factory.mktemp("small")
    dataset = small_ioi_dataset(tmp, 8)
    options = CircuitOptions(
        MODELS / "tiny-gpt2", dataset, tmp / "report", counterfactual_type="io_s2_flip", steps=2, batch_size=8
    )
    return Path(score_circuit(options).report)


def _recomputed(result: Any) -> list[tuple[str, float]]:
    assert not result.internal_errors, [doc.internal_error for doc in result.internal_errors]
    return [(c.pointer, c.recomputed) for doc in result.documents for c in doc.comparisons]


@pytest.mark.slow
def test_auto_batch_size_halves_on_out_of_memory_and_matches_the_batch_it_settles_on(
    small_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed = mibspec.verify(small_report, model_roots=[MODELS], batch_size=2)
    other = mibspec.verify(small_report, model_roots=[MODELS], batch_size=3)
    assert fixed.valid
    assert other.valid

    tried: list[int] = []
    unpatched = _evaluate._unpatched_runs

    def small_device(model: Any, constant: Any, ids: torch.Tensor, *args: Any) -> Any:
        tried.append(ids.shape[0])
        if ids.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return unpatched(model, constant, ids, *args)

    monkeypatch.setattr(_evaluate, "_unpatched_runs", small_device)
    monkeypatch.setattr(devices, "free_memory", lambda device: 1 << 50)  # room for every example
    auto = mibspec.verify(small_report, model_roots=[MODELS], batch_size="auto")
    assert auto.valid
    # the whole dataset first (8 rows), then halved twice; every pass after that has 2 rows
    assert tried[:3] == [8, 4, 2]
    assert set(tried[2:]) == {2}
    # exactly what the batch size it settled on gives when fixed; other batch sizes differ by
    # reassociation inside matrix products only (engine.md ME-10)
    assert _recomputed(auto) == _recomputed(fixed)
    for (pointer, a), (same, b) in zip(_recomputed(auto), _recomputed(other), strict=True):
        assert pointer == same
        assert a == pytest.approx(b, rel=1e-6, abs=1e-9)

    # a fixed batch size is never changed: running out of memory with it is not hidden
    tried.clear()
    failed = mibspec.verify(small_report, model_roots=[MODELS], batch_size=4)
    assert tried == [4]
    assert failed.internal_errors
    assert "out of memory" in str(failed.internal_errors[0].internal_error)


def test_oom_backoff_retries_only_out_of_memory() -> None:
    sizes: list[int] = []

    def run(size: int) -> int:
        sizes.append(size)
        if size > 5:
            raise RuntimeError("CUDA error: out of memory")
        return size * 10

    assert devices.with_oom_backoff(run, 23) == (50, 5)
    assert sizes == [23, 11, 5]
    with pytest.raises(RuntimeError, match="out of memory"):
        devices.with_oom_backoff(run, 23, retry=False)

    def broken(size: int) -> int:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        devices.with_oom_backoff(broken, 8)

    def always(size: int) -> int:
        sizes.append(size)
        raise torch.OutOfMemoryError("out of memory")

    sizes.clear()
    with pytest.raises(torch.OutOfMemoryError):
        devices.with_oom_backoff(always, 4)
    assert sizes == [4, 2, 1]  # down to one example, whose failure is raised


@pytest.mark.slow
def test_the_receipt_records_the_device_and_batch_size(small_report: Path, tmp_path: Path) -> None:
    import shutil
    import subprocess

    folder = tmp_path / "run"
    shutil.copytree(small_report.parent.parent, folder)
    shutil.copytree(MODELS / "tiny-gpt2", folder / "models" / "tiny-gpt2")
    report = folder / small_report.relative_to(small_report.parent.parent)
    receipt = folder / "receipt.json"
    command = [sys.executable, "-m", "mibspec", "verify", str(report), "--model-root", str(folder / "models")]
    done = subprocess.run(
        [*command, "--device", "cpu", "--batch-size", "auto", "--receipt", str(receipt)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(receipt.read_text(encoding="utf-8"))
    assert data["environment"]["device"] == "cpu"
    assert data["options"]["batch_size"] == "auto"
    done = subprocess.run(
        [*command, "--no-recompute", "--receipt", str(receipt)], capture_output=True, check=False
    )
    assert done.returncode == 0
    data = json.loads(receipt.read_text(encoding="utf-8"))
    assert "device" not in data["environment"]
    assert "batch_size" not in data["options"]


# ------------------------------------------------------------------------ saliency evaluation

SALIENCY = REPO / "examples" / "saliency-digits"


@pytest.mark.slow
def test_saliency_evaluation_names_a_device_for_every_tensor_it_creates() -> None:
    pytest.importorskip("captum")  # the saliency methods
    from safetensors.numpy import load_file

    from mibspec.reference_impl.vision import (
        METHODS,
        PixelGame,
        class_probabilities,
        curve_scores,
        load_registry_model,
        read_weights,
        saliency_maps,
    )

    data = load_file(SALIENCY / "dataset.safetensors")
    clean, perturbed, labels = data["clean_images"][:2], data["perturbed_images"][:2], data["labels"][:2]
    model = load_registry_model(
        "tiny-cnn-v1", read_weights(MODELS / "tiny-cnn-digits" / "model.safetensors"), clean.shape[1:]
    )
    area = np.zeros(clean.shape[-2:], dtype=bool)
    area[:2, :2] = True
    with _Factories() as watch:
        class_probabilities(model, clean)
        PixelGame(model, clean[0], perturbed[0], int(labels[0]), area)(np.eye(4, dtype=bool))
        maps = np.stack(
            [saliency_maps(model, clean, labels.astype(np.int64), name)[0] for name in sorted(METHODS)]
        )
        curve_scores(
            model,
            clean[:1].repeat(len(maps), 0),
            perturbed[:1].repeat(len(maps), 0),
            [int(labels[0])] * len(maps),
            maps,
            4,
        )
    assert not watch.undeviced, "\n".join(sorted(set(watch.undeviced)))


def _stored_in(path: Path, dtype: str) -> tuple[str, int]:
    """Rewrite the safetensors file at ``path`` with its floating tensors in ``dtype``; its new
    SHA-256 and size."""
    import hashlib

    from safetensors.torch import load_file, save_file

    tensors = load_file(str(path))
    save_file(
        {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in tensors.items()},
        str(path),
    )
    raw = path.read_bytes()
    return hashlib.sha256(raw).hexdigest(), len(raw)


@pytest.mark.slow
def test_a_half_precision_model_is_recomputed_in_its_dtype_with_its_tolerance(
    small_report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from mibspec.core.profiles import load_profile
    from mibspec.reference_impl import engine, vision

    table = load_profile("default")["recompute"]
    built: list[Any] = []

    def spy_lm(*args: Any, **kwargs: Any) -> Any:
        model = load_lm(*args, **kwargs)
        built.append(model.dtype)
        return model

    def spy_cnn(*args: Any, **kwargs: Any) -> Any:
        module = load_cnn(*args, **kwargs)
        built.append(next(module.parameters()).dtype)
        return module

    load_lm, load_cnn = engine.load_model_from_bytes, vision.load_registry_model
    monkeypatch.setattr(engine, "load_model_from_bytes", spy_lm)  # looked up when recomputation runs
    monkeypatch.setattr(vision, "load_registry_model", spy_cnn)

    # the weights stored in the dtype (a float32 model declared 16-bit is R113, SPEC.md M-6)
    models = tmp_path / "models"
    shutil.copytree(MODELS / "tiny-gpt2", models / "tiny-gpt2")
    for source, dtype in ((small_report.parent.parent, "bfloat16"), (SALIENCY, "float16")):
        folder = tmp_path / f"{source.name}-{dtype}"
        shutil.copytree(source, folder)
        report = next(folder.rglob("report.json"))
        data = json.loads(report.read_text(encoding="utf-8"))
        data["model"]["dtype"] = dtype
        if data["model"]["source"] == "registry":
            entry = next(a for a in data["artifacts"] if a["id"] == data["model"]["weights"])
            entry["sha256"], entry["bytes"] = _stored_in(report.parent / entry["path"], dtype)
        else:
            data["model"]["files"]["model.safetensors"] = _stored_in(
                models / "tiny-gpt2" / "model.safetensors", dtype
            )[0]
        report.write_text(json.dumps(data, indent=2), encoding="utf-8")
        built.clear()
        result = mibspec.verify(report, model_roots=[models])
        assert "R113" not in [f.code for f in result.documents[0].findings]
        doc = result.documents[0]
        assert not result.internal_errors
        assert not [f for f in doc.findings if f.code == "R104"], [
            (f.code, f.pointer, f.message) for f in doc.findings
        ]
        assert built == [getattr(torch, dtype)]
        tolerance = (table[dtype]["abs"], table[dtype]["rel"])
        model_based = [c for c in doc.comparisons if (c.abs_tol, c.rel_tol) == tolerance]
        assert model_based, [(c.pointer, c.abs_tol, c.rel_tol) for c in doc.comparisons]
        assert not [
            c
            for c in doc.comparisons
            if (c.abs_tol, c.rel_tol) == (table["float32"]["abs"], table["float32"]["rel"])
        ]
        if data["model"]["source"] == "registry":
            continue
        # another batch size asked for: the declared one is used (R114), the same values come out
        again = mibspec.verify(report, model_roots=[models], batch_size=3).documents[0]
        assert [(f.code, f.pointer) for f in again.findings if f.code == "R114"] == [
            ("R114", "/settings/batch_size")
        ]
        assert [(c.pointer, c.recomputed) for c in again.comparisons] == [
            (c.pointer, c.recomputed) for c in doc.comparisons
        ]


@pytest.mark.parametrize(
    ("dtype", "requested", "planned", "kept"),
    [
        ("bfloat16", 3, (8, False), True),
        ("float16", "auto", (8, True), True),  # starts at the declared size, halves only when out of memory
        ("bfloat16", 8, (8, False), False),  # what the report declares: nothing to say
        ("float32", 3, (3, False), False),
        ("bfloat16", None, (8, False), False),
    ],
)
def test_a_16_bit_report_keeps_its_declared_batch_size(
    dtype: str, requested: Any, planned: tuple[int, bool], kept: bool
) -> None:
    from types import SimpleNamespace

    from mibspec.core.comparisons import Recomputation
    from mibspec.reference_impl.recompute._inputs import batch_plan

    ctx = SimpleNamespace(
        data={"model": {"dtype": dtype}, "settings": {"batch_size": 8}},
        batch_size=requested,
        device="cpu",
        finding=lambda code, pointer, detail: (code, pointer),
    )
    out = Recomputation()
    assert batch_plan(ctx, 8, 1, 100, out) == planned  # type: ignore[arg-type]  # the members it reads
    assert out.findings == ([("R114", "/settings/batch_size")] if kept else [])


@pytest.mark.slow
def test_causal_variable_recomputation_halves_its_batch_on_out_of_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mibspec.reference_impl import engine
    from mibspec.reference_impl.engine import _intervene

    report = REPO / "examples" / "causal-variable-arithmetic" / "report.json"
    fixed = mibspec.verify(report, model_roots=[MODELS], batch_size=10)
    assert fixed.valid
    tried: list[int] = []
    unpatched = _intervene.forward_sites

    def small_device(model: Any, ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        tried.append(ids.shape[0])
        if ids.shape[0] > 16:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return unpatched(model, ids, *args, **kwargs)

    monkeypatch.setattr(_intervene, "forward_sites", small_device)  # greedy and intervened passes
    monkeypatch.setattr(engine, "forward_sites", small_device)  # recorded source vectors
    monkeypatch.setattr(devices, "free_memory", lambda device: 1 << 50)
    auto = mibspec.verify(report, model_roots=[MODELS], batch_size="auto")
    assert auto.valid
    rows = json.loads(report.read_text(encoding="utf-8"))["task"]["n_examples"]
    assert tried[:5] == [rows, rows // 2, rows // 4, rows // 8, rows // 16]  # 160 → 10
    assert max(tried[4:]) <= 16
    assert _recomputed(auto) == _recomputed(fixed)
