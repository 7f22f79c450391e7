"""``export eap-ig -o graph.pt`` writes torch's format in the layout of EAP-IG's
``Graph.to_pt`` (plain containers and tensors, read with ``weights_only=True``), and importing
it gives the same circuit; any suffix but ``.json`` and ``.pt`` is refused."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _mib_files import edge_names, graph, node_names, write
from safetensors.numpy import load_file

import mibspec
from mibspec.exporters import ExportError, export_eap_ig
from mibspec.importers import import_eap_ig

torch = pytest.importorskip("torch")


def _import(source: Path, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    result = import_eap_ig(source, out)
    assert result.ok, [str(f) for f in result.findings]
    assert mibspec.verify(out / "circuit.json", recompute=False).valid
    return json.loads((out / "circuit.json").read_text()), load_file(str(out / "circuit.safetensors"))


def _dst_names(layers: int, heads: int) -> list[str]:
    """EAP-IG's destination slots (``Graph.get_dst_nodes``), written out here."""
    names = []
    for layer in range(layers):
        names += [f"a{layer}.h{h}<{x}>" for x in "qkv" for h in range(heads)] + [f"m{layer}"]
    return [*names, "logits"]


@pytest.mark.parametrize(
    "levels",
    [{}, {"node_scores": True}, {"neurons": True, "node_scores": True}],
    ids=["edge", "node", "neuron"],
)
def test_pt_export_round_trips_to_the_same_circuit(tmp_path: Path, levels: dict[str, bool]) -> None:
    data = graph(seed=3, **levels)
    first, first_tensors = _import(write(tmp_path / "graph.json", data), tmp_path / "first")
    exported = tmp_path / "graph.pt"
    export_eap_ig(tmp_path / "first" / "circuit.json", exported)
    second, second_tensors = _import(exported, tmp_path / "second")
    assert {k: v for k, v in second.items() if k != "description"} == {
        k: v for k, v in first.items() if k != "description"
    }
    assert sorted(second_tensors) == sorted(first_tensors)
    for name, values in first_tensors.items():
        np.testing.assert_array_equal(second_tensors[name], values, err_msg=name)


def test_pt_export_has_the_layout_of_graph_to_pt(tmp_path: Path) -> None:
    data = graph(seed=5, node_scores=True, neurons=True)
    _import(write(tmp_path / "graph.json", data), tmp_path / "first")
    exported = tmp_path / "graph.pt"
    export_eap_ig(tmp_path / "first" / "circuit.json", exported)
    saved = torch.load(exported, weights_only=True)
    assert set(saved) == {
        "cfg",
        "src_nodes",
        "dst_nodes",
        "edges_scores",
        "edges_in_graph",
        "nodes_in_graph",
        "nodes_scores",
        "neurons_in_graph",
        "neurons_scores",
    }
    assert saved["cfg"] == data["cfg"]
    sources, slots = node_names(2, 2), _dst_names(2, 2)
    assert saved["src_nodes"] == sources
    assert saved["dst_nodes"] == slots
    assert saved["edges_scores"].shape == (len(sources), len(slots))
    assert saved["edges_scores"].dtype == torch.float32
    assert saved["edges_in_graph"].dtype == torch.bool
    assert len(edge_names(2, 2)) == int((saved["edges_scores"] != 0).sum())  # scores are never 0 here
    for name in edge_names(2, 2):
        src, dst = name.split("->")
        cell = (sources.index(src), slots.index(dst))
        assert float(saved["edges_scores"][cell]) == data["edges"][name]["score"]
        assert bool(saved["edges_in_graph"][cell]) == data["edges"][name]["in_graph"]
    for row, name in enumerate(sources):
        node = data["nodes"][name]
        assert bool(saved["nodes_in_graph"][row]) == node["in_graph"]
        score = float(saved["nodes_scores"][row])
        assert math.isnan(score) if math.isnan(node["score"]) else score == node["score"]
        assert saved["neurons_in_graph"][row].tolist() == node["neurons"]
        for got, want in zip(saved["neurons_scores"][row].tolist(), node["neurons_scores"], strict=True):
            assert math.isnan(got) if math.isnan(want) else got == want


def test_a_circuit_without_scores_has_no_pt_form(tmp_path: Path) -> None:
    _import(write(tmp_path / "graph.json", graph(scores=False)), tmp_path / "first")
    with pytest.raises(ExportError, match="edges_scores"):
        export_eap_ig(tmp_path / "first" / "circuit.json", tmp_path / "graph.pt")
    assert not (tmp_path / "graph.pt").exists()


@pytest.mark.parametrize("name", ["graph.txt", "graph", "graph.pth"])
def test_other_suffixes_are_refused(tmp_path: Path, name: str) -> None:
    _import(write(tmp_path / "graph.json", graph()), tmp_path / "first")
    source = str(tmp_path / "first" / "circuit.json")
    run = subprocess.run(
        [sys.executable, "-m", "mibspec", "export", "eap-ig", source, "-o", str(tmp_path / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert ".json" in run.stderr
    assert ".pt" in run.stderr
    assert not (tmp_path / name).exists()


def test_the_command_writes_pt_that_the_import_command_reads(tmp_path: Path) -> None:
    _import(write(tmp_path / "graph.json", graph(seed=9, node_scores=True)), tmp_path / "first")

    def mibspec_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mibspec", *args], capture_output=True, text=True, check=False
        )

    exported = tmp_path / "graph.pt"
    done = mibspec_run("export", "eap-ig", str(tmp_path / "first" / "circuit.json"), "-o", str(exported))
    assert done.returncode == 0, done.stdout + done.stderr
    assert exported.read_bytes()[:2] == b"PK"  # torch's zip format, not JSON text
    back = mibspec_run("import", "eap-ig", str(exported), "-o", str(tmp_path / "second"))
    assert back.returncode == 0, back.stdout + back.stderr
    for name in ("membership", "scores", "node_scores", "node_scored", "node_membership"):
        first = load_file(str(tmp_path / "first" / "circuit.safetensors"))[name]
        np.testing.assert_array_equal(
            load_file(str(tmp_path / "second" / "circuit.safetensors"))[name], first
        )
