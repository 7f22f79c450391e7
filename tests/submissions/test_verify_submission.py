"""``mibspec verify-submission``: a MIB submission folder, a dataset and a model pinned on the
hub and read from a local Hugging Face cache with the hub offline, one command, a recomputed
verdict; and every way the path can stop names what to do next.

The hub cache is laid out here as ``huggingface_hub`` writes it (``models--<id>/refs/main``,
``snapshots/<commit>/``); the dataset file is written in the released layout (one row per base
prompt, ``<type>_counterfactual`` columns, the columns the public loader reads) from the rows of
the shipped IOI example; the submission folder is the layout MIB's circuit-track README gives
(``<task>_<model>/importances.json`` beside the results pickles ``run_evaluation.py`` writes),
written by ``mibspec export mib-submission`` from a report scored under the ``mib-2025``
profile.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "models" / "tiny-gpt2"
MODEL_REVISION = "1111111111111111111111111111111111111111"
DATASET_REVISION = "2222222222222222222222222222222222222222"
DATASET_ID = "mibspec-tests/tiny-ioi"
#: The example rows' counterfactual types → the released columns' names (MIB's spelling).
_COLUMNS = {"io_s2_flip": "s2_io_flip", "io_s1_flip": "s1_io_flip", "abc": "abc"}
_SLOTS = {"name_a": "name_A", "name_b": "name_B", "name_c": "name_C"}


def _released_prompt(prompt: dict[str, Any]) -> dict[str, Any]:
    """A prompt of the example's rows in the released IOI layout."""
    template = prompt["template"]
    for ours, theirs in _SLOTS.items():
        template = template.replace("{" + ours + "}", "{" + theirs + "}")
    slots = prompt["slots"]
    metadata = {"subject": slots["subject"], "object": slots["object"], "place": slots["place"]}
    if "indirect_object" in slots:
        metadata["indirect_object"] = slots["indirect_object"]
    return {"prompt": prompt["prompt"], "template": template, "metadata": metadata}


def _released_rows(limit: int = 48) -> list[dict[str, Any]]:
    rows = []
    lines = (REPO / "examples" / "circuit-ioi" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines[:limit]:
        row = json.loads(line)
        released = _released_prompt(row["base"])
        for ours, theirs in _COLUMNS.items():
            released[f"{theirs}_counterfactual"] = _released_prompt(row["counterfactuals"][ours])
        rows.append(released)
    return rows


def _blob(repo: Path, snapshot: Path, name: str, data: bytes, large: bool) -> None:
    """``data`` stored as the hub client stores a file: a blob named by its digest (SHA-256 for
    large-file storage, git's blob SHA-1 otherwise), linked from the snapshot."""
    digest = (
        hashlib.sha256(data).hexdigest()
        if large
        else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    )
    blob = repo / "blobs" / digest
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = snapshot / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))


def _hub_cache(root: Path) -> Path:
    """A Hugging Face cache holding the tiny model and the dataset at their pinned commits."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cache = root / "hub"
    model = cache / "models--tiny-gpt2"
    snapshot = model / "snapshots" / MODEL_REVISION
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        _blob(model, snapshot, name, (MODEL / name).read_bytes(), large=name.endswith(".safetensors"))
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text(MODEL_REVISION, encoding="ascii")
    dataset = cache / f"datasets--{DATASET_ID.replace('/', '--')}"
    table = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(_released_rows()), table)
    snapshot = dataset / "snapshots" / DATASET_REVISION
    _blob(dataset, snapshot, "data/test-00000-of-00001.parquet", table.getvalue().to_pybytes(), large=True)
    (dataset / "refs").mkdir()
    (dataset / "refs" / "main").write_text(DATASET_REVISION, encoding="ascii")
    return cache


def _run(args: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(cache),
        "HF_HOME": str(cache.parent / "hf-home"),
        "COLUMNS": "200",
    }
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


@pytest.fixture(scope="module")
def submission(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The submission folder (scored under mib-2025 on the released rows) and the hub cache."""
    pytest.importorskip("torch")
    from mibspec.exporters import export_mib_submission
    from mibspec.importers import import_mib_dataset
    from mibspec.reference_impl.producers.circuit import CircuitOptions, score_circuit

    root = tmp_path_factory.mktemp("mib-path")
    cache = _hub_cache(root)
    parquet = next((cache / f"datasets--{DATASET_ID.replace('/', '--')}").rglob("*.parquet"))
    imported = import_mib_dataset(
        [parquet], root / "scoring-dataset", split="test", hub_id=DATASET_ID, revision=DATASET_REVISION
    )
    assert imported.ok, [str(f) for f in imported.findings]
    score_circuit(
        CircuitOptions(
            model_dir=MODEL,
            dataset_path=imported.written[0],
            out_dir=root / "scored",
            counterfactual_type="s2_io_flip",
            method="eap",
            profile="mib-2025",
        )
    )
    export_mib_submission([root / "scored" / "report.json"], root / "submission" / "eap")
    return root / "submission" / "eap", cache


_ARGS = [
    "--dataset",
    f"{DATASET_ID}@{DATASET_REVISION}",
    "--model-revision",
    MODEL_REVISION,
    "--architecture",
    "GPT2LMHeadModel",
]  # the counterfactual type is the profile's for IOI (s2_io_flip, as the public loader reads)


@pytest.mark.slow
@pytest.mark.recompute
def test_one_command_recomputes_a_submission_from_an_offline_hub_cache(
    submission: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, cache = submission
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    run = _run(["verify-submission", str(folder), "-o", str(tmp_path / "out"), *_ARGS], cache, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "recompute: passed" in run.stdout or "recompute passed" in run.stdout.lower(), run.stdout
    report = tmp_path / "out" / "ioi_tiny-gpt2" / "report.json"
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["model"]["revision"] == MODEL_REVISION
    dataset = (tmp_path / "out" / "datasets").rglob("*.json")
    assert DATASET_REVISION in next(dataset).read_text(encoding="utf-8")  # the hub pin is recorded
    # the leaderboard's two numbers, claimed by the results pickle and recomputed, agree
    lines = [line for line in run.stdout.splitlines() if ("CPR:" in line or "CMD:" in line)]
    assert len(lines) == 2, run.stdout
    assert all(line.rstrip().endswith("agrees") for line in lines), run.stdout
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before  # inputs only read


@pytest.mark.slow
@pytest.mark.recompute
def test_a_false_leaderboard_number_is_refused(submission: tuple[Path, Path], tmp_path: Path) -> None:
    """The results pickle claims faithfulness the circuits do not give: the verdict is FAIL,
    naming CPR (here the area no longer matches the claimed curve, C101), and no leaderboard
    number is shown as agreeing."""
    folder, cache = submission
    tampered = tmp_path / "submission"
    shutil.copytree(folder, tampered)
    pickle_path = next(tampered.rglob("*_abs-False.pkl"))
    results = pickle.loads(pickle_path.read_bytes())
    results["faithfulnesses"] = [min(1.0, f + 0.05) for f in results["faithfulnesses"]]
    pickle_path.write_bytes(pickle.dumps(results))
    run = _run(["verify-submission", str(tampered), "-o", str(tmp_path / "out"), *_ARGS], cache, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "C101" in run.stdout, run.stdout
    assert "CPR claimed" in run.stdout, run.stdout
    assert "agrees" not in run.stdout, run.stdout


def test_a_dataset_missing_from_the_offline_cache_names_the_command_that_fetches_it(tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    folder = tmp_path / "eap" / "ioi_tiny-gpt2"
    folder.mkdir(parents=True)
    (folder / "importances.json").write_text("{}", encoding="utf-8")
    (tmp_path / "hub").mkdir()
    run = _run(
        ["verify-submission", str(tmp_path / "eap"), "-o", str(tmp_path / "out"), *_ARGS],
        tmp_path / "hub",
        tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "I129" in run.stdout, run.stdout
    assert f"hf download {DATASET_ID} --repo-type dataset --revision {DATASET_REVISION}" in run.stdout
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_hub_dataset_must_be_pinned_to_a_commit(tmp_path: Path) -> None:
    folder = tmp_path / "eap" / "ioi_tiny-gpt2"
    folder.mkdir(parents=True)
    (folder / "importances.json").write_text("{}", encoding="utf-8")
    args = ["--dataset", f"{DATASET_ID}@main"]
    out = str(tmp_path / "out")
    run = _run(["verify-submission", str(tmp_path / "eap"), "-o", out, *args], tmp_path, tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "I111" in run.stdout, run.stdout
    assert "40-hex" in run.stdout, run.stdout


def test_without_a_dataset_the_command_says_what_to_give(tmp_path: Path) -> None:
    folder = tmp_path / "eap" / "ioi_tiny-gpt2"
    folder.mkdir(parents=True)
    (folder / "importances.json").write_text("{}", encoding="utf-8")
    run = _run(["verify-submission", str(tmp_path / "eap"), "-o", str(tmp_path / "out")], tmp_path, tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--dataset is needed" in run.stderr
