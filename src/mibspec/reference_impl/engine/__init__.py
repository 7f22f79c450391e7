"""Torch engine that recomputes circuit faithfulness from model weights (MIB circuit track).

Normative text: ``spec/v1/metrics/engine.md`` (requirements ME-*).

* :func:`load_model` reads a supported causal LM (GPT-2, Llama, Qwen2, Gemma-2) from a
  local directory or a pinned hub id into plain tensors (:class:`ModelWeights`), refusing
  remote code and non-safetensors checkpoints; :func:`load_model_from_bytes` builds it from
  bytes already read and hashed, after :func:`read_config`, :func:`model_size` and
  :func:`check_model_size` bounded it;
* :func:`run_model` is the unpatched functional forward, exposing the EAP-IG source nodes;
* :func:`evaluate_circuits` computes the per-example logit difference of many circuits
  under counterfactual, mean, zero or given ("optimal") ablation;
* :func:`random_model` writes small seeded random models of each family (tests, benchmarks).

This is the only part of the reference implementation that imports torch.
"""

from ._attribution import attribute_edges
from ._chunks import ACTIVATION_FRACTION, activation_batch, activation_budget, activation_share, weight_bytes
from ._evaluate import (
    ABLATIONS,
    Ablation,
    CircuitMetrics,
    evaluate_circuits,
    graph_universe,
    mean_node_outputs,
    node_circuit_edges,
)
from ._forward import ForwardOutput, run_model
from ._intervene import (
    JointWrite,
    Site,
    TorchFeaturizer,
    check_site,
    forward_sites,
    greedy_tokens,
    intervened_logits,
    site_dim,
)
from ._load import (
    DTYPES,
    MAX_MODEL_TENSORS,
    SUPPORTED_ARCHITECTURES,
    ModelSize,
    ModelTooLargeError,
    built_summary,
    check_model_size,
    config_summary,
    from_transformers,
    load_model,
    load_model_from_bytes,
    model_size,
    read_config,
    safetensors_parameters,
)
from ._random import FAMILIES, random_model
from ._reuse import DEFAULT_ACTIVATION_BYTES, ActivationCache
from ._weights import LayerWeights, ModelWeights, NormWeights

__all__ = [
    "ABLATIONS",
    "ACTIVATION_FRACTION",
    "DEFAULT_ACTIVATION_BYTES",
    "DTYPES",
    "FAMILIES",
    "MAX_MODEL_TENSORS",
    "SUPPORTED_ARCHITECTURES",
    "Ablation",
    "ActivationCache",
    "CircuitMetrics",
    "ForwardOutput",
    "JointWrite",
    "LayerWeights",
    "ModelSize",
    "ModelTooLargeError",
    "ModelWeights",
    "NormWeights",
    "Site",
    "TorchFeaturizer",
    "activation_batch",
    "activation_budget",
    "activation_share",
    "attribute_edges",
    "built_summary",
    "check_model_size",
    "check_site",
    "config_summary",
    "evaluate_circuits",
    "forward_sites",
    "from_transformers",
    "graph_universe",
    "greedy_tokens",
    "intervened_logits",
    "load_model",
    "load_model_from_bytes",
    "mean_node_outputs",
    "model_size",
    "node_circuit_edges",
    "random_model",
    "read_config",
    "run_model",
    "safetensors_parameters",
    "site_dim",
    "weight_bytes",
]
