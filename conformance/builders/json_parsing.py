"""Cases of the pseudo-kind ``json``: the bytes themselves (parsing, limits, top-level value)."""

from __future__ import annotations

from mibspec.reference_impl.scoring.folder import json_bytes

from ._common import Folder, case, save
from ._inputs import arithmetic_causal_model


def _model_text() -> str:
    return json_bytes(arithmetic_causal_model()).decode("utf-8")


@case("json", "P-5", "Nesting exactly at the configured depth limit (8) is accepted.", max_depth=8)
def depth_at_limit(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    # root, extensions, four nested objects, two nested arrays: 8 levels in all
    doc["extensions"] = {"org.example:tree": {"a": {"b": {"c": {"d": [[1, 2]]}}}}}
    save(folder, doc)


@case("json", "P-5", "A file exactly as large as the configured byte limit is accepted.", max_bytes=2048)
def size_at_limit(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    text = json_bytes(doc)
    # Pad the description so the file is exactly max_bytes long.
    doc["description"] += " " * (2048 - len(text))
    save(folder, doc)
    assert (folder.root / "document.json").stat().st_size == 2048


@case("json", "P-1 P-3 P-4", "Escapes, non-ASCII UTF-8 text and extreme finite numbers are well-formed JSON.")
def unicode_and_extreme_numbers(folder: Folder) -> None:
    text = _model_text()
    extra = (
        '"extensions": {"org.example:text": '
        '"Zürich \\u00e9t\\u00e9 \\ud83d\\ude00 — 名前 \\"quoted\\" \\\\ \\/",\n'
        '    "org.example:numbers": [-0.0, 1e308, -1.7976931348623157e308, 5e-324, '
        '123456789012345678901234567890, 1E+2, 0.000001]},\n  "spec_version"'
    )
    folder.write("document.json", text.replace('"spec_version"', extra, 1).encode("utf-8"))


@case("json", "P-1", "A trailing comma after the last member of an object.", ("P101", ""))
def trailing_comma(folder: Folder) -> None:
    text = _model_text().rstrip()
    folder.write("document.json", (text[:-1].rstrip() + ",\n}\n").encode())


@case("json", "P-1", "The file ends in the middle of an object.", ("P101", ""))
def truncated_document(folder: Folder) -> None:
    text = _model_text()
    folder.write("document.json", text[: len(text) // 2].encode())


@case("json", "P-1", "An empty file is not a JSON text.", ("P101", ""))
def empty_file(folder: Folder) -> None:
    folder.write("document.json", b"")


@case("json", "P-1", "Single-quoted strings are not JSON.", ("P101", ""))
def single_quoted_strings(folder: Folder) -> None:
    folder.write("document.json", b"{'spec_version': '1.0', 'kind': 'causal_model'}\n")


@case("json", "P-2", 'A nested object repeats the key "name".', ("P102", "/variables/0/name"))
def duplicate_key(folder: Folder) -> None:
    text = _model_text().replace('"name": "operand_1"', '"name": "operand_1",\n      "name": "operand_2"', 1)
    folder.write("document.json", text.encode())


@case("json", "P-3", "A NaN literal in a numeric field.", ("P103", "/parameters/operand_max"))
def nan_literal(folder: Folder) -> None:
    folder.write("document.json", _model_text().replace('"operand_max": 99', '"operand_max": NaN').encode())


@case("json", "P-3", "A -Infinity literal.", ("P103", "/parameters/operand_max"))
def negative_infinity_literal(folder: Folder) -> None:
    folder.write(
        "document.json", _model_text().replace('"operand_max": 99', '"operand_max": -Infinity').encode()
    )


@case(
    "json",
    "P-3",
    "1e400 is well-formed JSON but overflows to infinity in binary64.",
    ("P103", "/parameters/operand_max"),
)
def number_overflows_to_infinity(folder: Folder) -> None:
    folder.write("document.json", _model_text().replace('"operand_max": 99', '"operand_max": 1e400').encode())


@case("json", "P-4", "A string holds a byte sequence that is not UTF-8 (Latin-1 encoded text).", ("P104", ""))
def invalid_utf8(folder: Folder) -> None:
    text = (
        _model_text().replace("Addition of two operands", "Zürich addition of two operands").encode("utf-8")
    )
    folder.write("document.json", text.replace("ü".encode(), "ü".encode("latin-1")))


@case("json", "P-4", "The file starts with a UTF-8 byte-order mark.", ("P105", ""))
def byte_order_mark(folder: Folder) -> None:
    folder.write("document.json", b"\xef\xbb\xbf" + _model_text().encode())


@case("json", "P-5", "Arrays nested 70 deep, over the default depth limit of 64.", ("P106", ""))
def nesting_too_deep(folder: Folder) -> None:
    nested = "[" * 70 + "]" * 70
    folder.write(
        "document.json",
        _model_text().replace('"parameters": {', f'"parameters": {{"deep": {nested},', 1).encode(),
    )


@case(
    "json",
    "P-5",
    "A conformant 3 kB document checked with a byte limit of 1000: refused unread.",
    ("P107", ""),
    max_bytes=1000,
)
def file_too_large(folder: Folder) -> None:
    doc = arithmetic_causal_model()
    templates = [
        "Q: What is {operand_1} plus {operand_2}? A:",
        "What is the sum of {operand_1} and {operand_2}?",
    ]
    doc["extensions"] = {"org.example:prompts": [f"{t} (variant {i})" for i in range(20) for t in templates]}
    save(folder, doc)
    assert 2500 < (folder.root / "document.json").stat().st_size < 4000


@case("json", "P-6", "The top-level value is an array of documents, not a document.", ("P108", ""))
def top_level_array(folder: Folder) -> None:
    folder.write("document.json", b"[" + _model_text().encode().rstrip() + b"]\n")


@case("json", "P-6", "The top-level value is a string.", ("P108", ""))
def top_level_string(folder: Folder) -> None:
    folder.write("document.json", b'"spec_version 1.0"\n')


@case(
    "json",
    "P-4",
    "A description escapes the high half of a surrogate pair without the low half (\\ud83d alone).",
    ("P109", "/description"),
)
def unpaired_surrogate(folder: Folder) -> None:
    text = _model_text()
    assert '"description": "' in text
    folder.write("document.json", text.replace('"description": "', '"description": "\\ud83d ', 1).encode())


@case(
    "json",
    "P-5",
    "An extension array of 1,000,000 zeros: with the document's other values, over the default "
    "limit of 1,000,000 JSON values, refused before parsing.",
    ("P110", ""),
)
def too_many_values(folder: Folder) -> None:
    zeros = ",".join("0" * 1_000_000)
    text = _model_text().replace(
        '"spec_version"', f'"extensions": {{"org.example:zeros": [{zeros}]}},\n  "spec_version"', 1
    )
    folder.write("document.json", text.encode())
