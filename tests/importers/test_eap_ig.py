"""Importing EAP-IG graphs: by name, never by position; bad files give codes, not tracebacks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import mibspec
from mibspec.importers import import_eap_ig
from mibspec.metrics.graph import GraphConfig, GraphUniverse


def _names(cfg: dict[str, object]) -> tuple[list[str], list[str], list[str]]:
    """Source, destination and edge names built from first principles (FIELD_NOTES §1)."""
    layers, heads = int(cfg["n_layers"]), int(cfg["n_heads"])  # type: ignore[call-overload]
    sources = ["input"]
    destinations = []
    edges = []
    for layer in range(layers):
        before = list(sources)
        for kind in ("q", "k", "v"):
            for head in range(heads):
                slot = f"a{layer}.h{head}<{kind}>"
                destinations.append(slot)
                edges += [f"{src}->{slot}" for src in before]
        sources += [f"a{layer}.h{head}" for head in range(heads)]
        destinations.append(f"m{layer}")
        edges += [f"{src}->m{layer}" for src in sources]
        sources.append(f"m{layer}")
    destinations.append("logits")
    edges += [f"{src}->logits" for src in sources]
    return sources, destinations, edges


CFG = {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 8}


def _graph_json(tmp_path: Path, *, shuffle: bool = True) -> tuple[Path, dict[str, float], set[str]]:
    rng = np.random.default_rng(3)
    _, _, edges = _names(CFG)
    order = rng.permutation(len(edges)) if shuffle else np.arange(len(edges))
    scores = {edges[i]: float(rng.standard_normal()) for i in order}
    chosen = {name for name in edges if name.endswith("->logits") or name.startswith("input->")}
    payload = {
        "cfg": CFG,
        "nodes": {"input": {"in_graph": True}},
        "edges": {name: {"score": scores[name], "in_graph": name in chosen} for name in scores},
    }
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(payload))
    return path, scores, chosen


def test_json_graph_imports_by_name_into_a_conformant_circuit(tmp_path: Path) -> None:
    source, scores, chosen = _graph_json(tmp_path)
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    result = import_eap_ig(source, tmp_path / "out")
    assert result.ok, [str(f) for f in result.findings]
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before  # the input is only read
    verified = mibspec.verify(tmp_path / "out" / "circuit.json", recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]

    from safetensors.numpy import load_file

    tensors = load_file(str(tmp_path / "out" / "circuit.safetensors"))
    universe = GraphUniverse(GraphConfig(2, 2, False, 8))
    names = universe.edge_names()
    assert set(names) == set(_names(CFG)[2])
    for index, name in enumerate(names):
        assert tensors["scores"][index] == np.float32(scores[name])
        assert tensors["membership"][0, index] == (name in chosen)
    document = json.loads((tmp_path / "out" / "circuit.json").read_text())
    assert document["circuits"][0]["n_edges"] == len(chosen)


def test_import_is_deterministic(tmp_path: Path) -> None:
    source, _, _ = _graph_json(tmp_path)
    import_eap_ig(source, tmp_path / "a")
    import_eap_ig(source, tmp_path / "b")
    for name in ("circuit.json", "circuit.safetensors"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda g: g["edges"].update({"a9.h0->logits": {"score": 1.0, "in_graph": False}}), "I102"),
        (lambda g: g["edges"].pop(next(iter(g["edges"]))), "I103"),
        (lambda g: g.pop("cfg"), "I101"),
        (lambda g: g["edges"].update({next(iter(g["edges"])): {"score": "high", "in_graph": False}}), "I101"),
    ],
    ids=["unknown-edge", "missing-edge", "no-cfg", "score-not-a-number"],
)
def test_malformed_graphs_give_codes(tmp_path: Path, mutate: object, code: str) -> None:
    source, _, _ = _graph_json(tmp_path)
    graph = json.loads(source.read_text())
    mutate(graph)  # type: ignore[operator]
    source.write_text(json.dumps(graph))
    result = import_eap_ig(source, tmp_path / "out")
    assert [f.code for f in result.findings] == [code]
    assert not (tmp_path / "out" / "circuit.json").exists()


def test_truncated_json_gives_a_parse_code(tmp_path: Path) -> None:
    source, _, _ = _graph_json(tmp_path)
    source.write_bytes(source.read_bytes()[:200])
    result = import_eap_ig(source, tmp_path / "out")
    assert [f.code for f in result.findings] == ["P101"]


@pytest.mark.recompute
def test_pt_graph_is_read_weights_only_and_matches_the_json_import(tmp_path: Path) -> None:
    import torch

    sources, destinations, _ = _names(CFG)
    source_json, scores, chosen = _graph_json(tmp_path)
    matrix = torch.zeros(len(sources), len(destinations))
    member = torch.zeros(len(sources), len(destinations), dtype=torch.bool)
    for name, score in scores.items():
        src, dst = name.split("->")
        matrix[sources.index(src), destinations.index(dst)] = score
        member[sources.index(src), destinations.index(dst)] = name in chosen
    pt = tmp_path / "graph.pt"
    torch.save(
        {
            "cfg": CFG,
            "src_nodes": sources,
            "dst_nodes": destinations,
            "edges_scores": matrix,
            "edges_in_graph": member,
        },
        pt,
    )
    assert import_eap_ig(pt, tmp_path / "from_pt").ok
    assert import_eap_ig(source_json, tmp_path / "from_json").ok
    from safetensors.numpy import load_file

    a = load_file(str(tmp_path / "from_pt" / "circuit.safetensors"))
    b = load_file(str(tmp_path / "from_json" / "circuit.safetensors"))
    assert np.array_equal(a["scores"], b["scores"])
    assert np.array_equal(a["membership"], b["membership"])


@pytest.mark.recompute
def test_pt_file_that_would_run_code_is_refused(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import pickle

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("code ran",))

    path = tmp_path / "graph.pt"
    path.write_bytes(pickle.dumps({"cfg": CFG, "x": Payload()}))
    result = import_eap_ig(path, tmp_path / "out")
    assert [f.code for f in result.findings] == ["I101"]
    assert "code ran" not in capfd.readouterr().out


@pytest.mark.slow
def test_cli_import_verifies_what_it_wrote(tmp_path: Path) -> None:
    source, _, _ = _graph_json(tmp_path)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "eap-ig",
            str(source),
            "-o",
            str(tmp_path / "out"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["valid"] is True
    bad = tmp_path / "bad.json"
    bad.write_text('{"cfg": 1}')
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "eap-ig",
            str(bad),
            "-o",
            str(tmp_path / "o2"),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert json.loads(completed.stdout)["documents"][0]["findings"][0]["code"] == "I101"


GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]


def _results(tmp_path: Path, cmd_counts: list[int]) -> Path:
    signed = [32, 64, 162, 324, 649, 1624, 3249, 6498, 16245, 32491]
    values = [0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9, 0.97, 0.99]
    payload = {
        "method_name": "EAP-IG",
        "results": [
            {
                "model_id": "gpt2",
                "scores": {
                    "ioi": {
                        "CPR": {"edge_counts": signed, "faithfulness": values},
                        "CMD": {"edge_counts": cmd_counts, "faithfulness": values},
                    }
                },
            }
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(payload))
    return path


def test_mib_circuit_results_become_reports_with_the_leaderboard_areas(tmp_path: Path) -> None:
    from mibspec.importers import import_mib_circuit_results

    counts = [32, 64, 162, 324, 649, 1624, 3249, 6498, 16245, 32491]
    result = import_mib_circuit_results(_results(tmp_path, counts), tmp_path / "out")
    assert result.ok
    [path] = result.written
    report = json.loads(path.read_text())
    # Independent baseline: the trapezoid written out, with f(1) forced to 1 as the leaderboard does.
    forced = [0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9, 0.97, 1.0]
    area = sum((GRID[i + 1] - GRID[i]) * (forced[i] + forced[i + 1]) / 2 for i in range(9))
    gap = sum((GRID[i + 1] - GRID[i]) * (abs(1 - forced[i]) + abs(1 - forced[i + 1])) / 2 for i in range(9))
    assert report["claims"]["cpr"]["value"] == pytest.approx(area, abs=1e-12)
    assert report["claims"]["cmd"]["value"] == pytest.approx(gap, abs=1e-12)
    assert report["claims"]["n_edges"] == 32491
    verified = mibspec.verify(path, recompute=False)
    # The results file does not record the model revision: the finding says so, and nothing else is wrong.
    # It records no dataset and no circuit either, so recomputation could not run: R112 warns of both.
    assert [(f.code, f.pointer) for f in verified.findings] == [
        ("A111", "/model"),
        ("R112", "/task/dataset"),
        ("R112", "/claims/circuit"),
    ]


def test_mib_circuit_results_declare_no_sizes_nothing_could_check(tmp_path: Path) -> None:
    from mibspec.importers import import_mib_circuit_results

    counts = [100, 64, 162, 324, 649, 1624, 3249, 6498, 16245, 32491]  # 100 > 0.002 · 32491
    result = import_mib_circuit_results(_results(tmp_path, counts), tmp_path / "out")
    [path] = result.written
    report = json.loads(path.read_text())
    points = [p for curve in report["claims"]["curves"] for p in curve["points"]]
    # The file's counts order the circuits (the backend's placement) but are not written as sizes:
    # the file holds no circuit a size could be checked against (K-9).
    assert [p["faithfulness"] for p in report["claims"]["curves"][1]["points"]][:2] == [0.1, 0.05]
    assert not any("weighted_size" in p or "n_edges" in p for p in points)
    assert {f.code for f in mibspec.verify(path, recompute=False).findings} == {"A111", "R112"}
    # under the strict profile f(1) is not forced (C101, C102), and still no size finding
    strict_codes = {f.code for f in mibspec.verify(path, recompute=False, profile="default").findings}
    assert strict_codes == {"A111", "C101", "C102", "R112"}
    # a size written in by hand has nothing to be checked against: refused, not bounded by a claim
    report["claims"]["curves"][1]["points"][1]["weighted_size"] = 100.0
    path.write_text(json.dumps(report))
    strict = mibspec.verify(path, recompute=False, profile="default").findings
    assert ("K112", "/claims/curves/1/points/1/weighted_size") in {(f.code, f.pointer) for f in strict}


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"results": []}, "I101"),
        ({"method_name": "m", "results": [{"model_id": "gpt5", "scores": {}}]}, "I102"),
        (
            {
                "method_name": "m",
                "results": [
                    {"model_id": "gpt2", "scores": {"ioi": {"CPR": {"edge_counts": [1], "faithfulness": []}}}}
                ],
            },
            "I101",
        ),
    ],
    ids=["no-method", "unknown-model", "ragged-curve"],
)
def test_malformed_mib_results_give_codes(tmp_path: Path, payload: dict[str, object], code: str) -> None:
    from mibspec.importers import import_mib_circuit_results

    path = tmp_path / "results.json"
    path.write_text(json.dumps(payload))
    result = import_mib_circuit_results(path, tmp_path / "out")
    assert [f.code for f in result.findings] == [code]
    assert not result.written


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
    )


@pytest.mark.slow
def test_import_refuses_to_overwrite_its_source(tmp_path: Path) -> None:
    from mibspec.core.outputs import OutputPathError

    graph, _, _ = _graph_json(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    source = graph.rename(out / "circuit.json")  # the name the importer writes
    before = source.read_bytes()
    completed = _cli("import", "eap-ig", str(source), "-o", str(out))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.startswith("mibspec: error: ")
    assert "would overwrite the input" in completed.stderr
    assert source.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["circuit.json"]  # not even the sidecar
    link = tmp_path / "link.json"
    link.symlink_to(source)
    with pytest.raises(OutputPathError):
        import_eap_ig(link, out)
    assert source.read_bytes() == before


@pytest.mark.slow
def test_import_says_why_recomputation_did_not_run(tmp_path: Path) -> None:
    """No --no-recompute was passed: the output must say what happened instead."""
    counts = [32, 64, 162, 324, 649, 1624, 3249, 6498, 16245, 32491]
    source = _results(tmp_path, counts)
    text = _cli("import", "mib-circuit-results", str(source), "-o", str(tmp_path / "out"))
    assert text.returncode == 1, text.stderr  # A111: the results do not pin the model
    assert "--no-recompute" not in text.stdout
    assert "recompute skipped: not run by import" in text.stdout
    assert "mibspec verify" in text.stdout
    as_json = _cli("import", "mib-circuit-results", str(source), "-o", str(tmp_path / "again"), "-f", "json")
    [report] = json.loads(as_json.stdout)["documents"]
    stage = {s["name"]: s for s in report["stages"]}["recompute"]
    assert stage["status"] == "skipped"
    assert "--no-recompute" not in stage["detail"]


def test_a_second_graph_never_replaces_the_first_in_one_folder(tmp_path: Path) -> None:
    source, _, _ = _graph_json(tmp_path)
    out = tmp_path / "out"
    assert import_eap_ig(source, out).ok
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    payload = json.loads(source.read_text())
    first = next(iter(payload["edges"]))
    payload["edges"][first]["score"] += 1.0  # another method's graph
    other = tmp_path / "other.json"
    other.write_text(json.dumps(payload))
    result = import_eap_ig(other, out)
    assert [f.code for f in result.findings] == ["I126"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # The same graph imported again, now pinned, replaces its own document.
    again = import_eap_ig(source, out, model="gpt2", model_revision="0" * 40)
    assert again.ok, again.findings
    assert json.loads(again.written[0].read_text())["model"]["revision"] == "0" * 40
