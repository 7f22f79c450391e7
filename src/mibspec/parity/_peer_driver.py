"""Peer-side driver of the parity harness: run the public MIB circuit code on a job file.

This file is executed as a script by the *peer* environment's Python (TransformerLens 2.18,
the pinned EAP-IG and MIB's circuit-track code on ``sys.path``), never imported by mibspec:
it depends on nothing but the standard library, torch, transformers, TransformerLens and
the peer folders given in the job. It reads ``job.json`` and writes ``result.json`` (and
``logits.safetensors``) into the same folder:

    python _peer_driver.py JOB_FOLDER

Job fields: ``peers`` (folder), ``model_dir``, ``family`` (``gpt2``, ``llama``, ``qwen2``,
``gemma2``), optional ``attn_types`` (a diagnostic: each layer's ``global`` or ``local``),
``batch_size``, ``ig_steps``, ``rows`` (``[clean prompt, counterfactual prompt, correct id,
counterfactual id]``), ``edge_names`` (canonical order), ``scores`` (one per edge),
``circuits`` (edge index lists), ``node_scores`` (name → score), ``node_counts`` (nodes kept
per grid point), ``logit_tokens`` (token id rows, equal length), ``tasks`` (names below),
``neuron_scores`` (task ``neurons``: one row of ``d_model`` scores per source node in forward
order, ``null`` where unscored).
Optional ``task`` (the public loader's task name, ``ioi`` by default) and ``hub_rows`` (rows
in the layout of MIB's released files): the rows are then read by the public loader
(``HFEAPDataset``: its filter, its prompts and answer tokens) in place of ``rows``, and the
metric is the one ``run_evaluation.py`` takes for that task.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class _CpuTorch:
    """``torch`` for modules of the public code that allocate with ``device='cuda'`` where
    the model's device is meant: the same module, with those allocations on the CPU."""

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def zeros(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return self._torch.zeros(*args, **kwargs)


# The names MIB's run_evaluation.py / run_attribution.py pass to HookedTransformer.from_pretrained.
OFFICIAL_NAMES = {"qwen2": "Qwen/Qwen2.5-0.5B", "gemma2": "google/gemma-2-2b"}
# Fields of TransformerLens's hard-coded google/gemma-2-2b configuration that are sizes of that
# checkpoint (HookedTransformerConfig name → the HF config's); every other field of that branch
# (attention layer order, norms before and after, the activation, the attention scale rule) is
# the public code's and is kept.
_GEMMA2_SIZES = {
    "d_model": "hidden_size",
    "d_head": "head_dim",
    "n_heads": "num_attention_heads",
    "n_key_value_heads": "num_key_value_heads",
    "d_mlp": "intermediate_size",
    "n_layers": "num_hidden_layers",
    "n_ctx": "max_position_embeddings",
    "eps": "rms_norm_eps",
    "d_vocab": "vocab_size",
    "rotary_base": "rope_theta",
    "window_size": "sliding_window",
    "attn_scores_soft_cap": "attn_logit_softcapping",
    "output_logits_soft_cap": "final_logit_softcapping",
}


def _load_model(job: dict[str, Any]) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = job["model_dir"]
    dtype = _dtype(job)
    hf = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=dtype, trust_remote_code=False)
    hf.eval()
    _read_rope_parameters(hf.config)
    # a random benchmark model has no tokenizer: its rows are given as token ids
    tokenizer = (
        AutoTokenizer.from_pretrained(folder, trust_remote_code=False) if job.get("tokenizer", True) else None
    )
    if job["family"] in OFFICIAL_NAMES:
        model = _from_pretrained(job, hf, tokenizer)
    else:
        model = _built_model(job, hf, tokenizer)
    model.eval()
    # the configuration MIB's run_evaluation.py / run_attribution.py set
    model.cfg.use_split_qkv_input = True
    model.cfg.use_attn_result = True
    model.cfg.use_hook_mlp_in = True
    model.cfg.ungroup_grouped_query_attention = True
    return model


def _dtype(job: dict[str, Any]) -> Any:
    """The dtype the model is built in: float32 (MIB's values compared at float32), or
    ``float64`` in a diagnostic run that separates float32 rounding from a real difference."""
    import torch

    name = job.get("dtype", "float32")
    if name not in ("float32", "float64"):
        raise SystemExit(f"unsupported dtype {name!r}")
    return getattr(torch, name)


def _read_rope_parameters(config: Any) -> None:
    """A config written by transformers 5 keeps the rotary base in ``rope_parameters``, which
    transformers 4.57 (the public code's) stores without reading: give it the written base."""
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and "rope_theta" in rope:
        config.rope_theta = float(rope["rope_theta"])


def _from_pretrained(job: dict[str, Any], hf: Any, tokenizer: Any) -> Any:
    """``HookedTransformer.from_pretrained(<official name>, ...)`` as MIB calls it (eager
    attention; float32 here where MIB uses bfloat16, so values compare at float32), with the
    tiny model's weights (``hf_model``) and configuration.

    Route: TransformerLens's own configuration conversion, given the tiny configuration in
    place of the hub's. For Qwen2 that conversion reads ``AutoConfig.from_pretrained(<official
    name>)``, so that call is answered with the local config. For Gemma-2 it reads no config at
    all: the google/gemma-2-2b branch is a hard-coded dict, so the branch's own dict is taken
    and only its checkpoint sizes (:data:`_GEMMA2_SIZES`) are replaced by the tiny model's.
    Everything after it is the public path unchanged: ``get_pretrained_model_config``'s
    processing, ``convert_qwen2_weights`` / ``convert_gemma_weights``, and the weight
    processing from_pretrained applies by default (fold_ln, centring where it may,
    fold_value_biases).
    """
    import transformer_lens.loading_from_pretrained as loading
    from transformer_lens import HookedTransformer

    official = OFFICIAL_NAMES[job["family"]]
    convert, auto_config = loading.convert_hf_model_config, loading.AutoConfig

    class _LocalAutoConfig:
        @staticmethod
        def from_pretrained(name: str, *args: Any, **kwargs: Any) -> Any:
            if name != official:
                raise SystemExit(f"the public code asked for the config of {name!r}")
            return hf.config

    def tiny_gemma2(name: str, **kwargs: Any) -> dict[str, Any]:
        cfg = convert(name, **kwargs)
        for field, key in _GEMMA2_SIZES.items():
            cfg[field] = getattr(hf.config, key)
        return cfg

    loading.AutoConfig = _LocalAutoConfig
    if job["family"] == "gemma2":
        loading.convert_hf_model_config = tiny_gemma2
    if job.get("attn_types"):  # a diagnostic: the attention layer order given explicitly
        loading.convert_hf_model_config = _with_attn_types(loading.convert_hf_model_config, job["attn_types"])
    try:
        return HookedTransformer.from_pretrained(
            official,
            hf_model=hf,
            tokenizer=tokenizer,
            device="cpu",
            attn_implementation="eager",
            torch_dtype=_dtype(job),
            trust_remote_code=False,
        )
    finally:
        loading.convert_hf_model_config, loading.AutoConfig = convert, auto_config


def _with_attn_types(convert: Any, attn_types: list[str]) -> Any:
    def converted(name: str, **kwargs: Any) -> dict[str, Any]:
        return {**convert(name, **kwargs), "attn_types": list(attn_types)}

    return converted


def _built_model(job: dict[str, Any], hf: Any, tokenizer: Any) -> Any:
    """GPT-2 and Llama: the HookedTransformerConfig written out from the HF config (the
    shipped tiny models have no official name) and the processing from_pretrained applies."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights, convert_llama_weights

    c = hf.config
    if job["family"] == "gpt2":
        cfg = HookedTransformerConfig(
            d_model=c.n_embd,
            d_head=c.n_embd // c.n_head,
            n_heads=c.n_head,
            d_mlp=c.n_inner or 4 * c.n_embd,
            n_layers=c.n_layer,
            n_ctx=c.n_positions,
            d_vocab=c.vocab_size,
            act_fn=c.activation_function,
            eps=c.layer_norm_epsilon,
            normalization_type="LN",
            positional_embedding_type="standard",
            original_architecture="GPT2LMHeadModel",
            default_prepend_bos=True,
            dtype=_dtype(job),
        )
        state = convert_gpt2_weights(hf, cfg)
    elif job["family"] == "llama":
        d_head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        cfg = HookedTransformerConfig(
            d_model=c.hidden_size,
            d_head=d_head,
            n_heads=c.num_attention_heads,
            n_key_value_heads=c.num_key_value_heads,
            d_mlp=c.intermediate_size,
            n_layers=c.num_hidden_layers,
            n_ctx=c.max_position_embeddings,
            d_vocab=c.vocab_size,
            act_fn=c.hidden_act,
            eps=c.rms_norm_eps,
            normalization_type="RMS",
            positional_embedding_type="rotary",
            rotary_dim=d_head,
            rotary_base=c.rope_theta,
            rotary_adjacent_pairs=False,
            gated_mlp=True,
            final_rms=True,
            original_architecture="LlamaForCausalLM",
            default_prepend_bos=True,
            dtype=_dtype(job),
        )
        state = convert_llama_weights(hf, cfg)
    else:
        raise SystemExit(f"unsupported family {job['family']!r}")
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    # the processing HookedTransformer.from_pretrained applies by default (MIB loads models that way)
    model.load_and_process_state_dict(
        state,
        fold_ln=True,
        center_writing_weights=cfg.normalization_type == "LN",
        center_unembed=True,
        fold_value_biases=True,
        refactor_factored_attn_matrices=False,
    )
    return model


def _graph(model: Any, job: dict[str, Any], *, node_scores: bool = False) -> Any:
    from eap.graph import Graph

    graph = Graph.from_model(model, node_scores=node_scores)
    names = job["edge_names"]
    if len(graph.edges) != len(names):
        raise SystemExit(f"edge universes differ: public {len(graph.edges)}, mibspec {len(names)}")
    for name, score in zip(names, job["scores"], strict=True):
        graph.edges[name].score = float(score)
    return graph


def _set_circuit(graph: Any, names: list[str], members: list[int]) -> None:
    graph.in_graph[:] = False
    graph.nodes_in_graph[:] = False
    for i in members:
        graph.edges[names[i]].in_graph = True
    # nodes: as the graph's own top-n selection marks them before pruning
    outgoing = graph.in_graph.any(dim=1)
    ingoing = (graph.in_graph.any(dim=0).float() @ graph.forward_to_backward.float().T) > 0
    ingoing[0] = True
    graph.nodes_in_graph[:] = outgoing & ingoing


def _dataloader(job: dict[str, Any]) -> Any:
    from MIB_circuit_track.dataset import collate_EAP
    from torch.utils.data import DataLoader

    items = [(clean, corrupted, [int(a), int(b)]) for clean, corrupted, a, b in job["rows"]]
    return DataLoader(items, batch_size=job["batch_size"], collate_fn=collate_EAP)  # type: ignore[arg-type]


def _metric(model: Any, task: str = "ioi", **kwargs: Any) -> Any:
    from functools import partial

    from MIB_circuit_track.metrics import get_metric

    return partial(get_metric("logit_diff", task, model.tokenizer, model), **kwargs)


def _public_rows(model: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Read ``hub_rows`` through the public loader, as ``run_evaluation.py`` does with a hub
    dataset (only ``load_dataset`` answers with these rows instead of the hub's), and put the
    (clean, corrupted, correct id, counterfactual id) it yields into ``job["rows"]``."""
    import datasets
    import MIB_circuit_track.dataset as public

    rows = job["hub_rows"]

    def load_dataset(*args: Any, **kwargs: Any) -> Any:
        return datasets.Dataset.from_list(rows)

    public.load_dataset = load_dataset  # type: ignore[attr-defined]
    column = job.get("hub_counterfactual")
    dataset = public.HFEAPDataset(
        "local", model.tokenizer, split="test", task=job["task"], counterfactual_type=column
    )
    items = [dataset[i] for i in range(len(dataset))]
    job["rows"] = [[clean, corrupted, int(a), int(b)] for clean, corrupted, (a, b) in items]
    return {"n_rows": len(items), "answers": [[int(a), int(b)] for _, _, (a, b) in items]}


def _mean(values: Any) -> float:
    return float(values.double().mean().item())


def _bench(model: Any, job: dict[str, Any]) -> dict[str, Any]:
    """MIB's area-under-curve evaluation (signed ranking) on rows given as token ids, timed.

    Only tokenisation is replaced (the rows are ids already, all of one length, so the
    attention mask is all ones and the read position the last); the evaluation path —
    baseline, empty circuit, top-n selection, pruning, patched passes, area — is the
    public code's.
    """
    import eap.evaluate
    import torch
    from MIB_circuit_track.evaluation import evaluate_area_under_curve

    def ids_tokenize(model: Any, inputs: Any, max_length: Any = None) -> Any:
        tokens = torch.tensor(inputs, dtype=torch.long)
        mask = torch.ones_like(tokens)
        return tokens, mask, mask.sum(1), tokens.shape[1]

    eap.evaluate.tokenize_plus = ids_tokenize  # type: ignore[attr-defined]
    graph = _graph(model, job)
    metric = _metric(model, job.get("task", "ioi"), mean=False, loss=False)
    wall, cpu = time.perf_counter(), time.process_time()
    _, area, _, _, faith = evaluate_area_under_curve(
        model, graph, _dataloader(job), metric, quiet=True, level="edge", absolute=False
    )
    return {
        "wall_seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
        "area_under": float(area),
        "faithfulness": [float(f) for f in faith],
    }


def run(folder: Path) -> dict[str, Any]:
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    _prepare(job)
    out: dict[str, Any] = {"timings": {}}
    tasks = set(job["tasks"])
    model = _load_model(job)
    # the attention each layer computes, as the public code built it (compared with the config)
    out["attn_types"] = [str(getattr(block.attn, "attn_type", "global")) for block in model.blocks]
    out["window_size"] = model.cfg.window_size
    if "bench" in tasks:
        out["bench"] = _bench(model, job)
        return out
    out["start_token"] = int(model.tokenizer.bos_token_id)
    if job.get("hub_rows") is not None:
        out["loader"] = _public_rows(model, job)
    metric = _metric(model, job.get("task", "ioi"), mean=False, loss=False)
    if "logits" in tasks:
        out["tokenized"] = _logits(model, job, folder)
    dataloader = _dataloader(job)

    def timed(key: str, timing: str, compute: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        out[key] = compute(model, job, *args)
        out["timings"][timing] = time.perf_counter() - t0

    if "curve" in tasks:
        timed("curves", "curve", _curves, dataloader, metric)
    for ablation in ("patching", "mean"):
        if f"circuits_{ablation}" in tasks:
            timed(f"circuits_{ablation}", f"circuits_{ablation}", _circuits, dataloader, metric, ablation)
    if "nodes" in tasks:
        timed("nodes", "nodes", _nodes, dataloader, metric)
    if "neurons" in tasks:
        timed("neurons", "neurons", _neuron_curves, dataloader, metric)
    for method in ("EAP", "EAP-IG-inputs"):
        if method in tasks:
            timed(method, method, _attribution, dataloader, method)
    return out


def _prepare(job: dict[str, Any]) -> None:
    """The peer folders on ``sys.path``, torch's threads and gradients set, and the public
    code's modules given the CPU-allocating ``torch``."""
    peers = Path(job["peers"])
    sys.path[:0] = [str(peers / "eap-ig" / "src"), str(peers / "mib-circuit-track")]
    import torch

    torch.set_num_threads(int(job.get("threads", 1)))
    torch.set_grad_enabled(True)
    import eap.attribute
    import eap.evaluate
    import eap.utils

    for module in (eap.attribute, eap.utils, eap.evaluate):
        module.torch = _CpuTorch(torch)  # type: ignore[attr-defined]


def _logits(model: Any, job: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The logits on ``logit_tokens`` written to ``logits.safetensors``; returns how the
    public code tokenises the first batch's prompts (prepend_bos=True, right padding)."""
    import torch
    from eap.utils import tokenize_plus
    from safetensors.torch import save_file

    tokens = torch.tensor(job["logit_tokens"], dtype=torch.long)
    with torch.inference_mode():
        logits = model(tokens).to(torch.float32)
    save_file({"logits": logits.contiguous()}, str(folder / "logits.safetensors"))
    first = [r[0] for r in job["rows"][: job["batch_size"]]]
    toks, _mask, lengths, _ = tokenize_plus(model, first)
    return {"tokens": toks.tolist(), "lengths": lengths.tolist()}


def _curves(model: Any, job: dict[str, Any], dataloader: Any, metric: Any) -> dict[str, Any]:
    """MIB's area-under-curve evaluation under the signed and the absolute ranking."""
    from MIB_circuit_track.evaluation import evaluate_area_under_curve

    curves = {}
    for ranking, absolute in (("signed", False), ("absolute", True)):
        graph = _graph(model, job)
        counts, area_under, area_from_1, _average, faith = evaluate_area_under_curve(
            model, graph, dataloader, metric, quiet=True, level="edge", absolute=absolute
        )
        curves[ranking] = {
            "recorded_sizes": [float(c) for c in counts],
            "area_under": float(area_under),
            "area_from_1": float(area_from_1),
            "faithfulness": [float(f) for f in faith],
        }
    return curves


def _circuits(model: Any, job: dict[str, Any], dataloader: Any, metric: Any, ablation: str) -> dict[str, Any]:
    """m(N), m(∅) and every circuit's m and (pruned) size under ``ablation``."""
    from eap.evaluate import evaluate_baseline, evaluate_graph

    graph = _graph(model, job)
    kwargs: dict[str, Any] = {"quiet": True, "intervention": ablation}
    if ablation == "mean":
        kwargs["intervention_dataloader"] = _dataloader(job)
    m_full = _mean(evaluate_baseline(model, dataloader, metric, quiet=True))
    graph.in_graph[:] = False
    graph.nodes_in_graph[:] = False
    m_empty = _mean(evaluate_graph(model, graph, dataloader, metric, **kwargs))
    values, sizes = [], []
    for members in job["circuits"]:
        _set_circuit(graph, job["edge_names"], members)
        values.append(_mean(evaluate_graph(model, graph, dataloader, metric, **kwargs)))
        sizes.append(float(graph.weighted_edge_count()))  # after evaluate_graph's pruning
    return {"m_full": m_full, "m_empty": m_empty, "m": values, "sizes": sizes}


def _nodes(model: Any, job: dict[str, Any], dataloader: Any, metric: Any) -> dict[str, Any]:
    """m(N), m(∅) and m of the top nodes at each of ``node_counts``, signed and absolute."""
    from eap.evaluate import evaluate_baseline, evaluate_graph

    graph = _graph(model, job, node_scores=True)
    for name, node in graph.nodes.items():
        if name in job["node_scores"]:
            node.score = float(job["node_scores"][name])
    m_full = _mean(evaluate_baseline(model, dataloader, metric, quiet=True))
    graph.apply_topn(0, True, level="node")
    m_empty = _mean(evaluate_graph(model, graph, dataloader, metric, quiet=True))
    nodes_runs = {}
    for ranking, absolute in (("signed", False), ("absolute", True)):
        values = []
        for n in job["node_counts"]:
            graph.apply_topn(n, absolute, level="node")
            values.append(_mean(evaluate_graph(model, graph, dataloader, metric, quiet=True)))
        nodes_runs[ranking] = values
    return {"m_full": m_full, "m_empty": m_empty, "m": nodes_runs}


def _neuron_curves(model: Any, job: dict[str, Any], dataloader: Any, metric: Any) -> dict[str, Any]:
    """MIB's area-under-curve evaluation at ``level='neuron'`` on the job's neuron scores
    (NaN where unscored), under the signed and the absolute ranking."""
    import torch
    from eap.graph import Graph
    from MIB_circuit_track.evaluation import evaluate_area_under_curve

    rows = [[float("nan") if v is None else float(v) for v in row] for row in job["neuron_scores"]]
    scores = torch.tensor(rows, dtype=torch.float32)
    curves = {}
    for ranking, absolute in (("signed", False), ("absolute", True)):
        graph = Graph.from_model(model, neuron_level=True)
        if tuple(graph.neurons_scores.shape) != tuple(scores.shape):
            raise SystemExit(f"neuron scores {tuple(scores.shape)} for {tuple(graph.neurons_scores.shape)}")
        graph.neurons_scores[:] = scores
        counts, area_under, area_from_1, _average, faith = evaluate_area_under_curve(
            model, graph, dataloader, metric, quiet=True, level="neuron", absolute=absolute
        )
        curves[ranking] = {
            "recorded_sizes": [float(c) for c in counts],
            "area_under": float(area_under),
            "area_from_1": float(area_from_1),
            "faithfulness": [float(f) for f in faith],
        }
    return curves


def _attribution(model: Any, job: dict[str, Any], dataloader: Any, method: str) -> list[float]:
    """Every edge's score from the public ``attribute`` (EAP or EAP-IG-inputs), in the job's order."""
    from eap.attribute import attribute

    graph = _graph(model, job)
    attribute(
        model,
        graph,
        dataloader,
        _metric(model, job.get("task", "ioi"), mean=True, loss=True),  # as MIB's run_attribution.py
        method,
        "patching",
        ig_steps=job["ig_steps"],
        intervention_dataloader=dataloader,
        quiet=True,
    )
    return [float(graph.edges[name].score) for name in job["edge_names"]]


def main() -> int:
    folder = Path(sys.argv[1])
    result = run(folder)
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
