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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.documents import CausalBenchReport, document_bytes
from mibspec.documents.common import Artifact, Citation, Method, Provenance, Seed, model_ref
from mibspec.documents.kinds import DatasetFilter
from mibspec.documents.report import Behaviour, CausalBenchClaims, CausalBenchSettings, TaskRef
from mibspec.metrics import causal_bench as cb

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
    scenario_composite,
    set_metrics,
    threshold_sets,
)
from ..recompute.circuit import tokenize_pairs
from .circuit import ModelAndDataset, _model_ref, dataset_artifact, dataset_files, open_model_and_dataset
from .folder import OutputFolder, score_provenance

__all__ = [
    "DEFAULT_SETTINGS",
    "PLANTED_BEHAVIOUR",
    "TRANSFORMER_PROCEDURES",
    "TRANSFORMER_THRESHOLDS",
    "CausalBenchOptions",
    "CausalBenchResult",
    "CausalBenchRun",
    "StudyOptions",
    "TransformerRows",
    "build_causal_bench_files",
    "compute_causal_bench",
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
class StudyOptions:
    """What :func:`study_claims` runs (see the module docstring).

    Attributes:
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
    """

    procedures: Mapping[str, Procedure]
    run_seeds: Sequence[int]
    settings: Mapping[str, Any]
    convergence_seed: int
    truth: Sequence[str] | None
    thresholds: Sequence[float] | None
    sensitivity_method: str = "activation_patching"
    scenarios: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: DEFAULT_WEIGHT_SCENARIOS)
    scaling: Sequence[tuple[int, int]] | None = None
    behaviour: Mapping[str, Any] | None = None
    min_denominator: float = 1e-6

    def metrics(
        self, beta: Any, members: Sequence[str], runs: Sequence[Sequence[str]], universe: list[str]
    ) -> dict[str, float]:
        """F, C, M, S, COS, the composite (and P/R/F1 against the truth) of one set, in report order."""
        metrics, _ = self.metrics_and_reduced(beta, members, runs, universe)
        return metrics

    def metrics_and_reduced(
        self, beta: Any, members: Sequence[str], runs: Sequence[Sequence[str]], universe: list[str]
    ) -> tuple[dict[str, float], list[str]]:
        """:meth:`metrics` and the COS-reduced set."""
        metrics, reduced = set_metrics(
            beta,
            members,
            runs,
            universe,
            truth=self.truth,
            weights=self.settings["weights"],
            cos_threshold=self.settings.get("cos_threshold", cb.DEFAULT_COS_THRESHOLD),
            min_denominator=self.min_denominator,
        )
        return _composite_checked(metrics), reduced


def study_claims(
    source: BehaviourSource, study: StudyOptions, progress: Progress | None = None
) -> dict[str, Any]:
    """The claims block of a CAUSAL-BENCH report (see the module docstring).

    Args:
        source: the behaviour of the main run and of each seed perturbation.
        study: the methods, seeds, settings and studies to run.
        progress: where to report progress (``None``: nowhere).
    """
    universe = list(source.universe)
    beta = source.oracle(None)
    methods = _method_claims(source, beta, study, progress)
    sets = [m["components"] for m in methods]
    names = [m["name"] for m in methods]
    claims: dict[str, Any] = {"methods": methods}
    if len(methods) >= 2:
        claims["convergence"] = convergence_claims(
            sets, len(universe), study.settings, study.convergence_seed
        ).as_dict()
    claims["consensus"] = ids(cb.consensus_set(sets), universe)
    claims["majority"] = ids(cb.majority_set(sets), universe)
    claims["jaccard"] = {"methods": names, "matrix": cb.jaccard_matrix(sets).tolist()}
    if study.thresholds is not None and study.sensitivity_method in study.procedures:
        claims["threshold_sensitivity"] = _sensitivity_claims(source, beta, study, progress)
    claims["weight_robustness"] = [
        _scenario_claims(label, scenario, methods) for label, scenario in study.scenarios.items()
    ]
    if study.scaling:
        claims["scaling"] = _scaling_claims(study, progress)
    return claims


def _method_claims(
    source: BehaviourSource, beta: Any, study: StudyOptions, progress: Progress | None
) -> list[dict[str, Any]]:
    """Each method's procedure, identified set, seed runs, COS-reduced set and metrics."""
    universe = list(source.universe)
    done = start_task(
        progress,
        "localization methods and their seed runs",
        len(study.procedures) * (1 + len(study.run_seeds)),
    )
    step = 0
    methods: list[dict[str, Any]] = []
    for name, procedure in study.procedures.items():
        main = ids(identify(procedure, beta, procedure.seed), universe)
        step += 1
        done(step)
        runs: list[dict[str, Any]] = []
        for seed in study.run_seeds:
            runs.append(
                {"seed": seed, "components": ids(identify(procedure, source.oracle(seed), seed), universe)}
            )
            step += 1
            done(step)
        metrics, reduced = study.metrics_and_reduced(
            beta, main, [run["components"] for run in runs], universe
        )
        methods.append(
            {
                "name": name,
                "procedure": procedure.as_dict(),
                "components": main,
                "runs": runs,
                "reduced": reduced,
                "metrics": metrics,
            }
        )
    return methods


def _sensitivity_claims(
    source: BehaviourSource, beta: Any, study: StudyOptions, progress: Progress | None
) -> dict[str, Any]:
    """The sensitivity method's set and metrics at each threshold."""
    assert study.thresholds is not None
    method = study.sensitivity_method
    start_task(progress, f"threshold sensitivity of {method}", len(study.thresholds))(0)
    point_sets, point_runs = threshold_sets(
        study.procedures[method], source, study.thresholds, study.run_seeds
    )
    universe = list(source.universe)
    points = [
        {"threshold": tau, "components": members, "metrics": study.metrics(beta, members, runs_at, universe)}
        for tau, members, runs_at in zip(study.thresholds, point_sets, point_runs, strict=True)
    ]
    return {"method": method, "points": points}


def _scenario_claims(
    label: str, scenario: Mapping[str, float], methods: list[dict[str, Any]]
) -> dict[str, Any]:
    """The methods' composites and ranking under one weight configuration."""
    composites = {}
    for method in methods:
        value = scenario_composite(method["metrics"], scenario)
        if value is not None:
            composites[method["name"]] = value
    order = [method["name"] for method in methods if method["name"] in composites]
    return {
        "name": label,
        "weights": dict(scenario),
        "composites": composites,
        "ranking": ranking(composites, order),
    }


def _scaling_claims(study: StudyOptions, progress: Progress | None) -> list[dict[str, Any]]:
    """Sets, P/R/F1 and the convergence test of the methods on each planted size."""
    assert study.scaling
    if study.behaviour is None or study.behaviour.get("kind") != "planted":
        raise ValueError("scaling: the scaling study needs a planted behaviour block")
    configs = []
    advance = start_task(progress, "scaling study over planted model sizes", len(study.scaling))
    for index, (n_layers, n_heads) in enumerate(study.scaling):
        run = scaled_sets(study.behaviour, study.procedures, n_layers, n_heads)
        entry_methods = []
        for name, members in run.sets.items():
            precision, recall, f1 = cb.precision_recall_f1(set(members), run.truth)
            entry_methods.append(
                {"name": name, "components": members, "precision": precision, "recall": recall, "f1": f1}
            )
        config: dict[str, Any] = {"n_layers": n_layers, "n_heads": n_heads, "methods": entry_methods}
        if len(entry_methods) >= 2:
            config["convergence"] = convergence_claims(
                list(run.sets.values()), len(run.universe), study.settings, study.convergence_seed
            ).as_dict()
        configs.append(config)
        advance(index + 1)
    return configs


def _composite_checked(metrics: dict[str, float]) -> dict[str, float]:
    """Metrics in report order, without the composite when it is undefined."""
    out = {key: metrics[key] for key in ("F", "C", "M", "S", "COS")}
    if "composite" in metrics:
        out["composite"] = metrics["composite"]
    for key in ("precision", "recall", "f1"):
        if key in metrics:
            out[key] = metrics[key]
    return out


# --------------------------------------------------------------------------- options and compute


@dataclass(frozen=True)
class CausalBenchOptions:
    """What ``mibspec score causal-bench`` asks :func:`score_causal_bench` for.

    Attributes:
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
        device: where the transformer computes (``cpu``, ``cuda:N``, ``mps``).
    """

    out_dir: Path
    behaviour: str = "planted"
    n_layers: int = 4
    n_heads: int = 4
    seed: int = 42
    model_dir: Path | None = None
    dataset_path: Path | None = None
    counterfactual_type: str | None = None
    ablation: str = "counterfactual"
    n_examples: int | None = None
    subsample_size: int | None = None
    n_runs: int = 10
    n_permutations: int = 1000
    convergence_seed: int = 0
    scaling: bool = True
    overwrite: bool = False
    device: str = "cpu"

    def check(self) -> None:
        """Raises ValueError for an unknown behaviour or fewer than two seed runs."""
        if self.behaviour not in ("planted", "transformer"):
            raise ValueError(f"behaviour: expected 'planted' or 'transformer', got {self.behaviour!r}")
        if self.n_runs < 2:
            raise ValueError(f"n_runs: expected at least 2 seed runs, got {self.n_runs}")

    @property
    def settings(self) -> dict[str, Any]:
        """The report's settings, without the perturbation."""
        return {**DEFAULT_SETTINGS, "n_permutations": self.n_permutations}

    @property
    def run_seeds(self) -> list[int]:
        return list(range(1, self.n_runs + 1))

    def study(
        self,
        procedures: Mapping[str, Procedure],
        truth: Sequence[str] | None,
        thresholds: Sequence[float],
        *,
        scaling: Sequence[tuple[int, int]] | None = None,
        behaviour: Mapping[str, Any] | None = None,
    ) -> StudyOptions:
        """The study of these options' seeds and settings."""
        return StudyOptions(
            procedures=procedures,
            run_seeds=self.run_seeds,
            settings=self.settings,
            convergence_seed=self.convergence_seed,
            truth=truth,
            thresholds=thresholds,
            scaling=scaling,
            behaviour=behaviour,
        )


@dataclass(frozen=True)
class TransformerRows:
    """The model and the dataset rows a transformer study ran on."""

    inputs: ModelAndDataset
    rows: list[dict[str, Any]]  # the rows used
    lines: list[str]  # the same rows, one JSON line each
    total: int  # the dataset's rows
    subsample_size: int


@dataclass(frozen=True)
class CausalBenchResult:
    """What :func:`compute_causal_bench` computed."""

    claims: dict[str, Any]
    universe: list[str]
    behaviour: dict[str, Any]  # the report's behaviour block
    truth: list[str] | None
    settings: dict[str, Any]  # the report's settings, with the perturbation
    evaluations: int | None  # behaviour evaluations of a transformer
    transformer: TransformerRows | None = None


@dataclass(frozen=True)
class CausalBenchRun:
    """What :func:`score_causal_bench` wrote and computed."""

    report: Path
    claims: dict[str, Any]
    universe: list[str]
    evaluations: int | None


def score_causal_bench(options: CausalBenchOptions, progress: Progress | None = None) -> CausalBenchRun:
    """Run the four methods, compute the study and write ``report.json`` (and the dataset copy).

    Args:
        options: the behaviour, the study's sizes and seeds, and where to write.
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    result = compute_causal_bench(options, progress)
    files = build_causal_bench_files(options, result)
    inputs = input_files([options.model_dir, options.dataset_path]) if result.transformer else None
    folder = OutputFolder(Path(options.out_dir), overwrite=options.overwrite, inputs=inputs)
    folder.write_all(files)
    return CausalBenchRun(folder.root / "report.json", result.claims, result.universe, result.evaluations)


def compute_causal_bench(options: CausalBenchOptions, progress: Progress | None = None) -> CausalBenchResult:
    """The study's claims on the options' planted model or transformer."""
    options.check()
    if options.behaviour == "planted":
        return _compute_planted(options, progress)
    return _compute_transformer(options, progress)


def _compute_planted(options: CausalBenchOptions, progress: Progress | None) -> CausalBenchResult:
    if options.model_dir is not None or options.dataset_path is not None:
        raise ValueError("model_dir: a planted behaviour takes no model or dataset")
    _check_planted_size(options)
    block = {
        **PLANTED_BEHAVIOUR,
        "n_layers": options.n_layers,
        "n_heads": options.n_heads,
        "seed": options.seed,
    }
    model = planted_model(block, options.n_layers, options.n_heads)
    source = PlantedSource(model)
    truth = ids(model.planted, model.universe)
    scaling = SCALING_CONFIGS if options.scaling else None
    study = options.study(PAPER_PROCEDURES, truth, PLANTED_THRESHOLDS, scaling=scaling, behaviour=block)
    claims = study_claims(source, study, progress)
    settings = {**options.settings, "perturbation": source.perturbation}
    return CausalBenchResult(claims, list(model.universe), block, truth, settings, None)


def _check_planted_size(options: CausalBenchOptions) -> None:
    """Before any work: the study's size within the limits ``mibspec verify`` recomputes it
    under by default (the estimate of its recompute stage, :mod:`..recompute.work`).

    Raises:
        ValueError: naming the options and what they would take.
    """
    from mibspec.core.strict_json import DEFAULT_LIMITS
    from mibspec.core.work import over_limits

    from ..recompute.work import planted_study

    kinds = [procedure.kind for procedure in PAPER_PROCEDURES.values()]
    works = planted_study(
        options.n_layers, options.n_heads, kinds, options.n_runs, n_permutations=options.n_permutations
    )
    over = over_limits(works, DEFAULT_LIMITS)
    if over is not None:
        work, why, _ = over
        raise ValueError(
            f"n_layers, n_heads, n_runs, n_permutations: {work.what} {why} (the default limits under which "
            "the report would be verified); choose a smaller study"
        )


def _compute_transformer(options: CausalBenchOptions, progress: Progress | None) -> CausalBenchResult:
    from ..behaviour.transformer import TRANSFORMER_ABLATIONS, TransformerBehaviour  # torch
    from ..threads import one_thread

    if options.model_dir is None or options.dataset_path is None or options.counterfactual_type is None:
        raise ValueError(
            "model_dir: a transformer behaviour needs a model, a dataset and a counterfactual type"
        )
    if options.ablation not in TRANSFORMER_ABLATIONS:
        raise ValueError(f"ablation: expected one of {list(TRANSFORMER_ABLATIONS)}, got {options.ablation!r}")
    inputs = open_model_and_dataset(
        Path(options.model_dir), options.dataset_path, options.counterfactual_type, options.device
    )
    rows = _transformer_rows(inputs, options)
    tokens = tokenize_pairs(rows.rows, options.counterfactual_type, inputs.encode, "dataset")
    with one_thread():
        behaviour_model = TransformerBehaviour(inputs.model, *tokens, ablation=options.ablation)
        source = SubsampleSource(behaviour_model, rows.subsample_size)
        study = options.study(TRANSFORMER_PROCEDURES, None, TRANSFORMER_THRESHOLDS)
        claims = study_claims(source, study, progress)
    block = {
        "kind": "transformer",
        "n_layers": inputs.model.n_layers,
        "n_heads": inputs.model.n_heads,
        "seed": 0,
        "ablation": options.ablation,
        "metric": "normalised_logit_difference",
    }
    settings = {**options.settings, "perturbation": source.perturbation}
    universe = list(behaviour_model.universe)
    return CausalBenchResult(claims, universe, block, None, settings, behaviour_model.evaluations, rows)


def _transformer_rows(inputs: ModelAndDataset, options: CausalBenchOptions) -> TransformerRows:
    """The first ``n_examples`` rows (all by default) and the seed runs' subsample size."""
    lines = [line for line in inputs.rows_bytes.decode("utf-8").split("\n") if line.strip()]  # one per row
    total, rows, n_examples = len(lines), inputs.rows, options.n_examples
    if n_examples is not None:
        if not 1 <= n_examples <= total:
            raise ValueError(f"n_examples: expected 1 to {total} rows, got {n_examples}")
        lines, rows = lines[:n_examples], rows[:n_examples]
    size = options.subsample_size if options.subsample_size is not None else max(1, len(rows) // 2)
    if not 1 <= size <= len(rows):
        raise ValueError(f"subsample_size: expected 1 to {len(rows)} examples, got {size}")
    return TransformerRows(inputs, rows, lines, total, size)


# --------------------------------------------------------------------------- build the documents


def build_causal_bench_files(options: CausalBenchOptions, result: CausalBenchResult) -> dict[str, bytes]:
    """The report folder's files by name, in writing order: a transformer's dataset copy, then
    ``report.json``."""
    if result.transformer is not None:
        return _transformer_files(options, result, result.transformer)
    report = _report(
        result,
        title=f"Four localization methods on the planted {options.n_layers}L/{options.n_heads}H circuit",
        description="The four simulated localization methods of CAUSAL-BENCH §2.3 run on the "
        "planted-circuit behaviour model (Eq. 1) with the declared seeds; every number is recomputable "
        "from this file.",
        task={"name": "planted-circuit"},
        seeds=_seeds(result.behaviour["seed"], options.convergence_seed, options.run_seeds),
        provenance=_provenance(torch=False),
    )
    return {"report.json": document_bytes(report)}


def _transformer_files(
    options: CausalBenchOptions, result: CausalBenchResult, rows: TransformerRows
) -> dict[str, bytes]:
    dataset = document = rows.inputs.dataset
    n_lines = len(rows.lines)
    if n_lines < rows.total:
        first_rows = DatasetFilter(
            name="other", kept=n_lines, dropped=rows.total - n_lines, detail=f"first {n_lines} rows"
        )
        document = dataset.model_copy(update={"filters": [*dataset.filters, first_rows]})
    provenance = _provenance(torch=True)
    files = dataset_files(document, ("\n".join(rows.lines) + "\n").encode("utf-8"), n_lines, provenance)
    model_name, n = Path(str(options.model_dir)).name, len(rows.rows)
    task = f"{dataset.task} ({options.counterfactual_type})"
    report = _report(
        result,
        title=f"Four localization methods on {model_name}, {task}",
        description="The four localization methods of CAUSAL-BENCH §2.3 on a trained transformer: components "
        "are its heads and MLPs, the behaviour of a set is the normalised logit difference with only that "
        f"set active ({options.ablation} ablation of the rest); seed runs evaluate it on subsamples of "
        f"{rows.subsample_size} of the {n} examples. There is no ground truth, so no P/R/F1.",
        task={
            "name": dataset.task,
            "dataset": "dataset",
            "split": dataset.split,
            "counterfactual_type": options.counterfactual_type,
            "n_examples": n,
        },
        seeds=_seeds(None, options.convergence_seed, options.run_seeds),
        provenance=provenance,
        model=_model_ref(Path(str(options.model_dir)), rows.inputs.model),
        artifacts=[dataset_artifact(files)],
    )
    files["report.json"] = document_bytes(report)
    return files


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
    result: CausalBenchResult,
    *,
    title: str,
    description: str,
    task: dict[str, Any],
    seeds: list[dict[str, Any]],
    provenance: dict[str, Any],
    model: dict[str, Any] | None = None,
    artifacts: list[dict[str, Any]] | None = None,
) -> CausalBenchReport:
    optional: dict[str, Any] = {}
    if model is not None:
        optional["model"] = model_ref(model)
    if result.truth is not None:
        optional["ground_truth"] = result.truth
    if artifacts:
        optional["artifacts"] = [Artifact.model_validate(entry) for entry in artifacts]
    return CausalBenchReport(
        profile="default",
        title=title,
        description=description,
        method=Method(
            name="CAUSAL-BENCH localization methods",
            version="1.0",
            description="; ".join(f"{name}: {text}" for name, text in METHOD_TEXT.items()),
            citation=Citation.model_validate(METHOD_CITATION),
        ),
        task=TaskRef.model_validate(task),
        behaviour=Behaviour.model_validate(result.behaviour),
        universe=result.universe,
        settings=CausalBenchSettings.model_validate(result.settings),
        claims=CausalBenchClaims.model_validate(result.claims),
        seeds=[Seed.model_validate(seed) for seed in seeds],
        provenance=Provenance.model_validate(provenance),
        **optional,
    )


def _provenance(*, torch: bool) -> dict[str, Any]:
    libraries = ("numpy", "python", "torch", "transformers") if torch else ("numpy", "python")
    return score_provenance("mibspec score causal-bench", libraries)
