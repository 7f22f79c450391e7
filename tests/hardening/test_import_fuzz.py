"""Fuzzing the importers and exporters (``tests/fuzz/import_fuzzlib.py``): EAP-IG graphs (JSON and
``.pt``), results pickles, released datasets (JSON Lines and parquet), submission folders of
both tracks, leaderboard result files, and the exports of hostile reports and featurizers.

The fast test runs a seeded sample of every surface; ``test_import_fuzz_long`` (marked
``long``, left out unless selected with ``-m long``) runs 3,000 inputs per surface, as
``tests/fuzz/run_imports.py --count 3000`` does. For every input: no exception escapes, every
finding is coded and located, nothing is written when the input is refused, nothing is
written outside the output folder, no callable a file names runs, every document written
passes the parse, schema and artifact checks, and the input finishes within its time and
address-space limits.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

import import_fuzzlib
import pytest

pytest.importorskip("torch")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> import_fuzzlib.ImportFuzzer:
    return import_fuzzlib.ImportFuzzer(tmp_path_factory.mktemp("import-fuzz"), seconds_per_input=30.0)


def _run(fuzzer: import_fuzzlib.ImportFuzzer, surface: str, numbers: range) -> list[import_fuzzlib.Outcome]:
    outcomes = list(fuzzer.run_surface(surface, numbers))
    failures = [(o.description, o.problems) for o in outcomes if o.problems]
    assert not failures, failures[:5]
    assert not [o for o in outcomes if "not built" in o.codes], "the generator failed to build inputs"
    return outcomes


@pytest.mark.slow
def test_import_fuzz_fast_sample(fuzzer: import_fuzzlib.ImportFuzzer) -> None:
    codes: collections.Counter[str] = collections.Counter()
    for surface in import_fuzzlib.SURFACES:
        outcomes = _run(fuzzer, surface, range(8))
        codes.update(code for o in outcomes for code in o.codes)
        assert any(o.codes for o in outcomes), surface  # the inputs reach the checks
    # Refusals of every kind occur, and some inputs are imported or exported whole.
    assert {"I101", "I109", "I116", "I127", "I128", "P101"} <= set(codes), sorted(codes)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("surface", import_fuzzlib.SURFACES)
def test_import_fuzz_long(fuzzer: import_fuzzlib.ImportFuzzer, surface: str) -> None:
    assert len(_run(fuzzer, surface, range(3000))) == 3000


def test_inputs_are_a_function_of_their_number(fuzzer: import_fuzzlib.ImportFuzzer) -> None:
    def files(folder: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(folder)): p.read_bytes() if not p.is_symlink() else str(p.readlink()).encode()
            for p in sorted(folder.rglob("*"))
            if p.is_symlink() or p.is_file()
        }

    for surface in ("eap-ig-json", "results-pkl", "cv-submission"):
        first, ctx = fuzzer.case(surface, 5)
        before = files(ctx.folder.parent)
        second, ctx = fuzzer.case(surface, 5)
        assert first.description == second.description
        assert files(ctx.folder.parent) == before


def test_the_checks_can_fail(tmp_path: Path) -> None:
    from mibspec.importers import ImportResult
    from mibspec.validator import catalogue, make_finding

    out = tmp_path / "out"
    out.mkdir()
    (out / "circuit.json").write_text("{", encoding="utf-8")
    refused = ImportResult(findings=[make_finding(catalogue(), None, "I101", "", detail="x").located(1, 1)])
    assert "written although I101" in import_fuzzlib.check(refused, out, catalogue(), export=False)[0]
    unlocated = ImportResult(findings=[make_finding(catalogue(), None, "I101", "", detail="x")])
    assert any(
        "not located" in p
        for p in import_fuzzlib.check(unlocated, tmp_path / "none", catalogue(), export=False)
    )
    broken = ImportResult(written=[out / "circuit.json"])
    assert "fails P101" in import_fuzzlib.check(broken, tmp_path / "none", catalogue(), export=False)[0]
    with import_fuzzlib.memory_limit(256 * 1024**2), pytest.raises(MemoryError):
        bytearray(1024**3)
    with pytest.raises(import_fuzzlib.InputHangError), import_fuzzlib.time_limit(0.05):
        _spin()


def _spin() -> None:
    while True:
        pass


@pytest.mark.slow
def test_import_fuzz_script_runs(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable,
            str(Path(import_fuzzlib.__file__).with_name("run_imports.py")),
            "--count",
            "2",
            "--surface",
            "eap-ig-pt",
            "--surface",
            "results-pkl",
            "--summary",
            str(summary),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(summary.read_text(encoding="utf-8"))
    assert data["total"]["inputs"] == 4
    assert data["total"]["failures"] == 0
    assert set(data["surfaces"]) == {"eap-ig-pt", "results-pkl"}
