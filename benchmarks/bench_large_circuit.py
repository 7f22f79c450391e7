"""Validating a Llama-3.1-8B-sized circuit: mibspec (schema + rules, sidecar tensors) against
check-jsonschema on the same circuit in EAP-IG JSON form, in one run.

The circuit document holds scores for all 1,592,881 edges and 10 circuits (membership
rows) in one safetensors sidecar. The EAP-IG form is the JSON the public MIB code
writes: one object per edge with its score and membership. Goal: mibspec under 3 s and
at least 10x faster than check-jsonschema.

    python benchmarks/bench_large_circuit.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mibspec.reference_impl.graph import GraphConfig, GraphUniverse
from mibspec.reference_impl.metrics.circuit import DEFAULT_GRID, edges_at, rank_edges
from mibspec.reference_impl.producers.folder import artifact_entry

EAP_IG_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["cfg", "nodes", "edges"],
    "properties": {
        "cfg": {
            "type": "object",
            "required": ["n_layers", "n_heads"],
            "properties": {"n_layers": {"type": "integer"}, "n_heads": {"type": "integer"}},
        },
        "nodes": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["in_graph"],
                "properties": {"in_graph": {"type": "boolean"}, "score": {"type": "number"}},
            },
        },
        "edges": {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z0-9.]+->[a-z0-9.]+(<[qkv]>)?$"},
            "additionalProperties": {
                "type": "object",
                "required": ["score", "in_graph"],
                "properties": {"score": {"type": "number"}, "in_graph": {"type": "boolean"}},
                "additionalProperties": False,
            },
        },
    },
}


def _safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, object] = {}
    offset = 0
    names = {"bool": "BOOL", "float32": "F32"}
    for name, array in tensors.items():
        header[name] = {
            "dtype": names[str(array.dtype)],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(len(raw).to_bytes(8, "little") + raw)
        for array in tensors.values():
            handle.write(np.ascontiguousarray(array).tobytes())


def build(folder: Path) -> tuple[Path, Path, int]:
    universe = GraphUniverse(GraphConfig(32, 32, False, 4096))
    n = universe.n_edges
    rng = np.random.default_rng(0)
    scores = rng.standard_normal(n).astype(np.float32)
    order = rank_edges(scores, "signed")
    membership = np.zeros((len(DEFAULT_GRID), n), dtype=bool)
    entries = []
    for row, k in enumerate(DEFAULT_GRID):
        count = edges_at(k, n, "floor")
        membership[row, order[:count]] = True
        entries.append(
            {
                "index": row,
                "k": k,
                "ranking": "signed",
                "n_edges": count,
                "weighted_size": universe.weighted_edge_count(membership[row]),
            }
        )
    sidecar = folder / "circuit.safetensors"
    _safetensors(sidecar, {"scores": scores, "membership": membership})
    data = sidecar.read_bytes()
    document = {
        "spec_version": "1.0",
        "kind": "circuit",
        "graph": {"convention": "eap-ig", "n_layers": 32, "n_heads": 32, "d_model": 4096, "n_edges": n},
        "granularity": "edge",
        "scores": {"artifact": "tensors", "tensor": "scores", "shape": [n], "dtype": "float32"},
        "membership": {
            "artifact": "tensors",
            "tensor": "membership",
            "shape": [len(DEFAULT_GRID), n],
            "dtype": "bool",
        },
        "circuits": entries,
        "artifacts": [artifact_entry(data, "tensors", "circuit", sidecar.name, "application/x-safetensors")],
    }
    doc_path = folder / "circuit.json"
    doc_path.write_text(json.dumps(document, indent=1))
    # The same scores and the k = 0.1 circuit in EAP-IG JSON form.
    names = universe.edge_names()
    in_graph = membership[DEFAULT_GRID.index(0.1)]
    eap = folder / "eap_ig_graph.json"
    with eap.open("w") as handle:
        handle.write(
            '{"cfg": {"n_layers": 32, "n_heads": 32, "parallel_attn_mlp": false, "d_model": 4096},\n'
        )
        nodes = {name: {"in_graph": True} for name in universe.forward_names}
        handle.write(f' "nodes": {json.dumps(nodes)},\n "edges": {{')
        handle.write(
            ",".join(
                f'"{name}": {{"score": {float(score)!r}, "in_graph": {"true" if keep else "false"}}}'
                for name, score, keep in zip(names, scores.tolist(), in_graph.tolist(), strict=True)
            )
        )
        handle.write("}}\n")
    (folder / "eap_ig.schema.json").write_text(json.dumps(EAP_IG_SCHEMA))
    return doc_path, eap, n


def timed(command: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, completed.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the inputs in this folder and keep them")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="mibspec-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        doc, eap, n = build(folder)
        print(
            f"edges: {n:,}; sidecar {(folder / 'circuit.safetensors').stat().st_size / 1e6:.1f} MB; "
            f"EAP-IG JSON {eap.stat().st_size / 1e6:.1f} MB"
        )
        ours, code = timed([sys.executable, "-m", "mibspec", "verify", str(doc), "--no-recompute"])
        print(f"mibspec verify (schema + rules, whole process): {ours:.2f} s, exit {code}")
        checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
        theirs, code = timed([checker, "--schemafile", str(folder / "eap_ig.schema.json"), str(eap)])
        print(f"check-jsonschema on the EAP-IG JSON (whole process): {theirs:.2f} s, exit {code}")
        print(
            f"ratio: {theirs / ours:.1f}x (goal >= 10x); "
            f"mibspec goal < 3 s: {'met' if ours < 3 else 'NOT met'}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder)


if __name__ == "__main__":
    main()
