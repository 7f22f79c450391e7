"""The shared frame of ``mibspec score``: path checks, usage errors, the written report
verified and the verdict as the exit code (here through ``score circuit``, random scores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.recompute
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
ARGS = (
    "--model",
    str(REPO / "examples" / "models" / "tiny-gpt2"),
    "--dataset",
    str(REPO / "examples" / "datasets" / "ioi" / "test.meta.json"),
    "-c",
    "io_s2_flip",
    "--method",
    "random",
)


@pytest.mark.slow
def test_writes_a_conformant_report_and_refuses_to_overwrite(tmp_path: Path, mibspec_cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    first = mibspec_cli("score", "circuit", *ARGS, "-o", str(out))
    assert first.returncode == 0, first.stderr
    assert f"wrote {out / 'report.json'} (conformant without recomputation)" in first.stdout
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["track"] == "circuit"
    assert mibspec_cli("verify", str(out / "report.json"), "--no-recompute").returncode == 0
    again = mibspec_cli("score", "circuit", *ARGS, "-o", str(out))
    assert again.returncode == 2
    assert "exists" in again.stderr
    assert mibspec_cli("score", "circuit", *ARGS, "-o", str(out), "--overwrite").returncode == 0


def test_a_missing_model_folder_is_a_usage_error(tmp_path: Path, mibspec_cli) -> None:  # type: ignore[no-untyped-def]
    args = list(ARGS)
    args[1] = str(tmp_path / "nope")
    done = mibspec_cli("score", "circuit", *args, "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"model folder {tmp_path / 'nope'} does not exist" in done.stderr
    assert not (tmp_path / "out").exists()


def _bfloat16_copy(folder: Path) -> Path:
    """tiny-gpt2 with its weights stored in bfloat16 (a model released in bfloat16)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    source = REPO / "examples" / "models" / "tiny-gpt2"
    shutil.copytree(source, folder)
    weights = load_file(str(source / "model.safetensors"))
    save_file({k: v.to(torch.bfloat16) for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder


def test_a_report_scored_in_bfloat16_declares_it_and_is_recomputed_in_it(tmp_path: Path, mibspec_cli) -> None:  # type: ignore[no-untyped-def]
    args = list(ARGS)
    # a model stored in float32 is not scored in bfloat16: verification would refuse it (R113)
    refused = mibspec_cli("score", "circuit", *args, "--dtype", "bfloat16", "-o", str(tmp_path / "no"))
    assert refused.returncode == 2
    assert "R113" in refused.stderr
    assert not (tmp_path / "no").exists()
    args[1] = str(_bfloat16_copy(tmp_path / "tiny-gpt2-bf16"))
    out = tmp_path / "out"
    done = mibspec_cli("score", "circuit", *args, "--dtype", "bfloat16", "-o", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["model"]["dtype"] == "bfloat16"
    # recomputed in bfloat16: the claims are the bfloat16 model's, within its tolerance ...
    models = str(tmp_path)
    assert mibspec_cli("verify", str(out / "report.json"), "--model-root", models).returncode == 0
    # ... which a float32 computation does not give: declared float32, the same claims fail
    report["model"]["dtype"] = "float32"
    (out / "report.json").write_text(json.dumps(report), encoding="utf-8")
    refused = mibspec_cli("verify", str(out / "report.json"), "--model-root", models)
    assert refused.returncode == 1
    assert "R103" in refused.stdout
