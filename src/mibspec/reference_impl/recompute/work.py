"""The work each track's recomputation will do, estimated from the report before it starts.

One estimator per track (the track descriptor names it, ``mibspec.core.tracks``); each
returns :class:`~mibspec.core.work.Work` items, which the recompute stage checks against
its limits before calling the recomputer (R125 over them). Only declared numbers are
read: the report, and the documents it references (a dataset's declared rows, a shortcut
dataset's declared shapes); no sidecar, model or row is opened. An estimate is a lower
bound at the generous rates of :mod:`mibspec.core.work`: the counts are those of the
algorithms the recomputers run (named beside each), the cost of each step the least it
can be. A declaration the estimator cannot read gives no item: the recomputer reports it.

The producers size their own work with the same functions (``mibspec score causal-bench``
refuses options whose study would be refused here).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.work import CALLS_PER_SECOND, ELEMENTS_PER_SECOND, MULTIPLY_ADDS_PER_SECOND, Work

__all__ = [
    "causal_bench",
    "causal_variable",
    "circuit",
    "planted_study",
    "saliency",
]

#: Bytes a component id takes in the universe lists a planted recomputation builds (a short
#: string object, its slot in a tuple, a list and an index).
_BYTES_PER_ID = 100
_THRESHOLDED = ("activation_patching", "gradient_attribution", "ablation_scanning")


# --------------------------------------------------------------------------- CAUSAL-BENCH


def _procedure_run(
    kind: str, n: int, pointer: str, label: str, cost: Callable[[float, float], float]
) -> Work:
    """One run of a localization procedure over ``n`` components (MB-18).

    Thresholded kinds evaluate the leave-one-out coalitions: ``n + 1`` evaluations of an
    ``(n + 1) × n`` matrix. Circuit discovery prunes greedily from the universe: at step s
    it evaluates the ``n − s`` coalitions without one member, so about ``n²/2`` evaluations
    of ``n`` components each, and holds an ``n × n`` matrix at its first step.
    """
    if kind in _THRESHOLDED:
        evaluations, cells = n + 1.0, (n + 1.0) * n
    else:
        evaluations, cells = n * (n + 1) / 2.0, n * n * (n + 1) / 2.0
    return Work(
        pointer,
        f"{label} ({kind.replace('_', ' ')} over {n} components)",
        cost(evaluations, cells),
        2.0 * n * n,
    )


def _reduction(size: int, n: int, pointer: str, label: str, cost: Callable[[float, float], float]) -> Work:
    """COS of a claimed set of ``size`` members over ``n`` components (MB-8): a greedy
    reduction, about ``size²/2`` evaluations, an ``size × n`` matrix at its first step."""
    evaluations = size * (size + 1) / 2.0
    return Work(
        pointer, f"{label} (COS of {size} components)", cost(evaluations, evaluations * n), 2.0 * size * n
    )


def _convergence(n_permutations: int, sets: int, n: int, pointer: str, label: str) -> Work:
    """The convergence test's null (MB-11): ``B`` draws of every method's set over ``n``
    components; it holds the ``pairs × B`` intersection counts and ``3·m × B`` keys."""
    pairs = sets * (sets - 1) / 2.0
    cells = float(n_permutations) * n * (sets + pairs)
    return Work(
        pointer,
        f"{label} ({n_permutations} null draws over {n} components)",
        cells / ELEMENTS_PER_SECOND,
        8.0 * (pairs + 3 * sets) * n_permutations,
    )


def _universe(n: float, pointer: str, label: str) -> Work:
    return Work(pointer, f"{label} ({n:.0f} component ids)", n / CALLS_PER_SECOND, _BYTES_PER_ID * n)


def planted_cost(evaluations: float, cells: float) -> float:
    """Seconds of ``evaluations`` planted-behaviour evaluations touching ``cells`` cells: each
    evaluation draws its noise from a generator of its own (a Python step)."""
    return evaluations / CALLS_PER_SECOND + cells / ELEMENTS_PER_SECOND


def planted_study(
    n_layers: int,
    n_heads: int,
    procedures: Sequence[str],
    runs: int,
    *,
    pointer: str = "/behaviour",
    n_permutations: int | None = None,
    label: str = "",
) -> list[Work]:
    """What a study on the ``n_layers × n_heads`` planted model costs at the least: its
    universe, each procedure run once and once for each of ``runs`` seed runs, and the
    convergence test of the methods' sets (the COS of each set found comes on top)."""
    n = n_layers * (n_heads + 1)
    where = label or f"the {n_layers}L/{n_heads}H planted model"
    items = [_universe(n, pointer, f"the universe of {where}")]
    for kind in dict.fromkeys(procedures):
        run = _procedure_run(kind, n, pointer, where, planted_cost)
        times = (1 + runs) * sum(1 for p in procedures if p == kind)
        items.append(Work(run.pointer, run.what, run.seconds * times, run.bytes))
    if n_permutations is not None and len(procedures) >= 2:
        items.append(
            _convergence(n_permutations, len(procedures), n, pointer, f"the convergence test on {where}")
        )
    return items


def causal_bench(ctx: RecomputeContext) -> list[Work]:
    """CAUSAL-BENCH: the planted model (or the transformer's universe, each evaluation a
    forward pass over the dataset's rows), every method's procedure with its seed runs, the
    COS of every claimed set, the threshold-sensitivity points, the convergence tests and
    every scaling configuration's planted model."""
    report = ctx.data
    behaviour, claims = report["behaviour"], report["claims"]
    if behaviour["kind"] == "planted":
        layers, heads = behaviour.get("n_layers"), behaviour.get("n_heads")
        if not isinstance(layers, int) or not isinstance(heads, int):
            return []
        n = layers * (heads + 1)
        label = f"the {layers}L/{heads}H planted model"
        cost: Callable[[float, float], float] = planted_cost
        items = [_universe(n, "/behaviour", f"the universe of {label}")]
    else:
        n = len(report["universe"])
        label = f"the {n}-component transformer behaviour"
        rows = _dataset_rows(ctx, report["task"].get("dataset"))
        per_example = _model_multiply_adds(report.get("model"))
        rate = _multiply_adds_per_second(ctx)
        examples = rows or 1

        def cost(evaluations: float, cells: float) -> float:
            return (
                evaluations * (examples * per_example / rate + 1 / CALLS_PER_SECOND)
                + cells / ELEMENTS_PER_SECOND
            )

        items = []
    methods = claims["methods"]
    for m, method in enumerate(methods):
        pointer = f"/claims/methods/{m}"
        procedure = method.get("procedure") or {}
        if procedure.get("kind"):
            run = _procedure_run(procedure["kind"], n, f"{pointer}/procedure", label, cost)
            times = 1 + len(method.get("runs") or [])
            items.append(Work(run.pointer, f"{run.what}, {times} run(s)", run.seconds * times, run.bytes))
        items.append(_reduction(len(method["components"]), n, f"{pointer}/components", label, cost))
    sensitivity = claims.get("threshold_sensitivity") or {}
    for p, point in enumerate(sensitivity.get("points") or []):
        pointer = f"/claims/threshold_sensitivity/points/{p}/components"
        items.append(_reduction(len(point["components"]), n, pointer, label, cost))
    convergence = claims.get("convergence")
    if convergence is not None and len(methods) >= 2:
        items.append(
            _convergence(
                convergence["n_permutations"], len(methods), n, "/claims/convergence/n_permutations", label
            )
        )
    for c, config in enumerate(claims.get("scaling") or []):
        entries = [_procedure_kind(methods, entry.get("name")) for entry in config["methods"]]
        conv = config.get("convergence") or {}
        items.extend(
            planted_study(
                config["n_layers"],
                config["n_heads"],
                [kind for kind in entries if kind],
                0,
                pointer=f"/claims/scaling/{c}",
                n_permutations=conv.get("n_permutations"),
            )
        )
    return items


def _procedure_kind(methods: Iterable[Mapping[str, Any]], name: Any) -> str | None:
    method = next((m for m in methods if m.get("name") == name), None)
    procedure = (method or {}).get("procedure") or {}
    kind = procedure.get("kind")
    return kind if isinstance(kind, str) else None


# --------------------------------------------------------------------------- model tracks


def _dataset_rows(ctx: RecomputeContext, artifact_id: Any) -> int | None:
    """The rows the counterfactual dataset behind ``artifact_id`` declares (its JSON Lines
    artifact's ``rows``), or ``None`` when they cannot be read here."""
    from ._inputs import UnusableInputError, load_referenced_document

    if not isinstance(artifact_id, str):
        return None
    try:
        document, _ = load_referenced_document(ctx, artifact_id, "/task/dataset", "counterfactual_dataset")
    except UnusableInputError:
        return None
    entry = next((a for a in document.get("artifacts", []) if a.get("id") == document.get("examples")), None)
    rows = (entry or {}).get("rows")
    return rows if isinstance(rows, int) else None


def _model_multiply_adds(model: Any) -> float:
    """Multiply-adds per token of the declared model at the least: the query and output
    projections of every layer (``2·L·d²``), when its config is declared; else 0."""
    config = (model or {}).get("config") or {}
    layers, width = config.get("n_layers"), config.get("d_model")
    if isinstance(layers, int) and isinstance(width, int):
        return 2.0 * layers * width * width
    return 0.0


def _multiply_adds_per_second(ctx: RecomputeContext) -> float:
    return MULTIPLY_ADDS_PER_SECOND["cpu" if ctx.device == "cpu" else "accelerator"]


def _forward_passes(ctx: RecomputeContext, count: float, pointer: str, what: str) -> Work:
    """``count`` forward passes of one example of at least one token, each a Python step in
    its batch at the least."""
    per_example = _model_multiply_adds(ctx.data.get("model"))
    seconds = count * per_example / _multiply_adds_per_second(ctx) + count / ELEMENTS_PER_SECOND
    return Work(pointer, what, seconds)


def circuit(ctx: RecomputeContext) -> list[Work]:
    """Circuit track: the full model, the empty circuit and one circuit per curve point,
    each on every row of the dataset, base and counterfactual."""
    report = ctx.data
    rows = _dataset_rows(ctx, report["task"].get("dataset"))
    if rows is None:
        return []
    points = sum(len(curve["points"]) for curve in report["claims"]["curves"])
    return [
        _forward_passes(
            ctx, 2.0 * rows * (points + 2), "/claims/curves", f"{points + 2} circuits on {rows} rows"
        )
    ]


def causal_variable(ctx: RecomputeContext) -> list[Work]:
    """Causal-variable track: every (unit, counterfactual set) score is an interchange
    intervention on every row (a counterfactual run and an intervened base run). The
    counterfactual runs record every distinct site of the report's units (locations and
    joint sites) on every row, at least one token of each: float32 values held at once."""
    report = ctx.data
    rows = _dataset_rows(ctx, report["task"].get("dataset"))
    if rows is None:
        return []
    units = [unit for variable in report["claims"]["variables"] for unit in variable["units"]]
    scores = sum(len(unit["scores"]) for unit in units)
    work = _forward_passes(
        ctx, 2.0 * rows * scores, "/claims/variables", f"{scores} unit scores on {rows} rows"
    )
    width = _recorded_width(report.get("model"), units)
    if not width:
        return [work]
    what = f"{work.what}, recording {width} values per token at the units' sites"
    return [dataclasses.replace(work, what=what, bytes=4.0 * rows * width)]


def _recorded_width(model: Any, units: Sequence[Mapping[str, Any]]) -> int:
    """The values per token the distinct sites of ``units`` hold together (d_model at a
    residual or MLP site, d_model/n_heads per listed head), when the model's config is
    declared; else 0."""
    config = (model or {}).get("config") or {}
    width, heads = config.get("d_model"), config.get("n_heads")
    if not (isinstance(width, int) and isinstance(heads, int) and heads > 0):
        return 0
    from mibspec.metrics.featurizers import location_width, unit_sites

    sites = {}
    for unit in units:
        for site in (s.location for s in unit_sites(unit)):
            listed = site.get("heads") if site.get("component") == "attention_heads" else None
            sites[(site.get("layer"), site.get("component"), tuple(listed or ()))] = site
    return sum(location_width(site, width, heads) for site in sites.values())


# --------------------------------------------------------------------------- saliency


def saliency(ctx: RecomputeContext) -> list[Work]:
    """Saliency track: the Shapley ground truth of at least one dominant image (MS-9,
    MS-10). A sampled estimate runs ``trials`` trials of ``permutations`` permutations over
    the D players of the patch, each permutation ``D + 1`` model evaluations of an image,
    and holds a trial's permutations (``permutations × D`` 8-byte indices); the exact one
    evaluates ``2^D`` coalitions."""
    from ._inputs import UnusableInputError, load_referenced_document

    report = ctx.data
    settings = report["settings"]
    try:
        dataset, _ = load_referenced_document(
            ctx, report["task"].get("dataset"), "/task/dataset", "shortcut_dataset"
        )
    except UnusableInputError:
        return []
    players = dataset["perturbation"]["patch_size"]
    pixels = math.prod(dataset["image_shape"])
    images = min(1, report["claims"]["dominance"]["n_dominant"])
    if settings["shapley_sampler"] == "exact":
        coalitions = 2.0 ** min(players, 1024)
        return [
            Work(
                "/settings/shapley_sampler",
                f"exact Shapley values of {players} players ({coalitions:.3g} coalitions)",
                images * coalitions * pixels / ELEMENTS_PER_SECOND,
                coalitions,
            )
        ]
    trials, permutations = settings.get("shapley_trials", 1), settings.get("shapley_permutations") or 0
    evaluations = images * float(trials) * permutations * (players + 1)
    return [
        Work(
            "/settings/shapley_permutations",
            f"one Shapley trial's {permutations} permutations of {players} players",
            bytes=8.0 * permutations * players,
        ),
        Work(
            "/settings/shapley_trials",
            f"{trials} Shapley trial(s) of {permutations} permutations over {players} players",
            seconds=evaluations * pixels / ELEMENTS_PER_SECOND,
        ),
    ]
