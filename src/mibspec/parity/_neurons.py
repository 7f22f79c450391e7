"""Neuron-level parity: curves rebuilt from neuron scores by mibspec's recomputation
(``RebuiltCircuits`` at ``neuron`` granularity, circuit.md MC-12) against the public MIB
code's ``evaluate_area_under_curve(level='neuron')`` on the same scores.

A report's circuit document carries edge scores, not neuron scores, so both sides are given
the same seeded neuron scores (:func:`parity_neuron_scores`): a score per source node and
residual coordinate in float32, the ``input`` node and a few scattered neurons left unscored
(EAP-IG's NaN, always kept). Compared: f(k) at every grid point under the signed and the
absolute ranking, CPR (signed) and CMD (absolute) — promised where the edge-level values are
and mibspec's neuron coordinates are the public code's (``neuron_coordinates``: TransformerLens
centres the writing weights of LayerNorm models, engine.md ME-7) — and the weighted sizes
each side records, which differ by a named convention (PR-5): the public top-n marks every
slot of a kept node's row as in the graph, slots that are no edge included, and its pruning
leaves them in.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mibspec.metrics.circuit import Ranking

__all__ = [
    "area",
    "faithfulness_or_nan",
    "neuron_job",
    "neuron_rows",
    "neuron_side",
    "parity_neuron_scores",
    "public_neuron_size",
]

#: Seed of the neuron scores both sides are given.
NEURON_SEED = 2025
#: Scattered neurons (besides the whole ``input`` node) left unscored.
N_UNSCORED = 5


def faithfulness_or_nan(result: Any, profile: Any) -> tuple[float, float, list[float]]:
    """m(N), m(∅) and each circuit's f from an ``evaluate_circuits`` result, as recomputation
    computes them; f is NaN when its denominator is degenerate (recomputation refuses such a
    report, R-rules; here it happens under a profile that reads another answer token than the
    public code, e.g. the same first token for both answers, and is a named difference)."""
    from mibspec.metrics.circuit import DegenerateDenominatorError
    from mibspec.reference_impl.recompute.circuit import circuit_faithfulness

    try:
        return circuit_faithfulness(result, profile["faithfulness_min_denominator"])
    except DegenerateDenominatorError:
        n = int(result.circuits.shape[0])
        return float(result.clean.mean()), float(result.empty.mean()), [math.nan] * n


def area(kind: str, grid: list[float], values: list[float]) -> float:
    """CPR (``kind="cpr"``) or CMD of a curve; NaN when a point is."""
    from mibspec.metrics.circuit import cmd, cpr

    if not all(math.isfinite(v) for v in values):
        return math.nan
    return cpr(grid, values) if kind == "cpr" else cmd(grid, values)


def parity_neuron_scores(n_forward: int, d_model: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded float32 neuron scores ``(n_forward, d_model)`` and their scored flags."""
    rng = np.random.default_rng(NEURON_SEED)
    scores = rng.normal(size=(n_forward, d_model)).astype(np.float32)
    scored = np.ones((n_forward, d_model), dtype=bool)
    scored[0] = False  # input: without it every path is ablated and every f is 0
    scored[rng.integers(1, n_forward, N_UNSCORED), rng.integers(0, d_model, N_UNSCORED)] = False
    scores[~scored] = 0.0
    return scores, scored


def neuron_job(n_forward: int, d_model: int) -> list[list[float | None]]:
    """The job's ``neuron_scores``: one row per source node, ``None`` where unscored."""
    scores, scored = parity_neuron_scores(n_forward, d_model)
    return [
        [float(v) if s else None for v, s in zip(row, flags, strict=True)]
        for row, flags in zip(scores, scored, strict=True)
    ]


def neuron_side(
    model: Any,
    universe: Any,
    examples: tuple[np.ndarray, ...],
    report: dict[str, Any],
    profile: Any,
    batch: int,
) -> dict[str, Any]:
    """m(N), m(∅), f and the recorded size of the neuron-level circuit at every grid point,
    signed and absolute, built as recomputation builds them."""
    from mibspec.core.conventions import convention
    from mibspec.metrics.graph import recorded_size
    from mibspec.reference_impl.engine import evaluate_circuits
    from mibspec.reference_impl.recompute import RebuiltCircuits
    from mibspec.reference_impl.recompute.circuit import centre_neurons

    scores, scored = parity_neuron_scores(universe.n_forward, int(universe.cfg.d_model))
    rounding = convention(profile, report, "edge_count_rounding").value
    rebuilt = RebuiltCircuits(universe, "neuron", rounding, neuron_scores=scores, neuron_scored=scored)
    grid = [float(k) for k in report["settings"]["grid"]]
    rankings: tuple[Ranking, ...] = ("signed", "absolute")
    points = [(ranking, k) for ranking in rankings for k in grid]
    edges = np.stack([rebuilt.circuit(k, ranking) for ranking, k in points])
    masks = np.stack([np.asarray(rebuilt.neurons(k, ranking), dtype=bool) for ranking, k in points])
    ids, cids, mask, correct, counter = examples
    centre = centre_neurons(profile, model)
    result = evaluate_circuits(
        model,
        ids,
        cids,
        mask,
        correct,
        counter,
        edges,
        neurons=masks,
        centre_neurons=centre,
        batch_size=batch,
    )
    m_full, m_empty, values = faithfulness_or_nan(result, profile)
    sizes = [
        recorded_size(universe, e, universe.neuron_fraction(n), profile["recorded_size"])
        for e, n in zip(edges, masks, strict=True)
    ]
    by_ranking: dict[str, dict[str, list[Any]]] = {
        r: {"f": [], "sizes": [], "masks": []} for r in ("signed", "absolute")
    }
    for (ranking, _), value, size, neurons in zip(points, values, sizes, masks, strict=True):
        by_ranking[ranking]["f"].append(value)
        by_ranking[ranking]["sizes"].append(size)
        by_ranking[ranking]["masks"].append(neurons)
    # the public code's coordinates: TransformerLens centres the writing weights of LayerNorm models
    public_coordinates = centre == (model.norm_final.kind == "layer")
    return {"m_full": m_full, "m_empty": m_empty, "public_coordinates": public_coordinates, **by_ranking}


def public_neuron_size(universe: Any, neurons: np.ndarray) -> float:
    """The weighted size the public code records for a neuron-level top-n circuit: each kept
    node's row marks every slot of a kept node and ``logits`` (slots that are no edge
    included), weighted by its kept fraction; its pruning removes none of them. A diagnostic
    of the named size difference, not a size mibspec records."""
    kept = np.asarray(neurons.any(axis=1), dtype=bool)
    slots = int(kept[universe.node_of_slot[:-1]].sum()) + 1  # + logits
    return float(universe.neuron_fraction(neurons)[kept].sum() * slots)


def neuron_rows(
    rows: Any, grid: list[float], peer: dict[str, Any], ours: dict[str, Any], profile: Any
) -> None:
    """The neuron-level rows: f(k), CPR, CMD (promised as edge-level values are, when the
    neuron coordinates are the public code's) and the recorded sizes (a named difference)."""
    promised = rows.promise and ours["public_coordinates"]
    coordinates = "" if ours["public_coordinates"] else "neuron coordinates: the model's own, not centred"
    values = {ranking: list(ours[ranking]["f"]) for ranking in ("signed", "absolute")}
    if profile["force_full_faithfulness"]:
        for curve in values.values():
            curve[-1] = 1.0
    for ranking in ("signed", "absolute"):
        for k, pf, mf in zip(grid, peer[ranking]["faithfulness"], values[ranking], strict=True):
            rows.add_f(f"f({k:g}) {ranking}, neuron circuit", pf, mf, promised, coordinates)
    signed, absolute = area("cpr", grid, values["signed"]), area("cmd", grid, values["absolute"])
    # an area's trapezoid weights sum to at most 1: its tolerance is its points' widest
    widest = {
        r: max(rows.f_tolerance(pf, mf) for pf, mf in zip(peer[r]["faithfulness"], values[r], strict=True))
        for r in ("signed", "absolute")
    }
    rows.add(
        "neuron-level CPR (signed)",
        peer["signed"]["area_under"],
        signed,
        promised,
        coordinates,
        widest["signed"],
    )
    rows.add(
        "neuron-level CMD (absolute)",
        peer["absolute"]["area_from_1"],
        absolute,
        promised,
        coordinates,
        widest["absolute"],
    )
    note = (
        "named difference (PR-5): the public top-n counts every slot of a kept node's row, non-edges included"
    )
    for ranking in ("signed", "absolute"):
        for k, pub, mine in zip(grid, peer[ranking]["recorded_sizes"], ours[ranking]["sizes"], strict=True):
            rows.add(f"neuron size({k:g}) {ranking}, recorded", pub, mine, False, note)
