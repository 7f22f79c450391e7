"""JSON Lines rows are parsed by the document parser: every reader of rows refuses what a
document may not hold (duplicate keys, NaN and infinities, unpaired surrogates), with the
line, the column and the code of the problem."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mibspec.core.strict_json import JsonLinesError, read_json_lines
from mibspec.reference_impl.datasets import read_jsonl
from mibspec.reference_impl.recompute._inputs import UnusableInputError, read_rows
from mibspec.reference_impl.scoring.circuit import _strict_rows
from mibspec.validator import Limits

GOOD = '{"id": "a", "v": [1, 2.5, "x"]}'
HOSTILE = [
    ('{"id": "b", "v": NaN}', "NaN", "P103", "/v"),
    ('{"id": "b", "v": -Infinity}', "-Infinity", "P103", "/v"),
    ('{"id": "b", "v": [0, 1e999]}', "1e999", "P103", "/v/1"),
    ('{"id": "b", "v": 1, "v": 2}', '"v": 2', "P102", "/v"),
    ('{"id": "b", "v": {"k": "\\ud800"}}', '"\\ud800"', "P109", "/v/k"),
    ('{"id": "b", "v": [1, }', "}", "P101", None),
]


def lines(*rows: str, newline: str = "\n") -> bytes:
    return "".join(row + newline for row in rows).encode("utf-8")


@pytest.mark.parametrize(("row", "at", "code", "pointer"), HOSTILE)
def test_a_hostile_row_is_located_by_line_column_code_and_pointer(
    row: str, at: str, code: str, pointer: str | None
) -> None:
    raw = lines(GOOD, GOOD, GOOD, row, GOOD)
    with pytest.raises(JsonLinesError) as raised:
        list(read_json_lines(io.BytesIO(raw)))
    assert raised.value.number == 4
    message = str(raised.value)
    assert message.startswith(f"line 4, column {row.index(at) + 1}: ")
    assert message.endswith(f"({code} at {pointer})" if pointer else f"({code})")


def test_rows_are_objects_split_at_newlines_only() -> None:
    raw = lines(GOOD, '{"s": "a\u2028b"}', newline="\r\n")
    assert list(read_json_lines(io.BytesIO(raw))) == [
        (1, {"id": "a", "v": [1, 2.5, "x"]}),
        (2, {"s": "a\u2028b"}),
    ]
    with pytest.raises(JsonLinesError, match="line 2 is not a JSON object"):
        list(read_json_lines(io.BytesIO(lines(GOOD, "[1]"))))


def test_a_row_is_held_to_the_document_limits() -> None:
    with pytest.raises(JsonLinesError, match="P106"):
        list(read_json_lines(io.BytesIO(lines('{"v": ' + "[" * 5 + "]" * 5 + "}")), Limits(max_depth=5)))
    with pytest.raises(JsonLinesError, match="line 2 is longer than 40 bytes"):
        list(read_json_lines(io.BytesIO(lines(GOOD, '{"v": "' + "x" * 40 + '"}')), max_line=40))


@pytest.mark.parametrize(("row", "at", "code", "pointer"), HOSTILE)
def test_every_reader_of_rows_refuses_a_hostile_row(
    tmp_path: Path, row: str, at: str, code: str, pointer: str | None
) -> None:
    raw = lines(GOOD, row)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=f"line 2, column {row.index(at) + 1}: .*{code}"):
        read_jsonl(path)
    with pytest.raises(ValueError, match=f"line 2, column {row.index(at) + 1}: .*{code}"):
        _strict_rows(raw)
    document = {"examples": "rows", "artifacts": [{"id": "rows", "path": "rows.jsonl"}]}
    with pytest.raises(UnusableInputError, match=f"line 2, column {row.index(at) + 1}: .*{code}") as raised:
        read_rows(document, tmp_path, "/task/dataset")
    assert raised.value.pointer == "/task/dataset"


@pytest.mark.parametrize("blank", ["", "   ", "\t", "\r"])
@pytest.mark.parametrize("where", ["inside", "at the end"])
def test_a_blank_line_is_refused_where_it_stands(blank: str, where: str) -> None:
    """A-5 and DS-1: every line holds an object, so the rows counted are the file's lines."""
    raw = lines(GOOD, blank, GOOD) if where == "inside" else lines(GOOD, GOOD, blank)
    with pytest.raises(JsonLinesError, match=r"line [23] is empty") as raised:
        list(read_json_lines(io.BytesIO(raw)))
    assert raised.value.number == (2 if where == "inside" else 3)
    # the newline ending the last row is a line end, not an empty line
    assert len(list(read_json_lines(io.BytesIO(lines(GOOD, GOOD))))) == 2
    assert len(list(read_json_lines(io.BytesIO(lines(GOOD, GOOD).removesuffix(b"\n"))))) == 2


def test_a_dataset_with_a_blank_line_is_a106(tmp_path: Path) -> None:
    import json
    import shutil

    import mibspec

    folder = tmp_path / "circuit"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "circuit", folder)
    rows = (folder / "dataset.jsonl").read_bytes().split(b"\n")
    data = b"\n".join([rows[0], b"", *rows[1:]])
    (folder / "dataset.jsonl").write_bytes(data)
    meta = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    import hashlib

    for artifact in meta["artifacts"]:
        if artifact["path"] == "dataset.jsonl":
            artifact["bytes"], artifact["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (folder / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")
    result = mibspec.verify(folder / "dataset.json", recompute=False)
    found = [f for f in result.findings if f.code == "A106"]
    assert found
    assert "line 2 is empty" in found[0].message
