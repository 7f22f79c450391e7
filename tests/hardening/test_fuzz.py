"""Fuzzing the validation path (``tests/fuzz/fuzzlib.py``): schema-drawn documents of every
kind and mutated conformance cases, examples and sidecars.

The fast tests run a few hundred inputs; ``test_fuzz_100k`` (marked ``long``, left out
unless selected with ``-m long``; about 45 minutes on 2 cores) runs 100,000, as
``tests/fuzz/run.py --count 100000`` does. For every input: no exception escapes, every
rejection carries a catalogue code, no stage after one that did not pass is reported as
passed, every finding is located, the outputs encode as UTF-8, and the input finishes
within its time limit. Schema verdicts are compared with a second JSON Schema
implementation (jsonschema-rs).
"""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path

import fuzzlib
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mibspec
from mibspec.validator import catalogue
from mibspec.validator._schema_stage import check_schema

CAT = catalogue("1.0")


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> fuzzlib.Fuzzer:
    return fuzzlib.Fuzzer(tmp_path_factory.mktemp("fuzz"), seconds_per_input=30.0)


def _run(fuzzer: fuzzlib.Fuzzer, seeds: range) -> list[fuzzlib.Outcome]:
    outcomes = list(fuzzer.run_seeds(seeds))
    failures = [(o.seed, o.description, o.problems) for o in outcomes if o.problems]
    assert not failures, failures[:5]
    return outcomes


@pytest.mark.slow
def test_fuzz_fast_subset(fuzzer: fuzzlib.Fuzzer) -> None:
    outcomes = _run(fuzzer, range(400))
    codes = collections.Counter(code for o in outcomes for code in o.codes)
    # The inputs reach every stage: parse, schema and rules codes all occur, and some pass.
    stages = {CAT.by_code[code].stage for code in codes}
    assert {"parse", "schema", "rules"} <= stages, sorted(codes)
    assert any(o.valid for o in outcomes)
    assert len(codes) >= 40, sorted(codes)


@pytest.mark.slow
@pytest.mark.long
def test_fuzz_100k(fuzzer: fuzzlib.Fuzzer) -> None:
    outcomes = _run(fuzzer, range(100_000))
    assert len(outcomes) == 100_000


def test_inputs_are_a_function_of_their_seed(fuzzer: fuzzlib.Fuzzer) -> None:
    for seed in (0, 7, 12345):
        first, second = fuzzlib.make_input(fuzzer.corpus, seed), fuzzlib.make_input(fuzzer.corpus, seed)
        assert (first.raw, first.sidecars, first.description) == (
            second.raw,
            second.sidecars,
            second.description,
        )


def test_the_corpus_copy_is_restored_after_every_input(fuzzer: fuzzlib.Fuzzer) -> None:
    def snapshot() -> dict[Path, bytes]:
        # Documents drawn from the schemas are written to their own folder, left as they are.
        return {p: p.read_bytes() for p in fuzzer.corpus.files() if "sampled" not in p.parts}

    before = snapshot()
    _run(fuzzer, range(1000, 1060))
    assert snapshot() == before


KINDS = st.sampled_from(fuzzlib.DOCUMENT_KINDS)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=KINDS, rng=st.randoms(use_true_random=False))
def test_schema_verdicts_agree_with_a_second_implementation(kind: str, rng: random.Random) -> None:
    document = fuzzlib.sample_document(kind, rng)
    if rng.random() < 0.5:  # damage it half of the time
        text, _ = fuzzlib._tree_mutation(document, rng, [])
        try:
            document = json.loads(text)
        except RecursionError:  # nested deeper than json.loads goes: no schema verdict
            return
    if not isinstance(document, dict) or document.get("kind") != kind:
        return
    ours = not list(check_schema(document, kind, "1.0", CAT))
    theirs = jsonschema_rs.Draft202012Validator(fuzzlib.load_schema(kind)).is_valid(document)
    assert ours == theirs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=KINDS, rng=st.randoms(use_true_random=False), mutate=st.booleans())
def test_schema_drawn_documents_never_crash_the_validator(
    tmp_path_factory: pytest.TempPathFactory, kind: str, rng: random.Random, mutate: bool
) -> None:
    document = fuzzlib.sample_document(kind, rng)
    text = fuzzlib._tree_mutation(document, rng, [])[0] if mutate else json.dumps(document)
    folder = tmp_path_factory.mktemp("drawn")
    path = folder / "document.json"
    path.write_text(text, encoding="utf-8")
    with fuzzlib.time_limit(30.0):
        result = mibspec.verify(path, recompute=False)
    assert fuzzlib.check_outcome(result, CAT) == []


def test_schema_drawn_documents_are_valid_against_their_schema() -> None:
    """The sampler follows the schemas (a check of the generator against jsonschema-rs)."""
    for kind in fuzzlib.DOCUMENT_KINDS:
        validator = jsonschema_rs.Draft202012Validator(fuzzlib.load_schema(kind))
        drawn = [fuzzlib.sample_document(kind, random.Random(seed)) for seed in range(40)]
        assert sum(validator.is_valid(d) for d in drawn) >= 36, kind


def test_regex_sampler_matches_every_pattern_of_the_schemas() -> None:
    import re

    patterns: set[str] = set()
    for kind in fuzzlib.DOCUMENT_KINDS:
        stack: list[object] = [fuzzlib.load_schema(kind)]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if isinstance(node.get("pattern"), str):
                    patterns.add(node["pattern"])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    assert len(patterns) >= 5
    rng = random.Random(0)
    for pattern in patterns:
        for _ in range(50):
            assert re.search(pattern, fuzzlib._sample_regex(pattern, rng)), pattern


@pytest.mark.slow
def test_fuzz_script_runs(tmp_path: Path) -> None:
    import subprocess
    import sys

    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [
            sys.executable,
            str(fuzzlib.REPO / "tests" / "fuzz" / "run.py"),
            "--count",
            "20",
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
    assert data["inputs"] == 20
    assert data["failures"] == data["hangs"] == data["uncaught"] == 0
