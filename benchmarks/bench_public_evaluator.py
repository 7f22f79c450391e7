"""The public MIB circuit evaluator against mibspec's engine on the same weights, tokens and circuits.

The public side is MIB's own evaluation path (``evaluate_area_under_curve`` of the circuit
track over EAP-IG's ``evaluate_baseline`` / ``evaluate_graph`` at the commit MIB pins, with
TransformerLens 2.18), run from ``--peers`` or ``$MIBSPEC_PEERS`` in its own
virtual environment (``mibspec.parity``: ``$MIBSPEC_PEER_PYTHON``, or the cached env, built
with ``--build-env``). Where the public code or its environment is absent the benchmark is
skipped and says so (exit 2). Only tokenisation is replaced on the public side: the model
has random weights and no tokenizer, so rows are handed over as token ids.

Workload: a GPT-2-shaped model with random weights (float32, CPU, 1 torch thread on both
sides), ``--examples`` rows of ``--tokens`` random tokens (clean and corrupted of equal
length), batches of ``--batch``, random edge scores, and the 10-point curve under the signed
ranking (``int(k · n_edges)`` top edges) plus the full model and the empty circuit.
``--size``:

* ``small`` (default, a few minutes): 6 layers, 8 heads, d_model 512, vocabulary 50257, 40
  examples of 16 tokens;
* ``gpt2-small``: 12 layers, 12 heads, d_model 768, vocabulary 50257, 100 examples of 16
  tokens, batches of 20 (the workload of the 38× figure: the public side alone takes
  about 15 minutes);
* ``tiny``: 2 layers, 4 heads, d_model 64, vocabulary 1000, 20 examples (seconds; a smoke run).

Prints both times (wall clock and process CPU), their ratio, and the largest difference of
f(k) and CPR between the two. Goal (at ``gpt2-small``): the engine ≥ 60× faster.

Run: ``python benchmarks/bench_public_evaluator.py [--size small|gpt2-small|tiny] [--build-env]``
(``--json OUT`` also writes the figures).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SIZES = {
    "tiny": {"n_layers": 2, "n_heads": 4, "d_model": 64, "vocab_size": 1000, "examples": 20},
    "small": {"n_layers": 6, "n_heads": 8, "d_model": 512, "vocab_size": 50257, "examples": 40},
    "gpt2-small": {"n_layers": 12, "n_heads": 12, "d_model": 768, "vocab_size": 50257, "examples": 100},
}
GRID = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--examples", type=int, default=None, help="override the size's example count")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peers", type=Path, default=None)
    parser.add_argument("--build-env", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    from mibspec.parity import PeerUnavailableError, find_peers, peer_python, run_peer

    try:
        peers = find_peers(args.peers)
        python = peer_python(build=args.build_env)
    except PeerUnavailableError as exc:
        print(f"skipped: {exc}")
        if args.json:
            args.json.write_text(json.dumps({"status": "not run", "reason": str(exc)}), encoding="utf-8")
        return 2

    import torch

    from mibspec.metrics.circuit import cpr, edges_at, faithfulness, rank_edges
    from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, load_model, random_model

    torch.set_num_threads(1)
    size = dict(SIZES[args.size])
    n = args.examples or size.pop("examples")
    size.pop("examples", None)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="mibspec-bench-") as tmp:
        folder = random_model("gpt2", Path(tmp) / "model", seed=args.seed, **size)
        model = load_model(folder)
        universe = graph_universe(model)
        vocab = size["vocab_size"]
        ids = rng.integers(0, vocab, (n, args.tokens))
        cids = rng.integers(0, vocab, (n, args.tokens))
        correct, counter = rng.integers(0, vocab, n), rng.integers(0, vocab, n)
        scores = rng.standard_normal(universe.n_edges).astype(np.float32)
        job = {
            "peers": str(peers),
            "model_dir": str(folder),
            "family": "gpt2",
            "tokenizer": False,
            "batch_size": args.batch,
            "ig_steps": 5,
            "threads": 1,
            "rows": [
                [a.tolist(), b.tolist(), int(x), int(y)]
                for a, b, x, y in zip(ids, cids, correct, counter, strict=True)
            ],
            "edge_names": universe.edge_names(),
            "scores": scores.astype(np.float64).tolist(),
            "tasks": ["bench"],
        }
        print(
            f"{args.size}: {size['n_layers']} layers × {size['n_heads']} heads, d_model {size['d_model']}, "
            f"vocabulary {vocab}, {universe.n_edges} edges; {n} examples of {args.tokens} tokens, "
            f"batches of {args.batch}; public code at {peers}",
            flush=True,
        )
        public = run_peer(python, job, timeout=4 * 3600)["bench"]

        order = rank_edges(scores.astype(np.float64), "signed")
        circuits = np.zeros((len(GRID), universe.n_edges), dtype=bool)
        for i, k in enumerate(GRID):
            circuits[i, order[: edges_at(k, universe.n_edges, "floor")]] = True
        mask = np.ones_like(ids)
        wall, cpu = time.perf_counter(), time.process_time()
        result = evaluate_circuits(model, ids, cids, mask, correct, counter, circuits, batch_size=args.batch)
        engine_wall, engine_cpu = time.perf_counter() - wall, time.process_time() - cpu
    m_full, m_empty = float(result.clean.mean()), float(result.empty.mean())
    values = [faithfulness(float(m), m_full, m_empty) for m in result.circuits.mean(axis=1)]
    diff = max(abs(a - b) for a, b in zip(values, public["faithfulness"], strict=True))
    print(f"public evaluator: {public['wall_seconds']:.1f} s wall, {public['cpu_seconds']:.1f} s CPU")
    print(f"mibspec engine:   {engine_wall:.1f} s wall, {engine_cpu:.1f} s CPU")
    print(
        f"ratio (public / engine): {public['wall_seconds'] / engine_wall:.1f}× wall, "
        f"{public['cpu_seconds'] / engine_cpu:.1f}× CPU"
    )
    cpr_diff = abs(cpr(list(GRID), values) - public["area_under"])
    print(f"agreement: max |Δf(k)| = {diff:.2e}, |ΔCPR| = {cpr_diff:.2e}")
    if args.json:
        ratio = public["cpu_seconds"] / engine_cpu
        # the goal is set on the gpt2-small workload; other sizes report the ratio only
        goal = {"goal": "≥ 60", "met": ratio >= 60} if args.size == "gpt2-small" else {}
        figures = [
            {"name": "workload", "value": f"{args.size}, {universe.n_edges} edges, {n} examples"},
            {"name": "public evaluator, CPU", "value": public["cpu_seconds"], "unit": "s"},
            {"name": "public evaluator, wall", "value": public["wall_seconds"], "unit": "s"},
            {"name": "mibspec engine, CPU", "value": engine_cpu, "unit": "s"},
            {"name": "mibspec engine, wall", "value": engine_wall, "unit": "s"},
            {"name": "public / engine, CPU", "value": ratio, "unit": "×", **goal},
            {"name": "max |Δf(k)|", "value": diff},
            {"name": "|ΔCPR|", "value": cpr_diff},
        ]
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
