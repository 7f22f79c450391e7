"""Cost of recomputing interchange-intervention scores: the batched engine against a per-example loop.

Workload (defaults): the shipped tiny GPT-2 (``examples/models/tiny-gpt2``), the shipped IOI
test rows, the ``io_s1_flip_io_s2_flip`` counterfactuals, one unit (the residual stream after
layer 2 at the last token) with a random 8-dimensional subspace featurizer, the logit
difference logit(IO) − logit(S) of every intervened run. One intra-op thread.

Two ways of doing the same work, timed in one run:

1. the engine: counterfactual vectors recorded in batched passes, then batched intervened
   passes (``Evaluator`` of the recompute stage, its filter switched off);
2. the transformers module, one prompt at a time: a forward hook records the counterfactual's
   vector, a second hook writes the interchanged vector into the base run (the way a
   hook-based evaluator such as the public MIB code works, without its batching).

The logit differences of both are compared (max absolute difference printed). Process CPU
time is reported next to wall-clock time: on a shared machine it is the steadier figure.

Run: ``python benchmarks/bench_causal_variable.py [--rows 160] [--batch 64] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mibspec.metrics.featurizers import NumpyFeaturizer
from mibspec.reference_impl.engine import Site, TorchFeaturizer, forward_sites, intervened_logits, load_model
from mibspec.reference_impl.recompute import ModelSource
from mibspec.reference_impl.recompute.causal_variable import TextCodec

REPO = Path(__file__).resolve().parents[1]
CF = "io_s1_flip_io_s2_flip"


def _timed(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=160)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--layer", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(1)

    folder = REPO / "examples" / "models" / "tiny-gpt2"
    model = load_model(folder)
    codec = TextCodec(ModelSource(str(folder), None, local=True))
    lines = (REPO / "examples" / "datasets" / "ioi" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[: args.rows]]
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(model.d_model, 8)))
    doc = {"type": "subspace", "n_features": 8}
    weights = {"rotation": np.ascontiguousarray(q.T)}
    site = Site(args.layer, "residual_post")

    def pair_ids(row: dict[str, Any]) -> tuple[list[int], list[int], int, int]:
        names = (row["base"]["slots"]["name_a"], row["base"]["slots"]["name_b"])
        position = row["base"]["variables"]["output_position"]
        io, s = codec.encode(" " + names[position])[0], codec.encode(" " + names[1 - position])[0]
        return codec.encode(row["base"]["prompt"]), codec.encode(row["counterfactuals"][CF]["prompt"]), io, s

    pairs = [pair_ids(row) for row in rows]

    def batch(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(x) for x in seqs)
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, x in enumerate(seqs):
            ids[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
        return ids, mask

    def engine() -> np.ndarray:
        featurizer = TorchFeaturizer(doc, weights)
        out = []
        with torch.no_grad():
            for start in range(0, len(pairs), args.batch):
                chunk = pairs[start : start + args.batch]
                cf_ids, cf_mask = batch([p[1] for p in chunk])
                _, recorded = forward_sites(model, cf_ids, cf_mask, record=[site])
                last_cf = cf_mask.sum(1) - 1
                sources = recorded[site][torch.arange(len(chunk)), last_cf]
                ids, mask = batch([p[0] for p in chunk])
                logits = intervened_logits(
                    model, ids, mask, site, mask.sum(1) - 1, sources, featurizer
                ).double()
                out.extend(float(logits[i, p[2]] - logits[i, p[3]]) for i, p in enumerate(chunk))
        return np.asarray(out)

    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False).eval()
    block = hf.transformer.h[args.layer]
    numpy_featurizer = NumpyFeaturizer(doc, weights)

    def per_example() -> np.ndarray:
        out = []
        for base, cf, io, s in pairs:
            store: dict[str, Any] = {}

            def record(module: Any, inputs: Any, output: Any, store: dict[str, Any] = store) -> None:
                hidden = output[0] if isinstance(output, tuple) else output
                store["source"] = hidden[0, -1].double().numpy()

            handle = block.register_forward_hook(record)
            with torch.no_grad():
                hf(torch.tensor([cf]))
            handle.remove()

            def write(module: Any, inputs: Any, output: Any, store: dict[str, Any] = store) -> Any:
                hidden = (output[0] if isinstance(output, tuple) else output).clone()
                new = numpy_featurizer.interchange(
                    hidden[0, -1].double().numpy()[None], store["source"][None]
                )
                hidden[0, -1] = torch.as_tensor(new[0], dtype=hidden.dtype)
                return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

            handle = block.register_forward_hook(write)
            with torch.no_grad():
                logits = hf(torch.tensor([base])).logits[0, -1].double()
            handle.remove()
            out.append(float(logits[io] - logits[s]))
        return np.asarray(out)

    fast, fast_wall, fast_cpu = _timed(engine)
    slow, slow_wall, slow_cpu = _timed(per_example)
    print(f"pairs: {len(pairs)}, unit: residual_post layer {args.layer}, last token, 8-dim subspace")
    print(f"engine (batched):       wall {fast_wall:7.3f} s   cpu {fast_cpu:7.3f} s")
    print(f"per-example with hooks: wall {slow_wall:7.3f} s   cpu {slow_cpu:7.3f} s")
    print(f"ratio (per-example / engine), cpu: {slow_cpu / fast_cpu:.1f}x")
    print(f"max |difference| of the logit differences: {np.abs(fast - slow).max():.2e}")
    if args.json:
        figures = [
            {"name": f"engine (batches of {args.batch}), CPU", "value": fast_cpu, "unit": "s"},
            {"name": "transformers, one prompt at a time with hooks, CPU", "value": slow_cpu, "unit": "s"},
            {"name": "ratio (per-example / engine), CPU", "value": slow_cpu / fast_cpu, "unit": "×"},
            {"name": "max |difference| of the logit differences", "value": float(np.abs(fast - slow).max())},
        ]
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
