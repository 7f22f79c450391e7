"""Slow, obviously-correct CAUSAL-BENCH baselines written from the paper and the spec text.

Everything here is plain Python loops over lists and sets (numpy only for the documented
random streams, drawn one number at a time), independent of ``mibspec.reference_impl``. The
behaviour tests (``behaviour/``) and the planted study's recomputation
(``recompute/test_causal_bench.py``) use them, so they sit in the nearest folder above both.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

Beta = Callable[[frozenset[str]], float]


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def universe(n_layers: int, n_heads: int) -> list[str]:
    out = []
    for layer in range(n_layers):
        out += [f"L{layer}.attn_head[{h}]" for h in range(n_heads)]
        out.append(f"L{layer}.mlp")
    return out


def default_truth(n_layers: int, n_heads: int) -> set[str]:
    roles = [("h", 0, 0), ("h", 0, 1), ("m", 1, 0), ("h", 2, 0), ("m", 3, 0)]
    out = set()
    for kind, layer, head in roles:
        layer, head = min(layer, n_layers - 1), min(head, n_heads - 1)
        out.add(f"L{layer}.attn_head[{head}]" if kind == "h" else f"L{layer}.mlp")
    return out


def planted_beta(behaviour: dict[str, Any], truth: set[str]) -> tuple[list[str], Beta]:
    """Eq. 1 with the MB-15 noise recipe, entropy words built bit by bit."""
    comps = universe(behaviour["n_layers"], behaviour["n_heads"])
    seed, sd = behaviour["seed"], behaviour["measurement_noise_sd"]

    def beta(active: frozenset[str]) -> float:
        hits = sum(1 for c in active if c in truth)
        value = sigmoid(8.0 * (hits / len(truth) - 0.5))
        words = []
        for k in range((len(comps) + 31) // 32):
            word = 0
            for t in range(32):
                if 32 * k + t < len(comps) and comps[32 * k + t] in active:
                    word += 1 << t
            words.append(word)
        entropy = [seed % 2**32, seed // 2**32, 1, len(comps), *words]
        return value + sd * float(np.random.default_rng(np.array(entropy, dtype=np.uint32)).standard_normal())

    return comps, beta


def contributions(behaviour: dict[str, Any], comps: list[str], truth: set[str]) -> list[float]:
    rng = np.random.default_rng(
        np.array([behaviour["seed"] % 2**32, behaviour["seed"] // 2**32, 0, len(comps)], dtype=np.uint32)
    )
    values = [behaviour["component_noise_sd"] * float(rng.standard_normal()) for _ in comps]
    return [behaviour["signal"] if c in truth else v for c, v in zip(comps, values, strict=True)]


def faithfulness(beta: Beta, comps: list[str], s: set[str]) -> float:
    return beta(frozenset(s)) / beta(frozenset(comps))


def completeness(beta: Beta, comps: list[str], s: set[str]) -> float:
    full = beta(frozenset(comps))
    return (full - beta(frozenset(c for c in comps if c not in s))) / full


def greedy(beta: Beta, comps: list[str], start: set[str], floor: float) -> list[str]:
    """MB-8: remove the member leaving the largest F (first in canonical order) while F ≥ floor."""
    kept = [c for c in comps if c in start]
    while kept:
        best, best_f = None, -math.inf
        for c in kept:
            f = faithfulness(beta, comps, {x for x in kept if x != c})
            if f > best_f:
                best, best_f = c, f
        if not best_f >= floor:
            break
        kept.remove(best)
    return kept


def jaccard(a: set[str], b: set[str]) -> float:
    return 1.0 if not (a | b) else len(a & b) / len(a | b)


def mean_pairwise(sets: Sequence[set[str]]) -> float:
    pairs = list(itertools.combinations(sets, 2))
    return sum(jaccard(a, b) for a, b in pairs) / len(pairs)


def composite(values: dict[str, float], weights: dict[str, float]) -> float:
    if any(values[k] == 0 for k in weights):
        return 0.0
    return sum(weights.values()) / sum(weights[k] / values[k] for k in weights)


def prf(s: set[str], truth: set[str]) -> tuple[float, float, float]:
    tp = len(s & truth)
    return tp / len(s) if s else 0.0, tp / len(truth), 2 * tp / (len(s) + len(truth))


def null_statistics(sizes: list[int], n: int, b: int, seed: int) -> list[float]:
    """MB-11 draw: U[j, i, b] is output (j·m + i)·B + b; selection sampling per (i, b)."""
    m = len(sizes)
    flat = np.random.default_rng(seed).random(n * m * b)
    out = []
    for draw in range(b):
        sets = []
        for i, size in enumerate(sizes):
            chosen, r = set(), size
            for j in range(n):
                if (n - j) * flat[(j * m + i) * b + draw] < r:
                    chosen.add(j)
                    r -= 1
            sets.append(chosen)
        total = 0.0
        for x, y in itertools.combinations(sets, 2):
            union = len(x | y)
            total += 1.0 if union == 0 else len(x & y) / union
        out.append(total / (m * (m - 1) / 2))
    return out


def expected_null(sizes: list[int], n: int) -> float:
    """Σ over pairs of the hypergeometric expectation of J, averaged over pairs."""
    total, pairs = 0.0, 0
    for a, b in itertools.combinations(sizes, 2):
        pairs += 1
        total += sum(
            math.comb(a, k) * math.comb(n - a, b - k) / math.comb(n, b) * k / (a + b - k)
            for k in range(max(0, a + b - n), min(a, b) + 1)
        )
    return total / pairs


def scores(
    kind: str, params: dict[str, Any], beta: Beta, comps: list[str], contrib: list[float], seed: int
) -> list[float]:
    """MB-18 scores drawn one number at a time."""
    rng = np.random.default_rng(seed)
    sd = params.get("noise_sd", 0.0)
    if kind == "gradient_attribution":
        z = [float(rng.standard_normal()) for _ in comps]
        u = [float(rng.random()) for _ in comps]
        return [
            abs(c) + sd * zc + params["false_positive_boost"] * (uc < params["false_positive_rate"])
            for c, zc, uc in zip(contrib, z, u, strict=True)
        ]
    full = beta(frozenset(comps))
    drops = [full - beta(frozenset(x for x in comps if x != c)) for c in comps]
    z = [float(rng.standard_normal()) for _ in comps]
    return [d + sd * zc for d, zc in zip(drops, z, strict=True)]


def identify(
    procedure: dict[str, Any], beta: Beta, comps: list[str], contrib: list[float], seed: int
) -> list[str]:
    if procedure["kind"] == "circuit_discovery":
        return greedy(beta, comps, set(comps), procedure["threshold"])
    values = scores(procedure["kind"], procedure, beta, comps, contrib, seed)
    return [c for c, v in zip(comps, values, strict=True) if v > procedure["threshold"]]


class Slow:
    """The baselines above, as a fixture."""

    sigmoid = staticmethod(sigmoid)
    universe = staticmethod(universe)
    default_truth = staticmethod(default_truth)
    planted_beta = staticmethod(planted_beta)
    contributions = staticmethod(contributions)
    faithfulness = staticmethod(faithfulness)
    completeness = staticmethod(completeness)
    greedy = staticmethod(greedy)
    jaccard = staticmethod(jaccard)
    mean_pairwise = staticmethod(mean_pairwise)
    composite = staticmethod(composite)
    prf = staticmethod(prf)
    null_statistics = staticmethod(null_statistics)
    expected_null = staticmethod(expected_null)
    scores = staticmethod(scores)
    identify = staticmethod(identify)


@pytest.fixture(scope="session")
def slow() -> type[Slow]:
    return Slow
