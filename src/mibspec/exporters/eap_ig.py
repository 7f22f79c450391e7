"""Export a circuit document as an EAP-IG graph: JSON (``.json``) or torch's format (``.pt``).

The JSON file has the layout EAP-IG's ``Graph.to_json`` writes and ``Graph.from_json``
reads: ``cfg``; ``nodes`` (every node, ``logits`` last, with ``in_graph``, and ``score``,
``neurons``, ``neurons_scores`` where the document has them, an unscored node or neuron
written as ``NaN`` as ``json.dump`` writes it); ``edges`` in EAP-IG's order with
``score`` and ``in_graph``. A document without edge scores is a circuit in MIB's binary
form: its edges carry ``in_graph`` and a ``NaN`` score (``Graph.from_json`` reads a score for
every edge; ``NaN`` on every edge is no score). Importing the file gives the same document.

The ``.pt`` file has the layout ``Graph.to_pt`` writes and ``Graph.from_pt`` reads, plain
containers and tensors only (``torch.load(weights_only=True)`` reads it): ``cfg`` (a dict),
``src_nodes`` and ``dst_nodes`` (node names in forward and slot order), ``edges_scores``
(float32, sources × slots, 0 where no edge exists) and ``edges_in_graph`` (bool, same
shape), ``nodes_in_graph`` (bool, one per source node), and where the document has them
``nodes_scores`` (float32, NaN for an unscored node), ``neurons_in_graph`` (bool) and
``neurons_scores`` (float32, NaN for an unscored neuron), sources × ``d_model``. The layout
requires edge scores, so a document without them is refused (a binary circuit goes to JSON).
Writing it needs torch (the ``recompute`` extra). Any other suffix is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mibspec.core.folders import InputFolder, OutsideFolderError
from mibspec.core.outputs import Inputs, write_atomic

__all__ = [
    "EAP_IG_SUFFIXES",
    "ExportError",
    "eap_ig_edge_order",
    "eap_ig_pt_bytes",
    "eap_ig_text",
    "export_eap_ig",
    "inside",
    "read_circuit",
    "read_conformant",
]


class ExportError(Exception):
    """The document cannot be exported: what is wrong, for the user."""


def inside(folder: Path, path: str) -> Path:
    """``folder/path``, once it stays inside ``folder`` with links resolved (a document's
    artifacts are read from its folder only).

    Raises:
        ExportError: it leads out of the folder.
    """
    try:
        return InputFolder(folder).check(folder / path)
    except OutsideFolderError as exc:
        raise ExportError(str(exc)) from None


def read_conformant(path: Path) -> dict[str, Any]:
    """The document at ``path``, once it verifies (without recomputation).

    Raises:
        ExportError: it does not verify.
    """
    from mibspec.verification import verify

    result = verify(path, recompute=False)
    if not result.valid:
        codes = sorted({f.code for f in result.findings if f.severity.value == "error"})
        raise ExportError(
            f"{path}: not a conformant document ({', '.join(codes)}); run `mibspec verify` on it"
        )
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def read_circuit(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A conformant circuit document and its sidecar tensors.

    Raises:
        ExportError: the document does not verify, or is not a circuit document.
    """
    from mibspec.core.sidecars import load_tensor, tensor_infos

    document = read_conformant(path)
    if document.get("kind") != "circuit":
        raise ExportError(f"{path}: a {document.get('kind')} document, not a circuit document")
    artifacts = {a["id"]: a for a in document.get("artifacts", [])}
    tensors: dict[str, Any] = {}
    for key, ref in document.items():
        if isinstance(ref, dict) and "artifact" in ref and "dtype" in ref:
            artifact = artifacts[ref["artifact"]]
            file = inside(path.parent, artifact["path"])
            info = tensor_infos(file, artifact["media_type"])[ref.get("tensor")]
            tensors[key] = load_tensor(file, info)
    return document, tensors


def _universe(document: dict[str, Any]) -> Any:
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    graph = document["graph"]
    return GraphUniverse(
        GraphConfig(
            graph["n_layers"], graph["n_heads"], graph.get("parallel_attn_mlp", False), graph.get("d_model")
        )
    )


def eap_ig_edge_order(universe: Any) -> list[str]:
    """Edge names in the order EAP-IG's ``Graph.from_model`` adds them (per layer: the
    residual stream's sources into each head's q, k, v, then into the MLP; logits last)."""
    cfg = universe.cfg
    names: list[str] = []
    residual = ["input"]
    for layer in range(cfg.n_layers):
        heads = [f"a{layer}.h{h}" for h in range(cfg.n_heads)]
        mlp = f"m{layer}"
        if cfg.parallel_attn_mlp:
            for src in residual:
                names += [f"{src}->{head}<{x}>" for head in heads for x in "qkv"]
                names.append(f"{src}->{mlp}")
            residual += [*heads, mlp]
        else:
            names += [f"{src}->{head}<{x}>" for src in residual for head in heads for x in "qkv"]
            residual += heads
            names += [f"{src}->{mlp}" for src in residual]
            residual.append(mlp)
    names += [f"{src}->logits" for src in residual]
    return names


def _number(value: float, scored: bool) -> str:
    return json.dumps(float(value) if scored else math.nan)


def eap_ig_text(document: dict[str, Any], tensors: dict[str, Any], circuit: int = 0) -> str:
    """The EAP-IG JSON text of one circuit (row ``circuit``) of a circuit document.

    Raises:
        ExportError: ``circuit`` is not a row of the document's membership.
    """
    import numpy as np

    universe = _universe(document)
    membership = tensors.get("membership")
    if membership is not None and not 0 <= circuit < membership.shape[0]:
        raise ExportError(
            f"the document has {membership.shape[0]} circuit(s); --circuit {circuit} is none of them"
        )
    if membership is None and circuit != 0:
        raise ExportError("the document holds scores only, no circuit")
    in_graph = membership[circuit] if membership is not None else np.zeros(universe.n_edges, dtype=bool)
    nodes_in = tensors.get("node_membership")
    node_row = nodes_in[circuit] if nodes_in is not None else None
    neurons = tensors.get("neuron_masks")
    neuron_row = neurons[circuit] if neurons is not None else None
    graph = document["graph"]
    cfg = {
        "n_layers": graph["n_layers"],
        "n_heads": graph["n_heads"],
        "parallel_attn_mlp": graph.get("parallel_attn_mlp", False),
    }
    if "d_model" in graph:
        cfg["d_model"] = graph["d_model"]
    parts = ['{"cfg": ', json.dumps(cfg), ', "nodes": {']
    node_entries = []
    for row, name in enumerate(universe.forward_names):
        fields = [f'"in_graph": {"true" if node_row is not None and node_row[row] else "false"}']
        if "node_scores" in tensors:
            fields.append(f'"score": {_number(tensors["node_scores"][row], tensors["node_scored"][row])}')
        if neuron_row is not None:
            fields.append(f'"neurons": {json.dumps(neuron_row[row].tolist())}')
        if "neuron_scores" in tensors:
            values = tensors["neuron_scores"][row].tolist()
            flags = tensors["neuron_scored"][row].tolist()
            fields.append(
                '"neurons_scores": ['
                + ", ".join(_number(v, s) for v, s in zip(values, flags, strict=True))
                + "]"
            )
        node_entries.append(f"{json.dumps(name)}: {{{', '.join(fields)}}}")
    node_entries.append('"logits": {"in_graph": true}')
    parts += [", ".join(node_entries), '}, "edges": {']
    names = eap_ig_edge_order(universe)
    ids = universe.edge_ids(names).tolist()
    flags = in_graph.tolist()
    scores = tensors["scores"].astype(np.float64).tolist() if "scores" in tensors else None
    entries = []
    for name, index in zip(names, ids, strict=True):
        flag = "true" if flags[index] else "false"
        if scores is None:
            entries.append(f'"{name}": {{"score": NaN, "in_graph": {flag}}}')
        else:
            entries.append(f'"{name}": {{"score": {scores[index]!r}, "in_graph": {flag}}}')
    parts += [", ".join(entries), "}}"]
    return "".join(parts)


def _circuit_row(tensors: dict[str, Any], key: str, circuit: int) -> Any:
    """Row ``circuit`` of the circuit tensor ``key`` (``None`` when the document has none),
    once ``circuit`` is a row of the membership."""
    membership = tensors.get("membership")
    if membership is None:
        if circuit != 0:
            raise ExportError("the document holds scores only, no circuit")
        return None
    if not 0 <= circuit < membership.shape[0]:
        raise ExportError(
            f"the document has {membership.shape[0]} circuit(s); --circuit {circuit} is none of them"
        )
    values = tensors.get(key)
    return None if values is None else values[circuit]


def _with_nan(values: Any, scored: Any) -> Any:
    """Scores as EAP-IG holds them: float32, NaN where the document marks an entry unscored."""
    import numpy as np

    return np.where(scored, values, np.nan).astype(np.float32)


def eap_ig_pt_bytes(document: dict[str, Any], tensors: dict[str, Any], circuit: int = 0) -> bytes:
    """The bytes of ``torch.save`` of circuit ``circuit`` of a circuit document, in the
    layout of EAP-IG's ``Graph.to_pt`` (module docstring).

    Raises:
        ExportError: torch is not installed, the document has no edge scores, or no such circuit.
    """
    import io

    import numpy as np

    try:
        import torch
    except ImportError:
        from mibspec.core.spec import install_hint

        raise ExportError(
            f"writing a .pt graph needs torch ({install_hint('recompute')}); write .json instead"
        ) from None
    if "scores" not in tensors:
        raise ExportError(
            "the document has no edge scores, which EAP-IG's .pt layout requires (edges_scores); "
            "a circuit without scores is written as .json"
        )

    def tensor(values: Any) -> Any:
        return torch.from_numpy(np.array(values))  # a writable copy: sidecar arrays are read-only

    universe = _universe(document)
    in_graph = _circuit_row(tensors, "membership", circuit)
    edges_in = np.zeros(universe.n_edges, dtype=bool) if in_graph is None else np.asarray(in_graph, bool)
    nodes_in = _circuit_row(tensors, "node_membership", circuit)
    graph = document["graph"]
    cfg = {k: graph[k] for k in ("n_layers", "n_heads", "parallel_attn_mlp", "d_model") if k in graph}
    cfg.setdefault("parallel_attn_mlp", False)
    saved: dict[str, Any] = {
        "cfg": cfg,
        "src_nodes": list(universe.forward_names),
        "dst_nodes": list(universe.backward_names),
        "edges_scores": tensor(universe.to_matrix(np.asarray(tensors["scores"], np.float32))),
        "edges_in_graph": tensor(universe.to_matrix(edges_in, fill=False)),
        "nodes_in_graph": tensor(
            np.zeros(universe.n_forward, bool) if nodes_in is None else np.asarray(nodes_in, bool)
        ),
    }
    if "node_scores" in tensors:
        saved["nodes_scores"] = tensor(_with_nan(tensors["node_scores"], tensors["node_scored"]))
    neurons = _circuit_row(tensors, "neuron_masks", circuit)
    if neurons is not None:
        saved["neurons_in_graph"] = tensor(np.asarray(neurons, bool))
    if "neuron_scores" in tensors:
        saved["neurons_scores"] = tensor(_with_nan(tensors["neuron_scores"], tensors["neuron_scored"]))
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    return buffer.getvalue()


#: What ``export eap-ig`` writes, by the suffix of its output.
EAP_IG_SUFFIXES = (".json", ".pt")


def export_eap_ig(source: Path, target: Path, *, circuit: int = 0) -> None:
    """Write circuit ``circuit`` of the circuit document ``source`` as an EAP-IG graph
    ``target``: JSON for ``.json``, torch's format for ``.pt`` (module docstring).

    Raises:
        ExportError: another suffix; the document is not a conformant circuit document, has no
            such circuit, or cannot take the ``.pt`` layout (no edge scores, no torch).
        mibspec.core.outputs.OutputPathError: ``target`` is one of the document's files.
    """
    suffix = target.suffix.lower()
    if suffix not in EAP_IG_SUFFIXES:
        raise ExportError(
            f"{target}: an EAP-IG graph is written as .json (Graph.from_json) or .pt (Graph.from_pt), "
            f"not {suffix or 'a file without a suffix'}"
        )
    document, tensors = read_circuit(source)
    inputs = Inputs([source, *(source.parent / a["path"] for a in document.get("artifacts", []))])
    inputs.refuse(target, "--output")
    if suffix == ".pt":
        write_atomic(target, eap_ig_pt_bytes(document, tensors, circuit))
    else:
        write_atomic(target, eap_ig_text(document, tensors, circuit))
