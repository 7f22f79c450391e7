"""CAUSAL-BENCH producer: run the four localization methods on a behaviour and write a report.

What ``mibspec score causal-bench`` runs. The behaviour is the planted-circuit model (Eq. 1,
MB-15) or a transformer's normalised logit difference over its heads and MLPs (MB-17). The
written report holds, in the spirit of the paper's Tables 1–3 and Figures 4–5:

* per method: its procedure (kind, threshold, noise, seed), the identified set, the sets of
  the K seed runs, the COS-reduced set and F, C, M, S, COS, the composite and P/R/F1;
* the convergence permutation test, the consensus and majority sets and the Jaccard matrix;
* the threshold sensitivity of activation patching (set and metrics per threshold);
* the composites and ranking under five weight configurations;
* for the planted model, the scaling study over L × H = 2×2 … 12×12 (sets, P/R/F1, test).

A transformer report also carries a copy of the dataset rows used (``dataset.json`` +
``dataset.jsonl``). Everything is computed with the functions the recompute stage uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.spec import SPEC_VERSION

from ..behaviour.localization import PAPER_PROCEDURES, Procedure, identify
from ..behaviour.study import (
    DEFAULT_WEIGHT_SCENARIOS,
    PLANTED_BEHAVIOUR,
    PLANTED_THRESHOLDS,
    SCALING_CONFIGS,
    BehaviourSource,
    PlantedSource,
    SubsampleSource,
    convergence_claims,
    ids,
    planted_model,
    ranking,
    scaled_sets,
    set_metrics,
    threshold_sets,
)
from ..metrics import causal_bench as cb
from .folder import OutputFolder, created_timestamp

__all__ = [
    "DEFAULT_SETTINGS",
    "PLANTED_BEHAVIOUR",
    "TRANSFORMER_PROCEDURES",
    "TRANSFORMER_THRESHOLDS",
    "CausalBenchRun",
    "score_causal_bench",
    "study_claims",
]


DEFAULT_SETTINGS: dict[str, Any] = {
    "weights": {"F": 1.0, "C": 1.0, "M": 1.0, "S": 1.0, "COS": 1.0},
    "cos_threshold": 0.85,
    "n_permutations": 1000,
    "p_convention": "plus_one",
    "z_ddof": 0,
}

TRANSFORMER_PROCEDURES: dict[str, Procedure] = {
    "activation_patching": Procedure("activation_patching", threshold=0.05),
    "gradient_attribution": Procedure("gradient_attribution", threshold=0.05),
    "ablation_scanning": Procedure("ablation_scanning", threshold=0.02),
    "circuit_discovery": Procedure("circuit_discovery", threshold=0.8),
}
"""The methods on a real model: no simulated noise or false-positive injection; ablation
scanning keeps activation patching's score with a lower threshold, as in §2.3."""

TRANSFORMER_THRESHOLDS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3)

METHOD_TEXT = {
    "activation_patching": "β(C) − β(C∖{c}) per component, plus the declared Gaussian noise, above the "
    "threshold.",
    "gradient_attribution": "Attribution magnitude per component (planted: the true contribution; "
    "transformer: first-order activation patching), plus noise and the declared false-positive boost, above "
    "the threshold.",
    "ablation_scanning": "Activation patching's score with its own noise and a lower threshold.",
    "circuit_discovery": "Greedy pruning from the full model: remove the component whose removal keeps the "
    "highest faithfulness while it stays at or above the floor.",
}

METHOD_CITATION = {
    "text": "CAUSAL-BENCH: A Principled Evaluation Framework for Mechanistic Interpretability Localization "
    "Methods (§2.3, §2.4).",
}


@dataclass(frozen=True)
class CausalBenchRun:
    """What :func:`score_causal_bench` wrote and computed."""

    report: Path
    claims: dict[str, Any]
    universe: list[str]
    evaluations: int | None


def study_claims(
    source: BehaviourSource,
    *,
    procedures: Mapping[str, Procedure],
    run_seeds: Sequence[int],
    settings: Mapping[str, Any],
    convergence_seed: int,
    truth: Sequence[str] | None,
    thresholds: Sequence[float] | None,
    sensitivity_method: str = "activation_patching",
    scenarios: Mapping[str, Mapping[str, float]] = DEFAULT_WEIGHT_SCENARIOS,
    scaling: Sequence[tuple[int, int]] | None = None,
    behaviour: Mapping[str, Any] | None = None,
    min_denominator: float = 1e-6,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The claims block of a CAUSAL-BENCH report (see the module docstring).

    Args:
        source: the behaviour of the main run and of each seed perturbation.
        procedures: method name → procedure, in report order.
        run_seeds: the K seeds of the stability runs.
        settings: the report's settings (weights, cos_threshold, n_permutations, ...).
        convergence_seed: seed of the permutation test (also used in the scaling study).
        truth: the ground-truth set, if known.
        thresholds: thresholds of the sensitivity study, or None to skip it.
        sensitivity_method: the (thresholded) method the sensitivity study varies.
        scenarios: weight configurations of the robustness study (name → weights).
        scaling: planted sizes of the scaling study (needs ``behaviour``), or None.
        behaviour: the report's planted ``behaviour`` block (scaling study only).
        min_denominator: smallest accepted ``|β(C)|``.
        progress: where to report progress (``None``: nowhere).
    """

    universe = list(source.universe)
    weights = settings["weights"]
    cos_threshold = settings.get("cos_threshold", cb.DEFAULT_COS_THRESHOLD)
    beta = source.oracle(None)
    methods: list[dict[str, Any]] = []
    n_runs = len(procedures) * (1 + len(run_seeds))
    done = start_task(progress, "localization methods and their seed runs", n_runs)
    step = 0
    for name, procedure in procedures.items():
        main = ids(identify(procedure, beta, procedure.seed), universe)
        step += 1
        done(step)
        runs: list[dict[str, Any]] = []
        for seed in run_seeds:
            runs.append(
                {"seed": seed, "components": ids(identify(procedure, source.oracle(seed), seed), universe)}
            )
            step += 1
            done(step)
        metrics, reduced = set_metrics(
            beta,
            main,
            [run["components"] for run in runs],
            universe,
            truth=truth,
            weights=weights,
            cos_threshold=cos_threshold,
            min_denominator=min_denominator,
        )
        methods.append(
            {
                "name": name,
                "procedure": procedure.as_dict(),
                "components": main,
                "runs": runs,
                "reduced": reduced,
                "metrics": _composite_checked(metrics),
            }
        )
    sets = [m["components"] for m in methods]
    names = [m["name"] for m in methods]
    claims: dict[str, Any] = {"methods": methods}
    if len(methods) >= 2:
        claims["convergence"] = convergence_claims(sets, len(universe), settings, convergence_seed).as_dict()
    claims["consensus"] = ids(cb.consensus_set(sets), universe)
    claims["majority"] = ids(cb.majority_set(sets), universe)
    claims["jaccard"] = {"methods": names, "matrix": cb.jaccard_matrix(sets).tolist()}
    if thresholds is not None and sensitivity_method in procedures:
        procedure = procedures[sensitivity_method]
        start_task(progress, f"threshold sensitivity of {sensitivity_method}", len(thresholds))(0)
        point_sets, point_runs = threshold_sets(procedure, source, thresholds, run_seeds)
        points = []
        for tau, members, runs_at in zip(thresholds, point_sets, point_runs, strict=True):
            metrics, _ = set_metrics(
                beta,
                members,
                runs_at,
                universe,
                truth=truth,
                weights=weights,
                cos_threshold=cos_threshold,
                min_denominator=min_denominator,
            )
            points.append({"threshold": tau, "components": members, "metrics": _composite_checked(metrics)})
        claims["threshold_sensitivity"] = {"method": sensitivity_method, "points": points}
    scenario_claims = []
    for label, scenario in scenarios.items():
        composites = {}
        for method in methods:
            value = _composite_or_none(method["metrics"], scenario)
            if value is not None:
                composites[method["name"]] = value
        order = [name for name in names if name in composites]
        scenario_claims.append(
            {
                "name": label,
                "weights": dict(scenario),
                "composites": composites,
                "ranking": ranking(composites, order),
            }
        )
    claims["weight_robustness"] = scenario_claims
    if scaling:
        if behaviour is None or behaviour.get("kind") != "planted":
            raise ValueError("scaling: the scaling study needs a planted behaviour block")
        configs = []
        advance = start_task(progress, "scaling study over planted model sizes", len(scaling))
        for index, (n_layers, n_heads) in enumerate(scaling):
            run = scaled_sets(behaviour, procedures, n_layers, n_heads)
            entry_methods = []
            for name, members in run.sets.items():
                precision, recall, f1 = cb.precision_recall_f1(set(members), run.truth)
                entry_methods.append(
                    {"name": name, "components": members, "precision": precision, "recall": recall, "f1": f1}
                )
            config: dict[str, Any] = {"n_layers": n_layers, "n_heads": n_heads, "methods": entry_methods}
            if len(entry_methods) >= 2:
                config["convergence"] = convergence_claims(
                    list(run.sets.values()), len(run.universe), settings, convergence_seed
                ).as_dict()
            configs.append(config)
            advance(index + 1)
        claims["scaling"] = configs
    return claims


def _composite_or_none(metrics: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """The composite, or None when a part is negative (the harmonic mean is undefined, MB-9)."""
    parts = {key: metrics[key] for key in weights}
    if any(value < 0.0 for value in parts.values()):
        return None
    return cb.composite(parts, weights)


def _composite_checked(metrics: dict[str, float]) -> dict[str, float]:
    """Metrics in report order, without the composite when it is undefined."""
    out = {key: metrics[key] for key in ("F", "C", "M", "S", "COS")}
    if "composite" in metrics:
        out["composite"] = metrics["composite"]
    for key in ("precision", "recall", "f1"):
        if key in metrics:
            out[key] = metrics[key]
    return out


# --------------------------------------------------------------------------- writing a report


def score_causal_bench(
    out_dir: Path,
    *,
    behaviour: str = "planted",
    n_layers: int = 4,
    n_heads: int = 4,
    seed: int = 42,
    model_dir: Path | None = None,
    dataset_path: Path | None = None,
    counterfactual_type: str | None = None,
    ablation: str = "counterfactual",
    n_examples: int | None = None,
    subsample_size: int | None = None,
    n_runs: int = 10,
    n_permutations: int = 1000,
    convergence_seed: int = 0,
    scaling: bool = True,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> CausalBenchRun:
    """Run the four methods, compute the study and write ``report.json`` (and the dataset copy).

    Args:
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        behaviour: ``planted`` or ``transformer``.
        n_layers, n_heads, seed: the planted model's size and seed (planted only).
        model_dir: a local model folder (transformer; named in the report by its folder name,
            found on verification with ``--model-root``).
        dataset_path: a counterfactual dataset document or a shipped ``.meta.json``.
        counterfactual_type: the counterfactual prompts that supply the ablation values.
        ablation: ``counterfactual``, ``mean`` or ``zero``.
        n_examples: use the first n rows of the dataset (all by default).
        subsample_size: examples per seed run (default: half of the examples).
        n_runs: K, the seed runs of the stability metric (seeds 1..K).
        n_permutations: B of the convergence test.
        convergence_seed: seed of the convergence test.
        scaling: add the scaling study (planted only).
        overwrite: replace a report already in ``out_dir``.
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    if behaviour not in ("planted", "transformer"):
        raise ValueError(f"behaviour: expected 'planted' or 'transformer', got {behaviour!r}")
    if n_runs < 2:
        raise ValueError(f"n_runs: expected at least 2 seed runs, got {n_runs}")
    settings = {**DEFAULT_SETTINGS, "n_permutations": n_permutations}
    run_seeds = list(range(1, n_runs + 1))
    if behaviour == "planted":
        if model_dir is not None or dataset_path is not None:
            raise ValueError("model_dir: a planted behaviour takes no model or dataset")
        block = {**PLANTED_BEHAVIOUR, "n_layers": n_layers, "n_heads": n_heads, "seed": seed}
        model = planted_model(block, n_layers, n_heads)
        source: BehaviourSource = PlantedSource(model)
        truth = ids(model.planted, model.universe)
        claims = study_claims(
            source,
            procedures=PAPER_PROCEDURES,
            run_seeds=run_seeds,
            settings=settings,
            convergence_seed=convergence_seed,
            truth=truth,
            thresholds=PLANTED_THRESHOLDS,
            scaling=SCALING_CONFIGS if scaling else None,
            behaviour=block,
            progress=progress,
        )
        folder = OutputFolder(Path(out_dir), overwrite=overwrite)
        report = _report(
            title=f"Four localization methods on the planted {n_layers}L/{n_heads}H circuit",
            description="The four simulated localization methods of CAUSAL-BENCH §2.3 run on the "
            "planted-circuit behaviour model (Eq. 1) with the declared seeds; every number is recomputable "
            "from this file.",
            task={"name": "planted-circuit"},
            behaviour=block,
            universe=list(model.universe),
            truth=truth,
            settings={**settings, "perturbation": source.perturbation},
            claims=claims,
            seeds=_seeds(block["seed"], convergence_seed, run_seeds),
            provenance=_provenance(torch=False),
        )
        folder.json("report.json", report)
        return CausalBenchRun(folder.root / "report.json", claims, list(model.universe), None)
    return _score_transformer(
        Path(out_dir),
        model_dir=model_dir,
        dataset_path=dataset_path,
        counterfactual_type=counterfactual_type,
        ablation=ablation,
        n_examples=n_examples,
        subsample_size=subsample_size,
        settings=settings,
        run_seeds=run_seeds,
        convergence_seed=convergence_seed,
        overwrite=overwrite,
        progress=progress,
    )


def _score_transformer(
    out_dir: Path,
    *,
    model_dir: Path | None,
    dataset_path: Path | None,
    counterfactual_type: str | None,
    ablation: str,
    n_examples: int | None,
    subsample_size: int | None,
    settings: dict[str, Any],
    run_seeds: list[int],
    convergence_seed: int,
    overwrite: bool,
    progress: Progress | None,
) -> CausalBenchRun:
    from mibspec.reference_impl.engine import load_model

    from ..behaviour.transformer import TRANSFORMER_ABLATIONS, TransformerBehaviour
    from ..recompute import ModelSource, encode_function
    from ..recompute.circuit import tokenize_pairs
    from ..threads import one_thread
    from .circuit import _dataset_input, _model_ref, _strict_rows

    if model_dir is None or dataset_path is None or counterfactual_type is None:
        raise ValueError(
            "model_dir: a transformer behaviour needs a model, a dataset and a counterfactual type"
        )
    if ablation not in TRANSFORMER_ABLATIONS:
        raise ValueError(f"ablation: expected one of {list(TRANSFORMER_ABLATIONS)}, got {ablation!r}")
    model_dir = Path(model_dir)
    model = load_model(model_dir)
    encode = encode_function(ModelSource(str(model_dir), None, local=True))
    dataset, rows_bytes = _dataset_input(Path(dataset_path))
    if counterfactual_type not in dataset.get("counterfactual_types", []):
        raise ValueError(
            f"counterfactual_type: {counterfactual_type!r} is not one of the dataset's "
            f"{dataset.get('counterfactual_types')}"
        )
    rows = _strict_rows(rows_bytes)
    lines = [line for line in rows_bytes.decode("utf-8").split("\n") if line.strip()]  # one per row
    total = len(lines)
    if n_examples is not None:
        if not 1 <= n_examples <= total:
            raise ValueError(f"n_examples: expected 1 to {total} rows, got {n_examples}")
        lines, rows = lines[:n_examples], rows[:n_examples]
    size = subsample_size if subsample_size is not None else max(1, len(rows) // 2)
    if not 1 <= size <= len(rows):
        raise ValueError(f"subsample_size: expected 1 to {len(rows)} examples, got {size}")
    clean, corrupted, mask, correct, counter = tokenize_pairs(rows, counterfactual_type, encode, "dataset")
    with one_thread():
        behaviour_model = TransformerBehaviour(
            model, clean, corrupted, mask, correct, counter, ablation=ablation
        )
        source = SubsampleSource(behaviour_model, size)
        claims = study_claims(
            source,
            procedures=TRANSFORMER_PROCEDURES,
            run_seeds=run_seeds,
            settings=settings,
            convergence_seed=convergence_seed,
            truth=None,
            thresholds=TRANSFORMER_THRESHOLDS,
            progress=progress,
        )
    folder = OutputFolder(out_dir, overwrite=overwrite, inputs=input_files([model_dir, dataset_path]))
    rows_data = ("\n".join(lines) + "\n").encode("utf-8")
    folder.write("dataset.jsonl", rows_data)
    document = dict(dataset)
    if len(lines) < total:
        document["filters"] = [
            *document.get("filters", []),
            {
                "name": "other",
                "kept": len(lines),
                "dropped": total - len(lines),
                "detail": f"first {len(lines)} rows",
            },
        ]
    document["artifacts"] = [
        folder.artifact(dataset["examples"], "dataset", "dataset.jsonl", "application/jsonl", rows=len(lines))
    ]
    provenance = _provenance(torch=True)
    document.setdefault("provenance", provenance)
    folder.json("dataset.json", document)
    block = {
        "kind": "transformer",
        "n_layers": model.n_layers,
        "n_heads": model.n_heads,
        "seed": 0,
        "ablation": ablation,
        "metric": "normalised_logit_difference",
    }
    report = _report(
        title=f"Four localization methods on {model_dir.name}, {dataset.get('task')} ({counterfactual_type})",
        description="The four localization methods of CAUSAL-BENCH §2.3 on a trained transformer: components "
        "are its heads and MLPs, the behaviour of a set is the normalised logit difference with only that "
        f"set active ({ablation} ablation of the rest); seed runs evaluate it on subsamples of "
        f"{size} of the {len(rows)} examples. There is no ground truth, so no P/R/F1.",
        task={
            "name": dataset.get("task"),
            "dataset": "dataset",
            **({"split": dataset["split"]} if dataset.get("split") else {}),
            "counterfactual_type": counterfactual_type,
            "n_examples": len(rows),
        },
        behaviour=block,
        universe=list(behaviour_model.universe),
        truth=None,
        settings={**settings, "perturbation": source.perturbation},
        claims=claims,
        seeds=_seeds(None, convergence_seed, run_seeds),
        provenance=provenance,
        model=_model_ref(model_dir, model),
        artifacts=[
            folder.artifact(
                "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
            )
        ],
    )
    folder.json("report.json", report)
    return CausalBenchRun(
        folder.root / "report.json", claims, list(behaviour_model.universe), behaviour_model.evaluations
    )


def _seeds(
    behaviour_seed: int | None, convergence_seed: int, run_seeds: Sequence[int]
) -> list[dict[str, Any]]:
    seeds = []
    if behaviour_seed is not None:
        seeds.append(
            {"purpose": "planted model: contributions and measurement noise", "value": behaviour_seed}
        )
    seeds.append({"purpose": "localization methods: identified sets", "value": 0})
    seeds.extend({"purpose": f"stability: seed run {i + 1}", "value": s} for i, s in enumerate(run_seeds))
    seeds.append({"purpose": "convergence permutation test", "value": convergence_seed})
    return seeds


def _report(
    *,
    title: str,
    description: str,
    task: dict[str, Any],
    behaviour: dict[str, Any],
    universe: list[str],
    truth: list[str] | None,
    settings: dict[str, Any],
    claims: dict[str, Any],
    seeds: list[dict[str, Any]],
    provenance: dict[str, Any],
    model: dict[str, Any] | None = None,
    artifacts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "kind": "report",
        "track": "causal_bench",
        "profile": "default",
        "title": title,
        "description": description,
        "method": {
            "name": "CAUSAL-BENCH localization methods",
            "version": "1.0",
            "description": "; ".join(f"{name}: {text}" for name, text in METHOD_TEXT.items()),
            "citation": METHOD_CITATION,
        },
        "task": task,
        "behaviour": behaviour,
    }
    if model is not None:
        report["model"] = model
    report["universe"] = universe
    if truth is not None:
        report["ground_truth"] = truth
    report |= {"settings": settings, "claims": claims, "seeds": seeds}
    if artifacts:
        report["artifacts"] = artifacts
    report["provenance"] = provenance
    return report


def _provenance(*, torch: bool) -> dict[str, Any]:
    import platform

    from mibspec.core.version import __version__

    libraries = {"numpy": np.__version__, "python": platform.python_version()}
    if torch:
        from importlib.metadata import version

        libraries |= {"torch": version("torch"), "transformers": version("transformers")}
    return {
        "tool": {"name": "mibspec", "version": __version__},
        "created": created_timestamp(),
        "libraries": dict(sorted(libraries.items())),
        "command": "mibspec score causal-bench",
    }
