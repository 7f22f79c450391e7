"""`mibspec import eap-ig` against a bare `json.load` of the same EAP-IG graph JSON.

Run: ``python benchmarks/bench_eap_ig_import.py [--size llama3|gpt2|tiny] [--keep FILE] [--json OUT]``.
It writes a synthetic graph of the chosen size (``llama3``: 32 layers, 32 heads,
1,592,881 edges, about 113 MB, as EAP-IG's ``json.dump`` writes it), then runs, each in
a fresh process: ``json.load`` of the file, and ``import_eap_ig`` of it (the library call
the command makes, without the verification that follows). It prints CPU seconds and the
peak resident memory of each process and the ratios (goals: time ≤ 1.5×, memory ≤ 1.3×).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SIZES = {"llama3": (32, 32, 4096), "gpt2": (12, 12, 768), "tiny": (2, 2, 8)}


def write_graph(path: Path, layers: int, heads: int, d_model: int, seed: int) -> int:
    """Write an EAP-IG-style graph JSON (edges in EAP-IG's order); return its edge count."""
    from mibspec.exporters.eap_ig import eap_ig_edge_order
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    rng = np.random.default_rng(seed)
    universe = GraphUniverse(GraphConfig(layers, heads, False, d_model))
    names = eap_ig_edge_order(universe)
    residual = list(universe.forward_names)
    scores = rng.standard_normal(len(names)).astype(np.float32).astype(np.float64).tolist()
    chosen = rng.random(len(names)) < 0.001
    with path.open("w", encoding="utf-8") as out:
        out.write(
            f'{{"cfg": {{"n_layers": {layers}, "n_heads": {heads}, "parallel_attn_mlp": false, '
            f'"d_model": {d_model}}}, "nodes": {{'
        )
        out.write(", ".join(f'"{n}": {{"in_graph": true}}' for n in [*residual, "logits"]))
        out.write('}, "edges": {')
        for i, (name, score) in enumerate(zip(names, scores, strict=True)):
            flag = "true" if chosen[i] else "false"
            out.write(f'{", " if i else ""}"{name}": {{"score": {score!r}, "in_graph": {flag}}}')
        out.write("}}")
    return len(names)


def measure(code: str) -> tuple[float, float]:
    """CPU seconds (user + system) and peak resident MiB of one fresh Python process."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"benchmark process failed ({status}): {code}")
    # ru_maxrss is in KiB on Linux.
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="llama3")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write the graph here (kept) instead of a temporary file")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        graph = args.keep or Path(tmp) / "graph.json"
        n_edges = write_graph(graph, *SIZES[args.size], seed=args.seed)
        out = Path(tmp) / "out"
        bare = measure(f"import json\nwith open({str(graph)!r}) as f: json.load(f)")
        ours = measure(
            "from pathlib import Path\nfrom mibspec.importers import import_eap_ig\n"
            f"r = import_eap_ig(Path({str(graph)!r}), Path({str(out)!r}))\n"
            "assert r.ok, [str(f) for f in r.findings]"
        )
        size_mb = graph.stat().st_size / 1e6
    print(f"graph: {args.size}, {n_edges} edges, {size_mb:.1f} MB")
    print(f"{'':24}{'CPU s':>10}{'peak MiB':>12}")
    print(f"{'json.load':24}{bare[0]:>10.2f}{bare[1]:>12.0f}")
    print(f"{'import_eap_ig':24}{ours[0]:>10.2f}{ours[1]:>12.0f}")
    print(f"{'ratio (goal 1.5 / 1.3)':24}{ours[0] / bare[0]:>10.2f}{ours[1] / bare[1]:>12.2f}")
    if args.json:
        time_ratio, memory_ratio = ours[0] / bare[0], ours[1] / bare[1]
        figures = [
            {"name": "graph", "value": f"{args.size}: {n_edges} edges, {size_mb:.1f} MB"},
            {"name": "json.load, CPU", "value": bare[0], "unit": "s"},
            {"name": "json.load, peak memory", "value": bare[1], "unit": "MiB"},
            {"name": "import_eap_ig, CPU", "value": ours[0], "unit": "s"},
            {"name": "import_eap_ig, peak memory", "value": ours[1], "unit": "MiB"},
            {"name": "time / json.load", "value": time_ratio, "goal": "≤ 1.5", "met": time_ratio <= 1.5},
            {
                "name": "peak memory / json.load",
                "value": memory_ratio,
                "goal": "≤ 1.3",
                "met": memory_ratio <= 1.3,
            },
        ]
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
