"""Validating a Llama-3.1-8B-sized circuit: mibspec (schema + rules, sidecar tensors) against
check-jsonschema on the same circuit in EAP-IG JSON form, in one run.

The circuit document holds scores for all 1,592,881 edges and 10 circuits (membership
rows) in one safetensors sidecar. The EAP-IG form is the JSON the public MIB code
writes: one object per edge with its score and membership. Goal: mibspec under 3 s and
at least 10x faster than check-jsonschema.

    python benchmarks/bench_large_circuit.py [--keep DIR] [--size llama3|gpt2|tiny] [--json OUT]

``--size`` picks the graph (default ``llama3``; the smaller ones are smoke runs). When
check-jsonschema is not found the benchmark says so and exits 2.
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

from mibspec.metrics.circuit import DEFAULT_GRID, edges_at, rank_edges
from mibspec.metrics.graph import GraphConfig, GraphUniverse
from mibspec.reference_impl.scoring.folder import artifact_entry

SIZES = {"llama3": (32, 32, 4096), "gpt2": (12, 12, 768), "tiny": (2, 2, 8)}
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


def build(folder: Path, layers: int = 32, heads: int = 32, d_model: int = 4096) -> tuple[Path, Path, int]:
    universe = GraphUniverse(GraphConfig(layers, heads, False, d_model))
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
        "graph": {
            "convention": "eap-ig",
            "n_layers": layers,
            "n_heads": heads,
            "d_model": d_model,
            "n_edges": n,
        },
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
            f'{{"cfg": {{"n_layers": {layers}, "n_heads": {heads}, "parallel_attn_mlp": false, '
            f'"d_model": {d_model}}},\n'
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the inputs in this folder and keep them")
    parser.add_argument("--size", choices=sorted(SIZES), default="llama3")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    checker = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    if not Path(checker).is_file():
        reason = "check-jsonschema not found (on PATH or beside this Python)"
        print(f"skipped: {reason}")
        if args.json:
            args.json.write_text(json.dumps({"status": "not run", "reason": reason}), encoding="utf-8")
        return 2
    folder = args.keep or Path(tempfile.mkdtemp(prefix="mibspec-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        doc, eap, n = build(folder, *SIZES[args.size])
        print(
            f"edges: {n:,}; sidecar {(folder / 'circuit.safetensors').stat().st_size / 1e6:.1f} MB; "
            f"EAP-IG JSON {eap.stat().st_size / 1e6:.1f} MB"
        )
        ours, code = timed([sys.executable, "-m", "mibspec", "verify", str(doc), "--no-recompute"])
        print(f"mibspec verify (schema + rules, whole process): {ours:.2f} s, exit {code}")
        theirs, their_code = timed([checker, "--schemafile", str(folder / "eap_ig.schema.json"), str(eap)])
        print(f"check-jsonschema on the EAP-IG JSON (whole process): {theirs:.2f} s, exit {their_code}")
        print(
            f"ratio: {theirs / ours:.1f}x (goal >= 10x); "
            f"mibspec goal < 3 s: {'met' if ours < 3 else 'NOT met'}"
        )
        if args.json:
            figures = [
                {"name": "edges", "value": n},
                # both documents are valid: a time of a run that failed compares nothing
                {
                    "name": "exit codes: mibspec, check-jsonschema",
                    "value": f"{code}, {their_code}",
                    "goal": "0, 0",
                    "met": code == their_code == 0,
                },
                {
                    "name": "mibspec verify --no-recompute, wall",
                    "value": ours,
                    "unit": "s",
                    "goal": "< 3",
                    "met": ours < 3,
                },
                {"name": "check-jsonschema on the EAP-IG JSON, wall", "value": theirs, "unit": "s"},
                {
                    "name": "check-jsonschema / mibspec",
                    "value": theirs / ours,
                    "unit": "×",
                    "goal": "≥ 10",
                    "met": theirs / ours >= 10,
                },
            ]
            args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")
    finally:
        if args.keep is None:
            shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
