"""The recipe that regenerates the shipped datasets and tiny models from scratch.

Training data (all from the ``train`` split, never validation or test):

* IOI rows: the base prompt and every counterfactual prompt with a defined answer;
* MCQA rows: the base prompt and all nine counterfactual prompts;
* addition rows: the base prompt only (digit-edit counterfactuals may use operand pairs
  of other splits, see ``datasets.arithmetic``).

The loss is the answer's cross-entropy plus the next-token loss inside the prompt
(weight ``prompt_loss_weight``), which makes the copying and matching circuits the tasks
need appear much sooner than the answer loss alone.

Token embeddings (tied input/output) are initialised with structure:

* lexicon words (names, places, objects, coloured objects, cities) are the sum of a
  vector shared by their word list and an individual random vector, and are frozen, so
  held-out words come from the same distribution as training words;
* the names' individual vectors are moreover redrawn at every training step (the shipped
  weights hold the initial draw): the model cannot learn any name's identity and has to
  copy names from context. Without this, a tiny model memorises the training names
  (100 % on training names, 0–40 % on held-out ones, its errors being training names);
* number tokens start as the sum of one random vector per (digit place, digit) and are
  trained; every other token keeps the model's own initialisation and is trained.

Treating the capital letters as redrawn symbols as well (``symbol_letters``) was tried
to make MCQA copy unfamiliar labels; it kept the models from learning MCQA at all within
the step budget, so it is off.
"""

from __future__ import annotations

import json
import platform
import string
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
import torch
import transformers
from tokenizers import Tokenizer
from transformers import PreTrainedModel

from mibspec.core.files import sha256_file
from mibspec.reference_impl.datasets import (
    Dataset,
    equal_token_length_filter,
    generate,
    lexicon,
    vocabulary_texts,
    write_dataset,
)

from .evaluate import evaluate_rows
from .loop import Example, TrainingConfig, encode_examples, token_embedding, train_model
from .models import TINY_GPT2, TINY_LLAMA, TinyModelSpec, init_model
from .tokenizer import build_word_tokenizer, save_tokenizer_files, tokenize_function

__all__ = [
    "CIRCUIT_COUNTERFACTUAL",
    "EmbeddingInit",
    "Recipe",
    "build_tokenizer",
    "default_symbol_lists",
    "run",
    "shipped_datasets",
    "structured_embeddings",
    "train_one",
    "training_examples",
    "write_models_md",
]

#: The counterfactual type whose logit difference MODELS.md headlines, per task (the one
#: the MIB circuit track uses for IOI and arithmetic).
CIRCUIT_COUNTERFACTUAL: dict[str, str] = {
    "ioi": "io_s2_flip",
    "arithmetic": "random_operands",
    "mcqa": "answer_position",
}

_TRAINED_TASKS = ("ioi", "mcqa", "arithmetic")
_SHIPPED_TASKS = ("ioi", "arithmetic", "mcqa", "ravel")


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the shipped datasets and models.

    Attributes:
        seed: generator seed of every dataset and of model initialisation.
        train_rows: rows of the train split generated per trained task.
        frozen_lexicon: freeze the lexicon words' embeddings (see the module docstring).
        digit_number_init: initialise number tokens from digit vectors.
        resampled_lists: symbol lists whose individual vectors are redrawn at every step.
        symbol_letters: treat the capital letters (MCQA labels) as frozen symbols too.
        random_letter_repeats: copies of each MCQA prompt labelled with random letters.
        shipped_rows: rows of the shipped test split per task, before the filter.
        training: optimiser and loop settings.
        models: model shapes to train.
    """

    seed: int = 0
    train_rows: dict[str, int] = field(
        default_factory=lambda: {"ioi": 3000, "mcqa": 3000, "arithmetic": 20000}
    )
    frozen_lexicon: bool = True
    digit_number_init: bool = True
    resampled_lists: tuple[str, ...] = ("names",)
    symbol_letters: bool = False
    random_letter_repeats: int = 1
    shipped_rows: int = 160
    training: TrainingConfig = field(
        default_factory=lambda: TrainingConfig(
            steps=10000,
            batch_size=64,
            learning_rate=3e-3,
            warmup_steps=200,
            prompt_loss_weight=1.0,
            threads=1,
        )
    )
    models: tuple[TinyModelSpec, ...] = (TINY_GPT2, TINY_LLAMA)

    def as_dict(self) -> dict[str, Any]:
        """Everything but ``models`` (each model's shape is recorded on its own)."""
        out = asdict(self)
        del out["models"]
        return out


def build_tokenizer() -> Tokenizer:
    """The word-level tokenizer over every word any generator can emit."""
    return build_word_tokenizer(vocabulary_texts())


def training_examples(recipe: Recipe) -> list[Example]:
    """Task examples from the train split, in a fixed order."""
    out: list[Example] = []
    for task in _TRAINED_TASKS:
        rows = generate(task, "train", recipe.train_rows[task], recipe.seed).rows
        for row in rows:
            if task == "arithmetic":
                prompts = [row["base"]]
            else:
                prompts = [row["base"], *row["counterfactuals"].values()]
            if task == "mcqa":
                extra = [
                    row["counterfactuals"][t] for t in ("random_letter", "answer_position_random_letter")
                ]
                prompts += extra * (recipe.random_letter_repeats - 1)
            out.extend(Example(p["prompt"], p["answer"], task) for p in prompts if p["answer"] is not None)
    return out


@dataclass(frozen=True)
class EmbeddingInit:
    """Structured token embeddings.

    Attributes:
        weights: the full ``(vocab, d_model)`` matrix to start from.
        frozen_ids: sorted ids of the lexicon rows (frozen during training).
        shared: ``(len(frozen_ids), d_model)``, each frozen row's word-list vector.
        resampled: ``(len(frozen_ids),)`` booleans, the rows a redraw replaces.
    """

    weights: torch.Tensor
    frozen_ids: list[int]
    shared: torch.Tensor
    resampled: torch.Tensor

    def resampler(self) -> Callable[[torch.Generator], torch.Tensor]:
        """Fresh draws of the frozen rows: resampled rows get the same list vector and a
        new individual vector, the other frozen rows keep their initial value."""
        d_model = self.weights.shape[1]
        initial = self.weights[self.frozen_ids]

        def draw(generator: torch.Generator) -> torch.Tensor:
            fresh = self.shared + torch.randn(self.shared.shape, generator=generator) / d_model**0.5
            return torch.where(self.resampled[:, None], fresh, initial)

        return draw


def default_symbol_lists(letters: bool = False) -> dict[str, tuple[str, ...]]:
    """The word lists treated as symbols: every lexicon list but the colours (which all
    splits share), and the capital letters A–Z (MCQA labels) when ``letters``."""
    lists = {kind: words for kind, words in lexicon().items() if kind != "colors"}
    if letters:
        lists["letters"] = tuple(string.ascii_uppercase)
    return lists


def structured_embeddings(
    initial: torch.Tensor,
    vocab: dict[str, int],
    seed: int,
    *,
    symbol_lists: Mapping[str, Sequence[str]] | None = None,
    resampled_lists: Sequence[str] = ("names",),
    numbers: bool = True,
) -> EmbeddingInit:
    """Token embeddings with lexicon and number structure (see the module docstring).

    Args:
        initial: the model's own ``(vocab, d_model)`` initial embeddings (left unchanged).
        vocab: token -> id of the tokenizer.
        seed: seed of the local generator drawing the structure vectors.
        symbol_lists: word lists whose rows are built as list vector + individual vector
            and marked frozen (default: :func:`default_symbol_lists`).
        resampled_lists: the lists among ``symbol_lists`` whose rows a redraw replaces.
        numbers: build the number rows from digit vectors.

    Returns:
        The new matrix, the frozen ids and their list vectors. Every vector has
        independent N(0, 1/d_model) entries, so each part has norm close to 1.
    """
    out = initial.detach().clone()
    d_model = out.shape[1]
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, d_model, generator=generator) / d_model**0.5

    shared_of: dict[int, torch.Tensor] = {}
    resampled_ids: set[int] = set()
    for kind, words in sorted((symbol_lists if symbol_lists is not None else default_symbol_lists()).items()):
        if words:
            shared = draw(1)[0]
            individual = draw(len(words))
            for word, vector in zip(words, individual, strict=True):
                out[vocab[word]] = shared + vector
                shared_of[vocab[word]] = shared
                if kind in resampled_lists:
                    resampled_ids.add(vocab[word])
    if numbers:
        digits = draw(3, 10)  # (place: ones, tens, hundreds) x digit
        for token, index in sorted(vocab.items()):
            if token.isascii() and token.isdigit() and len(token) <= 3 and (token == "0" or token[0] != "0"):
                places = enumerate(reversed(token))
                out[index] = sum((digits[place, int(ch)] for place, ch in places), torch.zeros(d_model))
    frozen = sorted(shared_of)
    shared_rows = torch.stack([shared_of[i] for i in frozen]) if frozen else torch.zeros(0, d_model)
    resampled = torch.tensor([i in resampled_ids for i in frozen], dtype=torch.bool)
    return EmbeddingInit(weights=out, frozen_ids=frozen, shared=shared_rows, resampled=resampled)


def shipped_datasets(
    recipe: Recipe, tokenize: Callable[[str], list[int]], tokenizer_id: str
) -> dict[str, Dataset]:
    """Test-split datasets of every task, after the equal-token-length filter."""
    return {
        task: equal_token_length_filter(
            generate(task, "test", recipe.shipped_rows, recipe.seed), tokenize, tokenizer_id
        )
        for task in _SHIPPED_TASKS
    }


def train_one(
    spec: TinyModelSpec, tokenizer: Tokenizer, recipe: Recipe, log: Callable[[str], None]
) -> tuple[PreTrainedModel, list[dict[str, float]], float]:
    """Initialise and train one model; returns it, its loss history and the seconds taken."""
    data = encode_examples(training_examples(recipe), tokenize_function(tokenizer))
    model = init_model(spec, tokenizer.get_vocab_size(), recipe.seed)
    embedding = token_embedding(model)
    init = structured_embeddings(
        embedding,
        tokenizer.get_vocab(),
        recipe.seed,
        symbol_lists=default_symbol_lists(recipe.symbol_letters) if recipe.frozen_lexicon else {},
        resampled_lists=recipe.resampled_lists,
        numbers=recipe.digit_number_init,
    )
    with torch.no_grad():
        embedding.copy_(init.weights)
    log(
        f"{spec.name}: {sum(p.numel() for p in model.parameters()):,} parameters, {len(data):,} examples, "
        f"{len(init.frozen_ids)} frozen token embeddings"
    )
    start = time.perf_counter()
    history = train_model(
        model,
        data,
        recipe.training,
        log,
        frozen_token_ids=init.frozen_ids,
        resample_frozen=init.resampler() if recipe.resampled_lists else None,
    )
    return model, history, time.perf_counter() - start


def _libraries() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


def run(
    models_dir: str | Path,
    datasets_dir: str | Path,
    recipe: Recipe | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Regenerate the shipped datasets and models.

    Writes ``<datasets_dir>/<task>/test.jsonl`` and ``test.meta.json`` for every task, and
    for every model ``<models_dir>/<name>/`` with ``config.json``, ``model.safetensors``,
    the tokenizer files and ``training.json``; then ``<models_dir>/MODELS.md``.

    Returns:
        The ``training.json`` contents of every model, by name.
    """
    recipe = recipe or Recipe()
    models_root, datasets_root = Path(models_dir), Path(datasets_dir)
    tokenizer = build_tokenizer()
    tokenize = tokenize_function(tokenizer)
    first = recipe.models[0].name
    tokenizer_id = f"examples/models/{first}"
    log(f"vocabulary: {tokenizer.get_vocab_size()} tokens")
    datasets = shipped_datasets(recipe, tokenize, tokenizer_id)
    for task, ds in datasets.items():
        rows_path, _ = write_dataset(ds, datasets_root / task, "test")
        log(f"dataset {task}: {len(ds.rows)} test rows kept of {recipe.shipped_rows} -> {rows_path}")
    task_counts: dict[str, int] = {}
    for ex in training_examples(recipe):
        task_counts[ex.task] = task_counts.get(ex.task, 0) + 1
    summaries: dict[str, Any] = {}
    for spec in recipe.models:
        folder = models_root / spec.name
        model, history, seconds = train_one(spec, tokenizer, recipe, log)
        model.save_pretrained(folder)
        save_tokenizer_files(tokenizer, folder, spec.max_positions)
        evaluation = {
            task: evaluate_rows(model, tokenize, datasets[task].rows, task) for task in _TRAINED_TASKS
        }
        summary = {
            "model": spec.as_dict(),
            "parameters": sum(p.numel() for p in model.parameters()),
            "seed": recipe.seed,
            "recipe": recipe.as_dict(),
            "training_examples": task_counts,
            "vocab_size": tokenizer.get_vocab_size(),
            "tokenizer_sha256": sha256_file(folder / "tokenizer.json"),
            "weights_sha256": sha256_file(folder / "model.safetensors"),
            "evaluation": {
                "split": "test",
                "datasets": {task: f"examples/datasets/{task}/test.jsonl" for task in _TRAINED_TASKS},
                "results": evaluation,
            },
            "loss_history": history,
            "train_seconds": round(seconds, 1),
            "libraries": _libraries(),
        }
        (folder / "training.json").write_text(
            json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        summaries[spec.name] = summary
        for task in _TRAINED_TASKS:
            log(f"{spec.name} {task}: test accuracy {evaluation[task]['accuracy']['base']:.3f}")
    write_models_md(models_root, [spec.name for spec in recipe.models])
    return summaries


def write_models_md(models_dir: str | Path, names: Sequence[str]) -> Path:
    """Write ``MODELS.md`` from the ``training.json`` of each named model folder."""
    root = Path(models_dir)
    summaries = {
        name: json.loads((root / name / "training.json").read_text(encoding="utf-8")) for name in names
    }
    path = root / "MODELS.md"
    path.write_text(_models_md(summaries), encoding="utf-8")
    return path


#: The head of MODELS.md, up to the test-split results table's header.
_MODELS_INTRO = (
    "# Tiny models shipped with mibspec",
    "",
    "Regenerate everything (datasets, tokenizer, both models, this file) with",
    "",
    "```",
    "python examples/models/train.py --out examples/models",
    "```",
    "",
    "Both models are trained from scratch here, deterministically, on a mixture of three",
    "tasks generated by `mibspec.reference_impl.datasets` (train split only): IOI,",
    "two-operand addition and four-choice colour MCQA (see `devtools/mibspec_dev/training/recipe.py`).",
    "Lexicon words (names, places, objects, coloured objects, cities) have frozen",
    "embeddings: a vector shared by their word list plus an individual random vector, so",
    "held-out words come from the same distribution as training words. The names'",
    "individual vectors are redrawn at every training step (the shipped weights hold the",
    "initial draw): no name can be memorised, and names are copied from context. Number",
    "tokens start as sums of digit vectors. Loss: the answer token plus the next-token",
    "loss inside the prompt.",
    "Test splits have names, places and objects (IOI), operand pairs (addition) and",
    "objects (MCQA) disjoint from training.",
    "",
    "Tokenizer: word level (whitespace separates words, each punctuation character is a",
    'token, case kept). Every answer (`" Mary"`, `" D"`, `" 91"`) is one token;',
    "numbers are whole tokens.",
    "",
    "## Test-split results",
    "",
    "Measured on `examples/datasets/<task>/test.jsonl` (the equal-token-length-filtered",
    "test split). Top-1: the argmax over the whole vocabulary at the last prompt position",
    "is the answer token. Logit difference: logit(base answer) − logit(counterfactual",
    "answer) on the base prompt, for the counterfactual type named.",
    "",
    "| model | task | rows | top-1 (base) | top-1 (lowest counterfactual type) "
    "| logit diff. type | mean | median | min | > 0 |",
    "|---|---|---|---|---|---|---|---|---|---|",
)

#: The tail of MODELS.md, after the list of weak prompt types.
_MODELS_OUTRO = (
    "",
    "Per-type accuracies, every logit-difference statistic, the loss history, library",
    "versions and hashes of the weights and tokenizer are in `<model>/training.json`.",
    "Training time is wall-clock on the machine that produced the files. The loop is",
    "deterministic within a run environment (one thread, deterministic kernels, local",
    "generators; `tests/devtools/training/test_loop.py` checks a short run bit for bit).",
    "",
    "The RAVEL attribute-retrieval model `tiny-gpt2-ravel` has its own page, written by",
    "`examples/models/train_ravel.py`: [MODELS-ravel.md](MODELS-ravel.md).",
    "",
)

#: Why the random-letter MCQA prompt types are the weakest, when they are below 90 %.
_RANDOM_LETTER_NOTE = (
    "",
    "MCQA prompts labelled with random letters (`random_letter`,",
    "`answer_position_random_letter`) are the weakest: the models find the right option",
    "(`answer_position` and `symbol` are near 1.0) but tend to map its position to a label",
    "they have learnt instead of copying an unfamiliar label from the prompt. An",
    "interchange-intervention accuracy on those types rests on the few rows where the",
    "model is right on base and counterfactual.",
)


def _models_md(summaries: dict[str, Any]) -> str:
    lines = [*_MODELS_INTRO, *_result_rows(summaries)]
    lines += [
        "",
        "## Models",
        "",
        "| model | class | layers | heads (kv) | d_model | d_mlp | parameters | steps | train time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
        *_model_rows(summaries),
    ]
    weak = [
        f"{name} {task} `{cf}` {value:.3f}"
        for name, summary in summaries.items()
        for task, result in summary["evaluation"]["results"].items()
        for cf, value in result["accuracy"].items()
        if value < 0.9
    ]
    lines += [
        "",
        "## Below 90 %",
        "",
        "Prompt types (base or counterfactual) on which a model's top-1 accuracy is below 0.9:",
        "",
        *([f"- {item}" for item in weak] or ["- none"]),
    ]
    if any("random_letter" in item for item in weak):
        lines += _RANDOM_LETTER_NOTE
    lines += _MODELS_OUTRO
    return "\n".join(lines)


def _result_rows(summaries: dict[str, Any]) -> list[str]:
    """One row per model and task: top-1 accuracies and the logit-difference statistics."""
    rows = []
    for name, summary in summaries.items():
        for task, result in summary["evaluation"]["results"].items():
            acc = result["accuracy"]
            cf_acc = {k: v for k, v in acc.items() if k != "base"}
            worst = min(cf_acc, key=lambda k: (cf_acc[k], k))
            cf_type = CIRCUIT_COUNTERFACTUAL[task]
            ld = result["logit_difference"][cf_type]
            rows.append(
                f"| {name} | {task} | {result['rows']} | {acc['base']:.3f} | {cf_acc[worst]:.3f} ({worst}) | "
                f"{cf_type} | {ld['mean']:.2f} | {ld['median']:.2f} | {ld['min']:.2f} | "
                f"{ld['fraction_positive']:.3f} |"
            )
    return rows


def _model_rows(summaries: dict[str, Any]) -> list[str]:
    """One row per model: its class, shape, parameter count, steps and training time."""
    rows = []
    for name, summary in summaries.items():
        m = summary["model"]
        cls = "GPT2LMHeadModel" if m["family"] == "gpt2" else "LlamaForCausalLM"
        kv = m["n_kv_heads"] if m["family"] == "llama" else m["n_heads"]
        steps = summary["recipe"]["training"]["steps"]
        rows.append(
            f"| {name} | `{cls}` | {m['n_layers']} | {m['n_heads']} ({kv}) | {m['d_model']} | {m['d_mlp']} | "
            f"{summary['parameters']:,} | {steps} | {summary['train_seconds']} |"
        )
    return rows
