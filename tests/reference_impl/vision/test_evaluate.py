"""The registry CNN, the Shapley game over a dominant area and the curves, against slow baselines.

Independent anchors: a numpy forward of ``tiny-cnn-v1`` written from its definition; a
plain loop over all coalitions with the Shapley formula; a per-permutation loop whose
permutations are regenerated from the MS-10 seeding rule; captum's ``ShapleyValueSampling``
replaying the same permutations; deletion/addition curves built one step at a time.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mibspec.metrics.shapley import shapley_from_permutations  # noqa: E402
from mibspec.reference_impl.threads import one_thread  # noqa: E402
from mibspec.reference_impl.vision import (  # noqa: E402
    PixelGame,
    curve_scores,
    load_registry_model,
    shapley_ground_truth,
)

pytestmark = pytest.mark.recompute

SHAPE = (2, 8, 8)
AREA_CORNER, AREA_SIDE = (2, 3), 3


def _weights(seed: int, shape: tuple[int, int, int] = SHAPE, n_classes: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c, h, w = shape
    return {
        "conv1.weight": rng.normal(0, 0.6, (5, c, 3, 3)).astype(np.float32),
        "conv1.bias": rng.normal(0, 0.1, 5).astype(np.float32),
        "conv2.weight": rng.normal(0, 0.4, (6, 5, 3, 3)).astype(np.float32),
        "conv2.bias": rng.normal(0, 0.1, 6).astype(np.float32),
        "fc.weight": rng.normal(0, 0.8, (n_classes, 6 * (h // 4) * (w // 4))).astype(np.float32),
        "fc.bias": rng.normal(0, 0.1, n_classes).astype(np.float32),
    }


def _numpy_forward(weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """tiny-cnn-v1 from its definition, one image (C, H, W), float64."""

    def conv(a: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        padded = np.pad(a, ((0, 0), (1, 1), (1, 1)))
        out = np.zeros((w.shape[0], a.shape[1], a.shape[2]))
        for o in range(w.shape[0]):
            for r in range(a.shape[1]):
                for c in range(a.shape[2]):
                    out[o, r, c] = np.sum(padded[:, r : r + 3, c : c + 3] * w[o]) + b[o]
        return out

    def pool(a: np.ndarray) -> np.ndarray:
        ch, h, w = a.shape
        return a.reshape(ch, h // 2, 2, w // 2, 2).max(axis=(2, 4))

    w = {k: v.astype(np.float64) for k, v in weights.items()}
    a = pool(np.maximum(conv(x.astype(np.float64), w["conv1.weight"], w["conv1.bias"]), 0))
    a = pool(np.maximum(conv(a, w["conv2.weight"], w["conv2.bias"]), 0))
    return w["fc.weight"] @ a.reshape(-1) + w["fc.bias"]


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    with one_thread():
        yield


@pytest.fixture(scope="module")
def setup() -> dict[str, object]:
    weights = _weights(3)
    model = load_registry_model("tiny-cnn-v1", weights, SHAPE)
    rng = np.random.default_rng(11)
    clean = rng.random(SHAPE).astype(np.float32)
    perturbed = clean.copy()
    r, c = AREA_CORNER
    perturbed[:, r : r + AREA_SIDE, c : c + AREA_SIDE] = rng.random((2, AREA_SIDE, AREA_SIDE))
    # one area pixel is left unperturbed: a null player
    perturbed[:, r + 1, c + 2] = clean[:, r + 1, c + 2]
    area = np.zeros(SHAPE[1:], dtype=bool)
    area[r : r + AREA_SIDE, c : c + AREA_SIDE] = True
    return {
        "model": model,
        "weights": weights,
        "clean": clean,
        "perturbed": perturbed,
        "area": area,
        "label": 2,
    }


def _slow_value(setup: dict[str, object], members: set[int]) -> float:
    """p_label of the image whose area pixels in ``members`` (C-order rank) are perturbed, one forward."""
    clean, perturbed, area = setup["clean"], setup["perturbed"], setup["area"]
    image = np.array(clean, copy=True)
    for rank, flat in enumerate(np.flatnonzero(area)):
        if rank in members:
            r, c = divmod(int(flat), SHAPE[2])
            image[:, r, c] = perturbed[:, r, c]  # type: ignore[index]
    with torch.no_grad():
        logits = setup["model"](torch.as_tensor(image)[None])[0].double()  # type: ignore[operator]
    return float(torch.softmax(logits, dim=0)[setup["label"]])


def test_registry_forward_matches_a_numpy_forward(setup: dict[str, object]) -> None:
    x = np.random.default_rng(5).random((3, *SHAPE)).astype(np.float32)
    with torch.no_grad():
        logits = setup["model"](torch.as_tensor(x)).numpy()  # type: ignore[operator]
    for i in range(3):
        np.testing.assert_allclose(logits[i], _numpy_forward(setup["weights"], x[i]), rtol=1e-5, atol=1e-5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: w.pop("fc.bias"), r"missing \['fc.bias'\]"),
        (lambda w: w.update({"extra": np.zeros(1, np.float32)}), r"unexpected \['extra'\]"),
        (lambda w: w.update({"fc.weight": np.zeros((4, 7), np.float32)}), "fc.weight has shape"),
        (lambda w: w["conv1.bias"].__setitem__(0, np.nan), "finite floating-point"),
    ],
)
def test_registry_refuses_weights_that_do_not_fit(change, message: str) -> None:  # type: ignore[no-untyped-def]
    weights = _weights(3)
    change(weights)
    with pytest.raises(ValueError, match=message):
        load_registry_model("tiny-cnn-v1", weights, SHAPE)


def test_registry_refuses_an_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="architecture: expected one of"):
        load_registry_model("resnet-50", _weights(3), SHAPE)


def test_batched_game_values_equal_one_forward_per_coalition(setup: dict[str, object]) -> None:
    game = PixelGame(setup["model"], setup["clean"], setup["perturbed"], 2, setup["area"], batch_size=7)  # type: ignore[arg-type]
    coalitions = np.random.default_rng(2).random((20, 9)) < 0.5
    values = game(coalitions)
    slow = [_slow_value(setup, set(np.flatnonzero(row).tolist())) for row in coalitions]
    np.testing.assert_allclose(values, slow, rtol=0, atol=1e-6)
    assert game.n_evaluations == 20


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_coalition_images_are_the_clean_image_with_the_members_pixels_perturbed(
    setup: dict[str, object], dtype: str
) -> None:
    # the images are assembled from the raw bits of both images: the values must be copied
    # exactly in every dtype, also one numpy has no type for
    model = load_registry_model("tiny-cnn-v1", setup["weights"], SHAPE).to(getattr(torch, dtype))  # type: ignore[arg-type]
    clean, perturbed = setup["clean"], setup["perturbed"]
    game = PixelGame(model, clean, perturbed, 2, setup["area"])  # type: ignore[arg-type]
    coalitions = np.random.default_rng(4).random((6, 9)) < 0.5
    images = game.images(coalitions)
    assert images.dtype == getattr(torch, dtype)
    for row, image in zip(coalitions, images, strict=True):
        expected = torch.as_tensor(np.array(clean, copy=True)).to(images.dtype)  # type: ignore[arg-type]
        for rank, flat in enumerate(np.flatnonzero(setup["area"])):
            if row[rank]:
                r, c = divmod(int(flat), SHAPE[2])
                expected[:, r, c] = torch.as_tensor(perturbed[:, r, c]).to(images.dtype)  # type: ignore[index]
        assert torch.equal(image, expected)


def test_exact_ground_truth_equals_the_coalition_loop(setup: dict[str, object]) -> None:
    n = 9
    values = {
        frozenset(s): _slow_value(setup, set(s))
        for size in range(n + 1)
        for s in itertools.combinations(range(n), size)
    }
    phi = np.zeros(n)
    for i in range(n):
        others = [p for p in range(n) if p != i]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for s in itertools.combinations(others, size):
                phi[i] += weight * (values[frozenset(s) | {i}] - values[frozenset(s)])
    truth = shapley_ground_truth(
        setup["model"],
        setup["clean"],
        setup["perturbed"],
        2,
        setup["area"],
        sampler="exact",  # type: ignore[arg-type]
    )
    area = setup["area"]
    np.testing.assert_allclose(truth.values[area], phi, rtol=0, atol=1e-6)  # type: ignore[index]
    assert (truth.values[~area] == 0).all()  # type: ignore[operator]
    assert truth.n_evaluations == 2**n
    # efficiency, and the unperturbed pixel is a null player (identical images: exactly 0)
    assert truth.values.sum() == pytest.approx(values[frozenset(range(n))] - values[frozenset()], abs=1e-6)
    assert truth.values[AREA_CORNER[0] + 1, AREA_CORNER[1] + 2] == 0.0


@pytest.mark.parametrize("sampler", ["permutation", "antithetic", "rotated_antithetic"])
def test_sampled_ground_truth_equals_the_per_permutation_loop(setup: dict[str, object], sampler: str) -> None:
    n, trials, seed, index = 9, 3, 7, 5
    group = {"permutation": 1, "antithetic": 2, "rotated_antithetic": 4}[sampler]
    perms = 2 * group
    # MS-10: image i's root is SeedSequence([seed, i]); trial t uses its t-th child
    children = np.random.SeedSequence([seed, index]).spawn(trials)
    estimates = []
    for child in children:
        rng = np.random.default_rng(child)
        orders = []
        for o in np.argsort(rng.random((perms // group, n)), axis=1, kind="stable").tolist():
            turned = o[n // 2 :] + o[: n // 2]  # rotated by half its length
            orders += [[o], [o, o[::-1]], [o, o[::-1], turned, turned[::-1]]][group // 2]
        total = np.zeros(n)
        for order in orders:
            members: set[int] = set()
            previous = _slow_value(setup, members)
            for player in order:
                members.add(player)
                current = _slow_value(setup, members)
                total[player] += current - previous
                previous = current
        estimates.append(total / len(orders))
    expected = np.mean(estimates, axis=0)
    truth = shapley_ground_truth(
        setup["model"],  # type: ignore[arg-type]
        setup["clean"],  # type: ignore[arg-type]
        setup["perturbed"],  # type: ignore[arg-type]
        2,
        setup["area"],  # type: ignore[arg-type]
        sampler=sampler,  # type: ignore[arg-type]
        seed=seed,
        image_index=index,
        n_trials=trials,
        n_permutations=perms,
    )
    np.testing.assert_allclose(truth.values[setup["area"]], expected, rtol=0, atol=1e-6)  # type: ignore[index]
    assert truth.n_evaluations == trials * (2 + perms * (n - 1))


def test_permutation_estimate_equals_captum_for_the_same_permutations(setup: dict[str, object]) -> None:
    captum = pytest.importorskip("captum.attr")
    area = setup["area"]
    game = PixelGame(setup["model"], setup["clean"], setup["perturbed"], 2, area)  # type: ignore[arg-type]
    permutations = np.argsort(np.random.default_rng(9).random((3, 9)), axis=1)
    ours = shapley_from_permutations(game, permutations)

    index = torch.as_tensor(np.flatnonzero(area))
    channels = SHAPE[0]
    base = torch.as_tensor(setup["clean"]).reshape(channels, -1)

    def forward(values: torch.Tensor) -> torch.Tensor:
        x = base.expand(values.shape[0], -1, -1).clone()
        x[:, :, index] = values.reshape(values.shape[0], channels, -1)
        logits = setup["model"](x.reshape(values.shape[0], *SHAPE))  # type: ignore[operator]
        return torch.softmax(logits.double(), dim=-1)[:, 2]

    # one feature per pixel: both channels of a pixel share a feature id
    inputs = torch.as_tensor(setup["perturbed"]).reshape(channels, -1)[:, index].reshape(1, -1)
    baselines = base[:, index].reshape(1, -1)
    feature_mask = torch.arange(9).repeat(channels).reshape(1, -1)
    sampler = captum.ShapleyValueSampling(forward)
    sampler.permutation_generator = lambda num_features, num_samples: iter(p.tolist() for p in permutations)
    with torch.no_grad():
        theirs = sampler.attribute(inputs, baselines=baselines, feature_mask=feature_mask, n_samples=3)
    np.testing.assert_allclose(theirs.double().numpy()[0, :9], ours.values, rtol=0, atol=1e-6)


def test_curves_equal_a_step_by_step_loop(setup: dict[str, object]) -> None:
    model, clean, perturbed = setup["model"], setup["clean"], setup["perturbed"]
    saliency = np.random.default_rng(4).normal(size=SHAPE[1:])
    saliency[0, :3] = saliency[0, 0]  # ties at the top: broken by the lower flat index
    saliency[0, 0] = saliency.max() + 1
    saliency[0, 1] = saliency[0, 2] = saliency[0, 0]
    steps = 6
    deletion, addition = curve_scores(
        model,
        clean[None],
        perturbed[None],
        [2],
        saliency[None],
        steps,
        score="probability",  # type: ignore[arg-type,index]
    )
    order = sorted(range(saliency.size), key=lambda p: (-saliency.flat[p], p))[:steps]
    assert order[:3] == [0, 1, 2]
    for s in range(steps + 1):
        dele, add = np.array(perturbed, copy=True), np.array(clean, copy=True)
        for p in order[:s]:
            r, c = divmod(p, SHAPE[2])
            dele[:, r, c] = clean[:, r, c]  # type: ignore[index]
            add[:, r, c] = perturbed[:, r, c]  # type: ignore[index]
        with torch.no_grad():
            probs = torch.softmax(model(torch.as_tensor(np.stack([dele, add]))).double(), dim=-1)[:, 2]  # type: ignore[operator]
        assert deletion[0, s] == pytest.approx(float(probs[0]), abs=1e-6)
        assert addition[0, s] == pytest.approx(float(probs[1]), abs=1e-6)
    accuracy_del, _ = curve_scores(
        model,
        clean[None],
        perturbed[None],
        [2],
        saliency[None],
        steps,
        score="accuracy",  # type: ignore[arg-type,index]
    )
    assert set(np.unique(accuracy_del)) <= {0.0, 1.0}
