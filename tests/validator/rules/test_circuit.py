"""False numbers a circuit report could carry past every check, each tried as a cheater would.

Every test starts from a copy of the bundled IOI circuit report (which verifies with
recomputation), changes a number or a declaration the way that would have let a false claim
stand, and checks the rules stage refuses it with its code and pointer; the honest value
passes. Expected values come from slow loops written here (pairwise AUROC, MIB's AUROC
as a loop over the grid, pruning node by node), never from the code under test.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mibspec
from mibspec.core.profiles import load_profile
from mibspec.metrics.graph import GraphConfig, GraphUniverse
from mibspec.validator._unchecked import not_checked

safetensors_numpy = pytest.importorskip("safetensors.numpy")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "circuit-ioi"
GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
Json = dict[str, Any]


# --------------------------------------------------------------------------- the example, edited


class Copy:
    """A copy of the bundled IOI circuit report, edited and re-hashed like a cheater would."""

    def __init__(self, root: Path) -> None:
        self.root = root / "circuit-ioi"
        shutil.copytree(EXAMPLE, self.root)

    def read(self, name: str = "report.json") -> Json:
        data: Json = json.loads((self.root / name).read_text(encoding="utf-8"))
        return data

    def write(self, doc: Json, name: str = "report.json") -> None:
        for artifact in doc.get("artifacts", []):
            data = (self.root / artifact["path"]).read_bytes()
            artifact["sha256"], artifact["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
        (self.root / name).write_text(json.dumps(doc, indent=2), encoding="utf-8")

    def edit(self, change: Callable[[Json], Any], name: str = "report.json") -> None:
        doc = self.read(name)
        change(doc)
        self.write(doc, name)

    def tensors(self) -> dict[str, np.ndarray]:
        loaded: dict[str, np.ndarray] = safetensors_numpy.load_file(str(self.root / "circuit.safetensors"))
        return loaded

    def save_tensors(self, tensors: dict[str, np.ndarray], name: str = "circuit.safetensors") -> None:
        safetensors_numpy.save_file(tensors, str(self.root / name))

    def errors(self, **options: Any) -> list[tuple[str, str]]:
        result = mibspec.verify(self.root / "report.json", recompute=False, **options)
        return [(f.code, f.pointer) for f in result.findings if f.severity.value == "error"]


@pytest.fixture
def copy(tmp_path: Path) -> Copy:
    return Copy(tmp_path)


def _points(doc: Json) -> list[Json]:
    return [point for curve in doc["claims"]["curves"] for point in curve["points"]]


def test_the_copy_starts_conformant(copy: Copy) -> None:
    assert copy.errors() == []


# --------------------------------------------------------------------------- claims.n_edges (K-8)


def test_a_claimed_edge_total_of_a_billion_does_not_let_the_full_circuit_stand(copy: Copy) -> None:
    """The cheat: every point evaluated on the full 479-edge circuit (f = 1, CPR 0.999, CMD 0)
    and n_edges = 10^9, so that ⌊k · n_edges⌋ ≥ 479 at every k."""
    tensors = copy.tensors()
    tensors["membership"] = np.ones_like(tensors["membership"])
    copy.save_tensors(tensors)

    def full(doc: Json) -> None:
        for entry in doc["circuits"]:
            entry["n_edges"], entry["weighted_size"] = 479, 479.0

    copy.edit(full, "circuit.json")

    def claim(doc: Json) -> None:
        doc["claims"]["n_edges"] = 10**9
        for point in _points(doc):
            point.update(n_edges=479, weighted_size=479.0, faithfulness=1.0)
        doc["claims"]["cpr"]["value"], doc["claims"]["cmd"]["value"] = 0.999, 0.0

    copy.edit(claim)
    errors = copy.errors()
    assert ("K110", "/claims/n_edges") in errors
    # sizes are bounded by the graph's 479 edges: ⌊0.5 · 479⌋ = 239 < 479
    assert ("K103", "/claims/curves/0/points/8/n_edges") in errors
    assert ("K103", "/claims/curves/0/points/0/weighted_size") in errors
    assert ("K103", "/claims/curves/0/points/9/n_edges") not in errors  # k = 1 allows all 479


@pytest.mark.slow
def test_the_edge_total_is_compared_with_the_graph_and_the_declared_model(copy: Copy) -> None:
    copy.edit(lambda doc: doc["claims"].update(n_edges=480))
    assert copy.errors() == [("K110", "/claims/n_edges"), ("K110", "/claims/n_edges")]  # graph, model
    copy.edit(lambda doc: doc["claims"].update(n_edges=479))
    # a model declared with 5 heads has (3·5+1)·(4 + 6·6) + 4·5 + 1 + 4·6 = 685 edges (MG-7)
    copy.edit(lambda doc: doc["model"]["config"].update(n_heads=5))
    result = mibspec.verify(copy.root / "report.json", recompute=False)
    [finding] = [f for f in result.findings if f.code == "K110"]
    assert "685" in finding.message
    assert "model" in finding.message


# --------------------------------------------------------------------------- recorded sizes (K-9)


def _slow_pruned_size(universe: GraphUniverse, edges: np.ndarray) -> int:
    """Edges of a circuit on some input → logits path, found node by node (MG-10, MG-11)."""
    source = [int(s) for s in universe.edge_src]
    target = [int(universe.node_of_slot[d]) for d in universe.edge_dst]  # -1: logits
    kept = [i for i in range(len(source)) if edges[i]]
    reached = {0}
    for node in range(1, universe.n_forward):  # forward order is topological
        if any(source[i] in reached and target[i] == node for i in kept):
            reached.add(node)
    reaches = {-1}
    for node in range(universe.n_forward - 1, -1, -1):
        if any(source[i] == node and target[i] in reaches for i in kept):
            reaches.add(node)
    return sum(1 for i in kept if source[i] in reached and target[i] in reaches)


@pytest.mark.slow
def test_a_recorded_size_moved_off_its_circuit_is_refused(copy: Copy) -> None:
    universe = GraphUniverse(GraphConfig(4, 4))
    row = copy.tensors()["membership"][4]  # the signed circuit at k = 0.02
    honest = float(_slow_pruned_size(universe, row))
    assert honest == copy.read()["claims"]["curves"][0]["points"][4]["weighted_size"]
    for false in (honest + 1.0, honest - 0.5, 0.05 if honest == 0 else 0.0):
        copy.edit(lambda doc, v=false: doc["claims"]["curves"][0]["points"][4].update(weighted_size=v))
        for profile in ("default", "mib-2025"):  # both record complete pruning
            assert ("K111", "/claims/curves/0/points/4/weighted_size") in copy.errors(profile=profile)
    copy.edit(lambda doc: doc["claims"]["curves"][0]["points"][0].update(weighted_size=0.05))
    copy.edit(lambda doc: doc["claims"]["curves"][0]["points"][4].update(weighted_size=honest))
    assert copy.errors() == [("K111", "/claims/curves/0/points/0/weighted_size")]


@pytest.mark.slow
def test_a_point_without_sizes_is_bounded_by_its_row(copy: Copy) -> None:
    """Leaving the sizes out does not hide the circuit: the row a point names is what is bounded."""

    def bare(doc: Json) -> None:
        for point in _points(doc):
            del point["n_edges"], point["weighted_size"]
        doc["claims"]["curves"][0]["points"][0]["circuit"] = 9  # the full circuit at k = 0.001

    copy.edit(bare)
    errors = copy.errors()
    assert ("K109", "/claims/curves/0/points/0/circuit") in errors  # listed at k = 1
    assert ("K103", "/claims/curves/0/points/0/circuit") in errors
    assert copy.errors(profile="mib-2025") == [("K109", "/claims/curves/0/points/0/circuit")]


@pytest.mark.slow
def test_points_rebuilt_from_scores_carry_the_rebuilt_sizes(copy: Copy) -> None:
    universe = GraphUniverse(GraphConfig(4, 4))
    scores = copy.tensors()["scores"].astype(np.float64)
    # the absolute ranking, ties by index, written out: the first ⌊0.5 · 479⌋ = 239 edges
    order = sorted(range(479), key=lambda i: (-abs(scores[i]), i))
    chosen = np.zeros(479, dtype=bool)
    chosen[order[:239]] = True
    size = float(_slow_pruned_size(universe, chosen))

    def rebuilt(doc: Json) -> None:
        for point in _points(doc):
            del point["circuit"]

    copy.edit(rebuilt)
    assert copy.errors() == []
    assert copy.read()["claims"]["curves"][1]["points"][8]["weighted_size"] == size
    copy.edit(lambda doc: doc["claims"]["curves"][1]["points"][8].update(n_edges=240))
    assert ("K111", "/claims/curves/1/points/8/n_edges") in copy.errors()


@pytest.mark.slow
def test_sizes_nothing_could_check_are_refused(copy: Copy) -> None:
    """Without a circuit document a point's sizes are bounded by nothing true: refused."""

    def drop(doc: Json) -> None:
        del doc["claims"]["circuit"]
        doc["artifacts"] = [a for a in doc["artifacts"] if a["id"] != "circuit"]
        for point in _points(doc):
            del point["circuit"]

    copy.edit(drop)
    errors = copy.errors()
    assert len(errors) == 2 * 20
    assert {code for code, _ in errors} == {"K112"}
    copy.edit(lambda doc: [(p.pop("n_edges"), p.pop("weighted_size")) for p in _points(doc)])
    assert copy.errors() == []


def test_scores_of_another_length_rank_nothing(copy: Copy) -> None:
    tensors = copy.tensors()
    tensors["scores"] = tensors["scores"][:10].copy()
    copy.save_tensors(tensors)
    copy.edit(lambda doc: doc["scores"].update(shape=[10]), "circuit.json")
    copy.edit(lambda doc: None)  # re-hash the circuit document
    result = mibspec.verify(copy.root / "circuit.json", recompute=False)
    assert [(f.code, f.pointer) for f in result.findings] == [("K114", "/scores/shape")]


# --------------------------------------------------------------------------- AUROC (C-13)


def _slow_rank_auroc(keys: np.ndarray, truth: np.ndarray) -> float:
    """P(a true edge's key > a false edge's key), ties counting 1/2, over every pair."""
    wins = 0.0
    for p in keys[truth]:
        for n in keys[~truth]:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (truth.sum() * (~truth).sum())


def _slow_mib_auroc(keys: np.ndarray, truth: np.ndarray) -> float:
    """MC-10 as a loop: ⌈k · n⌉ edges by key (ties by index) per grid point, trapezoid over FPR
    divided by the last FPR, no (0, 0) point."""
    order = sorted(range(len(keys)), key=lambda i: (-keys[i], i))
    positives, negatives = int(truth.sum()), int((~truth).sum())
    tpr, fpr = [], []
    for k in GRID:
        m = math.ceil(Fraction(str(k)) * len(keys))
        tp = sum(bool(truth[i]) for i in order[:m])
        tpr.append(tp / positives)
        fpr.append((m - tp) / negatives)
    area = sum((fpr[i + 1] - fpr[i]) * (tpr[i] + tpr[i + 1]) / 2 for i in range(len(GRID) - 1))
    return area / fpr[-1]


def _with_ground_truth(copy: Copy, truth: np.ndarray) -> None:
    """A one-row ground-truth circuit document beside the report, and an AUROC claim on it."""
    copy.save_tensors({"membership": truth[None, :]}, "truth.safetensors")
    circuit = copy.read("circuit.json")
    doc = {
        "spec_version": "1.1",
        "kind": "circuit",
        "graph": circuit["graph"],
        "granularity": "edge",
        "membership": {"artifact": "truth", "tensor": "membership", "shape": [1, 479], "dtype": "bool"},
        "circuits": [{"index": 0, "n_edges": int(truth.sum())}],
        "artifacts": [
            {
                "id": "truth",
                "role": "ground_truth",
                "path": "truth.safetensors",
                "sha256": "",
                "bytes": 0,
                "media_type": "application/x-safetensors",
            }
        ],
    }
    copy.write(doc, "truth.json")

    def claim(report: Json) -> None:
        report["artifacts"].append(
            {
                "id": "truth",
                "role": "ground_truth",
                "path": "truth.json",
                "sha256": "",
                "bytes": 0,
                "media_type": "application/json",
                "kind": "circuit",
            }
        )
        report["claims"]["auroc"] = {"value": 0.5, "convention": "rank", "ground_truth": "truth"}

    copy.edit(claim)


@pytest.mark.slow
def test_an_auroc_is_recomputed_from_the_scores_and_the_ground_truth(copy: Copy) -> None:
    tensors = copy.tensors()
    keys = np.abs(tensors["scores"].astype(np.float64))
    truth = tensors["membership"][6].copy()  # the signed circuit at k = 0.1 as the true edges
    _with_ground_truth(copy, truth)
    rank, mib = _slow_rank_auroc(keys, truth), _slow_mib_auroc(keys, truth)
    assert abs(rank - mib) > 1e-3  # the conventions give different numbers here
    for convention, honest, other in (("rank", rank, mib), ("mib", mib, rank)):
        for value in (0.01, 0.99, other):
            copy.edit(lambda doc, c=convention, v=value: doc["claims"]["auroc"].update(convention=c, value=v))
            assert copy.errors() == [("C125", "/claims/auroc/value")], (convention, value)
        copy.edit(lambda doc, c=convention, v=honest: doc["claims"]["auroc"].update(convention=c, value=v))
        assert copy.errors() == [], convention


@pytest.mark.slow
def test_an_auroc_nothing_could_recompute_is_refused(copy: Copy) -> None:
    truth = np.zeros(479, dtype=bool)  # no true edge: the AUROC is undefined
    _with_ground_truth(copy, truth)
    assert copy.errors() == [("C126", "/claims/auroc")]
    # the report's own circuit document as the truth: 20 rows, not one edge set
    copy.edit(lambda doc: doc["claims"]["auroc"].update(ground_truth="circuit"))
    assert copy.errors() == [("C126", "/claims/auroc")]
    copy.edit(lambda doc: doc["claims"]["auroc"].update(ground_truth="truth"))
    copy.save_tensors({"membership": np.eye(1, 479, dtype=bool)}, "truth.safetensors")
    copy.edit(lambda doc: None, "truth.json")  # re-hash
    copy.edit(lambda doc: None)
    # scores gone from the circuit document: nothing ranks the edges
    tensors = copy.tensors()
    del tensors["scores"]
    copy.save_tensors(tensors)
    copy.edit(lambda doc: doc.pop("scores"), "circuit.json")
    copy.edit(lambda doc: None)
    errors = copy.errors()
    assert ("C126", "/claims/auroc") in errors


# --------------------------------------------------------------------------- one curve per ranking (K-10)


@pytest.mark.slow
def test_two_curves_of_one_ranking_stop_at_the_rules_never_at_an_internal_error(
    copy: Copy, mibspec_cli: Any
) -> None:
    def duplicate(doc: Json) -> None:
        signed = doc["claims"]["curves"][0]
        doc["claims"]["curves"][1] = json.loads(json.dumps(signed))
        doc["settings"]["ranking"]["cmd"] = "signed"
        ks, fs = [p["k"] for p in signed["points"]], [p["faithfulness"] for p in signed["points"]]
        doc["claims"]["cmd"]["value"] = sum(
            (ks[i + 1] - ks[i]) * (abs(1 - fs[i]) + abs(1 - fs[i + 1])) / 2 for i in range(len(ks) - 1)
        )

    copy.edit(duplicate)
    assert copy.errors() == [("K113", "/claims/curves/1/ranking")]
    result = mibspec.verify(copy.root / "report.json", model_roots=[REPO / "examples" / "models"])
    report = result.documents[0]
    assert report.internal_error is None
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "not_run"
    run = mibspec_cli(
        "verify", str(copy.root / "report.json"), "--model-root", str(REPO / "examples" / "models")
    )
    assert run.returncode == 1, run.stderr


# --------------------------------------------------------------------------- profile gaps (V-5)


def test_what_a_profile_does_not_check_follows_from_its_data() -> None:
    assert not_checked(load_profile("default"), "circuit") == []
    mib = {item.setting: item for item in not_checked(load_profile("mib-2025"), "circuit")}
    assert list(mib) == ["check_circuit_size", "force_full_faithfulness", "severity.K106"]
    assert mib["check_circuit_size"].codes == ("K103",)
    # a profile built here, named like the strict one: its data decides, not its name
    custom = {**load_profile("default"), "check_circuit_size": False, "severity": {"C101": "warning"}}
    found = {item.setting: item.codes for item in not_checked(custom, "circuit")}
    assert found == {"check_circuit_size": ("K103",), "severity.C101": ("C101",)}
    # a setting of another track, a raised severity: nothing left unchecked for a circuit report
    stricter = {**load_profile("default"), "checker": "substring", "severity": {"K106": "error"}}
    assert not_checked(stricter, "circuit") == []
    assert [item.setting for item in not_checked(stricter, "causal_variable")] == ["checker"]


@pytest.mark.slow
def test_verify_output_says_per_report_what_its_profile_does_not_check(copy: Copy, mibspec_cli: Any) -> None:
    strict = mibspec_cli("verify", str(copy.root / "report.json"), "--no-recompute", "--format", "json")
    [report] = [d for d in json.loads(strict.stdout)["documents"] if d["kind"] == "report"]
    assert (report["profile"], report["not_checked"]) == ("default", [])
    copy.edit(lambda doc: doc.update(profile="mib-2025", settings={**doc["settings"], "start_token": "none"}))
    lenient = mibspec_cli("verify", str(copy.root / "report.json"), "--no-recompute", "--format", "json")
    documents = json.loads(lenient.stdout)["documents"]
    [report] = [d for d in documents if d["kind"] == "report"]
    assert report["profile"] == "mib-2025"
    assert [item["setting"] for item in report["not_checked"]] == [
        "check_circuit_size",
        "force_full_faithfulness",
        "severity.K106",
    ]
    assert all("not_checked" not in d for d in documents if d["kind"] != "report")
    text = mibspec_cli("verify", str(copy.root / "report.json"), "--no-recompute").stdout
    [line] = [line for line in text.splitlines() if "does not check" in line]
    assert "profile mib-2025" in line
    assert "K103" in line
    assert "k = 1" in line
    assert "K106" in line
