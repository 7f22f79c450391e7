"""``benchmarks/bench_circuit_engine.py``: the fewest additions that form a slot input, the
count the floor's slot-input part is priced from, against a loop over named edges."""

from __future__ import annotations

import numpy as np
import pytest
from _scripts import load_script

from mibspec.metrics.graph import GraphConfig, GraphUniverse

bench = load_script("benchmarks/bench_circuit_engine.py", "bench_circuit_engine")


def _slow(universe: GraphUniverse, circuit: np.ndarray, reach: np.ndarray, slot: str) -> int:
    """min(in-circuit edges from reached sources, reached sources without an edge) into
    ``slot``, by walking the universe's edge names."""
    inside = outside = 0
    for name in universe.edge_names():
        source, target = name.split("->")
        if target != slot:
            continue
        f = universe.forward_index(source)
        if not reach[f]:
            continue
        if circuit[f, universe.backward_index(slot)]:
            inside += 1
        else:
            outside += 1
    return 0 if inside == 0 else min(inside, outside)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("density", [0.1, 0.5, 0.9])
def test_fewest_adds_match_a_loop_over_named_edges(seed: int, density: float) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=3, n_heads=2, parallel_attn_mlp=False, d_model=8))
    rng = np.random.default_rng(seed)
    circuit = universe.prune(universe.edge_mask & (rng.random(universe.edge_mask.shape) < density))
    reach = universe.reachable_from_input(circuit)
    slots = ["a1.h0<q>", "a1.h1<k>", "a2.h0<v>", "m1", "m2", "logits"]
    index = np.array([universe.backward_index(s) for s in slots])
    live = circuit & reach[:, None]
    fewest, other_form = bench._fewest_adds(live[:, index], reach, np.asarray(universe.slot_n_sources)[index])
    want = [_slow(universe, circuit, reach, s) for s in slots]
    assert fewest.tolist() == want
    # the second form is taken exactly when some slot has fewer edges outside than inside
    inside = live[:, index].sum(axis=0)
    readable = np.array([reach[: universe.slot_n_sources[i]].sum() for i in index])
    assert other_form == bool(((inside > 0) & (readable - inside < inside)).any())


def test_no_edge_into_a_slot_needs_no_addition() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=2, parallel_attn_mlp=False, d_model=8))
    reach = np.ones(universe.n_forward, dtype=np.bool_)
    empty = np.zeros((universe.n_forward, 3), dtype=np.bool_)
    fewest, other_form = bench._fewest_adds(empty, reach, np.array([3, 4, universe.n_forward]))
    assert fewest.tolist() == [0, 0, 0]
    assert other_form is False


def test_mixing_replay_times_the_engines_sums_and_leaves_the_engine_as_it_was() -> None:
    import argparse

    import torch

    from mibspec.reference_impl.engine import _stack, evaluate_circuits, graph_universe

    args = argparse.Namespace(layers=2, heads=2, d_model=16, vocab=50, seq_len=4, seed=0)
    _, model = bench._model(args)
    universe = graph_universe(model)
    rng = np.random.default_rng(0)
    ids = torch.from_numpy(rng.integers(0, 50, (3, 4)))
    other = torch.from_numpy(rng.integers(0, 50, (3, 4)))
    mask = torch.ones((3, 4), dtype=torch.long)
    answers, foils = rng.integers(0, 50, 3), rng.integers(0, 50, 3)
    circuits = np.stack([universe.edge_mask & (rng.random(universe.edge_mask.shape) < p) for p in (0.2, 0.6)])
    results = []

    def run() -> None:
        results.append(evaluate_circuits(model, ids, other, mask, answers, foils, circuits))

    plain_mix = _stack.mix
    run()
    timed = bench._mixing_replay(run)
    assert _stack.mix is plain_mix  # restored
    np.testing.assert_array_equal(results[0].circuits, results[1].circuits)  # the wrapper changes nothing
    assert timed["engine_sums"] > 0
    assert timed["engine_sums"] <= timed["engine_total"]
    # per circuit and call the faster form is kept, so the sum never exceeds the dense one
    assert 0 < timed["fastest_primitive"] <= timed["dense"]
