"""Tokenized inputs are checked against the model before any forward pass (SPEC.md R-3), in
every track that tokenizes (circuit, causal-variable, the CAUSAL-BENCH transformer
behaviour): a prompt longer than the model's context, and a pinned tokenizer that gives ids
at or above the model's vocabulary size, are R104 at the dataset, never an internal error.

Independent anchors: the tiny models' config.json (``n_positions``, ``vocab_size``) read
here with json, and prompt lengths counted with the tokenizers library.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hardening_support import REPO

import mibspec

pytestmark = pytest.mark.recompute

MODELS = REPO / "examples" / "models"
#: track → (bundled example, its model, the counterfactual its prompts are paired with)
EXAMPLES = {
    "circuit": ("circuit-ioi", "tiny-gpt2", "io_s2_flip"),
    "causal_variable": ("causal-variable-ravel", "tiny-gpt2-ravel", None),
    "causal_bench": ("causal-bench-tiny-gpt2", "tiny-gpt2", "io_s2_flip"),
}


def _config(model: str) -> dict[str, Any]:
    return json.loads((MODELS / model / "config.json").read_text(encoding="utf-8"))


def _setup(tmp_path: Path, track: str) -> tuple[Path, Path]:
    """A copy of the track's example (report) and of its model under a model root (models)."""
    example, model, _ = EXAMPLES[track]
    report = tmp_path / "report"
    shutil.copytree(REPO / "examples" / example, report)
    models = tmp_path / "models"
    shutil.copytree(MODELS / model, models / model)
    return report, models


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _repin_artifact(document: Path, name: str) -> None:
    data = (document.parent / name).read_bytes()

    def change(doc: Any) -> None:
        for artifact in doc["artifacts"]:
            if artifact["path"] == name:
                artifact["bytes"], artifact["sha256"] = len(data), hashlib.sha256(data).hexdigest()

    _edit(document, change)


def _rows(report: Path) -> list[dict[str, Any]]:
    lines = (report / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _write_rows(report: Path, rows: list[dict[str, Any]]) -> None:
    (report / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _repin_artifact(report / "dataset.json", "dataset.jsonl")
    _repin_artifact(report / "report.json", "dataset.json")


def _lengthen(prompt: dict[str, Any], prefix: str) -> None:
    """Put ``prefix`` before a prompt, and before its template so the row keeps its format (V112)."""
    prompt["prompt"] = prefix + prompt["prompt"]
    if "template" in prompt:
        prompt["template"] = prefix + prompt["template"]


def _verify(report: Path, models: Path) -> list[tuple[str, str, str]]:
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert not result.internal_errors, [d.internal_error for d in result.internal_errors]
    return [(f.code, f.pointer, f.message) for doc in result.documents for f in doc.findings]


@pytest.mark.parametrize("track", sorted(EXAMPLES))
def test_a_prompt_longer_than_the_context_is_r104(tmp_path: Path, track: str) -> None:
    pytest.importorskip("torch")
    from tokenizers import Tokenizer

    report, models = _setup(tmp_path, track)
    _, model, counterfactual = EXAMPLES[track]
    context = _config(model)["n_positions"]
    rows = _rows(report)
    prefix = (rows[0]["base"]["prompt"] + " ") * 20
    _lengthen(rows[0]["base"], prefix)
    if counterfactual is not None:  # paired prompts keep one length
        _lengthen(rows[0]["counterfactuals"][counterfactual], prefix)
    _write_rows(report, rows)
    tokenizer = Tokenizer.from_file(str(MODELS / model / "tokenizer.json"))
    length = len(tokenizer.encode(rows[0]["base"]["prompt"], add_special_tokens=False).ids)
    assert length > context
    [(code, pointer, message)] = _verify(report, models)
    assert (code, pointer) == ("R104", "/task/dataset")
    assert "dataset row 0" in message
    assert f"{length} tokens" in message
    assert f"context of {context} positions" in message


@pytest.mark.parametrize("track", sorted(EXAMPLES))
def test_a_tokenizer_with_ids_beyond_the_vocabulary_is_r104(tmp_path: Path, track: str) -> None:
    pytest.importorskip("torch")
    from tokenizers import Tokenizer

    report, models = _setup(tmp_path, track)
    _, model, _ = EXAMPLES[track]
    vocab = _config(model)["vocab_size"]
    prompt = _rows(report)[0]["base"]["prompt"]
    first = Tokenizer.from_file(str(MODELS / model / "tokenizer.json")).encode(prompt).tokens[0]
    path = models / model / "tokenizer.json"
    _edit(path, lambda t: t["model"]["vocab"].update({first: vocab + 45}))  # a pinned, foreign tokenizer
    _edit(
        report / "report.json",
        lambda r: r["model"]["files"].update(
            {"tokenizer.json": hashlib.sha256(path.read_bytes()).hexdigest()}
        ),
    )
    [(code, pointer, message)] = _verify(report, models)
    assert (code, pointer) == ("R104", "/task/dataset")
    assert f"token id {vocab + 45}" in message
    assert f"vocabulary of {vocab}" in message


@pytest.mark.slow
def test_the_command_line_exits_1_on_a_prompt_beyond_the_context(tmp_path: Path, mibspec_cli: Any) -> None:
    pytest.importorskip("torch")
    report, models = _setup(tmp_path, "circuit")
    rows = _rows(report)
    prefix = (rows[1]["base"]["prompt"] + " ") * 8
    for prompt in (rows[1]["base"], rows[1]["counterfactuals"]["io_s2_flip"]):
        _lengthen(prompt, prefix)
    _write_rows(report, rows)
    done = mibspec_cli("verify", str(report / "report.json"), "--model-root", str(models), "-f", "json")
    assert done.returncode == 1, done.stderr[-2000:]
    [finding] = json.loads(done.stdout)["documents"][0]["findings"]
    assert (finding["code"], finding["pointer"]) == ("R104", "/task/dataset")
    assert "dataset row 1" in finding["message"]
    assert "context of 64 positions" in finding["message"]


class _Model:
    vocab_size = 10
    max_positions = 8


@pytest.mark.parametrize(
    ("ids", "generated", "fragment"),
    [
        ([1, 2, 10], 0, "token id 10, outside the model's vocabulary of 10"),
        ([1, -1], 0, "token id -1"),
        ([1] * 9, 0, "9 tokens, longer than the model's context of 8"),
        ([1] * 6, 3, "6 tokens and 3 generated, longer"),
    ],
)
def test_the_shared_check_refuses_what_the_model_cannot_take(
    ids: list[int], generated: int, fragment: str
) -> None:
    from mibspec.reference_impl.recompute._inputs import UnusableInputError, check_tokens

    with pytest.raises(UnusableInputError) as caught:
        check_tokens(_Model(), ids, "/task/dataset", "dataset row 3", generated=generated)
    assert caught.value.pointer == "/task/dataset"
    assert caught.value.detail.startswith("dataset row 3: ")
    assert fragment in caught.value.detail
    # at the bounds: accepted
    check_tokens(_Model(), [0, 9] + [1] * 6, "/task/dataset", "row")
    check_tokens(_Model(), [1] * 5, "/task/dataset", "row", generated=3)
