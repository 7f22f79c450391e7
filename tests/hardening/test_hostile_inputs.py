"""Hostile inputs: each is refused with a code and a pointer, within bounded memory.

Memory is measured in a fresh process (``conftest.measured_verify``): the peak of traced
Python allocations and the growth of the peak resident set size during verification must
both stay within 2× the input's size + 200 MB. Expected codes and pointers are written
out by hand from the spec (SPEC.md §2, §3), not taken from the validator.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hardening_support import REPO, codes, measured_verify
from hypothesis import given, settings
from hypothesis import strategies as st

import mibspec
from mibspec.core.sidecars import TensorInfo, non_finite_values
from mibspec.validator import Limits, SidecarError, read_npy_header, read_safetensors_header

MB = 1024 * 1024
EXAMPLE = REPO / "examples" / "circuit"


def within_budget(measured: dict[str, Any], input_bytes: int) -> None:
    budget = 2 * input_bytes + 200 * MB
    assert measured["traced_peak"] <= budget, (measured["traced_peak"], budget)
    assert measured["rss_growth"] <= budget, (measured["rss_growth"], budget)


def small_document(extra: str = "") -> str:
    """A conformant causal-model document's text, with ``extra`` members spliced in first."""
    source = REPO / "conformance/v1/causal_model/valid/arithmetic-two-digit-carry/document.json"
    text = source.read_text(encoding="utf-8")
    return text.replace("{", "{" + extra, 1) if extra else text


def found(result: Any) -> set[tuple[str, str]]:
    return {(f.code, f.pointer) for doc in result.documents for f in doc.findings}


@pytest.fixture
def report(tmp_path: Path) -> Path:
    """A copy of the example circuit report folder (report → circuit document → safetensors)."""
    target = tmp_path / "report"
    shutil.copytree(EXAMPLE, target)
    return target


def edit(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def repin(document: Path, name: str) -> None:
    """Make the artifact entry for ``name`` declare the file's current size and hash."""
    data = (document.parent / name).read_bytes()

    def change(doc: Any) -> None:
        for artifact in doc["artifacts"]:
            if artifact["path"] == name:
                artifact["bytes"], artifact["sha256"] = len(data), hashlib.sha256(data).hexdigest()

    edit(document, change)


# --- size, depth and number of values ---------------------------------------------------------


def test_nesting_100000_deep_is_refused_without_recursion(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(small_document('"extensions": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}, "))
    measured = measured_verify([path])
    assert codes(measured["result"]) == {("P106", "")}
    within_budget(measured, path.stat().st_size)


def test_nesting_beyond_the_interpreter_is_a_finding_even_with_a_raised_depth_limit(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(small_document('"extensions": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}, "))
    result = mibspec.verify(path, recompute=False, limits=Limits(max_depth=200_000))
    assert {code for code, _ in found(result)} == {"P101"}


def test_one_gigabyte_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:  # sparse: takes no disk space
        handle.write(b'{"spec_version": "1.0", "kind": "report", "x": "')
        handle.truncate(1024**3)
    try:
        assert path.stat().st_size == 1024**3
        measured = measured_verify([path])
        assert codes(measured["result"]) == {("P107", "")}
        # Reading it would take 1 GiB; the budget here is the constant part alone.
        within_budget(measured, 0)
    finally:
        path.unlink()


@pytest.mark.slow
@pytest.mark.parametrize("element", ["0", "{}", "[]"])
def test_ten_million_element_array_is_refused_before_parsing(tmp_path: Path, element: str) -> None:
    path = tmp_path / "wide.json"
    path.write_text(small_document('"extensions": {"x": [' + ",".join([element] * 10_000_000) + "]}, "))
    measured = measured_verify([path], limits={"max_bytes": 64 * MB})
    assert codes(measured["result"]) == {("P110", "")}
    within_budget(measured, path.stat().st_size)


@pytest.mark.slow
def test_a_million_values_at_the_limit_parse_within_memory(tmp_path: Path) -> None:
    base = json.loads(small_document())
    others = _count_values(base) + 2  # the extensions object and the array
    path = tmp_path / "wide.json"
    path.write_text(
        small_document('"extensions": {"x": [' + ",".join(["0.5"] * (1_000_000 - others)) + "]}, ")
    )
    measured = measured_verify([path])
    assert measured["result"]["valid"], codes(measured["result"])
    within_budget(measured, path.stat().st_size)


def test_many_schema_errors_stop_at_the_findings_limit(tmp_path: Path) -> None:
    path = tmp_path / "wrong.json"
    doc = json.loads(small_document())
    doc["variables"] = [0] * 50_000  # every item has the wrong type
    path.write_text(json.dumps(doc))
    result = mibspec.verify(path, recompute=False, limits=Limits(max_findings=25))
    [document] = result.documents
    assert len(document.findings) == 25
    assert {f.code for f in document.findings} == {"S110"}
    status, detail = document.stages[mibspec.validator.Stage.SCHEMA]
    assert status.value == "failed"
    assert detail is not None
    assert "25 findings" in detail


@pytest.mark.slow
def test_texts_that_took_quadratic_time_are_refused_in_linear_time(tmp_path: Path) -> None:
    # About 2 MB each. The former pre-check read an unterminated string again from each of its
    # quotes (hours for these texts), and the scanner that locates problems copied a long key
    # into the pointer of every value below it (500 000 copies of 1 MB). The subprocess
    # timeout of measured_verify is a hang guard, not a measurement.
    texts = {
        "escaped-quotes.json": ("[" * 65 + '"' + '\\"' * 1_000_000, ("P106", "")),
        "balanced-then-escaped-quotes.json": ("[" * 65 + "]" * 65 + '"' + '\\"' * 1_000_000, ("P106", "")),
        # Pointers longer than 4096 characters are not built: the nearest ancestor names the value.
        "long-key.json": ('{"' + "k" * 1_000_000 + '": [' + "0, " * 300_000 + "NaN]}", ("P103", "")),
    }
    for name, (text, _) in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    measured = measured_verify([tmp_path / name for name in texts])
    for document in measured["result"]["documents"]:
        expected = texts[Path(document["path"]).name][1]
        assert {(f["code"], f["pointer"]) for f in document["findings"]} == {expected}
    within_budget(measured, sum((tmp_path / name).stat().st_size for name in texts))


@pytest.mark.slow
def test_a_line_index_takes_memory_by_blocks_not_by_lines(tmp_path: Path) -> None:
    path = tmp_path / "lines.json"
    path.write_text("{" + "\n" * 30_000_000 + '"v": NaN}', encoding="utf-8")
    measured = measured_verify([path])
    [document] = measured["result"]["documents"]
    [finding] = document["findings"]
    assert (finding["code"], finding["pointer"], finding["line"], finding["column"]) == (
        "P103",
        "/v",
        30_000_001,
        6,
    )
    within_budget(measured, path.stat().st_size)


def test_duplicate_keys_stop_at_the_findings_limit(tmp_path: Path) -> None:
    path = tmp_path / "duplicates.json"
    path.write_text(small_document('"extensions": {' + '"a": 0, ' * 200_000 + '"b": 0}, '))
    result = mibspec.verify(path, recompute=False, limits=Limits(max_findings=25))
    [document] = result.documents
    assert len(document.findings) == 25
    assert {(f.code, f.pointer) for f in document.findings} == {("P102", "/extensions/a")}
    status, detail = document.stages[mibspec.validator.Stage.PARSE]
    assert status.value == "failed"
    assert detail is not None
    assert "25 findings" in detail


@pytest.mark.slow
@pytest.mark.parametrize("member", ['"a": 0, ' * 400_000, '"v": [' + "NaN, " * 400_000 + "0], "])
def test_400000_parse_problems_give_at_most_the_default_findings_limit(tmp_path: Path, member: str) -> None:
    path = tmp_path / "flood.json"
    path.write_text(small_document('"extensions": {' + member + '"b": 0}, '))
    measured = measured_verify([path])
    [document] = measured["result"]["documents"]
    assert len(document["findings"]) == Limits().max_findings
    [parse] = [stage for stage in document["stages"] if stage["name"] == "parse"]
    assert parse["status"] == "failed"
    assert f"{Limits().max_findings} findings" in parse["detail"]
    within_budget(measured, path.stat().st_size)


def _count_values(value: Any) -> int:
    """JSON values in a parsed document (every scalar, array and object; keys are not values)."""
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


# --- strict JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "pointer"),
    [
        ("NaN", "/extensions/v"),
        ("Infinity", "/extensions/v"),
        ("-Infinity", "/extensions/v"),
        ("1e400", "/extensions/v"),
        ("[1, 1" + "0" * 400 + "]", "/extensions/v/1"),  # an integer beyond binary64
        ("-" + "9" * 310, "/extensions/v"),
    ],
)
def test_non_finite_numbers_are_refused(tmp_path: Path, literal: str, pointer: str) -> None:
    path = tmp_path / "nan.json"
    path.write_text(small_document(f'"extensions": {{"v": {literal}}}, '))
    assert found(mibspec.verify(path, recompute=False)) == {("P103", pointer)}


def test_largest_finite_integer_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    largest = int(np.finfo(np.float64).max)  # 309 digits, finite
    path.write_text(small_document(f'"extensions": {{"v": {largest}}}, '))
    assert mibspec.verify(path, recompute=False).valid


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.json"
    path.write_text(small_document('"kind": "report", '))
    assert found(mibspec.verify(path, recompute=False)) == {("P102", "/kind")}


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"\xef\xbb\xbf", "P105"),
        (b"\xff\xfe", "P104"),
        (b"\xfe\xff", "P104"),
    ],
)
def test_byte_order_marks_are_refused(tmp_path: Path, raw: bytes, code: str) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(raw + small_document().encode("utf-8"))
    assert found(mibspec.verify(path, recompute=False)) == {(code, "")}


@pytest.mark.parametrize(
    "raw",
    [b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf", b"\x80"],
    ids=["bad-continuation", "encoded-surrogate", "five-bytes", "overlong-slash", "lone-continuation"],
)
def test_invalid_utf8_is_refused(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "utf8.json"
    path.write_bytes(small_document('"extensions": {"v": "#"}, ').encode().replace(b"#", raw))
    assert found(mibspec.verify(path, recompute=False)) == {("P104", "")}


@pytest.mark.parametrize(
    ("member", "pointer"),
    [
        ('"v": "\\ud800"', "/extensions/v"),
        ('"v": "\\udc00\\ud800"', "/extensions/v"),
        ('"v": ["ok", "x\\uDBFFy"]', "/extensions/v/1"),
        ('"\\ud83d": 1', "/extensions/\\ud83d"),
    ],
)
def test_unpaired_surrogates_are_refused(tmp_path: Path, member: str, pointer: str) -> None:
    path = tmp_path / "surrogate.json"
    path.write_text(small_document(f'"extensions": {{{member}}}, '))
    assert found(mibspec.verify(path, recompute=False)) == {("P109", pointer)}


def test_paired_and_escaped_surrogates_are_text(tmp_path: Path) -> None:
    path = tmp_path / "pair.json"
    path.write_text(small_document('"extensions": {"v": "\\ud83d\\ude00", "w": "\\\\ud800"}, '))
    assert mibspec.verify(path, recompute=False).valid


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "junit", "github"])
def test_every_output_format_survives_an_unpaired_surrogate_key(tmp_path: Path, output_format: str) -> None:
    path = tmp_path / "surrogate.json"
    path.write_text(small_document('"\\udfff": 1, '))
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", str(path), "--no-recompute", "-f", output_format],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8:strict"},
        timeout=300,
    )
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert b"P109" in done.stdout
    done.stdout.decode("utf-8")  # strict: the output is UTF-8


# --- artifacts: paths, links, sizes, hashes --------------------------------------------------


@pytest.mark.parametrize(
    "hostile",
    ["../report/circuit.json", "/etc/passwd", "a/../../circuit.json", "C:/circuit.json", "sub\\circuit.json"],
)
def test_artifact_paths_outside_the_folder_are_refused(report: Path, hostile: str) -> None:
    edit(report / "report.json", lambda doc: doc["artifacts"][0].update(path=hostile))
    assert ("A101", "/artifacts/0/path") in found(mibspec.verify(report / "report.json", recompute=False))


def test_a_file_link_out_of_the_folder_is_refused(report: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    shutil.copy(report / "circuit.json", outside)  # same bytes: size and hash would match
    (report / "circuit.json").unlink()
    os.symlink(os.path.relpath(outside, report), report / "circuit.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert found(result) == {("A101", "/artifacts/0/path")}
    assert not any(doc.path.endswith("circuit.json") for doc in result.documents)  # not followed


def test_a_directory_link_out_of_the_folder_is_refused(report: Path) -> None:
    os.symlink("/", report / "root")
    edit(report / "report.json", lambda doc: doc["artifacts"][1].update(path="root/etc/hostname"))
    assert ("A101", "/artifacts/1/path") in found(mibspec.verify(report / "report.json", recompute=False))


def test_a_link_loop_and_an_overlong_name_are_findings(report: Path) -> None:
    os.symlink("loop-b.json", report / "loop-a.json")
    os.symlink("loop-a.json", report / "loop-b.json")

    def change(doc: Any) -> None:
        doc["artifacts"][0]["path"] = "loop-a.json"
        doc["artifacts"][1]["path"] = "d" * 300 + ".json"

    edit(report / "report.json", change)
    result = mibspec.verify(report / "report.json", recompute=False)
    assert found(result) == {("A102", "/artifacts/0/path"), ("A102", "/artifacts/1/path")}


def test_hash_mismatch_is_refused_and_the_parent_says_so(report: Path) -> None:
    sidecar = report / "circuit.safetensors"
    data = bytearray(sidecar.read_bytes())
    data[-1] ^= 0xFF  # same size, different bytes
    sidecar.write_bytes(bytes(data))
    result = mibspec.verify(report / "report.json", recompute=False)
    assert found(result) == {("A103", "/artifacts/0/sha256"), ("A107", "/artifacts/0")}


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (lambda doc: doc["scores"].update(shape=[32490]), "/scores/shape"),
        (lambda doc: doc["membership"].update(shape=[32491, 20]), "/membership/shape"),
        (lambda doc: doc["scores"].update(dtype="float64"), "/scores/dtype"),
        (lambda doc: doc["membership"].update(dtype="uint8"), "/membership/dtype"),
    ],
)
def test_sidecar_shape_or_dtype_disagreeing_with_the_document(
    report: Path, change: Callable[[Any], None], pointer: str
) -> None:
    edit(report / "circuit.json", change)
    repin(report / "report.json", "circuit.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert ("A110", pointer) in found(result)
    assert not result.valid


def test_truncated_safetensors_is_refused(report: Path) -> None:
    sidecar = report / "circuit.safetensors"
    sidecar.write_bytes(sidecar.read_bytes()[:-1000])
    repin(report / "circuit.json", "circuit.safetensors")
    repin(report / "report.json", "circuit.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert ("A105", "/artifacts/0/media_type") in found(result)


@pytest.mark.slow
@pytest.mark.parametrize("claimed", [2**63, 2**60, 100 * MB + 1])
def test_safetensors_header_claiming_a_huge_size(report: Path, claimed: int) -> None:
    sidecar = report / "circuit.safetensors"
    data = sidecar.read_bytes()
    sidecar.write_bytes(struct.pack("<Q", claimed) + data[8:])
    repin(report / "circuit.json", "circuit.safetensors")
    repin(report / "report.json", "circuit.json")
    measured = measured_verify([report / "report.json"])
    assert ("A105", "/artifacts/0/media_type") in codes(measured["result"])
    within_budget(measured, sum(p.stat().st_size for p in report.iterdir()))


@pytest.mark.slow
def test_safetensors_tensor_claiming_a_terabyte(report: Path) -> None:
    header = b'{"scores": {"dtype": "F32", "shape": [250000000000], "data_offsets": [0, 1000000000000]}}'
    header += b" " * (-len(header) % 8)
    (report / "circuit.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 64)
    repin(report / "circuit.json", "circuit.safetensors")
    repin(report / "report.json", "circuit.json")
    measured = measured_verify([report / "report.json"])
    assert ("A105", "/artifacts/0/media_type") in codes(measured["result"])
    within_budget(measured, sum(p.stat().st_size for p in report.iterdir()))


def _safetensors(header: bytes, data: bytes = b"\0" * 8) -> bytes:
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


@pytest.mark.parametrize(
    "header",
    [
        b'{"t": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"t": {"dtype": ["F32"], "shape": [2], "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": {"a": 1}, "shape": [2], "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": "F32", "shape": [true, true], "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": "F32", "shape": [-2, -1], "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": {"a": 0, "b": 8}}}',
        b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}',
        b'{"t": {"dtype": "F32", "shape": "ab", "data_offsets": [0, 8]}}',
        b'{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, NaN]}}',
        b'{"t": "x"}',
        b"[1, 2]",
        b"\xff\xfe\x00",
    ],
)
def test_hostile_safetensors_headers_are_sidecar_errors(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(_safetensors(header))
    with pytest.raises(SidecarError):
        read_safetensors_header(path)


def _npy(header: str, data: bytes = b"\0" * 8) -> bytes:
    raw = header.encode("latin1")
    if len(raw) < 60_000:
        raw += b" " * (-(len(raw) + 11) % 64) + b"\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(raw)) + raw + data
    raw += b" " * (-(len(raw) + 13) % 64) + b"\n"
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(raw)) + raw + data


@pytest.mark.parametrize(
    "header",
    [
        "__import__('os').system('touch MARKER')",
        "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, -2), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': ('2',), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,), }",
        "{'descr': ['<f4'], 'fortran_order': False, 'shape': (2,), }",
        "(" * 5000 + ")" * 5000,
        "-" * 100_000 + "1",
        "[" * 100_000,
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
        # the format's three keys, each once, fortran_order a bool
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1, 2), }",
        "{'descr': '<f4', 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 1: 2}",
    ],
    ids=lambda h: h[:24] + (h[48:72] if len(h) > 48 else ""),
)
def test_hostile_npy_headers_are_sidecar_errors(tmp_path: Path, header: str) -> None:
    path = tmp_path / "x.npy"
    path.write_bytes(_npy(header))
    with pytest.raises(SidecarError):
        read_npy_header(path)
    assert not (tmp_path / "MARKER").exists()


def test_a_json_lines_row_nested_past_the_interpreter_is_a_finding(report: Path) -> None:
    with (report / "dataset.jsonl").open("ab") as handle:
        handle.write(b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")

    def change(doc: Any) -> None:
        doc["artifacts"][0]["rows"] += 1

    edit(report / "dataset.json", change)
    repin(report / "dataset.json", "dataset.jsonl")
    repin(report / "report.json", "dataset.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert ("A106", "/artifacts/0") in found(result)


def _append_row(report: Path, row: str) -> int:
    """Append ``row`` to the example's JSON Lines dataset, re-pinned; its line number."""
    rows = report / "dataset.jsonl"
    number = rows.read_bytes().count(b"\n") + 1
    with rows.open("ab") as handle:
        handle.write(row.encode("utf-8") + b"\n")

    def change(doc: Any) -> None:
        doc["artifacts"][0]["rows"] += 1

    edit(report / "dataset.json", change)
    repin(report / "dataset.json", "dataset.jsonl")
    repin(report / "report.json", "dataset.json")
    return number


@pytest.mark.parametrize(
    ("row", "at", "code"),
    [
        ('{"id": "x", "v": NaN}', "NaN", "P103"),
        ('{"id": "x", "v": [1, 1e400]}', "1e400", "P103"),
        ('{"id": "x", "v": 1, "v": 2}', '"v": 2', "P102"),
        ('{"id": "x", "v": "\\udc00"}', '"\\udc00"', "P109"),
    ],
)
def test_json_lines_rows_are_parsed_as_strictly_as_documents(
    report: Path, row: str, at: str, code: str
) -> None:
    number = _append_row(report, row)
    result = mibspec.verify(report / "report.json", recompute=False)
    [dataset] = [d for d in result.documents if d.path.endswith("dataset.json")]
    [finding] = [f for f in dataset.findings if f.code == "A106"]
    assert finding.pointer == "/artifacts/0"
    assert f"line {number}, column {row.index(at) + 1}:" in finding.message
    assert f"({code} at /v" in finding.message


def test_a_json_sidecar_is_parsed_as_strictly_as_a_document(report: Path) -> None:
    raw = b'{"a": 1, "a": 2}'
    (report / "notes.json").write_bytes(raw)
    entry = {
        "id": "notes",
        "role": "notes",
        "path": "notes.json",
        "media_type": "application/json",
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    edit(report / "report.json", lambda doc: doc["artifacts"].append(entry))
    result = mibspec.verify(report / "report.json", recompute=False)
    [document] = [d for d in result.documents if d.path.endswith("report.json")]
    index = json.loads((report / "report.json").read_text(encoding="utf-8"))["artifacts"].index(entry)
    [finding] = [f for f in document.findings if f.code == "A105"]
    assert finding.pointer == f"/artifacts/{index}/media_type"
    assert "line 1, column 10:" in finding.message
    assert "(P102 at /a)" in finding.message


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_non_finite_tensor_values_are_counted_from_their_bits(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=10_000).astype(np.float32)
    values[rng.choice(10_000, 37, replace=False)] = np.nan
    values[[5, 9_999]] = [np.inf, -np.inf]
    if dtype == "bfloat16":  # the upper half of a float32's bits
        raw = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    else:
        raw = values.astype(dtype).astype(f"<{np.dtype(dtype).str[1:]}").tobytes()
    path = tmp_path / "t.bin"
    path.write_bytes(raw)
    info = TensorInfo("t", dtype, (100, 100), 0, len(raw))
    bad = np.flatnonzero(~np.isfinite(values))  # the baseline: numpy on the float32 source
    assert non_finite_values(path, info) == (bad.size, int(bad[0]))


def test_integral_floats_where_integers_are_due_are_integers(report: Path) -> None:
    baseline = found(mibspec.verify(report / "report.json", recompute=False))

    def change(doc: Any) -> None:
        for entry in doc["circuits"]:
            entry["index"], entry["n_edges"] = float(entry["index"]), float(entry["n_edges"])

    edit(report / "circuit.json", change)
    repin(report / "report.json", "circuit.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert result.valid
    assert found(result) == baseline


def test_integers_beyond_int64_in_number_fields_are_numbers(report: Path) -> None:
    def change(doc: Any) -> None:
        assert doc["settings"]["ranking"]["cpr"] == doc["claims"]["curves"][0]["ranking"]
        assert doc["settings"]["ranking"]["cmd"] != doc["claims"]["curves"][0]["ranking"]
        doc["claims"]["curves"][0]["points"][3]["faithfulness"] = 2**64

    edit(report / "report.json", change)
    result = mibspec.verify(report / "report.json", recompute=False)
    # The CPR curve no longer adds up to the claimed CPR; CMD comes from the other curve.
    assert found(result) == {("C101", "/claims/cpr/value")}


def test_edge_total_closed_form_equals_the_reference_universe() -> None:
    from mibspec.metrics.graph import GraphConfig, GraphUniverse
    from mibspec.validator.rules.circuit_document import edge_total

    for layers in range(1, 7):
        for heads in range(1, 6):
            for parallel in (False, True):
                graph = {"n_layers": layers, "n_heads": heads, "parallel_attn_mlp": parallel}
                universe = GraphUniverse(GraphConfig(layers, heads, parallel))
                assert edge_total(graph) == int(universe.edge_mask.sum())
    assert edge_total({"n_layers": 12, "n_heads": 12}) == 32_491  # metrics/graph.md, MG-7 table


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "junit", "github"])
def test_a_folder_name_that_is_not_utf8_gives_utf8_output(tmp_path: Path, output_format: str) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"r\xff\xfe")
    shutil.copytree(os.fsencode(EXAMPLE), folder)
    report = Path(os.fsdecode(folder)) / "report.json"
    edit(report, lambda doc: doc.update(unexpected=1))  # a finding, so every format names the file
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "verify",
            os.fsdecode(tmp_path),
            "--no-recompute",
            "-f",
            output_format,
        ],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8:strict"},
        timeout=300,
    )
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    output = done.stdout.decode("utf-8")  # strict: the output is UTF-8
    assert "r\ufffd\ufffd" in output
    assert "S112" in output


# --- text from documents in the outputs for people and CI logs ---------------------------------

#: Cursor movement, line erasing, an OSC 8 link, forged verdict and workflow-command lines, a
#: C1 CSI, DEL, a right-to-left override, a line separator and rich markup, in one name.
HOSTILE = (
    "\x1b[2K\rPASS 1 document(s)\n::warning::forged\u2028\x85\x9b31m\x7f\u202e"
    "\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07[/]<script>alert(1)</script>"
)
#: HOSTILE as every output for people shows it (written out by hand).
HOSTILE_SHOWN = (
    "\\x1b[2K\\x0dPASS 1 document(s)\\x0a::warning::forged\\u2028\\x85\\x9b31m\\x7f\\u202e"
    "\\x1b]8;;http://evil.example/\\x07link\\x1b]8;;\\x07[/]<script>alert(1)</script>"
)
#: The same kinds in a folder name (no "/"), with markup that opens a style.
HOSTILE_FOLDER = "d\x1b[2K\r::warning::forged\n[red]PASS\u202e\x1b]8;;x\x07<script>"
HOSTILE_FOLDER_SHOWN = "d\\x1b[2K\\x0d::warning::forged\\x0a[red]PASS\\u202e\\x1b]8;;x\\x07<script>"


def _hidden(char: str) -> bool:
    """Characters no output for people may carry raw, from the Unicode database, not the code."""
    import unicodedata

    return (
        unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs")
        or unicodedata.bidirectional(char) in ("LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")
        or char in "\u200e\u200f\u061c\ufffe\uffff"  # the bidi marks; the non-characters XML forbids
    )


@pytest.mark.slow
def test_visible_escapes_exactly_the_hidden_characters() -> None:
    from mibspec.core.display import visible

    for code in range(0x110000):
        char = chr(code)
        if _hidden(char):
            assert visible(char) == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"), hex(code)
        else:
            assert visible(char) == char, hex(code)


@pytest.fixture
def hostile_reports(tmp_path: Path) -> list[Path]:
    """A CAUSAL-BENCH report naming a method HOSTILE (it passes, with a claimed-vs-recomputed
    table showing the name) and a circuit report in a folder named HOSTILE_FOLDER whose
    report has a property named HOSTILE (S112)."""
    bench = tmp_path / "bench"
    shutil.copytree(REPO / "examples" / "causal_bench", bench)

    def rename(doc: Any) -> None:
        doc["claims"]["methods"][0]["name"] = HOSTILE
        doc["claims"]["jaccard"]["methods"][0] = HOSTILE

    edit(bench / "report.json", rename)
    circuit = tmp_path / HOSTILE_FOLDER
    shutil.copytree(EXAMPLE, circuit)
    edit(circuit / "report.json", lambda doc: doc.update({HOSTILE: 1}))
    return [bench, circuit]


def _verify_cli(paths: list[Path], *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", *map(str, paths), *args],
        capture_output=True,
        check=False,
        cwd=paths[0].parent,
        env={
            **{k: v for k, v in os.environ.items() if k != "COLUMNS"},  # the table at full width
            "NO_COLOR": "1",
            "PYTHONIOENCODING": "utf-8:strict",
            **(env or {}),
        },
        timeout=600,
    )
    assert done.returncode == 1, done.stderr.decode(errors="replace")  # S112, nothing else
    assert done.stderr == b"", done.stderr.decode(errors="replace")
    return done.stdout.decode("utf-8")


def _raw_hidden(text: str) -> set[str]:
    return {char for char in text if _hidden(char) and char != "\n"}


@pytest.mark.slow
def test_text_output_shows_hostile_names_and_cannot_be_forged(hostile_reports: list[Path]) -> None:
    out = _verify_cli(hostile_reports)
    assert _raw_hidden(out) == set()
    lines = out.splitlines()
    assert lines[-1].startswith("FAIL 2 document(s)")
    assert [line for line in lines if line.startswith(("PASS", "::"))] == []
    # Shown, not interpreted: escapes for the controls, the markup as written.
    assert HOSTILE_SHOWN in out
    assert HOSTILE_FOLDER_SHOWN in out
    # Every quantity naming the method is a row of the table, with the name shown.
    result = json.loads(_verify_cli(hostile_reports, "--format", "json"))
    quantities = [c["quantity"] for doc in result["documents"] for c in doc.get("recomputed", [])]
    shown = [x for x in lines if HOSTILE_SHOWN in x and "S112" not in x]
    assert sum(HOSTILE in q for q in quantities) == len(shown) > 0


def test_github_output_is_one_command_per_finding(hostile_reports: list[Path]) -> None:
    out = _verify_cli(hostile_reports, "--format", "github")
    assert _raw_hidden(out) == set()
    *commands, summary = out.splitlines()
    assert summary.startswith("FAIL 2 document(s)")
    assert len(commands) == 1
    assert commands[0].startswith("::error file=")
    assert "\\x1b[2K\\x0dPASS 1 document(s)\\x0a::warning::forged\\u2028" in commands[0]


def test_junit_output_is_xml_and_shows_hostile_names(hostile_reports: list[Path]) -> None:
    import xml.etree.ElementTree as ET

    out = _verify_cli(hostile_reports, "--format", "junit")
    assert _raw_hidden(out) == set()
    root = ET.fromstring(out.encode("utf-8"))
    [failure] = root.iter("failure")
    assert "(at /\\x1b[2K\\x0dPASS 1 document(s)\\x0a::warning::forged\\u2028" in (failure.text or "")
    assert "<script>" in failure.get("message", "")  # read back from &lt;script&gt;
    names = {suite.get("name", "") for suite in root.iter("testsuite")}
    assert any(HOSTILE_FOLDER_SHOWN in name for name in names)


def test_json_output_keeps_hostile_names_as_data(hostile_reports: list[Path]) -> None:
    result = json.loads(_verify_cli(hostile_reports, "--format", "json"))
    pointers = {f["pointer"] for doc in result["documents"] for f in doc["findings"]}
    assert pointers == {"/" + HOSTILE.replace("~", "~0").replace("/", "~1")}
    quantities = [c["quantity"] for doc in result["documents"] for c in doc.get("recomputed", [])]
    assert sum(f"Jaccard({HOSTILE}, " in q for q in quantities) == 4  # a row of the 4 × 4 matrix
    assert any(HOSTILE_FOLDER in doc["path"] for doc in result["documents"])


def test_progress_descriptions_are_shown_not_read_as_markup(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from mibspec.verification.progress import TerminalProgress

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws the bar as on a terminal
    with TerminalProgress(enabled=True) as progress:
        progress.start(f"threshold sensitivity of {HOSTILE}", 2)
        progress.advance(2)
    drawn = stream.getvalue()
    assert "threshold sensitivity of \\x1b[2K\\x0dPASS 1 document(s)\\x0a::warning" in drawn
    # Only rich's own escape sequences and carriage returns remain raw.
    assert _raw_hidden(drawn) <= {"\x1b", "\r"}
    assert "\x1b]8;;http" not in drawn
    assert "\x1b[2K\rPASS" not in drawn


def test_usage_errors_show_hostile_paths(tmp_path: Path) -> None:
    missing = tmp_path / HOSTILE_FOLDER / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", str(missing)],
        capture_output=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    assert done.returncode == 2
    err = done.stderr.decode("utf-8")
    assert _raw_hidden(err) == set()
    assert HOSTILE_FOLDER_SHOWN in err


def _hostile_result() -> Any:
    """A result whose every text field (path, kind, message, pointer, hint, data, stage
    detail, referencing path, compared quantity) holds HOSTILE raw."""
    from mibspec.validator import DocumentResult, Finding, Severity, Stage, StageStatus, VerificationResult
    from mibspec.validator._recompute_stage import Comparison

    finding = Finding(
        code="C101",
        severity=Severity.ERROR,
        message=f"claimed {HOSTILE}",
        pointer=f"/claims/{HOSTILE}",
        line=1,
        column=1,
        hint=HOSTILE,
        data={"claimed": HOSTILE, "recomputed": 1.0},
    )
    doc = DocumentResult(path=HOSTILE, kind=HOSTILE, findings=[finding], referenced_by=HOSTILE)
    doc.set_stage(Stage.PARSE, StageStatus.PASSED)
    doc.set_stage(Stage.SCHEMA, StageStatus.PASSED)
    doc.set_stage(Stage.RULES, StageStatus.FAILED, HOSTILE)
    doc.set_stage(Stage.RECOMPUTE, StageStatus.SKIPPED, HOSTILE)
    doc.comparisons = [Comparison(f"/claims/{HOSTILE}", HOSTILE, 0.5, 0.25, 1e-6, 0.0)]
    return VerificationResult(documents=[doc])


@pytest.mark.parametrize("output_format", ["text", "github", "junit", "sarif", "json"])
def test_no_output_format_carries_a_hidden_character_raw(output_format: str) -> None:
    import io

    from mibspec.verification.output_formats import REPORTERS

    out = io.StringIO()
    REPORTERS[output_format](_hostile_result(), out)
    text = out.getvalue()
    if output_format == "json":  # JSON escapes what it must; the data stays the document's
        assert json.loads(text)["documents"][0]["findings"][0]["hint"] == HOSTILE
        return
    if output_format == "sarif":
        [result] = json.loads(text)["runs"][0]["results"]
        assert result["message"]["text"] == f"claimed {HOSTILE_SHOWN}"
        return
    assert _raw_hidden(text) == set()
    assert not any(line.startswith(("PASS", "::warning")) for line in text.splitlines())
    if output_format == "junit":
        import xml.etree.ElementTree as ET

        [failure] = ET.fromstring(text.encode("utf-8")).iter("failure")
        assert failure.get("message") == f"claimed {HOSTILE_SHOWN}"
        return
    assert f"claimed {HOSTILE_SHOWN}" in text
    if output_format == "text":
        # The table's row: the name as text, not markup, and the numbers in full.
        [row] = [line for line in text.splitlines() if "differs" in line]
        assert row.split()[-5:] == ["0.5", "0.25", "2.50e-01", "1.0e-06", "differs"]
        assert row.strip().startswith(HOSTILE_SHOWN)


@pytest.mark.slow
def test_verify_receipt_shows_hostile_file_names(report: Path) -> None:
    receipt = report / "receipt.json"
    run = [sys.executable, "-m", "mibspec"]
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [*run, "verify", str(report / "report.json"), "--no-recompute", "--receipt", str(receipt)],
        capture_output=True,
        check=False,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    data = json.loads(receipt.read_text(encoding="utf-8"))
    data["files"][0]["path"] = HOSTILE_FOLDER  # a file of that name is missing
    receipt.write_text(json.dumps(data), encoding="utf-8")
    done = subprocess.run([*run, "verify-receipt", str(receipt)], capture_output=True, check=False, env=env)
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    out = done.stdout.decode("utf-8")
    assert _raw_hidden(out) == set()
    assert out.startswith(f"missing  {HOSTILE_FOLDER_SHOWN} (")
    assert [line for line in out.splitlines() if line.startswith(("PASS", "::"))] == []


def test_conformance_junit_shows_hostile_case_names() -> None:
    import xml.etree.ElementTree as ET

    from mibspec.spec_tools.conformance_run import CaseResult, SuiteRun, to_junit

    case = CaseResult(f"circuit/invalid/{HOSTILE_FOLDER}", Path("x"), "failed", 1, message=HOSTILE)
    text = to_junit(SuiteRun(Path("suite"), "mibspec", 0, 1, [case]))
    assert _raw_hidden(text) == set()
    [testcase] = ET.fromstring(text.encode("utf-8")).iter("testcase")
    assert testcase.get("name") == HOSTILE_FOLDER_SHOWN
    [failure] = testcase.iter("failure")
    assert failure.get("message") == HOSTILE_SHOWN


def test_migrate_shows_hostile_keys_of_an_unreadable_document(tmp_path: Path) -> None:
    source = tmp_path / "doc.json"
    source.write_text("{" + json.dumps(HOSTILE) + ": NaN}", encoding="utf-8")  # P-stage finding
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "migrate", str(source), "-o", str(tmp_path / "out.json")],
        capture_output=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    assert done.returncode == 1, done.stderr.decode(errors="replace")
    out = done.stdout.decode("utf-8")
    assert _raw_hidden(out) == set()
    assert f"at /{HOSTILE_SHOWN.replace('/', '~1')}" in out


# --- tensor limits, safetensors layout, header bounds -------------------------------------------


def _layout(entries: dict[str, tuple[list[int], list[int]]], data_bytes: int) -> bytes:
    """A float32 safetensors file: name → (shape, data_offsets), then ``data_bytes`` zero bytes."""
    header = {
        name: {"dtype": "F32", "shape": shape, "data_offsets": offsets}
        for name, (shape, offsets) in entries.items()
    }
    return _safetensors(json.dumps(header).encode(), b"\0" * data_bytes)


LAYOUTS = {
    "one": ({"a": ([2], [0, 8])}, 8),
    "two-in-name-order": ({"a": ([2], [0, 8]), "b": ([1], [8, 12])}, 12),
    "two-in-reverse-order": ({"a": ([2], [4, 12]), "b": ([1], [0, 4])}, 12),
    "empty-tensors-at-one-offset": ({"a": ([0], [0, 0]), "b": ([0], [0, 0])}, 0),
    "empty-tensor-after-the-last": ({"a": ([2], [0, 8]), "b": ([0], [8, 8])}, 8),
    "overlap": ({"a": ([2], [0, 8]), "b": ([2], [0, 8])}, 8),
    "partial-overlap": ({"a": ([2], [0, 8]), "b": ([2], [4, 12])}, 12),
    "empty-tensor-inside-another": ({"a": ([2], [0, 8]), "b": ([0], [4, 4])}, 8),
    "gap-before-the-first": ({"a": ([2], [4, 12])}, 12),
    "gap-between": ({"a": ([1], [0, 4]), "b": ([1], [8, 12])}, 12),
    "trailing-byte": ({"a": ([2], [0, 8])}, 9),
    "bytes-and-no-tensor": ({}, 1),
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_safetensors_layout_is_judged_as_the_safetensors_library_does(tmp_path: Path, name: str) -> None:
    """The library is the baseline: a file is accepted exactly when it loads it."""
    library = pytest.importorskip("safetensors.numpy")
    data = _layout(*LAYOUTS[name])
    try:
        library.load(data)
        loads = True
    except Exception:  # the library's SafetensorError, whatever its module
        loads = False
    path = tmp_path / "x.safetensors"
    path.write_bytes(data)
    try:
        read_safetensors_header(path)
        accepted = True
    except SidecarError:
        accepted = False
    assert accepted is loads


@pytest.mark.parametrize(
    "header",
    [
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        b'{"__metadata__": {"format": 1}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}',
        b'{"__metadata__": ["pt"], "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}',
    ],
    ids=["repeated-name", "metadata-not-a-string", "metadata-not-an-object"],
)
def test_ambiguous_safetensors_headers_are_refused(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(_safetensors(header))
    with pytest.raises(SidecarError):
        read_safetensors_header(path)


def _traced_peak(read: Callable[[], Any]) -> int:
    """Peak of the Python allocations ``read()`` makes (it must raise SidecarError)."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(SidecarError):
            read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dims", [6_000_000, 30_000_000])
def test_a_header_of_millions_of_dimensions_is_refused_before_parsing(tmp_path: Path, dims: int) -> None:
    """A 12 MB header is read (under the length limit) but not parsed (over the token
    limit): its raw bytes are all the memory it takes. A 60 MB one is not even read."""
    from mibspec.core.sidecars import MAX_SAFETENSORS_HEADER_BYTES, MAX_SAFETENSORS_HEADER_TOKENS

    header = b'{"t": {"dtype": "F32", "shape": [' + b"1," * (dims - 1) + b'1], "data_offsets": [0, 4]}}'
    assert dims > MAX_SAFETENSORS_HEADER_TOKENS
    path = tmp_path / "x.safetensors"
    path.write_bytes(_safetensors(header, b"\0" * 4))
    del header
    size = path.stat().st_size
    read_at_all = size - 12 <= MAX_SAFETENSORS_HEADER_BYTES
    assert read_at_all is (dims == 6_000_000)
    peak = _traced_peak(lambda: read_safetensors_header(path))
    assert peak <= (size if read_at_all else 0) + MB, (peak, size)


@pytest.mark.slow
@pytest.mark.parametrize("item", [b"[]", b"{}", b"1.5", b'"ab"'])
def test_a_header_at_the_token_limit_parses_within_its_memory_bound(tmp_path: Path, item: bytes) -> None:
    """The documented bound: twice the header's bytes plus 100 bytes per token."""
    from mibspec.core.sidecars import MAX_SAFETENSORS_HEADER_TOKENS

    per_item = sum(item.count(c) for c in b'[{,:"') + 1  # with its comma
    count = (MAX_SAFETENSORS_HEADER_TOKENS - 20) // per_item
    header = b'{"t": [' + b",".join([item] * count) + b"]}"
    path = tmp_path / "x.safetensors"
    path.write_bytes(_safetensors(header))
    peak = _traced_peak(lambda: read_safetensors_header(path))  # parsed, then a malformed entry
    assert peak <= 2 * len(header) + 100 * MAX_SAFETENSORS_HEADER_TOKENS, (peak, len(header))


def test_an_npy_header_of_400000_dimensions_is_refused_unread(tmp_path: Path) -> None:
    from mibspec.core.sidecars import MAX_NPY_HEADER_BYTES

    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 400_000 + "), }"
    path = tmp_path / "x.npy"
    path.write_bytes(_npy(header, b"\0" * 4))
    assert len(header) > MAX_NPY_HEADER_BYTES
    assert _traced_peak(lambda: read_npy_header(path)) <= MAX_NPY_HEADER_BYTES + MB


def test_an_npy_header_within_its_length_but_with_65_dimensions_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    path.write_bytes(
        _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 65 + "), }", b"\0" * 4)
    )
    with pytest.raises(SidecarError, match="65 dimensions"):
        read_npy_header(path)


SHAPES = st.lists(
    st.one_of(st.integers(0, 4), st.integers(0, 2**40), st.sampled_from([0, 1, 10**20, 2**63])),
    max_size=70,
)


@settings(max_examples=300, deadline=None)
@given(shape=SHAPES, itemsize=st.sampled_from([1, 2, 4, 8]))
def test_tensor_limits_admit_only_shapes_numpy_can_hold(shape: list[int], itemsize: int) -> None:
    """Within the limits, numpy makes the shape (a broadcast view: nothing is allocated);
    the limits are the documented ones, counted here independently."""
    from mibspec.core.sidecars import (
        MAX_TENSOR_BYTES,
        MAX_TENSOR_DIMS,
        MAX_TENSOR_ELEMENTS,
        shape_problem,
    )

    elements = math.prod(max(dim, 1) for dim in shape)
    within = len(shape) <= MAX_TENSOR_DIMS and elements <= MAX_TENSOR_ELEMENTS
    within = within and elements * itemsize <= MAX_TENSOR_BYTES
    assert (shape_problem(shape, itemsize) is None) is within
    if within:
        view = np.broadcast_to(np.zeros((), dtype=f"u{itemsize}"), tuple(shape))
        assert view.shape == tuple(shape)


@pytest.mark.parametrize(
    "shape",
    [[0, 10**20], [0] + [1] * 64, [20, 2**40, 0]],
    ids=["a-dimension-of-10^20", "65-dimensions", "a-dimension-of-2^40"],
)
def test_a_declared_shape_beyond_the_limits_is_a_finding_not_a_crash(report: Path, shape: list[int]) -> None:
    """The membership tensor is declared, and stored, with a shape numpy cannot make."""
    header = {
        "membership": {"dtype": "BOOL", "shape": shape, "data_offsets": [0, 0]},
        "scores": {"dtype": "F32", "shape": [32491], "data_offsets": [0, 4 * 32491]},
    }
    (report / "circuit.safetensors").write_bytes(
        _safetensors(json.dumps(header).encode(), b"\0" * (4 * 32491))
    )
    edit(report / "circuit.json", lambda doc: doc["membership"].update(shape=shape))
    repin(report / "circuit.json", "circuit.safetensors")
    repin(report / "report.json", "circuit.json")
    result = mibspec.verify(report / "report.json", recompute=False)
    assert result.internal_errors == []
    assert found(result) == {
        ("A112", "/membership/shape"),  # the declared shape, before the file is read
        ("A105", "/artifacts/0/media_type"),  # the sidecar's header holds it too
        ("A107", "/artifacts/0"),
    }
    circuit = next(doc for doc in result.documents if doc.path.endswith("circuit.json"))
    [a112] = [f for f in circuit.findings if f.code == "A112"]
    rows = (report / "circuit.json").read_text(encoding="utf-8").splitlines()
    start = next(n for n, row in enumerate(rows) if '"membership"' in row)
    at = next(n for n in range(start, len(rows)) if '"shape"' in rows[n])  # edit() indents by 2
    assert (a112.line, a112.column) == (at + 1, rows[at].index("[") + 1)


def test_a_shape_beyond_the_limits_exits_1_with_the_finding(mibspec_cli: Any, report: Path) -> None:
    edit(report / "circuit.json", lambda doc: doc["scores"].update(shape=[0, 10**20]))
    repin(report / "report.json", "circuit.json")
    done = mibspec_cli("verify", str(report / "report.json"), "--no-recompute", "-f", "json")
    assert done.returncode == 1, done.stderr
    output = json.loads(done.stdout)
    assert ("A112", "/scores/shape") in codes(output)


# --- one document's internal error never takes down the others -----------------------------------

#: Installed in every process of a run (the parent and its workers) through ``sitecustomize``:
#: the first rule raises on documents whose path holds "boom", as a defect of mibspec would.
_INJECTED_DEFECT = """
import dataclasses
from mibspec.validator import rules

first = rules.RULES[0]

def boom(doc, ctx, _fn=first.fn):
    if "boom" in str(ctx.path):
        raise ValueError("injected defect")
    return _fn(doc, ctx)

rules.RULES[0] = dataclasses.replace(first, fn=boom)
"""


def test_a_rule_that_raises_fails_its_document_only(report: Path) -> None:
    from mibspec.validator import Stage, StageStatus, rules

    index = next(i for i, r in enumerate(rules.RULES) if r.name == "circuit-membership")

    def boom(doc: Any, ctx: Any) -> Any:
        raise ValueError("injected defect")

    # In place: the registry list is shared by every module that imported it.
    original = rules.RULES[index]
    rules.RULES[index] = dataclasses.replace(original, fn=boom)
    try:
        result = mibspec.verify(report / "report.json", recompute=False)
    finally:
        rules.RULES[index] = original
    by_name = {Path(doc.path).name: doc for doc in result.documents}
    assert set(by_name) == {"report.json", "circuit.json", "dataset.json"}
    circuit = by_name["circuit.json"]
    assert result.internal_errors == [circuit]
    status, detail = circuit.stages[Stage.RULES]
    assert status is StageStatus.FAILED
    assert detail is not None
    assert detail.startswith("internal error: ")
    assert "injected defect" in detail
    assert circuit.stages[Stage.RECOMPUTE][0] is StageStatus.NOT_RUN
    assert not circuit.valid
    assert not result.valid
    assert by_name["dataset.json"].valid


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_batch_with_an_internal_error_reports_every_other_document(
    tmp_path: Path, jobs: str, injected_cli: Any
) -> None:
    root = tmp_path / "results"
    for name in ("a", "boom", "c"):
        shutil.copytree(EXAMPLE, root / name)
    done = injected_cli(_INJECTED_DEFECT, "verify", str(root), "--no-recompute", "-j", jobs, "-f", "json")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    documents = {doc["path"]: doc for doc in json.loads(done.stdout)["documents"]}
    failed = str(root / "boom" / "report.json")
    others = {
        str(root / name / file)
        for name in ("a", "c")
        for file in ("report.json", "circuit.json", "dataset.json")
    }
    assert set(documents) == others | {failed}
    assert all(documents[path]["valid"] for path in others)
    stages = {stage["name"]: stage for stage in documents[failed]["stages"]}
    assert stages["rules"]["status"] == "failed"
    assert "injected defect" in stages["rules"]["detail"]
    assert not documents[failed]["valid"]
    assert f"{failed}: internal error" in done.stderr


def test_a_batch_with_an_over_limit_shape_reports_every_document(tmp_path: Path) -> None:
    root = tmp_path / "results"
    for name in ("a", "b", "c"):
        shutil.copytree(EXAMPLE, root / name)
    edit(root / "b" / "circuit.json", lambda doc: doc["membership"].update(shape=[0] + [1] * 64))
    repin(root / "b" / "report.json", "circuit.json")
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "verify", str(root), "--no-recompute", "-j", "2", "-f", "json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    output = json.loads(done.stdout)
    assert len(output["documents"]) == 9
    invalid = {doc["path"] for doc in output["documents"] if not doc["valid"]}
    assert invalid == {str(root / "b" / "report.json"), str(root / "b" / "circuit.json")}
    assert ("A112", "/membership/shape") in codes(output)


@pytest.mark.parametrize("recompute", [False, True])
def test_a_report_that_is_a_device_or_a_fifo_is_a_usage_error_at_once(
    tmp_path: Path, recompute: bool
) -> None:
    """Neither is opened: a FIFO would block and /dev/zero never ends. With recomputation the
    grouping of reports reads nothing either."""
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name in ("fifo.json", "zero.json"):
        args = [sys.executable, "-m", "mibspec", "verify", str(tmp_path / name)]
        done = subprocess.run(
            args if recompute else [*args, "--no-recompute"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().endswith(f"{name}: not a regular file (a device, FIFO or socket)")
