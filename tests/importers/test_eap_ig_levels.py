"""EAP-IG graphs at edge, node and neuron level, NaN as unscored, node in_graph flags, the
binary form, and the way back (export eap-ig): import → export → import is the identity."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _mib_files import edge_names, graph, node_names, peers, write
from safetensors.numpy import load_file

import mibspec
from mibspec.exporters import export_eap_ig
from mibspec.importers import import_eap_ig


def _import(source: Path, out: Path, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    result = import_eap_ig(source, out, **kwargs)
    assert result.ok, [str(f) for f in result.findings]
    verified = mibspec.verify(out / "circuit.json", recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]
    document = json.loads((out / "circuit.json").read_text())
    return document, load_file(str(out / "circuit.safetensors"))


def _codes(result: Any) -> list[str]:
    return [f.code for f in result.findings]


def test_nan_node_scores_are_recorded_as_unscored_at_node_granularity(tmp_path: Path) -> None:
    data = graph(node_scores=True)
    source = write(tmp_path / "graph.json", data)
    assert "NaN" in source.read_text()  # as json.dump writes an unscored node
    document, tensors = _import(source, tmp_path / "out")
    assert document["granularity"] == "node"
    for row, name in enumerate(node_names(2, 2)):
        score = data["nodes"][name]["score"]
        assert bool(tensors["node_scored"][row]) == (not math.isnan(score))
        assert tensors["node_scores"][row] == (0.0 if math.isnan(score) else np.float32(score))


def test_neuron_masks_and_scores_are_kept_at_neuron_granularity(tmp_path: Path) -> None:
    data = graph(neurons=True, node_scores=True)
    document, tensors = _import(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert document["granularity"] == "neuron"
    for row, name in enumerate(node_names(2, 2)):
        node = data["nodes"][name]
        assert tensors["neurons"][0, row].tolist() == node["neurons"]
        scored = [not math.isnan(v) for v in node["neurons_scores"]]
        assert tensors["neuron_scored"][row].tolist() == scored
        expected = [np.float32(v) if s else 0.0 for v, s in zip(node["neurons_scores"], scored, strict=True)]
        assert tensors["neuron_scores"][row].tolist() == expected


def test_node_in_graph_flags_are_carried_over(tmp_path: Path) -> None:
    data = graph()
    document, tensors = _import(write(tmp_path / "graph.json", data), tmp_path / "out")
    flags = [data["nodes"][name]["in_graph"] for name in node_names(2, 2)]
    assert tensors["node_membership"][0].tolist() == flags
    assert document["node_membership"]["shape"] == [1, len(flags)]


def test_binary_form_is_a_circuit_without_scores(tmp_path: Path) -> None:
    data = graph(scores=False)
    document, tensors = _import(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert "scores" not in document
    assert "scores" not in tensors
    assert document["circuits"][0]["n_edges"] == sum(e["in_graph"] for e in data["edges"].values())


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda text: text.replace('"score": ', '"score": Infinity, "x": ', 1), "I105"),
        (lambda text: text.replace('{"score": ', '{"score": NaN, "was": ', 1), "I105"),
        (
            lambda text: text.replace(
                '"edges": {', '"edges": {"input->a0.h0<q>": {"score": 1.0, "in_graph": false}, ', 1
            ),
            "P102",
        ),
        (
            lambda text: text.replace(
                '"edges": {', '"edges": {"m1->a0.h0<q>": {"score": 1.0, "in_graph": false}, ', 1
            ),
            "I102",
        ),
        (lambda text: text.replace('"score": ', '"skore": ', 1), "I106"),
        (lambda text: text[:-5], "P101"),
        (lambda text: re.sub(r'"score": [^,]+', '"score": 1e400', text, count=1), "I105"),
    ],
    ids=[
        "infinity",
        "nan-edge-score",
        "repeated-edge",
        "unknown-edge",
        "partial-scores",
        "truncated",
        "overflow",
    ],
)
def test_bad_graphs_are_refused_with_a_code(tmp_path: Path, edit: Any, code: str) -> None:
    source = tmp_path / "graph.json"
    source.write_text(edit(json.dumps(graph())))
    result = import_eap_ig(source, tmp_path / "out")
    assert _codes(result) == [code]
    assert result.findings[0].line is not None
    assert not (tmp_path / "out").exists()


def test_infinite_node_score_is_refused(tmp_path: Path) -> None:
    data = graph(node_scores=True)
    data["nodes"]["m0"]["score"] = float("inf")
    result = import_eap_ig(write(tmp_path / "graph.json", data), tmp_path / "out")
    assert _codes(result) == ["I105"]
    assert result.findings[0].pointer == "/nodes/m0/score"
    text = (tmp_path / "graph.json").read_text()
    line, column = result.findings[0].line, result.findings[0].column
    assert line is not None
    assert column is not None
    assert text.splitlines()[line - 1][column - 1 :].startswith('"score": Infinity')


@pytest.mark.parametrize(
    "kind", ["edge", "node", "neuron", "binary"], ids=["edge", "node", "neuron", "binary"]
)
def test_import_export_import_is_the_identity(tmp_path: Path, kind: str) -> None:
    data = graph(
        node_scores=kind in ("node", "neuron"), neurons=kind == "neuron", scores=kind != "binary", seed=5
    )
    source = write(tmp_path / "a" / "graph.json", data)
    _import(source, tmp_path / "first")
    exported = tmp_path / "b" / "graph.json"
    export_eap_ig(tmp_path / "first" / "circuit.json", exported)
    # Written as EAP-IG's json.dump writes the same graph; a binary circuit with a NaN score on
    # every edge, since Graph.from_json reads info['score'] for each edge.
    if kind == "binary":
        data["edges"] = {name: {"score": math.nan, **entry} for name, entry in data["edges"].items()}
        write(tmp_path / "expected" / "graph.json", data)
        assert exported.read_text() == (tmp_path / "expected" / "graph.json").read_text()
    else:
        assert exported.read_text() == source.read_text()
    _import(exported, tmp_path / "second")
    for name in ("circuit.json", "circuit.safetensors"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_pt_graph_imports_as_its_json_twin(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    data = graph(node_scores=True, neurons=True, seed=2)
    write(tmp_path / "json" / "graph.x", data)
    edges = edge_names(2, 2)
    sources = node_names(2, 2)
    slots = [
        slot
        for layer in range(2)
        for slot in [*(f"a{layer}.h{h}<{x}>" for x in "qkv" for h in range(2)), f"m{layer}"]
    ] + ["logits"]
    scores = torch.zeros(len(sources), len(slots))
    in_graph = torch.zeros(len(sources), len(slots), dtype=torch.bool)
    for name in edges:
        src, dst = name.split("->")
        scores[sources.index(src), slots.index(dst)] = data["edges"][name]["score"]
        in_graph[sources.index(src), slots.index(dst)] = data["edges"][name]["in_graph"]
    nodes = [data["nodes"][n] for n in sources]
    payload = {
        "cfg": data["cfg"],
        "src_nodes": sources,
        "dst_nodes": slots,
        "edges_scores": scores,
        "edges_in_graph": in_graph,
        "nodes_in_graph": torch.tensor([n["in_graph"] for n in nodes]),
        "nodes_scores": torch.tensor([n["score"] for n in nodes]),
        "neurons_in_graph": torch.tensor([n["neurons"] for n in nodes]),
        "neurons_scores": torch.tensor([n["neurons_scores"] for n in nodes]),
    }
    (tmp_path / "pt").mkdir()
    torch.save(payload, tmp_path / "pt" / "graph.pt")
    (tmp_path / "json" / "graph.x").rename(tmp_path / "json" / "graph.json")
    json_doc, json_tensors = _import(tmp_path / "json" / "graph.json", tmp_path / "from-json")
    pt_doc, pt_tensors = _import(tmp_path / "pt" / "graph.pt", tmp_path / "from-pt")
    assert {k: v for k, v in json_doc.items() if k not in ("description", "artifacts")} == {
        k: v for k, v in pt_doc.items() if k not in ("description", "artifacts")
    }
    assert json_tensors.keys() == pt_tensors.keys()
    for key in json_tensors:
        assert np.array_equal(json_tensors[key], pt_tensors[key]), key


@pytest.mark.slow
def test_import_memory_is_bounded_by_a_small_multiple_of_the_file(tmp_path: Path) -> None:
    """Edges go into flat arrays, not Python objects: a GPT-2-sized graph (32,491 edges)
    costs a small multiple of its text, where building the parsed object costs over 10×."""
    source = write(tmp_path / "graph.json", graph(12, 12, 768, seed=1, chosen=0.02))
    size = source.stat().st_size
    tracemalloc.start()
    try:
        result = import_eap_ig(source, tmp_path / "out")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok
    tracemalloc.start()
    try:
        json.loads(source.read_text())
        _, parsed_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * size < parsed_peak


# ---------------------------------------------------------------- the public IOI example

PEERS = peers()
needs_peers = pytest.mark.skipif(PEERS is None, reason="the public MIB code (MIBSPEC_PEERS) is not here")


@needs_peers
def test_public_ioi_example_round_trips_with_its_node_flags(tmp_path: Path) -> None:
    assert PEERS is not None
    public = PEERS / "mib-circuit-track" / "circuits" / "ioi-eap-ig.json"
    data = json.loads(public.read_text())
    document, tensors = _import(public, tmp_path / "first")
    assert document["graph"]["n_edges"] == len(data["edges"]) == 32491
    flags = [data["nodes"][name]["in_graph"] for name in node_names(12, 12)]
    assert tensors["node_membership"][0].tolist() == flags
    # logits is always in the graph and not stored: every flag of the file is accounted for
    assert int(tensors["node_membership"].sum()) + 1 == sum(n["in_graph"] for n in data["nodes"].values())
    assert document["circuits"][0]["n_edges"] == sum(e["in_graph"] for e in data["edges"].values())
    exported = tmp_path / "b" / public.name
    export_eap_ig(tmp_path / "first" / "circuit.json", exported)
    assert exported.read_bytes() == public.read_bytes()
    _import(exported, tmp_path / "second")
    for name in ("circuit.json", "circuit.safetensors"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


@pytest.mark.slow
@needs_peers
def test_public_ioi_example_at_node_level(tmp_path: Path) -> None:
    assert PEERS is not None
    data = json.loads((PEERS / "mib-circuit-track" / "circuits" / "ioi-eap-ig.json").read_text())
    rng = np.random.default_rng(7)
    for i, name in enumerate(node_names(12, 12)):
        data["nodes"][name]["score"] = (
            float("nan") if i % 5 == 0 else float(np.float32(rng.standard_normal()))
        )
    source = write(tmp_path / "a" / "ioi-node.json", data)
    document, tensors = _import(source, tmp_path / "first")
    assert document["granularity"] == "node"
    assert int((~tensors["node_scored"]).sum()) == len(range(0, len(node_names(12, 12)), 5))
    exported = tmp_path / "b" / source.name
    export_eap_ig(tmp_path / "first" / "circuit.json", exported)
    assert exported.read_bytes() == source.read_bytes()
    _import(exported, tmp_path / "second")
    assert (tmp_path / "first" / "circuit.json").read_bytes() == (
        tmp_path / "second" / "circuit.json"
    ).read_bytes()


@pytest.mark.skipif(
    not os.environ.get("MIBSPEC_EAP_IG_PYTHON") or PEERS is None,
    reason="EAP-IG's own environment (MIBSPEC_EAP_IG_PYTHON, a Python with transformer-lens) "
    "and the public code (MIBSPEC_PEERS) are needed to load the export with Graph.from_json",
)
def test_exported_graph_loads_in_eap_ig(tmp_path: Path) -> None:
    assert PEERS is not None
    data = graph(node_scores=True, seed=4)
    _import(write(tmp_path / "graph.json", data), tmp_path / "out")
    exported = tmp_path / "exported.json"
    export_eap_ig(tmp_path / "out" / "circuit.json", exported)
    code = (
        "import json, math, sys\nfrom eap.graph import Graph\n"
        "g = Graph.from_json(sys.argv[1])\n"
        "print(json.dumps({n: [float(e.score), bool(e.in_graph)] for n, e in g.edges.items()}))"
    )
    env = {**os.environ, "PYTHONPATH": str(PEERS / "eap-ig" / "src")}
    run = subprocess.run(
        [os.environ["MIBSPEC_EAP_IG_PYTHON"], "-c", code, str(exported)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    loaded = json.loads(run.stdout)
    assert loaded == {n: [e["score"], e["in_graph"]] for n, e in data["edges"].items()}
