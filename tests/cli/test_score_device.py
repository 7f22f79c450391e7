"""``--device`` and ``--batch-size`` on ``mibspec verify`` and ``mibspec score``: a malformed or
absent device and a bad batch size are usage errors (exit 2, one line, no traceback); the CPU
path runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.recompute
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
REPORT = REPO / "examples" / "circuit-ioi" / "report.json"
NO_CUDA = not torch.cuda.is_available()
CIRCUIT = (
    "score",
    "circuit",
    "--model",
    str(MODELS / "tiny-gpt2"),
    "--dataset",
    str(REPO / "examples" / "datasets" / "ioi" / "test.meta.json"),
    "-c",
    "io_s2_flip",
    "--method",
    "random",
)
SCORE_COMMANDS = {
    "circuit": CIRCUIT,
    "causal-variable": (
        "score",
        "causal-variable",
        "--model",
        str(MODELS / "tiny-gpt2"),
        "--dataset",
        str(REPO / "examples" / "datasets" / "ioi" / "test.meta.json"),
    ),
    "causal-bench": ("score", "causal-bench"),
    "saliency": (
        "score",
        "saliency",
        "--weights",
        str(MODELS / "tiny-cnn-digits" / "model.safetensors"),
        "--dataset",
        str(REPO / "examples" / "saliency-digits" / "dataset.json"),
    ),
}


def _usage(run: object, expected: str) -> None:
    assert run.returncode == 2, run.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in run.stderr  # type: ignore[attr-defined]
    assert expected in run.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize("device", ["meta", "gpu", "cuda:x"])
@pytest.mark.parametrize("recompute", [True, False])
def test_verify_refuses_a_malformed_device(mibspec_cli, device: str, recompute: bool) -> None:  # type: ignore[no-untyped-def]
    args = ["verify", str(REPORT), "--device", device, *([] if recompute else ["--no-recompute"])]
    _usage(mibspec_cli(*args), "--device: expected cpu, cuda, cuda:N, mps or auto")


@pytest.mark.slow
@pytest.mark.skipif(not NO_CUDA, reason="a CUDA device is present: it is not refused")
def test_verify_refuses_an_absent_device(mibspec_cli) -> None:  # type: ignore[no-untyped-def]
    _usage(mibspec_cli("verify", str(REPORT), "--device", "cuda:1"), "no CUDA device")


@pytest.mark.parametrize("size", ["0", "-3", "some", "1.5"])
def test_verify_refuses_a_bad_batch_size(mibspec_cli, size: str) -> None:  # type: ignore[no-untyped-def]
    _usage(
        mibspec_cli("verify", str(REPORT), "--batch-size", size), "--batch-size: expected a positive integer"
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(SCORE_COMMANDS))
def test_every_score_command_refuses_a_bad_device(mibspec_cli, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    _usage(mibspec_cli(*SCORE_COMMANDS[command], "-o", str(out), "--device", "meta"), "--device: expected")
    assert not out.exists()
    if NO_CUDA:
        _usage(mibspec_cli(*SCORE_COMMANDS[command], "-o", str(out), "--device", "cuda"), "no CUDA device")


def test_score_circuit_refuses_a_bad_batch_size(mibspec_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _usage(mibspec_cli(*CIRCUIT, "-o", str(tmp_path / "o"), "--batch-size", "0"), "--batch-size: expected")


@pytest.mark.slow
def test_score_circuit_on_the_cpu_with_an_automatic_batch(
    mibspec_cli, tmp_path: Path, small_ioi_dataset
) -> None:  # type: ignore[no-untyped-def]
    dataset = small_ioi_dataset(tmp_path, 6)
    args = [a if not a.endswith("test.meta.json") else str(dataset) for a in CIRCUIT]
    done = mibspec_cli(*args, "-o", str(tmp_path / "out"), "--device", "cpu", "--batch-size", "auto")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    # the size used is declared, here all six rows in one pass (a CPU has room for them)
    assert report["settings"]["batch_size"] == 6


@pytest.mark.parametrize("command", ["circuit", "causal-variable"])
def test_a_model_over_max_model_bytes_is_refused_before_it_is_loaded(  # type: ignore[no-untyped-def]
    mibspec_cli, tmp_path: Path, command: str
) -> None:
    """The score commands take the bound verify applies: a model whose parameters are over it
    is refused naming the option, and nothing is written."""
    out = tmp_path / "out"
    run = mibspec_cli(*SCORE_COMMANDS[command], "-o", str(out), "--max-model-bytes", "1000")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert "over the limit of 1000 bytes (--max-model-bytes)" in run.stderr
    assert not (out / "report.json").exists()


@pytest.mark.slow
def test_a_raised_max_model_bytes_lets_a_model_over_the_default_through(  # type: ignore[no-untyped-def]
    mibspec_cli, tmp_path: Path, small_ioi_dataset
) -> None:
    """The option is passed to the loader (the tiny model is 500 kB: a bound just above its
    parameters loads it, one just below refuses it)."""
    from mibspec.reference_impl.engine import model_size

    config = json.loads((MODELS / "tiny-gpt2" / "config.json").read_text(encoding="utf-8"))
    weight_bytes = model_size(config).parameters * 4
    dataset = small_ioi_dataset(tmp_path, 4)
    args = [a if not a.endswith("test.meta.json") else str(dataset) for a in CIRCUIT]
    below = mibspec_cli(*args, "-o", str(tmp_path / "a"), "--max-model-bytes", str(weight_bytes - 1))
    assert below.returncode == 2, below.stderr
    above = mibspec_cli(*args, "-o", str(tmp_path / "b"), "--max-model-bytes", str(weight_bytes))
    assert above.returncode == 0, above.stderr
