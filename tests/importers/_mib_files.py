"""Small files in MIB's formats, written from first principles (FIELD_NOTES §1) for the tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def peers() -> Path | None:
    """The public MIB code (``MIBSPEC_PEERS``, else ``shared/peers`` beside the checkout)."""
    candidates = [os.environ.get("MIBSPEC_PEERS")] if os.environ.get("MIBSPEC_PEERS") else []
    candidates += [str(REPO.parent / "shared" / "peers"), str(REPO.parent.parent / "shared" / "peers")]
    for candidate in candidates:
        if (Path(candidate) / "mib-circuit-track").is_dir():
            return Path(candidate)
    return None


def node_names(layers: int, heads: int) -> list[str]:
    """Source nodes in forward order."""
    names = ["input"]
    for layer in range(layers):
        names += [f"a{layer}.h{h}" for h in range(heads)] + [f"m{layer}"]
    return names


def edge_names(layers: int, heads: int) -> list[str]:
    """Every edge, in the order EAP-IG adds them (sequential attention and MLP)."""
    names: list[str] = []
    residual = ["input"]
    for layer in range(layers):
        attn = [f"a{layer}.h{h}" for h in range(heads)]
        names += [f"{src}->{a}<{x}>" for src in residual for a in attn for x in "qkv"]
        residual += attn
        names += [f"{src}->m{layer}" for src in residual]
        residual.append(f"m{layer}")
    return names + [f"{src}->logits" for src in residual]


def graph(
    layers: int = 2,
    heads: int = 2,
    d_model: int = 8,
    *,
    seed: int = 0,
    scores: bool = True,
    node_scores: bool = False,
    neurons: bool = False,
    chosen: float = 0.2,
) -> dict[str, Any]:
    """An EAP-IG graph as ``json.load`` would return it: float32-valued scores, some nodes
    unscored (NaN) when ``node_scores``, neuron masks and scores when ``neurons``."""
    rng = np.random.default_rng(seed)
    edges = edge_names(layers, heads)
    values = rng.standard_normal(len(edges)).astype(np.float32).tolist()
    flags = (rng.random(len(edges)) < chosen).tolist()
    nodes: dict[str, Any] = {}
    for i, name in enumerate(node_names(layers, heads)):
        entry: dict[str, Any] = {"in_graph": bool(rng.random() < 0.5)}
        if node_scores:
            entry["score"] = float("nan") if i % 3 == 1 else float(np.float32(rng.standard_normal()))
        if neurons:
            entry["neurons"] = (rng.random(d_model) < 0.5).tolist()
            entry["neurons_scores"] = [
                float("nan") if j == i % d_model else float(np.float32(v))
                for j, v in enumerate(rng.standard_normal(d_model))
            ]
        nodes[name] = entry
    nodes["logits"] = {"in_graph": True}
    return {
        "cfg": {"n_layers": layers, "n_heads": heads, "parallel_attn_mlp": False, "d_model": d_model},
        "nodes": nodes,
        "edges": {
            name: ({"score": v, "in_graph": f} if scores else {"in_graph": f})
            for name, v, f in zip(edges, values, flags, strict=True)
        },
    }


def write(path: Path, data: dict[str, Any]) -> Path:
    """Write as EAP-IG does: ``json.dump`` with its defaults (NaN as a bare token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        json.dump(data, handle)
    return path


def resolve_gpt2(name: str) -> Any:
    """The model a MIB causal-variable result file names, resolved as GPT-2 small pinned to a
    placeholder revision (the join's ``resolve``; nothing is downloaded)."""
    from mibspec.importers.mib_causal_results import CAUSAL_MODELS
    from mibspec.importers.mib_cv_join import ResultsModel

    config = CAUSAL_MODELS["gpt2"][2]
    block = {
        "source": "hub",
        "id": "gpt2",
        "revision": "0" * 40,
        "architecture": "GPT2LMHeadModel",
        "config": config,
    }
    return ResultsModel(block=block, config=config, names=frozenset({name}))
