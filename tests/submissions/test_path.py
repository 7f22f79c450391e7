"""``mibspec verify-submission``: a MIB submission folder, a dataset and a model pinned on the
hub and read from a local Hugging Face cache with the hub offline, one command, a recomputed
verdict; and every way the path can stop names what to do next.

The hub cache is laid out here as ``huggingface_hub`` writes it (``models--<id>/refs/main``,
``snapshots/<commit>/``); the dataset file is written in the released layout (one row per base
prompt, ``<type>_counterfactual`` columns, the columns the public loader reads) from the rows of
the shipped IOI example; the submission folder is the layout MIB's circuit-track README gives
(``<task>_<model>/importances.json`` beside the results pickles ``run_evaluation.py`` writes),
written by ``mibspec export mib-submission`` from a report scored under the ``mib-2025``
profile. At the end, IOI ``Token:all`` units: MIB-layout DAS files (``SubspaceFeaturizerModule``
with an identity rotation of one head of the shipped tiny GPT-2, at two layers, every token) and
a result file in the layout of MIB's IOI evaluation carrying the scores ``mibspec score
causal-variable --method full_vector`` computes for the same units, with no
``token_positions.json``: IOI's ``all`` needs no declaration.
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
from typing import TYPE_CHECKING, Any

import pytest

from mibspec.core.comparisons import recompute_tolerance
from mibspec.core.profiles import load_profile
from mibspec.importers._safe_pickle import load_results_pickle

if TYPE_CHECKING:
    from conftest import SmallDataset

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "models" / "tiny-gpt2"
MODEL_REVISION = "1111111111111111111111111111111111111111"
DATASET_REVISION = "2222222222222222222222222222222222222222"
DATASET_ID = "mibspec-tests/tiny-ioi"
#: The example rows' counterfactual types → the released columns' names (MIB's spelling).
_COLUMNS = {"io_s2_flip": "s2_io_flip", "io_s1_flip": "s1_io_flip", "abc": "abc"}
_SLOTS = {"name_a": "name_A", "name_b": "name_B", "name_c": "name_C"}

#: mib-2025's recompute tolerance for float16, the dtype MIB evaluates causal-variable models in.
_F16 = recompute_tolerance(load_profile("mib-2025"), "float16")


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


def _model_cache(cache: Path) -> Path:
    """A Hugging Face cache holding the tiny model at its pinned commit."""
    model = cache / "models--tiny-gpt2"
    snapshot = model / "snapshots" / MODEL_REVISION
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        _blob(model, snapshot, name, (MODEL / name).read_bytes(), large=name.endswith(".safetensors"))
    (model / "refs").mkdir()
    (model / "refs" / "main").write_text(MODEL_REVISION, encoding="ascii")
    return cache


def _hub_cache(root: Path) -> Path:
    """A Hugging Face cache holding the tiny model and the dataset at their pinned commits."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cache = _model_cache(root / "hub")
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
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

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
    results = load_results_pickle(pickle_path)  # the restricted unpickler, even for our own file
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


# --------------------------------------------------------------------------- causal-variable track
#
# The submission is the shipped DAS example exported in MIB's folder layout; its result files
# are written here in the public format (one per variable, scores per counterfactual set
# ``<type>_test`` and unit key ``[[AtomicModelUnit(id='...')]]``, in the dash spelling while
# the featurizer files use the colon one) from the example's own unit scores, which
# `mibspec verify` reproduces for the example itself.

CV_EXAMPLE = REPO / "examples" / "causal-variable-ioi"
_CV_ARGS = [
    "--dataset",
    str(CV_EXAMPLE / "dataset.json"),
    "--model-revision",
    MODEL_REVISION,
    "--architecture",
    "GPT2LMHeadModel",
]


def _cv_units(folder: Path) -> dict[tuple[str, int, str], str]:
    """(variable, layer, position rule as JSON) → the unit id the exported submission files
    are named after, read from the file names and the folder's token_positions.json."""
    rules = json.loads((folder / "token_positions.json").read_text(encoding="utf-8"))
    found = {}
    for path in folder.rglob("*_indices"):
        unit_id = path.name[: -len("_indices")]
        layer = int(unit_id.split("Layer:")[1].split(",")[0])
        token = unit_id.split("Token:")[1].rstrip(")")
        variable = path.parent.name.split("GPT2LMHeadModel_")[1]
        found[(variable, layer, json.dumps(rules[token], sort_keys=True))] = unit_id
    return found


def _cv_results(folder: Path, out: Path, *, skip_layer: int | None = None) -> dict[str, Path]:
    """One public result file per variable of the example report; units of ``skip_layer``
    are left out of the submission's featurizers elsewhere, not here."""
    report = json.loads((CV_EXAMPLE / "report.json").read_text(encoding="utf-8"))
    units = _cv_units(folder)
    written = {}
    for variable in report["claims"]["variables"]:
        dataset: dict[str, Any] = {}
        for unit in variable["units"]:
            location = unit["location"]
            rule = json.dumps(location["position"], sort_keys=True)
            unit_id = units[(variable["name"], location["layer"], rule)].replace(":", "-")
            key = f"[[AtomicModelUnit(id='{unit_id}')]]"
            for cf, score in unit["scores"].items():
                block = dataset.setdefault(f"{cf}_test", {"model_unit": {}})["model_unit"]
                block[key] = {variable["name"]: {"average_score": score}}
        payload = {"method_name": "DAS", "model_name": "tiny-gpt2", "task_name": "ioi", "dataset": dataset}
        path = out / f"DAS_tiny-gpt2_ioi_{variable['name']}.json"
        path.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        written[variable["name"]] = path
    return written


@pytest.fixture(scope="module")
def cv_submission(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path], Path]:
    """The exported example submission, its result files and a hub cache with the model."""
    pytest.importorskip("torch")
    from mibspec.exporters import export_mib_cv_submission  # what `mibspec export mib-submission` runs

    root = tmp_path_factory.mktemp("mib-cv-path")
    exported = export_mib_cv_submission([CV_EXAMPLE / "report.json"], root / "submission")
    assert exported.ok, [str(f) for f in exported.findings]
    (root / "results").mkdir()
    results = _cv_results(root / "submission", root / "results")
    return root / "submission", results, _model_cache(root / "hub")


def _cv_request(folder: Path, results: list[Path], out: Path, *, local: bool = False) -> Any:
    """The request the CLI makes of the path; ``local``: the model as the shipped folder,
    under a model root, instead of pinned on the hub (``huggingface_hub`` reads the cache
    folder once per process, so a test run in-process does not move it)."""
    from mibspec.submissions import SubmissionRequest

    return SubmissionRequest(
        submission=folder,
        out_dir=out,
        dataset=str(CV_EXAMPLE / "dataset.json"),
        model_revision=None if local else MODEL_REVISION,
        architecture="GPT2LMHeadModel",
        model_roots=(MODEL.parent,) if local else (),
        results=tuple(results),
    )


def _offline_cache(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HOME", str(cache.parent / "hf-home"))


@pytest.mark.recompute
def test_a_causal_variable_submission_and_its_result_files_reach_a_recomputed_pass(
    cv_submission: tuple[Path, dict[str, Path], Path], tmp_path: Path
) -> None:
    folder, results, cache = cv_submission
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    args = [f"--results={path}" for path in results.values()]
    out = str(tmp_path / "out")
    run = _run(["verify-submission", str(folder), "-o", out, *_CV_ARGS, *args], cache, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    example = json.loads((CV_EXAMPLE / "report.json").read_text(encoding="utf-8"))
    claimed = {v["name"]: v for v in example["claims"]["variables"]}
    reports = sorted((tmp_path / "out").glob("*/report.json"))
    assert len(reports) == 2, reports
    for path in reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        [variable] = report["claims"]["variables"]
        assert path.parent.name.endswith(variable["name"])  # beside its featurizer documents
        assert report["model"] == {
            "source": "hub",
            "id": "tiny-gpt2",
            "revision": MODEL_REVISION,
            "architecture": "GPT2LMHeadModel",
            "dtype": "float16",  # the public causal-variable evaluator's (mib-2025 model_dtypes)
        }
        artifacts = {a["id"]: a for a in report["artifacts"]}
        for artifact in artifacts.values():  # every artifact is a file of the report's folder
            data = (path.parent / artifact["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == artifact["sha256"]
        assert artifacts[report["task"]["dataset"]]["kind"] == "counterfactual_dataset"
        assert artifacts[report["settings"]["causal_model"]]["kind"] == "causal_model"
        assert all(artifacts[u["featurizer"]]["kind"] == "featurizer" for u in variable["units"])
        assert len(variable["units"]) == len(claimed[variable["name"]]["units"])
        # the leaderboard's numbers are the example's, as the result files carry its unit scores
        assert variable["average"] == pytest.approx(claimed[variable["name"]]["average"], rel=1e-12)
        assert variable["best"] == pytest.approx(claimed[variable["name"]]["best"], rel=1e-12)
    # printed: each variable's Average and best, claimed → recomputed, agreeing
    lines = [line for line in run.stdout.splitlines() if " Average:" in line or " best:" in line]
    assert len(lines) == 4, run.stdout
    for line in lines:
        assert line.rstrip().endswith("agrees"), run.stdout
        claimed_text, recomputed_text = line.split(": ", 1)[1].split(" → ")
        # recomputed in float16, as MIB evaluates causal-variable models: within its tolerance
        assert float(recomputed_text.split()[0]) == pytest.approx(
            float(claimed_text), rel=_F16[1], abs=_F16[0]
        )
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before  # inputs only read


@pytest.mark.recompute
def test_a_changed_unit_score_in_a_result_file_fails_with_r103_at_its_pointer(
    cv_submission: tuple[Path, dict[str, Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.submissions import leaderboard_rows, verify_submission

    folder, results, cache = cv_submission
    _offline_cache(monkeypatch, cache)
    data = json.loads(results["output_token"].read_text(encoding="utf-8"))
    for block in data["dataset"].values():  # layer 1's units only, to keep the run short
        block["model_unit"] = {k: v for k, v in block["model_unit"].items() if "Layer-1," in k}
    cf = "io_s1_flip_test"
    key = next(k for k in data["dataset"][cf]["model_unit"] if "Layer-1,Token-last_token" in k)
    true = data["dataset"][cf]["model_unit"][key]["output_token"]["average_score"]
    data["dataset"][cf]["model_unit"][key]["output_token"]["average_score"] = true - 2.0
    tampered = tmp_path / "DAS_tiny-gpt2_ioi_output_token.json"
    tampered.write_text(json.dumps(data), encoding="utf-8")
    outcome = verify_submission(_cv_request(folder, [tampered], tmp_path / "out", local=True))
    assert not outcome.valid
    assert outcome.verification is not None
    assert not outcome.findings
    [report_path] = outcome.reports
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["model"]["source"] == "local"
    assert (
        report["model"]["files"]["model.safetensors"]
        == hashlib.sha256((MODEL / "model.safetensors").read_bytes()).hexdigest()
    )
    [u] = [i for i, unit in enumerate(report["claims"]["variables"][0]["units"]) if unit["id"] == key]
    pointer = f"/claims/variables/0/units/{u}/scores/io_s1_flip"
    [document] = [d for d in outcome.verification.documents if d.path == str(report_path)]
    failed = {(f.code, f.pointer) for f in document.findings if f.severity.value == "error"}
    assert ("R103", pointer) in failed, failed
    [comparison] = [c for c in document.comparisons if c.pointer == pointer]
    assert comparison.claimed == pytest.approx(true - 2.0)
    assert comparison.recomputed == pytest.approx(true, rel=_F16[1], abs=_F16[0])  # recomputed in float16
    # the featurizers no result file scores are named, not dropped: all of output_position's,
    # and output_token's outside layer 1
    unscored = {note.split(":")[0]: note for note in outcome.notes if "scored by no result file" in note}
    assert sorted(unscored) == [
        "ioi_task_GPT2LMHeadModel_output_position",
        "ioi_task_GPT2LMHeadModel_output_token",
    ]
    assert "8 of 8 featurizer(s)" in unscored["ioi_task_GPT2LMHeadModel_output_position"]
    assert "6 of 8 featurizer(s)" in unscored["ioi_task_GPT2LMHeadModel_output_token"]
    assert {r.quantity for r in leaderboard_rows(outcome.verification, outcome.reports)} == {
        "output_token Average",
        "output_token best",
    }


def test_a_unit_scored_without_a_featurizer_is_named_and_nothing_is_verified(
    cv_submission: tuple[Path, dict[str, Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.submissions import verify_submission

    folder, results, cache = cv_submission
    _offline_cache(monkeypatch, cache)
    partial = tmp_path / "submission"
    shutil.copytree(folder, partial)
    [cell] = [p for p in partial.iterdir() if p.name.endswith("_output_position")]
    for path in cell.glob("ResidualStream(Layer:2,Token:last_token)_*"):
        path.unlink()
    outcome = verify_submission(_cv_request(partial, list(results.values()), tmp_path / "out"))
    assert outcome.verification is None
    assert not outcome.valid
    [finding] = outcome.findings
    assert finding.code == "I112"
    assert "ResidualStream(Layer-2,Token-last_token)" in finding.message
    key = "[[AtomicModelUnit(id='ResidualStream(Layer-2,Token-last_token)')]]"
    assert finding.pointer.endswith(f"/model_unit/{key}")
    assert not list((tmp_path / "out").glob("*/report.json"))  # no report is written


def test_a_result_file_naming_a_model_outside_mibs_needs_its_architecture(
    cv_submission: tuple[Path, dict[str, Path], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from mibspec.submissions import verify_submission

    folder, results, cache = cv_submission
    _offline_cache(monkeypatch, cache)
    request = replace(_cv_request(folder, list(results.values()), tmp_path / "out"), architecture=None)
    outcome = verify_submission(request)
    assert outcome.verification is None
    assert {(f.code, f.pointer) for f in outcome.findings} == {("I110", "/model_name")}
    assert all("--architecture" in f.message for f in outcome.findings)


def test_causal_variable_results_without_a_dataset_say_what_to_give(
    cv_submission: tuple[Path, dict[str, Path], Path], tmp_path: Path
) -> None:
    folder, results, cache = cv_submission
    args = [f"--results={path}" for path in results.values()]
    run = _run(["verify-submission", str(folder), "-o", str(tmp_path / "out"), *args], cache, tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--dataset is needed" in run.stderr
    assert not (tmp_path / "out").exists()


def test_import_mib_dataset_reads_a_pinned_hub_dataset_from_the_cache(tmp_path: Path) -> None:
    """The next step R104 and R112 name for a report that records only a hub pin."""
    pytest.importorskip("huggingface_hub")
    cache = _hub_cache(tmp_path)
    pinned = f"{DATASET_ID}@{DATASET_REVISION}"
    run = _run(["import", "mib-dataset", pinned, "-o", str(tmp_path / "out")], cache, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    [document] = sorted((tmp_path / "out").glob("*.json"))
    written = json.loads(document.read_text(encoding="utf-8"))
    assert written["kind"] == "counterfactual_dataset"
    assert written["split"] == "test"
    assert (written["source"]["hub_id"], written["source"]["revision"]) == (DATASET_ID, DATASET_REVISION)
    assert written["source"]["rows"] == len(_released_rows())
    other = f"{DATASET_ID}@{'3' * 40}"
    missing = _run(["import", "mib-dataset", other, "-o", str(tmp_path / "none")], cache, tmp_path)
    assert missing.returncode == 1, missing.stdout + missing.stderr
    assert "I129" in missing.stdout
    assert not (tmp_path / "none").exists()
    no_split = _run(
        ["import", "mib-dataset", pinned, "--split", "validation", "-o", str(tmp_path / "v")], cache, tmp_path
    )
    assert no_split.returncode == 1
    assert "I117" in no_split.stdout


# --------------------------------------------------------------------------- IOI Token:all units

MODELS = REPO / "examples" / "models"
TOKEN_ALL_CELL = "ioi_task_GPT2LMHeadModel_output_token"
HEAD, LAYERS = 1, (2, 3)


def _mibspec(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1", "SOURCE_DATE_EPOCH": "1748856600"}
    return subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _unit_id(layer: int) -> str:
    return f"AttentionHead(Layer:{layer},Head:{HEAD},Token:all)"


def _token_all_files(cell: Path) -> None:
    """Each unit as MIB's ``save_modules`` writes a DAS featurizer, with an identity rotation
    of the head's 16 values, and null indices (every feature)."""
    torch = pytest.importorskip("torch")
    cell.mkdir(parents=True)
    for layer in LAYERS:
        info = {
            "featurizer_class": "SubspaceFeaturizerModule",
            "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
            "n_features": 16,
            "additional_config": {"rotation_matrix": torch.eye(16), "requires_grad": True},
        }
        for suffix in ("_featurizer", "_inverse_featurizer"):
            torch.save({"model_info": info, "state_dict": {}}, cell / f"{_unit_id(layer)}{suffix}")
        (cell / f"{_unit_id(layer)}_indices").write_text("null", encoding="utf-8")


def _token_all_results(scored: dict[str, Any], path: Path, moved: float = 0.0) -> None:
    """The scored units in the layout of MIB's IOI evaluation; ``moved`` is added to the
    layer-3 unit's random_names score."""
    dataset: dict[str, Any] = {}
    [variable] = scored["claims"]["variables"]
    for unit in variable["units"]:
        layer = unit["location"]["layer"]
        key = f"[[AtomicModelUnit(id='{_unit_id(layer)}')]]"
        for cf, score in unit["scores"].items():
            value = score + (moved if (layer, cf) == (3, "random_names") else 0.0)
            dataset.setdefault(f"{cf}_test", {"model_unit": {}})["model_unit"][key] = {
                "metadata": {"layer": layer, "head": HEAD, "position": "all"},
                "output_token": {"average_score": value, "scores": [value]},
            }
    payload = {
        "method_name": "submission",
        "model_name": "tiny-gpt2",
        "task_name": "ioi_task",
        "dataset": dataset,
    }
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")


@pytest.fixture(scope="module")
def token_all(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("token-all")
    dataset = small_ioi_dataset(root, 48)
    score = [
        *("score", "causal-variable", "-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset)),
        *("-o", str(root / "scored"), "--method", "full_vector", "--component", "attention_heads"),
        *("--head", str(HEAD), "--layer", "2", "--layer", "3", "--position", "all"),
        *("--variable", "output_token", "-c", "random_names", "-c", "io_s2_flip"),
    ]
    done = _mibspec(*score, cwd=root)
    assert done.returncode == 0, done.stderr
    _token_all_files(root / "submission" / TOKEN_ALL_CELL)
    return {"root": root, "scored": root / "scored"}


def _verify_token_all(
    token_all: dict[str, Path], tmp_path: Path, moved: float, folder: Path | None = None
) -> subprocess.CompletedProcess[str]:
    scored = json.loads((token_all["scored"] / "report.json").read_text(encoding="utf-8"))
    results = tmp_path / "ioi_output_token.json"
    _token_all_results(scored, results, moved)
    return _mibspec(
        *("verify-submission", str(folder or token_all["root"] / "submission"), "-o", str(tmp_path / "out")),
        *("--dataset", str(token_all["scored"] / "dataset.json"), "--architecture", "GPT2LMHeadModel"),
        *("--model-root", str(MODELS), "--results", str(results), "--format", "json"),
        cwd=tmp_path,
    )


def _token_all_report(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (tmp_path / "out" / TOKEN_ALL_CELL / "report.json").read_text(encoding="utf-8")
    )
    return data


@pytest.mark.recompute
def test_the_full_vector_scores_are_reproduced_through_token_all_files(
    token_all: dict[str, Path], tmp_path: Path
) -> None:
    done = _verify_token_all(token_all, tmp_path, 0.0)
    assert done.returncode == 0, done.stdout + done.stderr
    [variable] = _token_all_report(tmp_path)["claims"]["variables"]
    assert [u["location"] for u in variable["units"]] == [
        {"layer": layer, "component": "attention_heads", "position": {"rule": "all"}, "heads": [HEAD]}
        for layer in LAYERS
    ]
    out = json.loads(done.stdout)
    [report] = [d for d in out["documents"] if d["kind"] == "report"]
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert not [f for f in report["findings"] if f["code"].startswith(("I12", "V110"))]


@pytest.mark.recompute
def test_a_result_score_moved_beyond_tolerance_is_r103(token_all: dict[str, Path], tmp_path: Path) -> None:
    """Moved by 1.0: beyond the float16 tolerance the mib-2025 recomputation allows (about
    0.2 at an MSE near 40), so the unit, its layer and the Average are not reproduced."""
    done = _verify_token_all(token_all, tmp_path, 1.0)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    found = {(f["code"], f["pointer"]) for d in out["documents"] for f in d["findings"]}
    assert ("R103", "/claims/variables/0/units/1/scores/random_names") in found
    assert ("R103", "/claims/variables/0/per_layer/3") in found
    assert ("R103", "/claims/variables/0/units/0/scores/random_names") not in found
    assert "C112" not in {code for code, _ in found}  # the importer computed the aggregates


@pytest.mark.recompute
def test_a_rotation_of_the_residual_width_at_a_head_is_r104_at_its_featurizer(
    token_all: dict[str, Path], tmp_path: Path
) -> None:
    """The layer-3 unit's DAS file holds a rotation of d_model (64) rows where the head has 16
    values. The tiny model is not one of MIB's, so the report declares no configuration for the
    rules to compare widths with: recomputation refuses the unit where it names its featurizer."""
    torch = pytest.importorskip("torch")
    folder = tmp_path / "submission"
    shutil.copytree(token_all["root"] / "submission", folder)
    info = {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": 8,
        "additional_config": {"rotation_matrix": torch.eye(64)[:, :8].contiguous(), "requires_grad": True},
    }
    for suffix in ("_featurizer", "_inverse_featurizer"):
        torch.save({"model_info": info, "state_dict": {}}, folder / TOKEN_ALL_CELL / f"{_unit_id(3)}{suffix}")
    done = _verify_token_all(token_all, tmp_path, 0.0, folder)
    assert done.returncode == 1, done.stdout + done.stderr
    out = json.loads(done.stdout)
    found = {(f["code"], f["pointer"]): f["message"] for d in out["documents"] for f in d["findings"]}
    assert found == {
        (
            "R104",
            "/claims/variables/0/units/1/featurizer",
        ): "the featurizer reads 64 values, the site holds 16"
    }


@pytest.mark.slow
@pytest.mark.recompute
def test_the_device_is_resolved_once_from_the_command_to_the_verification(
    submission: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command resolves ``--device`` before importing anything; the verification of the
    written reports takes that device as it is and does not look for it again."""
    from click.testing import CliRunner

    from mibspec.cli._options import build_command
    from mibspec.cli.verify_submission import verify_submission_command
    from mibspec.reference_impl import devices

    folder, cache = submission
    calls: list[str] = []
    resolve = devices.resolve_device

    def counted(name: object) -> str:
        calls.append(str(name))
        return resolve(name)

    monkeypatch.setattr(devices, "resolve_device", counted)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read by the library at its import
    command = build_command(verify_submission_command, "verify-submission")
    args = [str(folder), "-o", str(tmp_path / "out"), *_ARGS, "--device", "auto"]
    done = CliRunner().invoke(command, args)
    assert done.exit_code == 0, done.output
    assert "agrees" in done.output
    assert calls == ["auto"]
