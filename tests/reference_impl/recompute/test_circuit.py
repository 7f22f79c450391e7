"""The circuit track's recompute stage and producer, end to end on the shipped tiny model.

Independent anchors: m(N) and m(∅) against the transformers forward of the same prompts
(tokenized with the tokenizers library); f at k = 1 is 1 and the empty circuit 0 by
definition; tampered claims and broken declarations give R103 / R104 at their pointers.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mibspec
from mibspec.metrics.circuit import cpr

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "circuit-ioi"
MODELS = REPO / "examples" / "models"


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "circuit-ioi"
    shutil.copytree(EXAMPLE, target)
    return target


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


@pytest.fixture(scope="module")
def verified() -> Any:
    return mibspec.verify(EXAMPLE / "report.json", model_roots=[MODELS])


@pytest.mark.slow
def test_bundled_example_verifies_with_recomputation(verified: Any) -> None:
    report = verified.documents[0]
    assert verified.valid, _codes(verified)
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    data = json.loads((EXAMPLE / "report.json").read_text(encoding="utf-8"))
    n_points = sum(len(curve["points"]) for curve in data["claims"]["curves"])
    # the graph's edge total, n_examples, m(N), m(∅), every point, CPR and CMD
    assert len(report.comparisons) == 1 + 3 + n_points + 2
    assert all(c.within and c.claimed is not None for c in report.comparisons)
    [total] = [c for c in report.comparisons if c.pointer == "/claims/n_edges"]
    # MG-7's table: the tiny model's 4 layers of 4 heads have 479 edges; counts compare exactly
    assert (total.claimed, total.recomputed, total.tolerance) == (479, 479, 0.0)


@pytest.mark.slow
def test_full_and_empty_means_match_the_transformers_forward(verified: Any) -> None:
    torch = pytest.importorskip("torch")
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    model_dir = MODELS / "tiny-gpt2"
    hf = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=False).eval()
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    data = json.loads((EXAMPLE / "report.json").read_text(encoding="utf-8"))
    cf_type = data["task"]["counterfactual_type"]
    full, empty = [], []
    for line in (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        cf = row["counterfactuals"][cf_type]
        good = tokenizer.encode(row["base"]["answer"], add_special_tokens=False).ids[0]
        bad = tokenizer.encode(cf["answer"], add_special_tokens=False).ids[0]
        for prompt, out in ((row["base"]["prompt"], full), (cf["prompt"], empty)):
            ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False).ids])
            with torch.no_grad():
                logits = hf(ids).logits[0, -1].double()
            out.append(float(logits[good] - logits[bad]))
    by_pointer = {c.pointer: c.recomputed for c in verified.documents[0].comparisons}
    assert by_pointer["/claims/m_full"] == pytest.approx(np.mean(full), abs=1e-4)
    assert by_pointer["/claims/m_empty"] == pytest.approx(np.mean(empty), abs=1e-4)
    signed = next(i for i, c in enumerate(data["claims"]["curves"]) if c["ranking"] == "signed")
    assert by_pointer[f"/claims/curves/{signed}/points/9/faithfulness"] == pytest.approx(1.0, abs=1e-9)


@pytest.mark.slow
def test_tampered_claims_are_not_reproduced(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    report = folder / "report.json"

    def tamper(data: dict[str, Any]) -> None:
        data["claims"]["m_full"] += 0.5
        data["claims"]["n_edges"] += 1  # the rules say so (K110, ignored here); so does the model
        points = data["claims"]["curves"][0]["points"]
        points[6]["faithfulness"] += 0.05
        # keep the report self-consistent, so that only recomputation can tell
        data["claims"]["cpr"]["value"] = cpr([p["k"] for p in points], [p["faithfulness"] for p in points])

    _edit(report, tamper)
    result = mibspec.verify(report, model_roots=[MODELS], ignore=["K110"])
    assert not result.valid
    codes = _codes(result)
    assert ("R103", "/claims/n_edges") in codes  # 480 claimed, 479 in the model's graph, exactly
    assert ("R103", "/claims/m_full") in codes
    assert ("R103", "/claims/curves/0/points/6/faithfulness") in codes
    assert ("R103", "/claims/cpr/value") in codes
    finding = next(f for f in result.documents[0].findings if f.pointer == "/claims/m_full")
    # the claim was computed in float32 on one machine; another CPU may round its last bits
    # differently (about 1e-7 here), so the offset is compared within float32's resolution
    assert finding.data["claimed"] - finding.data["recomputed"] == pytest.approx(0.5, abs=1e-5)


def test_model_not_found_or_changed_is_reported(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    missing = mibspec.verify(folder / "report.json")  # no model root
    assert not missing.valid
    assert _codes(missing) == [("R104", "/model/path")]
    assert missing.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "failed"

    _edit(folder / "report.json", lambda d: d["model"]["files"].update({"config.json": "0" * 64}))
    changed = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert ("R104", "/model/files") in _codes(changed)

    _edit(folder / "report.json", lambda d: d["model"].update({"path": "../models/tiny-gpt2"}))
    climbing = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert ("R104", "/model/path") in _codes(climbing)


def test_no_recompute_skips_the_stage(tmp_path: Path) -> None:
    result = mibspec.verify(EXAMPLE / "report.json", recompute=False)
    assert result.valid
    status, detail = result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE]
    assert status.value == "skipped"
    assert detail == "not requested"  # the API call has no --no-recompute flag to name


def test_unequal_token_lengths_are_reported_not_patched() -> None:
    from mibspec.reference_impl.recompute import UnusableInputError
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    rows = [
        {
            "base": {"prompt": "a b c", "answer": " x"},
            "counterfactuals": {"t": {"prompt": "a b c d", "answer": " y"}},
        }
    ]
    with pytest.raises(UnusableInputError, match=r"row 0.*3 tokens.*4"):
        tokenize_pairs(rows, "t", lambda text: text.split(), "/task/dataset")
    rows[0]["counterfactuals"]["t"]["answer"] = None
    with pytest.raises(UnusableInputError, match="no answer"):
        tokenize_pairs(rows, "t", lambda text: text.split(), "/task/dataset")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda row: row.pop("base"), "the base prompt is not a prompt object"),
        (lambda row: row.update(base=None), "the base prompt is not a prompt object"),
        (lambda row: row["base"].pop("prompt"), "the base prompt has no prompt string"),
        (lambda row: row["base"].update(prompt=5), "the base prompt has no prompt string"),
        (lambda row: row["base"].update(answer=["x"]), "the base prompt has no answer string"),
        (
            lambda row: row["counterfactuals"]["t"].update(prompt=None),
            "'t' counterfactual has no prompt string",
        ),
        (lambda row: row.update(counterfactuals=[]), "its counterfactuals are not an object"),
        (lambda row: row["counterfactuals"].update(t="oops"), "'t' counterfactual is not a prompt object"),
        (lambda row: row.clear(), "its counterfactuals are not an object"),
    ],
)
def test_a_malformed_row_is_unusable_not_an_internal_error(change: Any, said: str) -> None:
    """Rows that break DS-2/DS-3 name the row and what it lacks; nothing else is raised."""
    from mibspec.reference_impl.recompute import UnusableInputError
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    good = {
        "base": {"prompt": "a b", "answer": " x"},
        "counterfactuals": {"t": {"prompt": "a c", "answer": " y"}},
    }
    bad = copy.deepcopy(good)
    change(bad)
    with pytest.raises(UnusableInputError, match=f"row 1: .*{re.escape(said)}"):
        tokenize_pairs([good, bad], "t", lambda text: text.split(), "/task/dataset")


def test_a_malformed_dataset_row_is_refused_at_verification(tmp_path: Path) -> None:
    """End to end: a row without ``base``, re-pinned, is refused by the dataset's rules stage
    (V112, DS-2), so the report is not recomputed on it; never an internal error. (Recomputation
    itself refuses such a row with R104, above.)"""
    folder = _copy(tmp_path)
    dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    [rows_entry] = [a for a in dataset["artifacts"] if a["path"].endswith(".jsonl")]
    rows_path = folder / rows_entry["path"]
    lines = rows_path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    del first["base"]
    lines[0] = json.dumps(first)
    rows_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows_entry["sha256"] = hashlib.sha256(rows_path.read_bytes()).hexdigest()
    rows_entry["bytes"] = rows_path.stat().st_size
    (folder / "dataset.json").write_text(json.dumps(dataset, indent=2), encoding="utf-8")
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    [entry] = [a for a in report["artifacts"] if a["path"] == "dataset.json"]
    entry["sha256"] = hashlib.sha256((folder / "dataset.json").read_bytes()).hexdigest()
    entry["bytes"] = (folder / "dataset.json").stat().st_size
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert not result.internal_errors
    v112 = [f for f in result.findings if f.code == "V112"]
    assert [f.pointer for f in v112] == ["/examples"], _codes(result)
    assert "row 1 (" in v112[0].message
    assert "lacks base" in v112[0].message
    assert not result.valid
    assert not any(doc.comparisons for doc in result.documents)


@pytest.mark.slow
def test_score_circuit_writes_reports_that_verify(tmp_path: Path, small_ioi_dataset: Any) -> None:
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    dataset = small_ioi_dataset(tmp_path, 24)
    runs = {}
    for method in ("eap-ig", "random"):
        runs[method] = score_circuit(
            CircuitOptions(
                MODELS / "tiny-gpt2",
                dataset,
                tmp_path / method,
                counterfactual_type="io_s2_flip",
                method=method,
                seed=3,
                batch_size=8,
            )
        )
        result = mibspec.verify(runs[method].report, model_roots=[MODELS])
        assert result.valid, _codes(result)
        assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    # Attribution finds circuits far more faithful than random edges on a trained model.
    assert runs["eap-ig"].cpr > runs["random"].cpr + 0.3
    assert runs["eap-ig"].cmd < runs["random"].cmd
    with pytest.raises(FileExistsError):
        score_circuit(
            CircuitOptions(
                MODELS / "tiny-gpt2", dataset, tmp_path / "random", counterfactual_type="io_s2_flip"
            )
        )


@pytest.mark.slow
def test_score_circuit_is_deterministic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_ioi_dataset: Any
) -> None:
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    dataset = small_ioi_dataset(tmp_path, 8)
    digests = []
    for name in ("a", "b"):
        score_circuit(
            CircuitOptions(
                MODELS / "tiny-gpt2", dataset, tmp_path / name, counterfactual_type="io_s2_flip", steps=2
            )
        )
        digests.append(
            {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((tmp_path / name).iterdir())}
        )
    assert digests[0] == digests[1]
