"""Recompute a CAUSAL-BENCH report: re-run the declared procedures, recompute every claim.

Normative text: ``spec/v1/SPEC.md`` (R-2, R-3) and ``spec/v1/metrics/causal_bench.md``
(MB-15 to MB-20). Steps:

1. rebuild the behaviour: the planted model of ``behaviour`` (MB-15; ``ground_truth`` as
   S* when declared), or the transformer behaviour of the declared model, dataset,
   counterfactual type and ablation (MB-17; needs the recompute extra);
2. for every method with a ``procedure``: re-run it with its seed and with each seed run's
   seed (under the declared perturbation) and compare the identified sets;
3. recompute every number from the *declared* sets: F, C, COS and the reduced set from the
   behaviour; M, S, P/R/F1, the composite; the convergence test from its seed; consensus,
   majority and the Jaccard matrix; each threshold-sensitivity point (its set re-thresholded,
   its metrics, S from the re-thresholded seed runs); every weight configuration's
   composites; each scaling configuration (sets re-run on the planted model of that size,
   P/R/F1, convergence).

One comparison per claimed number. A set is compared as the number of components that
differ from the re-run (claimed 0, exact); the differing components are named in the
comparison. Numbers that depend on a transformer behaviour use the profile's recomputation
tolerance for the model's dtype; all others (and everything of a planted model, which
involves no model) the profile's consistency tolerance.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from mibspec.core.comparisons import Comparison, Recomputation, recompute_tolerance
from mibspec.core.conventions import effective_settings
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RecomputeContext
from mibspec.metrics import causal_bench as cb
from mibspec.reference_impl.threads import one_thread

from ..behaviour.localization import Procedure, identify, procedure_scores
from ..behaviour.planted import component_universe, default_planted
from ..behaviour.study import (
    BehaviourSource,
    PlantedSource,
    SubsampleSource,
    convergence_claims,
    ids,
    planted_model,
    scenario_composite,
    set_metrics,
)
from ._inputs import UnusableInputError, error_findings

__all__ = ["recompute"]

_TRANSFORMER_MODULES = ("torch", "safetensors", "transformers", "tokenizers")
_METRIC_KEYS = ("F", "C", "M", "S", "COS", "composite", "precision", "recall", "f1")
_BEHAVIOUR_KEYS = frozenset({"F", "C", "COS", "composite"})


def recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation:
    """The report's claims recomputed: its comparisons, findings and the model files used."""
    with Recomputation().until_stopped() as out:
        try:
            out.extend(_recompute(ctx, progress, out))
        except UnusableInputError as exc:
            out.findings.extend(error_findings(ctx, exc))
    return out


class _Comparisons:
    """Collects comparisons under two tolerances: behaviour-dependent and set-only numbers."""

    def __init__(self, behaviour_tol: tuple[float, float], exact_tol: tuple[float, float]) -> None:
        self.items: list[Comparison] = []
        self.behaviour_tol = behaviour_tol
        self.exact_tol = exact_tol

    def number(
        self, pointer: str, quantity: str, claimed: Any, value: float | None, *, behaviour: bool
    ) -> None:
        abs_tol, rel_tol = self.behaviour_tol if behaviour else self.exact_tol
        recomputed = float("nan") if value is None else float(value)
        self.items.append(
            Comparison(
                pointer, quantity, None if claimed is None else float(claimed), recomputed, abs_tol, rel_tol
            )
        )

    def members(
        self,
        pointer: str,
        what: str,
        claimed: Iterable[str],
        recomputed: Iterable[str],
        universe: Sequence[str],
    ) -> None:
        differ = set(claimed) ^ set(recomputed)
        named = ids(differ, universe) + sorted(c for c in differ if c not in set(universe))
        quantity = f"{what}: components not reproduced" + (f" ({', '.join(named)})" if named else "")
        self.items.append(Comparison(pointer, quantity, 0.0, float(len(differ)), 0.0, 0.0))


def _recompute(ctx: RecomputeContext, progress: Progress, out: Recomputation) -> Recomputation:
    """The comparisons; what opening a transformer's model produces goes into ``out``."""
    # The p-value convention is the report's, else its profile's (a binding profile's always).
    report = {**ctx.data, "settings": effective_settings(ctx.profile, ctx.data)}
    behaviour = report["behaviour"]
    consistency = ctx.profile["consistency"]
    exact = (float(consistency["abs"]), float(consistency["rel"]))
    if behaviour["kind"] == "planted":
        source: BehaviourSource = _planted_source(report)
        checks = _Comparisons(exact, exact)
        _study(report, source, checks, progress, planted=True)
        return Recomputation(comparisons=checks.items)
    missing = [name for name in _TRANSFORMER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        from mibspec.core.spec import install_hint

        raise UnusableInputError(
            "/behaviour",
            f"recomputing a transformer behaviour needs {', '.join(missing)}: {install_hint('recompute')}, "
            "or pass --no-recompute to check the report without it",
        )
    dtype = (report.get("model") or {}).get("dtype", "float32")
    checks = _Comparisons(recompute_tolerance(ctx.profile, dtype), exact)
    with one_thread():
        source = _transformer_source(ctx, progress, out)
        if "n_examples" in report["task"]:
            rows = source.source.n_examples  # type: ignore[attr-defined]
            claimed = float(report["task"]["n_examples"])
            checks.items.append(Comparison("/task/n_examples", "examples", claimed, float(rows), 0.0, 0.0))
        _study(report, source, checks, progress, planted=False)
    return Recomputation(comparisons=checks.items)


# --------------------------------------------------------------------------- behaviours


def _planted_source(report: Mapping[str, Any]) -> PlantedSource:
    behaviour = report["behaviour"]
    L, H = behaviour.get("n_layers"), behaviour.get("n_heads")
    if L is None or H is None:
        raise UnusableInputError(
            "/behaviour", "a planted behaviour must declare n_layers and n_heads (MB-15)"
        )
    universe = list(component_universe(L, H))
    if report["universe"] != universe:
        raise UnusableInputError(
            "/universe", f"the universe is not the canonical one of the planted {L}L/{H}H model (MB-15)"
        )
    truth = report.get("ground_truth")
    if truth is not None and (not truth or not set(truth) <= set(universe)):
        raise UnusableInputError(
            "/ground_truth", "the planted set must be a non-empty subset of the universe"
        )
    perturbation = report["settings"].get("perturbation")
    if perturbation is not None and perturbation["kind"] != "method_noise":
        raise UnusableInputError(
            "/settings/perturbation/kind",
            "a planted behaviour has no examples to subsample; use method_noise",
        )
    try:
        return PlantedSource(planted_model(behaviour, L, H, truth))
    except ValueError as exc:
        raise UnusableInputError("/behaviour", f"the planted model cannot be built: {exc}") from exc


def _transformer_source(ctx: RecomputeContext, progress: Progress, out: Recomputation) -> BehaviourSource:
    from ..behaviour.transformer import TransformerBehaviour
    from ._inputs import encode_function, load_referenced_document, open_model, read_rows
    from .circuit import tokenize_pairs
    from .declarations import recompute_gaps

    report = ctx.data
    behaviour, task = report["behaviour"], report["task"]
    gaps = recompute_gaps(report, ctx.profile)
    if gaps:
        raise UnusableInputError(*gaps[0])
    dtype = report["model"].get("dtype", "float32")
    source, model = open_model(ctx, progress, dtype, out)
    universe = list(component_universe(model.n_layers, model.n_heads))
    if report["universe"] != universe:
        raise UnusableInputError(
            "/universe",
            "the universe is not the canonical one of the model's "
            f"{model.n_layers} layers × {model.n_heads} heads (MB-17)",
        )
    encode = encode_function(source)
    dataset, folder = load_referenced_document(
        ctx, task["dataset"], "/task/dataset", "counterfactual_dataset"
    )
    rows = read_rows(dataset, folder, "/task/dataset", ctx.limits)
    tokens = tokenize_pairs(rows, task["counterfactual_type"], encode, "/task/dataset", model=model)
    try:
        behaviour_model = TransformerBehaviour(
            model,
            *tokens,
            ablation=behaviour.get("ablation") or "counterfactual",
            min_denominator=ctx.profile["faithfulness_min_denominator"],
        )
    except ValueError as exc:
        raise UnusableInputError(
            "/behaviour", f"the transformer behaviour cannot be evaluated: {exc}"
        ) from exc
    perturbation = report["settings"].get("perturbation") or {"kind": "method_noise"}
    if perturbation["kind"] == "method_noise":
        return _FixedSource(behaviour_model)
    size = perturbation.get("subsample_size")
    if size is None or size > behaviour_model.n_examples:
        raise UnusableInputError(
            "/settings/perturbation",
            "a subsample perturbation needs subsample_size between 1 and the "
            f"{behaviour_model.n_examples} examples",
        )
    return SubsampleSource(behaviour_model, size)


class _FixedSource(BehaviourSource):
    """``method_noise`` on a transformer: every run sees β on all examples."""

    def __init__(self, behaviour_model: Any) -> None:
        self.source = behaviour_model
        self.universe = behaviour_model.universe
        self.perturbation = {"kind": "method_noise"}
        self._oracle: Any = None

    def oracle(self, seed: int | None) -> Any:
        if self._oracle is None:
            self._oracle = self.source.behaviour()
        return self._oracle


@contextlib.contextmanager
def _degenerate(pointer: str) -> Iterator[None]:
    try:
        yield
    except cb.DegenerateBehaviourError as exc:
        raise UnusableInputError(pointer, f"the behaviour cannot be normalised: {exc}") from exc


# --------------------------------------------------------------------------- the study


def _procedure(method: Mapping[str, Any], pointer: str) -> Procedure | None:
    data = method.get("procedure")
    if data is None:
        return None
    try:
        return Procedure.from_dict(data)
    except ValueError as exc:
        raise UnusableInputError(f"{pointer}/procedure", f"the procedure cannot be run: {exc}") from exc


def _study(
    report: Mapping[str, Any],
    source: BehaviourSource,
    checks: _Comparisons,
    progress: Progress,
    *,
    planted: bool,
) -> None:
    claims = report["claims"]
    universe = list(source.universe)
    truth = report.get("ground_truth")
    if planted and truth is None:
        truth = ids(source.oracle(None).planted, universe)  # type: ignore[attr-defined]
    behaviour_dependent = not planted
    with _degenerate("/behaviour"):
        beta = source.oracle(None)
    recomputed = _methods(report, source, beta, checks, progress, truth, behaviour_dependent)
    _set_checks(report, checks, universe)
    if claims.get("threshold_sensitivity") is not None:
        _sensitivity(report, source, checks, progress, truth, behaviour_dependent)
    _weight_robustness(claims, recomputed, checks, behaviour_dependent)
    if claims.get("scaling"):
        if not planted:
            raise UnusableInputError("/claims/scaling", "the scaling study needs a planted behaviour (MB-20)")
        _scaling(report, checks, progress)


def _methods(
    report: Mapping[str, Any],
    source: BehaviourSource,
    beta: Any,
    checks: _Comparisons,
    progress: Progress,
    truth: Any,
    behaviour_dependent: bool,
) -> dict[str, dict[str, float]]:
    """Every method's sets re-identified (when it names a procedure) and its metrics recomputed."""
    settings = report["settings"]
    universe = list(source.universe)
    weights = settings["weights"]
    cos_threshold = settings.get("cos_threshold", cb.DEFAULT_COS_THRESHOLD)
    methods = report["claims"]["methods"]
    total = sum(1 + len(m["runs"]) for m in methods if m.get("procedure"))
    progress.start("re-running localization methods", total)
    recomputed: dict[str, dict[str, float]] = {}
    for index, method in enumerate(methods):
        base = f"/claims/methods/{index}"
        name = method["name"]
        procedure = _procedure(method, base)
        if procedure is not None:
            _identified(method, base, procedure, source, beta, checks, progress)
        with _degenerate("/behaviour"):
            metrics, reduced = set_metrics(
                beta,
                method["components"],
                [run["components"] for run in method["runs"]],
                universe,
                truth=truth,
                weights=weights,
                cos_threshold=cos_threshold,
            )
        recomputed[name] = metrics
        if method.get("reduced") is not None:
            checks.members(
                f"{base}/reduced", f"{name}, COS-reduced set", method["reduced"], reduced, universe
            )
        _metric_checks(checks, f"{base}/metrics", name, method["metrics"], metrics, behaviour_dependent)
    return recomputed


def _identified(
    method: Mapping[str, Any],
    base: str,
    procedure: Any,
    source: BehaviourSource,
    beta: Any,
    checks: _Comparisons,
    progress: Progress,
) -> None:
    """The method's procedure re-run: its identified set, then one set per seed run."""
    universe = list(source.universe)
    name = method["name"]
    with _degenerate("/behaviour"):
        found = identify(procedure, beta, procedure.seed)
        checks.members(
            f"{base}/components",
            f"{name}, identified set",
            method["components"],
            ids(found, universe),
            universe,
        )
        progress.advance()
        for r, run in enumerate(method["runs"]):
            again = identify(procedure, source.oracle(run["seed"]), run["seed"])
            checks.members(
                f"{base}/runs/{r}/components",
                f"{name}, seed run {run['seed']}",
                run["components"],
                ids(again, universe),
                universe,
            )
            progress.advance()


def _set_checks(report: Mapping[str, Any], checks: _Comparisons, universe: list[Any]) -> None:
    """Convergence, consensus and majority sets and the Jaccard matrix over the methods' sets."""
    claims, settings = report["claims"], report["settings"]
    methods = claims["methods"]
    sets = [method["components"] for method in methods]
    if claims.get("convergence") is not None:
        _convergence_checks(
            checks,
            "/claims/convergence",
            claims["convergence"],
            sets,
            len(universe),
            settings,
            "convergence,",
        )
    for key, compute in (("consensus", cb.consensus_set), ("majority", cb.majority_set)):
        if claims.get(key) is not None:
            checks.members(
                f"/claims/{key}", f"{key} set", claims[key], compute([set(s) for s in sets]), universe
            )
    jaccard = claims.get("jaccard")
    if jaccard is not None and jaccard["methods"] == [m["name"] for m in methods]:
        matrix = cb.jaccard_matrix([set(s) for s in sets])
        for i, row in enumerate(jaccard["matrix"]):
            for j, value in enumerate(row):
                if i < len(sets) and j < len(sets):
                    checks.number(
                        f"/claims/jaccard/matrix/{i}/{j}",
                        f"Jaccard({methods[i]['name']}, {methods[j]['name']})",
                        value,
                        float(matrix[i, j]),
                        behaviour=False,
                    )


def _weight_robustness(
    claims: Mapping[str, Any],
    recomputed: dict[str, dict[str, float]],
    checks: _Comparisons,
    behaviour_dependent: bool,
) -> None:
    """Each scenario's composites recomputed from the methods' recomputed metrics."""
    for s, scenario in enumerate(claims.get("weight_robustness") or []):
        for name, claimed in scenario["composites"].items():
            parts = recomputed.get(name)
            value = None if parts is None else scenario_composite(parts, scenario["weights"])
            checks.number(
                f"/claims/weight_robustness/{s}/composites/{escape_pointer_token(name)}",
                f"composite of {name} under weights {scenario['name']!r}",
                claimed,
                value,
                behaviour=behaviour_dependent,
            )


def _metric_checks(
    checks: _Comparisons,
    base: str,
    label: str,
    claimed: Mapping[str, Any],
    values: Mapping[str, float],
    behaviour_dependent: bool,
) -> None:
    for key in _METRIC_KEYS:
        if key not in claimed and not (key == "composite" and key in values):
            continue
        checks.number(
            f"{base}/{key}",
            f"{label}, {key}",
            claimed.get(key),
            values.get(key),
            behaviour=behaviour_dependent and key in _BEHAVIOUR_KEYS,
        )


def _convergence_checks(
    checks: _Comparisons,
    base: str,
    claimed: Mapping[str, Any],
    sets: Sequence[Iterable[str]],
    universe_size: int,
    settings: Mapping[str, Any],
    label: str = "convergence",
) -> None:
    test = convergence_claims(
        sets, universe_size, {**settings, "n_permutations": claimed["n_permutations"]}, claimed["seed"]
    )
    for key, value in (
        ("j_obs", test.j_obs),
        ("null_mean", test.null_mean),
        ("null_std", test.null_std),
        ("z", test.z),
        ("p", test.p),
    ):
        if key in claimed or (key == "z" and value is not None):
            checks.number(f"{base}/{key}", f"{label} {key}", claimed.get(key), value, behaviour=False)


def _sensitivity(
    report: Mapping[str, Any],
    source: BehaviourSource,
    checks: _Comparisons,
    progress: Progress,
    truth: Sequence[str] | None,
    behaviour_dependent: bool,
) -> None:
    claims, settings = report["claims"], report["settings"]
    study = claims["threshold_sensitivity"]
    pointer = "/claims/threshold_sensitivity"
    method = next((m for m in claims["methods"] if m["name"] == study["method"]), None)
    if method is None:
        raise UnusableInputError(f"{pointer}/method", f"no method is named {study['method']!r}")
    procedure = _procedure(method, pointer)
    if procedure is None or not procedure.thresholded:
        raise UnusableInputError(
            f"{pointer}/method", f"{study['method']!r} has no thresholded procedure to vary the threshold of"
        )
    universe = list(source.universe)
    seeds = [run["seed"] for run in method["runs"]]
    progress.start(f"threshold sensitivity of {study['method']}", len(study["points"]))
    with _degenerate("/behaviour"):
        beta = source.oracle(None)
        main = procedure_scores(procedure, beta, procedure.seed)
        runs = [procedure_scores(procedure, source.oracle(seed), seed) for seed in seeds]
        for p, point in enumerate(study["points"]):
            base = f"{pointer}/points/{p}"
            tau = point["threshold"]
            label = f"{study['method']} at threshold {tau:g}"
            checks.members(
                f"{base}/components", label, point["components"], ids(main > tau, universe), universe
            )
            metrics, _ = set_metrics(
                beta,
                point["components"],
                [ids(scores > tau, universe) for scores in runs],
                universe,
                truth=truth,
                weights=settings["weights"],
                cos_threshold=settings.get("cos_threshold", cb.DEFAULT_COS_THRESHOLD),
            )
            _metric_checks(checks, f"{base}/metrics", label, point["metrics"], metrics, behaviour_dependent)
            progress.advance()


def _scaling(report: Mapping[str, Any], checks: _Comparisons, progress: Progress) -> None:
    claims, settings = report["claims"], report["settings"]
    by_name = {m["name"]: (i, m) for i, m in enumerate(claims["methods"])}
    configs = claims["scaling"]
    progress.start("scaling study over planted model sizes", len(configs))
    for c, config in enumerate(configs):
        base = f"/claims/scaling/{c}"
        L, H = config["n_layers"], config["n_heads"]
        try:
            model = planted_model(report["behaviour"], L, H)
        except ValueError as exc:
            raise UnusableInputError(base, f"the planted model cannot be built: {exc}") from exc
        universe = list(model.universe)
        truth = default_planted(L, H)
        for e, entry in enumerate(config["methods"]):
            pointer = f"{base}/methods/{e}"
            found = by_name.get(entry["name"])
            if found is None:
                raise UnusableInputError(f"{pointer}/name", f"no method is named {entry['name']!r}")
            procedure = _procedure(found[1], f"/claims/methods/{found[0]}")
            if procedure is None:
                raise UnusableInputError(
                    f"{pointer}/name", f"{entry['name']!r} declares no procedure to re-run at {L}L/{H}H"
                )
            label = f"{entry['name']} at {L}L/{H}H"
            again = identify(procedure, model, procedure.seed)
            checks.members(
                f"{pointer}/components", label, entry["components"], ids(again, universe), universe
            )
            values = dict(
                zip(
                    ("precision", "recall", "f1"),
                    cb.precision_recall_f1(set(entry["components"]), truth),
                    strict=True,
                )
            )
            for key, value in values.items():
                checks.number(f"{pointer}/{key}", f"{label}, {key}", entry[key], value, behaviour=False)
        if config.get("convergence") is not None:
            _convergence_checks(
                checks,
                f"{base}/convergence",
                config["convergence"],
                [entry["components"] for entry in config["methods"]],
                len(universe),
                settings,
                f"convergence at {L}L/{H}H,",
            )
        progress.advance()
