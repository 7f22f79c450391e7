"""Reachability, pruning, weighted circuit size and greedy construction on the graph universe.

Baselines are written here from the definitions and work on edge *names* (parsed with
plain string operations), not on the module's index maps:

* path search: an edge is kept iff a path input -> ... -> src and dst -> ... -> logits
  exist through circuit edges (breadth-first search);
* EAP-IG's iterative prune: drop nodes without in- or out-edges and edges with a
  dropped endpoint until nothing changes (a different algorithm with the same fixed point);
* size: a loop over the kept edges summing the source's neuron fraction;
* greedy: re-scan every candidate at every step.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.metrics.graph import GraphConfig, GraphUniverse

# ---------------------------------------------------------------------------- baselines


def _split(name: str) -> tuple[str, str]:
    """(source node, destination node) of an edge name; q/k/v slots collapse to their head."""
    src, dst = name.split("->")
    return src, dst.split("<")[0]


def _circuit_names(universe: GraphUniverse, circuit: np.ndarray) -> list[str]:
    names = universe.edge_names()
    return [names[i] for i in np.flatnonzero(circuit)]


def _reachable_bfs(edges: list[str], start: str, forward: bool) -> set[str]:
    adjacency: dict[str, list[str]] = {}
    for name in edges:
        src, dst = _split(name)
        a, b = (src, dst) if forward else (dst, src)
        adjacency.setdefault(a, []).append(b)
    seen = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in adjacency.get(node, []):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _prune_by_paths(edges: list[str]) -> set[str]:
    from_input = _reachable_bfs(edges, "input", forward=True)
    to_logits = _reachable_bfs(edges, "logits", forward=False)
    return {name for name in edges if _split(name)[0] in from_input and _split(name)[1] in to_logits}


def _prune_iteratively(edges: list[str]) -> set[str]:
    kept = set(edges)
    while True:
        has_out = {_split(name)[0] for name in kept}
        has_in = {_split(name)[1] for name in kept} | {"input"}
        nodes = (has_out & has_in) | {"logits"}
        survivors = {name for name in kept if _split(name)[0] in nodes and _split(name)[1] in nodes}
        if survivors == kept:
            return kept
        kept = survivors


def _greedy_naive(universe: GraphUniverse, scores: np.ndarray, n: int, absolute: bool) -> list[int]:
    names = universe.edge_names()
    keys = [abs(float(s)) if absolute else float(s) for s in scores]
    reached = {"logits"}
    selected: list[int] = []
    taken: set[int] = set()
    for _ in range(n):
        best = -1
        for i, name in enumerate(names):
            if i in taken or _split(name)[1] not in reached:
                continue
            # Strictly greater keeps the smaller index on ties.
            if best < 0 or keys[i] > keys[best]:
                best = i
        selected.append(best)
        taken.add(best)
        reached.add(_split(names[best])[0])
    return selected


# ---------------------------------------------------------------------------- strategies

configs = st.tuples(st.integers(1, 3), st.integers(1, 3), st.booleans())


def _universe(cfg: tuple[int, int, bool]) -> GraphUniverse:
    L, H, parallel = cfg
    return GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))


def _random_circuit(universe: GraphUniverse, seed: int, density: float) -> np.ndarray:
    return np.random.default_rng(seed).random(universe.n_edges) < density


# ---------------------------------------------------------------------------- pruning


@settings(max_examples=150, deadline=None)
@given(cfg=configs, seed=st.integers(0, 2**32 - 1), density=st.sampled_from([0.05, 0.15, 0.3, 0.6, 0.9]))
def test_prune_matches_path_search_and_iterative_prune(
    cfg: tuple[int, int, bool], seed: int, density: float
) -> None:
    universe = _universe(cfg)
    circuit = _random_circuit(universe, seed, density)
    edges = _circuit_names(universe, circuit)
    pruned = universe.prune(circuit)
    got = set(_circuit_names(universe, pruned))
    assert got == _prune_by_paths(edges)
    assert got == _prune_iteratively(edges)
    # Matrix form gives the same edges.
    pruned_matrix = universe.prune(universe.to_matrix(circuit, fill=False))
    np.testing.assert_array_equal(universe.from_matrix(pruned_matrix), pruned)
    assert not pruned_matrix[~universe.edge_mask].any()


@settings(max_examples=100, deadline=None)
@given(cfg=configs, seed=st.integers(0, 2**32 - 1), density=st.sampled_from([0.05, 0.2, 0.5]))
def test_reachable_from_input_matches_bfs(cfg: tuple[int, int, bool], seed: int, density: float) -> None:
    universe = _universe(cfg)
    circuit = _random_circuit(universe, seed, density)
    expected = _reachable_bfs(_circuit_names(universe, circuit), "input", forward=True)
    got = universe.reachable_from_input(circuit)
    assert {universe.forward_names[i] for i in np.flatnonzero(got)} == expected - {"logits"}
    np.testing.assert_array_equal(got, universe.reachable_from_input(universe.to_matrix(circuit, False)))


@settings(max_examples=60, deadline=None)
@given(cfg=configs, seed=st.integers(0, 2**32 - 1))
def test_prune_properties(cfg: tuple[int, int, bool], seed: int) -> None:
    universe = _universe(cfg)
    rng = np.random.default_rng(seed)
    small = rng.random(universe.n_edges) < 0.2
    large = small | (rng.random(universe.n_edges) < 0.3)
    pruned_small, pruned_large = universe.prune(small), universe.prune(large)
    assert not (pruned_small & ~small).any()  # only removes
    np.testing.assert_array_equal(universe.prune(pruned_small), pruned_small)  # idempotent
    assert not (pruned_small & ~pruned_large).any()  # monotone


def test_prune_extremes() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=3, n_heads=2))
    full = np.ones(universe.n_edges, dtype=bool)
    empty = np.zeros(universe.n_edges, dtype=bool)
    np.testing.assert_array_equal(universe.prune(full), full)
    np.testing.assert_array_equal(universe.prune(empty), empty)
    assert universe.reachable_from_input(full).all()
    assert universe.reachable_from_input(empty).tolist() == [True] + [False] * (universe.n_forward - 1)


def test_prune_hand_built_chain() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=2))
    keep = ["input->a0.h1<k>", "a0.h1->m0", "m0->a1.h0<v>", "a1.h0->logits"]
    dangling = [
        "a0.h0->m1",  # a0.h0 has no in-edge
        "input->a1.h1<q>",  # a1.h1 does not reach logits
        "m0->m1",  # m1 does not reach logits
    ]
    circuit = np.zeros(universe.n_edges, dtype=bool)
    circuit[universe.edge_ids(keep + dangling)] = True
    expected = np.zeros(universe.n_edges, dtype=bool)
    expected[universe.edge_ids(keep)] = True
    np.testing.assert_array_equal(universe.prune(circuit), expected)
    reached = universe.reachable_from_input(circuit)
    assert [universe.forward_names[i] for i in np.flatnonzero(reached)] == [
        "input",
        "a0.h1",
        "m0",
        "a1.h0",
        "a1.h1",
        "m1",
    ]


def test_prune_llama_is_fast() -> None:
    import time

    universe = GraphUniverse(GraphConfig(n_layers=32, n_heads=32))
    circuit = np.random.default_rng(3).random(universe.n_edges) < 0.1
    start = time.perf_counter()
    pruned = universe.prune(circuit)
    elapsed = time.perf_counter() - start
    assert not (pruned & ~circuit).any()
    assert elapsed < 0.5


@pytest.mark.parametrize(
    ("edge_in", "message"),
    [
        (np.ones(5, dtype=bool), r"edge_in must have shape \(75,\) .* or \(9, 21\)"),
        (np.ones(75, dtype=np.float64), "edge_in must be a boolean array"),
        (np.ones((9, 21), dtype=bool), r"edge_in must be False where no edge exists; got \d+ such cells"),
    ],
)
def test_circuit_validation(edge_in: np.ndarray, message: str) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=3))
    assert universe.n_edges == 75
    with pytest.raises(ValueError, match=message):
        universe.prune(edge_in)
    with pytest.raises(ValueError, match=message):
        universe.weighted_edge_count(edge_in)
    with pytest.raises(ValueError, match=message):
        universe.reachable_from_input(edge_in)


# ---------------------------------------------------------------------------- weighted size


@settings(max_examples=100, deadline=None)
@given(cfg=configs, seed=st.integers(0, 2**32 - 1), use_prune=st.booleans())
def test_weighted_edge_count_matches_loop(cfg: tuple[int, int, bool], seed: int, use_prune: bool) -> None:
    universe = _universe(cfg)
    rng = np.random.default_rng(seed)
    circuit = rng.random(universe.n_edges) < 0.4
    fraction = rng.integers(0, 9, size=universe.n_forward) / 8.0
    counted = _prune_by_paths(_circuit_names(universe, circuit)) if use_prune else None
    names = universe.edge_names()
    expected_plain = 0.0
    expected_weighted = 0.0
    for i in np.flatnonzero(circuit):
        if counted is not None and names[i] not in counted:
            continue
        expected_plain += 1.0
        expected_weighted += fraction[universe.forward_names.index(_split(names[i])[0])]
    assert universe.weighted_edge_count(circuit, prune=use_prune) == expected_plain
    # Fractions in eighths: every partial sum is exact, so equality is exact.
    assert universe.weighted_edge_count(circuit, fraction, prune=use_prune) == expected_weighted


def test_weighted_edge_count_from_neuron_mask() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1, d_model=4))
    # Edges: input->{a0.h0<q>,<k>,<v>, m0, logits}, a0.h0->{m0, logits}, m0->logits.
    circuit = np.zeros(universe.n_edges, dtype=bool)
    circuit[universe.edge_ids(["input->a0.h0<q>", "a0.h0->logits", "input->m0", "m0->logits"])] = True
    neurons = np.array([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]], dtype=bool)
    fraction = universe.neuron_fraction(neurons)
    assert fraction.tolist() == [1.0, 0.25, 0.5]
    # input->a0.h0<q> (1) + a0.h0->logits (1/4) + input->m0 (1) + m0->logits (1/2)
    assert universe.weighted_edge_count(circuit, fraction) == 2.75
    with pytest.raises(ValueError, match=r"neurons_in_graph must be a boolean array of shape \(3, 4\)"):
        universe.neuron_fraction(neurons[:, :3])


@pytest.mark.parametrize(
    ("fraction", "message"),
    [
        (np.ones(4), r"neuron_fraction must be a real array of shape \(3,\)"),
        (np.array([1.0, 1.5, 0.0]), r"neuron_fraction must lie in \[0, 1\]; got 1.5 for node 'a0.h0'"),
        (np.array([np.nan, 1.0, 0.0]), r"neuron_fraction must lie in \[0, 1\]; got nan for node 'input'"),
        (np.array([True, True, True]), "neuron_fraction must be a real array"),
    ],
)
def test_neuron_fraction_validation(fraction: np.ndarray, message: str) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1))
    with pytest.raises(ValueError, match=message):
        universe.weighted_edge_count(np.ones(universe.n_edges, dtype=bool), fraction)


def test_weighted_edge_count_llama_full() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=32, n_heads=32))
    full = np.ones(universe.n_edges, dtype=bool)
    assert universe.weighted_edge_count(full) == 1_592_881.0
    half = np.full(universe.n_forward, 0.5)
    assert universe.weighted_edge_count(full, half) == 1_592_881 / 2


# ---------------------------------------------------------------------------- greedy


@settings(max_examples=80, deadline=None)
@given(
    cfg=configs,
    seed=st.integers(0, 2**32 - 1),
    absolute=st.booleans(),
    levels=st.sampled_from([2, 3, 7, 1000]),
)
def test_greedy_matches_naive_rescan(
    cfg: tuple[int, int, bool], seed: int, absolute: bool, levels: int
) -> None:
    universe = _universe(cfg)
    rng = np.random.default_rng(seed)
    # Few distinct levels force many ties; negative values exercise the signed ranking.
    scores = rng.integers(-levels, levels + 1, size=universe.n_edges).astype(np.float64)
    expected = _greedy_naive(universe, scores, universe.n_edges, absolute)
    order = universe.greedy_order(scores, absolute=absolute)
    assert order.tolist() == expected
    n = int(rng.integers(0, universe.n_edges + 1))
    selection = universe.greedy_select(scores, n, absolute=absolute)
    assert set(np.flatnonzero(selection).tolist()) == set(expected[:n])
    assert universe.greedy_order(scores, absolute=absolute, n=n).tolist() == expected[:n]


def test_greedy_matrix_form_and_ignored_cells() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=2))
    scores = np.random.default_rng(5).standard_normal(universe.n_edges)
    matrix = universe.to_matrix(scores, fill=1e9)  # off-edge cells must not matter
    selection = universe.greedy_select(matrix, 10, absolute=False)
    assert selection.shape == matrix.shape
    np.testing.assert_array_equal(
        universe.from_matrix(selection), universe.greedy_select(scores, 10, absolute=False)
    )
    assert not selection[~universe.edge_mask].any()


def test_greedy_differs_from_top_n() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1))
    scores = np.zeros(universe.n_edges)
    # The best edge feeds a0.h0<q>, which is not reached until a0.h0 feeds something reached.
    scores[universe.edge_ids(["input->a0.h0<q>"])] = 10.0
    scores[universe.edge_ids(["a0.h0->logits"])] = 1.0
    scores[universe.edge_ids(["m0->logits"])] = 2.0
    order = universe.greedy_order(scores, absolute=True, n=3)
    assert [universe.edge_name(int(i)) for i in order] == ["m0->logits", "a0.h0->logits", "input->a0.h0<q>"]


def test_greedy_validation() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1))
    scores = np.zeros(universe.n_edges)
    with pytest.raises(ValueError, match=r"n must be an integer in \[0, 8\]; got 9"):
        universe.greedy_select(scores, 9, absolute=True)
    with pytest.raises(ValueError, match=r"n must be an integer"):
        universe.greedy_select(scores, 2.0, absolute=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="absolute must be a bool"):
        universe.greedy_select(scores, 2, absolute="yes")  # type: ignore[arg-type]
    bad = scores.copy()
    bad[3] = np.nan
    with pytest.raises(
        ValueError, match=r"scores must be finite on every edge; got nan for edge 'input->m0'"
    ):
        universe.greedy_order(bad, absolute=True)
    with pytest.raises(ValueError, match=r"scores must have shape \(8,\)"):
        universe.greedy_order(scores[:-1], absolute=True)
    with pytest.raises(ValueError, match="scores must be an array of real numbers"):
        universe.greedy_order(scores > 0, absolute=True)


@pytest.mark.slow
def test_greedy_llama_is_nested_and_complete() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=32, n_heads=32))
    scores = np.random.default_rng(11).standard_normal(universe.n_edges)
    order = universe.greedy_order(scores, absolute=True)
    assert np.array_equal(np.sort(order), np.arange(universe.n_edges))
    prefix = universe.greedy_order(scores, absolute=True, n=1593)
    np.testing.assert_array_equal(prefix, order[:1593])
    # Every selected edge's destination was reached when it was taken.
    reached = np.zeros(universe.n_forward + 1, dtype=bool)
    reached[-1] = True
    dst_node = np.where(universe.node_of_slot < 0, universe.n_forward, universe.node_of_slot)
    for edge in order[:5000].tolist():
        assert reached[dst_node[universe.edge_dst[edge]]]
        reached[universe.edge_src[edge]] = True


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_deeper_universe_against_baselines(seed: int) -> None:
    # InterpBench shape (6 layers, 4 heads): longer paths than the hypothesis configs.
    universe = GraphUniverse(GraphConfig(n_layers=6, n_heads=4))
    rng = np.random.default_rng(seed)
    circuit = rng.random(universe.n_edges) < (0.02, 0.05, 0.2)[seed]
    edges = _circuit_names(universe, circuit)
    assert set(_circuit_names(universe, universe.prune(circuit))) == _prune_by_paths(edges)
    reached = universe.reachable_from_input(circuit)
    expected = _reachable_bfs(edges, "input", forward=True) - {"logits"}
    assert {universe.forward_names[i] for i in np.flatnonzero(reached)} == expected
    scores = rng.integers(-5, 6, size=universe.n_edges).astype(np.float64)
    n = 150
    expected_order = _greedy_naive(universe, scores, n, absolute=bool(seed % 2))
    assert universe.greedy_order(scores, absolute=bool(seed % 2), n=n).tolist() == expected_order
