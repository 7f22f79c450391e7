"""Recomputation of neuron-granularity circuit reports rebuilt from neuron scores (circuit.md MC-12).

The shipped IOI example is turned into a neuron-level report (a score per source node and
residual coordinate, one node and a few neurons unscored, curve points without circuits).
Its claims are computed here by an independent slow loop: neurons chosen by a plain sort,
the node set and its edges built one at a time, and each circuit evaluated by the naive
per-slot forward of ``engine/test_evaluate`` (float64, no pruning, no caching), whose
sources carry their kept neurons' patched output and the counterfactual elsewhere; the
recomputation must reproduce them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
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
N_FORWARD, D_MODEL = 1 + 4 * (4 + 1), 64  # the tiny model: 4 layers of 4 heads and an MLP, width 64
N_ROWS = 40  # the example's first rows: the naive forward is slow


def _neuron_scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    scores = rng.normal(size=(N_FORWARD, D_MODEL)).astype(np.float32)
    scored = np.ones((N_FORWARD, D_MODEL), dtype=bool)
    scored[[0, 6]] = False  # whole nodes unscored (EAP-IG's NaN): always kept
    scored[rng.integers(0, N_FORWARD, 5), rng.integers(0, D_MODEL, 5)] = False
    scores[3, 10] = scores[2, 5]  # a tie, broken by the flat (row-major) index
    scores[~scored] = 0.0
    return scores, scored


def _sha(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _neuron_copy(tmp_path: Path, with_scores: bool = True) -> Path:
    """The example at neuron granularity, its points without circuits, neuron scores in the sidecar."""
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "circuit-ioi"
    shutil.copytree(EXAMPLE, folder)
    circuit = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))
    circuit["granularity"] = "neuron"
    if with_scores:
        tensors = load_file(folder / "circuit.safetensors")
        tensors["neuron_scores"], tensors["neuron_scored"] = _neuron_scores()
        save_file(tensors, str(folder / "circuit.safetensors"))
        circuit["artifacts"][0].update(_sha(folder / "circuit.safetensors"))
        for name, dtype in (("neuron_scores", "float32"), ("neuron_scored", "bool")):
            shape = [N_FORWARD, D_MODEL]
            circuit[name] = {"artifact": "tensors", "tensor": name, "shape": shape, "dtype": dtype}
    (folder / "circuit.json").write_text(json.dumps(circuit, indent=2) + "\n", encoding="utf-8")
    rows = (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:N_ROWS]
    (folder / "dataset.jsonl").write_text("".join(rows), encoding="utf-8")
    dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    dataset["artifacts"][0].update({**_sha(folder / "dataset.jsonl"), "rows": N_ROWS})
    (folder / "dataset.json").write_text(json.dumps(dataset, indent=1) + "\n", encoding="utf-8")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["artifacts"][0].update(_sha(folder / "circuit.json"))
    report["artifacts"][1].update(_sha(folder / "dataset.json"))
    report["task"]["n_examples"] = N_ROWS
    report["settings"]["granularity"] = "neuron"
    for curve in report["claims"]["curves"]:
        for point in curve["points"]:
            for key in ("circuit", "n_edges", "weighted_size"):
                point.pop(key)
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return folder


def _slow_circuit(nv: Any, k: float, ranking: str) -> tuple[np.ndarray, np.ndarray]:
    """Edges (sources × slots, unpruned) and neuron mask at k, one neuron and one edge at a time."""
    scores, scored = _neuron_scores()
    keyed = []
    for f in range(N_FORWARD):
        for j in range(D_MODEL):
            if scored[f, j]:
                value = float(scores[f, j])
                keyed.append((-(value if ranking == "signed" else abs(value)), f * D_MODEL + j))
    keyed.sort()
    n = int(Fraction(str(k)) * len(keyed))  # floor, exact
    neurons = ~scored
    for _, flat in keyed[:n]:
        neurons[divmod(flat, D_MODEL)] = True
    nodes = [bool(neurons[f].any()) for f in range(N_FORWARD)]
    edges = np.zeros((nv.nf, nv.nb), dtype=bool)
    for slot in range(nv.nb):
        for f in range(nv.n_sources(slot)):
            edges[f, slot] = nodes[f] and (slot == nv.nb - 1 or nodes[_owner(nv, slot)])
    return edges, neurons


def _owner(nv: Any, slot: int) -> int:
    layer, within = divmod(slot, 3 * nv.H + 1)
    return nv.mlp_node(layer) if within == 3 * nv.H else nv.head(layer, within % nv.H)


def _slow_claims(report: dict[str, Any]) -> tuple[list[list[float]], float, float]:
    """m(N), m(∅) and each point's f from the naive forward in float64 on the example's rows."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from mibspec.reference_impl.recompute.circuit import tokenize_pairs
    from mibspec.reference_impl.threads import one_thread

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
    from test_evaluate import Naive, naive_metrics

    hf = AutoModelForCausalLM.from_pretrained(
        MODELS / "tiny-gpt2", dtype=torch.float64, attn_implementation="eager", trust_remote_code=False
    )
    nv = Naive(hf.eval())
    tokenizer = Tokenizer.from_file(str(MODELS / "tiny-gpt2" / "tokenizer.json"))
    lines = (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()[:N_ROWS]
    rows = [json.loads(line) for line in lines]
    arrays = tokenize_pairs(
        rows,
        report["task"]["counterfactual_type"],
        lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
        "",
    )
    keys = ("clean", "corrupted", "mask", "correct", "counterfactual")
    data = {key: torch.as_tensor(np.asarray(a, dtype=np.int64)) for key, a in zip(keys, arrays, strict=True)}
    built = [_slow_circuit(nv, p["k"], c["ranking"]) for c in report["claims"]["curves"] for p in c["points"]]
    full = np.zeros((1, nv.nf, nv.nb), dtype=bool)
    for slot in range(nv.nb):
        full[0, : nv.n_sources(slot), slot] = True
    with one_thread():  # tiny tensors: threads cost more than they save
        ends = naive_metrics(nv, data, np.concatenate([full, np.zeros_like(full)]), prune=False).mean(axis=1)
        edges, neurons = np.stack([e for e, _ in built]), np.stack([n for _, n in built])
        m = naive_metrics(nv, data, edges, neurons=neurons, prune=False).mean(axis=1)
    values = [(float(v) - ends[1]) / (ends[0] - ends[1]) for v in m]
    per_curve, start = [], 0
    for curve in report["claims"]["curves"]:
        per_curve.append(values[start : start + len(curve["points"])])
        start += len(curve["points"])
    return per_curve, float(ends[0]), float(ends[1])


@pytest.mark.slow
def test_neuron_level_curves_recompute_as_the_slow_loop(tmp_path: Path, slow_claims: WriteClaims) -> None:
    folder = _neuron_copy(tmp_path)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    values, m_full, m_empty = _slow_claims(report)
    claims = slow_claims(folder, report, values, m_full, m_empty)

    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    document = result.documents[0]
    assert result.valid, [str(f) for f in document.findings]
    assert document.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    faithfulness = [c for c in document.comparisons if c.pointer.endswith("/faithfulness")]
    assert len(faithfulness) == sum(len(curve["points"]) for curve in claims["curves"])
    assert all(c.within for c in faithfulness)
    # masked neurons matter: the curve is not the node-level one of the same nodes
    assert len({round(v, 6) for curve in values for v in curve}) > 5


def test_neuron_level_points_without_neuron_scores_are_refused(tmp_path: Path) -> None:
    folder = _neuron_copy(tmp_path, with_scores=False)
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    document = result.documents[0]
    assert [(f.code, f.pointer) for f in document.findings] == [("R104", "/claims/circuit")]
    assert "neuron scores" in document.findings[0].message
    assert document.comparisons == []
