"""Every ``pattern`` of every schema is read as ECMA-262 reads it, not as Python's ``re`` does.

Independent anchor: an ECMA-262 engine, ``regress`` (the Rust ``regress`` crate, which
check-jsonschema uses for ECMA regexes) or, where it is missing, Node's ``RegExp``. Strings
are drawn by hypothesis from Python's own reading of each pattern, then made hostile: each
ASCII digit and letter replaced by a non-ASCII digit or word character (which Python's
``\\d``/``\\w`` accept), and a final newline added (which Python's ``$`` accepts).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mibspec
from mibspec.validator._ecma_regex import ecma_regex

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((REPO / "spec" / "v1" / "schemas").glob("*.schema.json"))
EXAMPLE = REPO / "examples" / "causal-bench-planted" / "report.json"


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties" and isinstance(value, dict):
                yield from value
            yield from _patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


PATTERNS = sorted({p for path in SCHEMAS for p in _patterns(json.loads(path.read_text(encoding="utf-8")))})


def _reference() -> Callable[[str, list[str]], list[bool]]:
    """``search`` under ECMA-262 for each text (an independent engine)."""
    try:
        import regress
    except ModuleNotFoundError:
        node = shutil.which("node")
        if node is None:
            pytest.skip("no ECMA-262 engine (regress or node) to compare with")

        def with_node(pattern: str, texts: list[str]) -> list[bool]:
            script = "const [p, t] = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
            script += "console.log(JSON.stringify(t.map(s => new RegExp(p, 'u').test(s))));"
            done = subprocess.run(
                [node, "-e", script],
                input=json.dumps([pattern, texts]),
                capture_output=True,
                text=True,
                check=True,
            )
            return [bool(x) for x in json.loads(done.stdout)]

        return with_node

    def with_regress(pattern: str, texts: list[str]) -> list[bool]:
        compiled = regress.Regex(pattern, flags="u")
        return [compiled.find(text) is not None for text in texts]

    return with_regress


def _hostile(text: str) -> list[str]:
    """``text`` with each ASCII digit and letter replaced in turn by a Unicode digit or word
    character, all of them at once, and with a final newline."""
    variants = [text + "\n"]
    swaps = {**dict.fromkeys("0123456789", "٣"), **dict.fromkeys("abcdefghijklmnopqrstuvwxyz", "é")}
    swaps.update({c.upper(): "É" for c in "abcdefghijklmnopqrstuvwxyz"})
    for i, char in enumerate(text):
        if char in swaps:
            variants.append(text[:i] + swaps[char] + text[i + 1 :])
    variants.append("".join(swaps.get(char, char) for char in text))
    return variants


def test_the_schemas_have_patterns() -> None:
    # guards the walk below against passing vacuously
    assert len(PATTERNS) >= 8
    assert any(r"\d" in p for p in PATTERNS)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_schema_pattern_matches_as_ecma_262_does(pattern: str, data: st.DataObject) -> None:
    reference = _reference()
    ascii_text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=st.characters(codec="ascii")))
    unicode_text = data.draw(st.from_regex(re.compile(pattern), fullmatch=True))
    texts = [ascii_text, unicode_text, *_hostile(ascii_text)]
    ours = [ecma_regex(pattern).search(text) is not None for text in texts]
    assert ours == reference(pattern, texts), texts
    assert ours[0]  # an ASCII string drawn from the pattern is accepted


@pytest.mark.parametrize(
    "created",
    ["٢٠٢٤-٠١-٠١T00:00:00Z", "２０２４-01-01T00:00:00Z", "2024-01-01T00:00:00Z\n", "2024-01-01T00:0𝟘:00Z"],
)
def test_a_report_with_unicode_digits_in_created_is_s115(tmp_path: Path, created: str) -> None:
    report = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    report["provenance"]["created"] = created
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    result = mibspec.verify(path, recompute=False)
    assert ("S115", "/provenance/created") in {(f.code, f.pointer) for f in result.findings}


def test_an_artifact_id_with_a_final_newline_is_s115(tmp_path: Path) -> None:
    folder = tmp_path / "circuit"
    shutil.copytree(REPO / "examples" / "circuit", folder)
    data = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))
    data["artifacts"][0]["id"] = data["artifacts"][0]["id"] + "\n"
    (folder / "circuit.json").write_text(json.dumps(data), encoding="utf-8")
    result = mibspec.verify(folder / "circuit.json", recompute=False)
    assert ("S115", "/artifacts/0/id") in {(f.code, f.pointer) for f in result.findings}
