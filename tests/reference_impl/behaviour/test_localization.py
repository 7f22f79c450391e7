"""The four localization procedures and the subsample draw against slow loops and closed forms."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest

from mibspec.reference_impl.behaviour.localization import (
    PAPER_PROCEDURES,
    Procedure,
    identify,
    procedure_scores,
    subsample,
)
from mibspec.reference_impl.behaviour.planted import PlantedCircuitModel
from mibspec.reference_impl.behaviour.study import (
    PLANTED_BEHAVIOUR,
    SCALING_CONFIGS,
    PlantedSource,
    scaled_sets,
    threshold_sets,
)

BEHAVIOUR: dict[str, Any] = dict(PLANTED_BEHAVIOUR)


def _model(behaviour: dict[str, Any] = BEHAVIOUR, **changes: Any) -> PlantedCircuitModel:
    b = {**behaviour, **changes}
    return PlantedCircuitModel(
        b["n_layers"],
        b["n_heads"],
        seed=b["seed"],
        signal=b["signal"],
        component_noise_sd=b["component_noise_sd"],
        measurement_noise_sd=b["measurement_noise_sd"],
    )


@pytest.mark.parametrize("name", list(PAPER_PROCEDURES))
@pytest.mark.parametrize("seed", [0, 3])
def test_procedures_match_slow_loops(slow: Any, name: str, seed: int) -> None:
    procedure = PAPER_PROCEDURES[name]
    model = _model()
    comps, beta = slow.planted_beta(BEHAVIOUR, slow.default_truth(4, 4))
    contrib = slow.contributions(BEHAVIOUR, comps, slow.default_truth(4, 4))
    assert list(model.universe) == comps
    got = identify(procedure, model, seed)
    assert [comps[i] for i in np.flatnonzero(got)] == slow.identify(
        procedure.as_dict(), beta, comps, contrib, seed
    )
    if procedure.thresholded:
        expected = slow.scores(procedure.kind, procedure.as_dict(), beta, comps, contrib, seed)
        np.testing.assert_allclose(procedure_scores(procedure, model, seed), expected, rtol=0, atol=1e-15)


def test_circuit_discovery_closed_form_without_noise() -> None:
    """Noiseless Eq. 1: removing a non-member keeps F = 1, so they go first (canonical order among
    equals); then every member leaves F = σ(2.4)/σ(4) ≈ 0.934 ≥ 0.8 and the first one goes; three
    members give σ(0.8)/σ(4) ≈ 0.703 < 0.8, so four members remain."""
    model = _model(measurement_noise_sd=0.0)
    found = identify(PAPER_PROCEDURES["circuit_discovery"], model, 0)
    kept = {model.universe[i] for i in np.flatnonzero(found)}
    assert kept == model.planted - {"L0.attn_head[0]"}
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert sig(2.4) / sig(4) >= 0.8 > sig(0.8) / sig(4)
    # a floor above σ(2.4)/σ(4) keeps all five
    strict = identify(Procedure("circuit_discovery", threshold=0.95), model, 0)
    assert {model.universe[i] for i in np.flatnonzero(strict)} == model.planted


def test_circuit_discovery_f1_is_constant_across_sizes() -> None:
    """Table 2: circuit discovery keeps F1 = 0.889 (4 of the 5 planted components) from 4L/4H up."""
    for n_layers, n_heads in SCALING_CONFIGS[1:]:
        run = scaled_sets(BEHAVIOUR, {"cd": PAPER_PROCEDURES["circuit_discovery"]}, n_layers, n_heads)
        found = set(run.sets["cd"])
        assert len(found) == 4
        assert found <= run.truth
        assert 2 * len(found & run.truth) / (len(found) + len(run.truth)) == pytest.approx(0.889, abs=5e-4)


def test_method_noise_runs_leave_circuit_discovery_stable() -> None:
    """Table 1's S = 1.000 for circuit discovery: it draws no random numbers."""
    model = _model()
    sets = {
        tuple(np.flatnonzero(identify(PAPER_PROCEDURES["circuit_discovery"], model, s))) for s in range(1, 11)
    }
    assert len(sets) == 1
    noisy = {
        tuple(np.flatnonzero(identify(PAPER_PROCEDURES["activation_patching"], model, s)))
        for s in range(1, 11)
    }
    assert len(noisy) > 1


def test_gradient_attribution_boost_probability() -> None:
    """With σ = 0 and a threshold between max |contribution| of non-members and the boost, a
    non-member is identified iff it is boosted: the rate over many seeds is p."""
    model = _model()
    procedure = Procedure(
        "gradient_attribution", threshold=0.5, false_positive_rate=0.15, false_positive_boost=0.6
    )
    outside = ~model.planted_mask
    assert np.abs(model.contributions[outside]).max() < 0.5 < 0.6  # boosted iff identified
    hits = sum(int(identify(procedure, model, seed)[outside].sum()) for seed in range(400))
    rate = hits / (400 * int(outside.sum()))
    assert rate == pytest.approx(0.15, abs=3 * math.sqrt(0.15 * 0.85 / (400 * 15)))
    assert identify(procedure, model, 0)[model.planted_mask].all()


def test_threshold_sets_are_nested_and_contain_the_method_set() -> None:
    source = PlantedSource(_model())
    procedure = PAPER_PROCEDURES["activation_patching"]
    taus = [0.0, 0.02, 0.05, 0.08, 0.2]
    sets, runs = threshold_sets(procedure, source, taus, [1, 2, 3])
    for small, large in itertools.pairwise(sets):
        assert set(large) <= set(small)
    main = [
        source.universe[i] for i in np.flatnonzero(identify(procedure, source.oracle(None), procedure.seed))
    ]
    assert sets[taus.index(procedure.threshold)] == main
    for seed, run in zip([1, 2, 3], runs[2], strict=True):
        assert run == [source.universe[i] for i in np.flatnonzero(identify(procedure, source.model, seed))]


def test_subsample_matches_slow_selection_and_is_uniform() -> None:
    n, size = 7, 3
    for seed in (0, 5, 2**40 + 3):
        keys = np.random.default_rng(np.array([seed % 2**32, seed // 2**32, 2, n], dtype=np.uint32)).random(n)
        chosen, r = [], size
        for j in range(n):
            if (n - j) * keys[j] < r:
                chosen.append(j)
                r -= 1
        assert subsample(seed, n, size).tolist() == chosen
    counts = Counter(tuple(subsample(seed, n, size).tolist()) for seed in range(7000))
    assert len(counts) == math.comb(n, size)
    expected = 7000 / math.comb(n, size)
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 80  # 34 degrees of freedom: far above the 0.999 quantile (≈ 65) only if biased
    with pytest.raises(ValueError, match="size"):
        subsample(0, 4, 5)


def test_procedure_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="kind"):
        Procedure("path_patching", threshold=0.1)
    with pytest.raises(ValueError, match="false_positive_rate"):
        Procedure("activation_patching", threshold=0.1, false_positive_rate=0.2)
    with pytest.raises(ValueError, match="noise_sd"):
        Procedure("activation_patching", threshold=0.1, noise_sd=-1.0)
    with pytest.raises(ValueError, match="no per-component score"):
        procedure_scores(PAPER_PROCEDURES["circuit_discovery"], _model(), 0)
    round_trip = Procedure.from_dict(PAPER_PROCEDURES["gradient_attribution"].as_dict())
    assert round_trip == PAPER_PROCEDURES["gradient_attribution"]
