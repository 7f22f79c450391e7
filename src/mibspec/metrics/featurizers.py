"""Featurizers declared as data: expected weights, orthonormality, and the feature maps (numpy).

Normative text: ``spec/v1/metrics/causal_variable.md`` (MV-7). A featurizer document
(``kind: featurizer``) declares a type, an input dimension d, a feature count n, the
features intervened on and named weight tensors:

=========  ==========================================  ==========================================
type       features f(x)                               inverse g(f)
=========  ==========================================  ==========================================
identity   x                                           f
subspace   x·Rᵀ, R (n × d) with orthonormal rows       f·R
rotation   x·Rᵀ, R (d × d) orthogonal                  f·R
pca        centred: ((x − μ)/σ)·Cᵀ; uncentred: x·Cᵀ    centred: (f·C)·σ + μ; uncentred: f·C
sae        act(x·W_enc + b_enc)                        f·W_dec + b_dec
=========  ==========================================  ==========================================

The interchange of features I (``feature_indices``, all when omitted) from a source vector
s into a base vector b is ``g(f') + e(b)`` with ``f'_i = f(s)_i`` for i in I and ``f(b)_i``
otherwise, and ``e(b) = b − g(f(b))`` the base's reconstruction error when the document
declares ``error: add_base_error`` (``0`` for ``discard``). SAE activations: ``relu``;
``jumprelu`` keeps a pre-activation where it exceeds its ``threshold``; ``topk`` keeps the
``sae_k`` largest pre-activations (ties to the lower index), then applies relu.

This module needs numpy only, so that the validator's rules can check featurizer
documents without torch; the recomputation uses the torch twin in
``mibspec.reference_impl.engine``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ORTHONORMAL_TOLERANCE",
    "NumpyFeaturizer",
    "UnitSite",
    "expected_weights",
    "location_width",
    "orthonormal_weights",
    "orthonormality_error",
    "unit_sites",
]


def location_width(location: Mapping[str, Any], d_model: int, n_heads: int) -> int:
    """The values a location holds per token (a featurizer's ``input_dim`` there): d_model at
    a residual or MLP location, d_model/n_heads per listed head at attention heads.

    >>> location_width({"component": "attention_heads", "heads": [3, 5]}, 768, 12)
    128
    """
    if location.get("component") == "attention_heads":
        return len(location.get("heads") or []) * (d_model // n_heads)
    return d_model


class UnitSite(NamedTuple):
    """One site a causal-variable unit writes: where it sits below the unit (a JSON pointer
    suffix), its location at the unit's position, and the featurizer it names (None: none)."""

    pointer: str
    location: dict[str, Any]
    featurizer: Any


def unit_sites(unit: Mapping[str, Any]) -> list[UnitSite]:
    """Every site a unit writes in one forward pass (MV-10): its location, then each joint
    site placed at the unit's token position, in the report's order.

    >>> unit = {"location": {"layer": 1, "component": "attention_heads", "heads": [2],
    ...                      "position": {"kind": "token", "name": "last"}},
    ...         "featurizer": "f-1-2",
    ...         "joint_sites": [{"layer": 3, "component": "attention_heads", "heads": [0],
    ...                          "featurizer": "f-3-0"}]}
    >>> [(s.pointer, s.location["layer"], s.location["position"]["name"], s.featurizer)
    ...  for s in unit_sites(unit)]
    [('/location', 1, 'last', 'f-1-2'), ('/joint_sites/0', 3, 'last', 'f-3-0')]
    """
    location = dict(unit.get("location") or {})
    sites = [UnitSite("/location", location, unit.get("featurizer"))]
    for j, site in enumerate(unit.get("joint_sites") or []):
        placed = {key: site[key] for key in ("layer", "component", "heads") if site.get(key) is not None}
        placed["position"] = location.get("position")
        sites.append(UnitSite(f"/joint_sites/{j}", placed, site.get("featurizer")))
    return sites


#: Largest allowed ``max |R·Rᵀ − I|`` by the dtype the weights are stored in.
ORTHONORMAL_TOLERANCE: dict[str, float] = {
    "float64": 1e-6,
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 2e-2,
}

_SAE_WEIGHTS = ("W_enc", "b_enc", "W_dec", "b_dec", "threshold")


def expected_weights(doc: Mapping[str, Any]) -> tuple[dict[str, list[int]], list[tuple[str, str]]]:
    """The weight shapes a featurizer document must declare, and its inconsistencies.

    Returns:
        ``(shapes, problems)``: required (and allowed optional) weight names with their
        shapes, and ``(pointer, detail)`` pairs for everything inconsistent with the type:
        missing or unexpected weights, wrong shapes or dtypes, feature counts the type does
        not allow, and type-specific fields missing or set on another type.
    """
    kind = doc.get("type")
    d, n = int(doc["input_dim"]), int(doc["n_features"])
    weights: Mapping[str, Any] = doc.get("weights") or {}
    required, optional, problems = _type_weights(doc, kind, d, n)
    for field, applies_to in (("pca_centring", "pca"), ("sae_activation", "sae"), ("sae_k", "sae")):
        if kind != applies_to and doc.get(field) is not None:
            problems.append((f"/{field}", f"{field} applies to {applies_to} featurizers, not {kind}"))
    allowed = {**optional, **required}
    for name in required:
        if name not in weights:
            problems.append(("/weights", f"a {kind} featurizer needs the weight {name!r}"))
    for name, ref in weights.items():
        if name not in allowed:
            problems.append((f"/weights/{name}", f"a {kind} featurizer has no weight {name!r}"))
            continue
        if list(ref.get("shape", [])) != allowed[name]:
            problems.append(
                (
                    f"/weights/{name}/shape",
                    f"{name} must have shape {allowed[name]}; declared {ref.get('shape')}",
                )
            )
        if ref.get("dtype") not in ORTHONORMAL_TOLERANCE:
            problems.append(
                (f"/weights/{name}/dtype", f"{name} must be a float tensor; declared {ref.get('dtype')}")
            )
    return allowed, problems


def _type_weights(
    doc: Mapping[str, Any], kind: Any, d: int, n: int
) -> tuple[dict[str, list[int]], dict[str, list[int]], list[tuple[str, str]]]:
    """The required and the optional weight shapes of a featurizer type, and the problems of
    its feature count and type-specific fields."""
    problems: list[tuple[str, str]] = []
    required: dict[str, list[int]] = {}
    optional: dict[str, list[int]] = {}
    if kind == "identity":
        if n != d:
            problems.append(
                ("/n_features", f"an identity featurizer has n_features = input_dim = {d}; got {n}")
            )
    elif kind == "subspace":
        required["rotation"] = [n, d]
        if n > d:
            problems.append(
                ("/n_features", f"a subspace of a {d}-dimensional input has at most {d} features")
            )
    elif kind == "rotation":
        required["rotation"] = [d, d]
        if n != d:
            problems.append(("/n_features", f"a rotation has n_features = input_dim = {d}; got {n}"))
    elif kind == "pca":
        required["components"] = [n, d]
        if n > d:
            problems.append(("/n_features", f"PCA of a {d}-dimensional input has at most {d} components"))
        centring = doc.get("pca_centring")
        if centring is None:
            problems.append(
                ("/pca_centring", "a pca featurizer declares pca_centring (centred or uncentred)")
            )
        target = required if centring == "centred" else optional
        target["mean"] = [d]
        target["scale"] = [d]
    elif kind == "sae":
        required.update({"W_enc": [d, n], "b_enc": [n], "W_dec": [n, d], "b_dec": [d]})
        problems += _sae_problems(doc, required, n)
    return required, optional, problems


def _sae_problems(doc: Mapping[str, Any], required: dict[str, list[int]], n: int) -> list[tuple[str, str]]:
    """An SAE's activation and ``sae_k`` (adding the JumpReLU threshold to ``required``)."""
    problems: list[tuple[str, str]] = []
    activation = doc.get("sae_activation")
    if activation is None:
        problems.append(("/sae_activation", "an sae featurizer declares sae_activation"))
    if activation == "jumprelu":
        required["threshold"] = [n]
    if activation == "topk":
        k = doc.get("sae_k")
        if k is None:
            problems.append(("/sae_k", "a topk sae declares sae_k"))
        elif k > n:
            problems.append(("/sae_k", f"sae_k {k} exceeds the {n} latents"))
    elif doc.get("sae_k") is not None:
        problems.append(("/sae_k", "sae_k applies to the topk activation only"))
    return problems


def orthonormal_weights(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the weights whose rows must be orthonormal (subspace, rotation, pca)."""
    return {"subspace": ("rotation",), "rotation": ("rotation",), "pca": ("components",)}.get(
        str(doc.get("type")), ()
    )


def orthonormality_error(matrix: NDArray[Any]) -> float:
    """``max |M·Mᵀ − I|`` in float64: 0 for exactly orthonormal rows."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"matrix: expected a 2-D array, got shape {m.shape}")
    gram = m @ m.T
    return float(np.max(np.abs(gram - np.eye(m.shape[0])))) if m.size else 0.0


class NumpyFeaturizer:
    """The feature map of a featurizer document, in float64 numpy (MV-7).

    Args:
        doc: the featurizer document.
        weights: its tensors by name (as arrays).
    """

    def __init__(self, doc: Mapping[str, Any], weights: Mapping[str, NDArray[Any]]) -> None:
        self.type = str(doc["type"])
        self.n_features = int(doc["n_features"])
        indices = doc.get("feature_indices")
        self.indices = np.arange(self.n_features) if indices is None else np.asarray(indices, dtype=np.intp)
        self.add_error = doc.get("error", "add_base_error") == "add_base_error"
        self.centred = doc.get("pca_centring") == "centred"
        self.activation = doc.get("sae_activation")
        self.k = doc.get("sae_k")
        self.w = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items()}

    def encode(self, x: NDArray[Any]) -> NDArray[np.float64]:
        """Features of ``x`` (``(..., d)`` → ``(..., n)``)."""
        x = np.asarray(x, dtype=np.float64)
        if self.type == "identity":
            return x.copy()
        if self.type in ("subspace", "rotation"):
            return x @ self.w["rotation"].T
        if self.type == "pca":
            z = (x - self.w["mean"]) / self.w["scale"] if self.centred else x
            return z @ self.w["components"].T
        pre = x @ self.w["W_enc"] + self.w["b_enc"]
        if self.activation == "relu":
            return np.maximum(pre, 0.0)
        if self.activation == "jumprelu":
            return np.where(pre > self.w["threshold"], pre, 0.0)
        assert self.k is not None
        out = np.zeros_like(pre)
        flat_pre, flat_out = pre.reshape(-1, pre.shape[-1]), out.reshape(-1, pre.shape[-1])
        for row in range(flat_pre.shape[0]):
            keep = np.argsort(-flat_pre[row], kind="stable")[: self.k]
            flat_out[row, keep] = np.maximum(flat_pre[row, keep], 0.0)
        return out

    def decode(self, f: NDArray[Any]) -> NDArray[np.float64]:
        """The input a feature vector maps back to."""
        f = np.asarray(f, dtype=np.float64)
        if self.type == "identity":
            return f.copy()
        if self.type in ("subspace", "rotation"):
            return f @ self.w["rotation"]
        if self.type == "pca":
            z = f @ self.w["components"]
            return z * self.w["scale"] + self.w["mean"] if self.centred else z
        return f @ self.w["W_dec"] + self.w["b_dec"]

    def interchange(self, base: NDArray[Any], source: NDArray[Any]) -> NDArray[np.float64]:
        """``g(f') + e(base)``: the base with the selected features taken from the source."""
        fb, fs = self.encode(base), self.encode(source)
        mixed = fb.copy()
        mixed[..., self.indices] = fs[..., self.indices]
        out = self.decode(mixed)
        if self.add_error:
            out = out + (np.asarray(base, dtype=np.float64) - self.decode(fb))
        return out
