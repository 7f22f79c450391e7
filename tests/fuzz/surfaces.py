"""Fuzzing the surfaces beyond validation: the HTML page, and recomputation's model inputs.

Four surfaces, each input a pure function of its seed (a ``random.Random(seed)``):

- ``config``: the model's ``config.json`` damaged (values made extreme, negative, of another
  type, keys deleted or repeated, unknown keys, deep nesting, bytes flipped or cut);
- ``tokenizer``: the model's ``tokenizer.json`` damaged the same ways, and in the places a
  tokenizer reads (vocabulary ids, merges, added tokens, the model's type);
- ``rows``: the dataset's JSON Lines rows damaged (prompts and answers emptied, made long,
  of another type or hostile Unicode, keys deleted, rows repeated or cut, blank lines);
- ``page``: a report of every track damaged, then verified without recomputation and
  rendered as the HTML page with its figures.

For the model inputs, half of the inputs re-pin what was damaged (the file's SHA-256 in the
report's ``model.files``; the rows' size and hash in the dataset and the dataset's in the
report), so that the damaged bytes get past the hash checks into the readers, tokenizers and
the model. The report is a copy of ``examples/circuit-ioi`` on 4 of its rows, with its model
``examples/models/tiny-gpt2`` beside it, verified with recomputation under a 60 s recompute
limit and a 256 MiB model limit (a config implying a larger model is R107 before anything is
built, so no input can take this machine's memory).

What must hold for every input (:func:`run_input`): no exception escapes and mibspec reports
no internal error (exit 3), the result satisfies :func:`fuzzlib.check_outcome` (every
rejection coded and located, stages consistent), the input finishes within its time limit,
and the process's peak resident memory grows by less than :data:`MAX_RSS_GROWTH` over it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import resource
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fuzzlib

SURFACES = ("config", "tokenizer", "rows", "page")
EXAMPLES = fuzzlib.EXAMPLES
PAGE_REPORTS = (
    "circuit-ioi",
    "causal-variable-arithmetic",
    "causal-bench-planted",
    "saliency-digits",
    "circuit",
)
ROWS = 4
#: Largest growth of the process's peak resident memory over one input (bytes).
MAX_RSS_GROWTH = 1024**3

_HOSTILE_TEXT = (
    "",
    " ",
    "\x00",
    "\u202e\u2066",
    "\ud7ff\ue000\uffff",
    "👩‍👩‍👧‍👦" * 50,
    "{name}",
    "{0.__class__}",
    "x" * 20_000,
    "Ĳ" * 3000,
    "\n\r\t",
    " Mary" * 2000,
)


@dataclass
class SurfaceOutcome:
    seed: int
    surface: str
    description: str
    seconds: float = 0.0
    rss_growth: int = 0
    codes: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)


def _pin(path: Path) -> tuple[int, str]:
    data = path.read_bytes()
    return len(data), hashlib.sha256(data).hexdigest()


def _repin_artifact(document: Path, name: str) -> None:
    doc = json.loads(document.read_text(encoding="utf-8"))
    for artifact in doc["artifacts"]:
        if artifact["path"] == name:
            artifact["bytes"], artifact["sha256"] = _pin(document.parent / name)
    document.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def _repin_model_file(report: Path, name: str) -> None:
    doc = json.loads(report.read_text(encoding="utf-8"))
    doc["model"]["files"][name] = _pin(report.parent / "tiny-gpt2" / name)[1]
    report.write_text(json.dumps(doc, indent=2), encoding="utf-8")


class SurfaceFuzzer:
    """Builds the corpus once in ``scratch`` and runs inputs on fresh copies of it."""

    def __init__(self, scratch: Path, *, seconds_per_input: float = 120.0) -> None:
        self.scratch = scratch
        self.seconds = seconds_per_input
        self.base = scratch / "base"
        shutil.copytree(EXAMPLES / "circuit-ioi", self.base)
        shutil.copytree(EXAMPLES / "models" / "tiny-gpt2", self.base / "tiny-gpt2")
        rows = (self.base / "dataset.jsonl").read_bytes().splitlines(keepends=True)[:ROWS]
        (self.base / "dataset.jsonl").write_bytes(b"".join(rows))
        dataset = json.loads((self.base / "dataset.json").read_text(encoding="utf-8"))
        dataset["artifacts"][0]["rows"] = ROWS
        (self.base / "dataset.json").write_text(json.dumps(dataset, indent=2), encoding="utf-8")
        _repin_artifact(self.base / "dataset.json", "dataset.jsonl")
        _repin_artifact(self.base / "report.json", "dataset.json")
        report = json.loads((self.base / "report.json").read_text(encoding="utf-8"))
        report["task"]["n_examples"] = ROWS
        (self.base / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
        self.count = 0

    # ----------------------------------------------------------------------- inputs

    def _fresh(self, name: str) -> Path:
        self.count += 1
        folder = self.scratch / f"input-{self.count}"
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(EXAMPLES / name if name in PAGE_REPORTS and name != "base" else self.base, folder)
        return folder

    def make_input(self, seed: int) -> tuple[str, str, Path]:
        """(surface, description, the report to verify) for input ``seed``."""
        rng = random.Random(seed)
        surface = SURFACES[seed % len(SURFACES)]
        if surface == "page":
            name = rng.choice(PAGE_REPORTS)
            folder = self._fresh(name)
            report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
            text, how = fuzzlib._tree_mutation(report, rng, [])
            (folder / "report.json").write_text(text, encoding="utf-8")
            return surface, f"{name}: {how}", folder / "report.json"
        folder = self._fresh("base")
        report = folder / "report.json"
        repin = rng.random() < 0.5
        if surface in ("config", "tokenizer"):
            name = f"{surface}.json" if surface == "config" else "tokenizer.json"
            path = folder / "tiny-gpt2" / name
            how = _mutate_json_file(path, rng, tokenizer=surface == "tokenizer")
            if repin:
                _repin_model_file(report, name)
        else:
            how = _mutate_rows(folder / "dataset.jsonl", rng)
            if repin:  # the rows declared as the file's lines, so that the rows are read
                dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
                rows = len((folder / "dataset.jsonl").read_bytes().splitlines())
                dataset["artifacts"][0]["rows"] = rows
                (folder / "dataset.json").write_text(json.dumps(dataset, indent=2), encoding="utf-8")
                document = json.loads(report.read_text(encoding="utf-8"))
                document["task"]["n_examples"] = rows
                report.write_text(json.dumps(document, indent=2), encoding="utf-8")
                _repin_artifact(folder / "dataset.json", "dataset.jsonl")
                _repin_artifact(report, "dataset.json")
        return surface, f"{how}{', re-pinned' if repin else ''}", report

    # ----------------------------------------------------------------------- running

    def run_input(self, seed: int) -> SurfaceOutcome:
        import mibspec
        from mibspec.validator import Limits, catalogue

        surface, description, report = self.make_input(seed)
        outcome = SurfaceOutcome(seed, surface, description)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        start = time.perf_counter()
        try:
            with fuzzlib.time_limit(self.seconds):
                if surface == "page":
                    from mibspec.pages.html import build_html_page, render_html

                    result = mibspec.verify(report, recompute=False)
                    page = render_html(build_html_page(result, report))
                    if "<html" not in page:
                        outcome.problems.append("the page is not HTML")
                else:
                    limits = Limits(max_recompute_seconds=60.0, max_model_bytes=256 * 1024**2)
                    result = mibspec.verify(report, limits=limits)
            for doc in result.internal_errors:
                outcome.problems.append(f"internal error: {doc.internal_error}")
            outcome.problems += fuzzlib.check_outcome(result, catalogue("1.2"), recompute=surface != "page")
            outcome.codes = tuple(sorted({f.code for f in result.findings}))
        except fuzzlib.InputTimeoutError:
            outcome.problems.append(f"hang: over {self.seconds} s")
        except Exception as exc:
            outcome.problems.append(f"uncaught {type(exc).__name__}: {exc} {traceback.format_exc()[-600:]}")
        outcome.seconds = time.perf_counter() - start
        outcome.rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
        if outcome.rss_growth > MAX_RSS_GROWTH:
            outcome.problems.append(f"memory: peak grew by {outcome.rss_growth} bytes")
        shutil.rmtree(report.parent, ignore_errors=True)
        return outcome


# --------------------------------------------------------------------------- mutations


def _mutate_json_file(path: Path, rng: random.Random, *, tokenizer: bool) -> str:
    raw = path.read_bytes()
    value = json.loads(raw)
    choice = rng.randrange(10)
    name = path.name
    if choice == 0:  # bytes: flipped, cut or a hostile token spliced in
        data = bytearray(raw)
        kind = rng.randrange(3)
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            path.write_bytes(bytes(data))
            return f"{name}: bits flipped"
        if kind == 1:
            cut = rng.randrange(len(data))
            path.write_bytes(bytes(data[:cut]))
            return f"{name}: cut at byte {cut}"
        token = rng.choice([b"NaN", b"1e999", b"\xff\xfe", b'"\\ud800"', b"[" * 10_000, b"-0"])
        at = rng.randrange(len(data))
        path.write_bytes(bytes(data[:at]) + token + bytes(data[at:]))
        return f"{name}: {token[:10]!r} spliced at byte {at}"
    if tokenizer and choice in (1, 2, 3):
        return _mutate_tokenizer(path, value, rng, choice)
    if not tokenizer and choice in (1, 2, 3):
        key = rng.choice(sorted(value))
        new = rng.choice(
            [0, -1, 1, 2**31, 2**63, 10**12, 10**400, 1.5, -0.0, "4", None, True, [], {}, "gelu_new", 1e308]
        )
        value[key] = new
        text = json.dumps(value) if not (isinstance(new, int) and abs(new) > 10**300) else _dump_big(value)
        path.write_text(text, encoding="utf-8")
        return f"{name}: {key} = {str(new)[:20]}"
    text, how = fuzzlib._tree_mutation(value, rng, [])
    path.write_text(text, encoding="utf-8")
    return f"{name}: {how}"


def _dump_big(value: Any) -> str:
    return json.dumps(value)  # Python writes big integers exactly; the reader limits them


def _mutate_tokenizer(path: Path, value: dict[str, Any], rng: random.Random, choice: int) -> str:
    model = value.get("model") or {}
    vocab = model.get("vocab")
    if choice == 1 and isinstance(vocab, dict) and vocab:
        token = rng.choice(sorted(vocab))
        new = rng.choice([-1, 10**9, 2**31, 2**63, len(vocab), len(vocab) + 1000, 0, "x", None, 1.5])
        vocab[token] = new
        how = f"vocabulary id of {token!r} = {str(new)[:20]}"
    elif choice == 2:
        merges = model.get("merges")
        kind = rng.randrange(4)
        if kind == 0 and isinstance(merges, list):
            model["merges"] = merges[: rng.randrange(len(merges) + 1)]
            how = "merges cut"
        elif kind == 1 and isinstance(merges, list) and merges:
            merges[rng.randrange(len(merges))] = rng.choice(["", "a", "a b c", 5, None, ["a"], "zz qq"])
            how = "a merge garbled"
        elif kind == 2:
            model["type"] = rng.choice(["WordPiece", "Unigram", "WordLevel", "Nope", 3])
            how = f"model type {model['type']!r}"
        else:
            value["added_tokens"] = [
                {
                    "id": rng.choice([10**9, -5, 2**40, 900]),
                    "content": rng.choice(_HOSTILE_TEXT)[:200],
                    "special": rng.random() < 0.5,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                }
            ]
            how = "an added token with a hostile id"
    else:
        key = rng.choice(
            ["normalizer", "pre_tokenizer", "post_processor", "decoder", "truncation", "padding"]
        )
        value[key] = rng.choice(
            [
                None,
                {"type": "Nope"},
                {"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "x"},
                7,
                [],
            ]
        )
        how = f"{key} replaced"
    value["model"] = model
    path.write_text(json.dumps(value), encoding="utf-8")
    return f"tokenizer.json: {how}"


def _mutate_rows(path: Path, rng: random.Random) -> str:
    lines = path.read_bytes().splitlines()
    rows = [json.loads(line) for line in lines]
    i = rng.randrange(len(rows))
    row = rows[i]
    choice = rng.randrange(7)
    if choice == 0:
        where = rng.choice(["base", *sorted(row.get("counterfactuals", {}))])
        prompt = row["base"] if where == "base" else row["counterfactuals"][where]
        field_name = rng.choice(["prompt", "answer"])
        new = rng.choice([*_HOSTILE_TEXT, None, 7, [], {}])
        prompt[field_name] = new
        how = f"row {i} {where}.{field_name} = {str(new)[:16]!r}"
    elif choice == 1:
        key = rng.choice(sorted(row))
        del row[key]
        how = f"row {i} without {key}"
    elif choice == 2:
        rows.extend(copy.deepcopy(rows) * rng.choice([1, 5]))
        how = "rows repeated"
    elif choice == 3:
        data = b"\n".join(json.dumps(r).encode() for r in rows) + b"\n"
        cut = rng.randrange(len(data))
        path.write_bytes(data[:cut] + rng.choice([b"", b"\n\n", b"\n   \n", b"\x00", b"{"]) + data[cut:])
        return f"rows' bytes broken at {cut}"
    elif choice == 4:
        prompt = row["base"]
        prompt["prompt"] = prompt["prompt"] * rng.choice([10, 100, 400])
        prompt["template"] = prompt["template"] * 1
        how = f"row {i} base prompt made long"
    else:
        text, how = fuzzlib._tree_mutation(row, rng, [])
        try:
            rows[i] = json.loads(text)
        except (ValueError, RecursionError):
            lines[i] = text.encode("utf-8", "surrogatepass")
            path.write_bytes(b"\n".join(lines) + b"\n")
            return f"row {i}: {how} (raw)"
        how = f"row {i}: {how}"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return how
