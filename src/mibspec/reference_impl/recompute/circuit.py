"""Recompute a circuit-track report: model + dataset + circuits → m(N), m(∅), f(k), CPR, CMD.

Normative text: ``spec/v1/SPEC.md`` (R-2, R-3, M-2), ``spec/v1/metrics/circuit.md`` and
``spec/v1/metrics/engine.md``. Steps:

1. resolve and load the declared model (dtype as declared) and its tokenizer;
2. read the dataset document of ``task.dataset``, take every row's base prompt and the
   counterfactual prompt of ``task.counterfactual_type``; the metric's tokens are the first
   tokens of ``base.answer`` and of the counterfactual's ``answer`` (datasets.md DS-5); a row
   whose two prompts differ in token length is reported, never patched misaligned (DS-12);
3. take each curve point's circuit (a row of the circuit document's ``membership``; for a
   point without one, at edge granularity the top ``edges_at(k)`` edges of the document's
   scores under the curve's ranking and the profile's tie-break, at node granularity the
   edges of the top nodes of its node scores, at neuron granularity the edges of the nodes
   holding the top neurons of its neuron scores with those neurons as the neuron mask
   (circuit.md MC-12));
4. evaluate all circuits with the engine (one pass per example batch, every circuit
   stacked), average per-example metrics in float64, and recompute f, CPR and CMD with the
   metric functions the consistency rules use.

Every claimed number gets a comparison under the profile's recomputation tolerance for
the model's dtype.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.comparisons import Comparison, Recomputation, recompute_tolerance
from mibspec.core.conventions import convention
from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos
from mibspec.metrics.circuit import cmd, cpr, faithfulness

from ._inputs import (
    UnusableInputError,
    batch_plan,
    check_tokens,
    encode_function,
    error_findings,
    load_referenced_document,
    open_model,
    read_rows,
    session_of,
)
from ._rebuilt import RebuiltCircuits
from .declarations import counterfactual_type_choice, recompute_gaps

__all__ = [
    "answer_token_choice",
    "centre_neurons",
    "circuit_faithfulness",
    "recompute",
    "start_token_choice",
    "tokenize_pairs",
]


def centre_neurons(profile: Any, model: Any) -> bool:
    """Whether neuron masks select coordinates of centred outputs (engine.md ME-7): under a
    profile whose ``neuron_coordinates`` is ``centred_under_layernorm``, in a LayerNorm model."""
    centred = profile.get("neuron_coordinates", "model") == "centred_under_layernorm"
    return bool(centred and model.norm_final.kind == "layer")


def _tensor(doc: dict[str, Any], folder: Path, ref: dict[str, Any], pointer: str) -> np.ndarray:
    entry = next((a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"]), None)
    if entry is None:
        raise UnusableInputError(pointer, f"the circuit document declares no artifact {ref['artifact']!r}")
    path = folder / entry["path"]
    try:
        info = tensor_infos(path, entry["media_type"]).get(ref.get("tensor"))
        if info is None:
            raise SidecarError(f"no tensor {ref.get('tensor')!r}")
        return np.asarray(load_tensor(path, info))
    except (SidecarError, OSError) as exc:
        raise UnusableInputError(pointer, f"cannot read {entry['path']!r}: {exc}") from exc


def _prompts(row: Any, i: int, cf_type: str, pointer: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Row ``i``'s base prompt object and its ``cf_type`` counterfactual, each with a string
    ``prompt`` and ``answer`` (DS-2, DS-3, DS-5).

    Raises:
        UnusableInputError: at ``pointer``, naming what the row lacks.
    """

    def unusable(detail: str) -> UnusableInputError:
        return UnusableInputError(pointer, f"dataset row {i}: {detail}")

    if not isinstance(row, dict):
        raise unusable("is not an object (DS-2)")
    counterfactuals = row.get("counterfactuals")
    if not isinstance(counterfactuals, dict):
        raise unusable("its counterfactuals are not an object (DS-2)")
    cf = counterfactuals.get(cf_type)
    if cf is None:
        raise UnusableInputError(pointer, f"dataset row {i} has no {cf_type!r} counterfactual")
    if isinstance(cf, dict) and cf.get("answer") is None:
        raise unusable(f"the {cf_type!r} counterfactual has no answer (DS-5)")
    base = row.get("base")
    for what, prompt in (("the base prompt", base), (f"the {cf_type!r} counterfactual", cf)):
        if not isinstance(prompt, dict):
            raise unusable(f"{what} is not a prompt object (DS-3)")
        for key in ("prompt", "answer"):
            if not isinstance(prompt.get(key), str):
                raise unusable(f"{what} has no {key} string (DS-3)")
    assert isinstance(base, dict)  # both checked in the loop
    assert isinstance(cf, dict)
    return base, cf


def tokenize_pairs(
    rows: list[dict[str, Any]],
    cf_type: str,
    encode: Any,
    pointer: str,
    start_token: int | None = None,
    *,
    model: Any = None,
    answer_token: str = "as_written",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Dataset rows as right-padded ``(clean, corrupted, mask, correct, counterfactual)`` token
    arrays for the ``cf_type`` counterfactuals, under the model's ``encode``; ``start_token``,
    when given, is prepended to both prompts (never to the answers). The answers' first
    tokens are read from the answers as written, or with ``answer_token`` set to
    ``without_leading_space`` from the answers without their leading whitespace (PR-3). With ``model``, every
    prompt and answer is checked against it (:func:`~._inputs.check_tokens`: ids inside its
    vocabulary, prompts inside its context).

    Raises:
        UnusableInputError: at ``pointer``, for a row without that counterfactual or an
            answer, prompts of different token lengths, tokens the model cannot take, or no
            rows at all.
    """
    clean, corrupted, correct, counter = [], [], [], []
    for i, row in enumerate(rows):
        base, cf = _prompts(row, i, cf_type, pointer)
        a, b = encode(base["prompt"]), encode(cf["prompt"])
        if start_token is not None:
            a, b = [start_token, *a], [start_token, *b]
        if len(a) != len(b):
            raise UnusableInputError(
                pointer,
                f"dataset row {i}: the base prompt has {len(a)} tokens and the {cf_type!r} counterfactual "
                f"{len(b)} under the model's tokenizer; positions cannot be patched (DS-12)",
            )
        if not a:
            raise UnusableInputError(pointer, f"dataset row {i}: the base prompt encodes to no token")
        answer, cf_answer = (
            encode(text.lstrip() if answer_token == "without_leading_space" else text)
            for text in (base["answer"], cf["answer"])
        )
        if not answer or not cf_answer:
            raise UnusableInputError(pointer, f"dataset row {i}: an answer encodes to no token")
        if model is not None:
            check_tokens(model, a, pointer, f"dataset row {i}, base prompt")
            check_tokens(model, b, pointer, f"dataset row {i}, {cf_type!r} prompt")
            check_tokens(model, [answer[0], cf_answer[0]], pointer, f"dataset row {i}, answers")
        clean.append(a)
        corrupted.append(b)
        correct.append(answer[0])
        counter.append(cf_answer[0])
    if not clean:
        raise UnusableInputError(pointer, "the dataset has no rows")
    width = max(len(x) for x in clean)
    ids = np.zeros((len(clean), width), dtype=np.int64)
    cids = np.zeros_like(ids)
    mask = np.zeros_like(ids)
    for i, (a, b) in enumerate(zip(clean, corrupted, strict=True)):
        ids[i, : len(a)], cids[i, : len(b)], mask[i, : len(a)] = a, b, 1
    return ids, cids, mask, np.asarray(correct), np.asarray(counter)


def answer_token_choice(report: dict[str, Any], profile: Any) -> str:
    """``as_written`` or ``without_leading_space``: the report's ``settings.answer_token``, else its
    profile's for the report's task (PR-3)."""
    found = {"track": "circuit", "settings": report.get("settings") or {}, "task": report.get("task") or {}}
    return str(convention(profile, found, "answer_token").value)


def start_token_choice(settings: dict[str, Any], profile: Any) -> str:
    """``prepend`` or ``none``: the report's ``settings.start_token``, else its profile's (PR-3)."""
    return str(convention(profile, {"track": "circuit", "settings": settings}, "start_token").value)


def required_counterfactual_type(task: dict[str, Any], profile: Any) -> str:
    """:func:`counterfactual_type_choice`, which recomputation needs.

    Raises:
        UnusableInputError: neither the report nor its profile names one.
    """
    chosen = counterfactual_type_choice(task, profile)
    if chosen is None:
        raise UnusableInputError(
            "/task/counterfactual_type",
            f"the report declares no counterfactual type, and its profile none for task {task.get('name')!r}",
        )
    return chosen


def circuit_faithfulness(evaluation: Any, min_denominator: float = 1e-6) -> tuple[float, float, list[float]]:
    """m(N), m(∅) and each circuit's faithfulness from an ``evaluate_circuits`` result: the
    per-example metrics averaged over the dataset in float64 (M-2).

    Raises:
        ValueError: faithfulness is undefined (``|m(N) − m(∅)|`` below ``min_denominator``).
    """
    m_full = float(evaluation.clean.mean())
    m_empty = float(evaluation.empty.mean())
    values = [
        faithfulness(float(m), m_full, m_empty, min_denominator=min_denominator)
        for m in evaluation.circuits.mean(axis=1)
    ]
    return m_full, m_empty, values


def _circuits(
    report: dict[str, Any], circuit_doc: dict[str, Any], folder: Path, universe: Any, profile: Any
) -> tuple[np.ndarray, list[tuple[int, int]], np.ndarray | None]:
    """Stacked circuits (K, n_edges), the (curve, point) of each, and the neuron masks.

    A point without a circuit is rebuilt from the document's scores at the report's
    granularity (:class:`RebuiltCircuits`: edge scores, MC-4; node scores and neuron scores,
    MC-12); a rebuilt neuron-level point brings its neuron mask, and a named row without one
    then keeps every neuron.
    """
    claims = report["claims"]
    n_edges = universe.n_edges
    granularity = report["settings"].get("granularity") or circuit_doc.get("granularity", "edge")

    def tensor(key: str) -> np.ndarray | None:
        ref = circuit_doc.get(key)
        return _tensor(circuit_doc, folder, ref, "/claims/circuit") if ref else None

    membership, neurons = tensor("membership"), tensor("neuron_masks")
    rebuilt: RebuiltCircuits | None = None
    rows: list[np.ndarray] = []
    neuron_rows: list[np.ndarray | None] = []
    where: list[tuple[int, int]] = []
    rounding = convention(profile, report, "edge_count_rounding").value
    for ci, curve in enumerate(claims["curves"]):
        for pi, point in enumerate(curve["points"]):
            pointer = f"/claims/curves/{ci}/points/{pi}"
            index = point.get("circuit")
            if index is not None:
                if membership is None or index >= membership.shape[0]:
                    raise UnusableInputError(
                        f"{pointer}/circuit", f"circuit {index} is not a row of the membership tensor"
                    )
                rows.append(np.asarray(membership[index], dtype=bool))
                neuron_rows.append(None if neurons is None else np.asarray(neurons[index], dtype=bool))
            else:
                if rebuilt is None:
                    rebuilt = _rebuilder(tensor, universe, granularity, rounding)
                rows.append(rebuilt.circuit(point["k"], curve["ranking"], pointer))
                neuron_rows.append(rebuilt.neurons(point["k"], curve["ranking"]))
            where.append((ci, pi))
    stacked = np.stack(rows) if rows else np.zeros((0, n_edges), dtype=bool)
    return stacked, where, _neuron_stack(neuron_rows, universe)


def _rebuilder(tensor: Any, universe: Any, granularity: str, rounding: Any) -> RebuiltCircuits:
    """The rebuilder of points without a circuit, given only the scores of the granularity."""
    return RebuiltCircuits(
        universe,
        granularity,
        rounding,
        edge_scores=tensor("scores") if granularity == "edge" else None,
        node_scores=tensor("node_scores") if granularity == "node" else None,
        node_scored=tensor("node_scored") if granularity == "node" else None,
        neuron_scores=tensor("neuron_scores") if granularity == "neuron" else None,
        neuron_scored=tensor("neuron_scored") if granularity == "neuron" else None,
    )


def _neuron_stack(rows: list[np.ndarray | None], universe: Any) -> np.ndarray | None:
    """Every circuit's neuron mask, ``None`` when no circuit has one; a circuit without one
    (a named row of a document without masks, a point rebuilt from edge or node scores)
    keeps every neuron.

    Raises:
        UnusableInputError: a mask that does not fit the graph's sources and width.
    """
    if all(row is None for row in rows):
        return None
    shape = (universe.n_forward, universe.cfg.d_model)
    wrong = next((row.shape for row in rows if row is not None and row.shape != shape), None)
    if wrong is not None:
        raise UnusableInputError("/claims/circuit", f"a neuron mask of shape {wrong} for a graph of {shape}")
    return np.stack([np.ones(shape, dtype=bool) if row is None else row for row in rows])


def _check_settings(report: dict[str, Any], profile: Any) -> None:
    """The first declaration, read from the report alone, without which it cannot be recomputed
    (:func:`recompute_gaps`: the same list ``--no-recompute`` warns about, R112)."""
    gaps = recompute_gaps(report, profile)
    if gaps:
        raise UnusableInputError(*gaps[0])


def recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation:
    """The report's claims recomputed: its comparisons, findings and the model files used."""
    with Recomputation().until_stopped() as out:
        try:
            out.extend(_recompute(ctx, progress, out))
        except UnusableInputError as exc:
            out.findings.extend(error_findings(ctx, exc))
    return out


def _recompute(ctx: RecomputeContext, progress: Progress, out: Recomputation) -> Recomputation:
    """The comparisons; what opening the model and planning batches produce goes into ``out``."""
    report, profile = ctx.data, ctx.profile
    _check_settings(report, profile)
    dtype = report["model"].get("dtype", "float32")
    tolerances = recompute_tolerance(profile, dtype)

    source, model = open_model(ctx, progress, dtype, out, keeps_runs=True)
    tensors = _tokenized_dataset(ctx, source, model)
    circuits, where, neurons, n_edges = _model_circuits(ctx, model)
    result = _evaluate(ctx, progress, model, tensors, (circuits, len(where), neurons), out)
    try:
        m_full, m_empty, values = circuit_faithfulness(result, profile["faithfulness_min_denominator"])
    except ValueError as exc:
        raise UnusableInputError(
            "/claims/m_full", f"faithfulness is undefined on this model and dataset: {exc}"
        ) from exc
    n = tensors[0].shape[0]
    points = list(zip(where, values, strict=True))
    comparisons = [
        # an edge count is exact: no tolerance
        Comparison(
            "/claims/n_edges", "edges in the model's graph", report["claims"]["n_edges"], n_edges, 0.0, 0.0
        ),
        *_comparisons(report, profile, tolerances, n, m_full, m_empty, points),
    ]
    return Recomputation(comparisons=comparisons)


def _tokenized_dataset(ctx: RecomputeContext, source: Any, model: Any) -> tuple[Any, Any, Any, Any, Any]:
    """The dataset's pairs as ``(ids, cids, mask, correct, counter)``, checked against the model."""
    report, profile = ctx.data, ctx.profile
    settings, task = report["settings"], report["task"]
    encode = encode_function(source)
    dataset, dataset_folder = load_referenced_document(
        ctx, task["dataset"], "/task/dataset", "counterfactual_dataset"
    )
    rows = read_rows(dataset, dataset_folder, "/task/dataset", ctx.limits)
    start = None
    if start_token_choice(settings, profile) == "prepend":
        start = source.start_token
        if start is None:
            raise UnusableInputError(
                "/settings/start_token",
                "a start token is to be prepended but the model's config.json declares neither "
                "bos_token_id nor eos_token_id",
            )
    counterfactual = required_counterfactual_type(task, profile)
    answers = answer_token_choice(report, profile)
    return tokenize_pairs(
        rows, counterfactual, encode, "/task/dataset", start, model=model, answer_token=answers
    )


def _model_circuits(
    ctx: RecomputeContext, model: Any
) -> tuple[np.ndarray, list[tuple[int, int]], np.ndarray | None, int]:
    """The claimed circuits over the model's graph: ``_circuits``'s circuits, points and neurons,
    and the edge total of the universe built from the model (K-8)."""
    # the engine imports torch: loaded only when a circuit report is recomputed
    from mibspec.reference_impl.engine import graph_universe

    report, profile = ctx.data, ctx.profile
    circuit_doc, circuit_folder = load_referenced_document(
        ctx, report["claims"]["circuit"], "/claims/circuit", "circuit"
    )
    universe = graph_universe(model)
    graph = circuit_doc["graph"]
    declared = (graph["n_layers"], graph["n_heads"], bool(graph.get("parallel_attn_mlp", False)))
    built = (model.n_layers, model.n_heads, bool(model.parallel_attn_mlp))
    if declared != built or graph["n_edges"] != universe.n_edges:
        raise UnusableInputError(
            "/claims/circuit",
            "the circuit's graph (layers, heads, parallel attention and MLP: "
            f"{declared}, {graph['n_edges']} edges) is not the model's ({built}, {universe.n_edges} edges)",
        )
    return (*_circuits(report, circuit_doc, circuit_folder, universe, profile), universe.n_edges)


def _evaluate(
    ctx: RecomputeContext,
    progress: Progress,
    model: Any,
    tensors: tuple[Any, ...],
    claimed: tuple[Any, int, Any],
    out: Recomputation,
) -> Any:
    """Every circuit evaluated on the whole dataset, the batch halved on running out of memory.

    ``claimed``: the circuits, how many there are, and their neurons (or ``None``)."""
    # torch-backed modules: loaded only when a circuit report is recomputed
    from mibspec.reference_impl.devices import example_bytes, with_oom_backoff
    from mibspec.reference_impl.engine import activation_batch, evaluate_circuits

    settings = ctx.data["settings"]
    circuits, n_circuits, neurons = claimed
    ids, cids, mask, correct, counter = tensors
    n = ids.shape[0]
    per_example = example_bytes(model, ids.shape[1])
    batch, halve = batch_plan(ctx, int(settings.get("batch_size") or 20), per_example, n, out)
    if not isinstance(ctx.batch_size, int) and model.dtype.itemsize > 2:
        # unless a batch size is given, a batch's activations stay within the engine's share
        # of the weight bytes (engine.md ME-9); in float32 and wider batch sizes change values
        # far inside every tolerance (ME-10), 16-bit reports keep the batch they declare
        batch = min(batch, activation_batch(model, per_example))
    reported = 0

    def advance(done: int) -> None:
        nonlocal reported
        progress.advance(done - reported)
        reported = done

    session = session_of(ctx)

    def run(size: int) -> Any:
        nonlocal reported
        reported = 0
        progress.start(f"recomputing {n_circuits} circuits on {n} examples", n)
        # mean ablation averages over the corrupted inputs of the whole dataset (the default)
        return evaluate_circuits(
            model,
            ids,
            cids,
            mask,
            correct,
            counter,
            circuits,
            neurons=neurons,
            centre_neurons=centre_neurons(ctx.profile, model),
            ablation=settings.get("ablation", "counterfactual"),
            batch_size=size,
            progress=advance,
            reuse=None if session is None else session.activations,
        )

    result, _ = with_oom_backoff(run, batch, retry=halve)
    return result


def _comparisons(
    report: dict[str, Any],
    profile: Any,
    tolerances: tuple[float, float],
    n: int,
    m_full: float,
    m_empty: float,
    points: list[tuple[tuple[int, int], float]],
) -> list[Comparison]:
    """m(N), m(∅), every curve point's f(k), CPR and CMD next to their claims."""
    claims, task = report["claims"], report["task"]
    abs_tol, rel_tol = tolerances
    comparisons: list[Comparison] = []

    def add(pointer: str, quantity: str, claimed: Any, value: float, exact: bool = False) -> None:
        comparisons.append(
            Comparison(
                pointer,
                quantity,
                None if claimed is None else float(claimed),
                value,
                0.0 if exact else abs_tol,
                0.0 if exact else rel_tol,
            )
        )

    if "n_examples" in task:
        add("/task/n_examples", "examples", task["n_examples"], float(n), exact=True)
    add("/claims/m_full", "m(N), full model", claims.get("m_full"), m_full)
    add("/claims/m_empty", "m(∅), empty circuit", claims.get("m_empty"), m_empty)
    curves: dict[str, tuple[list[float], list[float]]] = {}
    for (ci, pi), value in points:
        curve = claims["curves"][ci]
        point = curve["points"][pi]
        ks, fs = curves.setdefault(curve["ranking"], ([], []))
        if profile["force_full_faithfulness"] and math.isclose(point["k"], 1.0):
            value = 1.0
        ks.append(point["k"])
        fs.append(value)
        add(
            f"/claims/curves/{ci}/points/{pi}/faithfulness",
            f"f({point['k']:g}), {curve['ranking']}",
            point["faithfulness"],
            value,
        )
    rankings = convention(profile, report, "ranking").value
    for metric, compute in (("cpr", cpr), ("cmd", cmd)):
        ranking = rankings.get(metric)
        if ranking in curves:
            add(
                f"/claims/{metric}/value",
                f"{metric.upper()} ({ranking})",
                claims[metric]["value"],
                compute(*curves[ranking]),
            )
    return comparisons
