"""Synthetic transformer with a planted circuit (CAUSAL-BENCH §2.2, Eq. 1).

The universe has ``L·H + L`` components, in canonical order layer by layer, heads
first, then the MLP::

    L0.attn_head[0], ..., L0.attn_head[H-1], L0.mlp, L1.attn_head[0], ..., L{L-1}.mlp

(the order of EAP-IG forward nodes without ``input``). The behaviour of a coalition S of
active components is

    β(S) = sigmoid(8·(|S ∩ S*| / |S*| − 0.5)) + ε,    ε ~ N(0, σ_m²),

where ε is a pure function of ``(seed, S)``: it is the first ``standard_normal()`` draw of
``numpy.random.default_rng(entropy)`` times σ_m, with the uint32 entropy words

    [seed mod 2³², seed // 2³², 1, N, w_0, ..., w_{⌈N/32⌉−1}],
    w_k = Σ_{t=0}^{31} S[32k + t] · 2^t    (bits past N are 0),

so a coalition gets the same ε whatever the batch or call order. Per-component causal
contributions (σ = ``signal`` for circuit components, N(0, sd²) for the others) are
``sd · default_rng([seed mod 2³², seed // 2³², 0, N]).standard_normal(N)`` in canonical
order, with circuit entries then set to ``signal``; Eq. 1 does not use them, they are
there for simulated localisation methods. Normative text: ``spec/v1/metrics/causal_bench.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from mibspec.metrics.causal_bench import to_mask
from mibspec.metrics.checks import as_bool_array, check_finite_scalar, check_int, describe

__all__ = [
    "PAPER_PLANTED_ROLES",
    "PlantedCircuitModel",
    "component_id",
    "component_universe",
    "default_planted",
]

Kind = Literal["attn_head", "mlp"]

PAPER_PLANTED_ROLES: tuple[tuple[Kind, int, int], ...] = (
    ("attn_head", 0, 0),  # operand head
    ("attn_head", 0, 1),  # operand head
    ("mlp", 1, 0),  # computes the function
    ("attn_head", 2, 0),  # routes the result
    ("mlp", 3, 0),  # formats the output
)
"""The paper's planted circuit as (kind, layer, head) roles; the head index of an MLP is unused."""

_STEEPNESS = 8.0
_MIDPOINT = 0.5
_CONTRIBUTION_STREAM = 0
_MEASUREMENT_STREAM = 1
_MAX_SEED = 2**64 - 1


def component_id(kind: Kind, layer: int, head: int = 0) -> str:
    """Component id in the paper's naming: ``L{layer}.attn_head[{head}]`` or ``L{layer}.mlp``."""
    if kind == "attn_head":
        return f"L{layer}.attn_head[{head}]"
    if kind == "mlp":
        return f"L{layer}.mlp"
    raise ValueError(f"kind must be 'attn_head' or 'mlp'; got {describe(kind)}")


def component_universe(n_layers: int, n_heads: int) -> tuple[str, ...]:
    """All ``L·H + L`` component ids in canonical order (per layer: heads, then the MLP).

    Example:
        >>> component_universe(1, 2)
        ('L0.attn_head[0]', 'L0.attn_head[1]', 'L0.mlp')
    """
    L = check_int(n_layers, "n_layers", minimum=1)
    H = check_int(n_heads, "n_heads", minimum=1)
    ids: list[str] = []
    for layer in range(L):
        ids.extend(component_id("attn_head", layer, head) for head in range(H))
        ids.append(component_id("mlp", layer))
    return tuple(ids)


def default_planted(n_layers: int, n_heads: int) -> frozenset[str]:
    """The paper's planted circuit adapted to an ``L × H`` model.

    Each role of :data:`PAPER_PLANTED_ROLES` is mapped to layer ``min(layer, L − 1)`` and
    head ``min(head, H − 1)``; roles that land on the same component merge. Models with
    L ≥ 4 and H ≥ 2 get the paper's five components; 2L/2H gets four
    (``L0.attn_head[0]``, ``L0.attn_head[1]``, ``L1.attn_head[0]``, ``L1.mlp``).

    Example:
        >>> sorted(default_planted(1, 1))
        ['L0.attn_head[0]', 'L0.mlp']
    """
    L = check_int(n_layers, "n_layers", minimum=1)
    H = check_int(n_heads, "n_heads", minimum=1)
    return frozenset(
        component_id(kind, min(layer, L - 1), min(head, H - 1)) for kind, layer, head in PAPER_PLANTED_ROLES
    )


def _seed_words(seed: int) -> list[int]:
    return [seed & 0xFFFFFFFF, seed >> 32]


def _packed_words(active: NDArray[np.bool_]) -> NDArray[np.uint32]:
    """Rows of ``(B, N)`` masks as little-endian 32-bit words, bit t of word k = column 32k + t."""
    packed = np.packbits(active, axis=1, bitorder="little")
    padding = (-packed.shape[1]) % 4
    if padding:
        packed = np.pad(packed, ((0, 0), (0, padding)))
    return np.ascontiguousarray(packed).view("<u4").astype(np.uint32)


class PlantedCircuitModel:
    """Planted-circuit behaviour (Eq. 1), a pure and batched function of the active set.

    Instances are callable as a CAUSAL-BENCH ``Behaviour``: boolean ``(B, N)`` coalitions
    over :attr:`universe` → ``(B,)`` behaviour values.

    Args:
        n_layers: L ≥ 1.
        n_heads: H ≥ 1.
        seed: integer in ``[0, 2⁶⁴)`` fixing contributions and measurement noise.
        signal: causal contribution σ of circuit components.
        component_noise_sd: standard deviation (not variance) of non-circuit contributions.
        measurement_noise_sd: standard deviation σ_m of ε (not variance).
        planted: the ground-truth circuit S*, non-empty; default :func:`default_planted`.
        noiseless: if True, ε = 0.

    Raises:
        ValueError: on invalid sizes, seed, noise levels or planted set.
    """

    def __init__(
        self,
        n_layers: int,
        n_heads: int,
        *,
        seed: int,
        signal: float = 1.0,
        component_noise_sd: float = 0.1,
        measurement_noise_sd: float = 0.02,
        planted: Iterable[str] | None = None,
        noiseless: bool = False,
    ) -> None:
        self.n_layers = check_int(n_layers, "n_layers", minimum=1)
        self.n_heads = check_int(n_heads, "n_heads", minimum=1)
        self.seed = check_int(seed, "seed", minimum=0, maximum=_MAX_SEED)
        self.signal = check_finite_scalar(signal, "signal")
        self.component_noise_sd = _check_sd(component_noise_sd, "component_noise_sd")
        self.measurement_noise_sd = _check_sd(measurement_noise_sd, "measurement_noise_sd")
        if not isinstance(noiseless, bool):
            raise ValueError(f"noiseless must be a bool; got {describe(noiseless)}")
        self.noiseless = noiseless
        self.universe: tuple[str, ...] = component_universe(self.n_layers, self.n_heads)
        mask = to_mask(
            default_planted(self.n_layers, self.n_heads) if planted is None else planted, self.universe
        )
        if not mask.any():
            raise ValueError("planted must contain at least one component; got an empty set")
        mask.setflags(write=False)
        self.planted_mask: NDArray[np.bool_] = mask
        self.planted: frozenset[str] = frozenset(self.universe[i] for i in np.flatnonzero(mask).tolist())
        self.contributions: NDArray[np.float64] = self._draw_contributions()

    @property
    def n_components(self) -> int:
        """N = L·H + L."""
        return len(self.universe)

    def _draw_contributions(self) -> NDArray[np.float64]:
        entropy = np.array(
            [*_seed_words(self.seed), _CONTRIBUTION_STREAM, self.n_components], dtype=np.uint32
        )
        values = self.component_noise_sd * np.random.default_rng(entropy).standard_normal(self.n_components)
        values[self.planted_mask] = self.signal
        values.setflags(write=False)
        return values

    def _check_active(self, active: Any) -> NDArray[np.bool_]:
        array = np.asarray(active)
        if array.ndim != 2:
            raise ValueError(
                f"active must be a 2-D boolean array (B, {self.n_components}); got {describe(array)}"
            )
        return as_bool_array(array, "active", shape=(array.shape[0], self.n_components))

    def expected_behaviour(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        """Noise-free part ``sigmoid(8·(|S ∩ S*|/|S*| − 0.5))`` for each row of ``active``."""
        rows = self._check_active(active)
        return self._expected(rows)

    def _expected(self, rows: NDArray[np.bool_]) -> NDArray[np.float64]:
        hits = np.count_nonzero(rows & self.planted_mask, axis=1)
        x = _STEEPNESS * (hits / len(self.planted) - _MIDPOINT)
        return 1.0 / (1.0 + np.exp(-x))

    def measurement_noise(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        """ε for each row of ``active``: a pure function of ``(seed, row)`` (zeros if noiseless)."""
        rows = self._check_active(active)
        return self._noise(rows)

    def _noise(self, rows: NDArray[np.bool_]) -> NDArray[np.float64]:
        noise = np.zeros(rows.shape[0], dtype=np.float64)
        if self.noiseless or self.measurement_noise_sd == 0.0 or rows.shape[0] == 0:
            return noise
        prefix = [*_seed_words(self.seed), _MEASUREMENT_STREAM, self.n_components]
        words = _packed_words(rows)
        drawn: dict[bytes, float] = {}  # a batch often repeats coalitions
        for b in range(rows.shape[0]):
            key = words[b].tobytes()
            if key not in drawn:
                entropy = np.concatenate([np.array(prefix, dtype=np.uint32), words[b]])
                drawn[key] = float(np.random.default_rng(entropy).standard_normal())
            noise[b] = self.measurement_noise_sd * drawn[key]
        return noise

    def behaviour(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        """β for each row of a boolean ``(B, N)`` matrix of active components (Eq. 1)."""
        rows = self._check_active(active)
        return self._expected(rows) + self._noise(rows)

    def __call__(self, active: NDArray[np.bool_]) -> NDArray[np.float64]:
        return self.behaviour(active)

    def attribution(self) -> NDArray[np.float64]:
        """True contribution magnitudes ``|contribution_c|`` in canonical order (the base score
        of the simulated gradient attribution, MB-18)."""
        return np.abs(self.contributions)

    def without_noise(self) -> PlantedCircuitModel:
        """The same model (universe, planted set, contributions) with ε = 0."""
        return PlantedCircuitModel(
            self.n_layers,
            self.n_heads,
            seed=self.seed,
            signal=self.signal,
            component_noise_sd=self.component_noise_sd,
            measurement_noise_sd=self.measurement_noise_sd,
            planted=self.planted,
            noiseless=True,
        )

    def settings(self) -> dict[str, Any]:
        """The model's parameters as report fields (``behaviour`` of a CAUSAL-BENCH report)."""
        return {
            "kind": "planted",
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "seed": self.seed,
            "signal": self.signal,
            "component_noise_sd": self.component_noise_sd,
            "measurement_noise_sd": 0.0 if self.noiseless else self.measurement_noise_sd,
        }

    def __repr__(self) -> str:
        return (
            f"PlantedCircuitModel(n_layers={self.n_layers}, n_heads={self.n_heads}, seed={self.seed}, "
            f"planted={sorted(self.planted, key=self.universe.index)}, noiseless={self.noiseless})"
        )


def _check_sd(value: float, name: str) -> float:
    result = check_finite_scalar(value, name)
    if result < 0.0:
        raise ValueError(f"{name} must be >= 0; got {result!r}")
    return result
