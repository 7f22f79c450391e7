#!/usr/bin/env python3
"""Write the conformance cases of spec 1.0 under ``conformance/v1/``.

Every case folder ``v1/<kind>/<valid|invalid>/<case-id>/`` holds the document to
verify, its artifacts and ``expected.json``. This script is the source of every
case: documents are built from a few consistent base documents (numbers obey the
metric definitions of the spec), binary sidecars are written byte-for-byte
reproducibly, and artifact hashes and sizes are computed from the files written.

Usage::

    python conformance/build_cases.py            # (re)write every case
    python conformance/build_cases.py --check    # exit 1 if the tree differs from a fresh build
    python conformance/build_cases.py --list     # print the case ids

Running it twice gives the same bytes. Only the folders of the cases defined here
are rewritten; any other folder under ``v1/`` is left alone and listed on stderr.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import math
import os
import pickle
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from mibspec.reference_impl.behaviour.study import PLANTED_BEHAVIOUR, TABLE1_SETS
from mibspec.reference_impl.producers.folder import OutputFolder, json_bytes

ROOT = Path(__file__).resolve().parent / "v1"

Json = dict[str, Any]

# --------------------------------------------------------------------------- constants

GRID: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
CREATED = "2025-06-02T09:30:00Z"
PROVENANCE: Json = {
    "tool": {"name": "mibspec-conformance", "version": "1.0"},
    "created": CREATED,
}
# Revisions are fixed strings of the right form; conformance checks only their shape.
GPT2_REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
QWEN_REVISION = "060db6499f32faf8b98477b0a26969ef7d8b9987"
INTERPBENCH_REVISION = "3c1c8f6f5b1a2e4d9f0a7b6c5d4e3f2a1b0c9d8e"

GPT2_SMALL: Json = {
    "source": "hub",
    "id": "openai-community/gpt2",
    "revision": GPT2_REVISION,
    "architecture": "GPT2LMHeadModel",
    "dtype": "float32",
    "config": {"n_layers": 12, "n_heads": 12, "d_model": 768, "vocab_size": 50257},
}
QWEN_05B: Json = {
    "source": "hub",
    "id": "Qwen/Qwen2.5-0.5B",
    "revision": QWEN_REVISION,
    "architecture": "Qwen2ForCausalLM",
    "dtype": "float32",
    "config": {"n_layers": 24, "n_heads": 14, "n_kv_heads": 2, "d_model": 896, "vocab_size": 151936},
}
INTERPBENCH: Json = {
    "source": "hub",
    "id": "mib-bench/interpbench",
    "revision": INTERPBENCH_REVISION,
    "architecture": "HookedTransformer-siit",
    "dtype": "float32",
    "config": {"n_layers": 6, "n_heads": 4, "d_model": 64},
}
TINY_MODEL: Json = {
    "source": "local",
    "path": "models/tiny-gpt2-4l4h",
    "architecture": "GPT2LMHeadModel",
    "dtype": "float32",
    "config": {"n_layers": 4, "n_heads": 4, "d_model": 32, "vocab_size": 512},
}
TINY_CNN: Json = {
    "source": "registry",
    "architecture": "tiny-cnn-v1",
    "dtype": "float32",
    "weights": "weights",
}


# --------------------------------------------------------------------------- writing files


def pickled_npy_bytes() -> bytes:
    """A version 1.0 ``.npy`` file holding an object array (a pickle, which readers must refuse).

    Written by hand so the bytes do not depend on the numpy version; the pickle is a
    plain list of two strings (harmless), protocol 3.
    """
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"
    pad = 64 - (10 + len(header) + 1) % 64
    text = (header + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + pickle.dumps(["a", "b"], protocol=3)


class Folder(OutputFolder):
    """A case folder being written; artifact entries are computed from the files in it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, overwrite=True)

    def symlink(self, name: str, target: str) -> None:
        os.symlink(target, self.root / name)


_F = TypeVar("_F", bound=Callable[..., Json])


def fresh(fn: _F) -> _F:
    """Return a deep copy of the built document, so cases can edit it without touching shared constants."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Json:
        return copy.deepcopy(fn(*args, **kwargs))

    return wrapper  # type: ignore[return-value]


# --------------------------------------------------------------------------- graph universe


@dataclass(frozen=True)
class Universe:
    """An EAP-IG computation graph: nodes, destination slots and edges in canonical order.

    Canonical edge order: row-major over (source node, destination slot), sources
    ``input, a0.h0 … a0.h{H-1}, m0, a1.h0, …``, slots per layer all ``<q>``, then all
    ``<k>``, then all ``<v>``, then ``m{l}``, and ``logits`` last.
    """

    n_layers: int
    n_heads: int
    parallel_attn_mlp: bool = False

    @cached_property
    def sources(self) -> list[tuple[str, int, str]]:
        """(name, layer, type) of the source nodes; ``input`` has layer -1."""
        out = [("input", -1, "input")]
        for layer in range(self.n_layers):
            out += [(f"a{layer}.h{h}", layer, "head") for h in range(self.n_heads)]
            out.append((f"m{layer}", layer, "mlp"))
        return out

    @cached_property
    def nodes(self) -> list[str]:
        """Every node in topological order (sources, then ``logits``)."""
        return [name for name, _, _ in self.sources] + ["logits"]

    @cached_property
    def slots(self) -> list[tuple[str, int, str, str]]:
        """(slot name, layer, type, node) of the destination slots."""
        out: list[tuple[str, int, str, str]] = []
        for layer in range(self.n_layers):
            for letter in "qkv":
                out += [
                    (f"a{layer}.h{h}<{letter}>", layer, "head", f"a{layer}.h{h}") for h in range(self.n_heads)
                ]
            out.append((f"m{layer}", layer, "mlp", f"m{layer}"))
        out.append(("logits", self.n_layers, "logits", "logits"))
        return out

    def _connected(self, src_layer: int, src_type: str, dst_layer: int, dst_type: str) -> bool:
        if src_type == "input" or dst_type == "logits":
            return True
        if src_layer < dst_layer:
            return True
        return (
            src_layer == dst_layer and src_type == "head" and dst_type == "mlp" and not self.parallel_attn_mlp
        )

    @cached_property
    def edges(self) -> tuple[NDArray[np.intp], NDArray[np.intp], list[str]]:
        """(source node index, destination node index, edge name) of every edge."""
        index = {name: i for i, name in enumerate(self.nodes)}
        src, dst, names = [], [], []
        for s_name, s_layer, s_type in self.sources:
            for d_slot, d_layer, d_type, d_node in self.slots:
                if self._connected(s_layer, s_type, d_layer, d_type):
                    src.append(index[s_name])
                    dst.append(index[d_node])
                    names.append(f"{s_name}->{d_slot}")
        return np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp), names

    @property
    def n_edges(self) -> int:
        return len(self.edges[2])

    @property
    def n_forward(self) -> int:
        return len(self.sources)

    def pruned_size(self, mask: NDArray[np.bool_]) -> int:
        """Edges of ``mask`` on some input → logits path (the weighted size at edge granularity)."""
        return int(np.count_nonzero(self.pruned(mask)))

    def pruned(self, mask: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """The edges of ``mask`` that lie on some input → logits path through ``mask``."""
        src, dst, _ = self.edges
        n = len(self.nodes)
        reached = np.zeros(n, dtype=bool)
        reached[0] = True
        for node in range(1, n):  # topological order: an edge's source precedes its destination
            into = mask & (dst == node)
            reached[node] = bool(reached[src[into]].any())
        reaches = np.zeros(n, dtype=bool)
        reaches[n - 1] = True
        for node in range(n - 2, -1, -1):
            out = mask & (src == node)
            reaches[node] = bool(reaches[dst[out]].any())
        kept: NDArray[np.bool_] = mask & reached[src] & reaches[dst]
        return kept


GPT2_UNIVERSE = Universe(12, 12)
INTERPBENCH_UNIVERSE = Universe(6, 4)
TINY_UNIVERSE = Universe(4, 4)
assert GPT2_UNIVERSE.n_edges == 32491
assert INTERPBENCH_UNIVERSE.n_edges == 1108


def edges_at(k: float, n: int) -> int:
    """floor(k · n) in exact arithmetic on the decimal k."""
    return math.floor(Fraction(repr(k)) * n)


def ranked(scores: NDArray[np.float32], ranking: str) -> NDArray[np.intp]:
    """Edge indices by descending key (score, or |score|), ties by ascending index."""
    key = scores.astype(np.float64)
    if ranking == "absolute":
        key = np.abs(key)
    return np.lexsort((np.arange(key.size), -key))


def trapezoid(xs: Sequence[float], ys: Sequence[float]) -> float:
    return math.fsum((xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2 for i in range(len(xs) - 1))


def roc_auc(scores: NDArray[np.float64], truth: NDArray[np.bool_]) -> float:
    """Rank-statistic ROC AUC: P(score of a true edge > score of a false edge), ties count 1/2."""
    pos, neg = scores[truth], scores[~truth]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


# --------------------------------------------------------------------------- circuit data


@dataclass
class CircuitData:
    """Edge scores and the circuits built from them on the grid, per ranking."""

    universe: Universe
    scores: NDArray[np.float32]
    rankings: tuple[str, ...]
    grid: tuple[float, ...]
    membership: NDArray[np.bool_] = field(init=False)
    entries: list[Json] = field(init=False)

    def __post_init__(self) -> None:
        rows: list[NDArray[np.bool_]] = []
        entries: list[Json] = []
        for ranking in self.rankings:
            order = ranked(self.scores, ranking)
            for k in self.grid:
                count = edges_at(k, self.universe.n_edges)
                row = np.zeros(self.universe.n_edges, dtype=bool)
                row[order[:count]] = True
                entries.append(
                    {
                        "index": len(rows),
                        "k": k,
                        "ranking": ranking,
                        "n_edges": count,
                        "weighted_size": float(self.universe.pruned_size(row)),
                    }
                )
                rows.append(row)
        self.membership = np.stack(rows)
        self.entries = entries


def edge_scores(
    universe: Universe, seed: int, favoured: Sequence[str] = (), boost: NDArray[np.bool_] | None = None
) -> NDArray[np.float32]:
    """Signed edge scores shaped like attribution scores.

    score = ±imp(src)·imp(dst)·w(slot) + noise, with node importances 1 for ``input`` and
    ``logits``, U(0.5, 0.9) for ``favoured`` nodes and |N(0, 0.05)| otherwise, so the
    highest-scoring edges connect input to logits through the favoured nodes; edges in
    ``boost`` get a further +0.3.
    """
    rng = np.random.default_rng(seed)
    src, dst, names = universe.edges
    index = {name: i for i, name in enumerate(universe.nodes)}
    importance = np.abs(rng.normal(0, 0.05, size=len(universe.nodes)))
    importance[0] = importance[-1] = 1.0
    for name in favoured:
        importance[index[name]] = rng.uniform(0.5, 0.9)
    slot = np.array([0.5 if n.endswith("<q>") else 0.3 if n.endswith("<k>") else 1.0 for n in names])
    sign = np.where(rng.random(universe.n_edges) < 0.8, 1.0, -1.0)
    scores = (
        sign * importance[src] * importance[dst] * slot + rng.standard_t(3, size=universe.n_edges) * 0.002
    )
    if boost is not None:
        scores[boost] += 0.3
    out: NDArray[np.float32] = scores.astype(np.float32)
    return out


IOI_HEADS = (
    "a0.h1",
    "a3.h0",
    "a5.h5",
    "a6.h9",
    "a7.h3",
    "a7.h9",
    "a8.h6",
    "a8.h10",
    "a9.h6",
    "a9.h9",
    "a10.h0",
)

# Faithfulness measured at the grid points (signed ranking for CPR, |score| for CMD).
F_SIGNED = (0.1873, 0.2914, 0.4467, 0.5902, 0.7215, 0.8530, 0.9208, 0.9671, 0.9954, 1.0)
F_ABSOLUTE = (0.0412, 0.0987, 0.2455, 0.4108, 0.5893, 0.7736, 0.8819, 0.9497, 1.0132, 1.0)


def curve_values(curve: Json) -> list[float]:
    return [point["faithfulness"] for point in curve["points"]]


def circuit_curves(data: CircuitData, f_values: dict[str, Sequence[float]]) -> list[Json]:
    curves = []
    for ranking in data.rankings:
        points = []
        for entry in data.entries:
            if entry["ranking"] != ranking:
                continue
            points.append(
                {
                    "k": entry["k"],
                    "circuit": entry["index"],
                    "n_edges": entry["n_edges"],
                    "weighted_size": entry["weighted_size"],
                    # An empty circuit is the corrupted run: its faithfulness is 0 by definition.
                    "faithfulness": f_values[ranking][data.grid.index(entry["k"])]
                    if entry["n_edges"]
                    else 0.0,
                }
            )
        curves.append({"ranking": ranking, "points": points})
    return curves


@fresh
def write_circuit_document(
    folder: Folder,
    data: CircuitData,
    *,
    name: str = "circuit.json",
    sidecar: str = "circuit.safetensors",
    model: Json | None = None,
    description: str = "EAP-IG edge scores and the circuits built from them at each grid point.",
) -> Json:
    """Write a circuit document with its safetensors sidecar; return the document."""
    folder.safetensors(sidecar, {"scores": data.scores, "membership": data.membership})
    u = data.universe
    doc: Json = {
        "spec_version": "1.0",
        "kind": "circuit",
        "description": description,
        "graph": {
            "convention": "eap-ig",
            "n_layers": u.n_layers,
            "n_heads": u.n_heads,
            "parallel_attn_mlp": u.parallel_attn_mlp,
            "n_edges": u.n_edges,
        },
        "granularity": "edge",
        "scores": {"artifact": "tensors", "tensor": "scores", "shape": [u.n_edges], "dtype": "float32"},
        "membership": {
            "artifact": "tensors",
            "tensor": "membership",
            "shape": list(data.membership.shape),
            "dtype": "bool",
        },
        "circuits": data.entries,
        "artifacts": [folder.artifact("tensors", "scores", sidecar, "application/x-safetensors")],
        "provenance": PROVENANCE,
    }
    if model is not None:
        doc["model"] = model
    folder.json(name, doc)
    return doc


@fresh
def write_ground_truth(
    folder: Folder, universe: Universe, truth: NDArray[np.bool_], *, name: str, sidecar: str
) -> Json:
    """A circuit document holding one circuit: a known true edge set."""
    folder.safetensors(sidecar, {"membership": truth[None, :]})
    doc: Json = {
        "spec_version": "1.0",
        "kind": "circuit",
        "description": "Ground-truth edge set of the model's planted circuit.",
        "graph": {
            "convention": "eap-ig",
            "n_layers": universe.n_layers,
            "n_heads": universe.n_heads,
            "parallel_attn_mlp": universe.parallel_attn_mlp,
            "n_edges": universe.n_edges,
        },
        "granularity": "edge",
        "membership": {
            "artifact": "truth",
            "tensor": "membership",
            "shape": [1, universe.n_edges],
            "dtype": "bool",
        },
        "circuits": [
            {"index": 0, "n_edges": int(truth.sum()), "weighted_size": float(universe.pruned_size(truth))}
        ],
        "artifacts": [folder.artifact("truth", "ground_truth", sidecar, "application/x-safetensors")],
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


def planted_truth(universe: Universe, path: Sequence[str]) -> NDArray[np.bool_]:
    """Edges between consecutive nodes of ``path`` (every q/k/v slot of a head), plus input and logits."""
    src, dst, _ = universe.edges
    index = {name: i for i, name in enumerate(universe.nodes)}
    chain = ["input", *path, "logits"]
    truth = np.zeros(universe.n_edges, dtype=bool)
    for a in chain:
        for b in chain:
            if index[a] < index[b]:
                truth |= (src == index[a]) & (dst == index[b])
    return truth


# --------------------------------------------------------------------------- datasets and models

# Rows come from the reference generators, in the row format of the spec (datasets.md).
DATASET_SEED = 2025
REPORT_ROWS = {"ioi": 3, "mcqa": 4, "arithmetic": 4}
DATASET_ROWS = 5  # the counterfactual_dataset cases


def generated(task: str, n_rows: int) -> Any:
    from mibspec.reference_impl.datasets import generate

    return generate(task, "test", n_rows, seed=DATASET_SEED)


@fresh
def ioi_causal_model() -> Json:
    return {
        "spec_version": "1.0",
        "kind": "causal_model",
        "description": "IOI: the logit difference logit(IO) - logit(S) is linear in the subject token and "
        "position signals (MIB App. G.5.4 fit).",
        "task": "ioi",
        "mechanism": "ioi_linear",
        "variables": [
            {"name": "output_token", "description": "the indirect object's name, the expected answer"},
            {
                "name": "output_position",
                "values": [0, 1],
                "description": "position of the indirect object among the two names",
            },
            {
                "name": "logit_difference",
                "description": "logit(IO) - logit(S): bias + token_coeff * token signal + position_coeff * "
                "position signal, signals +1 when kept and -1 when flipped",
            },
        ],
        "outputs": ["logit_difference"],
        "parameters": {"bias": 0.069, "token_coeff": 0.687, "position_coeff": 2.018},
        "provenance": PROVENANCE,
    }


@fresh
def arithmetic_causal_model() -> Json:
    return {
        "spec_version": "1.0",
        "kind": "causal_model",
        "description": "Addition of two operands below 100, with an explicit carry from the ones digits.",
        "task": "arithmetic",
        "mechanism": "two_digit_carry",
        "variables": [
            {"name": "operand_1", "description": "an integer from 0 to 99"},
            {"name": "operand_2", "description": "an integer from 0 to 99"},
            {
                "name": "ones_carry",
                "values": [0, 1],
                "description": "1 when the ones digits sum to more than 9",
            },
            {"name": "result", "description": "operand_1 + operand_2"},
        ],
        "outputs": ["result"],
        "parameters": {"operator": "+", "operand_min": 0, "operand_max": 99},
        "provenance": PROVENANCE,
    }


@fresh
def mcqa_causal_model() -> Json:
    return {
        "spec_version": "1.0",
        "kind": "causal_model",
        "description": "Four-choice colour questions: the answer is the symbol at the position of the "
        "correct choice.",
        "task": "mcqa",
        "mechanism": "answer_pointer",
        "variables": [
            {
                "name": "answer_pointer",
                "values": [0, 1, 2, 3],
                "description": "position of the correct choice",
            },
            {"name": "answer", "description": "the symbol the pointer selects"},
        ],
        "outputs": ["answer"],
        "parameters": {"n_choices": 4},
        "provenance": PROVENANCE,
    }


@fresh
def write_dataset(
    folder: Folder,
    *,
    task: str = "ioi",
    n_rows: int | None = None,
    name: str = "dataset.json",
    rows_file: str = "dataset.jsonl",
    causal_model: str | None = None,
) -> Json:
    """Write a counterfactual dataset document, its JSONL rows and (optionally) its causal model."""
    from mibspec.reference_impl.datasets import dumps_jsonl

    dataset = generated(task, n_rows or REPORT_ROWS[task])
    meta = dataset.metadata
    folder.write(rows_file, dumps_jsonl(dataset.rows).encode("utf-8"))
    artifacts = [folder.artifact("rows", "dataset", rows_file, "application/jsonl", rows=len(dataset.rows))]
    doc: Json = {
        "spec_version": "1.0",
        "kind": "counterfactual_dataset",
        "description": f"{task} test inputs paired with their counterfactual inputs.",
        "task": task,
        "split": meta["split"],
        "examples": "rows",
        "counterfactual_types": meta["counterfactual_types"],
        "variables": meta["variables"],
    }
    if causal_model is not None:
        model = {"ioi": ioi_causal_model, "mcqa": mcqa_causal_model, "arithmetic": arithmetic_causal_model}[
            task
        ]
        folder.json(causal_model, model())
        artifacts.append(
            folder.artifact(
                "causal-model", "causal_model", causal_model, "application/json", kind="causal_model"
            )
        )
        doc["causal_model"] = "causal-model"
    doc["generator"] = meta["generator"]
    doc["filters"] = meta["filters"]
    doc["artifacts"] = artifacts
    doc["provenance"] = PROVENANCE
    folder.json(name, doc)
    return doc


# --------------------------------------------------------------------------- featurizers


def orthonormal_rows(n: int, d: int, seed: int) -> NDArray[np.float32]:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, n)))
    return np.ascontiguousarray(q.T).astype(np.float32)


@fresh
def das_featurizer(
    folder: Folder,
    *,
    layer: int = 3,
    position: Json | None = None,
    name: str = "featurizer.json",
    sidecar: str = "featurizer.safetensors",
    input_dim: int = 768,
    n_features: int = 1,
    seed: int = 0,
) -> Json:
    """A DAS (subspace) featurizer on the residual stream: f = x·Rᵀ, R with orthonormal rows."""
    folder.safetensors(sidecar, {"rotation": orthonormal_rows(n_features, input_dim, seed)})
    doc: Json = {
        "spec_version": "1.0",
        "kind": "featurizer",
        "description": f"Distributed alignment search: a {n_features}-dimensional subspace of the residual "
        f"stream after layer {layer}.",
        "type": "subspace",
        "location": {"layer": layer, "component": "residual_post", "position": position or {"rule": "last"}},
        "input_dim": input_dim,
        "n_features": n_features,
        "feature_indices": list(range(n_features)),
        "weights": {
            "rotation": {
                "artifact": "weights",
                "tensor": "rotation",
                "shape": [n_features, input_dim],
                "dtype": "float32",
            }
        },
        "error": "add_base_error",
        "artifacts": [folder.artifact("weights", "weights", sidecar, "application/x-safetensors")],
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


@fresh
def identity_featurizer(folder: Folder, *, layer: int, name: str, input_dim: int = 896) -> Json:
    """The "full vector" baseline: every dimension of the residual stream is a feature."""
    doc: Json = {
        "spec_version": "1.0",
        "kind": "featurizer",
        "description": f"Full-vector baseline at the residual stream after layer {layer}.",
        "type": "identity",
        "location": {"layer": layer, "component": "residual_post", "position": {"rule": "last"}},
        "input_dim": input_dim,
        "n_features": input_dim,
        "error": "add_base_error",
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


@fresh
def sae_featurizer(
    folder: Folder, *, name: str = "featurizer.json", sidecar: str = "sae.safetensors"
) -> Json:
    """A small ReLU sparse autoencoder on the tiny model's residual stream."""
    rng = np.random.default_rng(5)
    d, n = 32, 64
    tensors = {
        "W_enc": (rng.normal(size=(d, n)) / np.sqrt(d)).astype(np.float32),
        "b_enc": np.zeros(n, dtype=np.float32),
        "W_dec": (rng.normal(size=(n, d)) / np.sqrt(n)).astype(np.float32),
        "b_dec": np.zeros(d, dtype=np.float32),
    }
    folder.safetensors(sidecar, tensors)
    weights = {
        key: {"artifact": "sae", "tensor": key, "shape": list(value.shape), "dtype": "float32"}
        for key, value in tensors.items()
    }
    doc: Json = {
        "spec_version": "1.0",
        "kind": "featurizer",
        "description": "ReLU sparse autoencoder (64 latents) on the residual stream before layer 2.",
        "type": "sae",
        "location": {
            "layer": 2,
            "component": "residual_pre",
            "position": {
                "rule": "slot",
                "slot": "subject",
                "match": "value",
                "occurrence": 1,
                "subtoken": "last",
            },
        },
        "input_dim": d,
        "n_features": n,
        "feature_indices": [3, 17, 40],
        "weights": weights,
        "error": "add_base_error",
        "sae_activation": "relu",
        "artifacts": [folder.artifact("sae", "weights", sidecar, "application/x-safetensors")],
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


@fresh
def pca_featurizer(folder: Folder, *, name: str = "featurizer.json") -> Json:
    """PCA on standardised activations, applied uncentred (the public code's convention, declared)."""
    rng = np.random.default_rng(9)
    d, n = 32, 8
    folder.npy("pca_mean.npy", rng.normal(size=d).astype(np.float32))
    folder.npy("pca_scale.npy", (1 + rng.random(d)).astype(np.float32))
    folder.npy("pca_components.npy", orthonormal_rows(n, d, 10))
    doc: Json = {
        "spec_version": "1.0",
        "kind": "featurizer",
        "description": "Top-8 principal components of standardised residual activations after layer 1.",
        "type": "pca",
        "location": {"layer": 1, "component": "residual_post", "position": {"rule": "last"}},
        "input_dim": d,
        "n_features": n,
        "feature_indices": [0, 1],
        "weights": {
            "mean": {"artifact": "mean", "shape": [d], "dtype": "float32"},
            "scale": {"artifact": "scale", "shape": [d], "dtype": "float32"},
            "components": {"artifact": "components", "shape": [n, d], "dtype": "float32"},
        },
        "pca_centring": "uncentred",
        "artifacts": [
            folder.artifact("mean", "weights", "pca_mean.npy", "application/x-npy"),
            folder.artifact("scale", "weights", "pca_scale.npy", "application/x-npy"),
            folder.artifact("components", "weights", "pca_components.npy", "application/x-npy"),
        ],
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


# --------------------------------------------------------------------------- shortcut dataset

N_IMAGES, IMAGE_SHAPE, PATCH, KERNEL = 8, (3, 8, 8), 5, 3
LOCATIONS = [[0, 0], [3, 3]]
DOMINANT = [0, 1, 2, 4, 5, 7]  # images meeting the dominance prerequisites


def shortcut_arrays() -> dict[str, NDArray[Any]]:
    rng = np.random.default_rng(21)
    labels = np.arange(N_IMAGES, dtype=np.int64) % 2
    clean = rng.random((N_IMAGES, *IMAGE_SHAPE)).astype(np.float32)
    kernels = rng.uniform(0, 0.2, size=(2, KERNEL, KERNEL))
    for c in range(2):
        kernels[c].flat[rng.integers(KERNEL * KERNEL)] = 1.0
    kernels = kernels.astype(np.float32)
    perturbed = clean.copy()
    for i, label in enumerate(labels):
        r0, c0 = LOCATIONS[label]
        padded = np.pad(clean[i], ((0, 0), (1, 1), (1, 1)))
        for r in range(r0, r0 + PATCH):
            for c in range(c0, c0 + PATCH):
                window = padded[:, r : r + KERNEL, c : c + KERNEL]
                perturbed[i, :, r, c] = np.clip((window * kernels[label]).sum(axis=(1, 2)), 0, 1)
    return {"clean": clean, "perturbed": perturbed, "labels": labels, "kernels": kernels}


_SHORTCUT_ROLES = {"clean": "images", "perturbed": "images", "labels": "labels", "kernels": "kernels"}


@fresh
def write_shortcut_dataset(folder: Folder, *, name: str = "dataset.json", grayscale: bool = False) -> Json:
    """The shortcut dataset (float32 colour, or uint8 grayscale) with its four .npy sidecars."""
    arrays = shortcut_arrays()
    shape = IMAGE_SHAPE
    dtype = "float32"
    if grayscale:
        shape, dtype = (1, *IMAGE_SHAPE[1:]), "uint8"
        for key in ("clean", "perturbed"):
            arrays[key] = np.round(arrays[key].mean(axis=1, keepdims=True) * 255).astype(np.uint8)
    files = {key: folder.npy(f"{key}.npy", value) for key, value in arrays.items()}
    doc: Json = {
        "spec_version": "1.0",
        "kind": "shortcut_dataset",
        "description": f"Random 8x8 {'grayscale' if grayscale else 'colour'} images; each class carries "
        "a 3x3 blur kernel applied to a 5x5 patch.",
        "source": "synthetic uniform-noise images (numpy PCG64, seed 21)",
        "split": "test",
        "n_classes": 2,
        "image_shape": list(shape),
        "clean_images": {"artifact": "clean", "shape": [N_IMAGES, *shape], "dtype": dtype},
        "perturbed_images": {"artifact": "perturbed", "shape": [N_IMAGES, *shape], "dtype": dtype},
        "labels": {"artifact": "labels", "shape": [N_IMAGES], "dtype": "int64"},
        "perturbation": {
            "kernel_size": KERNEL * KERNEL,
            "patch_size": PATCH * PATCH,
            "alpha": 0.2,
            "seed": 21,
            "kernels": {"artifact": "kernels", "shape": [2, KERNEL, KERNEL], "dtype": "float32"},
            "locations": LOCATIONS,
        },
        "seeds": [{"purpose": "images, kernels and the kernels' unit weight", "value": 21}],
        "artifacts": [
            folder.artifact(key, _SHORTCUT_ROLES[key], path, "application/x-npy")
            for key, path in files.items()
        ],
        "provenance": PROVENANCE,
    }
    folder.json(name, doc)
    return doc


def occlusion_like(truth: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.float32]:
    """A 3x3 box blur of the truth plus noise; in two images the peak spills just outside the patch."""
    padded = np.pad(truth, ((0, 0), (1, 1), (1, 1)))
    h, w = truth.shape[1:]
    blurred = sum(padded[:, r : r + h, c : c + w] for r in range(3) for c in range(3)) / 9
    maps = blurred + np.abs(rng.normal(0, 0.05, truth.shape))
    for j in (1, 4):
        r0, c0 = LOCATIONS[np.arange(N_IMAGES)[DOMINANT[j]] % 2]
        r, c = (r0 + PATCH, c0) if r0 + PATCH < h else (r0 - 1, c0)
        maps[j, r, c] = maps[j].max() + 0.05
    return maps.astype(np.float32)


def saliency_maps() -> tuple[NDArray[np.float32], dict[str, NDArray[np.float32]], NDArray[np.bool_]]:
    """Ground-truth Shapley maps, two methods' maps, and the dominant-area masks (dominant images)."""
    rng = np.random.default_rng(33)
    labels = np.arange(N_IMAGES) % 2
    h, w = IMAGE_SHAPE[1:]
    masks = np.zeros((len(DOMINANT), h, w), dtype=bool)
    truth = np.zeros((len(DOMINANT), h, w), dtype=np.float32)
    for j, i in enumerate(DOMINANT):
        r0, c0 = LOCATIONS[labels[i]]
        masks[j, r0 : r0 + PATCH, c0 : c0 + PATCH] = True
        truth[j][masks[j]] = rng.permutation(PATCH * PATCH) / (PATCH * PATCH) + 0.02
    maps = {
        "gradient": (truth + rng.normal(0, 0.25, truth.shape)).astype(np.float32),
        "occlusion": occlusion_like(truth, rng),
    }
    return truth, maps, masks


def tiny_cnn_weights() -> dict[str, NDArray[np.float32]]:
    """Weights of a 3x3 convolution (4 channels) and a linear read-out over the 8x8 maps."""
    rng = np.random.default_rng(41)
    return {
        "conv.weight": (rng.normal(size=(4, 3, 3, 3)) / 5).astype(np.float32),
        "conv.bias": np.zeros(4, dtype=np.float32),
        "fc.weight": (rng.normal(size=(2, 4 * 8 * 8)) / 16).astype(np.float32),
        "fc.bias": np.zeros(2, dtype=np.float32),
    }


def saliency_scores(
    truth: NDArray[np.float32],
    saliency: NDArray[np.float32],
    masks: NDArray[np.bool_],
    ks: Sequence[int],
    weights: Sequence[float],
) -> tuple[float, list[float], float]:
    """(hit accuracy, mean IoU per k, WIoU with weights normalised to 1) over the images."""

    def top(values: NDArray[np.float32], k: int) -> set[int]:
        flat = values.ravel().astype(np.float64)
        return set(np.lexsort((np.arange(flat.size), -flat))[:k].tolist())

    hits = [bool(masks[j].ravel()[next(iter(top(saliency[j], 1)))]) for j in range(len(truth))]
    per_k = []
    for k in ks:
        ious = [
            len(top(truth[j], k) & top(saliency[j], k)) / len(top(truth[j], k) | top(saliency[j], k))
            for j in range(len(truth))
        ]
        per_k.append(math.fsum(ious) / len(ious))
    total = math.fsum(weights)
    return sum(hits) / len(hits), per_k, math.fsum(w / total * v for w, v in zip(weights, per_k, strict=True))


# --------------------------------------------------------------------------- CAUSAL-BENCH data

CB_UNIVERSE = [
    f"L{layer}.{part}" for layer in range(4) for part in [*(f"attn_head[{h}]" for h in range(4)), "mlp"]
]
CB_TRUTH = ["L0.attn_head[0]", "L0.attn_head[1]", "L1.mlp", "L2.attn_head[0]", "L3.mlp"]
# Table 1's sets: sizes 7, 10, 16, 4 with the true positives of the paper (see TABLE1_SETS)
CB_SETS: dict[str, list[str]] = {name: list(members) for name, members in TABLE1_SETS.items()}
# Stability (Table 1) the simulated seed runs are drawn to approximate.
CB_STABILITY = {
    "activation_patching": 0.417,
    "gradient_attribution": 0.533,
    "ablation_scanning": 0.505,
    "circuit_discovery": 1.0,
}


def canonical(components: Sequence[str], universe: Sequence[str] = CB_UNIVERSE) -> list[str]:
    chosen = set(components)
    return [c for c in universe if c in chosen]


def seed_runs(
    components: Sequence[str], target: float, seed: int, universe: Sequence[str], n_runs: int = 10
) -> list[list[str]]:
    """Perturbed copies of a set whose stability is within 0.01 of ``target`` (deterministic search)."""
    from mibspec.reference_impl.metrics.causal_bench import stability

    if target >= 1.0:
        return [canonical(components, universe) for _ in range(n_runs)]
    rng = np.random.default_rng(seed)
    members = set(components)
    for _ in range(10_000):
        flip = rng.uniform(0.05, 0.5)
        runs = []
        for _ in range(n_runs):
            run = [
                c for c in universe if (c in members) != (rng.random() < flip * (0.3 + 0.7 * (c in members)))
            ]
            runs.append(run or [components[0]])
        if abs(stability(runs) - target) < 0.01:
            return [canonical(r, universe) for r in runs]
    raise RuntimeError(f"no run set reaches stability {target}")


@dataclass(frozen=True)
class BehaviourValues:
    """F, C and the COS-reduced set of a method when the behaviour cannot be evaluated here."""

    faithfulness: float
    completeness: float
    reduced: list[str]


def causal_bench_claims(
    sets: dict[str, list[str]],
    universe: Sequence[str],
    *,
    planted: Json | None,
    given: dict[str, BehaviourValues] | None = None,
    truth: Sequence[str] | None,
    stability_targets: dict[str, float],
    settings: Json,
    seed: int,
) -> Json:
    """Claims computed with the reference metrics: F, C and COS from the planted model (or given)."""
    from mibspec.reference_impl.behaviour.planted import PlantedCircuitModel
    from mibspec.reference_impl.metrics import causal_bench as cb

    beta = None
    if planted is not None:
        beta = PlantedCircuitModel(
            planted["n_layers"],
            planted["n_heads"],
            seed=planted["seed"],
            signal=planted["signal"],
            component_noise_sd=planted["component_noise_sd"],
            measurement_noise_sd=planted["measurement_noise_sd"],
        )
    weights = settings["weights"]
    methods = []
    for index, (name, components) in enumerate(sets.items()):
        runs = seed_runs(components, stability_targets[name], seed + index, universe)
        if beta is not None:
            cos = cb.causal_optimality(beta, components, universe, threshold=settings["cos_threshold"])
            f = cb.faithfulness(beta, components, universe)
            c = cb.completeness(beta, components, universe)
            reduced, cos_score = canonical(cos.reduced, universe), cos.score
        else:
            assert given is not None
            f, c, reduced = given[name].faithfulness, given[name].completeness, given[name].reduced
            cos_score = len(reduced) / len(components)
        values = {
            "F": f,
            "C": c,
            "M": cb.minimality(components, universe),
            "S": cb.stability(runs),
            "COS": cos_score,
        }
        metrics: Json = {**values, "composite": cb.composite(values, weights)}
        if truth is not None:
            precision, recall, f1 = cb.precision_recall_f1(components, truth)
            metrics |= {"precision": precision, "recall": recall, "f1": f1}
        methods.append(
            {
                "name": name,
                "components": canonical(components, universe),
                "runs": [{"seed": 100 * index + i, "components": run} for i, run in enumerate(runs)],
                "reduced": reduced,
                "metrics": metrics,
            }
        )
    groups = list(sets.values())
    test = cb.convergence_test(
        groups,
        len(universe),
        n_permutations=settings["n_permutations"],
        seed=seed,
        p_convention=settings.get("p_convention", "plus_one"),
        ddof=settings.get("z_ddof", 0),
    )
    return {
        "methods": methods,
        "convergence": test.as_dict(),
        "consensus": canonical(cb.consensus_set(groups), universe),
        "majority": canonical(cb.majority_set(groups), universe),
        "jaccard": {"methods": list(sets), "matrix": cb.jaccard_matrix(groups).tolist()},
    }


# --------------------------------------------------------------------------- reports

EAP_IG: Json = {
    "name": "EAP-IG (inputs)",
    "version": "1.0",
    "description": "Edge attribution patching with integrated gradients on the edge inputs.",
    "hyperparameters": {"ig_steps": 5, "aggregation": "sum"},
    "citation": {
        "text": "Hanna, Pezzelle and Belinkov (2024). Have Faith in Faithfulness: Going Beyond "
        "Circuit Overlap When Finding Model Mechanisms.",
        "url": "https://arxiv.org/abs/2403.17806",
    },
}
M_FULL, M_EMPTY = 3.2471, -0.0893
INTERPBENCH_PATH = ("a0.h1", "a1.h3", "m2", "a3.h0", "a4.h2", "m5")


def _circuit_setup(which: str) -> tuple[Universe, Json, NDArray[np.float32], str]:
    if which == "gpt2":
        return GPT2_UNIVERSE, GPT2_SMALL, edge_scores(GPT2_UNIVERSE, 1, IOI_HEADS), "GPT-2 small"
    if which == "interpbench":
        truth = planted_truth(INTERPBENCH_UNIVERSE, INTERPBENCH_PATH)
        scores = edge_scores(INTERPBENCH_UNIVERSE, 2, INTERPBENCH_PATH[:3], boost=truth)
        return INTERPBENCH_UNIVERSE, INTERPBENCH, scores, "InterpBench"
    return (
        TINY_UNIVERSE,
        TINY_MODEL,
        edge_scores(TINY_UNIVERSE, 3, ("a1.h2", "a2.h0", "m3")),
        "a 4-layer model",
    )


@fresh
def circuit_report(folder: Folder, which: str = "tiny", *, auroc: bool = False) -> Json:
    """A circuit-track report with its circuit document, dataset and sidecars written into ``folder``."""
    universe, model, scores, label = _circuit_setup(which)
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    write_circuit_document(folder, data, model=model)
    write_dataset(folder, task="ioi")
    artifacts = [
        folder.artifact("circuit", "circuit", "circuit.json", "application/json", kind="circuit"),
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
    ]
    ranking = {"cpr": "signed", "cmd": "absolute"}
    curves = circuit_curves(data, {"signed": F_SIGNED, "absolute": F_ABSOLUTE})
    claims: Json = {
        "circuit": "circuit",
        "n_edges": universe.n_edges,
        "m_full": M_FULL,
        "m_empty": M_EMPTY,
        "curves": curves,
        "cpr": {"value": trapezoid(GRID, curve_values(curves[0]))},
        "cmd": {"value": trapezoid(GRID, [abs(1 - f) for f in curve_values(curves[1])])},
    }
    if auroc:
        truth = planted_truth(universe, INTERPBENCH_PATH)
        write_ground_truth(folder, universe, truth, name="truth.json", sidecar="truth.safetensors")
        artifacts.append(
            folder.artifact("truth", "ground_truth", "truth.json", "application/json", kind="circuit")
        )
        ranking["auroc"] = "absolute"
        claims["auroc"] = {
            "value": roc_auc(np.abs(scores.astype(np.float64)), truth),
            "convention": "rank",
            "ground_truth": "truth",
        }
    return {
        "spec_version": "1.0",
        "kind": "report",
        "track": "circuit",
        "profile": "default",
        "title": f"EAP-IG circuits for IOI on {label}",
        "method": EAP_IG,
        "task": {
            "name": "ioi",
            "dataset": "dataset",
            "split": "test",
            "counterfactual_type": "abc",
            "n_examples": REPORT_ROWS["ioi"],
        },
        "model": model,
        "settings": {
            "ablation": "counterfactual",
            "granularity": "edge",
            "grid": list(GRID),
            "ranking": ranking,
            "edge_count_rounding": "floor",
            "metric": "logit_difference",
            "batch_size": 5,
            "padding_side": "right",
        },
        "claims": claims,
        "artifacts": artifacts,
        "provenance": PROVENANCE,
    }


def aggregate(units: Sequence[Json], better: str) -> tuple[dict[str, float], float, float]:
    """per_layer (best position of the mean over counterfactual sets), average, best layer."""
    pick = max if better == "higher" else min
    layers: dict[int, list[float]] = {}
    for unit in units:
        scores = list(unit["scores"].values())
        layers.setdefault(unit["location"]["layer"], []).append(math.fsum(scores) / len(scores))
    per_layer = {str(layer): pick(values) for layer, values in sorted(layers.items())}
    return per_layer, math.fsum(per_layer.values()) / len(per_layer), pick(per_layer.values())


IOI_MSE = {  # (layer, position rule) → MSE per counterfactual set
    (3, "last"): {"io_s1_flip": 6.913, "io_s2_flip": 7.288},
    (3, "s2"): {"io_s1_flip": 4.102, "io_s2_flip": 4.655},
    (4, "last"): {"io_s1_flip": 5.874, "io_s2_flip": 6.031},
    (4, "s2"): {"io_s1_flip": 3.517, "io_s2_flip": 3.906},
}
S2_POSITION: Json = {"rule": "slot", "slot": "name_c", "occurrence": -1, "subtoken": "last"}


@fresh
def causal_variable_report(folder: Folder) -> Json:
    """GPT-2 small on IOI: DAS featurizers aligned to the output-position variable (MSE, lower is better)."""
    write_dataset(folder, task="ioi", causal_model="causal_model.json")
    artifacts = [
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
        folder.artifact(
            "causal-model", "causal_model", "causal_model.json", "application/json", kind="causal_model"
        ),
    ]
    units = []
    for seed, ((layer, where), scores) in enumerate(IOI_MSE.items()):
        position = {"rule": "last"} if where == "last" else S2_POSITION
        stem = f"das_l{layer}_{where}"
        das_featurizer(
            folder,
            layer=layer,
            position=position,
            name=f"{stem}.json",
            sidecar=f"{stem}.safetensors",
            seed=seed,
        )
        ident = f"das-l{layer}-{where}"
        artifacts.append(
            folder.artifact(ident, "featurizer", f"{stem}.json", "application/json", kind="featurizer")
        )
        token = "last_token" if where == "last" else "s2_token"
        units.append(
            {
                "id": f"ResidualStream(Layer-{layer},Token-{token})",
                "location": {"layer": layer, "component": "residual_post", "position": position},
                "featurizer": ident,
                "scores": scores,
                "n_examples": {"io_s1_flip": 3, "io_s2_flip": 2},
            }
        )
    per_layer, average, best = aggregate(units, "lower")
    return {
        "spec_version": "1.0",
        "kind": "report",
        "track": "causal_variable",
        "profile": "default",
        "title": "DAS alignment of the IOI output-position variable in GPT-2 small",
        "method": {
            "name": "DAS",
            "version": "1.0",
            "hyperparameters": {"n_features": 1, "epochs": 2, "learning_rate": 0.001},
        },
        "task": {"name": "ioi", "dataset": "dataset", "split": "test", "n_examples": REPORT_ROWS["ioi"]},
        "model": GPT2_SMALL,
        "settings": {
            "intervention": "interchange",
            "checker": "exact_token",
            "example_filter": "model_correct_on_base_and_counterfactuals",
            "batch_size": 8,
            "causal_model": "causal-model",
        },
        "claims": {
            "variables": [
                {
                    "name": "output_position",
                    "metric": "mse",
                    "better": "lower",
                    "units": units,
                    "per_layer": per_layer,
                    "average": average,
                    "highest": best,
                }
            ]
        },
        "seeds": [{"purpose": "featurizer initialisation and training order", "value": 0}],
        "artifacts": artifacts,
        "provenance": PROVENANCE,
    }


MCQA_IIA = {
    12: {"symbol": 0.25, "answer_position": 0.5},
    16: {"symbol": 0.75, "answer_position": 0.5},
    20: {"symbol": 1.0, "answer_position": 0.75},
}


@fresh
def mcqa_report(folder: Folder) -> Json:
    """Qwen2.5-0.5B on MCQA: the full-vector baseline aligned to the answer pointer (IIA)."""
    write_dataset(folder, task="mcqa", causal_model="causal_model.json")
    artifacts = [
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
        folder.artifact(
            "causal-model", "causal_model", "causal_model.json", "application/json", kind="causal_model"
        ),
    ]
    units = []
    for layer, scores in MCQA_IIA.items():
        identity_featurizer(folder, layer=layer, name=f"full_vector_l{layer}.json")
        ident = f"full-vector-l{layer}"
        artifacts.append(
            folder.artifact(
                ident, "featurizer", f"full_vector_l{layer}.json", "application/json", kind="featurizer"
            )
        )
        units.append(
            {
                "id": f"ResidualStream(Layer-{layer},Token-last_token)",
                "location": {"layer": layer, "component": "residual_post", "position": {"rule": "last"}},
                "featurizer": ident,
                "scores": scores,
                "n_examples": {"symbol": 4, "answer_position": 4},
            }
        )
    per_layer, average, best = aggregate(units, "higher")
    return {
        "spec_version": "1.0",
        "kind": "report",
        "track": "causal_variable",
        "title": "Full-vector baseline for the MCQA answer pointer in Qwen2.5-0.5B",
        "method": {"name": "Full vector"},
        "task": {"name": "mcqa", "dataset": "dataset", "split": "test", "n_examples": REPORT_ROWS["mcqa"]},
        "model": QWEN_05B,
        "settings": {"checker": "exact_token", "causal_model": "causal-model"},
        "claims": {
            "variables": [
                {
                    "name": "answer_pointer",
                    "metric": "iia",
                    "better": "higher",
                    "units": units,
                    "per_layer": per_layer,
                    "average": average,
                    "highest": best,
                }
            ]
        },
        "artifacts": artifacts,
        "provenance": PROVENANCE,
    }


CB_WEIGHTS = {"F": 1.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0}
CB_BEHAVIOUR: Json = dict(PLANTED_BEHAVIOUR)
CB_SETTINGS: Json = {
    "weights": CB_WEIGHTS,
    "cos_threshold": 0.85,
    "n_permutations": 1000,
    "p_convention": "plus_one",
    "z_ddof": 0,
}


@fresh
def causal_bench_report() -> Json:
    """CAUSAL-BENCH on the planted 4-layer, 4-head model with the paper's Table 1 sets."""
    return {
        "spec_version": "1.0",
        "kind": "report",
        "track": "causal_bench",
        "profile": "default",
        "title": "Four localization methods on the planted 4L/4H circuit",
        "method": {
            "name": "CAUSAL-BENCH method comparison",
            "version": "1.0",
            "hyperparameters": {"ap_threshold": 0.05, "cd_faithfulness_floor": 0.8},
        },
        "task": {"name": "planted-circuit"},
        "behaviour": CB_BEHAVIOUR,
        "universe": CB_UNIVERSE,
        "ground_truth": CB_TRUTH,
        "settings": CB_SETTINGS,
        "claims": causal_bench_claims(
            CB_SETS,
            CB_UNIVERSE,
            planted=CB_BEHAVIOUR,
            truth=CB_TRUTH,
            stability_targets=CB_STABILITY,
            settings=CB_SETTINGS,
            seed=7,
        ),
        "seeds": [
            {"purpose": "behaviour model noise", "value": 42},
            {"purpose": "permutation test", "value": 7},
        ],
        "provenance": PROVENANCE,
    }


WIOU_KS = [25, 20, 15, 10, 5, 3, 1]
WIOU_WEIGHTS = [1.0, 3.0, 5.0, 10.0, 15.0, 20.0, 25.0]


@fresh
def saliency_report(folder: Folder, *, curves: bool = False) -> Json:
    """A tiny CNN trained on the shortcut dataset; two saliency methods against Shapley ground truth."""
    write_shortcut_dataset(folder)
    truth, maps, masks = saliency_maps()
    folder.npy("shapley.npy", truth)
    folder.safetensors("cnn.safetensors", tiny_cnn_weights())
    artifacts = [
        folder.artifact("dataset", "dataset", "dataset.json", "application/json", kind="shortcut_dataset"),
        folder.artifact("shapley", "ground_truth", "shapley.npy", "application/x-npy"),
    ]
    methods = []
    artifacts.append(folder.artifact("weights", "weights", "cnn.safetensors", "application/x-safetensors"))
    for name, values in maps.items():
        folder.npy(f"maps_{name}.npy", values)
        artifacts.append(folder.artifact(f"maps-{name}", "maps", f"maps_{name}.npy", "application/x-npy"))
        hit_accuracy, per_k, wiou = saliency_scores(truth, values, masks, WIOU_KS, WIOU_WEIGHTS)
        method: Json = {
            "name": name,
            "maps": {"artifact": f"maps-{name}", "shape": list(values.shape), "dtype": str(values.dtype)},
            "channel_reduction": "sum",
            "hit_accuracy": hit_accuracy,
            "wiou": wiou,
            "per_k_iou": per_k,
        }
        if curves:
            method |= {
                "deletion_auc": 0.3127 if name == "gradient" else 0.4410,
                "addition_auc": 0.7012 if name == "gradient" else 0.6235,
            }
        methods.append(method)
    settings: Json = {
        "dominance_threshold": 0.9,
        "wiou_ks": WIOU_KS,
        "wiou_weights": WIOU_WEIGHTS,
        "auc_convention": "normalised_trapezoid",
        "shapley_sampler": "permutation",
        "shapley_trials": 5,
        "shapley_permutations": 200,
    }
    if curves:
        settings["curve_steps"] = 64
    return {
        "spec_version": "1.0",
        "kind": "report",
        "track": "saliency",
        "profile": "default",
        "title": "Pixel-level evaluation of two saliency methods on a shortcut-trained CNN",
        "method": {"name": "saliency comparison"},
        "task": {"name": "shortcut-8x8", "dataset": "dataset", "split": "test", "n_examples": N_IMAGES},
        "model": TINY_CNN,
        "settings": settings,
        "claims": {
            "clean_accuracy": 0.25,
            "perturbed_accuracy": 1.0,
            "dominance": {
                "n_images": N_IMAGES,
                "n_dominant": len(DOMINANT),
                "rate": len(DOMINANT) / N_IMAGES,
            },
            "ground_truth": {"artifact": "shapley", "shape": list(truth.shape), "dtype": str(truth.dtype)},
            "methods": methods,
        },
        "seeds": [{"purpose": "Shapley permutations", "value": 5}],
        "artifacts": artifacts,
        "provenance": PROVENANCE,
    }


# --------------------------------------------------------------------------- the case registry

Finding = tuple[str, str] | tuple[str, str, str]  # (code, pointer) or (code, pointer, document)


@dataclass(frozen=True)
class Case:
    kind: str
    verdict: str
    id: str
    requirements: tuple[str, ...]
    description: str
    build: Callable[[Folder], None]
    findings: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    document: str | None = None
    max_bytes: int | None = None
    max_depth: int | None = None

    @property
    def folder(self) -> str:
        return f"{self.kind}/{self.verdict}/{self.id}"

    def expected(self) -> Json:
        def entries(items: tuple[Finding, ...]) -> list[Json]:
            out = []
            for item in items:
                entry = {"code": item[0], "pointer": item[1]}
                if len(item) == 3:
                    entry["document"] = item[2]
                out.append(entry)
            return out

        data: Json = {
            "id": self.id,
            "kind": self.kind,
            "verdict": self.verdict,
            "requirements": list(self.requirements),
            "description": self.description,
        }
        if self.document:
            data["document"] = self.document
        data["findings"] = entries(self.findings)
        if self.warnings:
            data["warnings"] = entries(self.warnings)
        if self.max_bytes is not None:
            data["max_bytes"] = self.max_bytes
        if self.max_depth is not None:
            data["max_depth"] = self.max_depth
        return data


CASES: list[Case] = []


def case(
    kind: str,
    requirements: str,
    description: str,
    *findings: Finding,
    **options: Any,
) -> Callable[[Callable[[Folder], None]], Callable[[Folder], None]]:
    """Register a case; its id is the function's name with hyphens, its verdict follows from findings."""

    def register(fn: Callable[[Folder], None]) -> Callable[[Folder], None]:
        verdict = "invalid" if findings else "valid"
        ident = fn.__name__.replace("_", "-")
        CASES.append(
            Case(kind, verdict, ident, tuple(requirements.split()), description, fn, findings, **options)
        )
        return fn

    return register


def save(folder: Folder, doc: Json, name: str = "document.json") -> None:
    folder.json(name, doc)


def rehash(folder: Folder, doc: Json) -> Json:
    """Recompute the sha256 and size of every artifact of ``doc`` whose file exists (after an edit)."""
    for entry in doc.get("artifacts", []):
        path = folder.root / entry["path"]
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            entry["sha256"], entry["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
    return doc


def read_json(folder: Folder, name: str) -> Json:
    return json.loads((folder.root / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


# =========================================================================== json: parsing


def _model_text() -> str:
    return json_bytes(arithmetic_causal_model()).decode("utf-8")


@case("json", "P-5", "Nesting exactly at the configured depth limit (8) is accepted.", max_depth=8)
def depth_at_limit(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    # root, extensions, four nested objects, two nested arrays: 8 levels in all
    doc["extensions"] = {"org.example:tree": {"a": {"b": {"c": {"d": [[1, 2]]}}}}}
    save(folder, doc)


@case("json", "P-5", "A file exactly as large as the configured byte limit is accepted.", max_bytes=2048)
def size_at_limit(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    text = json_bytes(doc)
    # Pad the description so the file is exactly max_bytes long.
    doc["description"] += " " * (2048 - len(text))
    save(folder, doc)
    assert (folder.root / "document.json").stat().st_size == 2048


@case("json", "P-1 P-3 P-4", "Escapes, non-ASCII UTF-8 text and extreme finite numbers are well-formed JSON.")
def unicode_and_extreme_numbers(folder: Folder) -> None:
    text = _model_text()
    extra = (
        '"extensions": {"org.example:text": '
        '"Zürich \\u00e9t\\u00e9 \\ud83d\\ude00 — 名前 \\"quoted\\" \\\\ \\/",\n'
        '    "org.example:numbers": [-0.0, 1e308, -1.7976931348623157e308, 5e-324, '
        '123456789012345678901234567890, 1E+2, 0.000001]},\n  "spec_version"'
    )
    folder.write("document.json", text.replace('"spec_version"', extra, 1).encode("utf-8"))


@case("json", "P-1", "A trailing comma after the last member of an object.", ("P101", ""))
def trailing_comma(folder: Folder) -> None:
    text = _model_text().rstrip()
    folder.write("document.json", (text[:-1].rstrip() + ",\n}\n").encode())


@case("json", "P-1", "The file ends in the middle of an object.", ("P101", ""))
def truncated_document(folder: Folder) -> None:
    text = _model_text()
    folder.write("document.json", text[: len(text) // 2].encode())


@case("json", "P-1", "An empty file is not a JSON text.", ("P101", ""))
def empty_file(folder: Folder) -> None:
    folder.write("document.json", b"")


@case("json", "P-1", "Single-quoted strings are not JSON.", ("P101", ""))
def single_quoted_strings(folder: Folder) -> None:
    folder.write("document.json", b"{'spec_version': '1.0', 'kind': 'causal_model'}\n")


@case("json", "P-2", 'A nested object repeats the key "name".', ("P102", "/variables/0/name"))
def duplicate_key(folder: Folder) -> None:
    text = _model_text().replace('"name": "operand_1"', '"name": "operand_1",\n      "name": "operand_2"', 1)
    folder.write("document.json", text.encode())


@case("json", "P-3", "A NaN literal in a numeric field.", ("P103", "/parameters/operand_max"))
def nan_literal(folder: Folder) -> None:
    folder.write("document.json", _model_text().replace('"operand_max": 99', '"operand_max": NaN').encode())


@case("json", "P-3", "A -Infinity literal.", ("P103", "/parameters/operand_max"))
def negative_infinity_literal(folder: Folder) -> None:
    folder.write(
        "document.json", _model_text().replace('"operand_max": 99', '"operand_max": -Infinity').encode()
    )


@case(
    "json",
    "P-3",
    "1e400 is well-formed JSON but overflows to infinity in binary64.",
    ("P103", "/parameters/operand_max"),
)
def number_overflows_to_infinity(folder: Folder) -> None:
    folder.write("document.json", _model_text().replace('"operand_max": 99', '"operand_max": 1e400').encode())


@case("json", "P-4", "A string holds a byte sequence that is not UTF-8 (Latin-1 encoded text).", ("P104", ""))
def invalid_utf8(folder: Folder) -> None:
    text = (
        _model_text().replace("Addition of two operands", "Zürich addition of two operands").encode("utf-8")
    )
    folder.write("document.json", text.replace("ü".encode(), "ü".encode("latin-1")))


@case("json", "P-4", "The file starts with a UTF-8 byte-order mark.", ("P105", ""))
def byte_order_mark(folder: Folder) -> None:
    folder.write("document.json", b"\xef\xbb\xbf" + _model_text().encode())


@case("json", "P-5", "Arrays nested 70 deep, over the default depth limit of 64.", ("P106", ""))
def nesting_too_deep(folder: Folder) -> None:
    nested = "[" * 70 + "]" * 70
    folder.write(
        "document.json",
        _model_text().replace('"parameters": {', f'"parameters": {{"deep": {nested},', 1).encode(),
    )


@case(
    "json",
    "P-5",
    "A conformant 3 kB document checked with a byte limit of 1000: refused unread.",
    ("P107", ""),
    max_bytes=1000,
)
def file_too_large(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    templates = [
        "Q: What is {operand_1} plus {operand_2}? A:",
        "What is the sum of {operand_1} and {operand_2}?",
    ]
    doc["extensions"] = {"org.example:prompts": [f"{t} (variant {i})" for i in range(20) for t in templates]}
    save(folder, doc)
    assert 2500 < (folder.root / "document.json").stat().st_size < 4000


@case("json", "P-6", "The top-level value is an array of documents, not a document.", ("P108", ""))
def top_level_array(folder: Folder) -> None:
    folder.write("document.json", b"[" + _model_text().encode().rstrip() + b"]\n")


@case("json", "P-6", "The top-level value is a string.", ("P108", ""))
def top_level_string(folder: Folder) -> None:
    folder.write("document.json", b'"spec_version 1.0"\n')


@case(
    "json",
    "P-4",
    "A description escapes the high half of a surrogate pair without the low half (\\ud83d alone).",
    ("P109", "/description"),
)
def unpaired_surrogate(folder: Folder) -> None:
    text = _model_text()
    assert '"description": "' in text
    folder.write("document.json", text.replace('"description": "', '"description": "\\ud83d ', 1).encode())


@case(
    "json",
    "P-5",
    "An extension array of 1,000,000 zeros: with the document's other values, over the default "
    "limit of 1,000,000 JSON values, refused before parsing.",
    ("P110", ""),
)
def too_many_values(folder: Folder) -> None:
    zeros = ",".join("0" * 1_000_000)
    text = _model_text().replace(
        '"spec_version"', f'"extensions": {{"org.example:zeros": [{zeros}]}},\n  "spec_version"', 1
    )
    folder.write("document.json", text.encode())


# =========================================================================== report: circuit track


@case(
    "report",
    "DK-1 A-6 A-7 A-8",
    "GPT-2 small on IOI: EAP-IG scores over all 32,491 edges, circuits at the ten grid points for both "
    "rankings, CPR and CMD as trapezoids of the curves.",
)
def circuit_gpt2_small_ioi(folder: Folder) -> None:
    save(folder, circuit_report(folder, "gpt2"))


@case(
    "report",
    "DK-1 A-6 A-7",
    "The InterpBench model (1,108 edges) with an edge AUROC (rank statistic) against its ground-truth "
    "circuit.",
)
def circuit_interpbench_auroc(folder: Folder) -> None:
    save(folder, circuit_report(folder, "interpbench", auroc=True))


@case("report", "DK-1 S-4", "A circuit report declaring the mib-2025 compatibility profile.")
def circuit_mib_2025_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["profile"] = "mib-2025"
    save(folder, doc)


@case("report", "DK-1 S-3", "A circuit report with uncertainties, seeds and a local model.")
def circuit_with_uncertainty(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cpr"]["uncertainty"] = {
        "kind": "standard_error",
        "value": 0.0121,
        "n": 5,
        "method": "bootstrap",
    }
    doc["claims"]["curves"][0]["points"][4]["uncertainty"] = {
        "kind": "confidence_interval",
        "lower": 0.65,
        "upper": 0.79,
        "level": 0.95,
        "method": "bootstrap",
    }
    doc["seeds"] = [{"purpose": "bootstrap resampling", "value": 2025}]
    save(folder, doc)


@case("report", "S-1", 'spec_version "2.0" is not a version this spec defines.', ("S102", "/spec_version"))
def circuit_unknown_spec_version(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["spec_version"] = "2.0"
    save(folder, doc)


@case("report", "S-3 DK-1", 'track "circuits" is not one of the four tracks.', ("S113", "/track"))
def circuit_unknown_track(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["track"] = "circuits"
    save(folder, doc)


@case("report", "S-4", "The report names a profile that does not exist.", ("S104", "/profile"))
def circuit_unknown_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["profile"] = "mib-2024"
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A curve point at k = 0 (the grid has no k = 0 point; k must be > 0).",
    ("S114", "/claims/curves/0/points/0/k"),
)
def circuit_k_zero(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][0]["k"] = 0
    save(folder, doc)


@case(
    "report",
    "K-1",
    "The grid leaves out k = 0.001 (curves and areas follow it), so it is not the profile's grid.",
    ("K101", "/settings/grid"),
)
def circuit_grid_not_profile(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["settings"]["grid"] = list(GRID[1:])
    for curve in doc["claims"]["curves"]:
        curve["points"] = curve["points"][1:]
    signed, absolute = doc["claims"]["curves"]
    doc["claims"]["cpr"]["value"] = trapezoid(GRID[1:], curve_values(signed))
    doc["claims"]["cmd"]["value"] = trapezoid(GRID[1:], [abs(1 - f) for f in curve_values(absolute)])
    save(folder, doc)


@case(
    "report",
    "K-1",
    "One point of the signed curve sits at k = 0.003, off the grid.",
    ("K102", "/claims/curves/0"),
)
def circuit_curve_off_grid(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"][0]["points"][1]["k"] = 0.003
    save(folder, doc)


@case(
    "report",
    "K-2",
    "The circuit at k = 0.05 claims one edge more than floor(0.05 * |E|).",
    ("K103", "/claims/curves/0/points/5/n_edges"),
)
def circuit_too_many_edges(folder: Folder) -> None:
    doc = circuit_report(folder)
    point = doc["claims"]["curves"][0]["points"][5]
    point["n_edges"] = edges_at(point["k"], doc["claims"]["n_edges"]) + 1
    save(folder, doc)


@case(
    "report",
    "K-2",
    "The weighted size at k = 0.1 exceeds 0.1 * |E|.",
    ("K103", "/claims/curves/1/points/6/weighted_size"),
)
def circuit_weighted_size_too_large(folder: Folder) -> None:
    doc = circuit_report(folder)
    point = doc["claims"]["curves"][1]["points"][6]
    point["weighted_size"] = point["k"] * doc["claims"]["n_edges"] + 1.0
    save(folder, doc)


@case(
    "report",
    "C-1",
    "The claimed CPR is 0.01 above the trapezoid of the signed curve.",
    ("C101", "/claims/cpr/value"),
)
def circuit_cpr_inconsistent(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cpr"]["value"] += 0.01
    save(folder, doc)


@case(
    "report",
    "C-1",
    "CMD computed from the signed curve while settings.ranking.cmd declares the absolute one.",
    ("C102", "/claims/cmd/value"),
)
def circuit_cmd_from_wrong_ranking(folder: Folder) -> None:
    doc = circuit_report(folder)
    signed = doc["claims"]["curves"][0]
    doc["claims"]["cmd"]["value"] = trapezoid(GRID, [abs(1 - f) for f in curve_values(signed)])
    save(folder, doc)


@case(
    "report",
    "C-2",
    "settings.ranking.cmd names the absolute ranking but only the signed curve is claimed.",
    ("C103", "/settings/ranking/cmd"),
)
def circuit_missing_absolute_curve(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["curves"] = doc["claims"]["curves"][:1]
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A negative CMD (an area of |1 - f| cannot be negative).",
    ("S114", "/claims/cmd/value"),
)
def circuit_negative_cmd(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cmd"]["value"] = -0.1
    save(folder, doc)


@case("report", "M-1", "A hub model without its pinned revision.", ("A111", "/model"))
def circuit_hub_model_without_revision(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["model"] = {key: value for key, value in GPT2_SMALL.items() if key != "revision"}
    save(folder, doc)


@case(
    "report", "S-3", "A hub revision that is a branch name, not a 40-hex commit.", ("S115", "/model/revision")
)
def circuit_revision_not_commit(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["model"] = {**GPT2_SMALL, "revision": "main"}
    save(folder, doc)


@case(
    "report",
    "S-3",
    "An additional property inside settings (documents are closed).",
    ("S112", "/settings/tie_break"),
)
def circuit_settings_additional_property(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["settings"]["tie_break"] = "random"
    save(folder, doc)


@case("report", "S-3", "CMD given as a string.", ("S110", "/claims/cmd/value"))
def circuit_cmd_not_a_number(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["cmd"]["value"] = str(doc["claims"]["cmd"]["value"])
    save(folder, doc)


@case(
    "report",
    "A-6",
    "circuit.json is declared as a circuit document but holds a featurizer.",
    ("A107", "/artifacts/0/kind"),
)
def circuit_artifact_of_wrong_kind(folder: Folder) -> None:
    doc = circuit_report(folder)
    for name in ("circuit.json", "circuit.safetensors"):
        (folder.root / name).unlink()
    das_featurizer(folder, name="circuit.json")
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-6 A-3",
    "The referenced circuit document is itself invalid (its sidecar's hash differs); "
    "the finding belongs to circuit.json and the report is invalid through it.",
    ("A103", "/artifacts/0/sha256", "circuit.json"),
    ("A107", "/artifacts/0"),
)
def circuit_referenced_circuit_invalid(folder: Folder) -> None:
    doc = circuit_report(folder)
    circuit = read_json(folder, "circuit.json")
    circuit["artifacts"][0]["sha256"] = "0" * 64
    save(folder, circuit, "circuit.json")
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-7",
    'claims.circuit names an artifact that does not declare "kind": "circuit".',
    ("A107", "/claims/circuit"),
)
def circuit_reference_without_kind(folder: Folder) -> None:
    doc = circuit_report(folder)
    del doc["artifacts"][0]["kind"]
    save(folder, doc)


@case(
    "report",
    "A-7",
    "claims.circuit names an artifact id the report does not declare.",
    ("A109", "/claims/circuit"),
)
def circuit_undeclared_reference(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["claims"]["circuit"] = "circuits"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "The AUROC ground truth names the dataset artifact, which is not a circuit document.",
    ("A107", "/claims/auroc/ground_truth"),
)
def circuit_ground_truth_not_a_circuit(folder: Folder) -> None:
    doc = circuit_report(folder, "interpbench", auroc=True)
    doc["claims"]["auroc"]["ground_truth"] = "dataset"
    save(folder, doc)


@case(
    "report",
    "A-1",
    "An artifact path climbs out of the report's folder with '..'.",
    ("A101", "/artifacts/1/path"),
)
def circuit_artifact_path_dotdot(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "../invalid/dataset.json"
    save(folder, doc)


@case("report", "A-1", "An absolute artifact path.", ("A101", "/artifacts/1/path"))
def circuit_artifact_path_absolute(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "/srv/mib/ioi/dataset.json"
    save(folder, doc)


@case("report", "A-1", "A Windows path with a drive letter and backslashes.", ("A101", "/artifacts/1/path"))
def circuit_artifact_path_windows(folder: Folder) -> None:
    doc = circuit_report(folder)
    doc["artifacts"][1]["path"] = "C:\\mib\\ioi\\dataset.json"
    save(folder, doc)


@case(
    "report",
    "A-1",
    "A relative path written with backslashes (artifact paths are POSIX).",
    ("A101", "/artifacts/1/path"),
)
def circuit_artifact_path_backslash(folder: Folder) -> None:
    doc = circuit_report(folder)
    (folder.root / "data").mkdir()
    (folder.root / "dataset.json").rename(folder.root / "data" / "dataset.json")
    doc["artifacts"][1]["path"] = "data\\dataset.json"
    save(folder, doc)


@case("report", "A-1", 'Two artifacts share the id "circuit".', ("A108", "/artifacts/2/id"))
def circuit_duplicate_artifact_id(folder: Folder) -> None:
    doc = circuit_report(folder)
    folder.safetensors("extra.safetensors", {"scores": np.zeros(4, dtype=np.float32)})
    doc["artifacts"].append(
        folder.artifact("circuit", "scores", "extra.safetensors", "application/x-safetensors")
    )
    save(folder, doc)


# =========================================================================== circuit documents


@fresh
def circuit_document(folder: Folder, which: str = "interpbench") -> Json:
    universe, model, scores, _ = _circuit_setup(which)
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    return write_circuit_document(folder, data, name="document.json", model=model)


@case(
    "circuit",
    "DK-2 A-8",
    "InterpBench-sized universe (6 layers, 4 heads, 1,108 edges): scores and the 20 "
    "circuits of both rankings on the grid, in one safetensors sidecar.",
)
def interpbench_scores_and_circuits(folder: Folder) -> None:
    circuit_document(folder)


@case(
    "circuit",
    "K-6",
    "Scores rounded to one decimal, so the signed top-110 (k = 0.1) cut falls inside a run of equal "
    "scores: a warning, the document stays valid.",
    warnings=(("K107", "/circuits/6"),),
)
def tie_straddles_cut(folder: Folder) -> None:
    universe, model, scores, _ = _circuit_setup("interpbench")
    rounded = np.round(scores.astype(np.float64), 1).astype(np.float32)
    data = CircuitData(universe, rounded, ("signed",), GRID)
    write_circuit_document(folder, data, name="document.json", model=model)


@case("circuit", "DK-2 A-8", "A ground-truth circuit: one membership row, no scores, no grid point.")
def interpbench_ground_truth(folder: Folder) -> None:
    write_ground_truth(
        folder,
        INTERPBENCH_UNIVERSE,
        planted_truth(INTERPBENCH_UNIVERSE, INTERPBENCH_PATH),
        name="document.json",
        sidecar="truth.safetensors",
    )


@case("circuit", "DK-2 A-8", "Edge scores only (float16), without circuits.")
def scores_only_float16(folder: Folder) -> None:
    universe, model, scores, _ = _circuit_setup("tiny")
    folder.safetensors("scores.safetensors", {"edge_scores": scores.astype(np.float16)})
    save(
        folder,
        {
            "spec_version": "1.0",
            "kind": "circuit",
            "model": model,
            "graph": {"n_layers": 4, "n_heads": 4, "n_edges": universe.n_edges},
            "scores": {
                "artifact": "scores",
                "tensor": "edge_scores",
                "shape": [universe.n_edges],
                "dtype": "float16",
            },
            "artifacts": [
                folder.artifact("scores", "scores", "scores.safetensors", "application/x-safetensors")
            ],
        },
    )


@case(
    "circuit",
    "DK-2 A-8",
    "Neuron granularity: circuits with per-node neuron masks (weighted size counts "
    "the kept fraction of each edge's source neurons).",
)
def tiny_neuron_granularity(folder: Folder) -> None:
    universe, model, scores, _ = _circuit_setup("tiny")
    rng = np.random.default_rng(17)
    order = ranked(scores, "absolute")
    rows, masks, entries = [], [], []
    for index, k in enumerate((0.1, 0.2)):
        count = edges_at(k, universe.n_edges)
        row = np.zeros(universe.n_edges, dtype=bool)
        row[order[:count]] = True
        neurons = rng.random((universe.n_forward, 32)) < 0.5 + 0.25 * index
        neurons[0] = True  # the embedding is kept whole
        kept = universe.pruned(row)
        fraction = neurons.mean(axis=1)
        entries.append(
            {
                "index": index,
                "k": k,
                "ranking": "absolute",
                "n_edges": count,
                "weighted_size": float(fraction[universe.edges[0][kept]].sum()),
            }
        )
        rows.append(row)
        masks.append(neurons)
    folder.safetensors("circuits.safetensors", {"membership": np.stack(rows), "neurons": np.stack(masks)})
    save(
        folder,
        {
            "spec_version": "1.0",
            "kind": "circuit",
            "description": "Edges chosen by |score|, then neurons of each source node chosen by a learned "
            "mask.",
            "model": model,
            "graph": {
                "convention": "eap-ig",
                "n_layers": 4,
                "n_heads": 4,
                "d_model": 32,
                "n_edges": universe.n_edges,
            },
            "granularity": "neuron",
            "membership": {
                "artifact": "circuits",
                "tensor": "membership",
                "shape": [2, universe.n_edges],
                "dtype": "bool",
            },
            "neuron_masks": {
                "artifact": "circuits",
                "tensor": "neurons",
                "shape": [2, universe.n_forward, 32],
                "dtype": "bool",
            },
            "circuits": entries,
            "artifacts": [
                folder.artifact("circuits", "circuit", "circuits.safetensors", "application/x-safetensors")
            ],
            "provenance": PROVENANCE,
        },
    )


@case("circuit", "S-3 DK-2", "The graph universe is missing.", ("S111", ""))
def missing_graph(folder: Folder) -> None:
    doc = circuit_document(folder)
    del doc["graph"]
    save(folder, doc)


@case("circuit", "S-3 DK-2", 'granularity "head" is not defined.', ("S113", "/granularity"))
def unknown_granularity(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["granularity"] = "head"
    save(folder, doc)


@case("circuit", "S-3 DK-2", "A circuit entry built for k = 0.", ("S114", "/circuits/0/k"))
def circuit_entry_k_zero(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["circuits"][0]["k"] = 0.0
    save(folder, doc)


@case("circuit", "S-3 DK-2", "A graph universe with zero edges.", ("S114", "/graph/n_edges"))
def zero_edge_universe(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["graph"]["n_edges"] = 0
    save(folder, doc)


@case(
    "circuit",
    "K-3",
    "graph.n_edges says 1,109 for a 6-layer, 4-head sequential model, which has 1,108 edges.",
    ("K104", "/graph/n_edges"),
)
def edge_total_not_the_configurations(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["graph"]["n_edges"] = INTERPBENCH_UNIVERSE.n_edges + 1
    save(folder, doc)


@case(
    "circuit",
    "K-4",
    "The first circuit entry claims one edge more than its membership row marks.",
    ("K105", "/circuits/0/n_edges"),
)
def entry_edge_count_not_its_row(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["circuits"][0]["n_edges"] += 1
    save(folder, doc)


@case(
    "circuit",
    "K-4",
    "A circuit's weighted size is its edge count before pruning, not after.",
    ("K105", "/circuits/7/weighted_size"),
)
def entry_weighted_size_unpruned(folder: Folder) -> None:
    doc = circuit_document(folder)
    entry = doc["circuits"][7]
    assert entry["weighted_size"] != entry["n_edges"], "the case needs a circuit that pruning shrinks"
    entry["weighted_size"] = float(entry["n_edges"])
    save(folder, doc)


@case(
    "circuit",
    "K-5",
    "The grid points of two signed circuits are swapped, so the larger circuit sits at the smaller k: "
    "a warning, the document stays valid.",
    warnings=(("K106", "/circuits/1"),),
)
def circuits_not_nested(folder: Folder) -> None:
    doc = circuit_document(folder)
    first, second = doc["circuits"][1], doc["circuits"][2]
    first["k"], second["k"] = second["k"], first["k"]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The membership matrix is declared with one row too many.",
    ("A110", "/membership/shape"),
)
def membership_shape_mismatch(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["membership"]["shape"] = [21, INTERPBENCH_UNIVERSE.n_edges]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The membership tensor is declared with shape [0, 10^20]: no element, but a dimension over the "
    "tensor limit of 2^36 elements, so it is refused before its sidecar is read.",
    ("A112", "/membership/shape"),
)
def membership_dimension_over_limit(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["membership"]["shape"] = [0, 10**20]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The scores tensor is declared with 65 dimensions, over the tensor limit of 32, so it is "
    "refused before its sidecar is read.",
    ("A112", "/scores/shape"),
)
def scores_too_many_dimensions(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["shape"] = [INTERPBENCH_UNIVERSE.n_edges] + [1] * 64
    save(folder, doc)


@case(
    "circuit",
    "K-3",
    "A universe of 1,000 layers of 1,000 heads (3·10^12 source-slot cells; the edge total is right): "
    "too large to hold, so the membership rows cannot be checked, and the one-row membership of 8 "
    "edges does not span the universe.",
    ("K108", "/graph"),
    ("K105", "/membership/shape"),
)
def universe_too_large(folder: Folder) -> None:
    layers = heads = 1000
    n_edges = (3 * heads + 1) * (layers + (heads + 1) * layers * (layers - 1) // 2)
    n_edges += layers * heads + 1 + layers * (heads + 1)  # MG-7, sequential attention and MLP
    truth = np.array([True, True, False, True, False, False, True, False])
    folder.safetensors("truth.safetensors", {"membership": truth[None, :]})
    doc: Json = {
        "spec_version": "1.0",
        "kind": "circuit",
        "graph": {"convention": "eap-ig", "n_layers": layers, "n_heads": heads, "n_edges": n_edges},
        "granularity": "edge",
        "membership": {"artifact": "truth", "tensor": "membership", "shape": [1, 8], "dtype": "bool"},
        "circuits": [{"index": 0, "n_edges": 4}],
        "artifacts": [
            folder.artifact("truth", "ground_truth", "truth.safetensors", "application/x-safetensors")
        ],
        "provenance": PROVENANCE,
    }
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "Two edge scores are NaN and one is infinite (size and hash match the file).",
    ("A110", "/scores"),
)
def scores_not_finite(folder: Folder) -> None:
    universe, model, scores, _ = _circuit_setup("interpbench")
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    doc = write_circuit_document(folder, data, name="document.json", model=model)
    broken = scores.copy()
    broken[[3, 500]] = np.nan
    broken[700] = -np.inf
    folder.safetensors("circuit.safetensors", {"scores": broken, "membership": data.membership})
    save(folder, rehash(folder, doc))


@case("circuit", "A-8", "Scores are declared float32 but stored as float16.", ("A110", "/scores/dtype"))
def scores_dtype_mismatch(folder: Folder) -> None:
    doc = circuit_document(folder)
    tensors = {
        "scores": _circuit_setup("interpbench")[2].astype(np.float16),
        "membership": np.zeros((20, INTERPBENCH_UNIVERSE.n_edges), dtype=bool),
    }
    folder.safetensors("circuit.safetensors", tensors)
    doc["circuits"] = []
    doc["membership"]["shape"] = [20, INTERPBENCH_UNIVERSE.n_edges]
    save(folder, rehash(folder, doc))


@case(
    "circuit",
    "A-8",
    "The scores tensor is declared under a name the sidecar does not hold.",
    ("A110", "/scores/tensor"),
)
def missing_tensor_name(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["tensor"] = "edge_scores"
    save(folder, doc)


@case("circuit", "A-8", "A safetensors reference without a tensor name.", ("A110", "/scores"))
def tensor_reference_without_name(folder: Folder) -> None:
    doc = circuit_document(folder)
    del doc["scores"]["tensor"]
    save(folder, doc)


@case(
    "circuit",
    "A-4",
    "The safetensors sidecar is truncated (its header promises more data than the file "
    "holds); size and hash are those of the truncated file.",
    ("A105", "/artifacts/0/media_type"),
)
def truncated_safetensors(folder: Folder) -> None:
    doc = circuit_document(folder)
    path = folder.root / "circuit.safetensors"
    path.write_bytes(path.read_bytes()[:-3000])
    save(folder, rehash(folder, doc))


@case(
    "circuit", "A-4", "A file named .safetensors that holds JSON text.", ("A105", "/artifacts/0/media_type")
)
def safetensors_holding_json(folder: Folder) -> None:
    doc = circuit_document(folder)
    folder.write("circuit.safetensors", b'{"scores": [0.1, 0.2, 0.3]}\n')
    save(folder, rehash(folder, doc))


@case(
    "circuit",
    "A-7",
    "The scores reference names an artifact id the document does not declare.",
    ("A109", "/scores/artifact"),
)
def undeclared_tensor_artifact(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["artifact"] = "scores"
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "A tensor reference names a JSON Lines artifact, which holds no tensors.",
    ("A110", "/scores/artifact"),
)
def tensor_reference_to_jsonl(folder: Folder) -> None:
    doc = circuit_document(folder)
    folder.jsonl("scores.jsonl", [{"edge": "input->a0.h0<q>", "score": 0.01}])
    doc["artifacts"].append(
        folder.artifact("edge-list", "scores", "scores.jsonl", "application/jsonl", rows=1)
    )
    doc["scores"]["artifact"] = "edge-list"
    save(folder, doc)


# =========================================================================== featurizers


@case(
    "featurizer",
    "DK-3 A-8",
    "DAS: a one-dimensional subspace of GPT-2 small's residual stream after layer 3 at the last token.",
)
def das_layer3_last_token(folder: Folder) -> None:
    das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")


@case("featurizer", "DK-3 A-8", "A ReLU SAE read at the last sub-token of the second mention of the subject.")
def sae_subject_slot(folder: Folder) -> None:
    sae_featurizer(folder, name="document.json")


@case(
    "featurizer",
    "DK-3 A-8",
    "PCA with its standardisation declared (uncentred application), weights in three .npy files.",
)
def pca_uncentred(folder: Folder) -> None:
    pca_featurizer(folder, name="document.json")


@case("featurizer", "DK-3", "The full-vector baseline: an identity featurizer needs no weights.")
def identity_full_vector(folder: Folder) -> None:
    identity_featurizer(folder, layer=12, name="document.json")


@case("featurizer", "S-2", "The document does not say which kind it is.", ("S103", ""))
def missing_kind(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    del doc["kind"]
    save(folder, doc)


@case("featurizer", "S-2", 'kind "feature_map" is not a document kind.', ("S103", "/kind"))
def unknown_kind(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["kind"] = "feature_map"
    save(folder, doc)


@case(
    "featurizer",
    "S-3 DK-3",
    "A property the location object does not define.",
    ("S112", "/location/hook_name"),
)
def location_additional_property(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["location"]["hook_name"] = "blocks.3.hook_resid_post"
    save(folder, doc)


@case("featurizer", "S-3 DK-3", "A featurizer whose input dimension is 0.", ("S114", "/input_dim"))
def zero_input_dim(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["input_dim"] = 0
    save(folder, doc)


@case(
    "featurizer",
    "S-3 DK-3",
    'Token position rule "second_last" is not defined.',
    ("S113", "/location/position/rule"),
)
def unknown_position_rule(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["location"]["position"] = {"rule": "second_last"}
    save(folder, doc)


@case(
    "featurizer",
    "A-8",
    "The rotation is declared 768x1 but stored 1x768; 768x1 is not a subspace's shape either.",
    ("A110", "/weights/rotation/shape"),
    ("V102", "/weights/rotation/shape"),
)
def rotation_shape_mismatch(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["weights"]["rotation"]["shape"] = [768, 1]
    save(folder, doc)


@case(
    "featurizer",
    "A-8",
    "The rotation is declared float64 but stored float32.",
    ("A110", "/weights/rotation/dtype"),
)
def rotation_dtype_mismatch(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["weights"]["rotation"]["dtype"] = "float64"
    save(folder, doc)


@case(
    "featurizer",
    "A-4",
    "The PCA components file is an object array (a pickle); it is refused, never loaded.",
    ("A105", "/artifacts/2/media_type"),
)
def pickled_npy_weights(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    folder.write("pca_components.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case("featurizer", "A-2", "The weights sidecar is absent.", ("A102", "/artifacts/0/path"))
def missing_weights_file(folder: Folder) -> None:
    das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    (folder.root / "rotation.safetensors").unlink()


@case(
    "featurizer", "A-2", "The weights path names a folder, not a regular file.", ("A102", "/artifacts/0/path")
)
def weights_path_is_folder(folder: Folder) -> None:
    das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    (folder.root / "rotation.safetensors").unlink()
    (folder.root / "rotation.safetensors").mkdir()
    (folder.root / "rotation.safetensors" / "README").write_bytes(b"weights go here\n")


@case(
    "featurizer",
    "A-4",
    "A safetensors file declared with the .bin extension.",
    ("A105", "/artifacts/0/media_type"),
)
def weights_wrong_extension(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.bin")
    save(folder, doc)


@case("featurizer", "DK-3 CV-1", "A full rotation of a 16-dimensional input with four selected features.")
def full_rotation_selected_features(folder: Folder) -> None:
    doc = das_featurizer(
        folder, name="document.json", sidecar="rotation.safetensors", input_dim=16, n_features=1
    )
    folder.safetensors("rotation.safetensors", {"rotation": orthonormal_rows(16, 16, 11)})
    doc |= {"type": "rotation", "n_features": 16, "feature_indices": [0, 3, 7, 15]}
    doc["weights"]["rotation"]["shape"] = [16, 16]
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "DK-3 CV-1 CV-2",
    "A top-k SAE on two attention heads' outputs (2 x 8 values) at the correct choice's label.",
)
def topk_sae_on_attention_heads(folder: Folder) -> None:
    doc = sae_featurizer(folder, name="document.json")
    rng = np.random.default_rng(13)
    d, n = 16, 32
    tensors = {
        "W_enc": (rng.normal(size=(d, n)) / 4).astype(np.float32),
        "b_enc": np.zeros(n, dtype=np.float32),
        "W_dec": (rng.normal(size=(n, d)) / 4).astype(np.float32),
        "b_dec": np.zeros(d, dtype=np.float32),
    }
    folder.safetensors("sae.safetensors", tensors)
    doc["weights"] = {
        key: {"artifact": "sae", "tensor": key, "shape": list(value.shape), "dtype": "float32"}
        for key, value in tensors.items()
    }
    doc |= {"input_dim": d, "n_features": n, "sae_activation": "topk", "sae_k": 4, "feature_indices": [1, 2]}
    doc["location"] = {
        "layer": 3,
        "component": "attention_heads",
        "heads": [1, 3],
        "position": {"rule": "slot", "slot": "label_{answer_pointer}"},
    }
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "CV-1",
    "A DAS rotation whose rows are not orthonormal (scaled by 1.1).",
    ("V101", "/weights/rotation"),
)
def rotation_not_orthonormal(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors", n_features=2)
    folder.safetensors("rotation.safetensors", {"rotation": orthonormal_rows(2, 768, 0) * np.float32(1.1)})
    save(folder, rehash(folder, doc))


@case("featurizer", "CV-1", "PCA components with two equal rows.", ("V101", "/weights/components"))
def pca_components_repeat_a_row(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    components = orthonormal_rows(8, 32, 10)
    components[1] = components[0]
    folder.npy("pca_components.npy", components)
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "CV-1",
    "A jumprelu SAE without its threshold, and an identity featurizer field set on it.",
    ("V102", "/weights"),
    ("V102", "/pca_centring"),
)
def jumprelu_without_threshold(folder: Folder) -> None:
    doc = sae_featurizer(folder, name="document.json")
    doc["sae_activation"] = "jumprelu"
    doc["pca_centring"] = "centred"
    save(folder, doc)


@case(
    "featurizer",
    "CV-1",
    "A centred PCA without its mean and scale.",
    ("V102", "/weights"),
    ("V102", "/weights"),
)
def centred_pca_without_mean(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    doc["pca_centring"] = "centred"
    del doc["weights"]["mean"], doc["weights"]["scale"]
    save(folder, doc)


@case(
    "featurizer", "CV-1", "An identity featurizer with fewer features than inputs.", ("V102", "/n_features")
)
def identity_fewer_features(folder: Folder) -> None:
    doc = identity_featurizer(folder, layer=12, name="document.json")
    doc["n_features"] = 100
    save(folder, doc)


@case(
    "featurizer",
    "CV-1",
    "Feature index 1 of a one-feature subspace, and index 0 listed twice.",
    ("V103", "/feature_indices/1"),
    ("V103", "/feature_indices"),
)
def feature_index_out_of_range(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["feature_indices"] = [0, 1, 0]
    save(folder, doc)


@case(
    "featurizer",
    "CV-2",
    "A slot position without its slot name, carrying an index of the index rule.",
    ("V104", "/location/position"),
    ("V104", "/location/position/index"),
)
def slot_position_without_slot(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["location"]["position"] = {"rule": "slot", "index": 3}
    save(folder, doc)


@case(
    "featurizer",
    "CV-2",
    "An attention-heads location without heads.",
    ("V104", "/location/heads"),
)
def attention_heads_without_heads(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["location"]["component"] = "attention_heads"
    save(folder, doc)


@case(
    "featurizer",
    "CV-2 MV-8",
    "A named position without its name, carrying the token text of an occurrence rule.",
    ("V104", "/location/position"),
    ("V104", "/location/position/token"),
)
def named_position_without_name(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")
    doc["location"]["position"] = {"rule": "named", "token": " A"}
    save(folder, doc)


# =========================================================================== counterfactual datasets


@case(
    "counterfactual_dataset",
    "DK-4 A-5",
    "IOI: five base prompts, each with its eight counterfactual prompts and the expected outputs under "
    "interchange interventions.",
)
def ioi_five_rows(folder: Folder) -> None:
    write_dataset(folder, task="ioi", n_rows=DATASET_ROWS, name="document.json")


@case(
    "counterfactual_dataset", "DK-4 A-5 A-6", "MCQA colour questions with their answer-pointer causal model."
)
def mcqa_with_causal_model(folder: Folder) -> None:
    write_dataset(folder, task="mcqa", name="document.json", causal_model="causal_model.json")


@case("counterfactual_dataset", "DK-4 A-5 A-6", "Two-digit addition with the carry causal model.")
def arithmetic_with_causal_model(folder: Folder) -> None:
    write_dataset(folder, task="arithmetic", name="document.json", causal_model="causal_model.json")


@case(
    "counterfactual_dataset",
    "A-5",
    "The JSON Lines file has 5 rows, 6 are declared.",
    ("A106", "/artifacts/0/rows"),
)
def jsonl_row_count_mismatch(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    doc["artifacts"][0]["rows"] = 6
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-5",
    "Line 3 of the JSON Lines file is an array, not an object.",
    ("A106", "/artifacts/0"),
)
def jsonl_non_object_line(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    rows = list(generated("ioi", DATASET_ROWS).rows)
    rows[2] = [rows[2]["base"]["prompt"], rows[2]["base"]["answer"]]
    folder.jsonl("dataset.jsonl", rows)
    save(folder, rehash(folder, doc))


@case("counterfactual_dataset", "A-5", "Line 2 of the JSON Lines file is not JSON.", ("A106", "/artifacts/0"))
def jsonl_invalid_line(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    lines = (folder.root / "dataset.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1][:-40]
    folder.write("dataset.jsonl", b"\n".join(lines))
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset", "A-5", "A JSON Lines artifact without its row count.", ("A106", "/artifacts/0")
)
def jsonl_without_rows(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    del doc["artifacts"][0]["rows"]
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-4",
    "JSON Lines rows stored in a file named .json.",
    ("A105", "/artifacts/0/media_type"),
)
def jsonl_wrong_extension(folder: Folder) -> None:
    write_dataset(folder, n_rows=DATASET_ROWS, name="document.json", rows_file="dataset_rows.json")


@case("counterfactual_dataset", "S-3 DK-4", 'split "dev" is not defined.', ("S113", "/split"))
def unknown_split(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    doc["split"] = "dev"
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "S-3 DK-4",
    "A dataset without any counterfactual type.",
    ("S116", "/counterfactual_types"),
)
def no_counterfactual_types(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    doc["counterfactual_types"] = []
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-6",
    "causal_model.json is declared a causal model but holds a featurizer.",
    ("A107", "/artifacts/1/kind"),
)
def causal_model_artifact_holds_featurizer(folder: Folder) -> None:
    doc = write_dataset(folder, task="arithmetic", name="document.json", causal_model="causal_model.json")
    das_featurizer(folder, name="causal_model.json")
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "A-7",
    'causal_model names an artifact declared without "kind".',
    ("A107", "/causal_model"),
)
def causal_model_reference_without_kind(folder: Folder) -> None:
    doc = write_dataset(folder, task="arithmetic", name="document.json", causal_model="causal_model.json")
    del doc["artifacts"][1]["kind"]
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-1",
    "The rows file is a symbolic link to a file of a sibling case: the link "
    "resolves outside the document's folder.",
    ("A101", "/artifacts/0/path"),
)
def symlink_escape_to_sibling(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    (folder.root / "dataset.jsonl").unlink()
    folder.symlink("dataset.jsonl", "../../valid/ioi-five-rows/dataset.jsonl")
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-3",
    "The rows file's SHA-256 differs from the declared one (one row edited after hashing, same size).",
    ("A103", "/artifacts/0/sha256"),
)
def sha256_mismatch(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    path = folder.root / "dataset.jsonl"
    data = bytearray(path.read_bytes())
    at = data.index(b'"prompt":"') + len(b'"prompt":"')
    data[at : at + 1] = data[at : at + 1].swapcase()
    path.write_bytes(bytes(data))
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "A-3",
    "The declared byte size is one byte short.",
    ("A104", "/artifacts/0/bytes"),
)
def byte_size_mismatch(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    doc["artifacts"][0]["bytes"] -= 1
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "S-3 A-3",
    "A SHA-256 written in upper case (the pattern is lower-case hex).",
    ("S115", "/artifacts/0/sha256"),
)
def sha256_upper_case(folder: Folder) -> None:
    doc = write_dataset(folder, n_rows=DATASET_ROWS, name="document.json")
    doc["artifacts"][0]["sha256"] = doc["artifacts"][0]["sha256"].upper()
    save(folder, doc)


@case(
    "counterfactual_dataset",
    "CV-5 DS-6",
    "An interchange output written by hand: row 2's expected output under io_s2_flip is the base answer.",
    ("V107", "/examples"),
)
def intervention_not_from_causal_model(folder: Folder) -> None:
    doc = write_dataset(folder, task="ioi", name="document.json", causal_model="causal_model.json")
    rows = [dict(row) for row in generated("ioi", REPORT_ROWS["ioi"]).rows]
    rows[1] = json.loads(json.dumps(rows[1]))
    rows[1]["interventions"]["io_s2_flip"]["output_position"] = rows[1]["base"]["answer"]
    folder.jsonl("dataset.jsonl", rows)
    save(folder, rehash(folder, doc))


@case(
    "counterfactual_dataset",
    "CV-5",
    "The dataset declares a variable its causal model cannot intervene on.",
    ("V107", "/variables/1"),
)
def variable_outside_mechanism(folder: Folder) -> None:
    doc = write_dataset(folder, task="arithmetic", name="document.json", causal_model="causal_model.json")
    doc["variables"] = ["ones_carry", "tens_carry"]
    save(folder, doc)


# =========================================================================== causal models


@case("causal_model", "DK-5", "Two-digit addition: operand digits, the ones carry and the output digits.")
def arithmetic_two_digit_carry(folder: Folder) -> None:
    save(folder, arithmetic_causal_model())


@case("causal_model", "DK-5", "IOI: the paper's linear fit of the logit difference.")
def ioi_linear_fit(folder: Folder) -> None:
    save(folder, ioi_causal_model())


@case("causal_model", "DK-5", "MCQA: the answer pointer selects the answer symbol.")
def mcqa_answer_pointer(folder: Folder) -> None:
    save(folder, mcqa_causal_model())


@case("causal_model", "S-1", "The document does not declare its spec version.", ("S101", ""))
def missing_spec_version(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    del doc["spec_version"]
    save(folder, doc)


@case("causal_model", "S-1", "spec_version given as a number.", ("S102", "/spec_version"))
def spec_version_as_number(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["spec_version"] = 1.0
    save(folder, doc)


@case(
    "causal_model",
    "S-3 DK-5",
    'mechanism "python_callable" is not a built-in mechanism.',
    ("S113", "/mechanism"),
)
def unknown_mechanism(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["mechanism"] = "python_callable"
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "A causal model without variables.", ("S116", "/variables"))
def no_variables(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["variables"] = []
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "A variable without a name.", ("S111", "/variables/2"))
def variable_without_name(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    del doc["variables"][2]["name"]
    save(folder, doc)


@case("causal_model", "S-3 DK-5", "outputs given as a string instead of a list.", ("S110", "/outputs"))
def outputs_not_a_list(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["outputs"] = "result"
    save(folder, doc)


@case(
    "causal_model", "S-3", "provenance.created is not an RFC 3339 date-time.", ("S115", "/provenance/created")
)
def created_not_rfc3339(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["provenance"] = {**PROVENANCE, "created": "02/06/2025 09:30"}
    save(folder, doc)


@case(
    "causal_model",
    "CV-4",
    "An ioi_linear model without its position coefficient.",
    ("V106", "/parameters"),
)
def ioi_linear_without_position_coeff(folder: Folder) -> None:
    doc = ioi_causal_model()
    del doc["parameters"]["position_coeff"]
    save(folder, doc)


@case(
    "causal_model",
    "CV-4",
    "A two_digit_carry model for subtraction, without its carry variable.",
    ("V106", "/variables"),
    ("V106", "/parameters/operator"),
)
def carry_model_for_subtraction(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    doc["parameters"]["operator"] = "-"
    doc["variables"] = [v for v in doc["variables"] if v["name"] != "ones_carry"]
    save(folder, doc)


# =========================================================================== shortcut datasets


@fresh
def shortcut(folder: Folder) -> Json:
    return write_shortcut_dataset(folder, name="document.json")


@case(
    "shortcut_dataset",
    "DK-6 A-8",
    "Eight 3x8x8 float images in two classes, with their kernels and labels in .npy files.",
)
def colour_two_classes(folder: Folder) -> None:
    shortcut(folder)


@case("shortcut_dataset", "DK-6 A-8", "The same images as uint8 grayscale.")
def grayscale_uint8(folder: Folder) -> None:
    write_shortcut_dataset(folder, name="document.json", grayscale=True)


@case(
    "shortcut_dataset",
    "A-4",
    "labels.npy is an object array (a pickle); it is refused, never loaded.",
    ("A105", "/artifacts/2/media_type"),
)
def pickled_object_labels(folder: Folder) -> None:
    doc = shortcut(folder)
    folder.write("labels.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case("shortcut_dataset", "A-4", "clean.npy is cut inside its header.", ("A105", "/artifacts/0/media_type"))
def truncated_npy_header(folder: Folder) -> None:
    doc = shortcut(folder)
    path = folder.root / "clean.npy"
    path.write_bytes(path.read_bytes()[:40])
    save(folder, rehash(folder, doc))


@case(
    "shortcut_dataset",
    "A-4",
    "perturbed.npy is missing the last image's bytes.",
    ("A105", "/artifacts/1/media_type"),
)
def truncated_npy_data(folder: Folder) -> None:
    doc = shortcut(folder)
    path = folder.root / "perturbed.npy"
    path.write_bytes(path.read_bytes()[: -3 * 8 * 8 * 4])
    save(folder, rehash(folder, doc))


@case(
    "shortcut_dataset",
    "A-4",
    '"kind" is only for JSON artifacts that are documents, not for .npy files.',
    ("A105", "/artifacts/0/kind"),
)
def kind_on_npy_artifact(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][0]["kind"] = "shortcut_dataset"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "S-3 DK-6",
    "image_shape lists two dimensions instead of [C, H, W].",
    ("S116", "/image_shape"),
)
def image_shape_two_dims(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["image_shape"] = [8, 8]
    save(folder, doc)


@case("shortcut_dataset", "S-3 DK-6", "n_classes given as a string.", ("S110", "/n_classes"))
def n_classes_string(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["n_classes"] = "2"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "S-3 A-4",
    'media_type "application/octet-stream" is not an allowed media type.',
    ("S113", "/artifacts/3/media_type"),
)
def unknown_media_type(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][3]["media_type"] = "application/octet-stream"
    save(folder, doc)


@case("shortcut_dataset", "S-3 A-3", "A negative byte size.", ("S114", "/artifacts/2/bytes"))
def negative_bytes(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][2]["bytes"] = -1
    save(folder, doc)


@case("shortcut_dataset", "A-8", "labels are declared int32 but stored int64.", ("A110", "/labels/dtype"))
def labels_dtype_mismatch(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["labels"]["dtype"] = "int32"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "A-8",
    "perturbed images are declared 32x32 but stored 8x8.",
    ("A110", "/perturbed_images/shape"),
)
def images_shape_mismatch(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["perturbed_images"]["shape"] = [N_IMAGES, 3, 32, 32]
    save(folder, doc)


@case(
    "shortcut_dataset",
    "A-1",
    "kernels.npy is a symbolic link to a system file outside the repository.",
    ("A101", "/artifacts/3/path"),
)
def symlink_escape_to_system_file(folder: Folder) -> None:
    doc = shortcut(folder)
    (folder.root / "kernels.npy").unlink()
    folder.symlink("kernels.npy", "../" * 12 + "etc/hostname")
    save(folder, doc)


@case("shortcut_dataset", "A-1", "Two artifacts declare the same path.", ("A108", "/artifacts/1/path"))
def duplicate_artifact_path(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][1]["path"] = "clean.npy"
    doc["artifacts"][1]["sha256"] = doc["artifacts"][0]["sha256"]
    save(folder, doc)


# =========================================================================== report: causal variable track


@case(
    "report",
    "DK-1 A-6 A-7 A-8",
    "GPT-2 small on IOI: four DAS featurizers (layers 3 and 4, last token and "
    "second subject mention) aligned to the output position; MSE, lower is better.",
)
def causal_variable_ioi_das(folder: Folder) -> None:
    save(folder, causal_variable_report(folder))


@case("report", "DK-1 A-6 A-7", "Qwen2.5-0.5B on MCQA: the full-vector baseline at three layers (IIA).")
def causal_variable_mcqa_full_vector(folder: Folder) -> None:
    save(folder, mcqa_report(folder))


@case(
    "report",
    "S-3 DK-1",
    'metric "accuracy" is not defined (IIA or MSE).',
    ("S113", "/claims/variables/0/metric"),
)
def causal_variable_unknown_metric(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["metric"] = "accuracy"
    save(folder, doc)


@case(
    "report",
    "C-7",
    "An MSE variable (lower is better) reports the worst layer as Highest.",
    ("C112", "/claims/variables/0/highest"),
)
def causal_variable_highest_takes_max_for_mse(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    variable = doc["claims"]["variables"][0]
    variable["highest"] = max(variable["per_layer"].values())
    save(folder, doc)


@case(
    "report",
    "C-7",
    "A per-layer score that is not the best unit of its layer.",
    ("C112", "/claims/variables/0/per_layer/3"),
)
def causal_variable_per_layer_inconsistent(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    doc["claims"]["variables"][0]["per_layer"]["3"] += 0.5
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "An interchange-intervention accuracy of 1.2 for one unit and counterfactual set.",
    ("S114", "/claims/variables/0/units/0/scores/symbol"),
)
def causal_variable_iia_above_one(folder: Folder) -> None:
    doc = mcqa_report(folder)
    unit = doc["claims"]["variables"][0]["units"][0]
    unit["scores"]["symbol"] = 1.2
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "An MSE variable declared higher-is-better.",
    ("S113", "/claims/variables/0/better"),
)
def causal_variable_mse_higher_is_better(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    doc["claims"]["variables"][0]["better"] = "higher"
    save(folder, doc)


@case("report", "S-3 DK-1", "A variable without any model unit.", ("S116", "/claims/variables/0/units"))
def causal_variable_no_units(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"] = []
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    'per_layer keyed by "layer_12" instead of the layer number.',
    ("S115", "/claims/variables/0/per_layer"),
)
def causal_variable_per_layer_key(folder: Folder) -> None:
    doc = mcqa_report(folder)
    per_layer = doc["claims"]["variables"][0]["per_layer"]
    doc["claims"]["variables"][0]["per_layer"] = {
        f"layer_{k}" if k == "12" else k: v for k, v in per_layer.items()
    }
    save(folder, doc)


@case("report", "S-3 DK-1", 'checker "fuzzy" is not defined.', ("S113", "/settings/checker"))
def causal_variable_unknown_checker(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["settings"]["checker"] = "fuzzy"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "A unit's featurizer names the dataset artifact, which is not a featurizer document.",
    ("A107", "/claims/variables/0/units/1/featurizer"),
)
def causal_variable_featurizer_not_a_featurizer(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"][1]["featurizer"] = "dataset"
    save(folder, doc)


@case(
    "report",
    "A-6 A-8",
    "A referenced DAS featurizer is itself invalid (its rotation's declared shape differs from the sidecar).",
    ("A110", "/weights/rotation/shape", "das_l4_s2.json"),
    ("V102", "/weights/rotation/shape", "das_l4_s2.json"),
    ("A107", "/artifacts/5"),
)
def causal_variable_referenced_featurizer_invalid(folder: Folder) -> None:
    doc = causal_variable_report(folder)
    featurizer = read_json(folder, "das_l4_s2.json")
    featurizer["weights"]["rotation"]["shape"] = [1, 1024]
    save(folder, featurizer, "das_l4_s2.json")
    save(folder, rehash(folder, doc))


@case("report", "A-1", 'Two artifacts share the id "full-vector-l16".', ("A108", "/artifacts/4/id"))
def causal_variable_duplicate_artifact_id(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["artifacts"][4]["id"] = "full-vector-l16"
    doc["claims"]["variables"][0]["units"][2]["featurizer"] = "full-vector-l16"
    save(folder, doc)


@case(
    "report",
    "CV-3",
    "A unit at layer 30 of a 24-layer model whose featurizer reads layer 20.",
    ("V105", "/claims/variables/0/units/2/location/layer"),
    ("V105", "/claims/variables/0/units/2/location"),
)
def causal_variable_unit_outside_model(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["claims"]["variables"][0]["units"][2]["location"]["layer"] = 30
    variable = doc["claims"]["variables"][0]
    variable["per_layer"] = {"12": 0.375, "16": 0.625, "30": 0.875}
    variable["average"], variable["highest"] = 0.625, 0.875
    save(folder, doc)


@case(
    "report",
    "CV-3",
    "The model is declared with d_model 1024; the featurizers read 896 values.",
    *(("V105", f"/claims/variables/0/units/{u}/featurizer") for u in range(3)),
)
def causal_variable_featurizer_width(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["model"] = {**doc["model"], "config": {**doc["model"]["config"], "d_model": 1024, "n_heads": 16}}
    save(folder, doc)


@case(
    "report",
    "CV-6 PR-2",
    "A default-profile report that checks answers as substrings (the mib-2025 rule).",
    ("V108", "/settings/checker"),
)
def causal_variable_checker_not_profile(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["settings"]["checker"] = "substring"
    save(folder, doc)


@case("report", "CV-6 PR-2", "A mib-2025 report with the substring checker.")
def causal_variable_mib_2025_substring(folder: Folder) -> None:
    doc = mcqa_report(folder)
    doc["profile"] = "mib-2025"
    doc["settings"]["checker"] = "substring"
    save(folder, doc)


@case(
    "report",
    "CV-6",
    "Scores on a counterfactual set the dataset does not have, a count for an unscored set, "
    "and an MSE claimed under the answer-pointer causal model.",
    ("V109", "/claims/variables/0/metric"),
    ("V109", "/claims/variables/0/units/0/scores/color_noun"),
    ("V109", "/claims/variables/0/units/0/n_examples/noun"),
    ("V109", "/claims/variables/0/units/1/scores/color_noun"),
    ("V109", "/claims/variables/0/units/2/scores/color_noun"),
)
def causal_variable_unknown_sets(folder: Folder) -> None:
    doc = mcqa_report(folder)
    variable = doc["claims"]["variables"][0]
    for unit in variable["units"]:
        unit["scores"]["color_noun"] = unit["scores"]["symbol"]
        unit["n_examples"]["color_noun"] = 4
    variable["units"][0]["n_examples"]["noun"] = 4
    variable["metric"], variable["better"] = "mse", "lower"
    per_layer, average, best = aggregate(variable["units"], "lower")
    variable |= {"per_layer": per_layer, "average": average, "highest": best}
    save(folder, doc)


@case(
    "report",
    "CV-7 MV-8",
    "As imported from a MIB result file: two units declare no featurizer, one of them at a position "
    "known only by name. Warnings: the claims are consistent, recomputation would fail with R104.",
    warnings=(
        ("V110", "/claims/variables/0/units/0"),
        ("V110", "/claims/variables/0/units/1/location/position"),
    ),
)
def causal_variable_not_recomputable(folder: Folder) -> None:
    doc = mcqa_report(folder)
    units = doc["claims"]["variables"][0]["units"]
    del units[0]["featurizer"], units[1]["featurizer"]
    units[1]["location"]["position"] = {"rule": "named", "name": "correct_symbol"}
    save(folder, doc)


# =========================================================================== report: CAUSAL-BENCH track


@case(
    "report",
    "DK-1",
    "The planted 4-layer, 4-head model with the paper's Table 1 sets: four methods, ten seed "
    "runs each, composite scores, P/R/F1, convergence test, consensus and majority sets.",
)
def causal_bench_table1_planted(folder: Folder) -> None:
    save(folder, causal_bench_report())


CB_SMALL_UNIVERSE = [
    f"L{layer}.{part}" for layer in range(2) for part in ("attn_head[0]", "attn_head[1]", "mlp")
]


@case(
    "report",
    "DK-1",
    "Two methods on a 2-layer transformer without ground truth (no P/R/F1); weights favour faithfulness.",
)
def causal_bench_two_methods_no_truth(folder: Folder) -> None:
    sets = {
        "activation_patching": ["L0.attn_head[0]", "L1.attn_head[1]", "L1.mlp"],
        "circuit_discovery": ["L0.attn_head[0]", "L1.mlp"],
    }
    given = {
        "activation_patching": BehaviourValues(0.991, 0.954, ["L0.attn_head[0]", "L1.mlp"]),
        "circuit_discovery": BehaviourValues(0.962, 0.871, ["L0.attn_head[0]", "L1.mlp"]),
    }
    settings = {"weights": {"F": 2.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0}, "n_permutations": 1000}
    claims = causal_bench_claims(
        sets,
        CB_SMALL_UNIVERSE,
        planted=None,
        given=given,
        truth=None,
        stability_targets={"activation_patching": 0.8, "circuit_discovery": 0.9},
        settings={**settings, "cos_threshold": 0.85},
        seed=11,
    )
    save(
        folder,
        {
            "spec_version": "1.0",
            "kind": "report",
            "track": "causal_bench",
            "title": "Activation patching and circuit discovery on a 2L/2H transformer",
            "method": {"name": "CAUSAL-BENCH method comparison"},
            "task": {"name": "induction"},
            "behaviour": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "seed": 3, "ablation": "mean"},
            "universe": CB_SMALL_UNIVERSE,
            "settings": settings,
            "claims": claims,
            "seeds": [{"purpose": "permutation test", "value": 11}],
            "provenance": PROVENANCE,
        },
    )


@case(
    "report",
    "DK-1",
    "A degenerate convergence null (one method identifies every component, so every draw has the same "
    "mean Jaccard): z is undefined and omitted.",
)
def causal_bench_degenerate_null_without_z(folder: Folder) -> None:
    sets = {"ablation_scanning": list(CB_SMALL_UNIVERSE), "circuit_discovery": ["L0.attn_head[0]", "L1.mlp"]}
    given = {
        "ablation_scanning": BehaviourValues(1.0, 1.0, ["L0.attn_head[0]", "L1.mlp"]),
        "circuit_discovery": BehaviourValues(0.947, 0.902, ["L0.attn_head[0]", "L1.mlp"]),
    }
    settings = {"weights": dict(CB_WEIGHTS), "cos_threshold": 0.85, "n_permutations": 1000}
    claims = causal_bench_claims(
        sets,
        CB_SMALL_UNIVERSE,
        planted=None,
        given=given,
        truth=None,
        stability_targets={"ablation_scanning": 1.0, "circuit_discovery": 1.0},
        settings=settings,
        seed=5,
    )
    assert "z" not in claims["convergence"]
    save(
        folder,
        {
            "spec_version": "1.0",
            "kind": "report",
            "track": "causal_bench",
            "title": "Ablation scanning against circuit discovery on a 2L/2H transformer",
            "method": {"name": "CAUSAL-BENCH method comparison"},
            "task": {"name": "induction"},
            "behaviour": {"kind": "transformer", "n_layers": 2, "n_heads": 2, "seed": 3, "ablation": "zero"},
            "universe": CB_SMALL_UNIVERSE,
            "settings": settings,
            "claims": claims,
            "seeds": [{"purpose": "permutation test", "value": 5}],
            "provenance": PROVENANCE,
        },
    )


@case(
    "report",
    "D-1",
    "Stability of circuit discovery estimated from 5 seed runs; the default profile requires 10.",
    ("D101", "/claims/methods/3/runs"),
)
def causal_bench_too_few_runs(folder: Folder) -> None:
    doc = causal_bench_report()
    method = doc["claims"]["methods"][3]
    method["runs"] = method["runs"][:5]
    save(folder, doc)


@case(
    "report",
    "D-2",
    "Two stability runs of activation patching share seed 0 (the second run is otherwise unchanged).",
    ("D102", "/claims/methods/0/runs/1/seed"),
)
def causal_bench_duplicate_run_seed(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][0]["runs"][1]["seed"] = doc["claims"]["methods"][0]["runs"][0]["seed"]
    save(folder, doc)


@case(
    "report",
    "D-3 C-4",
    "The convergence test drew 500 permutations; the default profile requires 1000.",
    ("D103", "/settings/n_permutations"),
    ("D103", "/claims/convergence/n_permutations"),
)
def causal_bench_too_few_permutations(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["n_permutations"] = 500
    doc["claims"]["convergence"]["n_permutations"] = 500
    doc["claims"]["convergence"]["p"] = 1 / 501
    save(folder, doc)


@case(
    "report",
    "B-1",
    "p = 0.001 with B = 1000 under the plus_one convention, which can only give multiples of 1/1001.",
    ("B101", "/claims/convergence/p"),
)
def causal_bench_p_not_a_count(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["p"] = 0.001
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Gradient attribution's composite is the arithmetic, not the harmonic, mean of its parts.",
    ("C104", "/claims/methods/1/metrics/composite"),
)
def causal_bench_composite_arithmetic_mean(folder: Folder) -> None:
    doc = causal_bench_report()
    metrics = doc["claims"]["methods"][1]["metrics"]
    metrics["composite"] = sum(metrics[key] for key in ("F", "C", "M", "S", "COS")) / 5
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Ablation scanning claims recall 0.8 although its set holds all five planted components.",
    ("C105", "/claims/methods/2/metrics/recall"),
)
def causal_bench_recall_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][2]["metrics"]["recall"] = 0.8
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Minimality of circuit discovery claimed as 0.75 for 4 of 20 components (it is 0.8); the composite, "
    "computed with 0.8, then no longer matches the claimed parts either.",
    ("C106", "/claims/methods/3/metrics/M"),
    ("C104", "/claims/methods/3/metrics/composite"),
)
def causal_bench_minimality_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][3]["metrics"]["M"] = 0.75
    save(folder, doc)


@case(
    "report",
    "C-4",
    "z is claimed as 3.75 (the paper's value) while (J_obs − null mean)/null std gives another.",
    ("C107", "/claims/convergence/z"),
)
def causal_bench_z_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["z"] = 3.75
    save(folder, doc)


@case(
    "report",
    "C-3",
    "The majority set leaves out L3.mlp, which three of the four methods identify.",
    ("C108", "/claims/majority"),
)
def causal_bench_majority_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["majority"] = [c for c in doc["claims"]["majority"] if c != "L3.mlp"]
    save(folder, doc)


@case(
    "report",
    "C-5",
    "The ground truth names L4.mlp, a component of a 5-layer model, in a 4-layer universe.",
    ("C109", "/ground_truth/4"),
)
def causal_bench_unknown_component(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["ground_truth"] = [*doc["ground_truth"][:4], "L4.mlp"]
    save(folder, doc)


@case(
    "report",
    "C-5",
    "The universe lists L1.mlp twice (the second time in place of L2.attn_head[0]).",
    ("C114", "/universe/10"),
)
def causal_bench_duplicate_universe_component(folder: Folder) -> None:
    doc = causal_bench_report()
    assert doc["universe"][9:11] == ["L1.mlp", "L2.attn_head[0]"]
    doc["universe"][10] = "L1.mlp"
    save(folder, doc)


@case("report", "S-3 DK-1", "A permutation p-value of 1.5.", ("S114", "/claims/convergence/p"))
def causal_bench_p_above_one(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["p"] = 1.5
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "Stability from a single seed run (at least two are needed).",
    ("S116", "/claims/methods/0/runs"),
)
def causal_bench_single_run(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][0]["runs"] = doc["claims"]["methods"][0]["runs"][:1]
    save(folder, doc)


@case("report", "S-3 DK-1", 'A composite weight for an undefined metric "R".', ("S113", "/settings/weights"))
def causal_bench_unknown_weight(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["weights"]["R"] = 1.0
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A composite weight of 0 (weights must be positive).",
    ("S114", "/settings/weights/S"),
)
def causal_bench_zero_weight(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["weights"]["S"] = 0
    save(folder, doc)


@case("report", "S-3 DK-1", 'behaviour kind "simulated" is not defined.', ("S113", "/behaviour/kind"))
def causal_bench_unknown_behaviour(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["behaviour"]["kind"] = "simulated"
    save(folder, doc)


@case("report", "S-3 DK-1", "The component universe is missing.", ("S111", ""))
def causal_bench_missing_universe(folder: Folder) -> None:
    doc = causal_bench_report()
    del doc["universe"]
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A component id that is the empty string.",
    ("S116", "/claims/methods/3/components/0"),
)
def causal_bench_empty_component(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][3]["components"][0] = ""
    save(folder, doc)


@case("report", "S-3 DK-1", "A negative seed.", ("S114", "/behaviour/seed"))
def causal_bench_negative_seed(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["behaviour"]["seed"] = -42
    save(folder, doc)


@functools.cache
def _causal_bench_study_claims() -> str:
    """Claims of the reference producer on the planted 4L/4H model (a small scaling study)."""
    from mibspec.reference_impl.behaviour.localization import PAPER_PROCEDURES
    from mibspec.reference_impl.behaviour.study import PlantedSource, planted_model
    from mibspec.reference_impl.producers.causal_bench import study_claims

    source = PlantedSource(planted_model(CB_BEHAVIOUR, 4, 4))
    claims = study_claims(
        source,
        procedures=PAPER_PROCEDURES,
        run_seeds=list(range(1, 11)),
        settings=CB_SETTINGS,
        convergence_seed=7,
        truth=CB_TRUTH,
        thresholds=(0.0, 0.05, 0.1, 0.15),
        scaling=((2, 2), (4, 4)),
        behaviour=CB_BEHAVIOUR,
    )
    return json.dumps(claims)


def causal_bench_study_report() -> Json:
    """A planted report with procedures, threshold sensitivity, weight configurations and scaling."""
    doc = causal_bench_report()
    doc["title"] = "Four localization procedures re-runnable from their seeds, with the paper's studies"
    doc["settings"]["perturbation"] = {"kind": "method_noise"}
    doc["claims"] = json.loads(_causal_bench_study_claims())
    doc["seeds"] = [
        {"purpose": "behaviour model noise", "value": 42},
        {"purpose": "localization methods", "value": 0},
        {"purpose": "permutation test", "value": 7},
    ]
    return doc


@case(
    "report",
    "DK-1 C-3 C-8",
    "The four procedures of CAUSAL-BENCH §2.3 declared with their seeds on the planted 4L/4H model: "
    "threshold sensitivity of activation patching, five weight configurations with their rankings, and a "
    "scaling study over 2L/2H and 4L/4H.",
)
def causal_bench_procedures_and_studies(folder: Folder) -> None:
    save(folder, causal_bench_study_report())


@case(
    "report",
    "C-8",
    "A weight configuration ranks ablation scanning first although its composite is the lowest.",
    ("C113", "/claims/weight_robustness/2/ranking"),
)
def causal_bench_ranking_not_by_composite(folder: Folder) -> None:
    doc = causal_bench_study_report()
    ranking = doc["claims"]["weight_robustness"][2]["ranking"]
    ranking.insert(0, ranking.pop(ranking.index("ablation_scanning")))
    save(folder, doc)


@case(
    "report",
    "C-8",
    "A weight configuration leaves out a method whose composite is defined.",
    ("C113", "/claims/weight_robustness/0/composites"),
)
def causal_bench_configuration_missing_method(folder: Folder) -> None:
    doc = causal_bench_study_report()
    scenario = doc["claims"]["weight_robustness"][0]
    del scenario["composites"]["gradient_attribution"]
    scenario["ranking"].remove("gradient_attribution")
    save(folder, doc)


@case(
    "report",
    "C-8",
    "The threshold sensitivity varies circuit discovery, which thresholds no score, and a scaling entry "
    "names a method the report does not have.",
    ("C113", "/claims/threshold_sensitivity/method"),
    ("C113", "/claims/scaling/1/methods/3/name"),
)
def causal_bench_study_names_wrong_method(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["claims"]["threshold_sensitivity"]["method"] = "circuit_discovery"
    doc["claims"]["scaling"][1]["methods"][3]["name"] = "path_patching"
    save(folder, doc)


@case(
    "report",
    "C-8",
    "A scaling study on a transformer behaviour: only the planted model has sizes to vary.",
    ("C113", "/claims/scaling"),
)
def causal_bench_scaling_without_planted_model(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["behaviour"] = {"kind": "transformer", "n_layers": 4, "n_heads": 4, "seed": 0, "ablation": "mean"}
    save(folder, doc)


@case(
    "report",
    "C-3",
    "A weight configuration's composite of circuit discovery is its equal-weight composite, not the "
    "one under the configuration's weights.",
    ("C104", "/claims/weight_robustness/3/composites/circuit_discovery"),
)
def causal_bench_configuration_composite_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    claims = doc["claims"]
    claims["weight_robustness"][3]["composites"]["circuit_discovery"] = claims["methods"][3]["metrics"][
        "composite"
    ]
    save(folder, doc)


@case(
    "report",
    "C-3",
    "A threshold-sensitivity point omits its composite although every part is non-negative.",
    ("C104", "/claims/threshold_sensitivity/points/1/metrics"),
)
def causal_bench_point_composite_missing(folder: Folder) -> None:
    doc = causal_bench_study_report()
    del doc["claims"]["threshold_sensitivity"]["points"][1]["metrics"]["composite"]
    save(folder, doc)


@case(
    "report",
    "C-8 C-5",
    "Scaling entries: F1 at 2L/2H claimed against the 4L/4H planted set, and a 2L/2H set naming a layer-3 "
    "head.",
    ("C105", "/claims/scaling/0/methods/0/f1"),
    ("C109", "/claims/scaling/0/methods/1/components/0"),
)
def causal_bench_scaling_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    entries = doc["claims"]["scaling"][0]["methods"]
    entries[0]["f1"] = cb_f1(entries[0]["components"], CB_TRUTH)
    entries[1]["components"][0] = "L3.attn_head[0]"
    save(folder, doc)


@case(
    "report",
    "C-4",
    "The 4L/4H scaling configuration's convergence test claims B = 500 permutations: not the settings' "
    "1000, fewer than the profile requires, and its p (a count over 1001) is no count over 501.",
    ("C107", "/claims/scaling/1/convergence/n_permutations"),
    ("D103", "/claims/scaling/1/convergence/n_permutations"),
    ("B101", "/claims/scaling/1/convergence/p"),
)
def causal_bench_scaling_convergence_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["claims"]["scaling"][1]["convergence"]["n_permutations"] = 500
    save(folder, doc)


def cb_f1(identified: Sequence[str], truth: Sequence[str]) -> float:
    hits = len(set(identified) & set(truth))
    return 2 * hits / (len(identified) + len(truth))


# =========================================================================== report: saliency track


@case(
    "report",
    "DK-1 A-6 A-7",
    "Two saliency methods on the shortcut dataset against Shapley ground truth: hit "
    "accuracy, WIoU with the paper's k and weights, IoU per k.",
)
def saliency_two_methods(folder: Folder) -> None:
    save(folder, saliency_report(folder))


@case("report", "DK-1 A-6 A-7", "The same evaluation with deletion and addition curve areas.")
def saliency_with_curves(folder: Folder) -> None:
    save(folder, saliency_report(folder, curves=True))


@case(
    "report",
    "D-4",
    "Monte-Carlo Shapley ground truth from 3 trials; the default profile requires 5.",
    ("D104", "/settings/shapley_trials"),
)
def saliency_too_few_shapley_trials(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["shapley_trials"] = 3
    save(folder, doc)


@case(
    "report",
    "C-6",
    "The gradient method's WIoU is 0.05 above the weighted mean of its per-k IoUs.",
    ("C110", "/claims/methods/0/wiou"),
)
def saliency_wiou_inconsistent(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["wiou"] += 0.05
    save(folder, doc)


@case(
    "report",
    "C-6",
    "WIoU weighted with the raw paper weights (summing to 79) instead of normalised ones.",
    ("C110", "/claims/methods/1/wiou"),
)
def saliency_wiou_not_normalised(folder: Folder) -> None:
    doc = saliency_report(folder)
    method = doc["claims"]["methods"][1]
    weights = doc["settings"]["wiou_weights"]
    method["wiou"] = min(1.0, sum(w * v for w, v in zip(weights, method["per_k_iou"], strict=True)))
    save(folder, doc)


@case(
    "report",
    "C-6",
    "A dominance rate of 0.8 for 6 dominant images out of 8.",
    ("C111", "/claims/dominance/rate"),
)
def saliency_dominance_rate_inconsistent(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["dominance"]["rate"] = 0.8
    save(folder, doc)


@case("report", "S-3 DK-1", "A hit accuracy of 1.2.", ("S114", "/claims/methods/0/hit_accuracy"))
def saliency_hit_accuracy_above_one(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["hit_accuracy"] = 1.2
    save(folder, doc)


@case("report", "S-3 DK-1", "WIoU without any k.", ("S116", "/settings/wiou_ks"))
def saliency_no_wiou_ks(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["wiou_ks"] = []
    save(folder, doc)


@case("report", "S-3 DK-1", 'Shapley sampler "kernel" is not defined.', ("S113", "/settings/shapley_sampler"))
def saliency_unknown_sampler(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["shapley_sampler"] = "kernel"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "A method's maps name an artifact the report does not declare.",
    ("A109", "/claims/methods/1/maps/artifact"),
)
def saliency_undeclared_maps(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][1]["maps"]["artifact"] = "maps-lime"
    save(folder, doc)


@case(
    "report",
    "A-8",
    "A method's maps are declared with one image fewer than the file holds.",
    ("A110", "/claims/methods/0/maps/shape"),
    ("C117", "/claims/methods/0/maps/shape"),
)
def saliency_maps_shape_differs_from_file(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["maps"]["shape"][0] -= 1
    save(folder, doc)


@case(
    "report",
    "C-6",
    "The ground truth holds one map per image, not one per dominant image.",
    ("C117", "/claims/ground_truth/shape"),
)
def saliency_ground_truth_not_per_dominant_image(folder: Folder) -> None:
    doc = saliency_report(folder)
    truth, _, _ = saliency_maps()
    everything = np.zeros((N_IMAGES, *truth.shape[1:]), dtype=truth.dtype)
    everything[: len(truth)] = truth
    folder.npy("shapley.npy", everything)
    doc["claims"]["ground_truth"]["shape"] = list(everything.shape)
    save(folder, rehash(folder, doc))


@case(
    "report",
    "C-6",
    "A method's maps are twice as wide as the ground truth's.",
    ("C117", "/claims/methods/1/maps/shape"),
)
def saliency_maps_shape_differs_from_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    name = doc["claims"]["methods"][1]["name"]
    _, maps, _ = saliency_maps()
    wide = np.ascontiguousarray(np.concatenate([maps[name], maps[name]], axis=2))
    folder.npy(f"maps_{name}.npy", wide)
    doc["claims"]["methods"][1]["maps"]["shape"] = list(wide.shape)
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-4",
    "The ground-truth maps are an object array (a pickle).",
    ("A105", "/artifacts/1/media_type"),
)
def saliency_pickled_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    folder.write("shapley.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case("report", "A-2", "The ground-truth maps file is missing.", ("A102", "/artifacts/1/path"))
def saliency_missing_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    (folder.root / "shapley.npy").unlink()
    save(folder, doc)


@case(
    "report",
    "A-6 A-8",
    "The referenced shortcut dataset is itself invalid (labels declared int32, stored int64).",
    ("A110", "/labels/dtype", "dataset.json"),
    ("A107", "/artifacts/0"),
)
def saliency_referenced_dataset_invalid(folder: Folder) -> None:
    doc = saliency_report(folder)
    dataset = read_json(folder, "dataset.json")
    dataset["labels"]["dtype"] = "int32"
    save(folder, dataset, "dataset.json")
    save(folder, rehash(folder, doc))


# =========================================================================== leaderboards


def leaderboard_row(method: str, cells: dict[tuple[str, str], float]) -> Json:
    """A row whose Average and Score are written out from MC-11 (mean, mean of sigmoids)."""
    values = list(cells.values())
    return {
        "method": method,
        "cells": [{"task": task, "model": model, "value": value} for (task, model), value in cells.items()],
        "average": math.fsum(values) / len(values),
        "score": math.fsum(1.0 / (1.0 + math.exp(-v)) for v in values) / len(values),
    }


def leaderboard_document() -> Json:
    """CPR and CMD tables in the shape of MIB's circuit tabs (two methods, three cells)."""
    cpr = {("ioi", "gpt2"): 0.92, ("mcqa", "gpt2"): 0.71, ("ioi", "qwen2.5"): 1.18}
    cmd = {("ioi", "gpt2"): 0.05, ("mcqa", "gpt2"): 0.21, ("ioi", "qwen2.5"): 0.12}
    return {
        "spec_version": "1.0",
        "kind": "leaderboard",
        "track": "circuit",
        "title": "Circuit localization leaderboard",
        "tables": [
            {
                "metric": "cpr",
                "rows": [leaderboard_row("EAP-IG", cpr), leaderboard_row("Random", {("ioi", "gpt2"): 0.03})],
            },
            {
                "metric": "cmd",
                "rows": [leaderboard_row("EAP-IG", cmd), leaderboard_row("Random", {("ioi", "gpt2"): 0.97})],
            },
        ],
    }


@case("leaderboard", "DK-7 C-9", "CPR and CMD tables: Average and Score follow from each row's cells.")
def leaderboard_two_tables(folder: Folder) -> None:
    save(folder, leaderboard_document())


@case(
    "leaderboard",
    "C-9",
    "A Score quoted with the CMD negated (σ(−x) instead of σ(x)), and an Average over one cell too many.",
    ("C115", "/tables/1/rows/0/score"),
    ("C115", "/tables/0/rows/0/average"),
)
def leaderboard_aggregates_inconsistent(folder: Folder) -> None:
    doc = leaderboard_document()
    row = doc["tables"][1]["rows"][0]
    row["score"] = math.fsum(1.0 / (1.0 + math.exp(c["value"])) for c in row["cells"]) / len(row["cells"])
    cpr_row = doc["tables"][0]["rows"][0]
    cpr_row["average"] = math.fsum(c["value"] for c in cpr_row["cells"]) / (len(cpr_row["cells"]) + 1)
    save(folder, doc)


@case(
    "leaderboard",
    "C-9",
    "The CPR table twice, a method twice in a table, and a cell twice in a row.",
    ("C116", "/tables/2/metric"),
    ("C116", "/tables/0/rows/2/method"),
    ("C116", "/tables/0/rows/2/cells/1"),
)
def leaderboard_duplicates(folder: Folder) -> None:
    doc = leaderboard_document()
    cpr = doc["tables"][0]
    cpr["rows"].append(leaderboard_row("Random", {("ioi", "gpt2"): 0.03, ("ioi ", "gpt2"): 0.5}))
    cpr["rows"][2]["cells"][1]["task"] = "ioi"
    doc["tables"].append(copy.deepcopy(cpr))
    doc["tables"][2]["rows"] = doc["tables"][2]["rows"][:1]
    save(folder, doc)


@case(
    "leaderboard",
    "DK-7",
    "A Score above 1 and a table of an unknown metric.",
    ("S114", "/tables/0/rows/0/score"),
    ("S113", "/tables/1/metric"),
)
def leaderboard_schema(folder: Folder) -> None:
    doc = leaderboard_document()
    doc["tables"][0]["rows"][0]["score"] = 1.5
    doc["tables"][1]["metric"] = "auroc"
    save(folder, doc)


# =========================================================================== writing the tree


# Case files are pinned by their SHA-256: git must never rewrite their line endings.
GITATTRIBUTES = b"# Generated by conformance/build_cases.py: case files are hash-pinned bytes.\n* -text\n"


def build(case_: Case, root: Path) -> None:
    target = root / case_.folder
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    case_.build(Folder(target))
    (target / "expected.json").write_bytes(json_bytes(case_.expected()))


def _tree(root: Path) -> dict[str, tuple[str, bytes]]:
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path).encode())
            elif path.is_file():
                out[rel] = ("file", path.read_bytes())
    return out


def check(root: Path) -> list[str]:
    """Differences between the cases under ``root`` and a fresh build."""
    problems = []
    attributes = root / ".gitattributes"
    if not attributes.is_file() or attributes.read_bytes() != GITATTRIBUTES:
        problems.append(".gitattributes")
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        for case_ in CASES:
            build(case_, fresh)
            want, have = _tree(fresh / case_.folder), _tree(root / case_.folder)
            for rel in sorted(set(want) | set(have)):
                if want.get(rel) != have.get(rel):
                    problems.append(f"{case_.folder}/{rel}")
    return problems


def stray_folders(root: Path) -> list[str]:
    known = {c.folder for c in CASES}
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.glob("*/*/*")
        if p.relative_to(root).as_posix() not in known
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare the tree with a fresh build; exit 1 on drift"
    )
    parser.add_argument("--list", action="store_true", help="print the case folders and exit")
    parser.add_argument("--root", type=Path, default=ROOT, help="where the v1 cases live")
    args = parser.parse_args(argv)
    ids = [c.id for c in CASES]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        print(f"duplicate case ids: {duplicates}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(c.folder for c in CASES))
        return 0
    if args.check:
        problems = check(args.root)
        for rel in problems:
            print(f"differs from a fresh build: {rel}", file=sys.stderr)
        return 1 if problems else 0
    args.root.mkdir(parents=True, exist_ok=True)
    (args.root / ".gitattributes").write_bytes(GITATTRIBUTES)
    for case_ in CASES:
        build(case_, args.root)
    for rel in stray_folders(args.root):
        print(f"not generated by this script (left alone): {rel}", file=sys.stderr)
    print(f"wrote {len(CASES)} cases under {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
