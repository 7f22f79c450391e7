"""Loading a causal language model into :class:`ModelWeights`.

Only safetensors checkpoints of known architectures are read, never with remote code:
``trust_remote_code=False``, ``use_safetensors=True``, and a local config that names an
``auto_map`` or asks for ``trust_remote_code`` is refused before transformers sees
it. Hub ids must be pinned to a 40-hex commit.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mibspec.core.strict_json import DEFAULT_LIMITS

from ._weights import LayerWeights, ModelWeights, NormKind, NormWeights

__all__ = [
    "DTYPES",
    "MAX_MODEL_TENSORS",
    "SUPPORTED_ARCHITECTURES",
    "ModelSize",
    "ModelTooLargeError",
    "built_summary",
    "check_model_size",
    "config_summary",
    "from_transformers",
    "load_model",
    "load_model_from_bytes",
    "model_size",
    "read_config",
    "safetensors_parameters",
]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
"""Accepted ``dtype`` names (float64 is for reference computations and tests)."""

SUPPORTED_ARCHITECTURES: dict[str, str] = {
    "GPT2LMHeadModel": "gpt2",
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Gemma2ForCausalLM": "gemma2",
}
"""transformers class name → family handled by the engine."""

DEFAULT_MAX_MODEL_BYTES = DEFAULT_LIMITS.max_model_bytes
"""Default bound on a model's size in bytes (``Limits.max_model_bytes``)."""

_MODEL_TYPES = {family: arch for arch, family in SUPPORTED_ARCHITECTURES.items()}
_REVISION = re.compile(r"[0-9a-f]{40}")

# Activation names as transformers spells them → the engine's formula.
_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "silu": "silu",
    "swish": "silu",
    "relu": "relu",
}
# Rotary variants whose frequencies depend on the sequence length are not reproduced.
_STATIC_ROPE = {"default", "linear", "llama3", "yarn"}

# The spellings transformers accepts for one quantity of a config (a config class's
# ``attribute_map``: GPT-2 takes the standard names for its own ``n_*`` keys), canonical
# name first. transformers keeps whichever spelling it sets last and builds from it, so a
# config naming one quantity twice with different values is refused: mibspec reads the
# configuration the way the module is built, or not at all.
_ALIASES: dict[str, tuple[tuple[str, ...], ...]] = {
    "gpt2": (
        ("n_layer", "num_hidden_layers"),
        ("n_head", "num_attention_heads"),
        ("n_embd", "hidden_size"),
        ("n_positions", "max_position_embeddings"),
    ),
    "llama": (),
    "qwen2": (),
    "gemma2": (),
}
# Spellings every configuration accepts (``PreTrainedConfig``): the rotary parameters' legacy
# name (the dtype's, ``torch_dtype``, does not matter: the model is built in the declared dtype).
_COMMON_ALIASES: tuple[tuple[str, ...], ...] = (("rope_parameters", "rope_scaling"),)


def _parse_dtype(dtype: str) -> torch.dtype:
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def _check_config(raw: dict[str, Any], where: str) -> str:
    """Refuse remote code and unknown architectures; return the architecture name."""
    if raw.get("auto_map"):
        raise ValueError(
            f"model: the config of {where} declares auto_map (custom code: "
            f"{sorted(raw['auto_map'])}); models that need remote code are refused"
        )
    if raw.get("trust_remote_code"):
        raise ValueError(
            f"model: the config of {where} asks for trust_remote_code; models that need remote code "
            "are refused"
        )
    archs = raw.get("architectures") or []
    if archs:
        if (
            not isinstance(archs, list)
            or len(archs) != 1
            or not isinstance(archs[0], str)
            or archs[0] not in SUPPORTED_ARCHITECTURES
        ):
            raise ValueError(
                f"model: unsupported architecture {str(archs)[:200]} in {where}; "
                f"expected one of {sorted(SUPPORTED_ARCHITECTURES)}"
            )
        return str(archs[0])
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in _MODEL_TYPES:
        raise ValueError(
            f"model: unsupported model_type {model_type!r} in {where} (no architectures "
            f"field); expected one of {sorted(_MODEL_TYPES)}"
        )
    return _MODEL_TYPES[model_type]


MAX_MODEL_TENSORS = 65_536
"""Most tensors a model's configuration may imply (and its weight files may hold); the
largest supported checkpoints have about a thousand. Bounds the work of building the
module before any weight is read."""

_MAX_HEADER_BYTES = 16 * 1024 * 1024  # a safetensors header of 65,536 tensors is about 10 MB
_MAX_DIMENSION = 1 << 31
# Tensors some checkpoints carry that are buffers, not parameters (causal masks, rotary
# frequencies): they are not counted against the configuration.
_BUFFERS = re.compile(r"(^|\.)(attn\.bias|attn\.masked_bias|rotary_emb\.inv_freq)$")


class ModelTooLargeError(ValueError):
    """The model a configuration describes is over the size limit; nothing was built."""


@dataclass(frozen=True)
class ModelSize:
    """What a configuration implies, before anything is built.

    Attributes:
        parameters: parameter values, a tied output head counted once.
        head: values of the output head when it is tied to the embedding (a checkpoint may
            store the tied copy too), else 0.
        tensors: parameter tensors.
    """

    parameters: int
    head: int
    tensors: int


def read_config(data: bytes, where: str) -> dict[str, Any]:
    """A model's ``config.json`` from its bytes: strict JSON, no remote code, a known
    architecture, no quantity given twice with different values (:func:`_check_aliases`).

    Raises:
        ValueError: not strict JSON, not an object, remote code, unknown architecture,
            conflicting spellings of one quantity.
    """
    from mibspec.core.strict_json import parse_json_bytes

    parsed = parse_json_bytes(data, path=where)
    if parsed.problems:
        raise ValueError(f"model: {where} is not strict JSON: {parsed.problems[0].message}")
    if not isinstance(parsed.data, dict):
        raise ValueError(f"model: {where} must hold a JSON object")
    arch = _check_config(parsed.data, where)
    model_type = parsed.data.get("model_type", SUPPORTED_ARCHITECTURES[arch])
    if model_type != SUPPORTED_ARCHITECTURES[arch]:
        raise ValueError(f"model: {where} names the architecture {arch} with model_type {model_type!r}")
    _check_aliases(parsed.data, where)
    return parsed.data


def _spelling(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _check_aliases(raw: dict[str, Any], where: str) -> None:
    """Refuse a config that gives one quantity under two spellings with different values.

    Raises:
        ValueError: names the spellings and their values (transformers would silently keep one).
    """
    family = SUPPORTED_ARCHITECTURES[_check_config(raw, where)]
    for names in _ALIASES[family]:
        _one_value(raw, [name for name in names if name in raw], where)
    for names in _COMMON_ALIASES:  # a null there is no value: transformers takes the other
        _one_value(raw, [name for name in names if raw.get(name) is not None], where)
    rope = raw.get("rope_scaling") or raw.get("rope_parameters")  # transformers' precedence
    if isinstance(rope, dict):
        if (
            "rope_theta" in raw
            and "rope_theta" in rope
            and _spelling(raw["rope_theta"]) != _spelling(rope["rope_theta"])
        ):
            raise ValueError(
                f"model: {where} gives rope_theta = {raw['rope_theta']!r} and the rotary parameters' "
                f"rope_theta = {rope['rope_theta']!r}; transformers would use one of them"
            )
        if "type" in rope and "rope_type" in rope and _spelling(rope["type"]) != _spelling(rope["rope_type"]):
            raise ValueError(
                f"model: {where} gives the rotary type as type = {rope['type']!r} and rope_type = "
                f"{rope['rope_type']!r}; transformers would use one of them"
            )


def _one_value(raw: dict[str, Any], present: list[str], where: str) -> None:
    """Refuse spellings of one quantity (``present``) that give it different values."""
    if len({_spelling(raw[name]) for name in present}) > 1:
        given = ", ".join(f"{name} = {raw[name]!r}" for name in present)
        raise ValueError(
            f"model: {where} gives one quantity under {len(present)} spellings with different "
            f"values ({given}); transformers would build the model from one of them and ignore "
            "the other"
        )


def _canonical(raw: dict[str, Any], family: str) -> dict[str, Any]:
    """``raw`` with every quantity under its canonical spelling (aliases already checked to agree)."""
    out = dict(raw)
    for canonical, *others in _ALIASES[family]:
        for other in others:
            if other in out:
                out.setdefault(canonical, out.pop(other))
    return out


def _dim(raw: dict[str, Any], key: str, default: int | None) -> int:
    value = raw.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"model: the config has no {key}")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < _MAX_DIMENSION:
        raise ValueError(f"model: config {key} must be an integer in [1, 2**31), got {value!r}")
    return value


# transformers' defaults for absent fields: vocab_size, hidden_size, intermediate_size,
# num_hidden_layers, num_attention_heads, tie_word_embeddings.
_FAMILY_DEFAULTS: dict[str, tuple[int, int, int, int, int, bool]] = {
    "llama": (32000, 4096, 11008, 32, 32, False),
    "qwen2": (151936, 4096, 22016, 32, 32, False),
    "gemma2": (256000, 2304, 9216, 26, 8, True),
}


def config_summary(raw: dict[str, Any]) -> dict[str, Any]:
    """The architecture and the numbers a report declares (``model.config``) as a checked
    configuration gives them, under any of the spellings transformers accepts (its defaults
    for absent fields).

    Returns:
        ``architecture``, ``n_layers``, ``n_heads``, ``n_kv_heads``, ``d_model``,
        ``vocab_size`` and ``parallel_attn_mlp`` (no supported architecture has it).

    Raises:
        ValueError: unknown architecture, conflicting spellings of one quantity, or a width or
            count that is not a positive integer.
    """
    arch = _check_config(raw, "the config")
    family = SUPPORTED_ARCHITECTURES[arch]
    _check_aliases(raw, "the config")
    raw = _canonical(raw, family)
    if family == "gpt2":
        heads = _dim(raw, "n_head", 12)
        numbers = (
            _dim(raw, "n_layer", 12),
            heads,
            heads,
            _dim(raw, "n_embd", 768),
            _dim(raw, "vocab_size", 50257),
        )
    else:
        defaults = _FAMILY_DEFAULTS[family]
        heads = _dim(raw, "num_attention_heads", defaults[4])
        numbers = (
            _dim(raw, "num_hidden_layers", defaults[3]),
            heads,
            _dim(raw, "num_key_value_heads", heads),
            _dim(raw, "hidden_size", defaults[1]),
            _dim(raw, "vocab_size", defaults[0]),
        )
    keys = ("n_layers", "n_heads", "n_kv_heads", "d_model", "vocab_size")
    return {"architecture": arch, **dict(zip(keys, numbers, strict=True)), "parallel_attn_mlp": False}


def model_size(raw: dict[str, Any]) -> ModelSize:
    """The parameters and tensors a checked configuration implies (transformers' defaults
    for absent fields), computed from its numbers alone.

    Raises:
        ValueError: a width, count or size is not a positive integer below 2**31, or one
            quantity is given under two spellings with different values.
    """
    arch = _check_config(raw, "the config")
    family = SUPPORTED_ARCHITECTURES[arch]
    _check_aliases(raw, "the config")
    raw = _canonical(raw, family)
    flag = lambda key, default: bool(raw.get(key, default))  # noqa: E731
    if family == "gpt2":
        V, d = _dim(raw, "vocab_size", 50257), _dim(raw, "n_embd", 768)
        L, P = _dim(raw, "n_layer", 12), _dim(raw, "n_positions", 1024)
        _dim(raw, "n_head", 12)
        inner = _dim(raw, "n_inner", 4 * d)
        per_layer = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (2 * d * inner + inner + d)
        parameters, tensors, tied = (
            V * d + P * d + L * per_layer + 2 * d,
            4 + 12 * L,
            flag("tie_word_embeddings", True),
        )
    else:
        defaults = _FAMILY_DEFAULTS[family]
        V, d = _dim(raw, "vocab_size", defaults[0]), _dim(raw, "hidden_size", defaults[1])
        inner, L = _dim(raw, "intermediate_size", defaults[2]), _dim(raw, "num_hidden_layers", defaults[3])
        H = _dim(raw, "num_attention_heads", defaults[4])
        G = _dim(raw, "num_key_value_heads", H)
        # Gemma-2's configuration defaults an absent head_dim to 256; a null one, like the
        # other families', means d_model / heads.
        absent = family == "gemma2" and "head_dim" not in raw
        e = _dim(raw, "head_dim", 256 if absent else d // H or 1)
        attn = 2 * d * H * e + 2 * d * G * e
        attn_tensors = 4
        if family == "qwen2":
            attn, attn_tensors = attn + H * e + 2 * G * e, 7
        elif flag("attention_bias", False):
            attn, attn_tensors = attn + H * e + 2 * G * e + d, 8
        mlp, mlp_tensors = 3 * d * inner, 3
        if family == "llama" and flag("mlp_bias", False):
            mlp, mlp_tensors = mlp + 2 * inner + d, 6
        norms = 4 if family == "gemma2" else 2
        parameters = V * d + L * (attn + mlp + norms * d) + d
        tensors = 2 + L * (attn_tensors + mlp_tensors + norms)
        tied = flag("tie_word_embeddings", defaults[5])
    if not tied:
        parameters, tensors = parameters + V * d, tensors + 1
    return ModelSize(parameters, V * d if tied else 0, tensors)


def check_model_size(size: ModelSize, dtype: str, max_bytes: int | None) -> None:
    """Refuse a configuration whose model would be over ``max_bytes`` in ``dtype``.

    Raises:
        ModelTooLargeError: over the byte limit or over :data:`MAX_MODEL_TENSORS` tensors.
    """
    itemsize = _parse_dtype(dtype).itemsize
    if max_bytes is not None and size.parameters * itemsize > max_bytes:
        raise ModelTooLargeError(
            f"the config implies {size.parameters} parameters, {size.parameters * itemsize} bytes in "
            f"{dtype}, over the limit of {max_bytes} bytes (--max-model-bytes)"
        )
    if size.tensors > MAX_MODEL_TENSORS:
        raise ModelTooLargeError(
            f"the config implies {size.tensors} tensors, over the {MAX_MODEL_TENSORS} a model may have"
        )


def safetensors_parameters(data: bytes | bytearray, where: str) -> tuple[int, int]:
    """(parameter values, parameter tensors) a safetensors file's header declares, buffers excluded.

    Only the header is read; its declared data must fill the rest of the file exactly.

    Raises:
        ValueError: not a safetensors file, a header over 16 MiB or of more than
            :data:`MAX_MODEL_TENSORS` tensors, data that does not fill the file.
    """
    if len(data) < 8:
        raise ValueError(f"model: {where} is not a safetensors file (shorter than its header length)")
    n = int.from_bytes(data[:8], "little")
    if n > min(_MAX_HEADER_BYTES, len(data) - 8):
        raise ValueError(
            f"model: {where} declares a header of {n} bytes (file {len(data)} bytes, at most 16 MiB)"
        )
    try:
        header = json.loads(data[8 : 8 + n])
    except ValueError as exc:
        raise ValueError(f"model: the header of {where} is not JSON: {exc}") from exc
    if not isinstance(header, dict) or len(header) > MAX_MODEL_TENSORS + 1:
        raise ValueError(
            f"model: the header of {where} is not an object of at most {MAX_MODEL_TENSORS} tensors"
        )
    values = tensors = end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, (start, stop) = entry["shape"], entry["data_offsets"]
            count = math.prod(shape) if all(type(s) is int and s >= 0 for s in shape) else -1
        except (TypeError, KeyError, ValueError):
            count = -1
        if count < 0 or type(start) is not int or type(stop) is not int or not 0 <= start <= stop:
            raise ValueError(f"model: the header of {where} has a malformed entry {name!r}")
        end = max(end, stop)
        if not _BUFFERS.search(name):
            values, tensors = values + count, tensors + 1
    if 8 + n + end != len(data):
        raise ValueError(f"model: {where} holds {len(data)} bytes, its header describes {8 + n + end}")
    return values, tensors


def load_model_from_bytes(
    config: dict[str, Any],
    weights: dict[str, bytes] | dict[str, bytearray],
    *,
    dtype: str = "float32",
    source: str = "<bytes>",
    revision: str | None = None,
    device: str | torch.device = "cpu",
) -> ModelWeights:
    """Build the model from bytes already read (and hashed): nothing is read from a path.

    ``config`` comes from :func:`read_config`; ``weights`` maps each safetensors file
    name to its bytes, and is emptied as the tensors are read. Bytes held in a ``bytearray``
    are used in place: the tensors are views of them, the checked layout of the file
    (:func:`~mibspec.core.sidecars.safetensors_layout`) says where, and the transposes the
    engine's layout needs are written over the bytes they read, so the model takes about the
    memory of its files (``benchmarks/bench_model_memory.py``); ``bytes`` are copied. The
    tensors must be the ones the configuration implies (counted on the headers before
    anything is built), and the loading is strict
    (:func:`_check_state`): every tensor of the files is used, or a buffer the engine
    does not read, and every weight the module needs comes from the files with its shape.
    The model is built on the CPU and its tensors then moved to ``device``.

    Raises:
        ValueError: weights that do not match the configuration, or cannot be loaded.
    """
    import transformers

    torch_dtype = _parse_dtype(dtype)
    arch = _check_config(config, source)
    size = model_size(config)
    counts = [safetensors_parameters(weights[name], name) for name in sorted(weights)]
    values, tensors = sum(v for v, _ in counts), sum(t for _, t in counts)
    if values not in (size.parameters, size.parameters + size.head):
        raise ValueError(
            f"model: the weight files hold {values} parameters in {tensors} tensors, the config "
            f"implies {size.parameters}"
        )
    state: dict[str, torch.Tensor] = {}
    for name in sorted(weights):
        part = _tensors(weights.pop(name), name)
        if state.keys() & part.keys():
            raise ValueError(f"model: {name} repeats tensors of another weight file")
        state.update(part)
    hf_config = transformers.AutoConfig.for_model(**{**config, "model_type": SUPPORTED_ARCHITECTURES[arch]})
    with _no_progress_bars():
        hf, info = getattr(transformers, arch).from_pretrained(
            None,
            config=hf_config,
            state_dict=state,
            dtype=torch_dtype,
            output_loading_info=True,
            trust_remote_code=False,
        )
    missing = sorted(info.get("missing_keys") or ()) + sorted(
        str(k) for k in info.get("mismatched_keys") or ()
    )
    if missing:
        raise ValueError(f"model: the weight files lack or misshape {len(missing)} tensor(s): {missing[:5]}")
    _check_state(hf, state)
    del state
    return from_transformers(hf, source=source, revision=revision, copy=False).to(device)


#: The spec's dtype names (:data:`~mibspec.core.sidecars.TensorInfo.dtype`) → torch's.
_VIEW_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int64": torch.int64,
    "int32": torch.int32,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def _tensors(data: bytes | bytearray, where: str) -> dict[str, torch.Tensor]:
    """The tensors of one safetensors file: views of ``data`` when it is a ``bytearray`` (its
    layout checked as the format requires: ranges that tile the data, no overlap), else
    copies made by safetensors' own reader."""
    from safetensors.torch import load as load_safetensors

    from mibspec.core.sidecars import SidecarError, safetensors_layout

    if not isinstance(data, bytearray) or sys.byteorder != "little":
        return load_safetensors(bytes(data))
    try:
        infos, _ = safetensors_layout(data)
    except SidecarError as exc:
        raise ValueError(f"model: {where}: {exc}") from exc
    if any(info.dtype not in _VIEW_DTYPES for info in infos.values()):
        return load_safetensors(bytes(data))
    tensors: dict[str, torch.Tensor] = {}
    for name, info in infos.items():
        dtype = _VIEW_DTYPES[info.dtype]
        if info.nbytes == 0:
            tensors[name] = torch.empty(info.shape, dtype=dtype)
            continue
        count, start = info.nbytes // dtype.itemsize, info.data_offset
        if start % dtype.itemsize:  # misaligned (the format's writer never does this): a copy
            buffer, start = bytearray(data[start : start + info.nbytes]), 0
        else:
            buffer = data
        tensors[name] = torch.frombuffer(buffer, dtype=dtype, count=count, offset=start).view(info.shape)
    return tensors


def _check_state(hf: Any, state: dict[str, torch.Tensor]) -> None:
    """Strict loading: every tensor of the weight files is a parameter (or persistent buffer)
    of the module built, holding exactly the file's values in the module's dtype, or a
    buffer the engine does not read (:data:`_BUFFERS`: causal masks, rotary frequencies);
    and every parameter of the module comes from the files (a tied output head from the
    embedding it is tied to).

    transformers drops a tensor it has no place for (a layer beyond the configured count, a
    misspelt name) with a warning only, and fills an absent one from its initialiser: both are
    refused here, naming the tensors.

    Raises:
        ValueError: unexpected, duplicated, missing or altered tensors.
    """
    targets = hf.state_dict(keep_vars=True)
    prefix = getattr(hf, "base_model_prefix", "")
    owner: dict[str, str] = {}
    unexpected: list[str] = []
    for key in sorted(state):
        target = key if key in targets else f"{prefix}.{key}" if f"{prefix}.{key}" in targets else None
        if target is None:
            if not _BUFFERS.search(key):
                unexpected.append(key)
            continue
        if target in owner:
            raise ValueError(
                f"model: the weight files hold {owner[target]!r} and {key!r}, both for {target!r}"
            )
        owner[target] = key
    if unexpected:
        raise ValueError(
            f"model: the weight files hold {len(unexpected)} tensor(s) the {type(hf).__name__} its "
            f"config.json describes has no place for: {unexpected[:5]} (a weight that would not be used)"
        )
    tied: dict[int, list[str]] = {}
    for name, tensor in targets.items():
        tied.setdefault(id(tensor), []).append(name)
    missing = sorted(names[0] for names in tied.values() if not any(name in owner for name in names))
    if missing:
        raise ValueError(f"model: the weight files lack {len(missing)} tensor(s): {missing[:5]}")
    with torch.no_grad():
        for target, key in owner.items():
            held, stored = targets[target], state[key]
            if tuple(stored.shape) != tuple(held.shape) or not torch.equal(stored.to(held.dtype), held):
                raise ValueError(
                    f"model: the module built does not hold the weight file's tensor {key!r} at "
                    f"{target!r} (shape {tuple(stored.shape)}, expected {tuple(held.shape)})"
                )


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers draws a progress bar per load; the caller reports progress its own way."""
    from transformers.utils import logging as hf_logging

    were_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if were_enabled:
            hf_logging.enable_progress_bar()


def load_model(
    model: str | Path,
    *,
    revision: str | None = None,
    dtype: str = "float32",
    max_bytes: int | None = DEFAULT_MAX_MODEL_BYTES,
    device: str | torch.device = "cpu",
) -> ModelWeights:
    """Load a causal LM from a local directory or a pinned hub id.

    Args:
        model: a local directory holding ``config.json`` and safetensors weights, or a hub
            id such as ``openai-community/gpt2``.
        revision: the 40-hex commit of a hub id (required for hub ids; must be ``None``
            for a local directory).
        dtype: ``float32`` (default), ``float64``, ``bfloat16`` or ``float16``.
        max_bytes: most bytes the parameters a local folder's config implies may take in
            ``dtype`` (checked on the config before anything is loaded; ``None``: no limit).
        device: where the model's tensors are put (and so where it computes).

    Returns:
        The weights, read once from the loaded module.

    Raises:
        ModelTooLargeError: the local config implies a model over ``max_bytes``.
        ValueError: unknown dtype, unpinned hub id, remote code requested, unsupported
            architecture or configuration option, missing config, one quantity given under
            two spellings with different values, weights the module built has no place for
            or lacks.
    """
    torch_dtype = _parse_dtype(dtype)
    path = Path(model)
    if path.is_dir():
        if revision is not None:
            raise ValueError(
                f"revision: applies to hub ids only; got {revision!r} with the local directory {str(path)!r}"
            )
        config_file = path / "config.json"
        if not config_file.is_file():
            raise ValueError(f"model: expected {str(config_file)!r} to exist (no config.json)")
        raw = read_config(config_file.read_bytes(), str(config_file))
        check_model_size(model_size(raw), dtype, max_bytes)
        source, kwargs = str(path.resolve()), {}
    else:
        if not isinstance(model, str) or not model or model.startswith(("/", ".", "~")):
            raise ValueError(f"model: expected an existing local directory or a hub id, got {str(model)!r}")
        if revision is None or not _REVISION.fullmatch(revision):
            raise ValueError(
                f"revision: a hub id ({model!r}) must be pinned to a 40-hex commit, got {revision!r}"
            )
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model, revision=revision, trust_remote_code=False)
        _check_config(config.to_dict(), f"{model}@{revision}")
        source, kwargs = model, {"revision": revision}

    from transformers import AutoModelForCausalLM

    hf: Any
    info: dict[str, Any]
    with _no_progress_bars():
        hf, info = AutoModelForCausalLM.from_pretrained(  # type: ignore[misc]
            source,
            trust_remote_code=False,
            use_safetensors=True,
            dtype=torch_dtype,
            output_loading_info=True,
            **kwargs,
        )
    unused = sorted(k for k in info.get("unexpected_keys") or () if not _BUFFERS.search(k))
    lacking = sorted(info.get("missing_keys") or ()) + sorted(
        str(k) for k in info.get("mismatched_keys") or ()
    )
    if unused or lacking:
        raise ValueError(
            f"model: the weights of {source} do not fit the module its config describes: "
            f"unused {unused[:5]}, missing or misshapen {lacking[:5]}"
        )
    return from_transformers(hf, source=source, revision=revision).to(device)


#: Whether the weights being read are copies of the module's (``from_transformers``'s ``copy``).
_COPY: ContextVar[bool] = ContextVar("copy", default=True)


@contextmanager
def _copying(copy: bool) -> Iterator[None]:
    token = _COPY.set(copy)
    try:
        yield
    finally:
        _COPY.reset(token)


def _t(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` detached, contiguous and in ``dtype``: a copy, or (not copying) ``x`` itself when
    it already is."""
    out = x.detach().to(dtype=dtype).contiguous()
    return out.clone() if _COPY.get() and out.data_ptr() == x.data_ptr() else out


def _transposed(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``w.T`` contiguous in ``dtype``. Not copying, a contiguous ``w`` already in ``dtype``
    receives its transpose in its own memory (one matrix of scratch), so the model is not held
    twice."""
    if _COPY.get() or w.dtype != dtype or not w.is_contiguous():
        return _t(w.T, dtype)
    scratch = w.detach().T.contiguous()
    flat = w.detach().view(-1)
    flat.copy_(scratch.view(-1))
    return flat.view(scratch.shape)


def _opt(x: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    return None if x is None else _t(x, dtype)


def _activation(name: Any) -> str:
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"model: unsupported MLP activation {name!r}; expected one of {sorted(_ACTIVATIONS)}"
        )
    return _ACTIVATIONS[name]


def from_transformers(
    hf_model: Any, *, source: str = "<module>", revision: str | None = None, copy: bool = True
) -> ModelWeights:
    """Read the parameters of an already constructed transformers causal LM.

    The module's ``forward`` is never used; its parameters are copied (detached, in the
    module's dtype) into a :class:`ModelWeights`. With ``copy=False`` (the loaders, which drop
    the module after) the weights share the module's memory where the layouts agree, and a
    matrix the engine keeps transposed is transposed over its own memory: the module is left
    holding values it must no longer be used with.

    Raises:
        ValueError: unsupported architecture or configuration option.
    """
    arch = type(hf_model).__name__
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"model: unsupported architecture {arch!r}; expected one of {sorted(SUPPORTED_ARCHITECTURES)}"
        )
    cfg = hf_model.config
    if getattr(cfg, "auto_map", None):
        raise ValueError(f"model: the config of {source!r} declares auto_map (remote code)")
    family = SUPPORTED_ARCHITECTURES[arch]
    dtype = next(hf_model.parameters()).dtype
    if dtype not in DTYPES.values():
        raise ValueError(f"model: parameters must be floating point, got {dtype}")
    with torch.no_grad(), _copying(copy):
        if family == "gpt2":
            return _read_gpt2(hf_model, arch, source, revision, dtype)
        return _read_rotary(hf_model, arch, family, source, revision, dtype)


def _read_gpt2(hf: Any, arch: str, source: str, revision: str | None, dtype: torch.dtype) -> ModelWeights:
    cfg = hf.config
    if getattr(cfg, "add_cross_attention", False):
        raise ValueError("model: GPT-2 with cross-attention is not a causal LM the engine handles")
    d, H = int(cfg.n_embd), int(cfg.n_head)
    e = d // H
    scale = e**-0.5 if cfg.scale_attn_weights else 1.0
    eps = float(cfg.layer_norm_epsilon)
    activation = _activation(cfg.activation_function)
    layers = []
    for i, block in enumerate(hf.transformer.h):
        scale_i = scale / (i + 1) if cfg.scale_attn_by_inverse_layer_idx else scale
        w_attn = block.attn.c_attn.weight  # Conv1D: (d, 3d), columns q | k | v
        b_attn = block.attn.c_attn.bias
        # columns are q | k | v, each head-major: exactly the fused (d, 3H, e) layout
        w_qkv = w_attn.reshape(d, 3 * H, e)
        b_qkv = b_attn.reshape(3 * H, e)
        layers.append(
            LayerWeights(
                norm_attn=NormWeights("layer", _t(block.ln_1.weight, dtype), _t(block.ln_1.bias, dtype), eps),
                w_qkv=_t(w_qkv, dtype),
                b_qkv=_t(b_qkv, dtype),
                n_heads=H,
                n_kv_heads=H,
                w_o=_t(block.attn.c_proj.weight.reshape(H, e, d), dtype),
                b_o=_t(block.attn.c_proj.bias, dtype),
                norm_attn_out=None,
                norm_mlp=NormWeights("layer", _t(block.ln_2.weight, dtype), _t(block.ln_2.bias, dtype), eps),
                w_in=_t(block.mlp.c_fc.weight, dtype),
                b_in=_t(block.mlp.c_fc.bias, dtype),
                w_gate=None,
                w_out=_t(block.mlp.c_proj.weight, dtype),
                b_out=_t(block.mlp.c_proj.bias, dtype),
                norm_mlp_out=None,
                attn_scale=scale_i,
                sliding_window=None,
            )
        )
    head = hf.get_output_embeddings()
    return ModelWeights(
        architecture=arch,
        family="gpt2",
        source=source,
        revision=revision,
        dtype=dtype,
        n_layers=len(layers),
        n_heads=H,
        n_kv_heads=H,
        d_model=d,
        d_head=e,
        vocab_size=int(hf.transformer.wte.weight.shape[0]),
        w_embed=_t(hf.transformer.wte.weight, dtype),
        embed_scale=None,
        w_pos=_t(hf.transformer.wpe.weight, dtype),
        rope_inv_freq=None,
        rope_scale=1.0,
        layers=tuple(layers),
        norm_final=NormWeights(
            "layer", _t(hf.transformer.ln_f.weight, dtype), _t(hf.transformer.ln_f.bias, dtype), eps
        ),
        w_unembed=_t(head.weight, dtype),
        b_unembed=_opt(getattr(head, "bias", None), dtype),
        attn_softcap=None,
        final_softcap=None,
        activation=activation,
        max_positions=int(hf.transformer.wpe.weight.shape[0]),
    )


def _linear_in(w: torch.Tensor, n_heads: int, e: int, dtype: torch.dtype) -> torch.Tensor:
    """``nn.Linear`` weight ``(n·e, d)`` → ``(d, n, e)``."""
    return _transposed(w, dtype).reshape(w.shape[1], n_heads, e)


def _bias(lin: Any, n_heads: int | None = None, e: int | None = None) -> torch.Tensor | None:
    b = getattr(lin, "bias", None)
    if b is None or n_heads is None or e is None:
        return b
    return b.reshape(n_heads, e)


def _qkv_bias(att: Any, H: int, G: int, e: int) -> torch.Tensor | None:
    """Fused ``(H + 2G, e)`` q/k/v bias; a projection without bias contributes zeros."""
    parts = [(att.q_proj, H), (att.k_proj, G), (att.v_proj, G)]
    if all(getattr(lin, "bias", None) is None for lin, _ in parts):
        return None
    return torch.cat(
        [
            lin.bias.reshape(n, e) if getattr(lin, "bias", None) is not None else lin.weight.new_zeros(n, e)
            for lin, n in parts
        ]
    )


def _read_rotary(
    hf: Any, arch: str, family: str, source: str, revision: str | None, dtype: torch.dtype
) -> ModelWeights:
    cfg = hf.config
    _check_rotary_config(cfg)
    base = hf.model
    d = int(cfg.hidden_size)
    H, G = int(cfg.num_attention_heads), int(cfg.num_key_value_heads)
    if H % G:
        raise ValueError(f"model: num_attention_heads ({H}) must be a multiple of num_key_value_heads ({G})")
    e = int(getattr(cfg, "head_dim", None) or d // H)
    gemma = family == "gemma2"
    norm = _rms_norm_reader(gemma, float(cfg.rms_norm_eps), dtype)
    activation = _activation(cfg.hidden_activation if gemma else cfg.hidden_act)
    # Gemma-2 scales scores by a configured constant rather than the head width.
    attn_scale = float(cfg.query_pre_attn_scalar) ** -0.5 if gemma else e**-0.5
    layer_types = list(getattr(cfg, "layer_types", None) or ["full_attention"] * len(base.layers))
    if len(layer_types) != len(base.layers):
        raise ValueError(
            f"model: the config lists {len(layer_types)} layer types for {len(base.layers)} layers"
        )
    window = getattr(cfg, "sliding_window", None)
    layers = []
    for i, block in enumerate(base.layers):
        if layer_types[i] not in ("full_attention", "sliding_attention"):
            raise ValueError(f"model: unsupported attention layer type {layer_types[i]!r} in layer {i}")
        sliding = int(window) if layer_types[i] == "sliding_attention" and window else None
        layers.append(_rotary_layer(block, norm, gemma, (H, G, e, d), attn_scale, sliding, dtype))
    rotary = base.rotary_emb
    head = hf.get_output_embeddings()
    embed_scale = None
    if gemma:
        # transformers keeps the scale as a float32 scalar and rounds it to the weight dtype.
        embed_scale = torch.tensor(math.sqrt(d), dtype=torch.float32, device=head.weight.device).to(dtype)
    return ModelWeights(
        architecture=arch,
        family=family,
        source=source,
        revision=revision,
        dtype=dtype,
        n_layers=len(layers),
        n_heads=H,
        n_kv_heads=G,
        d_model=d,
        d_head=e,
        vocab_size=int(base.embed_tokens.weight.shape[0]),
        w_embed=_t(base.embed_tokens.weight, dtype),
        embed_scale=embed_scale,
        w_pos=None,
        rope_inv_freq=rotary.inv_freq.detach().to(torch.float32).clone(),
        rope_scale=float(rotary.attention_scaling),
        layers=tuple(layers),
        norm_final=norm(base.norm),
        w_unembed=_t(head.weight, dtype),
        b_unembed=_opt(getattr(head, "bias", None), dtype),
        attn_softcap=_float_or_none(getattr(cfg, "attn_logit_softcapping", None)) if gemma else None,
        final_softcap=_float_or_none(getattr(cfg, "final_logit_softcapping", None)) if gemma else None,
        activation=activation,
        max_positions=_positive_or_none(getattr(cfg, "max_position_embeddings", None)),
    )


def _check_rotary_config(cfg: Any) -> None:
    """Refuse a bidirectional model and a rotary embedding that depends on the sequence length."""
    if getattr(cfg, "use_bidirectional_attention", False):
        raise ValueError("model: bidirectional attention is not a causal LM the engine handles")
    rope = getattr(cfg, "rope_parameters", None) or {}
    rope_type = rope.get("rope_type", "default") if isinstance(rope, dict) else "default"
    if rope_type not in _STATIC_ROPE:
        raise ValueError(
            f"model: rotary embedding type {rope_type!r} depends on the sequence length; "
            f"expected one of {sorted(_STATIC_ROPE)}"
        )


def _rms_norm_reader(gemma: bool, eps: float, dtype: torch.dtype) -> Callable[[Any], NormWeights]:
    """Reads an RMS norm module's weights (of the ``rms_offset`` kind for Gemma-2)."""
    norm_kind: NormKind = "rms_offset" if gemma else "rms"

    def norm(mod: Any) -> NormWeights:
        return NormWeights(norm_kind, _t(mod.weight, dtype), None, eps)

    return norm


def _rotary_layer(
    block: Any,
    norm: Callable[[Any], NormWeights],
    gemma: bool,
    shape: tuple[int, int, int, int],
    attn_scale: float,
    sliding: int | None,
    dtype: torch.dtype,
) -> LayerWeights:
    """One decoder block's weights; ``shape`` is (heads, key-value heads, head width, d_model)."""
    H, G, e, d = shape
    att, mlp = block.self_attn, block.mlp
    return LayerWeights(
        norm_attn=norm(block.input_layernorm),
        w_qkv=_t(
            torch.cat(
                [
                    _linear_in(att.q_proj.weight, H, e, dtype),
                    _linear_in(att.k_proj.weight, G, e, dtype),
                    _linear_in(att.v_proj.weight, G, e, dtype),
                ],
                dim=1,
            ),
            dtype,
        ),
        b_qkv=_opt(_qkv_bias(att, H, G, e), dtype),
        n_heads=H,
        n_kv_heads=G,
        w_o=_transposed(att.o_proj.weight, dtype).reshape(H, e, d),
        b_o=_opt(_bias(att.o_proj), dtype),
        norm_attn_out=norm(block.post_attention_layernorm) if gemma else None,
        norm_mlp=norm(block.pre_feedforward_layernorm if gemma else block.post_attention_layernorm),
        w_in=_transposed(mlp.up_proj.weight, dtype),
        b_in=_opt(_bias(mlp.up_proj), dtype),
        w_gate=_transposed(mlp.gate_proj.weight, dtype),
        w_out=_transposed(mlp.down_proj.weight, dtype),
        b_out=_opt(_bias(mlp.down_proj), dtype),
        norm_mlp_out=norm(block.post_feedforward_layernorm) if gemma else None,
        attn_scale=attn_scale,
        sliding_window=sliding,
    )


def _float_or_none(x: Any) -> float | None:
    return None if x is None else float(x)


def _positive_or_none(x: Any) -> int | None:
    return x if type(x) is int and x > 0 else None


def built_summary(model: ModelWeights) -> dict[str, Any]:
    """The numbers a report declares (``model.config``), read from the built weights' shapes:
    the keys of :func:`config_summary`.

    Layers are counted, the width and vocabulary read from the token embedding, the heads
    from each layer's output and fused q/k/v projections; a count that differs between
    layers is refused.

    Raises:
        ValueError: layers with different head counts, or an output head whose vocabulary
            is not the embedding's.
    """
    heads = {(layer.w_o.shape[0], (layer.w_qkv.shape[1] - layer.w_o.shape[0]) // 2) for layer in model.layers}
    if len(heads) > 1:
        raise ValueError(
            f"model: the layers have different head counts (heads, key-value heads): {sorted(heads)}"
        )
    n_heads, n_kv_heads = heads.pop() if heads else (model.n_heads, model.n_kv_heads)
    vocab, width = (int(n) for n in model.w_embed.shape)
    if int(model.w_unembed.shape[0]) != vocab:
        raise ValueError(
            f"model: the output head has {int(model.w_unembed.shape[0])} rows, the embedding {vocab} tokens"
        )
    return {
        "architecture": model.architecture,
        "n_layers": len(model.layers),
        "n_heads": int(n_heads),
        "n_kv_heads": int(n_kv_heads),
        "d_model": width,
        "vocab_size": vocab,
        "parallel_attn_mlp": model.parallel_attn_mlp,
    }
