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

Each family's tiny model gets a tokenizer of its real family's scheme, trained with a fixed
corpus on the tasks' texts (:data:`TASK_MODELS`): GPT-2's byte-level BPE; Llama-3's (byte
level after a split that keeps numbers in groups of up to three digits and a space apart
from a number: ``" 52"`` is ``" "``, ``"52"``); Qwen2's (the same split, one digit a piece);
Gemma's SentencePiece scheme (a space written ``▁`` at the start of the word after it, no
space added before the text, one digit a piece). Under all four ``"A"`` and ``" A"`` are
different tokens, which is where the public loader and mibspec's rows differ
(``answer_token``, SPEC.md PR-5); where digits are single tokens, arithmetic rows whose
label has two digits fail the public loader's one-token filter, so those models' rows are
drawn with one-digit operands.
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
    "TASK_MODELS",
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


def _arithmetic_row(rng: np.random.Generator, operator: str, digits: int = 2) -> dict[str, Any]:
    """One row of ``digits``-digit operands and its ``random`` counterfactual (same template,
    other operands)."""
    templates = _ARITHMETIC[operator]
    template = templates[int(rng.integers(len(templates)))]
    low, high = (10, 100) if digits == 2 else (0, 10)

    def column() -> dict[str, Any]:
        x, y = (int(v) for v in rng.integers(low, high, size=2))
        if operator == "-" and x < y:
            x, y = y, x
        label = x + y if operator == "+" else x - y
        return {
            "prompt": template.format(x=x, y=y),
            "label": label,
            "operator": operator,
            "num_digit": digits,
        }

    row = column()
    row["random_counterfactual"] = column()
    return row


def _candidates(task: str, n: int, digits: int = 2) -> list[dict[str, Any]]:
    spec = PUBLIC_TASKS[task]
    rng = np.random.default_rng(spec.seed + (0 if digits == 2 else 100))
    if task.startswith("arithmetic"):
        operator = "+" if task == "arithmetic_addition" else "-"
        return [_arithmetic_row(rng, operator, digits) for _ in range(n)]
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


def _usable(row: dict[str, Any], cf_type: str, encode: Callable[[str], list[int]]) -> bool:
    """Base and counterfactual prompts of one token length, every bare answer one token (the
    public reading) and, where the tokenizer makes ``" 52"`` one token, the answer after its
    space too (a tokenizer that splits the space off leaves mibspec's reading its first token)."""
    cf = row[f"{cf_type}_counterfactual"]
    if len(encode(row["prompt"])) != len(encode(cf["prompt"])):
        return False
    answers = _answers(row, cf_type)
    bare, spaced = answers[:2], answers[2:]
    if any(len(encode(answer)) != 1 for answer in bare):
        return False
    return len(encode(" 5")) > 1 or all(len(encode(a)) == 1 for a in spaced)


def task_rows(task: str, n_rows: int, encode: Callable[[str], list[int]]) -> list[dict[str, Any]]:
    """``n_rows`` released-layout rows of ``task`` (seeded) that both readings can patch under
    ``encode`` (:func:`_usable`). Candidates that fail are skipped, in order; arithmetic rows
    are drawn with two-digit operands, else (a tokenizer of single digits) with one-digit ones."""
    spec = PUBLIC_TASKS[task]
    rows: list[dict[str, Any]] = []
    for digits in (2, 1) if task.startswith("arithmetic") else (2,):
        rows = []
        for row in _candidates(task, 20 * n_rows, digits):
            if _usable(row, spec.counterfactual_type, encode):
                rows.append(row)
                if len(rows) == n_rows:
                    return rows
    raise ValueError(f"{task}: only {len(rows)} of {n_rows} generated rows are usable under the tokenizer")


# --------------------------------------------------------------------------- tokenizer and model

#: The tiny random GPT-2 the non-IOI tasks first ran on (its tokenizer GPT-2's scheme).
TASK_MODEL = "tiny-gpt2-bpe"
#: Each family's task model: its folder name, the tokenizer scheme of the real family, the
#: seed and the structure (every model 4 layers, 4 heads, 128 positions). Gemma-2 keeps the
#: structural options of ``RANDOM_MODELS["tiny-gemma2"]`` but a window of 128 tokens: as
#: gemma-2-2b's 4,096 on MIB's prompts, longer than any prompt, so the public code's attention
#: layer order (PR-5) changes nothing and the task's values can be promised.
TASK_MODELS: dict[str, tuple[str, str, int, dict[str, Any]]] = {
    "gpt2": (TASK_MODEL, "gpt2", 3, {"d_model": 64, "n_positions": 128}),
    "llama": ("tiny-llama-bpe", "llama3", 4, {"d_model": 64, "max_position_embeddings": 128}),
    "qwen2": (
        "tiny-qwen2-bpe",
        "qwen2",
        5,
        {"d_model": 64, "max_position_embeddings": 128, "tie_word_embeddings": True, "rope_theta": 1e6},
    ),
    "gemma2": (
        "tiny-gemma2-sp",
        "gemma",
        6,
        {
            "d_model": 48,
            "max_position_embeddings": 128,
            "head_dim": 16,
            "query_pre_attn_scalar": 16,
            "sliding_window": 128,
            "attn_logit_softcapping": 5.0,
            "final_logit_softcapping": 3.0,
        },
    ),
}
_VOCAB = 1024
_SPECIALS = ("<pad>", "<unk>", "<eos>")
# The pre-tokenizer splits of Llama-3's and Qwen2's tokenizer.json (Qwen2: one digit a piece).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPLITS = {"llama3": _LLAMA3_SPLIT, "qwen2": _LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")}


def _corpus(scheme: str) -> list[str]:
    """The tokenizer's training texts: every task's candidate prompts (one-digit arithmetic
    too, where digits are single tokens) and every number and label, alone and after a space
    (fixed, so the trained tokenizer is too)."""
    texts: list[str] = []
    for task in PUBLIC_TASKS:
        for row in _candidates(task, 200):
            texts += _texts(row)
        if task.startswith("arithmetic") and scheme in ("qwen2", "gemma"):
            for row in _candidates(task, 200, digits=1):
                texts += _texts(row)
    words = [str(n) for n in range(200)] + list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return texts + words + [" " + w for w in words]


def _tokenizer(scheme: str) -> tuple[Any, list[str]]:
    """An untrained tokenizer of ``scheme`` and the initial alphabet of its trainer."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>" if scheme == "gemma" else None))
    if scheme == "gemma":  # SentencePiece: "▁" for a space, none before the text; digits, punctuation alone
        tokenizer.normalizer = normalizers.Replace(" ", "▁")
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split("▁", behavior="merged_with_next"),
                pre_tokenizers.Split(Regex(r"\n+"), behavior="isolated"),
                pre_tokenizers.Punctuation(behavior="isolated"),
                pre_tokenizers.Digits(individual_digits=True),
            ]
        )
        tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse()])
        return tokenizer, sorted(set("".join(_corpus(scheme)).replace(" ", "▁")))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=scheme == "gpt2")
    if scheme == "gpt2":
        tokenizer.pre_tokenizer = byte_level
    else:
        split = pre_tokenizers.Split(Regex(_SPLITS[scheme]), behavior="isolated")
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer, pre_tokenizers.ByteLevel.alphabet()


def _train_tokenizer(folder: Path, scheme: str = "gpt2") -> None:
    from tokenizers import trainers

    tokenizer, alphabet = _tokenizer(scheme)
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB,
        special_tokens=list(_SPECIALS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(scheme), trainer=trainer)
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


def task_model_dir(root: Path, family: str = "gpt2") -> Path:
    """Write ``family``'s task model (:data:`TASK_MODELS`) under ``root`` (once) and return
    its folder: a seeded random model of 4 layers and 4 heads with the trained tokenizer of
    the family's scheme."""
    from mibspec.reference_impl.engine import random_model

    name, scheme, seed, shape = TASK_MODELS[family]
    folder = Path(root) / name
    if (folder / "tokenizer.json").is_file():
        return folder
    random_model(
        family,
        folder,
        n_layers=4,
        n_heads=4,
        vocab_size=_VOCAB,
        seed=seed,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=0,
        **shape,
    )
    _train_tokenizer(folder, scheme)
    return folder


def _encode(model_dir: Path) -> Callable[[str], list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids)


def task_report(
    task: str,
    model_dir: Path,
    folder: Path,
    *,
    n_rows: int = 40,
    method: str = "eap-ig",
    profile: str = "default",
) -> Path:
    """A circuit report written by mibspec's producer under ``profile`` on ``n_rows`` rows of
    ``task``: the rows written as a released file, imported with ``mibspec import mib-dataset``
    (the released file stays beside the imported document, where the harness finds it), then
    scored. Under a tokenizer that splits the space off a number (Llama-3's, Qwen2's, Gemma's),
    ``default``'s reading of ``" 8"`` is the space token for both answers and f is undefined:
    such reports are written under ``mib-2025``, which declares the bare label."""
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
            profile=profile,
        )
    )
    # the released file beside the report's copy of the dataset document, pinned by its hash
    (out / released.name).write_bytes(released.read_bytes())
    return Path(run.report)
