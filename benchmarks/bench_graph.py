"""Timings of the graph universe on the largest MIB model (Llama-3.1-8B: 32 layers, 32 heads).

Run: ``python benchmarks/bench_graph.py [--repeat N] [--seed S] [--json OUT]``. Each figure is the
best of N runs (wall clock), so it measures the code rather than machine noise.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.metrics.graph import GraphConfig, GraphUniverse

LLAMA = GraphConfig(n_layers=32, n_heads=32, d_model=4096)


def _best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> int:
    """Print one line per operation: name, best time, a check value."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per operation (best is kept)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random circuit and scores")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    rows: list[tuple[str, float, str]] = []
    seconds, universe = _best_of(args.repeat, lambda: GraphUniverse(LLAMA))
    rows.append(("build universe", seconds, f"n_edges={universe.n_edges}"))

    def index_maps() -> int:
        fresh = GraphUniverse(LLAMA)
        return int(fresh.edge_src[-1] + fresh.edge_dst[-1] + fresh.edge_index[0, 0])

    seconds, _ = _best_of(args.repeat, index_maps)
    rows.append(("build + edge_src/edge_dst/edge_index", seconds, ""))

    circuit = rng.random(universe.n_edges) < 0.10
    seconds, pruned = _best_of(args.repeat, lambda: universe.prune(circuit))
    rows.append(("prune 10% random circuit", seconds, f"{int(circuit.sum())} -> {int(pruned.sum())} edges"))

    matrix = universe.to_matrix(circuit, fill=False)
    seconds, _ = _best_of(args.repeat, lambda: universe.prune(matrix))
    rows.append(("prune 10% circuit, matrix form", seconds, ""))

    full = np.ones(universe.n_edges, dtype=bool)
    seconds, pruned_full = _best_of(args.repeat, lambda: universe.prune(full))
    rows.append(("prune full circuit", seconds, f"{int(pruned_full.sum())} edges"))

    fraction = rng.random(universe.n_forward)
    seconds, size = _best_of(args.repeat, lambda: universe.weighted_edge_count(circuit, fraction))
    rows.append(("weighted_edge_count (with prune)", seconds, f"{size:.3f}"))

    seconds, reached = _best_of(args.repeat, lambda: universe.reachable_from_input(circuit))
    rows.append(("reachable_from_input", seconds, f"{int(reached.sum())} nodes"))

    seconds, names = _best_of(max(1, args.repeat // 2), universe.edge_names)
    rows.append(("edge_names (all)", seconds, f"{len(names)} names"))

    seconds, ids = _best_of(max(1, args.repeat // 2), lambda: universe.edge_ids(names))
    ok = bool(np.array_equal(ids, np.arange(universe.n_edges)))
    rows.append(("edge_ids (all names)", seconds, f"round trip {'ok' if ok else 'FAILED'}"))

    scores = rng.standard_normal(universe.n_edges)

    def greedy(n: int) -> Callable[[], Any]:
        return lambda: universe.greedy_select(scores, n, absolute=True)

    for k in (0.001, 0.1, 1.0):
        seconds, chosen = _best_of(max(1, args.repeat // 2), greedy(int(k * universe.n_edges)))
        rows.append((f"greedy_select |score|, k={k}", seconds, f"{int(chosen.sum())} edges"))

    width = max(len(name) for name, _, _ in rows)
    for name, seconds, note in rows:
        print(f"{name:<{width}}  {seconds * 1e3:9.1f} ms  {note}")
    if args.json:
        figures = [
            {"name": name + (f" ({note})" if note else ""), "value": seconds * 1e3, "unit": "ms"}
            for name, seconds, note in rows
        ]
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
