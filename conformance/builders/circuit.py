"""Cases of kind ``circuit``: edge scores and circuits over a computation graph."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import GRID, PROVENANCE, Folder, Json, case, document, fresh, rehash, save
from ._graphs import (
    INTERPBENCH_UNIVERSE,
    CircuitData,
    edges_at,
    planted_truth,
    ranked,
    write_circuit_document,
    write_ground_truth,
)
from ._reports import INTERPBENCH_PATH, circuit_setup


@fresh
def circuit_document(folder: Folder, which: str = "interpbench") -> Json:
    universe, model, scores, _ = circuit_setup(which)
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    return write_circuit_document(folder, data, name="document.json", model=model)


@case(
    "circuit",
    "DK-2 A-8",
    "InterpBench-sized universe (6 layers, 4 heads, 1,108 edges): scores and the 20 "
    "circuits of both rankings on the grid, in one safetensors sidecar.",
)
def interpbench_scores_and_circuits(folder: Folder) -> None:
    circuit_document(folder)


@case(
    "circuit",
    "K-6",
    "Scores rounded to one decimal, so the signed top-110 (k = 0.1) cut falls inside a run of equal "
    "scores: a warning, the document stays valid.",
    warnings=(("K107", "/circuits/6"),),
)
def tie_straddles_cut(folder: Folder) -> None:
    universe, model, scores, _ = circuit_setup("interpbench")
    rounded = np.round(scores.astype(np.float64), 1).astype(np.float32)
    data = CircuitData(universe, rounded, ("signed",), GRID)
    write_circuit_document(folder, data, name="document.json", model=model)


@case("circuit", "DK-2 A-8", "A ground-truth circuit: one membership row, no scores, no grid point.")
def interpbench_ground_truth(folder: Folder) -> None:
    write_ground_truth(
        folder,
        INTERPBENCH_UNIVERSE,
        planted_truth(INTERPBENCH_UNIVERSE, INTERPBENCH_PATH),
        name="document.json",
        sidecar="truth.safetensors",
    )


@case("circuit", "DK-2 A-8", "Edge scores only (float16), without circuits.")
def scores_only_float16(folder: Folder) -> None:
    universe, model, scores, _ = circuit_setup("tiny")
    folder.safetensors("scores.safetensors", {"edge_scores": scores.astype(np.float16)})
    save(
        folder,
        document(
            "circuit",
            {
                "model": model,
                "graph": {"n_layers": 4, "n_heads": 4, "n_edges": universe.n_edges},
                "scores": {
                    "artifact": "scores",
                    "tensor": "edge_scores",
                    "shape": [universe.n_edges],
                    "dtype": "float16",
                },
                "artifacts": [
                    folder.artifact("scores", "scores", "scores.safetensors", "application/x-safetensors")
                ],
            },
        ),
    )


@case(
    "circuit",
    "DK-2 A-8",
    "Neuron granularity: circuits with per-node neuron masks (weighted size counts "
    "the kept fraction of each edge's source neurons).",
)
def tiny_neuron_granularity(folder: Folder) -> None:
    universe, model, scores, _ = circuit_setup("tiny")
    rng = np.random.default_rng(17)
    order = ranked(scores, "absolute")
    rows, masks, entries = [], [], []
    for index, k in enumerate((0.1, 0.2)):
        count = edges_at(k, universe.n_edges)
        row = np.zeros(universe.n_edges, dtype=bool)
        row[order[:count]] = True
        neurons = rng.random((universe.n_forward, 32)) < 0.5 + 0.25 * index
        neurons[0] = True  # the embedding is kept whole
        kept = universe.pruned(row)
        fraction = neurons.mean(axis=1)
        entries.append(
            {
                "index": index,
                "k": k,
                "ranking": "absolute",
                "n_edges": count,
                "weighted_size": float(fraction[universe.edges[0][kept]].sum()),
            }
        )
        rows.append(row)
        masks.append(neurons)
    folder.safetensors("circuits.safetensors", {"membership": np.stack(rows), "neurons": np.stack(masks)})
    save(
        folder,
        document(
            "circuit",
            {
                "description": "Edges chosen by |score|, then neurons of each source node chosen by a "
                "learned mask.",
                "model": model,
                "graph": {
                    "convention": "eap-ig",
                    "n_layers": 4,
                    "n_heads": 4,
                    "d_model": 32,
                    "n_edges": universe.n_edges,
                },
                "granularity": "neuron",
                "membership": {
                    "artifact": "circuits",
                    "tensor": "membership",
                    "shape": [2, universe.n_edges],
                    "dtype": "bool",
                },
                "neuron_masks": {
                    "artifact": "circuits",
                    "tensor": "neurons",
                    "shape": [2, universe.n_forward, 32],
                    "dtype": "bool",
                },
                "circuits": entries,
                "artifacts": [
                    folder.artifact(
                        "circuits", "circuit", "circuits.safetensors", "application/x-safetensors"
                    )
                ],
                "provenance": PROVENANCE,
            },
        ),
    )


@case("circuit", "S-3 DK-2", "The graph universe is missing.", ("S111", ""))
def missing_graph(folder: Folder) -> None:
    doc = circuit_document(folder)
    del doc["graph"]
    save(folder, doc)


@case("circuit", "S-3 DK-2", 'granularity "head" is not defined.', ("S113", "/granularity"))
def unknown_granularity(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["granularity"] = "head"
    save(folder, doc)


@case("circuit", "S-3 DK-2", "A circuit entry built for k = 0.", ("S114", "/circuits/0/k"))
def circuit_entry_k_zero(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["circuits"][0]["k"] = 0.0
    save(folder, doc)


@case("circuit", "S-3 DK-2", "A graph universe with zero edges.", ("S114", "/graph/n_edges"))
def zero_edge_universe(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["graph"]["n_edges"] = 0
    save(folder, doc)


@case(
    "circuit",
    "K-3",
    "graph.n_edges says 1,109 for a 6-layer, 4-head sequential model, which has 1,108 edges.",
    ("K104", "/graph/n_edges"),
)
def edge_total_not_the_configurations(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["graph"]["n_edges"] = INTERPBENCH_UNIVERSE.n_edges + 1
    save(folder, doc)


@case(
    "circuit",
    "K-4",
    "The first circuit entry claims one edge more than its membership row marks.",
    ("K105", "/circuits/0/n_edges"),
)
def entry_edge_count_not_its_row(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["circuits"][0]["n_edges"] += 1
    save(folder, doc)


@case(
    "circuit",
    "K-4",
    "A circuit's weighted size is its edge count before pruning, not after.",
    ("K105", "/circuits/7/weighted_size"),
)
def entry_weighted_size_unpruned(folder: Folder) -> None:
    doc = circuit_document(folder)
    entry = doc["circuits"][7]
    assert entry["weighted_size"] != entry["n_edges"], "the case needs a circuit that pruning shrinks"
    entry["weighted_size"] = float(entry["n_edges"])
    save(folder, doc)


@case(
    "circuit",
    "K-5",
    "The grid points of two signed circuits are swapped, so the larger circuit sits at the smaller k: "
    "a warning, the document stays valid.",
    warnings=(("K106", "/circuits/1"),),
)
def circuits_not_nested(folder: Folder) -> None:
    doc = circuit_document(folder)
    first, second = doc["circuits"][1], doc["circuits"][2]
    first["k"], second["k"] = second["k"], first["k"]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The membership matrix is declared with one row too many.",
    ("A110", "/membership/shape"),
)
def membership_shape_mismatch(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["membership"]["shape"] = [21, INTERPBENCH_UNIVERSE.n_edges]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The membership tensor is declared with shape [0, 10^20]: no element, but a dimension over the "
    "tensor limit of 2^36 elements, so it is refused before its sidecar is read.",
    ("A112", "/membership/shape"),
)
def membership_dimension_over_limit(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["membership"]["shape"] = [0, 10**20]
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "The scores tensor is declared with 65 dimensions, over the tensor limit of 32, so it is "
    "refused before its sidecar is read.",
    ("A112", "/scores/shape"),
)
def scores_too_many_dimensions(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["shape"] = [INTERPBENCH_UNIVERSE.n_edges] + [1] * 64
    save(folder, doc)


@case(
    "circuit",
    "DK-2",
    "Ten edge scores for a graph of 1,108 edges: the scores would rank edges of another universe.",
    ("K114", "/scores/shape"),
)
def scores_not_one_per_edge(folder: Folder) -> None:
    doc = circuit_document(folder)
    tensors = {
        "scores": circuit_setup("interpbench")[2][:10].copy(),
        "membership": np.zeros((20, INTERPBENCH_UNIVERSE.n_edges), dtype=bool),
    }
    folder.safetensors("circuit.safetensors", tensors)
    doc["circuits"] = []
    doc["scores"]["shape"] = [10]
    doc["membership"]["shape"] = [20, INTERPBENCH_UNIVERSE.n_edges]
    save(folder, rehash(folder, doc))


@case(
    "circuit",
    "K-3",
    "A universe of 1,000 layers of 1,000 heads (3·10^12 source-slot cells; the edge total is right): "
    "too large to hold, so the membership rows cannot be checked, and the one-row membership of 8 "
    "edges does not span the universe.",
    ("K108", "/graph"),
    ("K105", "/membership/shape"),
)
def universe_too_large(folder: Folder) -> None:
    layers = heads = 1000
    n_edges = (3 * heads + 1) * (layers + (heads + 1) * layers * (layers - 1) // 2)
    n_edges += layers * heads + 1 + layers * (heads + 1)  # MG-7, sequential attention and MLP
    truth = np.array([True, True, False, True, False, False, True, False])
    folder.safetensors("truth.safetensors", {"membership": truth[None, :]})
    doc: Json = document(
        "circuit",
        {
            "graph": {"convention": "eap-ig", "n_layers": layers, "n_heads": heads, "n_edges": n_edges},
            "granularity": "edge",
            "membership": {"artifact": "truth", "tensor": "membership", "shape": [1, 8], "dtype": "bool"},
            "circuits": [{"index": 0, "n_edges": 4}],
            "artifacts": [
                folder.artifact("truth", "ground_truth", "truth.safetensors", "application/x-safetensors")
            ],
            "provenance": PROVENANCE,
        },
    )
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "Two edge scores are NaN and one is infinite (size and hash match the file).",
    ("A110", "/scores"),
)
def scores_not_finite(folder: Folder) -> None:
    universe, model, scores, _ = circuit_setup("interpbench")
    data = CircuitData(universe, scores, ("signed", "absolute"), GRID)
    doc = write_circuit_document(folder, data, name="document.json", model=model)
    broken = scores.copy()
    broken[[3, 500]] = np.nan
    broken[700] = -np.inf
    folder.safetensors("circuit.safetensors", {"scores": broken, "membership": data.membership})
    save(folder, rehash(folder, doc))


@case("circuit", "A-8", "Scores are declared float32 but stored as float16.", ("A110", "/scores/dtype"))
def scores_dtype_mismatch(folder: Folder) -> None:
    doc = circuit_document(folder)
    tensors = {
        "scores": circuit_setup("interpbench")[2].astype(np.float16),
        "membership": np.zeros((20, INTERPBENCH_UNIVERSE.n_edges), dtype=bool),
    }
    folder.safetensors("circuit.safetensors", tensors)
    doc["circuits"] = []
    doc["membership"]["shape"] = [20, INTERPBENCH_UNIVERSE.n_edges]
    save(folder, rehash(folder, doc))


@case(
    "circuit",
    "A-8",
    "The scores tensor is declared under a name the sidecar does not hold.",
    ("A110", "/scores/tensor"),
)
def missing_tensor_name(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["tensor"] = "edge_scores"
    save(folder, doc)


@case("circuit", "A-8", "A safetensors reference without a tensor name.", ("A110", "/scores"))
def tensor_reference_without_name(folder: Folder) -> None:
    doc = circuit_document(folder)
    del doc["scores"]["tensor"]
    save(folder, doc)


@case(
    "circuit",
    "A-4",
    "The safetensors sidecar is truncated (its header promises more data than the file "
    "holds); size and hash are those of the truncated file.",
    ("A105", "/artifacts/0/media_type"),
)
def truncated_safetensors(folder: Folder) -> None:
    doc = circuit_document(folder)
    path = folder.root / "circuit.safetensors"
    path.write_bytes(path.read_bytes()[:-3000])
    save(folder, rehash(folder, doc))


@case(
    "circuit", "A-4", "A file named .safetensors that holds JSON text.", ("A105", "/artifacts/0/media_type")
)
def safetensors_holding_json(folder: Folder) -> None:
    doc = circuit_document(folder)
    folder.write("circuit.safetensors", b'{"scores": [0.1, 0.2, 0.3]}\n')
    save(folder, rehash(folder, doc))


@case(
    "circuit",
    "A-7",
    "The scores reference names an artifact id the document does not declare.",
    ("A109", "/scores/artifact"),
)
def undeclared_tensor_artifact(folder: Folder) -> None:
    doc = circuit_document(folder)
    doc["scores"]["artifact"] = "scores"
    save(folder, doc)


@case(
    "circuit",
    "A-8",
    "A tensor reference names a JSON Lines artifact, which holds no tensors.",
    ("A110", "/scores/artifact"),
)
def tensor_reference_to_jsonl(folder: Folder) -> None:
    doc = circuit_document(folder)
    folder.jsonl("scores.jsonl", [{"edge": "input->a0.h0<q>", "score": 0.01}])
    doc["artifacts"].append(
        folder.artifact("edge-list", "scores", "scores.jsonl", "application/jsonl", rows=1)
    )
    doc["scores"]["artifact"] = "edge-list"
    save(folder, doc)


def _node_scored(folder: Folder, *, edit: Any = None, drop: tuple[str, ...] = ()) -> None:
    """A 2-layer, 2-head graph imported from EAP-IG with node scores: nodes 1 and 4 unscored
    (NaN in the source), so false in ``node_scored`` and 0 in ``node_scores``."""
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(2, 2, False, 8))
    n, n_forward = universe.n_edges, universe.n_forward
    rng = np.random.default_rng(23)
    scored = np.ones(n_forward, dtype=bool)
    scored[[1, 4]] = False
    tensors = {
        "scores": rng.standard_normal(n).astype(np.float32),
        "membership": (rng.random(n) < 0.2)[None, :],
        "node_membership": (rng.random(n_forward) < 0.5)[None, :],
        "node_scores": np.where(scored, rng.standard_normal(n_forward), 0.0).astype(np.float32),
        "node_scored": scored,
    }
    if edit is not None:
        edit(tensors)
    tensors = {k: v for k, v in tensors.items() if k not in drop}
    folder.safetensors("circuit.safetensors", tensors)

    def ref(name: str) -> Json:
        array = tensors[name]
        dtype = "bool" if array.dtype == np.bool_ else "float32"
        return {"artifact": "tensors", "tensor": name, "shape": list(array.shape), "dtype": dtype}

    row = tensors["membership"][0]
    fields: Json = {
        "description": "An EAP-IG graph with node scores; two nodes the source left unscored (NaN).",
        "graph": {"convention": "eap-ig", "n_layers": 2, "n_heads": 2, "d_model": 8, "n_edges": n},
        "granularity": "node",
        **{name: ref(name) for name in tensors},
        "circuits": [
            {"index": 0, "n_edges": int(row.sum()), "weighted_size": universe.weighted_edge_count(row)}
        ],
        "artifacts": [
            folder.artifact("tensors", "circuit", "circuit.safetensors", "application/x-safetensors")
        ],
        "provenance": PROVENANCE,
    }
    save(folder, document("circuit", fields))


@case(
    "circuit",
    "I-2",
    "Node scores imported from an EAP-IG graph: the nodes the source left unscored (NaN) are false "
    "in node_scored and hold 0 in node_scores; the node in_graph flags are in node_membership.",
)
def eap_ig_node_scores_unscored(folder: Folder) -> None:
    _node_scored(folder)


@case(
    "circuit",
    "I-2",
    "A node marked unscored in node_scored holds the value 0.5 in node_scores.",
    ("A114", "/node_scores"),
)
def unscored_node_holds_a_score(folder: Folder) -> None:
    _node_scored(folder, edit=lambda t: t["node_scores"].__setitem__(1, 0.5))


@case(
    "circuit",
    "I-2",
    "node_scores and node_scored hold one entry fewer than the graph has source nodes.",
    ("A113", "/node_scores/shape"),
    ("A113", "/node_scored/shape"),
)
def node_scores_not_the_graphs_nodes(folder: Folder) -> None:
    def shorten(tensors: Json) -> None:
        tensors["node_scores"] = tensors["node_scores"][:-1]
        tensors["node_scored"] = tensors["node_scored"][:-1]

    _node_scored(folder, edit=shorten)


@case(
    "circuit",
    "I-2",
    "node_scores comes without node_scored, so unscored nodes cannot be told from scored ones.",
    ("A113", "/node_scores"),
)
def node_scores_without_mask(folder: Folder) -> None:
    _node_scored(folder, drop=("node_scored",))
