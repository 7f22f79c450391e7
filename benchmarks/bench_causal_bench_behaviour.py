"""Time the CAUSAL-BENCH transformer behaviour against the engine's node circuits.

A coalition S of heads and MLPs is the engine's node circuit ``{input} ∪ S`` (ME-6), so the
baseline evaluates ``node_circuit_edges`` with ``evaluate_circuits``. The behaviour instead
replaces the outputs of inactive components in one forward pass per distinct prefix of the
active pattern (coalitions that agree up to a layer share it), with the chosen heads'
outputs as one masked product with the output projection.

Workloads on the shipped tiny GPT-2 (4 layers × 4 heads, 20 components), IOI io_s2_flip:

* ``greedy``: one step of circuit discovery from a 15-member set (15 leave-one-out
  coalitions), the pattern that dominates the study;
* ``random``: 20 coalitions with each component active with probability 1/2.

Both run on one torch thread over the same examples; the cache is cleared before each timing.
CPU seconds (the steadier figure on a shared machine). The largest per-example difference
between the two is printed.

Run: ``python benchmarks/bench_causal_bench_behaviour.py [--examples 32] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour
from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, load_model, node_circuit_edges
from mibspec.reference_impl.recompute import ModelSource, encode_function
from mibspec.reference_impl.recompute.circuit import tokenize_pairs
from mibspec.reference_impl.threads import one_thread

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "examples" / "models" / "tiny-gpt2"
DATASET = REPO / "examples" / "datasets" / "ioi" / "test.jsonl"


def cpu_best(repeats: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    model = load_model(MODEL)
    encode = encode_function(ModelSource(str(MODEL), None, local=True))
    rows = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines()[: args.examples]]
    tokens = tokenize_pairs(rows, "io_s2_flip", encode, "dataset")
    universe = graph_universe(model)
    n = model.n_layers * (model.n_heads + 1)
    rng = np.random.default_rng(0)
    members = np.zeros(n, dtype=bool)
    members[rng.choice(n, 15, replace=False)] = True
    greedy = np.repeat(members[None], 15, axis=0)
    greedy[np.arange(15), np.flatnonzero(members)] = False
    workloads = {"greedy": greedy, "random": rng.random((20, n)) < 0.5}
    print(f"tiny-gpt2, {args.examples} IOI examples, one torch thread; CPU seconds, best of 3")
    figures: list[dict[str, object]] = []
    with one_thread():
        behaviour = TransformerBehaviour(model, *tokens)
        for name, active in workloads.items():
            nodes = np.concatenate([np.ones((len(active), 1), bool), active], axis=1)
            edges = node_circuit_edges(universe, nodes)

            def ours(active: np.ndarray = active) -> np.ndarray:
                behaviour._cache.clear()
                return behaviour.example_metrics(active)

            def engine(edges: np.ndarray = edges) -> np.ndarray:
                return evaluate_circuits(model, *tokens, edges, batch_size=args.examples).circuits

            ours_s = cpu_best(3, ours)
            engine_s = cpu_best(3, engine)
            difference = float(np.abs(ours() - engine()).max())
            print(
                f"  {name:7s} {len(active):3d} coalitions: behaviour {ours_s:6.3f} s, "
                f"engine {engine_s:6.3f} s, speed-up {engine_s / ours_s:5.1f}x, max |Δm| {difference:.1e}"
            )
            what = f"{name}, {len(active)} coalitions"
            figures += [
                {"name": f"{what}: behaviour, CPU", "value": ours_s, "unit": "s"},
                {"name": f"{what}: engine, CPU", "value": engine_s, "unit": "s"},
                {"name": f"{what}: speed-up", "value": engine_s / ours_s, "unit": "×"},
                {"name": f"{what}: max |Δm|", "value": difference},
            ]
    if args.json:
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
