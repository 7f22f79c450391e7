"""The circuit tasks beyond IOI, for the parity harness: rows in the layout of MIB's released
files, a tokenizer that reads them as GPT-2's does, a tiny model, and the reports mibspec
writes on them.

Each task's rows are generated here in the columns the public circuit-track loader
(``MIB_circuit_track.dataset.HFEAPDataset``) reads — MCQA and ARC ``prompt``, ``choices``
(``label``, ``text``), ``answerKey`` (an index) and ``<type>_counterfactual`` columns of the
same layout; arithmetic ``prompt``, ``label``, ``operator`` and ``random_counterfactual`` —
and written as a released file. The public side reads that file through its own loader (its
filter and its answer tokenisation); mibspec imports it (``mibspec import mib-dataset``) and
recomputes from the imported document. The model never has to solve a task: parity is about
both sides computing the same numbers on the same inputs.

The tokenizer is byte-level BPE, GPT-2's scheme (a space is part of the word after it, so
``"A"`` and ``" A"`` are different tokens), trained with a fixed corpus on the tasks' texts:
unlike the shipped word-level tokenizer, it tells an answer written with its leading space
from one written without, which is where the public loader and mibspec's rows differ
(``answer_token``, SPEC.md PR-5).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "PUBLIC_TASKS",
    "TASK_MODEL",
    "TaskSpec",
    "task_model_dir",
    "task_report",
    "task_rows",
]


@dataclass(frozen=True)
class TaskSpec:
    """One task the harness generates rows for."""

    name: str  # the public loader's task name
    hub_id: str  # the hub repository its released rows come from (names the task to the import)
    counterfactual_type: str  # the type the public loader reads by default (released name)
    seed: int


PUBLIC_TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec("mcqa", "mib-bench/copycolors_mcqa", "symbol", 11),
        TaskSpec("arc_easy", "mib-bench/arc_easy", "symbol", 12),
        TaskSpec("arc_challenge", "mib-bench/arc_challenge", "symbol", 13),
        TaskSpec("arithmetic_addition", "mib-bench/arithmetic_addition", "random", 14),
        TaskSpec("arithmetic_subtraction", "mib-bench/arithmetic_subtraction", "random", 15),
    )
}

_LETTERS = ("A", "B", "C", "D")
_SYMBOLS = ("1", "2", "3", "4")
_OPTIONS = "\n{0}. {1}\n{2}. {3}\n{4}. {5}\n{6}. {7}\nAnswer:"
_MCQA_STEMS = (
    "Question: The {object} is {color}. What color is the {object}?",
    "The {object} is {color}. Question: What is the color of the {object}?",
)
# ARC-like science questions built from the word lists: easy asks for an object's colour,
# challenge for the object of a colour (the options are objects).
_ARC_STEMS = {
    "arc_easy": ("Question: Which color does a {object} usually have?",),
    "arc_challenge": ("Question: Which of these objects is usually {color}?",),
}
_ARITHMETIC = {
    "+": (
        "Q: How much is {x} plus {y}? A:",
        "Q: What is {x} plus {y}? A:",
        "The sum of {x} and {y} is:",
        "{x} + {y} =",
    ),
    "-": (
        "Q: How much is {x} minus {y}? A:",
        "Q: What is {x} minus {y}? A:",
        "The difference of {x} and {y} is:",
        "{x} - {y} =",
    ),
}


def _choices(labels: Sequence[str], texts: Sequence[str], key: int) -> dict[str, Any]:
    options = [part for pair in zip(labels, texts, strict=True) for part in pair]
    return {"choices": {"label": list(labels), "text": list(texts)}, "answerKey": key, "_options": options}


def _choice_prompt(stem: str, labels: Sequence[str], texts: Sequence[str], key: int) -> dict[str, Any]:
    column = _choices(labels, texts, key)
    column["prompt"] = stem + _OPTIONS.format(*column.pop("_options"))
    return column


def _choice_row(rng: np.random.Generator, task: str) -> dict[str, Any]:
    """One MCQA or ARC row: a base prompt and its ``symbol``, ``answerPosition`` and
    ``randomLetter`` counterfactuals (the released column names)."""
    from mibspec.reference_impl.datasets import wordlists

    pairs = wordlists.COLOURED_OBJECTS
    obj, color = pairs[int(rng.integers(len(pairs)))]
    if task == "arc_challenge":
        stem = _ARC_STEMS[task][0].format(color=color)
        others = [o for o, c in pairs if c != color]
        texts = [str(x) for x in rng.choice(others, 3, replace=False)]
        right = obj
    else:
        stems = _MCQA_STEMS if task == "mcqa" else _ARC_STEMS["arc_easy"]
        stem = stems[int(rng.integers(len(stems)))].format(object=obj, color=color)
        texts = [str(x) for x in rng.choice([c for c in wordlists.COLOURS if c != color], 3, replace=False)]
        right = color
    key = int(rng.integers(4))
    texts.insert(key, right)
    moved = int(rng.choice([i for i in range(4) if i != key]))
    swapped = list(texts)
    swapped[key], swapped[moved] = swapped[moved], swapped[key]
    pool = list("EFGHJKLMNPQRSTUVWXYZ")
    letters = [str(x) for x in rng.choice(pool, 4, replace=False)]
    row = _choice_prompt(stem, _LETTERS, texts, key)
    row["symbol_counterfactual"] = _choice_prompt(stem, _SYMBOLS, texts, key)
    row["answerPosition_counterfactual"] = _choice_prompt(stem, _LETTERS, swapped, moved)
    row["randomLetter_counterfactual"] = _choice_prompt(stem, letters, texts, key)
    return row


def _arithmetic_row(rng: np.random.Generator, operator: str) -> dict[str, Any]:
    """One two-digit row and its ``random`` counterfactual (same template, other operands)."""
    templates = _ARITHMETIC[operator]
    template = templates[int(rng.integers(len(templates)))]

    def column() -> dict[str, Any]:
        x, y = (int(v) for v in rng.integers(10, 100, size=2))
        if operator == "-" and x < y:
            x, y = y, x
        label = x + y if operator == "+" else x - y
        return {"prompt": template.format(x=x, y=y), "label": label, "operator": operator, "num_digit": 2}

    row = column()
    row["random_counterfactual"] = column()
    return row


def _candidates(task: str, n: int) -> list[dict[str, Any]]:
    spec = PUBLIC_TASKS[task]
    rng = np.random.default_rng(spec.seed)
    if task.startswith("arithmetic"):
        operator = "+" if task == "arithmetic_addition" else "-"
        return [_arithmetic_row(rng, operator) for _ in range(n)]
    return [_choice_row(rng, task) for _ in range(n)]


def _texts(row: dict[str, Any]) -> list[str]:
    return [v["prompt"] for v in row.values() if isinstance(v, dict) and "prompt" in v] + [row["prompt"]]


def _answers(row: dict[str, Any], cf: str) -> list[str]:
    """The answers as both readings write them: the label alone and after a space."""
    columns = [row, row[f"{cf}_counterfactual"]]
    if "label" in row:
        labels = [str(c["label"]) for c in columns]
    else:
        labels = [str(c["choices"]["label"][c["answerKey"]]) for c in columns]
    return labels + [" " + label for label in labels]


def task_rows(task: str, n_rows: int, encode: Callable[[str], list[int]]) -> list[dict[str, Any]]:
    """``n_rows`` released-layout rows of ``task`` (seeded) that both readings can patch under
    ``encode``: base and default-counterfactual prompts of one token length, every answer one
    token with and without its leading space. Candidates that fail are skipped, in order."""
    spec = PUBLIC_TASKS[task]
    rows = []
    for row in _candidates(task, 20 * n_rows):
        cf = row[f"{spec.counterfactual_type}_counterfactual"]
        if len(encode(row["prompt"])) != len(encode(cf["prompt"])):
            continue
        if any(len(encode(answer)) != 1 for answer in _answers(row, spec.counterfactual_type)):
            continue
        rows.append(row)
        if len(rows) == n_rows:
            return rows
    raise ValueError(f"{task}: only {len(rows)} of {n_rows} generated rows are usable under the tokenizer")


# --------------------------------------------------------------------------- tokenizer and model

#: The tiny model every non-IOI task runs on: a random GPT-2 whose vocabulary holds the BPE
#: tokenizer below, and whose context holds the longest prompt with its start token.
TASK_MODEL = "tiny-gpt2-bpe"
_VOCAB = 1024
_SPECIALS = ("<pad>", "<unk>", "<eos>")


def _corpus() -> list[str]:
    """The tokenizer's training texts: every task's candidate prompts and every number and
    label, alone and after a space (fixed, so the trained tokenizer is too)."""
    texts: list[str] = []
    for task in PUBLIC_TASKS:
        for row in _candidates(task, 200):
            texts += _texts(row)
    words = [str(n) for n in range(200)] + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return texts + words + [" " + w for w in words]


def _train_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB,
        special_tokens=list(_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 128,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    specials = {"eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
    (folder / "special_tokens_map.json").write_text(json.dumps(specials, indent=1), encoding="utf-8")


def task_model_dir(root: Path) -> Path:
    """Write :data:`TASK_MODEL` under ``root`` (once) and return its folder: a seeded random
    GPT-2 (4 layers, 4 heads, d_model 64, 128 positions) with the trained BPE tokenizer."""
    from mibspec.reference_impl.engine import random_model

    folder = Path(root) / TASK_MODEL
    if (folder / "tokenizer.json").is_file():
        return folder
    random_model(
        "gpt2",
        folder,
        n_layers=4,
        n_heads=4,
        d_model=64,
        vocab_size=_VOCAB,
        seed=3,
        n_positions=128,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=0,
    )
    _train_tokenizer(folder)
    return folder


def _encode(model_dir: Path) -> Callable[[str], list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids)


def task_report(
    task: str, model_dir: Path, folder: Path, *, n_rows: int = 40, method: str = "eap-ig"
) -> Path:
    """A circuit report written by mibspec's producer on ``n_rows`` rows of ``task``: the rows
    written as a released file, imported with ``mibspec import mib-dataset`` (the released
    file stays beside the imported document, where the harness finds it), then scored."""
    from mibspec.importers.mib_dataset import import_mib_dataset
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    spec = PUBLIC_TASKS[task]
    data = Path(folder) / f"data-{task}"
    data.mkdir(parents=True, exist_ok=True)
    released = data / "test.jsonl"
    rows = task_rows(task, n_rows, _encode(model_dir))
    released.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
    imported = import_mib_dataset([released], data / "imported", hub_id=spec.hub_id, split="test")
    if imported.findings or not imported.written:
        raise ValueError(f"{task}: the import of the generated rows failed: {imported.findings}")
    out = Path(folder) / f"circuit-{task}-{Path(model_dir).name}"
    run = score_circuit(
        CircuitOptions(
            model_dir=Path(model_dir),
            dataset_path=Path(imported.written[0]),
            out_dir=out,
            counterfactual_type=spec.counterfactual_type,
            method=method,
            overwrite=True,
        )
    )
    # the released file beside the report's copy of the dataset document, pinned by its hash
    (out / released.name).write_bytes(released.read_bytes())
    return Path(run.report)
