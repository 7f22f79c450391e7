"""A tiny GPT-2 that has memorised the RAVEL-style city facts (``datasets.ravel``).

Attribute retrieval is recall of memorised facts: a model can only answer about a city
whose facts it has seen. As in the MIB RAVEL benchmark, where the facts come from
pre-training and the splits only organise the intervention experiments, the model is
trained on the facts of *every* city of the lexicon (train, validation and test cities
alike): one example per city and attribute, the generator's own base query and answer::

    The country of Bogota is     ->  " Colombia"
    The continent of Bogota is   ->  " America"
    The language of Bogota is    ->  " Spanish"

The test split (``examples/datasets/ravel/test.jsonl``) then measures recall of those
facts through the prompts the intervention experiments use. The tokenizer is the shipped
word-level tokenizer of ``tiny-gpt2`` (it already covers every RAVEL word), copied byte
for byte. Token embeddings are the model's own initialisation, all trained; the loss is
the answer's cross-entropy only (``prompt_loss_weight`` 0).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer
from transformers import PreTrainedModel

from mibspec.core.files import sha256_file
from mibspec.reference_impl.datasets import SPLITS, read_jsonl, wordlists
from mibspec.reference_impl.datasets.ravel import ATTRIBUTES, QUERY_TEMPLATES, ravel_cities

from .evaluate import evaluate_rows
from .loop import Example, TrainingConfig, encode_examples, last_position_logits, train_model
from .models import TinyModelSpec, init_model
from .recipe import _libraries
from .tokenizer import load_word_tokenizer, tokenize_function

__all__ = [
    "RAVEL_GPT2",
    "RavelRecipe",
    "fact_examples",
    "quick_recipe",
    "run_ravel",
    "train_ravel",
    "write_ravel_md",
]

RAVEL_GPT2 = TinyModelSpec(
    "tiny-gpt2-ravel", "gpt2", d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, d_mlp=128
)

#: Files copied unchanged from the tokenizer's source model folder.
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class RavelRecipe:
    """Everything that determines the shipped RAVEL model.

    Attributes:
        seed: model initialisation seed.
        model: the model shape.
        training: optimiser and loop settings (data order seeded by ``training.seed``).
    """

    seed: int = 0
    model: TinyModelSpec = RAVEL_GPT2
    training: TrainingConfig = field(
        default_factory=lambda: TrainingConfig(
            steps=1500,
            batch_size=60,
            learning_rate=3e-3,
            warmup_steps=100,
            prompt_loss_weight=0.0,
            threads=1,
            log_every=100,
        )
    )

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["model"]
        return out


def fact_examples(cities: Sequence[str] | None = None) -> list[Example]:
    """One example per city and attribute: the generator's base query and its answer.

    Args:
        cities: cities to include (default: every city of the lexicon, all splits).
    """
    table = {city: dict(zip(ATTRIBUTES, values, strict=True)) for city, *values in wordlists.CITIES}
    chosen = list(table) if cities is None else list(cities)
    return [
        Example(QUERY_TEMPLATES[attribute].format(city=city), f" {table[city][attribute]}", "ravel")
        for city in chosen
        for attribute in ATTRIBUTES
    ]


def train_ravel(
    tokenizer: Tokenizer, recipe: RavelRecipe, log: Callable[[str], None] | None = None
) -> tuple[PreTrainedModel, list[dict[str, float]], float]:
    """Initialise and train the model on every city's facts; returns it, the loss
    history and the seconds taken."""
    data = encode_examples(fact_examples(), tokenize_function(tokenizer))
    model = init_model(recipe.model, tokenizer.get_vocab_size(), recipe.seed)
    if log is not None:
        parameters = sum(p.numel() for p in model.parameters())
        log(f"{recipe.model.name}: {parameters:,} parameters, {len(data)} facts")
    start = time.perf_counter()
    history = train_model(model, data, recipe.training, log)
    return model, history, time.perf_counter() - start


def _fact_accuracy(model: PreTrainedModel, tokenizer: Tokenizer) -> dict[str, float]:
    """Top-1 recall of the trained facts, per split of the cities."""
    tokenize = tokenize_function(tokenizer)
    out = {}
    for split in SPLITS:
        data = encode_examples(fact_examples(ravel_cities(split)), tokenize)
        logits = last_position_logits(model, data)
        out[split] = float((logits.argmax(-1) == data.targets).double().mean())
    return out


def run_ravel(
    models_dir: str | Path,
    datasets_dir: str | Path,
    recipe: RavelRecipe | None = None,
    tokenizer_from: str = "tiny-gpt2",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train the RAVEL model and write ``<models_dir>/<name>/`` and ``MODELS-ravel.md``.

    The folder holds ``config.json``, ``generation_config.json``, ``model.safetensors``,
    the tokenizer files copied from ``<models_dir>/<tokenizer_from>/`` and
    ``training.json`` (recipe, losses, accuracies, library versions, file hashes).
    Accuracy is measured on ``<datasets_dir>/ravel/test.jsonl``.

    Returns:
        The ``training.json`` contents.
    """
    recipe = recipe or RavelRecipe()
    models_root, datasets_root = Path(models_dir), Path(datasets_dir)
    source = models_root / tokenizer_from
    tokenizer = load_word_tokenizer(source)
    tokenize = tokenize_function(tokenizer)
    rows = read_jsonl(datasets_root / "ravel" / "test.jsonl")
    model, history, seconds = train_ravel(tokenizer, recipe, log)
    folder = models_root / recipe.model.name
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, folder / name)
    evaluation = evaluate_rows(model, tokenize, rows, "ravel")
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "training.json")
    summary = {
        "model": recipe.model.as_dict(),
        "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "seed": recipe.seed,
        "recipe": recipe.as_dict(),
        "training_data": {
            "description": "one base query per city and attribute, every city of the lexicon (all splits)",
            "examples": len(fact_examples()),
            "cities": len(wordlists.CITIES),
            "attributes": list(ATTRIBUTES),
            "templates": dict(QUERY_TEMPLATES),
        },
        "tokenizer_from": f"examples/models/{tokenizer_from}",
        "vocab_size": tokenizer.get_vocab_size(),
        "sha256": {name: sha256_file(folder / name) for name in files},
        "fact_accuracy": _fact_accuracy(model, tokenizer),
        "evaluation": {
            "split": "test",
            "dataset": "examples/datasets/ravel/test.jsonl",
            "results": {"ravel": evaluation},
        },
        "loss_history": history,
        "train_seconds": round(seconds, 1),
        "libraries": _libraries(),
    }
    (folder / "training.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    write_ravel_md(models_root, recipe.model.name)
    log(f"{recipe.model.name}: test top-1 (base) {evaluation['accuracy']['base']:.3f}, {seconds:.1f} s")
    return summary


def write_ravel_md(models_dir: str | Path, name: str = RAVEL_GPT2.name) -> Path:
    """Write ``MODELS-ravel.md`` from ``<models_dir>/<name>/training.json``."""
    root = Path(models_dir)
    summary = json.loads((root / name / "training.json").read_text(encoding="utf-8"))
    path = root / "MODELS-ravel.md"
    path.write_text(_ravel_md(name, summary), encoding="utf-8")
    return path


def _ravel_md(name: str, summary: dict[str, Any]) -> str:
    m = summary["model"]
    training = summary["recipe"]["training"]
    result = summary["evaluation"]["results"]["ravel"]
    acc = result["accuracy"]
    facts = summary["fact_accuracy"]
    lines = [
        f"# {name}: attribute retrieval (RAVEL-style)",
        "",
        "Regenerate the model and this file (needs the shipped `tiny-gpt2` tokenizer and",
        "`examples/datasets/ravel/test.jsonl`) with",
        "",
        "```",
        "python examples/models/train_ravel.py --out examples/models",
        "```",
        "",
        "Attribute retrieval is recall of memorised facts, so a model can only answer about",
        "a city whose facts it has seen. As in the MIB RAVEL benchmark (facts from",
        "pre-training, splits only for the intervention experiments), the model is trained on",
        "the facts of every city of the lexicon, all splits included:",
        f"{summary['training_data']['examples']} examples, one per city "
        f"({summary['training_data']['cities']}) and attribute (Country, Continent, Language),",
        "each the generator's own base query and answer, e.g.",
        '`The country of Bogota is` → `" Colombia"`. The test split\'s cities are disjoint',
        "from the train split's for the intervention experiments, not for the model: the",
        "accuracies below measure recall of trained facts, not generalisation to unseen cities.",
        "Mention sentences (the `mention` counterfactual) are never seen in training.",
        "",
        "Tokenizer: `tiny-gpt2`'s `tokenizer.json` (with its config files), copied unchanged;",
        "it covers every RAVEL word. Loss: the answer token only. Source:",
        "`devtools/mibspec_dev/training/ravel.py`.",
        "",
        "## Test-split results",
        "",
        "Measured on `examples/datasets/ravel/test.jsonl`. Top-1: the argmax over the whole",
        "vocabulary at the last prompt position is the answer token; `mention` prompts have no",
        "answer. Logit difference: logit(base answer) − logit(counterfactual answer) on the base",
        "prompt.",
        "",
        "| model | rows | top-1 (base) | top-1 (attribute) | top-1 (same_attribute) |",
        "|---|---|---|---|---|",
        f"| {name} | {result['rows']} | {acc['base']:.3f} | {acc['attribute']:.3f} | "
        f"{acc['same_attribute']:.3f} |",
        "",
        "| logit diff. type | rows | mean | median | min | > 0 |",
        "|---|---|---|---|---|---|",
    ]
    for cf_type, ld in result["logit_difference"].items():
        lines.append(
            f"| {cf_type} | {ld['rows']} | {ld['mean']:.2f} | {ld['median']:.2f} | {ld['min']:.2f} | "
            f"{ld['fraction_positive']:.3f} |"
        )
    lines += [
        "",
        "Top-1 recall of all trained facts, by the split the city belongs to: "
        + ", ".join(f"{split} {value:.3f}" for split, value in facts.items())
        + ".",
        "",
        "## Model",
        "",
        "| model | class | layers | heads | d_model | d_mlp | parameters | steps | batch | train time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {name} | `{summary['class']}` | {m['n_layers']} | {m['n_heads']} | {m['d_model']} | "
        f"{m['d_mlp']} | {summary['parameters']:,} | {training['steps']} | {training['batch_size']} | "
        f"{summary['train_seconds']} |",
        "",
        "The loss history, library versions and the sha256 of every file are in",
        f"`{name}/training.json`. Training time is wall-clock on the machine that produced the",
        "files (one torch thread). The run is deterministic within a run environment (local",
        "generators, deterministic kernels); every figure above is recomputed from the shipped",
        "weights by `tests/devtools/training/test_ravel.py`.",
        "",
    ]
    return "\n".join(lines)


def quick_recipe(steps: int) -> RavelRecipe:
    """The default recipe cut to ``steps`` steps (short runs, e.g. determinism checks)."""
    base = RavelRecipe()
    return replace(base, training=replace(base.training, steps=steps, warmup_steps=min(steps, 10)))
