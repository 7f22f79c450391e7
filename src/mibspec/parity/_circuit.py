"""Circuit-track parity: a mibspec report's circuits, rows and model evaluated by the public
MIB code (in its own environment) and by mibspec, value by value.

Which differences a profile promises to keep within its float32 recomputation tolerance
is decided per quantity from the conventions that quantity depends on (SPEC.md §6):

* logits (log-softmax on the same tokens): always;
* m(N), m(∅), f(k), CPR, CMD at edge, node and neuron granularity under counterfactual
  patching: when the start-token convention in force is ``prepend`` (the public code's);
  node and neuron circuits are built by recomputation's own code (``RebuiltCircuits``);
* EAP edge scores: start token and ``attribution_scale``; EAP-IG (inputs) also
  ``ig_points``;
* mean ablation and the sizes the public code records after its top-n selection (edge and
  neuron level): never (named convention differences).

A faithfulness f(k) = (m(k) − m(∅)) / (m(N) − m(∅)) is compared through its parts: the three
mean metrics it divides are each compared in absolute terms under the float32 tolerance of a
mean (``m(N)``, ``m(∅)`` and one ``mean m`` row per circuit), and the f row itself is held to
f's own float32 tolerance widened by the first-order effect of the *measured* differences of
those means (:meth:`_Rows.f_tolerance`). A small denominator widens an f row only as far as
the means it divides actually differ — means that agree exactly leave f its plain tolerance —
and the means' own rows fail whenever they differ beyond theirs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mibspec.core.profiles import load_profile
from mibspec.core.sidecars import load_tensor, tensor_infos
from mibspec.core.strict_json import read_json_lines

from ._neurons import area, faithfulness_or_nan, neuron_job, neuron_rows, neuron_side
from ._released import (
    PUBLIC_ANSWER_TOKEN,
    hub_column,
    loader_rows,
    public_task_name,
    released_job,
    released_rows,
    task_ref_name,
)

if TYPE_CHECKING:
    from mibspec.metrics.circuit import Ranking
    from mibspec.reference_impl.engine import Ablation

__all__ = [
    "CircuitInputs",
    "ParityRow",
    "circuit_parity",
    "compare_circuit",
    "load_circuit_inputs",
    "mibspec_side",
    "peer_job",
    "public_model_difference",
]

_FAMILIES = {
    "GPT2LMHeadModel": "gpt2",
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Gemma2ForCausalLM": "gemma2",
}


@dataclass(frozen=True)
class CircuitInputs:
    """What a circuit report points to, read from its folder."""

    report: dict[str, Any]
    model_dir: Path
    family: str
    rows: list[dict[str, Any]]
    counterfactual_type: str
    scores: np.ndarray  # (n_edges,) float32 as stored
    membership: np.ndarray  # (K, n_edges) bool
    points: list[tuple[str, float]]  # (ranking, k) of each membership row
    batch_size: int
    task: str = "ioi"  # the public loader's task name
    hub_rows: list[dict[str, Any]] | None = None  # the released file the dataset was imported from
    hub_counterfactual: str | None = None  # its column the public loader reads


@dataclass
class ParityRow:
    """One compared quantity: the public code's value, mibspec's, and whether the profile
    promises they agree (within ``abs_tol + rel_tol·|public|``)."""

    quantity: str
    public: float
    mibspec: float
    promised: bool
    abs_tol: float
    rel_tol: float
    note: str = ""
    scale: float | None = None  # vectors: the max |public| their relative difference is taken against
    group: str = ""  # the quantity family the results table summarises over

    def __post_init__(self) -> None:
        if not self.group:
            self.group = _group(self.quantity)

    @property
    def abs_diff(self) -> float:
        return abs(self.public - self.mibspec)

    @property
    def rel_diff(self) -> float:
        base = abs(self.public) if self.scale is None else self.scale
        return self.abs_diff / base if base > 0 else (0.0 if self.abs_diff == 0 else math.inf)

    @property
    def ok(self) -> bool:
        base = abs(self.public) if self.scale is None else self.scale
        return self.abs_diff <= self.abs_tol * (1 if self.scale is None else 0) + self.rel_tol * base

    def as_dict(self) -> dict[str, Any]:
        def finite(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "quantity": self.quantity,
            "public": finite(self.public),
            "mibspec": finite(self.mibspec),
            "abs_diff": finite(self.abs_diff),
            "rel_diff": self.rel_diff if math.isfinite(self.rel_diff) else None,
            "promised": self.promised,
            "ok": self.ok,
            "note": self.note,
            "group": self.group,
        }


_GROUPS = (
    ("mean m, ", "m(k): each circuit's mean metric"),
    ("neuron-level CPR", "neuron-level CPR"),
    ("neuron-level CMD", "neuron-level CMD"),
    ("neuron size", "neuron circuit sizes, recorded"),
    ("neuron circuit", "neuron circuits: f(k)"),
    ("logits", "logits (log-softmax)"),
    ("mean ablation", "mean ablation: m(∅), f(k)"),
    ("node circuit", "node circuits: m(∅), f(k)"),
    ("report circuit", "f(k) of the report's circuits"),
    ("MIB top-n", "f(k), MIB's top-n circuits"),
    ("recorded", "recorded circuit sizes"),
    ("CPR", "CPR"),
    ("CMD", "CMD"),
    ("EAP-IG", "EAP-IG (inputs) edge scores"),
    ("EAP ", "EAP edge scores"),
    ("answer ids", "answer tokens (public loader)"),
    ("rows the", "rows read (public loader)"),
    ("m(N)", "m(N)"),
    ("m(∅)", "m(∅)"),
)


def _group(quantity: str) -> str:
    return next((name for key, name in _GROUPS if key in quantity), quantity)


def _artifact(doc: dict[str, Any], folder: Path, artifact_id: str) -> Path:
    entry = next((a for a in doc.get("artifacts", []) if a["id"] == artifact_id), None)
    if entry is None:
        raise ValueError(f"the document declares no artifact {artifact_id!r}")
    return folder / entry["path"]


def _tensor(doc: dict[str, Any], folder: Path, ref: dict[str, Any]) -> np.ndarray:
    entry = next(a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"])
    path = folder / entry["path"]
    info = tensor_infos(path, entry["media_type"])[ref.get("tensor")]
    return np.array(load_tensor(path, info))


def _find_model(report: dict[str, Any], folder: Path, roots: Sequence[Path]) -> Path:
    name = report["model"].get("path") or report["model"].get("id", "")
    for root in [folder, *roots]:
        candidate = Path(root) / name
        if (candidate / "config.json").is_file():
            return candidate.resolve()
    raise ValueError(
        f"model {name!r} not found beside the report or under {[str(r) for r in roots]} (use --model-root)"
    )


def load_circuit_inputs(
    report_path: Path, model_roots: Sequence[Path] = (), loader_task: str | None = None
) -> CircuitInputs:
    """Read a circuit report, its circuit document and tensors, its dataset rows and find
    its model folder. ``loader_task`` is the public loader's name of the report's task (default:
    from ``task.name``, :func:`~._released.public_task_name`); for every task but IOI the
    dataset must have been imported from a released file that lies beside its document
    (``source.file``, same SHA-256), which the public loader then reads.

    Raises:
        ValueError: the report cannot be compared (not a recomputable circuit report).
    """
    report_path = Path(report_path)
    folder = report_path.parent
    report = json.loads(report_path.read_text(encoding="utf-8"))
    if report.get("track") != "circuit":
        raise ValueError(f"{report_path} is not a circuit report")
    architecture = report["model"].get("architecture")
    if architecture not in _FAMILIES:
        raise ValueError(f"the public code path is driven for {sorted(_FAMILIES)}, not {architecture!r}")
    settings, claims, task = report["settings"], report["claims"], report["task"]
    if settings.get("granularity", "edge") != "edge":
        raise ValueError("only edge-granularity reports are compared (node circuits are derived from them)")
    circuit_path = _artifact(report, folder, claims["circuit"])
    circuit = json.loads(circuit_path.read_text(encoding="utf-8"))
    scores = _tensor(circuit, circuit_path.parent, circuit["scores"]).astype(np.float32)
    membership = _tensor(circuit, circuit_path.parent, circuit["membership"]).astype(bool)
    points = []
    for curve in claims["curves"]:
        for point in curve["points"]:
            points.append((curve["ranking"], float(point["k"])))
    order = [point["circuit"] for curve in claims["curves"] for point in curve["points"]]
    dataset_path = _artifact(report, folder, task["dataset"])
    dataset = json.loads(dataset_path.read_text(encoding="utf-8"))
    rows_path = _artifact(dataset, dataset_path.parent, dataset["artifacts"][0]["id"])
    with rows_path.open("rb") as handle:
        rows = [row for _, row in read_json_lines(handle)]
    public_task = loader_task or public_task_name(task_ref_name(report))
    hub_rows = released_rows(dataset, dataset_path.parent)
    if hub_rows is None and public_task != "ioi":
        raise ValueError(
            f"the public {public_task} loader reads released rows: the report's dataset document names no "
            "released file (source.file) beside it with its recorded SHA-256 (import the rows with "
            "`mibspec import mib-dataset` and keep the released file beside the document)"
        )
    return CircuitInputs(
        report=report,
        model_dir=_find_model(report, folder, model_roots),
        family=_FAMILIES[architecture],
        rows=rows,
        counterfactual_type=task["counterfactual_type"],
        scores=scores,
        membership=membership[order],
        points=points,
        batch_size=int(settings.get("batch_size") or 20),
        task=public_task,
        hub_rows=hub_rows,
        hub_counterfactual=hub_column(public_task, task["counterfactual_type"]),
    )


def _node_scores(universe: Any, scores: np.ndarray) -> np.ndarray:
    """A node score per source node: the sum of its outgoing edges' scores (float64), so
    node circuits can be compared without node scores in the report."""
    out = np.zeros(universe.n_forward, dtype=np.float64)
    np.add.at(out, universe.edge_src, scores.astype(np.float64))
    return out


def _grid(report: dict[str, Any]) -> list[float]:
    return [float(k) for k in report["settings"]["grid"]]


def _tokens(inputs: CircuitInputs, start: int | None, answers: str = "as_written") -> tuple[np.ndarray, ...]:
    from mibspec.reference_impl.recompute import ModelSource, encode_function
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    encode = encode_function(ModelSource(str(inputs.model_dir), None, local=True))
    return tokenize_pairs(
        inputs.rows, inputs.counterfactual_type, encode, "dataset", start, answer_token=answers
    )


def _start_token(inputs: CircuitInputs) -> int | None:
    from mibspec.reference_impl.recompute import config_start_token

    return config_start_token(json.loads((inputs.model_dir / "config.json").read_text(encoding="utf-8")))


def peer_job(
    inputs: CircuitInputs, peers: Path, tasks: Sequence[str], *, ig_steps: int = 5
) -> dict[str, Any]:
    """The peer driver's job for ``inputs``: prompts and answer ids as mibspec reads them,
    edges by name, the report's circuits and derived node scores."""
    from mibspec.reference_impl.engine import graph_universe, load_model

    model = load_model(inputs.model_dir)
    universe = graph_universe(model)
    ids, _, mask, correct, counter = _tokens(inputs, None)
    start = _start_token(inputs)
    node_scores = _node_scores(universe, inputs.scores)
    width = int(mask.sum(1).max())
    logit_tokens = [
        [start, *row[:width].tolist()] if start is not None else row[:width].tolist()
        for row in ids[: inputs.batch_size]
    ]
    logit_tokens = [
        row for row, m in zip(logit_tokens, mask[: inputs.batch_size], strict=True) if int(m.sum()) == width
    ] or logit_tokens[:1]
    return {
        "peers": str(peers),
        "model_dir": str(inputs.model_dir),
        "family": inputs.family,
        "batch_size": inputs.batch_size,
        "ig_steps": ig_steps,
        "threads": 1,
        "rows": [
            [
                row["base"]["prompt"],
                row["counterfactuals"][inputs.counterfactual_type]["prompt"],
                int(a),
                int(b),
            ]
            for row, a, b in zip(inputs.rows, correct, counter, strict=True)
        ],
        "edge_names": universe.edge_names(),
        "scores": inputs.scores.astype(np.float64).tolist(),
        "circuits": [np.flatnonzero(row).tolist() for row in inputs.membership],
        "node_scores": dict(zip(universe.forward_names, node_scores.tolist(), strict=True)),
        "node_counts": [int(k * universe.n_forward) for k in _grid(inputs.report)],
        "logit_tokens": logit_tokens,
        "tasks": list(tasks),
        **({"neuron_scores": neuron_job(universe.n_forward, model.d_model)} if "neurons" in tasks else {}),
        **released_job(inputs),
    }


def mibspec_side(
    inputs: CircuitInputs,
    profile_name: str,
    tasks: Sequence[str],
    logit_tokens: Any,
    *,
    ig_steps: int = 5,
    dtype: str = "float32",
) -> dict[str, Any]:
    """mibspec's values for the same quantities under ``profile_name`` (the report's own
    ``settings.start_token`` wins over the profile's, as in recomputation), the model in
    ``dtype`` (float64: the arbiter of :func:`arbitrate_edge_scores`)."""
    import torch

    from mibspec.reference_impl.engine import attribute_edges, graph_universe, load_model, run_model
    from mibspec.reference_impl.recompute.circuit import answer_token_choice, start_token_choice

    profile = load_profile(profile_name)
    choice = start_token_choice(inputs.report["settings"], profile)
    start = _start_token(inputs) if choice == "prepend" else None
    model = load_model(inputs.model_dir, dtype=dtype)
    universe = graph_universe(model)
    answers = answer_token_choice(inputs.report, profile)
    examples = _tokens(inputs, start, answers)
    out: dict[str, Any] = {
        "start_token": choice,
        "answer_token": answers,
        "answers": np.stack([examples[3], examples[4]], axis=1).tolist(),
    }
    if "logits" in tasks:
        logit_ids = torch.tensor(logit_tokens, dtype=torch.long)
        out["logits"] = run_model(model, logit_ids).logits.to(torch.float32).numpy()
    for ablation in ("counterfactual", "mean"):
        key = "circuits_patching" if ablation == "counterfactual" else "circuits_mean"
        if key in tasks:
            out[key] = _circuits_side(model, universe, examples, inputs, profile, ablation)
    if "nodes" in tasks:
        out["nodes"] = _nodes_side(model, universe, examples, inputs, profile)
    if "neurons" in tasks:
        out["neurons"] = neuron_side(model, universe, examples, inputs.report, profile, inputs.batch_size)
    for method, key in (("eap", "EAP"), ("eap-ig", "EAP-IG-inputs")):
        if key in tasks:
            out[key] = attribute_edges(
                model,
                *examples,
                method=method,  # type: ignore[arg-type]
                steps=ig_steps,
                batch_size=inputs.batch_size,
                ig_points=profile["ig_points"],
                scale=profile["attribution_scale"],
            )
    return out


def _circuits_side(
    model: Any,
    universe: Any,
    examples: tuple[np.ndarray, ...],
    inputs: CircuitInputs,
    profile: Any,
    ablation: Ablation,
) -> dict[str, Any]:
    """m(N), m(∅), f and the weighted size of each of the report's circuits under ``ablation``."""
    from mibspec.reference_impl.engine import evaluate_circuits

    ids, cids, mask, correct, counter = examples
    result = evaluate_circuits(
        model,
        ids,
        cids,
        mask,
        correct,
        counter,
        inputs.membership,
        ablation=ablation,
        batch_size=inputs.batch_size,
    )
    m_full, m_empty, values = faithfulness_or_nan(result, profile)
    return {
        "m_full": m_full,
        "m_empty": m_empty,
        "f": values,
        "sizes": [universe.weighted_edge_count(row) for row in inputs.membership],
    }


def _nodes_side(
    model: Any, universe: Any, examples: tuple[np.ndarray, ...], inputs: CircuitInputs, profile: Any
) -> dict[str, Any]:
    """m(N), m(∅) and f of the top nodes at each grid point, signed and absolute, built as
    recomputation builds node-level points (``NodeLevelCircuits``, circuit.md MC-12)."""
    from mibspec.core.conventions import convention
    from mibspec.reference_impl.engine import evaluate_circuits
    from mibspec.reference_impl.recompute import NodeLevelCircuits

    circuits = NodeLevelCircuits(universe, _node_scores(universe, inputs.scores), None, "/claims/circuit")
    rounding = convention(profile, inputs.report, "edge_count_rounding").value
    grid = _grid(inputs.report)
    rankings: tuple[Ranking, ...] = ("signed", "absolute")
    points = [(ranking, k) for ranking in rankings for k in grid]
    edges = np.stack([circuits.circuit(k, ranking, rounding) for ranking, k in points])
    ids, cids, mask, correct, counter = examples
    result = evaluate_circuits(model, ids, cids, mask, correct, counter, edges, batch_size=inputs.batch_size)
    m_full, m_empty, values = faithfulness_or_nan(result, profile)
    return {
        "m_full": m_full,
        "m_empty": m_empty,
        "f": {
            r: [v for v, (w, _) in zip(values, points, strict=True) if w == r] for r in ("signed", "absolute")
        },
    }


def _log_softmax(x: np.ndarray) -> np.ndarray:
    top = x.max(-1, keepdims=True)
    return np.asarray(x - top - np.log(np.exp(x - top).sum(-1, keepdims=True)))


def _f(m: float, full: float, empty: float) -> float:
    return (m - empty) / (full - empty)


def _vector_row(
    name: str, public: np.ndarray, ours: np.ndarray, promised: bool, rel: float, note: str = ""
) -> ParityRow:
    diff = np.abs(public - ours)
    i = int(np.argmax(diff))
    scale = float(np.max(np.abs(public))) if public.size else 0.0
    return ParityRow(name, float(public[i]), float(ours[i]), promised, 0.0, rel, note=note, scale=scale)


def compare_circuit(
    inputs: CircuitInputs,
    peer: dict[str, Any],
    ours: dict[str, Any],
    profile_name: str,
    model_difference: str | None = None,
) -> list[ParityRow]:
    """The side-by-side rows for one profile; ``model_difference`` (why the public code's
    model is not the configured one) withdraws the promise of every model-dependent value."""
    profile = load_profile(profile_name)
    tol = profile["recompute"]["float32"]
    rows = _Rows(float(tol["abs"]), float(tol["rel"]), ours["start_token"] == "prepend", model_difference)
    rows.answers_match = ours.get("answer_token", "as_written") == PUBLIC_ANSWER_TOKEN.get(inputs.task)
    if "loader" in peer:
        loader_rows(rows, inputs, peer["loader"], ours)
    if "logits" in peer and "logits" in ours:
        pub = np.asarray(peer["logits"], dtype=np.float64)
        mine = np.asarray(ours["logits"], dtype=np.float64)
        # TransformerLens centres the unembedding: logits agree up to a constant per position
        pub, mine = _log_softmax(pub), _log_softmax(mine)
        rows.rows.append(
            _vector_row(
                "log-softmax logits (same tokens)",
                pub.ravel(),
                mine.ravel(),
                model_difference is None,
                rows.rel,
                model_difference or "",
            )
        )
    if "circuits_patching" in peer:
        p, m = peer["circuits_patching"], ours["circuits_patching"]
        rows.add("m(N)", p["m_full"], m["m_full"], rows.promise)
        rows.add("m(∅)", p["m_empty"], m["m_empty"], rows.promise)
        rows.means = ((p["m_full"], p["m_empty"]), (m["m_full"], m["m_empty"]))
        for i, (ranking, k) in enumerate(inputs.points):
            f = _f(p["m"][i], p["m_full"], p["m_empty"])
            rows.add_f(f"f({k:g}) {ranking}, report circuit", f, m["f"][i], rows.promise, m_public=p["m"][i])
    if "curves" in peer and "circuits_patching" in ours:
        _curve_rows(rows, inputs, peer["curves"], ours["circuits_patching"], profile)
    if "circuits_mean" in peer and "circuits_mean" in ours:
        p, m = peer["circuits_mean"], ours["circuits_mean"]
        note = "named difference: mean ablation"
        rows.add("m(∅), mean ablation", p["m_empty"], m["m_empty"], False, note)
        for i, (ranking, k) in enumerate(inputs.points):
            f = _f(p["m"][i], p["m_full"], p["m_empty"])
            rows.add(f"f({k:g}) {ranking}, mean ablation", f, m["f"][i], False, note)
    if "nodes" in peer and "nodes" in ours:
        p, m = peer["nodes"], ours["nodes"]
        rows.add("m(∅), node circuit", p["m_empty"], m["m_empty"], rows.promise)
        patching_means, rows.means = rows.means, ((p["m_full"], p["m_empty"]), (m["m_full"], m["m_empty"]))
        for ranking in ("signed", "absolute"):
            for k, pm, mf in zip(_grid(inputs.report), p["m"][ranking], m["f"][ranking], strict=True):
                f = _f(pm, p["m_full"], p["m_empty"])
                rows.add_f(f"f({k:g}) {ranking}, node circuit", f, mf, rows.promise, m_public=pm)
        rows.means = patching_means
    if "neurons" in peer and "neurons" in ours:
        # the public neuron curve divides by the m(N), m(∅) its other evaluations computed
        public_means = next((peer[key] for key in ("circuits_patching", "nodes") if key in peer), None)
        n = ours["neurons"]
        rows.means = (
            ((public_means["m_full"], public_means["m_empty"]), (n["m_full"], n["m_empty"]))
            if public_means is not None
            else None
        )
        neuron_rows(rows, _grid(inputs.report), peer["neurons"], n, profile)
    _attribution_rows(rows, peer, ours, profile)
    return rows.rows


@dataclass
class _Rows:
    """The rows of one comparison, under the profile's float32 tolerance (``abs_``, ``rel``);
    ``prepend``: whether mibspec prepends a start token as the public code does;
    ``model_difference``: why the public code's model is not the configured one, if it is not
    (:func:`public_model_difference`)."""

    abs_: float
    rel: float
    prepend: bool
    model_difference: str | None = None
    rows: list[ParityRow] = field(default_factory=list)
    answers_match: bool = True  # mibspec reads the answer tokens the public loader reads

    @property
    def promise(self) -> bool:
        """Values that depend on the model, the start token and the answer tokens: promised
        when mibspec prepends and reads the answers as the public code does, and the public
        code computes the same model."""
        return self.prepend and self.answers_match and self.model_difference is None

    #: the m(N) and m(∅) that f divides by: the public code's and mibspec's
    means: tuple[tuple[float, float], tuple[float, float]] | None = None

    def add(
        self, name: str, public: float, mine: float, promised: bool, note: str = "", abs_tol: float = 0.0
    ) -> None:
        if self.model_difference is not None and not note:
            note = self.model_difference
        tol = max(self.abs_, abs_tol)
        self.rows.append(ParityRow(name, float(public), float(mine), promised, tol, self.rel, note=note))

    def f_tolerance(
        self, f: float, f_ours: float, m_public: float | None = None, m_ours: float | None = None
    ) -> float:
        """The absolute part of the tolerance of a faithfulness f = (m − m(∅)) / (m(N) − m(∅))
        whose public value is ``f`` and mibspec's ``f_ours`` (its relative part is the
        profile's): the profile's absolute tolerance plus the first-order effect on f of the
        measured differences of the three means, (|Δm| + |1 − f|·|Δm(∅)| + |f|·|Δm(N)|) /
        |m(N) − m(∅)|. Each of those means is compared in its own row under the float32
        tolerance of a mean; this term keeps their (checked) differences from being counted
        twice, so it grows with 1/|m(N) − m(∅)| only as far as the means actually differ.
        ``m_public``, ``m_ours``: the circuit's mean metric on each side, else rebuilt from f
        and that side's m(N), m(∅)."""
        if self.means is None:
            return self.abs_
        (full_p, empty_p), (full_o, empty_o) = self.means
        denominator = abs(full_p - empty_p)
        if denominator == 0:
            return math.inf
        d_m = abs(_mean_of(f, self.means[0], m_public) - _mean_of(f_ours, self.means[1], m_ours))
        spread = d_m + abs(1 - f) * abs(empty_p - empty_o) + abs(f) * abs(full_p - full_o)
        return self.abs_ + spread / denominator

    def add_f(
        self,
        name: str,
        public: float,
        mine: float,
        promised: bool,
        note: str = "",
        *,
        m_public: float | None = None,
        m_ours: float | None = None,
    ) -> None:
        """A faithfulness row ``f(k) <label>`` under :meth:`f_tolerance` and, when the means are
        known, the row of the circuit's mean metric it divides (``mean m, k=<k> <label>``),
        compared in absolute terms under the float32 tolerance of a mean."""
        if self.means is not None:
            k, label = name[2 : name.index(")")], name[name.index(")") + 2 :]
            mp = _mean_of(float(public), self.means[0], m_public)
            mo = _mean_of(float(mine), self.means[1], m_ours)
            self.add(f"mean m, k={k} {label}", mp, mo, promised, note)
        tol = self.f_tolerance(float(public), float(mine), m_public, m_ours)
        self.add(name, public, mine, promised, note, abs_tol=tol)


def _mean_of(f: float, means: tuple[float, float], given: float | None) -> float:
    """A circuit's mean metric: ``given``, else m(∅) + f·(m(N) − m(∅)) — both sides compute f
    from it in float64, so this recovers it to float64 rounding."""
    if given is not None:
        return float(given)
    full, empty = means
    return empty + f * (full - empty)


def _curve_rows(
    rows: _Rows, inputs: CircuitInputs, curves: dict[str, Any], patching: dict[str, Any], profile: Any
) -> None:
    """MIB's top-n curves against mibspec's report circuits: f(k), CPR, CMD and the sizes."""
    grid = _grid(inputs.report)
    by_ranking: dict[str, list[float]] = {"signed": [], "absolute": []}
    for (ranking, _), value in zip(inputs.points, patching["f"], strict=True):
        by_ranking[ranking].append(value)
    if profile["force_full_faithfulness"]:
        for values in by_ranking.values():
            values[-1] = 1.0
    for ranking in ("signed", "absolute"):
        for k, pf, mf in zip(grid, curves[ranking]["faithfulness"], by_ranking[ranking], strict=True):
            rows.add_f(f"f({k:g}) {ranking}, MIB top-n", pf, mf, rows.promise)
    # an area's trapezoid weights sum to at most 1: its tolerance is its points' largest
    for name, key, ranking, value in (
        ("CPR (signed)", "area_under", "signed", area("cpr", grid, by_ranking["signed"])),
        ("CMD (absolute)", "area_from_1", "absolute", area("cmd", grid, by_ranking["absolute"])),
    ):
        pairs = zip(curves[ranking]["faithfulness"], by_ranking[ranking], strict=True)
        widest = max(rows.f_tolerance(pf, mf) for pf, mf in pairs)
        rows.add(name, curves[ranking][key], value, rows.promise, abs_tol=widest)
    sizes = dict(zip(inputs.points, patching["sizes"], strict=True))
    for ranking in ("signed", "absolute"):
        for k, recorded in zip(grid, curves[ranking]["recorded_sizes"], strict=True):
            rows.add(
                f"size({k:g}) {ranking}, recorded",
                recorded,
                sizes[(ranking, k)],
                False,
                "recorded after one pruning round (named difference)",
            )


def _attribution_rows(rows: _Rows, peer: dict[str, Any], ours: dict[str, Any], profile: Any) -> None:
    """EAP and EAP-IG edge scores; promised only under the public code's conventions."""
    for key, extra in (("EAP", ()), ("EAP-IG-inputs", ("ig_points",))):
        if key in peer and key in ours:
            promised = rows.promise and profile["attribution_scale"] == "per_example_and_batch"
            promised = promised and all(profile[c] == "left" for c in extra)
            rows.rows.append(
                _vector_row(
                    f"{key} edge scores",
                    np.asarray(peer[key]),
                    np.asarray(ours[key]),
                    promised,
                    rows.rel,
                    rows.model_difference or "relative to max |public score|",
                )
            )


def circuit_parity(
    inputs: CircuitInputs,
    peers: Path,
    python: Path,
    profiles: Sequence[str],
    tasks: Sequence[str],
    *,
    ig_steps: int = 5,
    layer_order: str = "public",
) -> tuple[dict[str, Any], dict[str, list[ParityRow]]]:
    """Run the public code once on ``inputs`` and compare it with mibspec under each profile.

    ``layer_order="config"`` (a diagnostic) builds the public code's Gemma-2 with each layer's
    attention as the config's ``layer_types`` say instead of TransformerLens's own order.
    Edge scores (``EAP``, ``EAP-IG-inputs``) are not compared for Gemma-2: mibspec's
    attribution does not handle its post-attention norms.

    Returns:
        The public code's results and, per profile, the compared rows.

    Raises:
        PeerUnavailableError: the public code failed.
    """
    from ._models import ATTRIBUTION_TASKS
    from ._peer import run_peer

    if inputs.family == "gemma2":  # mibspec's attribution refuses post-attention norms (ME-4)
        tasks = [task for task in tasks if task not in ATTRIBUTION_TASKS]
    job = peer_job(inputs, peers, tasks, ig_steps=ig_steps)
    if layer_order == "config":
        job["attn_types"] = [
            "local" if t == "sliding_attention" else "global" for t in _config(inputs)["layer_types"]
        ]
    public = run_peer(python, job)
    difference = public_model_difference(inputs, public)
    ours = {
        profile: mibspec_side(inputs, profile, tasks, job["logit_tokens"], ig_steps=ig_steps)
        for profile in profiles
    }
    rows = {p: compare_circuit(inputs, public, ours[p], p, difference) for p in profiles}

    def public_wide(keys: list[str]) -> dict[str, Any]:
        return dict(run_peer(python, {**job, "dtype": "float64", "tasks": keys}))

    def ours_wide(profile: str, keys: list[str]) -> dict[str, Any]:
        return mibspec_side(inputs, profile, keys, job["logit_tokens"], ig_steps=ig_steps, dtype="float64")

    arbitrate_edge_scores(rows, public, ours, public_wide, ours_wide)
    return public, rows


def arbitrate_edge_scores(
    rows: dict[str, list[ParityRow]],
    public: dict[str, Any],
    ours: dict[str, dict[str, Any]],
    public_wide: Callable[[list[str]], dict[str, Any]],
    ours_wide: Callable[[str, list[str]], dict[str, Any]],
) -> None:
    """Judge in float64 a promised edge-score row that float32 puts outside its tolerance.

    An edge score is a float32 sum over examples, positions and the model width; two
    implementations summing in other orders each err from the exact value, and their
    difference is the sum of both errors: at GPT-2 small's width about twice either. Such a
    row is then decided by three promised rows, each under the same tolerance (relative to
    the largest |score|): both sides computed in float64 agree (the scores are formed alike),
    and each side's float32 scores lie within it of its own float64 ones (neither rounds
    worse than float32 allows). The float32-against-float32 row stays, not promised, with a
    note. ``public_wide(keys)`` / ``ours_wide(profile, keys)``: the two sides' values of
    ``keys`` in float64, asked for only when a row needs them.
    """
    from ._models import ATTRIBUTION_TASKS

    failing = {
        profile: [k for k in ATTRIBUTION_TASKS if _failed(profile_rows, f"{k} edge scores")]
        for profile, profile_rows in rows.items()
    }
    needed = sorted({k for keys in failing.values() for k in keys})
    if not needed:
        return
    public64 = public_wide(needed)
    for profile, keys in failing.items():
        if keys:
            _arbiter_rows(rows[profile], keys, public, ours[profile], public64, ours_wide(profile, keys))


def _arbiter_rows(
    rows: list[ParityRow],
    keys: list[str],
    public: dict[str, Any],
    ours: dict[str, Any],
    public64: dict[str, Any],
    ours64: dict[str, Any],
) -> None:
    for key in keys:
        name = f"{key} edge scores"
        row = next(r for r in rows if r.quantity == name)
        row.promised = False
        row.note = "two float32 roundings of the same sums: decided by the three float64 rows"
        pairs = (
            ("both sides in float64", public64[key], ours64[key]),
            ("public code, float32 against its float64", public64[key], public[key]),
            ("mibspec, float32 against its float64", ours64[key], ours[key]),
        )
        for label, reference, value in pairs:
            arbiter = _vector_row(
                f"{name}: {label}",
                np.asarray(reference, dtype=np.float64),
                np.asarray(value, dtype=np.float64),
                True,
                row.rel_tol,
                "relative to max |float64 score|",
            )
            arbiter.group = f"{name}, float64 arbiter"
            rows.append(arbiter)


def _failed(rows: list[ParityRow], quantity: str) -> bool:
    return any(r.quantity == quantity and r.promised and not r.ok for r in rows)


def _config(inputs: CircuitInputs) -> dict[str, Any]:
    return dict(json.loads((inputs.model_dir / "config.json").read_text(encoding="utf-8")))


def public_model_difference(inputs: CircuitInputs, public: dict[str, Any]) -> str | None:
    """Why the model the public code built computes other values than the configured one on
    these rows, or ``None``.

    One cause is known: TransformerLens 2.18 builds Gemma-2 with global attention in even
    layers and sliding-window attention in odd ones, transformers the reverse (its config's
    ``layer_types``). The order only matters when a sequence is longer than the window:
    never for gemma-2-2b (window 4096) on MIB's prompts, always for the tiny Gemma-2 here.
    """
    config = _config(inputs)
    window = config.get("sliding_window")
    kinds = config.get("layer_types")
    if inputs.family != "gemma2" or not window or not kinds or "attn_types" not in public:
        return None
    configured = ["local" if t == "sliding_attention" else "global" for t in kinds]
    if configured == list(public["attn_types"]):
        return None
    _, _, mask, _, _ = _tokens(inputs, None)
    longest = int(mask.sum(1).max()) + (_start_token(inputs) is not None)
    if int(window) >= longest:
        return None  # a window as long as every sequence masks nothing
    swapped = [i for i, (a, b) in enumerate(zip(configured, public["attn_types"], strict=True)) if a != b]
    return (
        f"named difference: the public code's Gemma-2 (TransformerLens) attends globally where the "
        f"config slides a window and the reverse (layers {swapped}); window {window} < "
        f"{longest} tokens"
    )
