"""Memory and time of `mibspec verify` with recomputation at a real model's size.

A random model with the shape and every structural option of a real checkpoint's config
(``--shape``: Qwen2.5-0.5B by default; GPT-2 small; Gemma-2-2B) is written as safetensors in
the dtype its report declares (``--dtype``; the released checkpoints are bfloat16, so that is
how a user's files come), with the tiny example model's tokenizer (its ids lie inside every
vocabulary here). `mibspec score circuit --method random` writes a circuit report on
``--examples`` generated IOI rows, computed in ``--dtype``; then `mibspec verify REPORT --model-root MODELS`
recomputes it in a process of its own, whose peak resident memory (``wait4``'s
``ru_maxrss``), wall-clock and CPU time are measured. This process imports neither torch nor
the model: Linux starts a child's peak from its parent's. A process that only imports what
verification imports (the engine, the validator and transformers' class of the
architecture, whose modules alone take about 150 MiB) gives the baseline resident memory
of the interpreter and the libraries.

Figures: weight bytes (the parameters in the declared dtype), the verification's peak RSS,
the baseline's, peak RSS / weight bytes (raw, and above the baseline: what the model and its
recomputation cost), wall-clock time per example and per curve point. Goal: peak RSS above
the baseline / weight bytes ≤ 1.5.

Last, the refusal a model too large for this machine gets: the memory check verification
runs before reading any weight file (``check_memory``), on Llama-3.1-8B's configuration in
float32 with files of its parameters' size (nothing is written), and its R104 message.

    python benchmarks/bench_model_memory.py [--shape qwen2.5-0.5b|gpt2-small|gemma-2-2b]
        [--dtype float32|bfloat16] [--examples N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOAL = 1.5
#: Real configurations' shapes and structural options (the public configs' values).
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "gpt2-small": (
        "gpt2",
        {"n_layers": 12, "n_heads": 12, "d_model": 768, "vocab_size": 50257, "n_positions": 1024},
    ),
    "qwen2.5-0.5b": (
        "qwen2",
        {
            "n_layers": 24,
            "n_heads": 14,
            "d_model": 896,
            "vocab_size": 151936,
            "num_key_value_heads": 2,
            "intermediate_size": 4864,
            "tie_word_embeddings": True,
            "rope_theta": 1000000.0,
            "rms_norm_eps": 1e-6,
            "max_position_embeddings": 32768,
            "use_sliding_window": False,
        },
    ),
    "gemma-2-2b": (
        "gemma2",
        {
            "n_layers": 26,
            "n_heads": 8,
            "d_model": 2304,
            "vocab_size": 256000,
            "num_key_value_heads": 4,
            "intermediate_size": 9216,
            "head_dim": 256,
            "query_pre_attn_scalar": 256,
            "sliding_window": 4096,
            "attn_logit_softcapping": 50.0,
            "final_logit_softcapping": 30.0,
            "max_position_embeddings": 8192,
        },
    ),
}


#: The transformers class each family is built with (imported by the baseline process too).
CLASSES = {"gpt2": "GPT2LMHeadModel", "qwen2": "Qwen2ForCausalLM", "gemma2": "Gemma2ForCausalLM"}
#: Llama-3.1-8B's public config: the model a 24 GiB machine cannot load in float32.
LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
}


def _refusal() -> tuple[int, str]:
    """Llama-3.1-8B in float32: the bytes its files hold, and what ``check_memory`` says."""
    from mibspec.reference_impl.engine import model_size
    from mibspec.reference_impl.recompute._inputs import UnusableInputError, check_memory

    file_bytes = model_size(LLAMA_8B).parameters * 4
    try:
        check_memory(LLAMA_8B, "float32", file_bytes, "/model")
    except UnusableInputError as exc:
        return file_bytes, f"{exc.code} at {exc.pointer}: {exc.detail}"
    return file_bytes, "not refused (this machine has the memory to load it)"


def _model(shape: str, dtype: str, folder: Path) -> int:
    """Write the random model in ``dtype`` with the example tokenizer; its weight bytes."""
    import torch
    from safetensors.torch import load_file, save_file

    from mibspec.reference_impl.engine import random_model

    family, config = SHAPES[shape]
    random_model(family, folder, seed=0, **config)
    weights = folder / "model.safetensors"
    if dtype != "float32":
        tensors = {k: v.to(getattr(torch, dtype)) for k, v in load_file(weights).items()}
        save_file(tensors, weights, metadata={"format": "pt"})
        del tensors
        path = folder / "config.json"
        config_json = json.loads(path.read_text(encoding="utf-8"))
        config_json["torch_dtype"] = dtype
        path.write_text(json.dumps(config_json, indent=2), encoding="utf-8")
    (folder / "generation_config.json").unlink(missing_ok=True)
    shutil.copy(REPO / "examples" / "models" / "tiny-gpt2" / "tokenizer.json", folder / "tokenizer.json")
    return weights.stat().st_size


def _measured(command: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall-clock seconds, CPU seconds and peak resident bytes of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if process.returncode not in (0, 1):
        raise SystemExit(f"{command[:4]} exited {process.returncode}: {output.decode()[-3000:]}")
    if process.returncode == 1:
        raise SystemExit(f"the report did not verify: {output.decode()[-3000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--examples", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--make-model", type=Path, help=argparse.SUPPRESS)  # the child that writes it
    args = parser.parse_args()
    if args.make_model is not None:
        print(_model(args.shape, args.dtype, args.make_model))
        return 0
    from mibspec.core.strict_json import DEFAULT_LIMITS
    from mibspec.reference_impl.datasets import generate
    from mibspec.reference_impl.datasets._common import write_dataset

    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        models = work / "models"
        # in a process of its own: a child's peak memory starts from its parent's (Linux keeps
        # the parent's high-water mark across exec), so this process must stay small
        make = [python, __file__, "--shape", args.shape, "--dtype", args.dtype, "--make-model"]
        made = subprocess.run([*make, str(models / args.shape)], capture_output=True, text=True, check=True)
        weight_bytes = int(made.stdout.split()[-1])
        _, meta = write_dataset(generate("ioi", "test", args.examples, seed=0), work / "data")
        out = work / "report"
        score = [python, "-m", "mibspec", "score", "circuit", "--model", str(models / args.shape)]
        score += ["--dataset", str(meta), "-c", "io_s2_flip", "--method", "random", "--dtype", args.dtype]
        score += ["-o", str(out)]
        # a model over verify's default bound (Gemma-2-2B in float32) is measured with the
        # bound raised, as its user would raise it, on both commands
        over = weight_bytes > DEFAULT_LIMITS.max_model_bytes
        bound = ["--max-model-bytes", str(2 * weight_bytes)] if over else []
        score += bound
        score_wall, _, _ = _measured(score, work)
        report = out / "report.json"
        data = json.loads(report.read_text(encoding="utf-8"))
        points = sum(len(curve["points"]) for curve in data["claims"]["curves"])
        imports = "import mibspec.reference_impl.engine, transformers, mibspec.validator; "
        baseline = [python, "-c", imports + f"transformers.{CLASSES[SHAPES[args.shape][0]]}"]
        _, _, base_rss = _measured(baseline, work)
        verify = [python, "-m", "mibspec", "verify", str(report), "--model-root", str(models), *bound]
        wall, cpu, peak = _measured(verify, work)
    above = (peak - base_rss) / weight_bytes
    figures: list[dict[str, Any]] = [
        {"name": "weight bytes", "value": weight_bytes, "unit": "B"},
        {"name": "verify: peak RSS", "value": peak, "unit": "B"},
        {"name": "baseline process (imports only): peak RSS", "value": base_rss, "unit": "B"},
        {"name": "peak RSS / weight bytes", "value": peak / weight_bytes, "unit": "×"},
        {
            "name": "peak RSS above the baseline / weight bytes",
            "value": above,
            "unit": "×",
            "goal": f"≤ {GOAL}",
            "met": above <= GOAL,
        },
        {"name": "verify: wall-clock time", "value": wall, "unit": "s"},
        {"name": "verify: CPU time", "value": cpu, "unit": "s"},
        {
            "name": f"verify: wall-clock per example ({args.examples})",
            "value": wall / args.examples,
            "unit": "s",
        },
        {"name": f"verify: wall-clock per curve point ({points})", "value": wall / points, "unit": "s"},
        # CPU time: the steadier figure on a shared machine, whose load stretches wall-clock
        {"name": "verify: CPU time per example", "value": cpu / args.examples, "unit": "s"},
        {"name": "verify: CPU time per curve point", "value": cpu / points, "unit": "s"},
        {"name": "score circuit (writing the report): wall-clock", "value": score_wall, "unit": "s"},
    ]
    llama_bytes, refusal = _refusal()
    figures.append({"name": "Llama-3.1-8B shape in float32: file bytes", "value": llama_bytes, "unit": "B"})
    print(f"{args.shape} in {args.dtype}, {args.examples} examples, {points} curve points")
    for figure in figures:
        print(f"  {figure['name']}: {figure['value']:.4g} {figure.get('unit', '')}")
    print(f"  Llama-3.1-8B shape in float32, before reading: {refusal}")
    table = {"title": "A model too large for this machine", "columns": ["model", "verify says"]}
    table["rows"] = [["Llama-3.1-8B shape, float32", refusal]]
    if args.json:
        out = {"status": "ok", "figures": figures, "tables": [table]}
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
