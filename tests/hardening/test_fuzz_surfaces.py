"""Fuzzing the HTML page and recomputation's model inputs (``tests/fuzz/surfaces.py``):
``config.json``, ``tokenizer.json`` and dataset rows damaged (half of them re-pinned so that
they reach the readers and the model), and reports of every track damaged and rendered.

The default run takes a small seeded sample of each surface; ``test_fuzz_surfaces_long``
(marked ``long``) runs 12,000, as ``tests/fuzz/run_surfaces.py --count 12000`` does. For every
input: no internal error (exit 3), no uncaught exception, every rejection coded and located,
within its time limit, and the process's peak memory grows by less than 1 GiB.
"""

from __future__ import annotations

import collections

import pytest

pytest.importorskip("torch")
pytest.importorskip("matplotlib")

import surfaces

pytestmark = pytest.mark.recompute


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> surfaces.SurfaceFuzzer:
    return surfaces.SurfaceFuzzer(tmp_path_factory.mktemp("surfaces"), seconds_per_input=120.0)


def _run(fuzzer: surfaces.SurfaceFuzzer, seeds: range) -> list[surfaces.SurfaceOutcome]:
    outcomes = [fuzzer.run_input(seed) for seed in seeds]
    failures = [(o.seed, o.surface, o.description, o.problems) for o in outcomes if o.problems]
    assert not failures, failures[:5]
    return outcomes


@pytest.mark.slow
def test_fuzz_surfaces_sample(fuzzer: surfaces.SurfaceFuzzer) -> None:
    outcomes = _run(fuzzer, range(12))
    seen = collections.Counter(o.surface for o in outcomes)
    assert seen == dict.fromkeys(surfaces.SURFACES, 3)
    # the damage reaches recomputation and the model as well as the checks before it
    codes = {code for o in outcomes for code in o.codes}
    assert {"R104"} <= codes, sorted(codes)


def test_inputs_are_a_function_of_their_seed(fuzzer: surfaces.SurfaceFuzzer) -> None:
    for seed in (1, 6, 99):
        first = fuzzer.make_input(seed)
        one = {p.name: p.read_bytes() for p in first[2].parent.rglob("*") if p.is_file()}
        second = fuzzer.make_input(seed)
        two = {p.name: p.read_bytes() for p in second[2].parent.rglob("*") if p.is_file()}
        assert first[:2] == second[:2]
        assert one == two


@pytest.mark.slow
@pytest.mark.long
def test_fuzz_surfaces_long(fuzzer: surfaces.SurfaceFuzzer) -> None:
    outcomes = _run(fuzzer, range(12_000))
    assert len(outcomes) == 12_000


@pytest.mark.parametrize(
    ("seed", "found"),
    [
        (227, "a saliency map path too long for the file system: OSError from the page"),
        (407, "a faithfulness of 1e308: matplotlib's tick arithmetic overflowed"),
        (780, "config.json architectures swapped for a boolean: TypeError, exit 3"),
        (860, "config.json architectures = true: TypeError, exit 3"),
        (2087, "a position slot in CJK: matplotlib warned of a glyph the font lacks"),
        (6703, "a layer of 1e308 as a 309-digit tick label: the figure's layout collapsed"),
        (7149, "a re-pinned tokenizer giving an id beyond the vocabulary: internal error, exit 3"),
        (8937, "a re-pinned tokenizer giving an id beyond the vocabulary: internal error, exit 3"),
    ],
)
def test_the_inputs_the_long_run_found(fuzzer: surfaces.SurfaceFuzzer, seed: int, found: str) -> None:
    _run(fuzzer, range(seed, seed + 1))
