"""Pixel-level saliency metrics against slow loops and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.metrics import saliency as ms

# --------------------------------------------------------------------------- baselines


def slow_top_k(values: list[float], k: int) -> set[int]:
    return set(sorted(range(len(values)), key=lambda i: (-values[i], i))[:k])


def slow_iou(a: list[float], b: list[float], k: int) -> float:
    top_a, top_b = slow_top_k(a, k), slow_top_k(b, k)
    return len(top_a & top_b) / len(top_a | top_b)


tied_maps = st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=40)


@st.composite
def map_pairs(draw: st.DrawFn, min_size: int = 1) -> tuple[list[float], list[float]]:
    n = draw(st.integers(min_size, 40))
    a = draw(st.lists(st.integers(-3, 3).map(float), min_size=n, max_size=n))
    b = draw(st.lists(st.integers(-3, 3).map(float), min_size=n, max_size=n))
    return a, b


# --------------------------------------------------------------------------- dominance


@pytest.mark.parametrize(
    ("clean", "perturbed", "label", "expected"),
    [
        ([0.05, 0.90, 0.05], [0.98, 0.01, 0.01], 0, True),  # both prerequisites hold
        ([0.05, 0.90, 0.05], [0.90, 0.05, 0.05], 0, False),  # gap 0.85 <= 0.9
        ([0.50, 0.40, 0.10], [1.00, 0.00, 0.00], 0, False),  # clean already predicts c
        ([0.45, 0.45, 0.10], [1.00, 0.00, 0.00], 0, False),  # clean ties at the max: fails
        ([0.00, 1.00, 0.00], [1.00, 0.00, 0.00], 0, True),
    ],
)
def test_dominance_cases(clean: list[float], perturbed: list[float], label: int, expected: bool) -> None:
    result = ms.dominance(clean, perturbed, label)
    assert isinstance(result, bool)
    assert result is expected


def test_dominance_gap_is_strict() -> None:
    # 0.75 - 0.25 = 0.5 exactly: not > 0.5
    assert ms.dominance([0.25, 0.75], [0.75, 0.25], 0, threshold=0.5) is False
    assert ms.dominance([0.25, 0.75], [0.75, 0.25], 0, threshold=0.49) is True


def test_dominance_batched_matches_loop() -> None:
    rng = np.random.default_rng(3)
    clean = rng.dirichlet(np.ones(5) * 0.3, size=200)
    perturbed = rng.dirichlet(np.ones(5) * 0.3, size=200)
    labels = rng.integers(0, 5, size=200)
    result = ms.dominance(clean, perturbed, labels, threshold=0.5)
    assert isinstance(result, np.ndarray)
    expected = [
        (perturbed[i][labels[i]] - clean[i][labels[i]] > 0.5) and (clean[i][labels[i]] < max(clean[i]))
        for i in range(200)
    ]
    assert result.tolist() == expected
    assert 0 < sum(expected) < 200


@pytest.mark.parametrize(
    ("clean", "perturbed", "label", "kwargs", "match"),
    [
        ([0.5, 0.5], [0.5, 0.5, 0.0], 0, {}, "shape"),
        ([1.5, -0.5], [0.5, 0.5], 0, {}, r"\[0, 1\]"),
        ([0.5, 0.5], [0.5, 0.5], 2, {}, "label"),
        ([0.5, 0.5], [0.5, 0.5], 0.0, {}, "label"),
        ([0.5, 0.5], [0.5, 0.5], [0], {}, "label"),
        ([0.5, 0.5], [0.5, 0.5], 0, {"threshold": 1.0}, "threshold"),
        (0.5, 0.5, 0, {}, "class axis"),
    ],
)
def test_dominance_rejects(
    clean: object, perturbed: object, label: object, kwargs: dict[str, float], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        ms.dominance(clean, perturbed, label, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- top-k


@given(tied_maps, st.data())
def test_top_k_mask_matches_slow_sort(values: list[float], data: st.DataObject) -> None:
    k = data.draw(st.integers(0, len(values)))
    assert set(np.flatnonzero(ms.top_k_mask(values, k)).tolist()) == slow_top_k(values, k)


def test_top_k_mask_uses_c_order_flat_index_for_ties() -> None:
    values = np.array([[0.0, 1.0], [1.0, 1.0]])
    assert ms.top_k_mask(values, 2).tolist() == [[False, True], [True, False]]
    assert ms.pixel_order(values).tolist() == [1, 2, 3, 0]


@pytest.mark.slow
@given(map_pairs(), st.data())
def test_top_k_iou_matches_sets(pair: tuple[list[float], list[float]], data: st.DataObject) -> None:
    a, b = pair
    k = data.draw(st.integers(1, len(a)))
    assert ms.top_k_iou(a, b, k) == pytest.approx(slow_iou(a, b, k), abs=1e-15)


@pytest.mark.slow
@given(map_pairs(), st.data())
def test_top_k_precision_matches_loop(pair: tuple[list[float], list[float]], data: st.DataObject) -> None:
    values, other = pair
    relevant = [x > 0 for x in other]
    k = data.draw(st.integers(1, len(values)))
    expected = sum(1 for i in slow_top_k(values, k) if relevant[i]) / k
    assert ms.top_k_precision(values, relevant, k) == pytest.approx(expected, abs=1e-15)


def test_precision_at_k_differs_from_iou() -> None:
    values = [4.0, 3.0, 2.0, 1.0]
    reference = [4.0, 0.0, 3.0, 0.0]
    # top-2 of values {0, 1}; top-2 of reference {0, 2}: IoU 1/3, precision 1/2
    assert ms.top_k_iou(values, reference, 2) == pytest.approx(1 / 3)
    assert ms.top_k_precision(values, [True, False, True, False], 2) == 0.5


def test_top_k_errors() -> None:
    with pytest.raises(ValueError, match="k must"):
        ms.top_k_mask([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="k must"):
        ms.top_k_iou([1.0, 2.0], [1.0, 2.0], 0)
    with pytest.raises(ValueError, match="shape"):
        ms.top_k_iou([1.0, 2.0], [1.0, 2.0, 3.0], 1)
    with pytest.raises(ValueError, match="relevant_mask"):
        ms.top_k_precision([1.0, 2.0], [0.2, 0.9], 1)
    with pytest.raises(ValueError, match="finite"):
        ms.top_k_mask([1.0, np.nan], 1)


# --------------------------------------------------------------------------- WIoU


def test_wiou_default_constants() -> None:
    assert ms.WIOU_KS == (25, 20, 15, 10, 5, 3, 1)
    assert ms.WIOU_WEIGHTS == (1, 3, 5, 10, 15, 20, 25)


@pytest.mark.slow
@given(st.lists(st.floats(-1, 1), min_size=25, max_size=64))
def test_wiou_of_identical_maps_is_one(values: list[float]) -> None:
    assert ms.wiou(values, values) == pytest.approx(1.0, abs=1e-15)


def test_wiou_of_disjoint_top_sets_is_zero() -> None:
    saliency = np.zeros(100)
    ground_truth = np.zeros(100)
    saliency[:25] = np.arange(25, 0, -1)
    ground_truth[50:75] = np.arange(25, 0, -1)
    assert ms.wiou(saliency, ground_truth) == 0.0


@pytest.mark.slow
@given(map_pairs(min_size=25))
def test_wiou_matches_slow_loop(pair: tuple[list[float], list[float]]) -> None:
    saliency, ground_truth = pair
    ks, weights = (25, 20, 15, 10, 5, 3, 1), (1, 3, 5, 10, 15, 20, 25)
    expected = sum(w * slow_iou(saliency, ground_truth, k) for k, w in zip(ks, weights, strict=True)) / 79
    components = ms.wiou_components(saliency, ground_truth)
    assert components.wiou == pytest.approx(expected, abs=1e-12)
    assert components.ious == pytest.approx([slow_iou(saliency, ground_truth, k) for k in ks], abs=1e-15)


@pytest.mark.slow
@given(map_pairs(min_size=5), st.floats(0.1, 100))
def test_wiou_weights_are_normalised(pair: tuple[list[float], list[float]], scale: float) -> None:
    a, b = pair
    ks, weights = (1, 3, 5), (2.0, 1.0, 1.0)
    components = ms.wiou_components(a, b, ks, weights)
    assert sum(components.weights) == pytest.approx(1.0, abs=1e-15)
    scaled = ms.wiou(a, b, ks, [w * scale for w in weights])
    assert scaled == pytest.approx(components.wiou, abs=1e-12)


def test_wiou_unnormalised_uses_raw_weights() -> None:
    a = [5.0, 4.0, 3.0, 2.0, 1.0]
    b = [5.0, 1.0, 4.0, 2.0, 3.0]
    # IoU_1 = 1; top-3 {0,1,2} vs {0,2,4}: 2/4
    assert ms.wiou(a, b, (1, 3), (2.0, 4.0), normalise=False) == pytest.approx(2 * 1 + 4 * 0.5)
    assert ms.wiou(a, b, (1, 3), (2.0, 4.0)) == pytest.approx((2 * 1 + 4 * 0.5) / 6)


def test_wiou_reports_ground_truth_ties_at_the_cut() -> None:
    saliency = np.linspace(1.0, 0.0, 64)
    ground_truth = np.zeros(64)
    ground_truth[10:30] = np.linspace(2.0, 1.0, 20)  # 20 non-zero values, the rest tied at 0
    components = ms.wiou_components(saliency, ground_truth)
    assert components.ground_truth_ties == (True, False, False, False, False, False, False)
    assert components.saliency_ties == (False,) * 7


@pytest.mark.parametrize(
    ("ks", "weights", "match"),
    [
        ((30,), (1.0,), "ks"),
        ((0,), (1.0,), "ks"),
        ((), (), "at least one"),
        ((1, 1), (1.0, 1.0), "distinct"),
        ((1, 2), (1.0,), "one weight per k"),
        ((1, 2), (1.0, -1.0), "non-negative"),
        ((1, 2), (0.0, 0.0), "positive sum"),
    ],
)
def test_wiou_rejects(ks: tuple[int, ...], weights: tuple[float, ...], match: str) -> None:
    values = np.arange(25.0)
    with pytest.raises(ValueError, match=match):
        ms.wiou(values, values, ks, weights)


def test_wiou_rejects_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="ground_truth"):
        ms.wiou(np.zeros((5, 5)), np.zeros(25))


# --------------------------------------------------------------------------- hit accuracy


def test_hit_uses_the_single_most_salient_pixel() -> None:
    mask = np.zeros((4, 4), dtype=bool)
    mask[1:3, 1:3] = True
    saliency = np.zeros((4, 4))
    saliency[2, 2] = 5.0
    assert ms.hit(saliency, mask) is True
    saliency[0, 0] = 6.0
    assert ms.hit(saliency, mask) is False


def test_hit_tie_goes_to_lowest_flat_index() -> None:
    mask = np.array([False, True, True])
    assert ms.hit([1.0, 1.0, 0.0], mask) is False  # pixel 0 wins the tie
    assert ms.hit([0.0, 1.0, 1.0], mask) is True


def test_hit_with_several_top_pixels() -> None:
    mask = np.array([True, True, False, False])
    assert ms.hit([4.0, 3.0, 2.0, 1.0], mask, top=2) is True
    assert ms.hit([4.0, 2.0, 3.0, 1.0], mask, top=2) is False


def test_hit_accuracy_matches_loop() -> None:
    rng = np.random.default_rng(11)
    maps = [rng.normal(size=(6, 6)) for _ in range(40)]
    masks = []
    for _ in range(40):
        mask = np.zeros((6, 6), dtype=bool)
        r, c = rng.integers(0, 4, size=2)
        mask[r : r + 3, c : c + 3] = True
        masks.append(mask)
    expected = sum(bool(m.ravel()[int(np.argmax(s))]) for s, m in zip(maps, masks, strict=True)) / 40
    assert ms.hit_accuracy(maps, masks) == pytest.approx(expected, abs=1e-15)


def test_hit_errors() -> None:
    with pytest.raises(ValueError, match="empty area"):
        ms.hit([1.0, 2.0], [False, False])
    with pytest.raises(ValueError, match="dominant_mask"):
        ms.hit([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="pair up"):
        ms.hit_accuracy([[1.0]], [])
    with pytest.raises(ValueError, match="at least one"):
        ms.hit_accuracy([], [])
    with pytest.raises(ValueError, match="sample 1"):
        ms.hit_accuracy([[1.0], [1.0]], [[True], [False]])


# --------------------------------------------------------------------------- curves


@given(tied_maps, st.data())
def test_perturbation_masks_match_loop(values: list[float], data: st.DataObject) -> None:
    steps = data.draw(st.integers(1, len(values)))
    masks = ms.perturbation_masks(values, steps)
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    assert masks.shape == (steps + 1, len(values))
    for s in range(steps + 1):
        assert set(np.flatnonzero(masks[s]).tolist()) == set(order[:s])


def test_perturbation_masks_keep_the_map_shape() -> None:
    masks = ms.perturbation_masks(np.arange(6.0).reshape(2, 3), 2)
    assert masks.shape == (3, 2, 3)
    assert masks[2].tolist() == [[False, False, False], [False, True, True]]
    with pytest.raises(ValueError, match="n_steps"):
        ms.perturbation_masks(np.arange(6.0), 7)


@given(st.floats(-2, 2), st.integers(1, 50))
def test_curve_auc_closed_forms(c: float, steps: int) -> None:
    assert ms.curve_auc([c] * (steps + 1), "normalised_trapezoid") == pytest.approx(c, abs=1e-12)
    assert ms.curve_auc([c] * (steps + 1), "unit_step_sum") == pytest.approx(c * (steps + 1), abs=1e-9)
    linear = [s / steps for s in range(steps + 1)]
    assert ms.curve_auc(linear, "normalised_trapezoid") == pytest.approx(0.5, abs=1e-12)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=80))
def test_curve_auc_matches_trapezoid_on_unit_interval(values: list[float]) -> None:
    xs = np.linspace(0.0, 1.0, len(values))
    expected = float(np.trapezoid(values, xs))
    assert ms.curve_auc(values, "normalised_trapezoid") == pytest.approx(expected, abs=1e-12)
    assert ms.curve_auc(values, "unit_step_sum") == pytest.approx(sum(values), abs=1e-12)


def test_curve_auc_errors() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ms.curve_auc([1.0], "normalised_trapezoid")
    with pytest.raises(ValueError, match="convention"):
        ms.curve_auc([1.0, 0.0], "trapezoid")  # type: ignore[arg-type]


def test_weighted_iou_from_parts_matches_a_loop_and_wiou_components() -> None:
    from mibspec.metrics.saliency import weighted_iou

    ious = [0.5, 0.25, 1.0, 0.0, 0.75, 0.2, 0.4]
    weights = [1, 3, 5, 10, 15, 20, 25]
    expected = sum(w * v for w, v in zip(weights, ious, strict=True)) / sum(weights)
    assert weighted_iou(ious, weights) == pytest.approx(expected, abs=1e-15)
    assert weighted_iou(ious, weights, normalise=False) == pytest.approx(
        sum(w * v for w, v in zip(weights, ious, strict=True)), abs=1e-12
    )
    with pytest.raises(ValueError, match="one weight per k"):
        weighted_iou(ious, weights[:-1])
