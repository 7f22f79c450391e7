"""A false number in a bundled example never verifies (the soundness harness, ``soundness.py``).

The default run recomputes each bundled example once (shared by every test here), checks that
every row of the claim catalogue marked ``recomputed`` gets a comparison on them, and verifies a
seeded sample of perturbations; ``pytest -m soundness tests/hardening`` verifies all of them.
The counts of a full run are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from soundness import (
    ALWAYS_RECOMPUTED,
    RECOMPUTED_EXAMPLES,
    Perturbation,
    Workbench,
    claims_to_perturb,
    finest_accepted,
    printed_honestly,
    replayed,
    run,
    set_at,
)

from mibspec.core.tracks import TRACKS

pytestmark = pytest.mark.recompute


class Benches:
    """One workbench per example, built on first use and shared by the module's tests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Workbench] = {}

    def __getitem__(self, example: str) -> Workbench:
        if example not in self.built:
            pytest.importorskip("torch")
            self.built[example] = Workbench.create(example, self.root)
        return self.built[example]


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> Benches:
    return Benches(tmp_path_factory.mktemp("soundness"))


def _sample(bench: Workbench, seed: int) -> list[Perturbation]:
    """Controls, eight claims, a set, two roundings; and, where recomputation is cheap, every
    declaration."""
    everything = bench.perturbations(seed)
    rng = np.random.default_rng(seed)
    by_kind: dict[str, list[Perturbation]] = {}
    for perturbation in everything:
        by_kind.setdefault(perturbation.kind, []).append(perturbation)
    picked = list(by_kind["control"])
    sizes = {"claim": 8, "set": 1, "declaration": 2}
    if bench.example in ALWAYS_RECOMPUTED:
        sizes["declaration"] = len(by_kind.get("declaration", []))
    for kind, size in sizes.items():
        pool = by_kind.get(kind, [])
        if kind == "declaration" and bench.example not in ALWAYS_RECOMPUTED:
            pool = [p for p in pool if p.replay]  # roundings: replayed; the rest under -m soundness
        for index in rng.choice(len(pool), size=min(size, len(pool)), replace=False):
            picked.append(pool[int(index)])
    return picked


def _assert_sound(bench: Workbench, perturbations: list[Perturbation]) -> None:
    tally = run(bench, perturbations)
    assert not tally.failed_controls, tally.failed_controls
    assert not tally.accepted, tally.accepted
    assert sum(tally.tried.values()) == sum(tally.refused.values()) > 0


@pytest.mark.slow
@pytest.mark.parametrize("example", RECOMPUTED_EXAMPLES)
def test_a_seeded_sample_of_false_numbers_is_refused(benches: Benches, example: str) -> None:
    bench = benches[example]
    _assert_sound(bench, _sample(bench, seed=2025))


@pytest.mark.soundness
@pytest.mark.parametrize("example", RECOMPUTED_EXAMPLES)
def test_every_false_number_is_refused(benches: Benches, example: str) -> None:
    bench = benches[example]
    _assert_sound(bench, bench.perturbations(seed=0))


# --------------------------------------------------------------------------- the catalogue on the examples

#: Rows marked recomputed whose claims no bundled example holds (checked: none holds them).
NOT_IN_EXAMPLES = {
    ("causal_variable", "/claims/variables/*/highest"): "the bundled reports are spec 1.1 (`best`)",
}


@pytest.mark.slow
def test_every_row_marked_recomputed_gets_a_comparison_on_the_examples(benches: Benches) -> None:
    from mibspec.core.claims import claim_catalogue

    catalogue = claim_catalogue()
    compared: dict[str, set[str]] = {}
    present: dict[str, set[str]] = {}
    for example in RECOMPUTED_EXAMPLES:
        bench = benches[example]
        track = bench.track
        for c in bench.recorded.comparisons:
            row = catalogue.row(track, c.pointer)
            assert row is not None
            if c.claimed is not None:
                compared.setdefault(track, set()).add(row.pointer)
        present.setdefault(track, set()).update(c.row.pointer for c in catalogue.instances(bench.document))
    for track in TRACKS:
        rows = [row.pointer for row in catalogue.rows_for(track) if row.check == "recomputed"]
        missing = [
            p for p in rows if p not in compared.get(track, set()) and (track, p) not in NOT_IN_EXAMPLES
        ]
        assert not missing, (track, missing)
        for key in NOT_IN_EXAMPLES:
            if key[0] == track:
                assert key[1] not in present[track], key  # an example now holds it: drop the exemption


# --------------------------------------------------------------------------- replay is the recomputation


def _recomputed_directly(bench: Workbench, doc: dict[str, Any]) -> Any:
    """The track's recomputer run on ``doc`` in the example's folder and session, outside verify:
    after the rules (whose artifact rule records the artifacts recomputation reads), whatever
    they found."""
    import importlib

    from mibspec.core.profiles import load_profile
    from mibspec.core.progress import NULL_PROGRESS
    from mibspec.validator import catalogue
    from mibspec.validator._context import RuleContext
    from mibspec.validator.rules import run_rules

    module_name, function = TRACKS[bench.track].recomputer.split(":")
    ctx = RuleContext(
        path=bench.folder / "perturbed.json",
        data=doc,
        kind="report",
        spec_version=str(doc["spec_version"]),
        profile=load_profile(str(doc.get("profile", "default"))),
        options=bench.options,
        cat=catalogue(),
    )
    run_rules(ctx)
    return getattr(importlib.import_module(module_name), function)(ctx, NULL_PROGRESS)


@pytest.mark.parametrize(
    "example",
    [
        pytest.param(
            name, marks=[] if name in ("causal-bench-planted", "saliency-digits") else pytest.mark.soundness
        )
        for name in RECOMPUTED_EXAMPLES
        if name not in ALWAYS_RECOMPUTED
    ],
)
@pytest.mark.slow
def test_replay_is_the_recomputation(benches: Benches, example: str) -> None:
    """What replay assumes: the recomputed values do not depend on the claimed values of rows
    marked recomputed, nor on a rounding. Every such claim is changed at once (and the report
    rounded) and the recomputer, run again, gives the recorded values, which replay pairs with
    the claims of the changed report."""
    bench = benches[example]
    changed = copy.deepcopy(bench.document)
    printed_honestly(changed, finest_accepted(changed))
    for claim in claims_to_perturb(changed):
        if claim.row.check == "recomputed":
            value = claim.value + 1 if claim.row.type == "integer" else float(claim.value) * 1.5 + 0.25
            set_at(changed, claim.pointer, value)
    again = _recomputed_directly(bench, changed)
    assert not again.findings, [f.code for f in again.findings]
    recorded = bench.recorded.comparisons
    assert [c.pointer for c in again.comparisons] == [c.pointer for c in recorded]
    for new, old in zip(again.comparisons, recorded, strict=True):
        assert math.isclose(new.recomputed, old.recomputed, rel_tol=1e-12, abs_tol=1e-15) or (
            math.isnan(new.recomputed) and math.isnan(old.recomputed)
        ), new.pointer
        assert (new.abs_tol, new.rel_tol) == (old.abs_tol, old.rel_tol)
    assert replayed(bench.recorded, changed).comparisons == again.comparisons
