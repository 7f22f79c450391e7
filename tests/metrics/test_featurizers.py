"""Feature maps declared as data: closed forms, the torch twin, and the declaration checks.

Independent anchors: DAS's update b + (f(s) − f(b))_I·R_I written out by hand; a rotation
with every feature selected returns the source exactly; an SAE's top-k written as a loop
over sorted values; the float64 numpy map for the torch map used by recomputation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mibspec.metrics.featurizers import (
    NumpyFeaturizer,
    expected_weights,
    orthonormality_error,
)

D, N = 12, 5


def _orthonormal(n: int, d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, n)))
    return np.ascontiguousarray(q.T)


def _weights(kind: str, rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    doc: dict[str, Any] = {"type": kind, "input_dim": D, "n_features": N, "feature_indices": [0, 2, 3]}
    if kind == "identity":
        doc |= {"n_features": D, "feature_indices": [1, 4, 7, 11]}
        return doc, {}
    if kind == "subspace":
        return doc, {"rotation": _orthonormal(N, D, 1)}
    if kind == "rotation":
        doc |= {"n_features": D, "feature_indices": [0, 5, 6]}
        return doc, {"rotation": _orthonormal(D, D, 2)}
    if kind == "pca":
        doc["pca_centring"] = "centred"
        return doc, {
            "components": _orthonormal(N, D, 3),
            "mean": rng.normal(size=D),
            "scale": 1 + rng.random(D),
        }
    doc |= {"sae_activation": "relu", "n_features": 2 * D, "feature_indices": [0, 3, 9, 20]}
    return doc, {
        "W_enc": rng.normal(size=(D, 2 * D)),
        "b_enc": rng.normal(size=2 * D) * 0.1,
        "W_dec": rng.normal(size=(2 * D, D)),
        "b_dec": rng.normal(size=D),
    }


def test_das_update_in_closed_form() -> None:
    rng = np.random.default_rng(0)
    doc, weights = _weights("subspace", rng)
    featurizer = NumpyFeaturizer(doc, weights)
    base, source = rng.normal(size=(4, D)), rng.normal(size=(4, D))
    r = weights["rotation"][[0, 2, 3]]
    expected = base + (source @ r.T - base @ r.T) @ r
    np.testing.assert_allclose(featurizer.interchange(base, source), expected, atol=1e-12)
    # discarding the error keeps only the span of R
    np.testing.assert_allclose(
        NumpyFeaturizer({**doc, "error": "discard"}, weights).interchange(base, source),
        (
            np.where(
                np.isin(np.arange(N), [0, 2, 3]), source @ weights["rotation"].T, base @ weights["rotation"].T
            )
        )
        @ weights["rotation"],
        atol=1e-12,
    )


def test_full_selection_returns_the_source() -> None:
    rng = np.random.default_rng(1)
    base, source = rng.normal(size=(3, D)), rng.normal(size=(3, D))
    rotation = NumpyFeaturizer({"type": "rotation", "n_features": D}, {"rotation": _orthonormal(D, D, 4)})
    np.testing.assert_allclose(rotation.interchange(base, source), source, atol=1e-12)
    identity = NumpyFeaturizer({"type": "identity", "n_features": D}, {})
    np.testing.assert_array_equal(identity.interchange(base, source), source)
    # no feature selected: nothing changes, whatever the reconstruction error
    doc, weights = _weights("sae", rng)
    sae = NumpyFeaturizer({**doc, "feature_indices": []}, weights)
    np.testing.assert_allclose(sae.interchange(base, source), base, atol=1e-12)


def test_topk_keeps_the_k_largest_with_ties_to_the_lower_index() -> None:
    doc = {"type": "sae", "n_features": 5, "sae_activation": "topk", "sae_k": 2}
    weights = {"W_enc": np.eye(5), "b_enc": np.zeros(5), "W_dec": np.eye(5), "b_dec": np.zeros(5)}
    featurizer = NumpyFeaturizer(doc, weights)
    x = np.array([[0.5, 2.0, 0.5, 2.0, 3.0], [1.0, 1.0, 1.0, -1.0, -2.0], [-1.0, -2.0, -3.0, -4.0, -5.0]])
    expected = np.zeros_like(x)
    for row in range(3):
        order = sorted(range(5), key=lambda i: (-x[row, i], i))[:2]
        for i in order:
            expected[row, i] = max(x[row, i], 0.0)
    np.testing.assert_array_equal(featurizer.encode(x), expected)
    jump = NumpyFeaturizer({**doc, "sae_activation": "jumprelu"}, {**weights, "threshold": np.full(5, 0.75)})
    np.testing.assert_array_equal(jump.encode(x[:1]), [[0.0, 2.0, 0.0, 2.0, 3.0]])


@pytest.mark.recompute
@pytest.mark.parametrize("kind", ["identity", "subspace", "rotation", "pca", "sae"])
def test_torch_featurizer_matches_numpy(kind: str) -> None:
    torch = pytest.importorskip("torch")
    from mibspec.reference_impl.engine import TorchFeaturizer

    rng = np.random.default_rng(7)
    doc, weights = _weights(kind, rng)
    base, source = rng.normal(size=(6, D)), rng.normal(size=(6, D))
    for variant in ({}, {"error": "discard"}, {"pca_centring": "uncentred"} if kind == "pca" else {}):
        full = {**doc, **variant}
        expected = NumpyFeaturizer(full, weights).interchange(base, source)
        got = TorchFeaturizer(full, weights, dtype=torch.float64).interchange(
            torch.as_tensor(base), torch.as_tensor(source)
        )
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-10)


def test_orthonormality_error() -> None:
    rows = _orthonormal(3, 8, 5)
    assert orthonormality_error(rows) < 1e-12
    assert orthonormality_error(rows * 1.1) == pytest.approx(0.21, abs=1e-9)
    skewed = rows.copy()
    skewed[1] = rows[0]
    assert orthonormality_error(skewed) == pytest.approx(1.0, abs=1e-9)


def _ref(shape: list[int], dtype: str = "float32") -> dict[str, Any]:
    return {"artifact": "w", "tensor": "t", "shape": shape, "dtype": dtype}


def test_expected_weights_reports_every_inconsistency() -> None:
    ok = {"type": "subspace", "input_dim": 8, "n_features": 2, "weights": {"rotation": _ref([2, 8])}}
    assert expected_weights(ok)[1] == []
    problems = dict(
        expected_weights(
            {
                "type": "sae",
                "input_dim": 8,
                "n_features": 4,
                "sae_activation": "topk",
                "sae_k": 5,
                "pca_centring": "centred",
                "weights": {
                    "W_enc": _ref([4, 8]),
                    "b_enc": _ref([4], "int32"),
                    "W_dec": _ref([4, 8]),
                    "rotation": _ref([4, 8]),
                },
            }
        )[1]
    )
    assert set(problems) == {
        "/sae_k",
        "/pca_centring",
        "/weights",  # b_dec missing
        "/weights/W_enc/shape",
        "/weights/b_enc/dtype",
        "/weights/rotation",
    }
    rotation = {"type": "rotation", "input_dim": 8, "n_features": 3, "weights": {"rotation": _ref([8, 8])}}
    assert [p for p, _ in expected_weights(rotation)[1]] == ["/n_features"]


def _bf16_featurizer(folder: Any, name: str, rows: np.ndarray) -> Any:
    import hashlib
    import json
    import struct

    bits = (np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
    header = json.dumps(
        {"rotation": {"dtype": "BF16", "shape": list(rows.shape), "data_offsets": [0, bits.nbytes]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    data = struct.pack("<Q", len(header)) + header + bits.tobytes()
    (folder / f"{name}.safetensors").write_bytes(data)
    doc = {
        "spec_version": "1.0",
        "kind": "featurizer",
        "type": "subspace",
        "input_dim": rows.shape[1],
        "n_features": rows.shape[0],
        "location": {"layer": 0, "component": "residual_post", "position": {"rule": "last"}},
        "weights": {
            "rotation": {
                "artifact": "w",
                "tensor": "rotation",
                "shape": list(rows.shape),
                "dtype": "bfloat16",
            }
        },
        "artifacts": [
            {
                "id": "w",
                "role": "weights",
                "path": f"{name}.safetensors",
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "media_type": "application/x-safetensors",
            }
        ],
    }
    (folder / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder / f"{name}.json"


def test_bfloat16_rotations_are_checked_too(tmp_path: Any) -> None:
    import mibspec

    rows = _orthonormal(2, 32, 6)
    good = mibspec.verify(_bf16_featurizer(tmp_path, "good", rows), recompute=False)
    assert good.valid, [str(f) for f in good.findings]
    bad = mibspec.verify(_bf16_featurizer(tmp_path, "bad", rows * 1.2), recompute=False)
    assert [(f.code, f.pointer) for f in bad.findings] == [("V101", "/weights/rotation")]
