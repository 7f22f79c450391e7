"""Import an EAP-IG graph (the JSON or ``.pt`` files MIB circuit submissions contain) as a
mibspec circuit document with a safetensors sidecar.

Edges are matched by name, never by position: EAP-IG files list edges grouped by
destination layer, which is not the canonical order (``spec/v1/metrics/graph.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.outputs import Inputs, write_atomic
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.sidecars import safetensors_bytes
from mibspec.core.spec import SPEC_VERSION
from mibspec.core.version import __version__
from mibspec.reference_impl.producers.folder import artifact_entry
from mibspec.validator import (
    Finding,
    Limits,
    catalogue,
    load_json_file,
    make_finding,
    parse_findings,
)

__all__ = ["ImportResult", "import_eap_ig"]

SIDECAR = "circuit.safetensors"
DOCUMENT = "circuit.json"


@dataclass
class ImportResult:
    """What an import wrote, or why it could not."""

    findings: list[Finding] = field(default_factory=list)
    #: The documents written (each is then verified).
    written: list[Path] = field(default_factory=list)
    #: Their sidecar files.
    sidecars: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


class _MalformedError(Exception):
    def __init__(self, code: str, pointer: str, **params: Any) -> None:
        super().__init__(code)
        self.code, self.pointer, self.params = code, pointer, params


def import_parse_findings(parsed: Any, cat: Any) -> list[Finding]:
    """The findings of a source file's parse problems, at the file's start where a problem
    has no position (an importer reports them without the validator's hints)."""
    return [f.located(f.line or 1, f.column or 1) for f in parse_findings(parsed, cat, hints=False)]


def import_eap_ig(source: Path, out_dir: Path, *, limits: Limits | None = None) -> ImportResult:
    """Convert ``source`` (EAP-IG ``.json`` or ``.pt``) into ``out_dir/circuit.json`` + sidecar.

    Never raises for bad input: problems come back as findings with codes and pointers.
    The input is only read; files are written atomically.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is ``source`` (or a link to it).
    """
    cat = catalogue()
    result = ImportResult()
    try:
        if source.suffix == ".pt":
            graph = _read_pt(source)
        else:
            # Graphs of large models list millions of edges: the size limit is the only bound.
            default = Limits(max_bytes=2 * 1024**3, max_values=2 * 1024**3)
            parsed = load_json_file(source, limits or default)
            if parsed.problems:
                result.findings.extend(import_parse_findings(parsed, cat))
                return result
            graph = _from_json(parsed.data)
        document, tensors = _convert(graph, source)
    except _MalformedError as exc:
        result.findings.append(make_finding(cat, None, exc.code, exc.pointer, **exc.params).located(1, 1))
        return result
    sidecar, target = out_dir / SIDECAR, out_dir / DOCUMENT
    inputs = Inputs([source])
    for path in (sidecar, target):
        inputs.refuse(path, "output")
    data = safetensors_bytes(tensors)
    write_atomic(sidecar, data)
    document["artifacts"] = [artifact_entry(data, "tensors", "circuit", SIDECAR, "application/x-safetensors")]
    write_atomic(target, json.dumps(document, indent=2) + "\n")
    result.written, result.sidecars = [target], [sidecar]
    return result


def _read_pt(source: Path) -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        from mibspec.core.spec import install_hint

        raise _MalformedError(
            "I104", "", detail=f"reading .pt graphs needs torch: {install_hint('recompute')}"
        ) from exc
    try:
        # weights_only=True: the unpickler only rebuilds tensors and plain containers, never code.
        raw = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure is a property of the input
        raise _MalformedError(
            "I101", "", detail=f"not a loadable weights-only .pt file: {type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(raw, dict):
        raise _MalformedError("I101", "", detail=f"the .pt file holds a {type(raw).__name__}, not a dict")
    graph: dict[str, Any] = {}
    for key, value in raw.items():
        graph[key] = value.numpy() if hasattr(value, "numpy") else value
    graph["_format"] = "pt"
    return graph


def _from_json(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _MalformedError(
            "I101", "", detail="the top-level value must be an object with cfg, nodes and edges"
        )
    for key in ("cfg", "edges"):
        if not isinstance(data.get(key), dict):
            raise _MalformedError(
                "I101", f"/{key}" if key in data else "", detail=f"{key!r} must be an object"
            )
    return {**data, "_format": "json"}


def _convert(graph: dict[str, Any], source: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import numpy as np

    from mibspec.reference_impl.graph import GraphConfig, GraphUniverse

    cfg = graph.get("cfg")
    if not isinstance(cfg, dict):
        raise _MalformedError("I101", "/cfg", detail="'cfg' must be an object")
    try:
        universe = GraphUniverse(GraphConfig.from_eap_ig_cfg(cfg, strict=False))
    except ValueError as exc:
        raise _MalformedError("I101", "/cfg", detail=str(exc)) from exc
    n = universe.n_edges
    if graph["_format"] == "json":
        scores, in_graph = _json_edges(graph["edges"], universe)
        neurons = _json_neurons(graph.get("nodes"), universe)
    else:
        scores, in_graph, neurons = _pt_edges(graph, universe)
    tensors: dict[str, Any] = {"scores": scores.astype(np.float32)}
    document: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "kind": "circuit",
        "description": f"Imported from the EAP-IG graph {source.name} by mibspec {__version__}.",
        "graph": {
            "convention": "eap-ig",
            "n_layers": universe.cfg.n_layers,
            "n_heads": universe.cfg.n_heads,
            "parallel_attn_mlp": universe.cfg.parallel_attn_mlp,
            "n_edges": n,
        },
        "granularity": "neuron" if neurons is not None else "edge",
        "scores": {"artifact": "tensors", "tensor": "scores", "shape": [n], "dtype": "float32"},
    }
    if universe.cfg.d_model is not None:
        document["graph"]["d_model"] = universe.cfg.d_model
    if in_graph.any():
        tensors["membership"] = in_graph[None, :]
        document["membership"] = {
            "artifact": "tensors",
            "tensor": "membership",
            "shape": [1, n],
            "dtype": "bool",
        }
        fraction = None
        if neurons is not None:
            tensors["neurons"] = neurons[None, :, :]
            document["neuron_masks"] = {
                "artifact": "tensors",
                "tensor": "neurons",
                "shape": [1, *neurons.shape],
                "dtype": "bool",
            }
            fraction = universe.neuron_fraction(neurons)
        document["circuits"] = [
            {
                "index": 0,
                "n_edges": int(in_graph.sum()),
                "weighted_size": universe.weighted_edge_count(in_graph, fraction),
            }
        ]
    elif neurons is not None:
        document["granularity"] = "edge"  # neuron masks only mean something with a circuit
    return document, tensors


def _json_edges(edges: dict[str, Any], universe: Any) -> tuple[Any, Any]:
    import numpy as np

    names = list(edges)
    try:
        ids = universe.edge_ids(names)
    except ValueError as exc:
        raise _MalformedError("I102", "/edges", detail=str(exc)) from exc
    scores = np.zeros(universe.n_edges, dtype=np.float64)
    in_graph = np.zeros(universe.n_edges, dtype=bool)
    seen = np.zeros(universe.n_edges, dtype=bool)
    for name, index in zip(names, ids.tolist(), strict=True):
        entry = edges[name]
        pointer = "/edges/" + escape_pointer_token(name)
        if not isinstance(entry, dict):
            raise _MalformedError("I101", pointer, detail="an edge must be an object with score and in_graph")
        score, member = entry.get("score", 0.0), entry.get("in_graph", False)
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise _MalformedError("I101", f"{pointer}/score", detail="score must be a number")
        if not isinstance(member, bool):
            raise _MalformedError("I101", f"{pointer}/in_graph", detail="in_graph must be true or false")
        scores[index], in_graph[index], seen[index] = score, member, True
    missing = int((~seen).sum())
    if missing:
        first = universe.edge_name(int(np.flatnonzero(~seen)[0]))
        raise _MalformedError("I103", "/edges", missing=missing, total=universe.n_edges, first=first)
    return scores, in_graph


def _json_neurons(nodes: Any, universe: Any) -> Any | None:
    import numpy as np

    if not isinstance(nodes, dict) or not any(isinstance(v, dict) and "neurons" in v for v in nodes.values()):
        return None
    d_model = universe.cfg.d_model
    if d_model is None:
        raise _MalformedError("I101", "/cfg", detail="neuron masks need cfg.d_model")
    mask = np.ones((universe.n_forward, d_model), dtype=bool)
    for name, entry in nodes.items():
        if not isinstance(entry, dict) or "neurons" not in entry or entry["neurons"] is None:
            continue
        pointer = "/nodes/" + escape_pointer_token(name) + "/neurons"
        try:
            row = universe.forward_index(name)
        except ValueError:
            if name == "logits":
                continue
            raise _MalformedError(
                "I101", pointer, detail=f"{name!r} is not a source node of this graph"
            ) from None
        values = entry["neurons"]
        if not (
            isinstance(values, list) and len(values) == d_model and all(isinstance(v, bool) for v in values)
        ):
            raise _MalformedError("I101", pointer, detail=f"neurons must be {d_model} booleans")
        mask[row] = values
    return mask


def _pt_edges(graph: dict[str, Any], universe: Any) -> tuple[Any, Any, Any | None]:
    import numpy as np

    def names(key: str) -> list[str]:
        value = graph.get(key)
        if isinstance(value, dict):
            return [name for name, _ in sorted(value.items(), key=lambda item: item[1])]
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise _MalformedError("I101", f"/{key}", detail=f"{key} must list the node names")

    src, dst = names("src_nodes"), names("dst_nodes")
    try:
        rows = [universe.forward_index(name) for name in src]
        cols = [universe.backward_index(name) for name in dst]
    except ValueError as exc:
        raise _MalformedError("I102", "/src_nodes", detail=str(exc)) from exc

    def matrix(key: str, dtype: Any) -> Any:
        value = np.asarray(graph.get(key))
        if value.shape != (len(src), len(dst)):
            raise _MalformedError("I101", f"/{key}", detail=f"{key} must have shape {(len(src), len(dst))}")
        full = np.zeros(universe.edge_mask.shape, dtype=dtype)
        full[np.ix_(rows, cols)] = value.astype(dtype)
        return universe.from_matrix(full)

    if len(set(rows)) != universe.n_forward or len(set(cols)) != universe.n_backward:
        raise _MalformedError(
            "I103",
            "/src_nodes",
            missing=universe.n_edges,
            total=universe.n_edges,
            first="the file's node lists do not cover the universe",
        )
    scores = matrix("edges_scores", np.float64)
    in_graph = (
        matrix("edges_in_graph", bool) if "edges_in_graph" in graph else np.zeros(universe.n_edges, bool)
    )
    neurons = None
    if graph.get("neurons_in_graph") is not None:
        value = np.asarray(graph["neurons_in_graph"]).astype(bool)
        if value.ndim != 2 or value.shape[0] != len(src):
            raise _MalformedError(
                "I101", "/neurons_in_graph", detail="neurons_in_graph must be (n_forward, d_model)"
            )
        neurons = np.ones((universe.n_forward, value.shape[1]), dtype=bool)
        neurons[rows] = value
    return scores, in_graph, neurons
