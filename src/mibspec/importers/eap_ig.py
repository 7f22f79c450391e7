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

from pydantic import ValidationError

from mibspec.core.folders import OutputPlan
from mibspec.core.outputs import Inputs
from mibspec.core.sidecars import safetensors_bytes
from mibspec.core.version import __version__
from mibspec.documents import document_bytes
from mibspec.documents.common import Artifact, model_ref
from mibspec.documents.kinds import Circuit, CircuitEntry, GraphSpec, TensorRef
from mibspec.reference_impl.scoring.folder import artifact_entry
from mibspec.validator import (
    Finding,
    Limits,
    catalogue,
    make_finding,
    parse_findings,
)

from ._eap_ig_json import F32_MAX, ReadProblemError, read_graph_json, score_problem
from ._options import ImportOptions, OptionError, hub_model
from ._safe_torch import PtFileError, load_pt

__all__ = ["EapIgGraph", "ImportResult", "graph_document", "import_eap_ig", "read_eap_ig"]

SIDECAR = "circuit.safetensors"
DOCUMENT = "circuit.json"
#: Graphs of large models list millions of edges: the size is the only bound on the text.
MAX_GRAPH_BYTES = 2 * 1024**3
#: Most neurons (source nodes × d_model) a graph's neuron masks and scores may have: the
#: arrays are made before they are filled, so a declared d_model alone could claim any memory.
#: Llama-3.1-70B has 5,201 source nodes × 8,192 = 42.6 million.
MAX_NEURON_CELLS = 2**26


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


def unfit_value(exc: Any) -> str:
    """The detail of an I101 for a value a document's typed model refused (a pydantic
    ``ValidationError`` no check of the importer named first)."""
    first = exc.errors()[0]
    where = ".".join(map(str, first["loc"])) or "the document"
    return f"a value the imported document cannot hold: {where}: {first['msg']}"


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
    except ValidationError as exc:  # a value the circuit document cannot hold
        result.findings.append(make_finding(cat, None, "I101", "", detail=unfit_value(exc)).located(1, 1))
        return result
    except OptionError as exc:
        result.findings.append(make_finding(cat, None, "I111", "", detail=exc.detail).located(1, 1))
        return result
    plan = OutputPlan(out_dir)
    document_path, sidecar_path, _ = plan_circuit(plan, "", document, tensors, source.name)
    # The same graph imported again (say with --model-revision) has the same sidecar.
    clashes = plan.replaced(Inputs([source]), lambda path: plan.unchanged(sidecar_path))
    if clashes:
        result.findings = [replace_finding(cat, exc) for exc in clashes]
        return result
    plan.write(Inputs([source]))
    result.written, result.sidecars = [document_path], [sidecar_path]
    return result


def replace_finding(cat: Any, exc: Exception) -> Finding:
    """I126 for a file that would replace one another input wrote (SPEC.md I-7)."""
    return make_finding(cat, None, "I126", "", detail=str(exc)).located(1, 1)


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


def plan_circuit(
    plan: OutputPlan, folder: str, document: Circuit, tensors: dict[str, Any], source: str
) -> tuple[Path, Path, bytes]:
    """Plan ``<folder>/circuit.json`` and its sidecar (``folder`` empty: the output folder
    itself) for ``source``; the two paths and the document's bytes."""
    prefix = f"{folder}/" if folder else ""
    data = safetensors_bytes(tensors)
    sidecar = plan.add(prefix + SIDECAR, data, source=source)
    entry = artifact_entry(data, "tensors", "circuit", SIDECAR, "application/x-safetensors")
    text = document_bytes(document.model_copy(update={"artifacts": [Artifact.model_validate(entry)]}))
    return plan.add(prefix + DOCUMENT, text, source=source), sidecar, text


def _read_pt(source: Path) -> dict[str, Any]:
    try:
        import torch
    except ImportError as exc:
        from mibspec.core.spec import install_hint

        raise _MalformedError(
            "I104", "", detail=f"reading .pt graphs needs torch: {install_hint('recompute')}"
        ) from exc
    try:
        raw = load_pt(source)
    except PtFileError as exc:
        raise _MalformedError(
            "I128" if exc.kind == "over-limits" else "I101", "", detail=exc.detail
        ) from None
    if not isinstance(raw, dict):
        raise _MalformedError("I101", "", detail=f"the .pt file holds a {type(raw).__name__}, not a dict")
    graph: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, torch.Tensor):
            value = value.detach()
            value = value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()
        graph[key] = value
    return graph


def _universe(cfg: Any) -> Any:
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    if not isinstance(cfg, dict):
        raise ReadProblemError("I101", "/cfg", None, detail="'cfg' must be an object")
    try:
        config = GraphConfig.from_eap_ig_cfg(cfg, strict=False)
    except ValueError as exc:
        raise ReadProblemError("I101", "/cfg", None, detail=str(exc)) from None
    if config.d_model is not None and config.d_model > MAX_NEURON_CELLS:
        # no node could hold its neurons; and the number is written into the document
        raise ReadProblemError(
            "I128",
            "/cfg/d_model",
            None,
            detail=f"d_model {_short(config.d_model)} is over {MAX_NEURON_CELLS}",
        )
    try:
        return GraphUniverse(config)
    except ValueError as exc:
        raise ReadProblemError("I101", "/cfg", None, detail=str(exc)) from None


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:8]}… ({len(text)} digits)"


def _number(value: Any, pointer: str, what: str, nan_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReadProblemError("I101", pointer, None, detail=f"a {what} score must be a number")
    if isinstance(value, int) and abs(value) > F32_MAX:  # float() would overflow
        raise ReadProblemError("I105", pointer, None, **score_problem(what, math.inf))
    number = float(value)
    if math.isnan(number) and nan_ok:
        return number
    if not abs(number) <= F32_MAX:  # NaN, infinite, or infinite once stored as float32
        raise ReadProblemError("I105", pointer, None, **score_problem(what, number))
    return number


def neuron_cells_problem(n_forward: int, width: int) -> str | None:
    """Why neuron arrays of ``n_forward`` × ``width`` are not made, or None."""
    if n_forward * width > MAX_NEURON_CELLS:
        return (
            f"neuron arrays of {n_forward} nodes × d_model {width} would hold {n_forward * width} "
            f"entries, over the {MAX_NEURON_CELLS} an import makes"
        )
    return None


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
    if n_scored == universe.n_edges and bool(np.isnan(text.scores).all()):
        return 0  # NaN on every edge is no score: the binary form as mibspec exports it
    if 0 < n_scored < universe.n_edges:
        first = universe.edge_name(int(np.flatnonzero(~text.scored)[0]))
        raise ReadProblemError(
            "I106", "/edges/" + escape_pointer_token(first), None, scored=n_scored, total=universe.n_edges
        )
    # A literal such as 1e400 overflows to infinity; one beyond float32 would in the sidecar.
    refused = np.flatnonzero(~(np.abs(text.scores) <= F32_MAX))
    if refused.size:
        name = universe.edge_name(int(refused[0]))
        raise ReadProblemError(
            "I105",
            "/edges/" + escape_pointer_token(name) + "/score",
            None,
            **score_problem("edge", float(text.scores[refused[0]])),
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
            too_many = neuron_cells_problem(n, d_model)
            if too_many is not None:
                raise ReadProblemError("I128", "/cfg/d_model", None, detail=too_many)
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


def _pt_nodes(raw: dict[str, Any], key: str, index: Any, total: int, n_edges: int) -> list[int]:
    """The universe's indices of the node list ``key`` of a ``.pt`` graph (a list of names, or a
    dict name → position), each node of the universe once."""
    value = raw.get(key)
    if isinstance(value, dict) and all(isinstance(k, str) and type(v) is int for k, v in value.items()):
        listed = [name for name, _ in sorted(value.items(), key=lambda item: item[1])]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        listed = list(value)
    else:
        raise _MalformedError("I101", f"/{key}", detail=f"{key} must list the node names")
    try:
        found = [index(name) for name in listed]
    except ValueError as exc:
        raise _MalformedError("I102", f"/{key}", detail=str(exc)) from None
    if len(set(found)) != len(found):
        raise _MalformedError("I101", f"/{key}", detail=f"{key} lists a node twice")
    if len(found) != total:
        raise _MalformedError(
            "I103",
            f"/{key}",
            missing=n_edges,
            total=n_edges,
            first=f"{key} lists {len(found)} of the universe's {total} nodes",
        )
    return found


def _pt_array(raw: dict[str, Any], key: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """The tensor ``key`` as an array of ``dtype``, once it is known to be a tensor of numbers
    of ``shape`` (nothing of its size is made before)."""
    import numpy as np

    value = raw.get(key)
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        raise _MalformedError("I101", f"/{key}", detail=f"{key} must be a tensor of numbers")
    if value.shape != shape:
        raise _MalformedError("I101", f"/{key}", detail=f"{key} must have shape {shape}, not {value.shape}")
    return value.astype(dtype)


def _pt_finite(values: Any, key: str, what: str, nan_ok: bool) -> Any:
    """``values``, once each is finite as float32 (or NaN, unscored, where ``nan_ok``)."""
    import numpy as np

    bad = ~(np.abs(values) <= F32_MAX)
    if nan_ok:
        bad &= ~np.isnan(values)
    if bad.any():
        raise _MalformedError("I105", f"/{key}", **score_problem(what, float(values[bad][0])))
    return values


def _from_pt(raw: dict[str, Any]) -> EapIgGraph:
    """The graph a ``.pt`` file holds. Every array is checked (a tensor of numbers, of the shape
    the node lists give) before anything of that size is made."""
    import numpy as np

    try:
        universe = _universe(raw.get("cfg"))
    except ReadProblemError as exc:
        raise _MalformedError(exc.code, exc.pointer, **exc.params) from None
    rows = _pt_nodes(raw, "src_nodes", universe.forward_index, universe.n_forward, universe.n_edges)
    cols = _pt_nodes(raw, "dst_nodes", universe.backward_index, universe.n_backward, universe.n_edges)

    def matrix(key: str, dtype: Any) -> Any:
        values = _pt_array(raw, key, (len(rows), len(cols)), dtype)
        full = np.zeros(universe.edge_mask.shape, dtype=dtype)
        full[np.ix_(rows, cols)] = values
        return universe.from_matrix(full)

    def per_node(key: str, dtype: Any, fill: Any, width: int | None = None) -> Any:
        shape = (len(rows),) if width is None else (len(rows), width)
        values = _pt_array(raw, key, shape, dtype)
        out = np.full((universe.n_forward, *shape[1:]), fill, dtype=dtype)
        out[rows] = values
        return out

    if "edges_scores" not in raw:
        raise _MalformedError("I101", "", detail="the .pt graph has no edges_scores")
    scores = _pt_finite(matrix("edges_scores", np.float64), "edges_scores", "edge", False)
    in_graph = matrix("edges_in_graph", bool) if "edges_in_graph" in raw else np.zeros(universe.n_edges, bool)
    graph = EapIgGraph(universe, scores, in_graph)
    if raw.get("nodes_in_graph") is not None:
        graph.node_in_graph = per_node("nodes_in_graph", bool, False)
    if raw.get("nodes_scores") is not None:
        values = per_node("nodes_scores", np.float64, np.nan)
        graph.node_scores = _pt_finite(values, "nodes_scores", "node", True)
    for key in ("neurons_in_graph", "neurons_scores"):
        if raw.get(key) is None:
            continue
        width = _pt_neuron_width(key, universe)
        if key == "neurons_in_graph":
            graph.neurons = per_node(key, bool, False, width)
        else:
            graph.neuron_scores = _pt_finite(per_node(key, np.float64, np.nan, width), key, "neuron", True)
    return graph


def _pt_neuron_width(key: str, universe: Any) -> int:
    """The width of the neuron tensor ``key``: cfg.d_model, within :data:`MAX_NEURON_CELLS`
    for the universe's nodes."""
    width = universe.cfg.d_model
    if width is None:  # as for a JSON graph: the document's neuron tensors need the graph's d_model
        raise _MalformedError("I101", "/cfg", detail=f"{key} needs cfg.d_model")
    too_many = neuron_cells_problem(universe.n_forward, width)
    if too_many is not None:
        raise _MalformedError("I128", "/cfg/d_model", detail=too_many)
    return int(width)


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
