"""The shipped RAVEL model: loading, the accuracies its training.json and MODELS-ravel.md
claim, file hashes, and determinism of its training.

Accuracies are recomputed one prompt at a time through plain ``transformers`` and
``tokenizers`` calls, independently of ``reference_impl.training``.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, GPT2LMHeadModel, PreTrainedModel

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"
FOLDER = MODELS / "tiny-gpt2-ravel"
ROWS_PATH = REPO / "examples" / "datasets" / "ravel" / "test.jsonl"


@cache
def _claims() -> dict[str, Any]:
    return json.loads((FOLDER / "training.json").read_text(encoding="utf-8"))


@cache
def _model() -> PreTrainedModel:
    model = AutoModelForCausalLM.from_pretrained(FOLDER, trust_remote_code=False)
    model.eval()
    return model


@cache
def _tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(FOLDER / "tokenizer.json"))


def _ids(text: str) -> list[int]:
    return list(_tokenizer().encode(text, add_special_tokens=False).ids)


def _rows() -> list[dict[str, Any]]:
    with ROWS_PATH.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@cache
def _last_logits(prompt: str) -> torch.Tensor:
    ids = torch.tensor([_ids(prompt)])
    with torch.no_grad():
        return _model()(input_ids=ids).logits[0, -1].double()


def _top1(prompts: list[dict[str, Any]]) -> float:
    correct = 0
    for prompt in prompts:
        answer = _ids(prompt["answer"])
        assert len(answer) == 1, prompt["answer"]
        correct += int(int(_last_logits(prompt["prompt"]).argmax()) == answer[0])
    return correct / len(prompts)


def test_shipped_folder_loads_as_a_small_gpt2() -> None:
    model = _model()
    assert isinstance(model, GPT2LMHeadModel)
    config = model.config
    assert (config.n_embd, config.n_layer) == (64, 2)
    assert config.vocab_size == _tokenizer().get_vocab_size()
    assert sum(p.numel() for p in model.parameters()) == _claims()["parameters"]
    size = sum(p.stat().st_size for p in FOLDER.iterdir())
    assert size < 600_000


def test_files_match_the_recorded_hashes_and_the_tokenizer_is_tiny_gpt2s() -> None:
    hashes = _claims()["sha256"]
    names = {p.name for p in FOLDER.iterdir() if p.name != "training.json"}
    assert set(hashes) == names
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    for name, digest in hashes.items():
        assert hashlib.sha256((FOLDER / name).read_bytes()).hexdigest() == digest, name
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (FOLDER / name).read_bytes() == (MODELS / "tiny-gpt2" / name).read_bytes(), name


@pytest.mark.slow
def test_accuracies_recompute_from_the_shipped_weights() -> None:
    rows = _rows()
    claimed = _claims()["evaluation"]["results"]["ravel"]
    assert claimed["rows"] == len(rows)
    groups = {"base": [row["base"] for row in rows]}
    for cf_type in rows[0]["counterfactuals"]:
        prompts = [row["counterfactuals"][cf_type] for row in rows]
        if all(p["answer"] is not None for p in prompts):
            groups[cf_type] = prompts
    assert set(groups) == {"base", "attribute", "same_attribute"}
    recomputed = {name: _top1(prompts) for name, prompts in groups.items()}
    assert recomputed == claimed["accuracy"]
    assert recomputed["base"] >= 0.9


@pytest.mark.slow
def test_logit_differences_recompute() -> None:
    rows = _rows()
    claimed = _claims()["evaluation"]["results"]["ravel"]["logit_difference"]
    for cf_type, stats in claimed.items():
        diffs = []
        for row in rows:
            cf_answer = row["counterfactuals"][cf_type]["answer"]
            if cf_answer == row["base"]["answer"]:
                continue
            logits = _last_logits(row["base"]["prompt"])
            diffs.append(float(logits[_ids(row["base"]["answer"])[0]] - logits[_ids(cf_answer)[0]]))
        values = torch.tensor(diffs, dtype=torch.float64)
        assert len(diffs) == stats["rows"]
        assert float(values.mean()) == pytest.approx(stats["mean"], abs=1e-4)
        assert float(values.min()) == pytest.approx(stats["min"], abs=1e-4)
        assert float((values > 0).double().mean()) == stats["fraction_positive"]


@pytest.mark.slow
def test_every_city_fact_is_recalled_as_claimed() -> None:
    # The training set: every city of the lexicon, every attribute, the generator's query.
    from mibspec.reference_impl.datasets import wordlists
    from mibspec.reference_impl.datasets.ravel import ATTRIBUTES, QUERY_TEMPLATES, ravel_cities

    table = {city: dict(zip(ATTRIBUTES, values, strict=True)) for city, *values in wordlists.CITIES}
    for split, claimed in _claims()["fact_accuracy"].items():
        prompts = [
            {"prompt": QUERY_TEMPLATES[a].format(city=c), "answer": f" {table[c][a]}"}
            for c in ravel_cities(split)
            for a in ATTRIBUTES
        ]
        assert _top1(prompts) == claimed, split


def test_models_ravel_md_reports_training_json() -> None:
    text = (MODELS / "MODELS-ravel.md").read_text(encoding="utf-8")
    claims = _claims()
    accuracy = claims["evaluation"]["results"]["ravel"]["accuracy"]
    match = re.search(r"^\| tiny-gpt2-ravel \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|$", text, re.M)
    assert match is not None
    rows, base, attribute, same = match.groups()
    assert int(rows) == claims["evaluation"]["results"]["ravel"]["rows"]
    assert float(base) == pytest.approx(accuracy["base"], abs=5e-4)
    assert float(attribute) == pytest.approx(accuracy["attribute"], abs=5e-4)
    assert float(same) == pytest.approx(accuracy["same_attribute"], abs=5e-4)
    assert f"{claims['train_seconds']} |" in text
    assert "[MODELS-ravel.md](MODELS-ravel.md)" in (MODELS / "MODELS.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_training_is_deterministic_for_a_short_run() -> None:
    from mibspec_dev.training.ravel import quick_recipe, train_ravel

    tokenizer = _tokenizer()
    recipe = quick_recipe(20)
    first, history, _ = train_ravel(tokenizer, recipe)
    second, history_again, _ = train_ravel(tokenizer, recipe)
    assert history == history_again
    a, b = first.state_dict(), second.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # ...and differs from the untrained initialisation.
    from mibspec_dev.training.models import init_model

    untrained = init_model(recipe.model, tokenizer.get_vocab_size(), recipe.seed).state_dict()
    assert not torch.equal(untrained["transformer.h.0.mlp.c_fc.weight"], a["transformer.h.0.mlp.c_fc.weight"])


def test_models_ravel_md_is_what_its_writer_gives() -> None:
    from mibspec_dev.training.ravel import _ravel_md

    text = (MODELS / "MODELS-ravel.md").read_text(encoding="utf-8")
    assert text == _ravel_md("tiny-gpt2-ravel", _claims())
