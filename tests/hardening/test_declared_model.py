"""The declared model is the loaded one (SPEC.md M-5): architecture, dimensions and vocabulary
of a report's ``model`` are compared with the config.json recomputation reads, for every
track that loads a transformer, before any weight is read.

Independent anchor: the shipped tiny models' config.json files, read here with json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hardening_support import REPO

import mibspec
from mibspec.validator import Stage, StageStatus

pytestmark = pytest.mark.recompute

MODELS = REPO / "examples" / "models"


def _copy(tmp_path: Path, example: str, change: Any) -> Path:
    folder = tmp_path / example
    shutil.copytree(REPO / "examples" / example, folder)
    path = folder / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data["model"])
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def _report(result: Any) -> Any:
    return next(doc for doc in result.documents if doc.path.endswith("report.json"))


def _config(name: str) -> dict[str, Any]:
    return json.loads((MODELS / name / "config.json").read_text(encoding="utf-8"))


def _assert_not_recomputed(doc: Any) -> None:
    assert not doc.valid
    assert doc.stages[Stage.RECOMPUTE][0] is StageStatus.FAILED
    assert doc.comparisons == []  # nothing recomputed on the other model, so nothing "agrees"


def test_circuit_report_declaring_llama_on_gpt2_files(tmp_path: Path) -> None:
    pytest.importorskip("torch")

    def change(model: dict[str, Any]) -> None:
        model["architecture"] = "LlamaForCausalLM"
        model["config"]["n_kv_heads"] = 2

    result = mibspec.verify(_copy(tmp_path, "circuit-ioi", change), model_roots=[MODELS])
    doc = _report(result)
    _assert_not_recomputed(doc)
    config = _config("tiny-gpt2")
    codes = sorted((f.code, f.pointer) for f in doc.findings)
    assert codes == [("R108", "/model/architecture"), ("R109", "/model/config/n_kv_heads")]
    messages = " ".join(f.message for f in doc.findings)
    assert "LlamaForCausalLM" in messages
    assert config["architectures"][0] in messages
    assert f"{config['n_head']}" in messages  # GPT-2: as many key-value heads as heads


def test_causal_variable_report_declaring_a_larger_model(tmp_path: Path) -> None:
    pytest.importorskip("torch")

    def change(model: dict[str, Any]) -> None:
        model["config"].update(n_layers=24, n_heads=14, vocab_size=151936)

    result = mibspec.verify(_copy(tmp_path, "causal-variable-ravel", change), model_roots=[MODELS])
    doc = _report(result)
    _assert_not_recomputed(doc)
    codes = sorted((f.code, f.pointer) for f in doc.findings)
    assert codes == [
        ("R109", "/model/config/n_heads"),
        ("R109", "/model/config/n_layers"),
        ("R110", "/model/config/vocab_size"),
    ]
    config = _config("tiny-gpt2-ravel")
    by_pointer = {f.pointer: f.message for f in doc.findings}
    assert f"gives {config['n_layer']}" in by_pointer["/model/config/n_layers"]
    assert f"gives {config['vocab_size']}" in by_pointer["/model/config/vocab_size"]


def test_causal_bench_transformer_report_with_a_wrong_width(tmp_path: Path) -> None:
    pytest.importorskip("torch")

    def change(model: dict[str, Any]) -> None:
        model["config"]["d_model"] = 2 * _config("tiny-gpt2")["n_embd"]

    result = mibspec.verify(_copy(tmp_path, "causal-bench-tiny-gpt2", change), model_roots=[MODELS])
    doc = _report(result)
    _assert_not_recomputed(doc)
    assert [(f.code, f.pointer) for f in doc.findings] == [("R109", "/model/config/d_model")]


def test_a_declaration_that_matches_passes_the_check(tmp_path: Path) -> None:
    """The unchanged example (its declaration is the tiny model's config) still recomputes."""
    pytest.importorskip("torch")
    result = mibspec.verify(
        _copy(tmp_path, "causal-bench-tiny-gpt2", lambda model: None), model_roots=[MODELS]
    )
    doc = _report(result)
    assert doc.valid, [f.to_json() for f in doc.findings]
    assert doc.comparisons


def test_the_config_summary_reads_each_family_with_its_defaults() -> None:
    pytest.importorskip("torch")
    from mibspec.reference_impl.engine import config_summary

    llama = _config("tiny-llama")
    assert config_summary(llama) == {
        "architecture": "LlamaForCausalLM",
        "n_layers": llama["num_hidden_layers"],
        "n_heads": llama["num_attention_heads"],
        "n_kv_heads": llama["num_key_value_heads"],
        "d_model": llama["hidden_size"],
        "vocab_size": llama["vocab_size"],
        "parallel_attn_mlp": False,
    }
    without = {k: v for k, v in llama.items() if k != "num_key_value_heads"}
    assert config_summary(without)["n_kv_heads"] == llama["num_attention_heads"]
    gpt2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}
    # transformers' GPT2Config defaults: 12 layers, 12 heads, 768 wide, 50,257 tokens
    assert config_summary(gpt2) == {
        "architecture": "GPT2LMHeadModel",
        "n_layers": 12,
        "n_heads": 12,
        "n_kv_heads": 12,
        "d_model": 768,
        "vocab_size": 50257,
        "parallel_attn_mlp": False,
    }
