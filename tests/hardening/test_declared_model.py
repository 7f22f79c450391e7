"""The declared model is the loaded one (SPEC.md M-5): architecture, dimensions and vocabulary
of a report's ``model`` are compared with the config.json recomputation reads, for every
track that loads a transformer, before any weight is read, and again with the model as
built; a config giving one quantity under two spellings is refused, and the weights are
loaded strictly (no tensor dropped, none missing).

Independent anchor: the shipped tiny models' config.json files, read here with json, and
transformers' own table of spellings (``attribute_map``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
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


@pytest.mark.slow
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


# --- the model as built: one spelling per quantity, strict weights, built shapes ---------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _with_model(tmp_path: Path, example: str, model: str) -> tuple[Path, Path]:
    """A copy of an example (report) and of its model under a model root (models)."""
    report = tmp_path / "report"
    shutil.copytree(REPO / "examples" / example, report)
    models = tmp_path / "models"
    shutil.copytree(MODELS / model, models / model)
    return report, models


def _repin(report: Path, folder: Path, *names: str) -> None:
    path = report / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["model"]["files"].update({name: _sha256(folder / name) for name in names})
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


@pytest.mark.parametrize(
    ("alias", "canonical", "value"),
    [
        ("num_hidden_layers", "n_layer", 2),
        ("num_attention_heads", "n_head", 2),
        ("hidden_size", "n_embd", 32),
        ("max_position_embeddings", "n_positions", 32),
    ],
)
def test_a_config_giving_one_quantity_under_two_spellings_is_refused(
    tmp_path: Path, alias: str, canonical: str, value: int
) -> None:
    """transformers' GPT-2 config maps each alias onto its own key and builds from the one set
    last; the config is refused at the model declaration before anything is built."""
    pytest.importorskip("torch")
    report, models = _with_model(tmp_path, "circuit-ioi", "tiny-gpt2")
    folder = models / "tiny-gpt2"
    config = _config("tiny-gpt2")
    assert config[canonical] != value
    (folder / "config.json").write_text(json.dumps({**config, alias: value}), encoding="utf-8")
    _repin(report, folder, "config.json")
    result = mibspec.verify(report / "report.json", model_roots=[models])
    doc = _report(result)
    _assert_not_recomputed(doc)
    [finding] = doc.findings
    assert (finding.code, finding.pointer) == ("R104", "/model")
    assert f"{canonical} = {config[canonical]}" in finding.message
    assert f"{alias} = {value}" in finding.message


def test_a_report_scored_on_a_truncated_build_does_not_verify(tmp_path: Path) -> None:
    """The attack: four layers of weights and ``n_layer: 4`` (what the report declares, what the
    weights' size implies), but ``num_hidden_layers: 2``, so that transformers builds two
    layers and drops the rest; the claims were scored on that two-layer build."""
    pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    report, models = _with_model(tmp_path, "causal-variable-ravel", "tiny-gpt2-ravel")
    folder = models / "tiny-gpt2-ravel"
    config = _config("tiny-gpt2-ravel")
    assert config["n_layer"] == 2
    tensors = load_file(folder / "model.safetensors")
    for name in list(tensors):  # two more layers: copies of the first two
        for layer, copy in (("0", "2"), ("1", "3")):
            if name.startswith(f"transformer.h.{layer}."):
                tensors[f"transformer.h.{copy}." + name.split(".", 3)[3]] = tensors[name].clone()
    assert {n.split(".")[2] for n in tensors if n.startswith("transformer.h.")} == {"0", "1", "2", "3"}
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(
        json.dumps({**config, "n_layer": 4, "num_hidden_layers": 2}), encoding="utf-8"
    )
    _repin(report, folder, "config.json", "model.safetensors")

    def declare_four(model: dict[str, Any]) -> None:
        model["config"]["n_layers"] = 4

    path = report / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    declare_four(data["model"])
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    doc = _report(mibspec.verify(path, model_roots=[models]))
    _assert_not_recomputed(doc)
    assert [(f.code, f.pointer) for f in doc.findings] == [("R104", "/model")]
    assert "num_hidden_layers = 2" in doc.findings[0].message


def test_a_tensor_the_module_has_no_place_for_is_refused(tmp_path: Path) -> None:
    """A tied output head lets the files hold one embedding's worth of values more than the
    parameters; a tensor of that size under another name passed the count, and transformers
    drops it with a warning. Strict loading names it."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    report, models = _with_model(tmp_path, "circuit-ioi", "tiny-gpt2")
    folder = models / "tiny-gpt2"
    tensors = load_file(folder / "model.safetensors")
    tensors["transformer.h.0.attn.c_extra.weight"] = torch.ones_like(tensors["transformer.wte.weight"])
    save_file(tensors, folder / "model.safetensors")
    _repin(report, folder, "model.safetensors")
    doc = _report(mibspec.verify(report / "report.json", model_roots=[models]))
    _assert_not_recomputed(doc)
    [finding] = doc.findings
    assert (finding.code, finding.pointer) == ("R104", "/model")
    assert "transformer.h.0.attn.c_extra.weight" in finding.message


def _tiny_gpt2_state() -> tuple[dict[str, Any], dict[str, Any]]:
    from safetensors.torch import load_file

    return _config("tiny-gpt2"), load_file(MODELS / "tiny-gpt2" / "model.safetensors")


def _load(config: dict[str, Any], tensors: dict[str, Any]) -> Any:
    from safetensors.torch import save

    from mibspec.reference_impl.engine import load_model_from_bytes

    return load_model_from_bytes(config, {"model.safetensors": save(tensors)})


def test_one_weight_under_two_names_is_refused() -> None:
    """``wte.weight`` is the base model's spelling of ``transformer.wte.weight``: transformers
    would keep one of the two silently."""
    pytest.importorskip("torch")
    config, tensors = _tiny_gpt2_state()
    tensors["wte.weight"] = tensors["transformer.wte.weight"] * 2  # fits the tied head's slack
    with pytest.raises(ValueError, match=r"'transformer\.wte\.weight' and 'wte\.weight', both for"):
        _load(config, tensors)


def test_a_weight_the_files_lack_is_refused() -> None:
    """A weight the files do not hold would be transformers' random initialisation; a tensor
    under a name the module does not have would be dropped."""
    pytest.importorskip("torch")
    config, tensors = _tiny_gpt2_state()
    tensors["transformer.ln_f.bias2"] = tensors.pop("transformer.ln_f.bias")
    with pytest.raises(ValueError, match=r"transformer\.ln_f\.bias"):
        _load(config, tensors)


def test_the_built_model_is_compared_with_the_declaration_and_the_config() -> None:
    """Whatever the config says, the numbers compared last are those of the built weights."""
    pytest.importorskip("torch")
    from mibspec.reference_impl.engine import built_summary
    from mibspec.reference_impl.recompute._inputs import (
        ModelMismatchError,
        UnusableInputError,
        check_built_model,
        error_findings,
    )

    config, tensors = _tiny_gpt2_state()
    weights = _load(config, tensors)
    assert built_summary(weights) == {
        "architecture": "GPT2LMHeadModel",
        "n_layers": config["n_layer"],
        "n_heads": config["n_head"],
        "n_kv_heads": config["n_head"],
        "d_model": config["n_embd"],
        "vocab_size": config["vocab_size"],
        "parallel_attn_mlp": False,
    }
    declaration = {"architecture": "GPT2LMHeadModel", "config": {"n_layers": 6, "d_model": 32}}
    with pytest.raises(ModelMismatchError) as caught:
        check_built_model(declaration, config, weights, "tiny-gpt2")
    assert (caught.value.code, caught.value.pointer) == ("R109", "/model/config/n_layers")
    assert f"has {config['n_layer']}" in caught.value.detail
    # the other mismatch travels with the first, and is reported before it
    assert [(e.code, e.pointer) for e in caught.value.also] == [("R109", "/model/config/d_model")]
    ctx = SimpleNamespace(finding=lambda code, pointer, **kw: (code, pointer))
    assert error_findings(ctx, caught.value) == [  # type: ignore[arg-type]  # the member it reads
        ("R109", "/model/config/d_model"),
        ("R109", "/model/config/n_layers"),
    ]
    # a config that does not describe the built weights (as a reader missing an alias would)
    with pytest.raises(UnusableInputError) as refused:
        check_built_model({}, {**config, "n_layer": 2}, weights, "tiny-gpt2")
    assert refused.value.pointer == "/model"
    assert f"n_layers 2 in config.json, {config['n_layer']} built" in refused.value.detail


def test_every_alias_transformers_accepts_is_known() -> None:
    """For each supported architecture, every entry of its config class's ``attribute_map``
    is a spelling the config reader folds (and checks for conflicts)."""
    pytest.importorskip("torch")
    import transformers

    from mibspec.reference_impl.engine import SUPPORTED_ARCHITECTURES, _load

    for arch, family in SUPPORTED_ARCHITECTURES.items():
        config_class = transformers.AutoConfig.for_model(family).__class__
        known = {frozenset(names) for names in _load._ALIASES[family]}
        for alias, target in config_class.attribute_map.items():
            assert frozenset((target, alias)) in known, (arch, alias, target)


def test_the_config_summary_reads_an_alias_given_alone() -> None:
    pytest.importorskip("torch")
    from mibspec.reference_impl.engine import config_summary, model_size

    config = _config("tiny-gpt2")
    spelled = {k: v for k, v in config.items() if k not in ("n_layer", "n_head")}
    spelled.update(num_hidden_layers=config["n_layer"], num_attention_heads=config["n_head"])
    assert config_summary(spelled) == config_summary(config)
    assert model_size(spelled) == model_size(config)
    # both spellings agreeing is accepted
    assert config_summary({**config, "num_hidden_layers": config["n_layer"]})["n_layers"] == config["n_layer"]


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_parameters"),
        ({"rope_theta": 500000.0}, "rope_theta = 500000.0"),
        (
            {"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default", "type": "linear"}},
            "type = 'linear'",
        ),
        ({"rope_scaling": None}, None),  # a null legacy field: transformers takes rope_parameters
        ({"rope_theta": 10000.0}, None),  # the same value twice
    ],
)
def test_rotary_parameters_given_twice_must_agree(change: dict[str, Any], refused: str | None) -> None:
    pytest.importorskip("torch")
    from mibspec.reference_impl.engine import read_config

    config = {**_config("tiny-llama"), **change}
    data = json.dumps(config).encode()
    if refused is None:
        assert read_config(data, "config.json") == config
        return
    with pytest.raises(ValueError, match=r"spellings|transformers would use one") as caught:
        read_config(data, "config.json")
    assert refused in str(caught.value)


# --------------------------------------------------------------------------- declared dtype (M-6)


def test_a_dtype_narrower_than_the_stored_weights_is_refused(tmp_path: Path) -> None:
    """tiny-gpt2 is stored in float32; declared bfloat16, its claims would be compared with the
    bfloat16 tolerance (a hundred times wider): refused before recomputation (R113)."""
    pytest.importorskip("torch")

    def change(model: dict[str, Any]) -> None:
        model["dtype"] = "bfloat16"

    result = mibspec.verify(_copy(tmp_path, "circuit-ioi", change), model_roots=[MODELS])
    doc = _report(result)
    _assert_not_recomputed(doc)
    r113 = [f for f in doc.findings if f.code == "R113"]
    assert [f.pointer for f in r113] == ["/model/dtype"]
    assert "stored in float32" in r113[0].message
    assert "declares dtype bfloat16" in r113[0].message


def _weights(path: Path, dtypes: list[str]) -> Path:
    """A safetensors file written byte by byte: one two-byte-wide tensor per dtype (no library)."""
    sizes = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int64": 8}
    header: dict[str, Any] = {}
    offset = 0
    for i, dtype in enumerate(dtypes):
        header[f"t{i}"] = {
            "dtype": {
                "float16": "F16",
                "bfloat16": "BF16",
                "float32": "F32",
                "float64": "F64",
                "int64": "I64",
            }[dtype],
            "shape": [2],
            "data_offsets": [offset, offset + 2 * sizes[dtype]],
        }
        offset += 2 * sizes[dtype]
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(offset))
    return path


def _ctx(track: str, profile: str) -> Any:
    from mibspec.core.profiles import load_profile

    return SimpleNamespace(data={"track": track}, profile=load_profile(profile))


@pytest.mark.parametrize(
    ("stored", "declared", "track", "profile", "model", "refused"),
    [
        (["float32", "int64"], "float32", "circuit", "default", "m", False),
        (["bfloat16", "int64"], "bfloat16", "circuit", "default", "m", False),  # stored so: no widening
        (["bfloat16", "float32"], "bfloat16", "circuit", "default", "m", True),  # the widest tensor counts
        (["float32"], "float16", "causal_variable", "default", "gpt2", True),
        (["float32"], "float16", "causal_variable", "mib-2025", "gpt2", False),  # MIB's own evaluation
        (["float32"], "bfloat16", "causal_variable", "mib-2025", "gpt2", True),  # not the dtype it accepts
        (["float32"], "bfloat16", "circuit", "mib-2025", "Gemma2ForCausalLM", False),
        (["float32"], "float16", "circuit", "mib-2025", "Gemma2ForCausalLM", True),  # its dtype is bfloat16
        (["float32"], "bfloat16", "circuit", "mib-2025", "GPT2LMHeadModel", True),
        (["float32"], "bfloat16", "causal_bench", "mib-2025", "Gemma2ForCausalLM", True),
        (["float64"], "float32", "circuit", "default", "m", False),  # one tolerance for both
        (["float64"], "float16", "circuit", "default", "m", True),
    ],
)
def test_the_profile_decides_which_narrowings_are_accepted(
    tmp_path: Path, stored: list[str], declared: str, track: str, profile: str, model: str, refused: bool
) -> None:
    from mibspec.reference_impl.recompute._inputs import ModelMismatchError, check_declared_dtype

    weights = _weights(tmp_path / "model.safetensors", stored)
    declaration = {"source": "hub", "id": "some/model", "architecture": model}
    if not refused:
        check_declared_dtype(_ctx(track, profile), declaration, declared, [weights], "/model")
        return
    with pytest.raises(ModelMismatchError) as caught:
        check_declared_dtype(_ctx(track, profile), declaration, declared, [weights], "/model")
    assert (caught.value.code, caught.value.pointer) == ("R113", "/model/dtype")
