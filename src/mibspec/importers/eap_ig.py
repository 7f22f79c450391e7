"""Import an EAP-IG graph (the JSON or ``.pt`` files MIB circuit submissions contain) as a
mibspec circuit document with a safetensors sidecar.

Edges are matched by name, never by position: EAP-IG files list edges grouped by
destination layer, which is not the canonical order (``spec/v1/metrics/graph.md``).
What the file holds is kept at its own granularity (SPEC.md I-2): edge scores, node
scores (``node``), neuron scores and masks (``neuron``), and each node's ``in_graph``
flag. A NaN node or neuron score means "not scored" (EAP-IG keeps such a node in every
circuit); it is recorded as unscored in a boolean tensor, never as a number. A graph
whose edges carry no score at all is a circuit in MIB's binary form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mibspec.core.outputs import Inputs, write_atomic
from mibspec.core.sidecars import safetensors_bytes
from mibspec.core.version import __version__
from mibspec.documents import document_bytes
from mibspec.documents.common import Artifact, model_ref
from mibspec.documents.kinds import Circuit, CircuitEntry, GraphSpec, TensorRef
from mibspec.reference_impl.producers.folder import artifact_entry
from mibspec.validator import (
    Finding,
    Limits,
    catalogue,
    make_finding,
    parse_findings,
)

from ._eap_ig_json import ReadProblemError, read_graph_json
from ._options import ImportOptions, OptionError, hub_model

__all__ = ["EapIgGraph", "ImportResult", "graph_document", "import_eap_ig", "read_eap_ig"]

SIDECAR = "circuit.safetensors"
DOCUMENT = "circuit.json"
#: Graphs of large models list millions of edges: the size is the only bound on the text.
MAX_GRAPH_BYTES = 2 * 1024**3


@dataclass
class ImportResult:
    """What an import wrote, or why it could not."""

    findings: list[Finding] = field(default_factory=list)
    #: The documents written (each is then verified).
    written: list[Path] = field(default_factory=list)
    #: Their sidecar files.
    sidecars: list[Path] = field(default_factory=list)
    #: What the import could not write, and why (not a failure: what was written verifies).
    notes: list[str] = field(default_factory=list)

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


@dataclass
class EapIgGraph:
    """An EAP-IG graph in canonical order: the arrays the circuit document stores.

    ``edge_scores`` is None in the binary form; ``node_scores`` / ``neuron_scores`` hold
    NaN where the source left a node or neuron unscored.
    """

    universe: Any
    edge_scores: Any | None
    in_graph: Any
    node_in_graph: Any | None = None
    node_scores: Any | None = None
    neurons: Any | None = None
    neuron_scores: Any | None = None


def read_eap_ig(source: Path, limits: Limits | None = None) -> EapIgGraph:
    """Read an EAP-IG ``.json`` or ``.pt`` graph.

    Raises:
        _MalformedError: with the code and pointer of the first problem (located when known).
    """
    if source.suffix == ".pt":
        return _from_pt(_read_pt(source))
    max_bytes = limits.max_bytes if limits is not None else MAX_GRAPH_BYTES
    try:
        text = read_graph_json(source, max_bytes, _universe)
    except ReadProblemError as exc:
        raise _located(exc, None) from None
    try:
        return _from_json(text)
    except ReadProblemError as exc:
        raise _located(exc, text) from None


def _located(exc: ReadProblemError, text: Any) -> _MalformedError:
    error = _MalformedError(exc.code, exc.pointer, **exc.params)
    if text is not None:
        error.params["_at"] = text.locate(exc.offset, exc.pointer)
    elif exc.offset is not None:
        error.params["_offset"] = exc.offset
    return error


def import_eap_ig(
    source: Path,
    out_dir: Path,
    *,
    limits: Limits | None = None,
    model: str | None = None,
    model_revision: str | None = None,
) -> ImportResult:
    """Convert ``source`` (EAP-IG ``.json`` or ``.pt``) into ``out_dir/circuit.json`` + sidecar.

    ``model`` (a MIB model id such as ``gpt2``) and ``model_revision`` (its 40-hex commit)
    declare the model the graph belongs to. Never raises for bad input: problems come back
    as findings with codes and pointers. The input is only read; files are written atomically.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is ``source`` (or a link to it).
    """
    cat = catalogue()
    result = ImportResult()
    try:
        graph = read_eap_ig(source, limits)
        document, tensors = graph_document(graph, f"the EAP-IG graph {source.name}")
        if model is not None:
            ImportOptions(model_revision=model_revision).check()
            document = document.model_copy(update={"model": model_ref(hub_model(model, model_revision))})
    except _MalformedError as exc:
        result.findings.append(malformed_finding(cat, exc, source))
        return result
    except OptionError as exc:
        result.findings.append(make_finding(cat, None, "I111", "", detail=exc.detail).located(1, 1))
        return result
    result.written, result.sidecars = write_circuit(document, tensors, out_dir, [source])
    return result


def malformed_finding(cat: Any, exc: _MalformedError, source: Path) -> Finding:
    """The located finding of an import failure."""
    params = {k: v for k, v in exc.params.items() if not k.startswith("_")}
    finding = make_finding(cat, None, exc.code, exc.pointer, **params)
    if "_at" in exc.params:
        return finding.located(*exc.params["_at"])
    if "_offset" in exc.params:
        offset = exc.params["_offset"]
        with source.open("rb") as handle:
            head = handle.read(offset + 1).decode("utf-8", "replace")[:offset]
        return finding.located(head.count("\n") + 1, offset - (head.rfind("\n") + 1) + 1)
    return finding.located(1, 1)


def write_circuit(
    document: Circuit, tensors: dict[str, Any], out_dir: Path, sources: list[Path]
) -> tuple[list[Path], list[Path]]:
    """Write ``out_dir/circuit.json`` and its sidecar (atomically); never over a source."""
    sidecar, target = out_dir / SIDECAR, out_dir / DOCUMENT
    inputs = Inputs(sources)
    for path in (sidecar, target):
        inputs.refuse(path, "output")
    data = safetensors_bytes(tensors)
    write_atomic(sidecar, data)
    entry = artifact_entry(data, "tensors", "circuit", SIDECAR, "application/x-safetensors")
    document = document.model_copy(update={"artifacts": [Artifact.model_validate(entry)]})
    write_atomic(target, document_bytes(document))
    return [target], [sidecar]


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
        if hasattr(value, "float") and hasattr(value, "dtype") and str(value.dtype) == "torch.bfloat16":
            value = value.float()
        graph[key] = value.numpy() if hasattr(value, "numpy") else value
    return graph


def _universe(cfg: Any) -> Any:
    from mibspec.reference_impl.graph import GraphConfig, GraphUniverse

    if not isinstance(cfg, dict):
        raise ReadProblemError("I101", "/cfg", None, detail="'cfg' must be an object")
    try:
        return GraphUniverse(GraphConfig.from_eap_ig_cfg(cfg, strict=False))
    except ValueError as exc:
        raise ReadProblemError("I101", "/cfg", None, detail=str(exc)) from None


def _number(value: Any, pointer: str, what: str, nan_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReadProblemError("I101", pointer, None, detail=f"a {what} score must be a number")
    number = float(value)
    if math.isinf(number) or (math.isnan(number) and not nan_ok):
        raise ReadProblemError("I105", pointer, None, what=what, value=str(number))
    return number


def _from_json(text: Any) -> EapIgGraph:
    """The graph the streamed JSON holds: its edges checked, its nodes read."""
    n_scored = _check_edges(text)
    graph = EapIgGraph(text.universe, text.scores if n_scored else None, text.in_graph)
    if text.nodes is not None:
        _read_nodes(graph, text.nodes)
    return graph


def _check_edges(text: Any) -> int:
    """Check, on the streamed arrays, that every edge is listed, that the edges are all scored
    or none, and that every score is finite; the number of scored edges."""
    import numpy as np

    from mibspec.core.pointers import escape_pointer_token

    universe = text.universe
    missing = int((~text.seen).sum())
    if missing:
        first = universe.edge_name(int(np.flatnonzero(~text.seen)[0]))
        raise ReadProblemError("I103", "/edges", None, missing=missing, total=universe.n_edges, first=first)
    n_scored = int(text.scored.sum())
    if 0 < n_scored < universe.n_edges:
        first = universe.edge_name(int(np.flatnonzero(~text.scored)[0]))
        raise ReadProblemError(
            "I106", "/edges/" + escape_pointer_token(first), None, scored=n_scored, total=universe.n_edges
        )
    infinite = np.flatnonzero(~np.isfinite(text.scores))
    if infinite.size:  # a literal such as 1e400 overflows to infinity
        name = universe.edge_name(int(infinite[0]))
        value = str(text.scores[infinite[0]])
        raise ReadProblemError(
            "I105", "/edges/" + escape_pointer_token(name) + "/score", None, what="edge", value=value
        )
    return n_scored


def _read_nodes(graph: EapIgGraph, nodes: Any) -> None:
    """Set the graph's node membership and scores, and its neurons', from the ``nodes`` object
    (one loop over the nodes, in this frame)."""
    import numpy as np

    from mibspec.core.pointers import escape_pointer_token

    if not isinstance(nodes, dict):
        raise ReadProblemError("I101", "/nodes", None, detail="'nodes' must be an object")
    universe = graph.universe
    n, d_model = universe.n_forward, universe.cfg.d_model
    node_in = np.zeros(n, dtype=bool)
    node_scores = np.full(n, np.nan)
    neurons = neuron_scores = None
    any_score = False
    for name, entry in nodes.items():
        pointer = "/nodes/" + escape_pointer_token(name)
        if not isinstance(entry, dict):
            raise ReadProblemError("I101", pointer, None, detail="a node must be an object")
        if name == "logits":
            continue  # always in the graph; EAP-IG ignores its entry
        try:
            row = universe.forward_index(name)
        except ValueError:
            raise ReadProblemError(
                "I102", pointer, None, detail=f"{name!r} is not a node of this graph"
            ) from None
        member = entry.get("in_graph", False)
        if not isinstance(member, bool):
            raise ReadProblemError(
                "I101", f"{pointer}/in_graph", None, detail="in_graph must be true or false"
            )
        node_in[row] = member
        if "score" in entry:
            any_score = True
            node_scores[row] = _number(entry["score"], f"{pointer}/score", "node", True)
        for key in ("neurons", "neurons_scores"):
            if key not in entry:
                continue
            if d_model is None:
                raise ReadProblemError("I101", "/cfg", None, detail="neuron entries need cfg.d_model")
            values = entry[key]
            if not isinstance(values, list) or len(values) != d_model:
                raise ReadProblemError(
                    "I101", f"{pointer}/{key}", None, detail=f"{key} must list {d_model} values"
                )
            if key == "neurons":
                if not all(isinstance(v, bool) for v in values):
                    raise ReadProblemError(
                        "I101", f"{pointer}/{key}", None, detail="neurons must be booleans"
                    )
                neurons = np.zeros((n, d_model), dtype=bool) if neurons is None else neurons
                neurons[row] = values
            else:
                neuron_scores = np.full((n, d_model), np.nan) if neuron_scores is None else neuron_scores
                neuron_scores[row] = [
                    _number(v, f"{pointer}/{key}/{i}", "neuron", True) for i, v in enumerate(values)
                ]
    graph.node_in_graph = node_in
    graph.node_scores = node_scores if any_score else None
    graph.neurons, graph.neuron_scores = neurons, neuron_scores


def _from_pt(raw: dict[str, Any]) -> EapIgGraph:
    import numpy as np

    try:
        universe = _universe(raw.get("cfg"))
    except ReadProblemError as exc:
        raise _MalformedError(exc.code, exc.pointer, **exc.params) from None

    def names(key: str) -> list[str]:
        value = raw.get(key)
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
    if len(set(rows)) != universe.n_forward or len(set(cols)) != universe.n_backward:
        raise _MalformedError(
            "I103",
            "/src_nodes",
            missing=universe.n_edges,
            total=universe.n_edges,
            first="the file's node lists do not cover the universe",
        )

    def array(key: str, shape: tuple[int, ...], dtype: Any) -> Any:
        value = np.asarray(raw.get(key))
        if value.shape != shape:
            raise _MalformedError(
                "I101", f"/{key}", detail=f"{key} must have shape {shape}, not {value.shape}"
            )
        return value.astype(dtype)

    def matrix(key: str, dtype: Any) -> Any:
        full = np.zeros(universe.edge_mask.shape, dtype=dtype)
        full[np.ix_(rows, cols)] = array(key, (len(src), len(dst)), dtype)
        return universe.from_matrix(full)

    def per_node(key: str, dtype: Any, width: int | None = None) -> Any:
        shape = (len(src),) if width is None else (len(src), width)
        out = np.zeros((universe.n_forward, *shape[1:]), dtype=dtype)
        out[rows] = array(key, shape, dtype)
        return out

    def finite(values: Any, key: str, what: str, nan_ok: bool) -> Any:
        bad = np.isinf(values) if nan_ok else ~np.isfinite(values)
        if bad.any():
            raise _MalformedError("I105", f"/{key}", what=what, value=str(values[bad][0]))
        return values

    if "edges_scores" not in raw:
        raise _MalformedError("I101", "", detail="the .pt graph has no edges_scores")
    scores = finite(matrix("edges_scores", np.float64), "edges_scores", "edge", False)
    in_graph = matrix("edges_in_graph", bool) if "edges_in_graph" in raw else np.zeros(universe.n_edges, bool)
    graph = EapIgGraph(universe, scores, in_graph)
    if raw.get("nodes_in_graph") is not None:
        graph.node_in_graph = per_node("nodes_in_graph", bool)
    if raw.get("nodes_scores") is not None:
        values = np.full(universe.n_forward, np.nan)
        values[rows] = array("nodes_scores", (len(src),), np.float64)
        graph.node_scores = finite(values, "nodes_scores", "node", True)
    d_model = universe.cfg.d_model
    for key in ("neurons_in_graph", "neurons_scores"):
        if raw.get(key) is None:
            continue
        width = np.asarray(raw[key]).shape[-1] if d_model is None else d_model
        if key == "neurons_in_graph":
            graph.neurons = per_node(key, bool, width)
        else:
            values = np.full((universe.n_forward, width), np.nan)
            values[rows] = array(key, (len(src), width), np.float64)
            graph.neuron_scores = finite(values, key, "neuron", True)
    return graph


def tensor_ref(name: str, shape: list[int], dtype: str) -> TensorRef:
    """A reference to the tensor ``name`` of the circuit sidecar."""
    return TensorRef.model_validate({"artifact": "tensors", "tensor": name, "shape": shape, "dtype": dtype})


def graph_document(graph: EapIgGraph, what: str) -> tuple[Circuit, dict[str, Any]]:
    """The circuit document (without artifacts) and sidecar tensors of one graph.

    Raises:
        _MalformedError: a neuron mask that does not fit the graph.
    """
    import numpy as np

    universe = graph.universe
    n, n_forward = universe.n_edges, universe.n_forward
    in_graph = np.asarray(graph.in_graph, dtype=bool)
    node_in = graph.node_in_graph
    has_circuit = (
        graph.edge_scores is None or bool(in_graph.any()) or (node_in is not None and bool(node_in.any()))
    )
    neurons = graph.neurons if has_circuit else None  # a neuron mask only means something in a circuit
    granularity: Literal["edge", "node", "neuron"]
    if neurons is not None or graph.neuron_scores is not None:
        granularity = "neuron"
    elif graph.node_scores is not None:
        granularity = "node"
    else:
        granularity = "edge"
    graph_fields: dict[str, Any] = {} if universe.cfg.d_model is None else {"d_model": universe.cfg.d_model}
    spec = GraphSpec(
        convention="eap-ig",
        n_layers=universe.cfg.n_layers,
        n_heads=universe.cfg.n_heads,
        parallel_attn_mlp=universe.cfg.parallel_attn_mlp,
        n_edges=n,
        **graph_fields,
    )
    document: dict[str, Any] = {}
    tensors: dict[str, Any] = {}
    if graph.edge_scores is not None:
        tensors["scores"] = np.asarray(graph.edge_scores).astype(np.float32)
        document["scores"] = tensor_ref("scores", [n], "float32")
    for key, values in (("node", graph.node_scores), ("neuron", graph.neuron_scores)):
        if values is None:
            continue
        scored = ~np.isnan(values)
        tensors[f"{key}_scores"] = np.where(scored, values, 0.0).astype(np.float32)
        tensors[f"{key}_scored"] = scored
        document[f"{key}_scores"] = tensor_ref(f"{key}_scores", list(values.shape), "float32")
        document[f"{key}_scored"] = tensor_ref(f"{key}_scored", list(values.shape), "bool")
    if has_circuit:
        tensors["membership"] = in_graph[None, :]
        document["membership"] = tensor_ref("membership", [1, n], "bool")
        if node_in is not None:
            tensors["node_membership"] = np.asarray(node_in, dtype=bool)[None, :]
            document["node_membership"] = tensor_ref("node_membership", [1, n_forward], "bool")
        fraction = None
        if neurons is not None:
            tensors["neurons"] = np.asarray(neurons, dtype=bool)[None, :, :]
            document["neuron_masks"] = tensor_ref("neurons", [1, *neurons.shape], "bool")
            try:
                fraction = universe.neuron_fraction(np.asarray(neurons, dtype=bool))
            except ValueError as exc:
                raise _MalformedError("I101", "/nodes", detail=str(exc)) from None
        document["circuits"] = [
            CircuitEntry(
                index=0,
                n_edges=int(in_graph.sum()),
                weighted_size=universe.weighted_edge_count(in_graph, fraction),
            )
        ]
    circuit = Circuit(
        description=f"Imported from {what} by mibspec {__version__}.",
        graph=spec,
        granularity=granularity,
        **document,
    )
    return circuit, tensors
