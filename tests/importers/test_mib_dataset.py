"""``mibspec import mib-dataset``: MIB's released dataset files as counterfactual datasets.

The fixture files are written here in the layout of the hub repositories (one row per base
prompt, one ``<type>_counterfactual`` column per counterfactual type, the columns the public
loaders read), as JSON Lines and as parquet. Expected outputs are worked out by hand in the
tests from the causal models of ``spec/v1/datasets.md`` (DS-7).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.importers import import_mib_dataset

_IOI_TEMPLATE = "Then, {name_A} and {name_B} went to the {place}. {name_C} gave a {object} to"


def _ioi_prompt(a: str, b: str, c: str, io: str) -> dict[str, Any]:
    return {
        "prompt": _IOI_TEMPLATE.format(name_A=a, name_B=b, name_C=c, place="store", object="drink"),
        "template": _IOI_TEMPLATE,
        "metadata": {
            "subject": c,
            "indirect_object": io,
            "random_c": "Paul",
            "object": "drink",
            "place": "store",
        },
    }


def _mcqa_prompt(labels: list[str], texts: list[str], key: int) -> dict[str, Any]:
    options = "".join(f"\n{label}. {text}" for label, text in zip(labels, texts, strict=True))
    prompt = f"Question: The banana is yellow. What color is the banana?{options}\nAnswer:"
    return {"prompt": prompt, "choices": {"label": labels, "text": texts}, "answerKey": key}


def _sum_prompt(x: int, y: int) -> dict[str, Any]:
    return {"prompt": f"Q: How much is {x} plus {y}? A:", "label": x + y, "operator": "+", "num_digit": 2}


def _ravel_prompt(entity: str, attribute: str, label: str) -> dict[str, Any]:
    return {
        "prompt": f"{entity} is in the {attribute.lower()} of",
        "entity": entity,
        "attribute": attribute,
        "label": label,
    }


def mib_rows(task: str) -> list[dict[str, Any]]:
    """Two tiny rows of ``task`` in the released layout."""
    if task == "ioi":
        return [
            {
                **_ioi_prompt("Mary", "John", "John", "Mary"),
                "s1_io_flip_counterfactual": _ioi_prompt("John", "Mary", "John", "Mary"),
                "s2_io_flip_counterfactual": _ioi_prompt("Mary", "John", "Mary", "John"),
                "abc_counterfactual": _ioi_prompt("Mary", "John", "Paul", "Mary"),
            },
            {
                **_ioi_prompt("Anna", "Lisa", "Anna", "Lisa"),
                "s1_io_flip_counterfactual": _ioi_prompt("Lisa", "Anna", "Anna", "Lisa"),
                "s2_io_flip_counterfactual": _ioi_prompt("Anna", "Lisa", "Lisa", "Anna"),
                "abc_counterfactual": _ioi_prompt("Anna", "Lisa", "Paul", "Lisa"),
            },
        ]
    if task == "mcqa":
        return [
            {
                **_mcqa_prompt(["A", "B"], ["gray", "yellow"], 1),
                "symbol_counterfactual": _mcqa_prompt(["1", "2"], ["gray", "yellow"], 1),
                "answerPosition_counterfactual": _mcqa_prompt(["A", "B"], ["yellow", "gray"], 0),
                "noun_counterfactual": _mcqa_prompt(["A", "B"], ["gray", "yellow"], 1),
            }
        ] * 2
    if task == "arithmetic":
        return [
            {**_sum_prompt(17, 25), "random_counterfactual": _sum_prompt(30, 47)},
            {**_sum_prompt(11, 12), "random_counterfactual": _sum_prompt(19, 19)},
        ]
    assert task == "ravel"
    return [
        {
            **_ravel_prompt("Paris", "Country", "France"),
            "entity_counterfactual": _ravel_prompt("Tokyo", "Country", "Japan"),
            "attribute_counterfactual": _ravel_prompt("Tokyo", "Continent", "Asia"),
        }
    ] * 2


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _verify(path: Path) -> Any:
    return mibspec.verify(path, recompute=False)


#: (task, expected base answer, expected interventions of the first row), worked out by hand.
_EXPECTED = {
    "ioi": (
        " Mary",
        {
            # s1_io_flip: Mary now second (position 1): the base's second name is John.
            "s1_io_flip": {"output_token": " Mary", "output_position": " John"},
            # s2_io_flip: the indirect object is John, first mentioned second (position 1).
            "s2_io_flip": {"output_token": " John", "output_position": " John"},
            # abc: the third name is neither of the first two; no output is defined (DS-3, DS-6).
            "abc": {},
        },
    ),
    "mcqa": (
        " B",
        {
            "symbol": {"answer_pointer": " B", "answer": " 2"},
            "answerPosition": {"answer_pointer": " A", "answer": " A"},
            "noun": {"answer_pointer": " B", "answer": " B"},
        },
    ),
    # 17 + 25 = 42 with a ones carry; 30 + 47 has none: the carry interchange gives 32 (MIB Fig. 6).
    "arithmetic": (" 42", {"random": {"ones_carry": " 32"}}),
    "ravel": (
        " France",
        {
            "entity": {"Country": " Japan", "Continent": " France", "Language": " France"},
            "attribute": {"Continent": " France", "Language": " France"},
        },
    ),
}


@pytest.mark.parametrize("task", sorted(_EXPECTED))
def test_each_task_imports_as_a_valid_dataset_with_derived_interventions(tmp_path: Path, task: str) -> None:
    source = write_jsonl(mib_rows(task), tmp_path / "test.jsonl")
    before = source.read_bytes()
    result = import_mib_dataset([source], tmp_path / "out", task=task)
    assert result.findings == []
    [document_path] = result.written
    assert _verify(document_path).valid
    document = json.loads(document_path.read_text(encoding="utf-8"))
    assert (document["task"], document["split"]) == (task, "test")
    answer, interventions = _EXPECTED[task]
    assert sorted(document["counterfactual_types"]) == sorted(interventions)
    rows = _rows(tmp_path / "out" / "test.jsonl")
    assert len(rows) == 2
    assert rows[0]["id"] == f"{task}-test-000000"
    assert rows[0]["base"]["answer"] == answer
    assert rows[0]["interventions"] == interventions
    for row in rows:
        for prompt in (row["base"], *row["counterfactuals"].values()):
            assert prompt["template"].format(**prompt["slots"]) == prompt["prompt"]
    assert source.read_bytes() == before


_CITIES = {
    "Paris": {"Country": "France", "Continent": "Europe", "Language": "French", "Timezone": "Europe/Paris"},
    "Tokyo": {"Country": "Japan", "Continent": "Asia", "Language": "Japanese"},
}


def _ravel_row(entity: str, attribute: str) -> dict[str, Any]:
    """A RAVEL row as released: no answer column, the answer comes from the attribute table."""
    return {"prompt": f"{entity} is in the {attribute.lower()} of", "entity": entity, "attribute": attribute}


def test_ravel_answers_come_from_the_attribute_table(tmp_path: Path) -> None:
    rows = [
        {
            **_ravel_row("Paris", "Country"),
            "entity_counterfactual": _ravel_row("Tokyo", "Continent"),
            "wikipedia_counterfactual": {
                **_ravel_row("Tokyo", "wikipedia"),
                "prompt": "Tokyo hosted the games.",
            },
        },
        {  # an entity the table does not list: no answer, dropped and declared
            **_ravel_row("Atlantis", "Country"),
            "entity_counterfactual": _ravel_row("Paris", "Country"),
            "wikipedia_counterfactual": _ravel_row("Paris", "wikipedia"),
        },
    ]
    source = write_jsonl(rows, tmp_path / "test.jsonl")
    table = tmp_path / "ravel_city_entity.json"
    table.write_text(json.dumps(_CITIES), encoding="utf-8")
    result = import_mib_dataset([source], tmp_path / "out", attributes=table)
    assert result.findings == []
    [path] = result.written
    assert _verify(path).valid
    [row] = _rows(tmp_path / "out" / "test.jsonl")
    assert row["base"]["answer"] == " France"
    assert row["base"]["variables"] == {
        "Country": " France",
        "Continent": " Europe",
        "Language": " French",
        "queried_attribute": "Country",
    }
    # the queried attribute takes Tokyo's value whatever the counterfactual queries
    assert row["interventions"]["entity"] == {
        "Country": " Japan",
        "Continent": " France",
        "Language": " France",
    }
    assert row["interventions"]["wikipedia"] == {
        "Country": " Japan",
        "Continent": " France",
        "Language": " France",
    }
    assert row["counterfactuals"]["wikipedia"]["answer"] is None
    document = json.loads(path.read_text(encoding="utf-8"))
    [dropped] = document["filters"]
    assert (dropped["kept"], dropped["dropped"]) == (1, 1)
    [attributes] = [a for a in document["artifacts"] if a["id"] == "attributes"]
    assert (tmp_path / "out" / attributes["path"]).read_bytes() == table.read_bytes()
    # without the table no row has an answer
    without_table = import_mib_dataset([source], tmp_path / "no-table")
    assert [f.code for f in without_table.findings] == ["I116"]


def test_a_malformed_attribute_table_is_coded(tmp_path: Path) -> None:
    source = write_jsonl(mib_rows("ravel"), tmp_path / "test.jsonl")
    table = tmp_path / "table.json"
    table.write_text('{"Paris": "France"}', encoding="utf-8")
    result = import_mib_dataset([source], tmp_path / "out", attributes=table)
    assert [f.code for f in result.findings] == ["I117"]
    assert not result.written


def test_ioi_slots_come_from_the_row_template(tmp_path: Path) -> None:
    source = write_jsonl(mib_rows("ioi"), tmp_path / "train.jsonl")
    import_mib_dataset([source], tmp_path / "out")
    [row, _] = _rows(tmp_path / "out" / "train.jsonl")
    assert row["base"]["slots"] == {
        "name_A": "Mary",
        "name_B": "John",
        "name_C": "John",
        "place": "store",
        "object": "drink",
    }
    assert row["base"]["variables"] == {"output_token": " Mary", "output_position": 0}
    abc = row["counterfactuals"]["abc"]
    assert (abc["answer"], abc["variables"]["output_position"]) == (None, None)
    assert abc["slots"]["name_C"] == "Paul"


def test_parquet_and_jsonl_give_the_same_rows(tmp_path: Path) -> None:
    rows = mib_rows("mcqa")
    parquet = write_parquet(rows, tmp_path / "validation.parquet")
    jsonl = write_jsonl(rows, tmp_path / "validation.jsonl")
    from_parquet = import_mib_dataset([parquet], tmp_path / "a")
    from_jsonl = import_mib_dataset([jsonl], tmp_path / "b")
    assert from_parquet.findings == []
    assert from_jsonl.findings == []
    assert (tmp_path / "a" / "validation.jsonl").read_bytes() == (
        tmp_path / "b" / "validation.jsonl"
    ).read_bytes()
    document = json.loads(from_parquet.written[0].read_text(encoding="utf-8"))
    assert document["source"]["format"] == "parquet"
    assert document["split"] == "validation"


def test_missing_pyarrow_is_a_coded_finding_for_parquet_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = mib_rows("arithmetic")
    parquet = write_parquet(rows, tmp_path / "test.parquet")
    jsonl = write_jsonl(rows, tmp_path / "train.jsonl")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = import_mib_dataset([parquet], tmp_path / "out")
    assert [f.code for f in result.findings] == ["I104"]
    assert "mib" in result.findings[0].message
    assert not (tmp_path / "out" / "test.jsonl").exists()
    assert import_mib_dataset([jsonl], tmp_path / "out").findings == []


def test_the_source_is_pinned_by_hash_hub_id_and_revision(tmp_path: Path) -> None:
    import hashlib

    source = write_jsonl(mib_rows("ioi"), tmp_path / "test.jsonl")
    revision = "0123456789abcdef0123456789abcdef01234567"
    result = import_mib_dataset([source], tmp_path / "out", hub_id="mib-bench/ioi", revision=revision)
    document = json.loads(result.written[0].read_text(encoding="utf-8"))
    assert document["source"] == {
        "file": "test.jsonl",
        "format": "jsonl",
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "bytes": source.stat().st_size,
        "rows": 2,
        "hub_id": "mib-bench/ioi",
        "revision": revision,
    }
    # the hub id names the task
    assert document["task"] == "ioi"


def test_a_tampered_pin_fails_the_schema(tmp_path: Path) -> None:
    source = write_jsonl(mib_rows("ioi"), tmp_path / "test.jsonl")
    [path] = import_mib_dataset([source], tmp_path / "out", hub_id="mib-bench/ioi").written
    document = json.loads(path.read_text(encoding="utf-8"))
    document["source"]["revision"] = "main"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = _verify(path)
    assert not result.valid
    assert [f.pointer for f in result.findings] == ["/source/revision"]


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"revision": "main"}, "I117"),
        ({"hub_id": "not a repo"}, "I117"),
        ({"task": "greater_than"}, "I117"),
        ({"split": "dev"}, "I117"),
    ],
    ids=["branch-not-commit", "bad-hub-id", "unknown-task", "unknown-split"],
)
def test_bad_options_are_coded(tmp_path: Path, options: dict[str, str], code: str) -> None:
    source = write_jsonl(mib_rows("ioi"), tmp_path / "test.jsonl")
    result = import_mib_dataset([source], tmp_path / "out", **options)
    assert [f.code for f in result.findings] == [code]
    assert not result.written


def test_ambiguous_columns_and_unnamed_split_are_coded(tmp_path: Path) -> None:
    rows = [{k: v for k, v in row.items() if not k.startswith("noun")} for row in mib_rows("mcqa")]
    ambiguous = write_jsonl(rows, tmp_path / "test.jsonl")
    assert [f.code for f in import_mib_dataset([ambiguous], tmp_path / "out").findings] == ["I117"]
    result = import_mib_dataset([ambiguous], tmp_path / "out", task="arc_easy")
    assert result.findings == []
    unnamed = write_jsonl(mib_rows("ioi"), tmp_path / "rows.jsonl")
    assert [f.code for f in import_mib_dataset([unnamed], tmp_path / "o2").findings] == ["I117"]


def test_two_files_with_one_name_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "ioi").mkdir()
    (tmp_path / "mcqa").mkdir()
    ioi = write_jsonl(mib_rows("ioi"), tmp_path / "ioi" / "test.jsonl")
    mcqa = write_jsonl(mib_rows("mcqa"), tmp_path / "mcqa" / "test.jsonl")
    result = import_mib_dataset([ioi, mcqa], tmp_path / "out")
    assert [f.code for f in result.findings] == ["I126"]
    assert not (tmp_path / "out").exists()


def test_rows_lacking_a_counterfactual_are_dropped_and_declared(tmp_path: Path) -> None:
    rows = [*mib_rows("arithmetic"), {**_sum_prompt(5, 6), "random_counterfactual": None}]
    source = write_jsonl(rows, tmp_path / "test.jsonl")
    result = import_mib_dataset([source], tmp_path / "out")
    document = json.loads(result.written[0].read_text(encoding="utf-8"))
    [declared] = document["filters"]
    assert (declared["name"], declared["kept"], declared["dropped"]) == ("other", 2, 1)
    assert document["artifacts"][0]["rows"] == 2
    assert document["source"]["rows"] == 3
    assert _verify(result.written[0]).valid


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        ({"answerKey": 7}, "/1/answerKey"),
        ({"choices": {"label": ["A"], "text": []}}, "/1/choices"),
        ({"prompt": 3}, "/1/prompt"),
    ],
)
def test_a_malformed_row_is_located(tmp_path: Path, change: dict[str, Any], pointer: str) -> None:
    rows = mib_rows("mcqa")
    rows[1] = {**rows[1], **change}
    source = write_jsonl(rows, tmp_path / "test.jsonl")
    result = import_mib_dataset([source], tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I116", pointer)]
    assert not (tmp_path / "out").exists()


def test_a_line_that_is_not_json_gives_its_line(tmp_path: Path) -> None:
    source = tmp_path / "test.jsonl"
    source.write_text(json.dumps(mib_rows("ioi")[0]) + "\n{oops\n", encoding="utf-8")
    [finding] = import_mib_dataset([source], tmp_path / "out").findings
    assert (finding.code, finding.line) == ("I116", 2)


def _peak_bytes(source: Path, out_dir: Path) -> int:
    tracemalloc.start()
    try:
        result = import_mib_dataset([source], out_dir)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.findings == []
    return peak


@pytest.mark.slow
def test_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    row = json.dumps(mib_rows("ioi")[0]) + "\n"
    small, large = tmp_path / "test.jsonl", tmp_path / "train.jsonl"
    small.write_text(row * 10, encoding="utf-8")
    with large.open("w", encoding="utf-8") as handle:
        for _ in range(20_000):
            handle.write(row)
    import_mib_dataset([small], tmp_path / "warm")  # modules and caches loaded once
    large_peak = _peak_bytes(large, tmp_path / "b")
    document = json.loads((tmp_path / "b" / "train.json").read_text(encoding="utf-8"))
    assert document["artifacts"][0]["rows"] == 20_000
    # Holding the rows as objects, or the file or the output as text, takes more than the
    # file's size; a streaming import holds one row (and one read buffer) at a time.
    assert large.stat().st_size > 16 * 1024 * 1024
    assert large_peak < large.stat().st_size / 4


def test_the_import_is_deterministic(tmp_path: Path) -> None:
    source = write_jsonl(mib_rows("ravel"), tmp_path / "test.jsonl")
    import_mib_dataset([source], tmp_path / "a")
    import_mib_dataset([source], tmp_path / "b")
    for name in ("test.json", "test.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.slow
def test_cli_imports_several_files_and_verifies(tmp_path: Path) -> None:
    train = write_jsonl(mib_rows("arithmetic"), tmp_path / "train.jsonl")
    test = write_jsonl(mib_rows("arithmetic"), tmp_path / "test.jsonl")
    command = [sys.executable, "-m", "mibspec", "import", "mib-dataset", str(train), str(test)]
    done = subprocess.run(
        [*command, "-o", str(tmp_path / "out"), "-f", "json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = json.loads(done.stdout)
    assert sorted(Path(d["path"]).name for d in verdicts["documents"]) == ["test.json", "train.json"]
    bad = subprocess.run(
        [*command, "-o", str(tmp_path / "o2"), "--revision", "main"], capture_output=True, text=True
    )
    assert bad.returncode == 1
    # one file that converts, one that does not: the first is written and verified, exit 1
    broken = tmp_path / "validation.jsonl"
    broken.write_text("{}\n", encoding="utf-8")
    mixed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "mib-dataset",
            str(train),
            str(broken),
            "-o",
            str(tmp_path / "o3"),
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
    )
    assert mixed.returncode == 1
    assert not (tmp_path / "o3").exists()  # one file refused: nothing is written
    documents = json.loads(mixed.stdout)["documents"]
    assert [f["code"] for d in documents for f in d["findings"]] == ["I116"]
    assert "I117" in bad.stdout


def test_a_file_that_changes_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.importers import mib_dataset

    source = write_jsonl(mib_rows("ioi"), tmp_path / "test.jsonl")
    convert = mib_dataset._CONVERTERS["ioi"]

    def convert_then_append(row: Any, cf_types: list[str]) -> Any:
        with source.open("r+b") as handle:  # another writer, mid-read: the first row's first byte
            handle.write(b" ")
        return convert(row, cf_types)

    monkeypatch.setitem(mib_dataset._CONVERTERS, "ioi", convert_then_append)
    result = import_mib_dataset([source], tmp_path / "out")
    assert [f.code for f in result.findings] == ["I101"]
    assert not (tmp_path / "out").exists()
