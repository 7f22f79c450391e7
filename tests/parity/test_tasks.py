"""The circuit tasks beyond IOI without the public code: the answer-token convention (the
public circuit loader tokenises MCQA, ARC and arithmetic labels bare, IOI names after a
space), the released-layout rows the harness generates, their import, and a report scored
under ``mib-2025`` that recomputes under the convention it declares."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mibspec.core.profiles import load_profile

_STRIPPED = (
    "mcqa",
    "arc_easy",
    "arc_challenge",
    "arithmetic",
    "arithmetic_addition",
    "arithmetic_subtraction",
)


def _choice(report: dict[str, Any], profile: str) -> str:
    from mibspec.reference_impl.recompute.circuit import answer_token_choice

    return answer_token_choice(report, load_profile(profile))


@pytest.mark.parametrize("task", _STRIPPED)
def test_mib_2025_reads_bare_labels_where_the_public_loader_does(task: str) -> None:
    # MIB_circuit_track/dataset.py: tokenizer(row["choices"]["label"][row["answerKey"]]) and
    # tokenizer(str(row["label"])) -- the label without the space the prompt's answer has
    assert _choice({"task": {"name": task}, "settings": {}}, "mib-2025") == "without_leading_space"
    assert _choice({"task": {"name": task}, "settings": {}}, "default") == "as_written"


def test_ioi_and_unlisted_tasks_read_answers_as_written_and_a_report_declaration_wins() -> None:
    # IOI: tokenizer(f" {row['metadata']['indirect_object']}"), the name after its space
    for task in ("ioi", "ravel", "greater-than"):
        assert _choice({"task": {"name": task}, "settings": {}}, "mib-2025") == "as_written"
    declared = {"task": {"name": "mcqa"}, "settings": {"answer_token": "as_written"}}
    assert _choice(declared, "mib-2025") == "as_written"
    declared = {"task": {"name": "ioi"}, "settings": {"answer_token": "without_leading_space"}}
    assert _choice(declared, "default") == "without_leading_space"


def test_tokenize_pairs_strips_only_the_answers_leading_space() -> None:
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    vocab = {"Q": 3, ":": 4, "A": 5, " A": 6, "1": 7, " 1": 8}
    rows = [
        {
            "base": {"prompt": "Q:", "answer": " A"},
            "counterfactuals": {"symbol": {"prompt": "Q:", "answer": " 1"}},
        }
    ]

    def encode(text: str) -> list[int]:
        return [vocab[text]] if text in vocab else [vocab[c] for c in text]

    _, _, _, correct, counter = tokenize_pairs(rows, "symbol", encode, "/")
    assert (correct.tolist(), counter.tolist()) == ([6], [8])
    ids, _, _, correct, counter = tokenize_pairs(
        rows, "symbol", encode, "/", answer_token="without_leading_space"
    )
    assert (correct.tolist(), counter.tolist()) == ([5], [7])
    assert ids.tolist() == [[3, 4]]  # prompts untouched


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    from mibspec.parity import task_model_dir

    return task_model_dir(tmp_path_factory.mktemp("task-model"))


@pytest.mark.recompute
@pytest.mark.parametrize(
    "task", ["mcqa", "arc_easy", "arc_challenge", "arithmetic_addition", "arithmetic_subtraction"]
)
def test_generated_rows_pass_the_public_filter_and_patch_aligned(task: str, bpe_model: Path) -> None:
    from tokenizers import Tokenizer

    from mibspec.parity import PUBLIC_TASKS, task_rows

    tokenizer = Tokenizer.from_file(str(bpe_model / "tokenizer.json"))

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    assert encode("A") != encode(" A")  # GPT-2's byte-level scheme: the space belongs to the token
    rows = task_rows(task, 12, encode)
    assert rows == task_rows(task, 12, encode)  # seeded
    column = f"{PUBLIC_TASKS[task].counterfactual_type}_counterfactual"
    for row in rows:
        cf = row[column]
        assert len(encode(row["prompt"])) == len(encode(cf["prompt"]))
        if task.startswith("arithmetic"):
            # the public filter: one-token labels of the task's operator
            assert row["operator"] == cf["operator"] == ("+" if task.endswith("addition") else "-")
            assert len(encode(str(row["label"]))) == len(encode(str(cf["label"]))) == 1
            x, y = (int(n) for n in row["prompt"].replace("?", " ").split() if n.isdigit())
            assert row["label"] == (x + y if row["operator"] == "+" else x - y)
        else:
            label = row["choices"]["label"][row["answerKey"]]
            cf_label = cf["choices"]["label"][cf["answerKey"]]
            assert len(encode(label)) == len(encode(str(cf_label)))  # the public filter
            assert f"\n{label}. {row['choices']['text'][row['answerKey']]}\n" in row["prompt"]


@pytest.mark.recompute
@pytest.mark.parametrize(
    ("family", "pieces"),
    [
        ("gpt2", {"A": ["A"], " A": ["ĠA"], "52": ["52"], " 52": ["Ġ52"]}),
        ("llama", {"A": ["A"], " A": ["ĠA"], "52": ["52"], " 52": ["Ġ", "52"]}),
        ("qwen2", {"A": ["A"], " A": ["ĠA"], "52": ["5", "2"], " 52": ["Ġ", "5", "2"]}),
        ("gemma2", {"A": ["A"], " A": ["▁A"], "52": ["5", "2"], " 52": ["▁", "5", "2"]}),
    ],
)
def test_each_familys_task_tokenizer_splits_labels_as_the_family_does(
    family: str, pieces: dict[str, list[str]], tmp_path: Path
) -> None:
    """GPT-2 keeps a space with the number after it; Llama-3 splits it off and keeps up to three
    digits together; Qwen2 and Gemma write one digit a piece (their published tokenizers)."""
    pytest.importorskip("torch")
    from tokenizers import Tokenizer

    from mibspec.parity import PUBLIC_TASKS, TASK_MODELS, task_model_dir, task_rows

    folder = task_model_dir(tmp_path, family)
    assert folder.name == TASK_MODELS[family][0]
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert {text: tokenizer.encode(text, add_special_tokens=False).tokens for text in pieces} == pieces

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    for task in PUBLIC_TASKS:
        rows = task_rows(task, 8, encode)
        for row in rows:  # the public loader's one-token labels, with one-digit sums where digits split
            label = str(row["label"]) if "label" in row else row["choices"]["label"][row["answerKey"]]
            assert len(encode(label)) == 1
            if "label" in row:
                assert row["num_digit"] == (1 if len(pieces["52"]) == 2 else 2)


@pytest.mark.parametrize(
    ("hub_id", "task", "row", "answer"),
    [
        (
            "mib-bench/arc_challenge",
            "arc_challenge",
            {
                "prompt": "Question: Which is white?\nA. ink\nB. rice\nAnswer:",
                "choices": {"label": ["A", "B"], "text": ["ink", "rice"]},
                "answerKey": 1,
                "symbol_counterfactual": {
                    "prompt": "Question: Which is white?\n1. ink\n2. rice\nAnswer:",
                    "choices": {"label": ["1", "2"], "text": ["ink", "rice"]},
                    "answerKey": 1,
                },
            },
            (" B", " 2"),
        ),
        (
            "mib-bench/arithmetic_subtraction",
            "arithmetic_subtraction",
            {
                "prompt": "73 - 21 =",
                "label": 52,
                "operator": "-",
                "random_counterfactual": {"prompt": "40 - 18 =", "label": "22", "operator": "-"},
            },
            (" 52", " 22"),
        ),
    ],
)
def test_arc_challenge_and_subtraction_rows_import(
    tmp_path: Path, hub_id: str, task: str, row: dict[str, Any], answer: tuple[str, str]
) -> None:
    from mibspec.importers.mib_dataset import import_mib_dataset

    source = tmp_path / "test.jsonl"
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    result = import_mib_dataset([source], tmp_path / "out", hub_id=hub_id)
    assert result.findings == []
    document = json.loads(result.written[0].read_text(encoding="utf-8"))
    assert document["task"] == task
    [imported] = [json.loads(line) for line in result.sidecars[0].read_text(encoding="utf-8").splitlines()]
    [cf_type] = document["counterfactual_types"]
    assert (imported["base"]["answer"], imported["counterfactuals"][cf_type]["answer"]) == answer
    # without a hub id, the columns name subtraction by its operator
    if task == "arithmetic_subtraction":
        again = import_mib_dataset([source], tmp_path / "again")
        assert json.loads(again.written[0].read_text(encoding="utf-8"))["task"] == task


@pytest.mark.slow
@pytest.mark.recompute
def test_a_mib_2025_report_declares_bare_labels_and_recomputes(tmp_path: Path, bpe_model: Path) -> None:
    from tokenizers import Tokenizer

    import mibspec
    from mibspec.importers.mib_dataset import import_mib_dataset
    from mibspec.parity import task_rows
    from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

    tokenizer = Tokenizer.from_file(str(bpe_model / "tokenizer.json"))
    rows = task_rows("mcqa", 6, lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids))
    source = tmp_path / "test.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    imported = import_mib_dataset([source], tmp_path / "data", hub_id="mib-bench/copycolors_mcqa")
    reports = {}
    for profile in ("mib-2025", "default"):
        run = score_circuit(
            CircuitOptions(
                bpe_model,
                imported.written[0],
                tmp_path / profile,
                counterfactual_type="symbol",
                method="random",
                batch_size=3,
                profile=profile,
            )
        )
        reports[profile] = json.loads(Path(run.report).read_text(encoding="utf-8"))
        result = mibspec.verify(run.report, model_roots=[bpe_model.parent])
        assert result.valid
        assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    assert reports["mib-2025"]["settings"]["answer_token"] == "without_leading_space"
    assert "answer_token" not in reports["default"]["settings"]
    # the bare label is another token than the label after a space: m(N) moves
    assert reports["mib-2025"]["claims"]["m_full"] != pytest.approx(
        reports["default"]["claims"]["m_full"], rel=1e-3
    )
