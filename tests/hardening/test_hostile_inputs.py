"""Hostile inputs: each is refused with a code and a pointer, within bounded memory.

Memory is measured in a fresh process (``conftest.measured_verify``): the peak of traced
Python allocations and the growth of the peak resident set size during verification must
both stay within 2× the input's size + 200 MB. Expected codes and pointers are written
out by hand from the spec (SPEC.md §2, §3), not taken from the validator.
"""

from __future__ import annotations

import hashlib
import json
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


@pytest.mark.parametrize("element", ["0", "{}", "[]"])
def test_ten_million_element_array_is_refused_before_parsing(tmp_path: Path, element: str) -> None:
    path = tmp_path / "wide.json"
    path.write_text(small_document('"extensions": {"x": [' + ",".join([element] * 10_000_000) + "]}, "))
    measured = measured_verify([path], limits={"max_bytes": 64 * MB})
    assert codes(measured["result"]) == {("P110", "")}
    within_budget(measured, path.stat().st_size)


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
    ],
    ids=lambda h: h[:24],
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
    from mibspec.reference_impl.graph import GraphConfig, GraphUniverse
    from mibspec.validator.rules.circuit_document import _edge_total

    for layers in range(1, 7):
        for heads in range(1, 6):
            for parallel in (False, True):
                graph = {"n_layers": layers, "n_heads": heads, "parallel_attn_mlp": parallel}
                universe = GraphUniverse(GraphConfig(layers, heads, parallel))
                assert _edge_total(graph) == int(universe.edge_mask.sum())
    assert _edge_total({"n_layers": 12, "n_heads": 12}) == 32_491  # metrics/graph.md, MG-7 table


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
