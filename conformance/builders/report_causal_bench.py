"""Report cases of the CAUSAL-BENCH track (ids ``causal-bench-…``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from ._causal_bench import CB_TRUTH, BehaviourValues, causal_bench_claims
from ._common import PROVENANCE, Folder, Json, case, document, save
from ._reports import CB_BEHAVIOUR, CB_SETTINGS, CB_WEIGHTS, causal_bench_report


@case(
    "report",
    "DK-1",
    "The planted 4-layer, 4-head model with the paper's Table 1 sets: four methods, ten seed "
    "runs each, composite scores, P/R/F1, convergence test, consensus and majority sets.",
)
def causal_bench_table1_planted(folder: Folder) -> None:
    save(folder, causal_bench_report())


CB_SMALL_UNIVERSE = [
    f"L{layer}.{part}" for layer in range(2) for part in ("attn_head[0]", "attn_head[1]", "mlp")
]


def small_universe_report(
    title: str,
    sets: dict[str, list[str]],
    given: dict[str, BehaviourValues],
    stability: dict[str, float],
    settings: Json,
    *,
    ablation: str,
    seed: int,
) -> Json:
    """Methods compared on the 2-layer, 2-head transformer, without ground truth (no P/R/F1).

    COS is evaluated with the threshold ``settings`` declares, 0.85 when it declares none.
    """
    claims = causal_bench_claims(
        sets,
        CB_SMALL_UNIVERSE,
        planted=None,
        given=given,
        truth=None,
        stability_targets=stability,
        settings={"cos_threshold": 0.85, **settings},
        seed=seed,
    )
    return document(
        "report",
        {
            "track": "causal_bench",
            "title": title,
            "method": {"name": "CAUSAL-BENCH method comparison"},
            "task": {"name": "induction"},
            "behaviour": {
                "kind": "transformer",
                "n_layers": 2,
                "n_heads": 2,
                "seed": 3,
                "ablation": ablation,
            },
            "universe": CB_SMALL_UNIVERSE,
            "settings": settings,
            "claims": claims,
            "seeds": [{"purpose": "permutation test", "value": seed}],
            "provenance": PROVENANCE,
        },
    )


@case(
    "report",
    "DK-1",
    "Two methods on a 2-layer transformer without ground truth (no P/R/F1); weights favour faithfulness.",
)
def causal_bench_two_methods_no_truth(folder: Folder) -> None:
    doc = small_universe_report(
        "Activation patching and circuit discovery on a 2L/2H transformer",
        {
            "activation_patching": ["L0.attn_head[0]", "L1.attn_head[1]", "L1.mlp"],
            "circuit_discovery": ["L0.attn_head[0]", "L1.mlp"],
        },
        {
            "activation_patching": BehaviourValues(0.991, 0.954, ["L0.attn_head[0]", "L1.mlp"]),
            "circuit_discovery": BehaviourValues(0.962, 0.871, ["L0.attn_head[0]", "L1.mlp"]),
        },
        {"activation_patching": 0.8, "circuit_discovery": 0.9},
        {"weights": {"F": 2.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0}, "n_permutations": 1000},
        ablation="mean",
        seed=11,
    )
    save(folder, doc)


@case(
    "report",
    "DK-1",
    "A degenerate convergence null (one method identifies every component, so every draw has the same "
    "mean Jaccard): z is undefined and omitted.",
)
def causal_bench_degenerate_null_without_z(folder: Folder) -> None:
    doc = small_universe_report(
        "Ablation scanning against circuit discovery on a 2L/2H transformer",
        {"ablation_scanning": list(CB_SMALL_UNIVERSE), "circuit_discovery": ["L0.attn_head[0]", "L1.mlp"]},
        {
            "ablation_scanning": BehaviourValues(1.0, 1.0, ["L0.attn_head[0]", "L1.mlp"]),
            "circuit_discovery": BehaviourValues(0.947, 0.902, ["L0.attn_head[0]", "L1.mlp"]),
        },
        {"ablation_scanning": 1.0, "circuit_discovery": 1.0},
        {"weights": dict(CB_WEIGHTS), "cos_threshold": 0.85, "n_permutations": 1000},
        ablation="zero",
        seed=5,
    )
    assert "z" not in doc["claims"]["convergence"]
    save(folder, doc)


@case(
    "report",
    "D-1",
    "Stability of circuit discovery estimated from 5 seed runs; the default profile requires 10.",
    ("D101", "/claims/methods/3/runs"),
)
def causal_bench_too_few_runs(folder: Folder) -> None:
    doc = causal_bench_report()
    method = doc["claims"]["methods"][3]
    method["runs"] = method["runs"][:5]
    save(folder, doc)


@case(
    "report",
    "D-2",
    "Two stability runs of activation patching share seed 0 (the second run is otherwise unchanged).",
    ("D102", "/claims/methods/0/runs/1/seed"),
)
def causal_bench_duplicate_run_seed(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][0]["runs"][1]["seed"] = doc["claims"]["methods"][0]["runs"][0]["seed"]
    save(folder, doc)


@case(
    "report",
    "D-3 C-4",
    "The convergence test drew 500 permutations; the default profile requires 1000.",
    ("D103", "/settings/n_permutations"),
    ("D103", "/claims/convergence/n_permutations"),
)
def causal_bench_too_few_permutations(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["n_permutations"] = 500
    doc["claims"]["convergence"]["n_permutations"] = 500
    doc["claims"]["convergence"]["p"] = 1 / 501
    save(folder, doc)


@case(
    "report",
    "B-1",
    "p = 0.001 with B = 1000 under the plus_one convention, which can only give multiples of 1/1001.",
    ("B101", "/claims/convergence/p"),
)
def causal_bench_p_not_a_count(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["p"] = 0.001
    save(folder, doc)


@case(
    "report",
    "PR-3 B-1",
    "A mib-2025 report that states no p-value convention: its profile's count/B applies (no null "
    "draw reached J_obs, so p = 0/1000), not the schema's default (count + 1)/(B + 1).",
)
def causal_bench_mib_2025_p_convention_from_profile(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["profile"] = "mib-2025"
    doc["settings"] = {key: value for key, value in doc["settings"].items() if key != "p_convention"}
    convergence = doc["claims"]["convergence"]
    b = convergence["n_permutations"]
    count = round(convergence["p"] * (b + 1)) - 1  # the base report's p is (count + 1)/(B + 1)
    convergence["p"] = count / b
    save(folder, doc)


@case(
    "report",
    "PR-3 B-1",
    "A default-profile report that declares the paper's count/B convention to claim p = 0; the "
    "default profile binds p_convention to plus_one, under which p never reaches zero.",
    ("C122", "/settings/p_convention"),
    ("B101", "/claims/convergence/p"),
)
def causal_bench_p_convention_not_profile(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"] = {**doc["settings"], "p_convention": "paper"}
    doc["claims"]["convergence"]["p"] = 0.0
    save(folder, doc)


@case(
    "report",
    "C-3 MB-8",
    "Circuit discovery claims its COS without the reduced set the reduction left.",
    ("C123", "/claims/methods/3"),
)
def causal_bench_reduced_set_missing(folder: Folder) -> None:
    doc = causal_bench_report()
    del doc["claims"]["methods"][3]["reduced"]
    save(folder, doc)


@case(
    "report",
    "C-5 MB-1",
    "Activation patching lists its identified set in reverse canonical order, and one seed run "
    "of gradient attribution names a component twice.",
    ("C124", "/claims/methods/0/components/1"),
    ("C124", "/claims/methods/1/runs/0/components/1"),
)
def causal_bench_set_not_canonical(folder: Folder) -> None:
    doc = causal_bench_report()
    method = doc["claims"]["methods"][0]
    method["components"] = list(reversed(method["components"]))
    run = doc["claims"]["methods"][1]["runs"][0]
    run["components"] = [run["components"][0], *run["components"]]
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Gradient attribution's composite is the arithmetic, not the harmonic, mean of its parts.",
    ("C104", "/claims/methods/1/metrics/composite"),
)
def causal_bench_composite_arithmetic_mean(folder: Folder) -> None:
    doc = causal_bench_report()
    metrics = doc["claims"]["methods"][1]["metrics"]
    metrics["composite"] = sum(metrics[key] for key in ("F", "C", "M", "S", "COS")) / 5
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Ablation scanning claims recall 0.8 although its set holds all five planted components.",
    ("C105", "/claims/methods/2/metrics/recall"),
)
def causal_bench_recall_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][2]["metrics"]["recall"] = 0.8
    save(folder, doc)


@case(
    "report",
    "C-3",
    "Minimality of circuit discovery claimed as 0.75 for 4 of 20 components (it is 0.8); the composite, "
    "computed with 0.8, then no longer matches the claimed parts either.",
    ("C106", "/claims/methods/3/metrics/M"),
    ("C104", "/claims/methods/3/metrics/composite"),
)
def causal_bench_minimality_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][3]["metrics"]["M"] = 0.75
    save(folder, doc)


@case(
    "report",
    "C-4",
    "z is claimed as 3.75 (the paper's value) while (J_obs − null mean)/null std gives another.",
    ("C107", "/claims/convergence/z"),
)
def causal_bench_z_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["z"] = 3.75
    save(folder, doc)


@case(
    "report",
    "C-3",
    "The majority set leaves out L3.mlp, which three of the four methods identify.",
    ("C108", "/claims/majority"),
)
def causal_bench_majority_inconsistent(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["majority"] = [c for c in doc["claims"]["majority"] if c != "L3.mlp"]
    save(folder, doc)


@case(
    "report",
    "C-5",
    "The ground truth names L4.mlp, a component of a 5-layer model, in a 4-layer universe.",
    ("C109", "/ground_truth/4"),
)
def causal_bench_unknown_component(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["ground_truth"] = [*doc["ground_truth"][:4], "L4.mlp"]
    save(folder, doc)


@case(
    "report",
    "C-5",
    "The universe lists L1.mlp twice (the second time in place of L2.attn_head[0]).",
    ("C114", "/universe/10"),
)
def causal_bench_duplicate_universe_component(folder: Folder) -> None:
    doc = causal_bench_report()
    assert doc["universe"][9:11] == ["L1.mlp", "L2.attn_head[0]"]
    doc["universe"][10] = "L1.mlp"
    save(folder, doc)


@case("report", "S-3 DK-1", "A permutation p-value of 1.5.", ("S114", "/claims/convergence/p"))
def causal_bench_p_above_one(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["convergence"]["p"] = 1.5
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "Stability from a single seed run (at least two are needed).",
    ("S116", "/claims/methods/0/runs"),
)
def causal_bench_single_run(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][0]["runs"] = doc["claims"]["methods"][0]["runs"][:1]
    save(folder, doc)


@case("report", "S-3 DK-1", 'A composite weight for an undefined metric "R".', ("S113", "/settings/weights"))
def causal_bench_unknown_weight(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["weights"]["R"] = 1.0
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A composite weight of 0 (weights must be positive).",
    ("S114", "/settings/weights/S"),
)
def causal_bench_zero_weight(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["weights"]["S"] = 0
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "No composite weight at all: the composite of no part is undefined.",
    ("S116", "/settings/weights"),
)
def causal_bench_no_weights(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["settings"]["weights"] = {}
    save(folder, doc)


@case("report", "S-3 DK-1", 'behaviour kind "simulated" is not defined.', ("S113", "/behaviour/kind"))
def causal_bench_unknown_behaviour(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["behaviour"]["kind"] = "simulated"
    save(folder, doc)


@case("report", "S-3 DK-1", "The component universe is missing.", ("S111", ""))
def causal_bench_missing_universe(folder: Folder) -> None:
    doc = causal_bench_report()
    del doc["universe"]
    save(folder, doc)


@case(
    "report",
    "S-3 DK-1",
    "A component id that is the empty string.",
    ("S116", "/claims/methods/3/components/0"),
)
def causal_bench_empty_component(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["claims"]["methods"][3]["components"][0] = ""
    save(folder, doc)


@case("report", "S-3 DK-1", "A negative seed.", ("S114", "/behaviour/seed"))
def causal_bench_negative_seed(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["behaviour"]["seed"] = -42
    save(folder, doc)


@functools.cache
def _causal_bench_study_claims() -> str:
    """Claims of the reference producer on the planted 4L/4H model (a small scaling study)."""
    from mibspec.reference_impl.behaviour.localization import PAPER_PROCEDURES
    from mibspec.reference_impl.behaviour.study import PlantedSource, planted_model
    from mibspec.reference_impl.scoring.causal_bench import StudyOptions, study_claims

    source = PlantedSource(planted_model(CB_BEHAVIOUR, 4, 4))
    study = StudyOptions(
        procedures=PAPER_PROCEDURES,
        run_seeds=list(range(1, 11)),
        settings=CB_SETTINGS,
        convergence_seed=7,
        truth=CB_TRUTH,
        thresholds=(0.0, 0.05, 0.1, 0.15),
        scaling=((2, 2), (4, 4)),
        behaviour=CB_BEHAVIOUR,
    )
    claims = study_claims(source, study)
    return json.dumps(claims)


def causal_bench_study_report() -> Json:
    """A planted report with procedures, threshold sensitivity, weight configurations and scaling."""
    doc = causal_bench_report()
    doc["title"] = "Four localization procedures re-runnable from their seeds, with the paper's studies"
    doc["settings"]["perturbation"] = {"kind": "method_noise"}
    doc["claims"] = json.loads(_causal_bench_study_claims())
    doc["seeds"] = [
        {"purpose": "behaviour model noise", "value": 42},
        {"purpose": "localization methods", "value": 0},
        {"purpose": "permutation test", "value": 7},
    ]
    return doc


@case(
    "report",
    "DK-1 C-3 C-8",
    "The four procedures of CAUSAL-BENCH §2.3 declared with their seeds on the planted 4L/4H model: "
    "threshold sensitivity of activation patching, five weight configurations with their rankings, and a "
    "scaling study over 2L/2H and 4L/4H.",
)
def causal_bench_procedures_and_studies(folder: Folder) -> None:
    save(folder, causal_bench_study_report())


@case(
    "report",
    "C-5 MB-1",
    "The scaling study's 2L/2H activation-patching set is listed in reverse canonical order (the "
    "order of that model's universe, not the report's).",
    ("C124", "/claims/scaling/0/methods/0/components/1"),
)
def causal_bench_scaling_set_not_canonical(folder: Folder) -> None:
    doc = causal_bench_study_report()
    method = doc["claims"]["scaling"][0]["methods"][0]
    assert len(method["components"]) > 1
    method["components"] = list(reversed(method["components"]))
    save(folder, doc)


@case(
    "report",
    "C-8",
    "A weight configuration ranks ablation scanning first although its composite is the lowest.",
    ("C113", "/claims/weight_robustness/2/ranking"),
)
def causal_bench_ranking_not_by_composite(folder: Folder) -> None:
    doc = causal_bench_study_report()
    ranking = doc["claims"]["weight_robustness"][2]["ranking"]
    ranking.insert(0, ranking.pop(ranking.index("ablation_scanning")))
    save(folder, doc)


@case(
    "report",
    "C-8",
    "A weight configuration leaves out a method whose composite is defined.",
    ("C113", "/claims/weight_robustness/0/composites"),
)
def causal_bench_configuration_missing_method(folder: Folder) -> None:
    doc = causal_bench_study_report()
    scenario = doc["claims"]["weight_robustness"][0]
    del scenario["composites"]["gradient_attribution"]
    scenario["ranking"].remove("gradient_attribution")
    save(folder, doc)


@case(
    "report",
    "C-8",
    "The threshold sensitivity varies circuit discovery, which thresholds no score, and a scaling entry "
    "names a method the report does not have.",
    ("C113", "/claims/threshold_sensitivity/method"),
    ("C113", "/claims/scaling/1/methods/3/name"),
)
def causal_bench_study_names_wrong_method(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["claims"]["threshold_sensitivity"]["method"] = "circuit_discovery"
    doc["claims"]["scaling"][1]["methods"][3]["name"] = "path_patching"
    save(folder, doc)


@case(
    "report",
    "C-8",
    "A scaling study on a transformer behaviour: only the planted model has sizes to vary.",
    ("C113", "/claims/scaling"),
)
def causal_bench_scaling_without_planted_model(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["behaviour"] = {"kind": "transformer", "n_layers": 4, "n_heads": 4, "seed": 0, "ablation": "mean"}
    save(folder, doc)


@case(
    "report",
    "C-3",
    "A weight configuration's composite of circuit discovery is its equal-weight composite, not the "
    "one under the configuration's weights.",
    ("C104", "/claims/weight_robustness/3/composites/circuit_discovery"),
)
def causal_bench_configuration_composite_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    claims = doc["claims"]
    claims["weight_robustness"][3]["composites"]["circuit_discovery"] = claims["methods"][3]["metrics"][
        "composite"
    ]
    save(folder, doc)


@case(
    "report",
    "C-3",
    "A threshold-sensitivity point omits its composite although every part is non-negative.",
    ("C104", "/claims/threshold_sensitivity/points/1/metrics"),
)
def causal_bench_point_composite_missing(folder: Folder) -> None:
    doc = causal_bench_study_report()
    del doc["claims"]["threshold_sensitivity"]["points"][1]["metrics"]["composite"]
    save(folder, doc)


@case(
    "report",
    "C-8 C-5",
    "Scaling entries: F1 at 2L/2H claimed against the 4L/4H planted set, and a 2L/2H set naming a layer-3 "
    "head.",
    ("C105", "/claims/scaling/0/methods/0/f1"),
    ("C109", "/claims/scaling/0/methods/1/components/0"),
)
def causal_bench_scaling_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    entries = doc["claims"]["scaling"][0]["methods"]
    entries[0]["f1"] = cb_f1(entries[0]["components"], CB_TRUTH)
    entries[1]["components"][0] = "L3.attn_head[0]"
    save(folder, doc)


@case(
    "report",
    "C-4",
    "The 4L/4H scaling configuration's convergence test claims B = 500 permutations: not the settings' "
    "1000, fewer than the profile requires, and its p (a count over 1001) is no count over 501.",
    ("C107", "/claims/scaling/1/convergence/n_permutations"),
    ("D103", "/claims/scaling/1/convergence/n_permutations"),
    ("B101", "/claims/scaling/1/convergence/p"),
)
def causal_bench_scaling_convergence_inconsistent(folder: Folder) -> None:
    doc = causal_bench_study_report()
    doc["claims"]["scaling"][1]["convergence"]["n_permutations"] = 500
    save(folder, doc)


def cb_f1(identified: Sequence[str], truth: Sequence[str]) -> float:
    hits = len(set(identified) & set(truth))
    return 2 * hits / (len(identified) + len(truth))


# --------------------------------------------------------------------------- declared rounding (1.1)


def _printed(doc: Json) -> Json:
    """The base report as a paper prints it: the methods' metrics and the Jaccard matrix to three
    decimals (declared on the report), the convergence test to three significant digits
    (declared on it)."""
    claims = doc["claims"]
    for method in claims["methods"]:
        method["metrics"] = {key: round(value, 3) for key, value in method["metrics"].items()}
    claims["jaccard"]["matrix"] = [[round(x, 3) for x in row] for row in claims["jaccard"]["matrix"]]
    convergence = claims["convergence"]
    for key in ("j_obs", "null_mean", "null_std", "z", "p"):
        convergence[key] = float(f"{convergence[key]:.3g}")
    convergence["rounding"] = {"significant_digits": 3}
    doc["rounding"] = {"decimals": 3}
    return doc


@case(
    "report",
    "C-10 C-3 C-4 B-1",
    "Every claim rounded as printed (three decimals; the convergence test to three significant "
    "digits), with the rounding declared: composite, M, S, F1, J_obs, z and p hold within it.",
)
def causal_bench_rounding_declared(folder: Folder) -> None:
    save(folder, _printed(causal_bench_report()))


@case(
    "report",
    "C-10 C-3",
    "Claims rounded to three decimals as declared, but one composite is 0.002 off: beyond what "
    "the rounding of it and of its parts allows.",
    ("C104", "/claims/methods/0/metrics/composite"),
)
def causal_bench_rounding_composite_beyond(folder: Folder) -> None:
    doc = _printed(causal_bench_report())
    doc["claims"]["methods"][0]["metrics"]["composite"] += 0.002
    save(folder, doc)


@case(
    "report",
    "B-2 C-10 B-1",
    "A test of B = 10,000 draws printed to three decimals as declared, p = 0.000: a count gives a p "
    "within that rounding (1/10001), but the plus_one convention the default profile binds never "
    "gives 0, so p must be printed with the digits that show it.",
    ("B110", "/claims/convergence/p"),
)
def causal_bench_rounding_p_zero(folder: Folder) -> None:
    doc = _printed(causal_bench_report())
    doc["settings"]["n_permutations"] = 10000
    convergence = doc["claims"]["convergence"]
    convergence["n_permutations"] = 10000
    convergence["rounding"] = {"decimals": 3}
    for key in ("j_obs", "null_mean", "null_std", "z"):
        convergence[key] = round(convergence[key], 3)
    convergence["p"] = 0.0
    save(folder, doc)


@case(
    "report",
    "C-10 S-1 S-3",
    "A spec 1.0 report declaring a rounding, which 1.0 does not have.",
    ("S112", "/rounding"),
)
def causal_bench_rounding_in_1_0(folder: Folder) -> None:
    doc = causal_bench_report()
    doc["spec_version"] = "1.0"
    doc["rounding"] = {"decimals": 3}
    save(folder, doc)
