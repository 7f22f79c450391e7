"""Grouped verification of many reports: the output of verifying each report alone (the same
verdicts, findings and text; recomputed values within floating-point reassociation, engine.md
ME-10, as circuits of several reports share a stack), with one model build per group and one
clean/ablation run per batch of a group."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from mibspec.core.comparisons import REASSOCIATION, first_difference
from mibspec.validator import VerificationResult, VerifyOptions, verify_paths
from mibspec.verification.api import collect_paths
from mibspec.verification.grouping import group_key, plan_units, verify_many
from mibspec.verification.output_formats import REPORTERS

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
ROWS = 24  # dataset rows of every copy: two batches of 20, three of 8


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, report_copies: Any) -> list[str]:
    """Four copies of the IOI example on its first ROWS rows, each holding the circuits in
    other rows of its membership tensor: three on the same forward passes, one with another
    batch size (a group of its own)."""
    root = tmp_path_factory.mktemp("grouped")
    report_copies(root, 4, ROWS, batch_sizes=(20, 20, 20, 8))
    return collect_paths([root])


def _json(result: VerificationResult) -> str:
    buffer = io.StringIO()
    REPORTERS["json"](result, buffer)
    return buffer.getvalue()


def _assert_agree(got: str, want: str) -> None:
    """Two JSON outputs of one verification computed in differently shaped ways: equal but
    for floats, which agree within ME-10 (the example model is float32)."""
    where = first_difference(json.loads(got), json.loads(want), REASSOCIATION["float32"])
    assert where is None, f"the outputs differ at {where}"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many models were built and unpatched batch runs computed."""
    from mibspec.reference_impl import engine
    from mibspec.reference_impl.engine import _evaluate

    counts = {"models": 0, "runs": 0}

    def counting(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(engine, "load_model_from_bytes", counting("models", engine.load_model_from_bytes))
    monkeypatch.setattr(_evaluate, "_unpatched_runs", counting("runs", _evaluate._unpatched_runs))
    return counts


def test_groups_follow_the_forward_passes(corpus: list[str]) -> None:
    units = plan_units(corpus, VerifyOptions(model_roots=(MODELS,)), 1)
    assert units == [[0, 1, 2], [3]]
    # fewer groups than workers: the largest is split, every report in exactly one unit
    split = plan_units(corpus, VerifyOptions(model_roots=(MODELS,)), 3)
    assert sorted(i for unit in split for i in unit) == [0, 1, 2, 3]
    assert len(split) == 3


@pytest.mark.slow
def test_grouped_output_is_that_of_each_report_verified_alone(
    corpus: list[str], counted: dict[str, int]
) -> None:
    options = VerifyOptions(model_roots=(MODELS,))
    alone = _json(verify_paths(corpus, options))  # no shared session: as before grouping
    assert counted == {"models": 4, "runs": 3 * math.ceil(ROWS / 20) + math.ceil(ROWS / 8)}
    counted.update(models=0, runs=0)
    grouped = _json(verify_many(corpus, options))
    _assert_agree(grouped, alone)
    # one model per group, one unpatched run per batch of a group
    assert counted == {"models": 2, "runs": math.ceil(ROWS / 20) + math.ceil(ROWS / 8)}
    documents = json.loads(grouped)["documents"]
    recomputed = [d for d in documents if d["kind"] == "report"]
    assert len(recomputed) == 4
    assert all("recomputed" in d for d in recomputed)
    # the three reports of one group hold the same circuits in other rows: the same values
    # (the mixed corpus below gives each report circuits of its own, and its own values)
    values = {json.dumps([c["recomputed"] for c in d["recomputed"]]) for d in recomputed[:3]}
    assert len(values) == 1


@pytest.mark.slow
def test_grouped_output_in_two_processes_is_the_same(corpus: list[str]) -> None:
    options = VerifyOptions(model_roots=(MODELS,))
    # each process verifies whole groups: the same computations, the same bytes as -j 1
    two = _json(verify_many(corpus, options, 2))
    assert two == _json(verify_many(corpus, options, 1))
    _assert_agree(two, _json(verify_paths(corpus, options)))


@pytest.mark.slow
def test_a_trusting_second_run_reuses_the_digests_of_unchanged_model_files(
    corpus: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.reference_impl.recompute import RecomputeSession

    monkeypatch.setenv("MIBSPEC_CACHE_DIR", str(tmp_path / "cache"))
    outputs, hashed = [], []
    for _ in range(2):
        session = RecomputeSession(trust_hash_cache=True)
        result = verify_paths(corpus[3:], VerifyOptions(model_roots=(MODELS,), session=session))
        session.close()
        assert session.hashes is not None
        hashed.append(session.hashes.hashed)
        outputs.append(json.loads(_json(result)))
    files = {m.name for m in result.documents[0].model_files}
    assert hashed == [len(files), 0]
    assert (tmp_path / "cache" / "file-hashes-v2.json").is_file()
    # the same verdict and values; the second run says where its digests came from
    first, second = (out["documents"][0] for out in outputs)
    assert [f["code"] for f in second["findings"] if f not in first["findings"]] == ["R111"]
    assert (second["valid"], second["recomputed"]) == (first["valid"], first["recomputed"])


@pytest.mark.slow
def test_by_default_the_hash_cache_is_neither_read_nor_written(
    corpus: list[str], tmp_path: Path, mibspec_cli: Any
) -> None:
    done = mibspec_cli(
        "verify",
        corpus[3],
        "--model-root",
        str(MODELS),
        "-f",
        "json",
        env={"MIBSPEC_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert done.returncode in (0, 1), done.stderr
    assert "recomputed" in json.loads(done.stdout)["documents"][0]
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_trusted_hash_cache_is_named_in_the_output(
    corpus: list[str], tmp_path: Path, mibspec_cli: Any
) -> None:
    """With --trust-hash-cache the second run takes its digests from the cache, and the text
    and JSON outputs say which (R111, info: the verdict is unchanged)."""
    cache = tmp_path / "cache"
    env = {"MIBSPEC_CACHE_DIR": str(cache)}
    args = ("verify", corpus[3], "--model-root", str(MODELS), "--trust-hash-cache")
    first = mibspec_cli(*args, "-f", "json", env=env)
    assert first.returncode in (0, 1), first.stderr
    assert "R111" not in first.stdout  # every file hashed from its bytes, then kept
    assert (cache / "file-hashes-v2.json").is_file()
    second = mibspec_cli(*args, "-f", "json", env=env)
    [finding] = [f for f in json.loads(second.stdout)["documents"][0]["findings"] if f["code"] == "R111"]
    assert finding["severity"] == "info"
    assert all(name in finding["message"] for name in ("config.json", "model.safetensors", "tokenizer.json"))
    assert json.loads(second.stdout)["valid"] == json.loads(first.stdout)["valid"]
    text = mibspec_cli(*args, env=env)
    assert "R111" in text.stdout
    assert "file-hash cache" in text.stdout


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_without_recomputation_reports_go_to_workers_in_few_runs(workers: int) -> None:
    # start-up is amortised: a worker gets runs of consecutive reports, long ones first,
    # never one process per report, and every worker gets work; the runs shorten to single
    # reports at the end so that the processes finish together
    files = [f"r{i}/report.json" for i in range(50)]
    units = plan_units(files, VerifyOptions(recompute=False), workers)
    assert [i for unit in units for i in unit] == list(range(50))  # each once, in order
    sizes = [len(unit) for unit in units]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] >= 50 // (4 * workers)
    assert sizes[-1] == 1
    assert workers <= len(units) <= 4 * workers * (1 + math.log(50))


#: Makes each worker's units fail (``{fault}``: what a unit does in a worker process).
_FAULTY_WORKERS = """
import multiprocessing, os
import mibspec.verification.grouping as grouping

_verify_unit = grouping.verify_unit


def verify_unit(paths, options):
    if multiprocessing.parent_process() is not None:
        {fault}
    return _verify_unit(paths, options)


grouping.verify_unit = verify_unit
"""


def _verify_with_faulty_workers(
    tmp_path: Path, injected_cli: Any, fault: str, names: str
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Verify copies of the circuit example with -j 2 while workers fail: the documents by
    path, the reports, and those that failed (exit code 3, no traceback, nothing lost)."""
    root = tmp_path / "results"
    for name in names:
        shutil.copytree(REPO / "examples" / "circuit", root / name)
    script = _FAULTY_WORKERS.format(fault=fault)
    done = injected_cli(script, "verify", str(root), "--no-recompute", "-j", "2", "-f", "json")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    documents = {doc["path"]: doc for doc in json.loads(done.stdout)["documents"]}
    reports = [str(root / name / "report.json") for name in names]
    assert all(path in documents for path in reports)  # nothing lost
    failed = [path for path in reports if documents[path]["stages"][0]["status"] == "failed"]
    assert failed  # the workers' reports: failed, never passed
    assert all(documents[path]["valid"] for path in reports if path not in failed)
    return documents, reports, failed


@pytest.mark.slow
def test_a_worker_that_dies_fails_its_reports_and_loses_none(tmp_path: Path, injected_cli: Any) -> None:
    documents, _, failed = _verify_with_faulty_workers(tmp_path, injected_cli, "os._exit(70)", "abcdef")
    for path in failed:
        assert not documents[path]["valid"]
        assert "internal error" in documents[path]["stages"][0]["detail"]
        assert "exited with code 70" in documents[path]["stages"][0]["detail"]


@pytest.mark.slow
def test_a_unit_that_raises_in_a_worker_fails_its_reports(tmp_path: Path, injected_cli: Any) -> None:
    fault = 'raise RuntimeError("planted failure")'
    documents, _, failed = _verify_with_faulty_workers(tmp_path, injected_cli, fault, "abcdefgh")
    for path in failed:
        assert not documents[path]["valid"]
        assert documents[path]["stages"][0]["detail"] == "internal error: RuntimeError: planted failure"


@pytest.fixture(scope="module")
def mixed_corpus(tmp_path_factory: pytest.TempPathFactory, report_copies: Any) -> list[str]:
    """Three copies of the IOI example on the same rows: the signed curve's circuits shared by
    all, each absolute-curve circuit of the second and third its own."""
    root = tmp_path_factory.mktemp("mixed")
    report_copies(root, 3, ROWS, circuits="mixed")
    return collect_paths([root])


def _distinct_patched_circuits(paths: list[str]) -> int:
    """Distinct pruned circuits of the reports' membership rows, but the empty and full ones."""
    import numpy as np
    from safetensors.numpy import load_file

    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(n_layers=4, n_heads=4))
    seen = set()
    for path in paths:
        for row in load_file(str(Path(path).parent / "circuit.safetensors"))["membership"]:
            pruned = universe.prune(row)
            if 0 < pruned.sum() < universe.n_edges:
                seen.add(np.packbits(pruned).tobytes())
    return len(seen)


@pytest.mark.slow
def test_circuits_shared_by_reports_are_evaluated_once_with_the_values_of_each_alone(
    mixed_corpus: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.reference_impl.engine import _evaluate

    evaluated: list[int] = []
    original = _evaluate._stacked_passes

    def counting(*args: Any, **kwargs: Any) -> Any:
        for group, values in original(*args, **kwargs):
            evaluated.append(len(group))
            yield group, values

    monkeypatch.setattr(_evaluate, "_stacked_passes", counting)
    options = VerifyOptions(model_roots=(MODELS,))
    alone = _json(verify_paths(mixed_corpus, options))
    evaluated_alone = sum(evaluated)
    evaluated.clear()
    _assert_agree(_json(verify_many(mixed_corpus, options)), alone)
    batches = math.ceil(ROWS / 20)
    assert sum(evaluated) == batches * _distinct_patched_circuits(mixed_corpus)
    assert sum(evaluated) < evaluated_alone
    values = {json.dumps(d["recomputed"]) for d in json.loads(alone)["documents"] if d["kind"] == "report"}
    assert len(values) == 3  # each report's own circuits show in its recomputed values


@pytest.mark.slow
def test_workers_start_after_this_process_verified_the_first_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # forked then, a worker starts with the modules imported and the schemas compiled
    import functools

    import mibspec.verification.grouping as grouping

    for name in "abcdef":
        shutil.copytree(REPO / "examples" / "circuit", tmp_path / name)
    files = collect_paths([tmp_path])
    here: list[list[str]] = []  # units verified in this process (a worker's calls stay there)
    at_start: list[list[list[str]]] = []
    verify_unit, start_method = grouping.verify_unit, grouping._start_method

    @functools.wraps(verify_unit)
    def recording(paths: list[str], options: VerifyOptions) -> Any:
        here.append(list(paths))
        return verify_unit(paths, options)

    def starting() -> Any:
        at_start.append([list(p) for p in here])
        return start_method()

    monkeypatch.setattr(grouping, "verify_unit", recording)
    monkeypatch.setattr(grouping, "_start_method", starting)
    options = VerifyOptions(recompute=False)
    assert _json(verify_many(files, options, 2)) == _json(verify_paths(files, options))
    assert at_start == [[[files[0]]]]


# -- the grouping pre-scan reads only regular files inside the report's folder --------------


def _dataset_key(report: Path) -> Any:
    key = group_key(str(report), 1 << 20)
    assert key is not None
    return json.loads(key)["dataset"]


def test_the_grouping_key_reads_no_device_fifo_or_file_outside_the_folder(tmp_path: Path) -> None:
    """A report or its dataset artifact that is /dev/zero (endless), a FIFO (blocks on open) or
    a file outside the report's folder is never read: the report forms a group of its own or
    has no dataset digest, and the rules stage reports the artifact (A101 and the like)."""
    import hashlib
    import os

    folder = tmp_path / "circuit"
    shutil.copytree(REPO / "examples" / "circuit", folder)
    report = folder / "report.json"
    document = json.loads(report.read_text(encoding="utf-8"))
    [entry] = [a for a in document["artifacts"] if a["id"] == document["task"]["dataset"]]
    expected = hashlib.sha256((folder / entry["path"]).read_bytes()).hexdigest()
    assert _dataset_key(report) == expected  # a regular file inside the folder is digested

    outside = tmp_path / "outside.json"
    outside.write_bytes((folder / entry["path"]).read_bytes())
    os.mkfifo(folder / "fifo.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    for path in (str(outside), "../outside.json", "fifo.json", "zero.json", "/dev/zero"):
        entry["path"] = path
        report.write_text(json.dumps(document), encoding="utf-8")
        assert _dataset_key(report) is None, path

    for name, make in (("fifo", os.mkfifo), ("zero", lambda p: p.symlink_to("/dev/zero"))):
        target = tmp_path / f"{name}.report.json"
        make(target)
        assert group_key(str(target), 1 << 20) is None
    big = tmp_path / "big.report.json"
    big.write_bytes(report.read_bytes())
    assert group_key(str(big), big.stat().st_size - 1) is None


@pytest.mark.parametrize("paths", [["a.json"], ["a.json", "b.json"]])
def test_only_a_unit_of_several_reports_shares_runs(
    paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report evaluates its circuits in one call that runs each batch once: a unit of one
    report keeps no batch's runs (they would only sit beside the next batch's)."""
    pytest.importorskip("torch")
    from mibspec.reference_impl.recompute import RecomputeSession
    from mibspec.verification import grouping

    sessions: list[Any] = []

    def fake_verify(files: list[str], options: VerifyOptions) -> VerificationResult:
        sessions.append(options.session)
        return VerificationResult(documents=[])

    monkeypatch.setattr(grouping, "verify_paths", fake_verify)
    grouping.verify_unit(paths, VerifyOptions(model_roots=(MODELS,)))
    assert len(sessions) == len(paths)
    assert len({id(s) for s in sessions}) == 1
    session = sessions[0]
    assert isinstance(session, RecomputeSession)
    assert session.share_activations == (len(paths) > 1)
    assert (session.activations is None) == (len(paths) == 1)
