"""The EAP-IG graph universe: node and slot names, edge existence, canonical order, totals.

Baselines: a first-principles simulation of the residual stream written here with
explicit loops, a closed form for the edge total derived below, and the edge totals of
the MIB models.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mibspec.metrics.graph import (
    EAP_IG_CFG_KEYS,
    MAX_MATRIX_CELLS,
    GraphConfig,
    GraphUniverse,
)

# ---------------------------------------------------------------------------- baselines


def _reference_universe(L: int, H: int, parallel: bool) -> tuple[list[str], list[str], list[str]]:
    """Source names, slot names and edge names built by simulating the residual stream.

    Each block reads the residual stream as it stands when the block runs: the heads
    read everything written so far; the MLP reads it after the heads have written
    (unless parallel, when it reads the same stream as the heads); the unembedding reads
    the final stream. An edge is a (writer, reader-slot) pair.
    """
    sources = ["input"]
    slots: list[str] = []
    pairs: list[tuple[str, str]] = []
    stream = ["input"]
    for layer in range(L):
        heads = [f"a{layer}.h{h}" for h in range(H)]
        for letter in "qkv":
            for head in heads:
                slot = f"{head}<{letter}>"
                slots.append(slot)
                pairs += [(writer, slot) for writer in stream]
        mlp_reads = list(stream) if parallel else [*stream, *heads]
        slots.append(f"m{layer}")
        pairs += [(writer, f"m{layer}") for writer in mlp_reads]
        stream += heads
        stream.append(f"m{layer}")
        sources += [*heads, f"m{layer}"]
    slots.append("logits")
    pairs += [(writer, "logits") for writer in stream]
    # Canonical order: by source in computation order, then by slot order.
    source_rank = {name: i for i, name in enumerate(sources)}
    slot_rank = {name: i for i, name in enumerate(slots)}
    pairs.sort(key=lambda pair: (source_rank[pair[0]], slot_rank[pair[1]]))
    return sources, slots, [f"{a}->{b}" for a, b in pairs]


def _closed_form_n_edges(L: int, H: int, parallel: bool) -> int:
    """Edge total in closed form.

    Heads of layer l read S_l = 1 + l(H+1) sources through 3 slots each: 3H·S_l edges.
    The MLP of layer l reads S_l sources plus the H heads of its layer unless parallel.
    logits reads all 1 + L(H+1) sources. With Σ_l S_l = L + (H+1)·L(L-1)/2:
        n = (3H+1)·(L + (H+1)·L(L-1)/2) + [not parallel]·L·H + 1 + L(H+1).
    """
    sum_sources = L + (H + 1) * L * (L - 1) // 2
    return (3 * H + 1) * sum_sources + (0 if parallel else L * H) + 1 + L * (H + 1)


SMALL_CONFIGS = [
    (1, 1, False),
    (1, 1, True),
    (2, 2, False),
    (2, 2, True),
    (3, 1, False),
    (1, 4, True),
    (3, 3, False),
    (4, 2, True),
]

# ---------------------------------------------------------------------------- totals

MIB_TOTALS = [
    pytest.param(12, 12, 32_491, id="gpt2-small"),
    pytest.param(24, 14, 179_749, id="qwen2.5-0.5b"),
    pytest.param(26, 8, 74_218, id="gemma-2-2b"),
    pytest.param(32, 32, 1_592_881, id="llama-3.1-8b"),
    pytest.param(6, 4, 1_108, id="interpbench"),
]


@pytest.mark.parametrize(("L", "H", "expected"), MIB_TOTALS)
def test_mib_edge_totals(L: int, H: int, expected: int) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H))
    assert universe.n_edges == expected
    assert int(universe.edge_mask.sum()) == expected
    assert universe.n_forward == 1 + L * (H + 1)
    assert universe.n_backward == L * (3 * H + 1) + 1


def test_interpbench_config_is_the_only_small_one_with_1108_edges() -> None:
    hits = [
        (L, H, parallel)
        for L in range(1, 40)
        for H in range(1, 40)
        for parallel in (False, True)
        if _closed_form_n_edges(L, H, parallel) == 1108
    ]
    assert hits == [(6, 4, False)]


def test_llama_universe_is_cheap() -> None:
    import time

    start = time.perf_counter()
    universe = GraphUniverse(GraphConfig(n_layers=32, n_heads=32, d_model=4096))
    elapsed = time.perf_counter() - start
    assert universe.n_edges == 1_592_881
    # Generous bound for a loaded 2-core machine; typical is ~10 ms.
    assert elapsed < 0.5
    # Spot checks of the index maps against names spelled by hand.
    assert universe.edge_name(0) == "input->a0.h0<q>"
    assert universe.edge_name(universe.n_edges - 1) == "m31->logits"
    i = universe.forward_index("a31.h31")
    assert universe.edge_index[i, universe.backward_index("m31")] == universe.n_edges - 3
    assert universe.edge_name(universe.n_edges - 3) == "a31.h31->m31"


# ---------------------------------------------------------------------------- names and order


@pytest.mark.parametrize(("L", "H", "parallel"), SMALL_CONFIGS)
def test_names_and_order_match_first_principles(L: int, H: int, parallel: bool) -> None:
    sources, slots, edges = _reference_universe(L, H, parallel)
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))
    assert universe.forward_names == tuple(sources)
    assert universe.backward_names == tuple(slots)
    assert universe.edge_names() == edges
    assert [universe.edge_name(i) for i in range(universe.n_edges)] == edges
    assert universe.n_edges == len(edges)


@pytest.mark.parametrize(("L", "H", "parallel"), SMALL_CONFIGS)
def test_edge_mask_and_index_maps_match_first_principles(L: int, H: int, parallel: bool) -> None:
    sources, slots, edges = _reference_universe(L, H, parallel)
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))
    expected_mask = np.zeros((len(sources), len(slots)), dtype=bool)
    expected_index = np.full((len(sources), len(slots)), -1)
    for i, name in enumerate(edges):
        src, dst = name.split("->")
        f, d = sources.index(src), slots.index(dst)
        expected_mask[f, d] = True
        expected_index[f, d] = i
        assert universe.edge_src[i] == f
        assert universe.edge_dst[i] == d
    np.testing.assert_array_equal(universe.edge_mask, expected_mask)
    np.testing.assert_array_equal(universe.edge_index, expected_index)
    # slot_n_sources: slot d reads exactly the first slot_n_sources[d] sources.
    for d in range(len(slots)):
        readers = np.flatnonzero(expected_mask[:, d])
        np.testing.assert_array_equal(readers, np.arange(universe.slot_n_sources[d]))


@pytest.mark.parametrize(("L", "H", "parallel"), SMALL_CONFIGS)
def test_node_of_slot(L: int, H: int, parallel: bool) -> None:
    sources, slots, _ = _reference_universe(L, H, parallel)
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))
    expected = [-1 if slot == "logits" else sources.index(slot.split("<")[0]) for slot in slots]
    assert universe.node_of_slot.tolist() == expected


def test_field_notes_examples_in_gpt2_small() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=12, n_heads=12, d_model=768))
    names = ["input->a0.h1<q>", "a0.h1->m0", "m11->logits", "a3.h7->a4.h0<v>", "input->logits"]
    ids = universe.edge_ids(names)
    assert [universe.edge_name(int(i)) for i in ids] == names


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(L=st.integers(1, 30), H=st.integers(1, 30), parallel=st.booleans())
def test_n_edges_closed_form(L: int, H: int, parallel: bool) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))
    assert universe.n_edges == _closed_form_n_edges(L, H, parallel)
    assert int(universe.edge_mask.sum()) == universe.n_edges
    assert universe.edge_src.shape == universe.edge_dst.shape == (universe.n_edges,)
    # Canonical order is row-major over the mask: index maps agree with np.nonzero.
    rows, cols = np.nonzero(universe.edge_mask)
    np.testing.assert_array_equal(universe.edge_src, rows)
    np.testing.assert_array_equal(universe.edge_dst, cols)
    np.testing.assert_array_equal(universe.edge_index[rows, cols], np.arange(universe.n_edges))
    assert (universe.edge_index[~universe.edge_mask] == -1).all()


# ---------------------------------------------------------------------------- edge_ids


@pytest.mark.parametrize(("L", "H", "parallel"), SMALL_CONFIGS)
def test_edge_ids_round_trip(L: int, H: int, parallel: bool) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=L, n_heads=H, parallel_attn_mlp=parallel))
    names = universe.edge_names()
    np.testing.assert_array_equal(universe.edge_ids(names), np.arange(universe.n_edges))
    rng = np.random.default_rng(7)
    picks = rng.integers(0, universe.n_edges, size=50)
    np.testing.assert_array_equal(universe.edge_ids(iter([names[i] for i in picks])), picks)
    assert universe.edge_ids([]).shape == (0,)


@pytest.mark.slow
def test_edge_ids_round_trip_llama() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=32, n_heads=32))
    names = universe.edge_names()
    assert len(names) == 1_592_881
    np.testing.assert_array_equal(universe.edge_ids(names), np.arange(universe.n_edges))


@pytest.mark.parametrize(
    "bad",
    [
        "input->a0.h0",  # head slot without <q>/<k>/<v>
        "input->a0.h0<x>",
        "a0.h0->a0.h1<q>",  # same-layer heads do not read each other
        "m1->a0.h0<q>",  # backwards in computation order
        "m0->m0",
        "logits->m0",  # logits is not a source
        "input-a0.h0<q>",
        "input->a0.h00<q>",  # no leading zeros
        "input->a00.h0<q>",
        " input->a0.h0<q>",
        "input->a0.h0<q> ",
        "input->a0.h0<q>->m0",
        "input->a9.h0<q>",  # layer out of range
        "input->a0.h7<q>",  # head out of range
        "",
        "->",
    ],
)
def test_edge_ids_rejects_malformed_names(bad: str) -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=2))
    with pytest.raises(ValueError, match=r"names must be edges of this universe") as info:
        universe.edge_ids(["input->m0", bad])
    assert "#1" in str(info.value)
    assert repr(bad) in str(info.value)


def test_edge_ids_rejects_heads_to_own_mlp_when_parallel() -> None:
    parallel = GraphUniverse(GraphConfig(n_layers=2, n_heads=2, parallel_attn_mlp=True))
    serial = GraphUniverse(GraphConfig(n_layers=2, n_heads=2, parallel_attn_mlp=False))
    assert serial.edge_ids(["a1.h0->m1"]).tolist() == [serial.edge_index[4, 13]]
    with pytest.raises(ValueError, match=r"a1\.h0->m1"):
        parallel.edge_ids(["a1.h0->m1"])


def test_edge_ids_lists_first_few_bad_names_and_count() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1))
    names = ["bad" + str(i) for i in range(10)] + ["input->logits"]
    with pytest.raises(ValueError, match=r"got 10 invalid of 11, first: #0 'bad0', #1 'bad1'") as info:
        universe.edge_ids(names)
    assert "bad5" not in str(info.value)


def test_edge_ids_rejects_non_strings() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=1, n_heads=1))
    with pytest.raises(ValueError, match=r"#0 42"):
        universe.edge_ids([42, "input->logits"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="not a single string"):
        universe.edge_ids("input->logits")


def test_single_name_lookups() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=3))
    assert universe.forward_index("input") == 0
    assert universe.forward_index("m1") == universe.n_forward - 1
    assert universe.backward_index("logits") == universe.n_backward - 1
    # Layer 1 starts at slot 3H+1 = 10; the <v> block is 2H further on.
    assert universe.backward_index("a1.h2<v>") == 10 + 2 * 3 + 2
    with pytest.raises(ValueError, match="name must be a source node"):
        universe.forward_index("logits")
    with pytest.raises(ValueError, match="name must be a destination slot"):
        universe.backward_index("a0.h0")
    with pytest.raises(ValueError, match=r"i must be an integer in \[0, "):
        universe.edge_name(universe.n_edges)
    with pytest.raises(ValueError, match=r"i must be an integer"):
        universe.edge_name(True)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n_layers": 0, "n_heads": 1}, "n_layers"),
        ({"n_layers": 1.0, "n_heads": 1}, "n_layers"),
        ({"n_layers": True, "n_heads": 1}, "n_layers"),
        ({"n_layers": 1, "n_heads": -2}, "n_heads"),
        ({"n_layers": 1, "n_heads": "4"}, "n_heads"),
        ({"n_layers": 1, "n_heads": 1, "parallel_attn_mlp": 1}, "parallel_attn_mlp"),
        ({"n_layers": 1, "n_heads": 1, "d_model": 0}, "d_model"),
        ({"n_layers": 1, "n_heads": 1, "d_model": 64.0}, "d_model"),
    ],
)
def test_config_validation_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=rf"GraphConfig\.{field} must be"):
        GraphConfig(**kwargs)  # type: ignore[arg-type]


def test_config_normalises_numpy_scalars() -> None:
    cfg = GraphConfig(np.int64(2), np.int32(3), np.bool_(True), np.int64(8))  # type: ignore[arg-type]
    assert type(cfg.n_layers) is int
    assert type(cfg.n_heads) is int
    assert cfg.parallel_attn_mlp is True
    assert type(cfg.d_model) is int


def test_universe_rejects_oversized_configs() -> None:
    with pytest.raises(ValueError, match=rf"at most {MAX_MATRIX_CELLS}"):
        GraphUniverse(GraphConfig(n_layers=200, n_heads=128))
    with pytest.raises(ValueError, match="cfg must be a GraphConfig"):
        GraphUniverse({"n_layers": 1, "n_heads": 1})  # type: ignore[arg-type]


def test_from_eap_ig_cfg() -> None:
    cfg = {"n_layers": 12, "n_heads": 12, "parallel_attn_mlp": False, "d_model": 768}
    universe = GraphUniverse.from_eap_ig_cfg(cfg)
    assert universe.cfg == GraphConfig(12, 12, False, 768)
    assert universe.n_edges == 32_491
    assert set(cfg) == set(EAP_IG_CFG_KEYS)
    minimal = GraphConfig.from_eap_ig_cfg({"n_layers": 2, "n_heads": 3})
    assert minimal == GraphConfig(2, 3, False, None)
    extra = {**cfg, "n_ctx": 1024}
    with pytest.raises(ValueError, match=r"unknown keys \['n_ctx'\]"):
        GraphConfig.from_eap_ig_cfg(extra)
    assert GraphConfig.from_eap_ig_cfg(extra, strict=False) == GraphConfig(12, 12, False, 768)
    with pytest.raises(ValueError, match=r"must contain the keys \['n_heads'\]"):
        GraphConfig.from_eap_ig_cfg({"n_layers": 2})
    with pytest.raises(ValueError, match="cfg must be a mapping"):
        GraphConfig.from_eap_ig_cfg([("n_layers", 2)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"GraphConfig\.parallel_attn_mlp"):
        GraphConfig.from_eap_ig_cfg({"n_layers": 2, "n_heads": 3, "parallel_attn_mlp": "no"})


# ---------------------------------------------------------------------------- conversions and safety


def test_matrix_conversions_round_trip() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=3, n_heads=2, parallel_attn_mlp=True))
    values = np.arange(universe.n_edges, dtype=np.float64) + 0.5
    matrix = universe.to_matrix(values, fill=np.nan)
    assert matrix.shape == (universe.n_forward, universe.n_backward)
    assert np.isnan(matrix[~universe.edge_mask]).all()
    for i in range(universe.n_edges):
        assert matrix[universe.edge_src[i], universe.edge_dst[i]] == values[i]
    np.testing.assert_array_equal(universe.from_matrix(matrix), values)
    with pytest.raises(ValueError, match="edge_values must have shape"):
        universe.to_matrix(values[:-1])
    with pytest.raises(ValueError, match="matrix must have shape"):
        universe.from_matrix(matrix.T)


def test_exposed_arrays_are_read_only() -> None:
    universe = GraphUniverse(GraphConfig(n_layers=2, n_heads=2))
    for array in (
        universe.edge_mask,
        universe.edge_index,
        universe.edge_src,
        universe.edge_dst,
        universe.node_of_slot,
        universe.slot_n_sources,
    ):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = array[0]
