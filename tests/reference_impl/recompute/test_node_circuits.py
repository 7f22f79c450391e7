"""Recomputation of node-granularity circuit reports (circuit.md MC-12).

The shipped IOI example is turned into a node-level report (node scores, one node unscored,
curve points without circuits). Its claims are computed here by an independent slow loop:
nodes chosen by a plain sort, the edge set built edge by edge from the node set, then
evaluated by the engine; recomputation must reproduce them. Neuron-level reports:
``test_neuron_circuits``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import mibspec

if TYPE_CHECKING:
    from conftest import WriteClaims

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "circuit-ioi"
MODELS = REPO / "examples" / "models"
N_FORWARD = 1 + 4 * (4 + 1)  # input, then 4 heads and an MLP per layer of the tiny model


def _node_scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    scores = rng.normal(size=N_FORWARD).astype(np.float32)
    scored = np.ones(N_FORWARD, dtype=bool)
    scored[[0, 6]] = False  # unscored (EAP-IG's NaN), stored as 0
    scores[~scored] = 0.0
    return scores, scored


def _sha(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _granular_copy(tmp_path: Path, granularity: str) -> Path:
    """The example at ``granularity``, its points without circuits, node scores in the sidecar."""
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "circuit-ioi"
    shutil.copytree(EXAMPLE, folder)
    tensors = load_file(folder / "circuit.safetensors")
    tensors["node_scores"], tensors["node_scored"] = _node_scores()
    save_file(tensors, str(folder / "circuit.safetensors"))
    circuit = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))
    circuit["artifacts"][0].update(_sha(folder / "circuit.safetensors"))
    circuit["granularity"] = granularity
    for name, dtype in (("node_scores", "float32"), ("node_scored", "bool")):
        circuit[name] = {"artifact": "tensors", "tensor": name, "shape": [N_FORWARD], "dtype": dtype}
    (folder / "circuit.json").write_text(json.dumps(circuit, indent=2) + "\n", encoding="utf-8")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["artifacts"][0].update(_sha(folder / "circuit.json"))
    report["settings"]["granularity"] = granularity
    for curve in report["claims"]["curves"]:
        for point in curve["points"]:
            # the example's sizes are its edge circuits'; these points declare none (K-9)
            for key in ("circuit", "n_edges", "weighted_size"):
                point.pop(key)
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return folder


def _slow_node_circuit(universe: Any, k: float, ranking: str) -> np.ndarray:
    """The edges of the node circuit at k, built one node and one edge at a time."""
    scores, scored = _node_scores()
    keys = [(float(scores[i]) if ranking == "signed" else abs(float(scores[i])), i) for i in range(N_FORWARD)]
    ranked = sorted((key for key in keys if scored[key[1]]), key=lambda key: (-key[0], key[1]))
    n = int(Fraction(str(k)) * len(ranked))  # floor, exact
    kept = {i for _, i in ranked[:n]} | {i for i in range(N_FORWARD) if not scored[i]}
    mask = np.zeros(universe.n_edges, dtype=bool)
    for e in range(universe.n_edges):
        source, node = int(universe.edge_src[e]), int(universe.node_of_slot[universe.edge_dst[e]])
        mask[e] = source in kept and (node == -1 or node in kept)
    return mask


def _slow_claims(report: dict[str, Any]) -> tuple[list[list[float]], float, float]:
    """Faithfulness of the slow loop's circuits, evaluated by the engine on the example's data."""
    from tokenizers import Tokenizer

    from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, load_model
    from mibspec.reference_impl.recompute.circuit import circuit_faithfulness, tokenize_pairs

    model = load_model(MODELS / "tiny-gpt2")
    universe = graph_universe(model)
    tokenizer = Tokenizer.from_file(str(MODELS / "tiny-gpt2" / "tokenizer.json"))
    rows = [json.loads(line) for line in (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    ids, cids, mask, correct, counter = tokenize_pairs(
        rows,
        report["task"]["counterfactual_type"],
        lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
        "",
    )
    curves = report["claims"]["curves"]
    circuits = np.stack(
        [_slow_node_circuit(universe, p["k"], curve["ranking"]) for curve in curves for p in curve["points"]]
    )
    result = evaluate_circuits(model, ids, cids, mask, correct, counter, circuits, batch_size=20)
    m_full, m_empty, values = circuit_faithfulness(result)
    per_curve, start = [], 0
    for curve in curves:
        per_curve.append(values[start : start + len(curve["points"])])
        start += len(curve["points"])
    return per_curve, m_full, m_empty


@pytest.mark.slow
def test_node_level_curves_recompute_as_node_circuits(tmp_path: Path, slow_claims: WriteClaims) -> None:
    folder = _granular_copy(tmp_path, "node")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    values, m_full, m_empty = _slow_claims(report)
    # mib-2025 forces f(1) = 1
    claims = slow_claims(folder, report, values, m_full, m_empty, full_circuit_is_one=True)

    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    document = result.documents[0]
    assert result.valid, [str(f) for f in document.findings]
    assert document.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    faithfulness = [c for c in document.comparisons if c.pointer.endswith("/faithfulness")]
    assert len(faithfulness) == sum(len(curve["points"]) for curve in claims["curves"])
    # the node circuits differ from the edge circuits of the same k: an edge-level
    # recomputation would not have reproduced these claims
    assert len({round(v, 6) for curve in values for v in curve}) > 3


def test_node_level_points_without_node_scores_are_refused(tmp_path: Path) -> None:
    folder = _granular_copy(tmp_path, "node")
    circuit = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))
    del circuit["node_scores"], circuit["node_scored"]
    (folder / "circuit.json").write_text(json.dumps(circuit, indent=2) + "\n", encoding="utf-8")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["artifacts"][0].update(_sha(folder / "circuit.json"))
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    codes = [(f.code, f.pointer) for f in result.documents[0].findings]
    assert codes == [("R104", "/claims/circuit")]
    assert "node scores" in result.documents[0].findings[0].message
