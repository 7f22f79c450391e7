"""The four localization methods of CAUSAL-BENCH (§2.3) as seeded procedures over a behaviour.

A procedure maps a behaviour β over a universe C of N components and a seed to an
identified set S ⊆ C. Normative text: ``spec/v1/metrics/causal_bench.md`` (MB-18, MB-19).
With ``rng = numpy.random.default_rng(seed)``:

* activation patching and ablation scanning: ``score_c = β(C) − β(C∖{c}) + σ·z_c`` with
  ``z = rng.standard_normal(N)`` (drawn even when σ = 0), in canonical order; the two differ
  only in their declared σ and threshold (the paper: AS has lower noise and a lower
  threshold);
* gradient attribution: ``score_c = g_c + σ·z_c + b·[u_c < p]`` with ``z =
  rng.standard_normal(N)`` then ``u = rng.random(N)`` from the same generator; ``g_c`` is the
  behaviour's attribution magnitude (the planted model: the true contribution magnitude
  ``|contribution_c|``; a transformer: first-order activation patching). The boost b with
  probability p is the paper's false-positive injection, applied to every component so that
  the method does not read the ground truth (a circuit member is already above any threshold
  the boost matters for);
* the thresholded methods identify ``{c : score_c > τ}`` (strictly greater);
* circuit discovery: greedy pruning from C, each step removing the component whose removal
  leaves the largest faithfulness (ties: canonical order) while it stays ≥ the floor φ; this
  is the COS reduction (MB-8) started from the full universe with threshold φ, and uses no
  randomness.

A *seed perturbation* (stability, MB-7) re-runs a procedure with another seed on the
behaviour of that seed: ``method_noise`` keeps β and changes only the method's generator;
``subsample`` (a behaviour estimated from data) also evaluates β on a subset of the examples
drawn by :func:`subsample`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from mibspec.metrics.causal_bench import causal_optimality
from mibspec.metrics.checks import check_choice, check_finite_scalar, check_int, describe

__all__ = [
    "LOCALIZATION_KINDS",
    "PAPER_PROCEDURES",
    "PERTURBATION_KINDS",
    "THRESHOLDED_KINDS",
    "LocalizationOracle",
    "Procedure",
    "identify",
    "procedure_scores",
    "subsample",
]

LocalizationKind = Literal[
    "activation_patching", "gradient_attribution", "ablation_scanning", "circuit_discovery"
]
LOCALIZATION_KINDS: tuple[str, ...] = (
    "activation_patching",
    "gradient_attribution",
    "ablation_scanning",
    "circuit_discovery",
)
THRESHOLDED_KINDS: tuple[str, ...] = LOCALIZATION_KINDS[:3]
"""Procedures that threshold a per-component score (the others have no score)."""

PERTURBATION_KINDS: tuple[str, ...] = ("method_noise", "subsample")

_MAX_SEED = 2**64 - 1
_SUBSAMPLE_STREAM = 2


class LocalizationOracle(Protocol):
    """What a procedure reads: the behaviour and, for gradient attribution, the magnitudes."""

    universe: tuple[str, ...]

    def __call__(self, active: NDArray[np.bool_]) -> NDArray[np.float64]: ...

    def attribution(self) -> NDArray[np.float64]: ...


@dataclass(frozen=True)
class Procedure:
    """A localization procedure and its parameters (report field ``procedure``).

    Attributes:
        kind: one of :data:`LOCALIZATION_KINDS`.
        threshold: detection threshold τ of a thresholded kind; the faithfulness floor φ of
            circuit discovery.
        seed: seed of the identified set (the seed runs of stability use their own seeds).
        noise_sd: σ, standard deviation of the method's simulated noise (0 for none).
        false_positive_rate: p, probability of the gradient-attribution boost.
        false_positive_boost: b, the boost.
    """

    kind: str
    threshold: float
    seed: int = 0
    noise_sd: float = 0.0
    false_positive_rate: float = 0.0
    false_positive_boost: float = 0.0

    def __post_init__(self) -> None:
        check_choice(self.kind, "kind", LOCALIZATION_KINDS)
        check_finite_scalar(self.threshold, "threshold")
        check_int(self.seed, "seed", minimum=0, maximum=_MAX_SEED)
        for name in ("noise_sd", "false_positive_boost"):
            value = check_finite_scalar(getattr(self, name), name)
            if value < 0.0:
                raise ValueError(f"{name} must be >= 0; got {value!r}")
        rate = check_finite_scalar(self.false_positive_rate, "false_positive_rate")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"false_positive_rate must lie in [0, 1]; got {rate!r}")
        if self.kind != "gradient_attribution" and (rate or self.false_positive_boost):
            raise ValueError(
                "false_positive_rate and false_positive_boost apply to gradient_attribution only; "
                f"got kind {self.kind!r}"
            )
        if self.kind == "circuit_discovery" and self.noise_sd:
            raise ValueError("noise_sd does not apply to circuit_discovery; got a non-zero value")

    @property
    def thresholded(self) -> bool:
        return self.kind in THRESHOLDED_KINDS

    def with_threshold(self, threshold: float) -> Procedure:
        return Procedure(
            self.kind,
            threshold,
            self.seed,
            self.noise_sd,
            self.false_positive_rate,
            self.false_positive_boost,
        )

    def as_dict(self) -> dict[str, Any]:
        """Report fields; parameters that do not apply to the kind are left out."""
        out: dict[str, Any] = {"kind": self.kind, "threshold": self.threshold, "seed": self.seed}
        if self.kind != "circuit_discovery":
            out["noise_sd"] = self.noise_sd
        if self.kind == "gradient_attribution":
            out["false_positive_rate"] = self.false_positive_rate
            out["false_positive_boost"] = self.false_positive_boost
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Procedure:
        return cls(
            kind=data["kind"],
            threshold=data["threshold"],
            seed=data.get("seed", 0),
            noise_sd=data.get("noise_sd", 0.0),
            false_positive_rate=data.get("false_positive_rate", 0.0),
            false_positive_boost=data.get("false_positive_boost", 0.0),
        )


PAPER_PROCEDURES: dict[str, Procedure] = {
    "activation_patching": Procedure("activation_patching", threshold=0.05, noise_sd=0.05),
    "gradient_attribution": Procedure(
        "gradient_attribution",
        threshold=0.2,
        noise_sd=0.1,
        false_positive_rate=0.15,
        false_positive_boost=0.3,
    ),
    "ablation_scanning": Procedure("ablation_scanning", threshold=0.0, noise_sd=0.03),
    "circuit_discovery": Procedure("circuit_discovery", threshold=0.8),
}
"""The simulated methods of §2.3 on the planted model: σ = 0.05 (AP), 0.03 (AS), the 15 %
boost by 0.3 (GA) and the floor 0.80 (CD) are the paper's; the thresholds (which the paper
does not state) and GA's σ are this implementation's choices."""


def _leave_one_out(n: int) -> NDArray[np.bool_]:
    rows = np.ones((n + 1, n), dtype=np.bool_)
    rows[np.arange(1, n + 1), np.arange(n)] = False
    return rows


def procedure_scores(procedure: Procedure, oracle: LocalizationOracle, seed: int) -> NDArray[np.float64]:
    """The per-component scores ``(N,)`` of a thresholded procedure under ``seed``.

    Raises:
        ValueError: for circuit discovery (it has no score) or a malformed oracle.
    """
    if not procedure.thresholded:
        raise ValueError(f"procedure: {procedure.kind} has no per-component score")
    seed = check_int(seed, "seed", minimum=0, maximum=_MAX_SEED)
    n = len(oracle.universe)
    rng = np.random.default_rng(seed)
    if procedure.kind == "gradient_attribution":
        base = np.asarray(oracle.attribution(), dtype=np.float64)
        if base.shape != (n,) or not np.isfinite(base).all():
            raise ValueError(f"oracle.attribution() must return {n} finite values; got {describe(base)}")
        z = rng.standard_normal(n)
        u = rng.random(n)
        return (
            base
            + procedure.noise_sd * z
            + procedure.false_positive_boost * (u < procedure.false_positive_rate)
        )
    values = np.asarray(oracle(_leave_one_out(n)), dtype=np.float64)
    if values.shape != (n + 1,) or not np.isfinite(values).all():
        raise ValueError(f"oracle must return {n + 1} finite values; got {describe(values)}")
    drops = values[0] - values[1:]
    return drops + procedure.noise_sd * rng.standard_normal(n)


def identify(procedure: Procedure, oracle: LocalizationOracle, seed: int) -> NDArray[np.bool_]:
    """The identified set as a boolean mask over ``oracle.universe``."""
    if procedure.thresholded:
        return procedure_scores(procedure, oracle, seed) > procedure.threshold
    universe = oracle.universe
    result = causal_optimality(
        oracle, np.ones(len(universe), dtype=np.bool_), universe, threshold=procedure.threshold
    )
    return np.array([c in result.reduced for c in universe], dtype=np.bool_)


def subsample(seed: int, n: int, size: int) -> NDArray[np.int64]:
    """Example indices of the ``subsample`` perturbation with ``seed``: ``size`` of ``n``, ascending.

    Selection sampling (as in MB-11): ``U = default_rng([seed mod 2³², seed // 2³², 2, n])
    .random(n)`` (uint32 entropy words); example j is taken iff ``(n − j)·U[j] < r``, r the
    number still to take.
    """
    seed = check_int(seed, "seed", minimum=0, maximum=_MAX_SEED)
    n = check_int(n, "n", minimum=1)
    size = check_int(size, "size", minimum=1, maximum=n)
    entropy = np.array([seed & 0xFFFFFFFF, seed >> 32, _SUBSAMPLE_STREAM, n], dtype=np.uint32)
    keys = np.random.default_rng(entropy).random(n)
    chosen: list[int] = []
    remaining = size
    for j in range(n):
        if (n - j) * keys[j] < remaining:
            chosen.append(j)
            remaining -= 1
    return np.asarray(chosen, dtype=np.int64)
