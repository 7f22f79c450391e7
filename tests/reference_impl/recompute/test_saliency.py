"""The saliency track's recompute stage on the bundled example, end to end.

Independent anchors: the ground truth of a dominant image by a per-permutation loop (one
forward per coalition, permutations regenerated from the MS-10 rule); hit accuracy and
top-k IoUs by Python sets over an explicit sort; a deletion/addition curve built one step
at a time; tampered claims and broken declarations give R103 / R104 at their pointers.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mibspec

torch = pytest.importorskip("torch")

from mibspec.core.sidecars import load_tensor, read_safetensors_header, safetensors_bytes  # noqa: E402
from mibspec.metrics.saliency import weighted_iou  # noqa: E402
from mibspec.reference_impl.threads import one_thread  # noqa: E402
from mibspec.reference_impl.vision import load_registry_model, read_weights  # noqa: E402
from mibspec.validator import Limits  # noqa: E402

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "saliency-digits"


def _tensors(path: Path) -> dict[str, np.ndarray]:
    return {name: np.array(load_tensor(path, info)) for name, info in read_safetensors_header(path).items()}


def _report() -> dict[str, Any]:
    return json.loads((EXAMPLE / "report.json").read_text(encoding="utf-8"))


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "saliency-digits"
    shutil.copytree(EXAMPLE, target)
    return target


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    # the slow baselines run one image at a time: one thread is fastest on a shared machine
    with one_thread():
        yield


@pytest.fixture(scope="module")
def verified() -> Any:
    return mibspec.verify(EXAMPLE / "report.json")


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    data = _tensors(EXAMPLE / "dataset.safetensors")
    doc = json.loads((EXAMPLE / "dataset.json").read_text(encoding="utf-8"))
    model = load_registry_model(
        "tiny-cnn-v1", read_weights(EXAMPLE / "model.safetensors"), doc["image_shape"]
    )
    truth = _tensors(EXAMPLE / "shapley.safetensors")["ground_truth"]
    return {"data": data, "doc": doc, "model": model, "truth": truth, "report": _report()}


def _comparisons(verified: Any) -> dict[str, Any]:
    return {c.pointer: c for c in verified.documents[0].comparisons}


@pytest.mark.slow
def test_bundled_example_verifies_with_recomputation(verified: Any) -> None:
    report = verified.documents[0]
    assert verified.valid, _codes(verified)
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    data = _report()
    methods = data["claims"]["methods"]
    # n_examples, two accuracies, three dominance numbers, the ground truth; per method HA, WIoU,
    # one IoU per k and the two curve areas
    per_method = 2 + len(data["settings"]["wiou_ks"]) + 2
    assert len(report.comparisons) == 7 + per_method * len(methods)
    assert all(c.within and c.claimed is not None for c in report.comparisons)
    # the same seeds give the same ground truth (float32 model: equal to rounding)
    truth = _comparisons(verified)["/claims/ground_truth"]
    assert abs(truth.claimed - truth.recomputed) <= 1e-6


def _model_probability(model: Any, image: np.ndarray, label: int) -> float:
    with torch.no_grad():
        logits = model(torch.as_tensor(image)[None])[0].double()
    return float(torch.softmax(logits, dim=0)[label])


def test_ground_truth_of_one_image_equals_a_per_permutation_loop(example: dict[str, Any]) -> None:
    report, doc, data, model = example["report"], example["doc"], example["data"], example["model"]
    settings = report["settings"]
    labels = data["labels"]
    dominant = _dominant_indices(example)
    assert len(dominant) == report["claims"]["dominance"]["n_dominant"]
    j = 1
    index = int(dominant[j])
    label = int(labels[index])
    row, col = doc["perturbation"]["locations"][label]
    side = math.isqrt(doc["perturbation"]["patch_size"])
    pixels = [(r, c) for r in range(row, row + side) for c in range(col, col + side)]
    clean, perturbed = data["clean_images"][index], data["perturbed_images"][index]
    n, trials, perms = len(pixels), settings["shapley_trials"], settings["shapley_permutations"]
    estimates = []
    for child in np.random.SeedSequence([settings["shapley_seed"], index]).spawn(trials):
        orders = np.argsort(np.random.default_rng(child).random((perms, n)), axis=1, kind="stable")
        total = np.zeros(n)
        for order in orders:
            image = clean.copy()
            previous = _model_probability(model, image, label)
            for player in order.tolist():
                r, c = pixels[player]
                image[:, r, c] = perturbed[:, r, c]
                current = _model_probability(model, image, label)
                total[player] += current - previous
                previous = current
        estimates.append(total / perms)
    expected = np.mean(estimates, axis=0)
    declared = example["truth"][j]
    np.testing.assert_allclose([declared[r, c] for r, c in pixels], expected, rtol=0, atol=1e-6)
    outside = np.ones(declared.shape, dtype=bool)
    outside[row : row + side, col : col + side] = False
    assert (declared[outside] == 0).all()


def test_map_scores_equal_set_arithmetic(example: dict[str, Any], verified: Any) -> None:
    report, truth = example["report"], example["truth"]
    ks, weights = report["settings"]["wiou_ks"], report["settings"]["wiou_weights"]
    m = next(i for i, row in enumerate(report["claims"]["methods"]) if row["name"] == "occlusion")
    maps = _tensors(EXAMPLE / f"maps_{report['claims']['methods'][m]['name']}.safetensors")["maps"]
    doc, labels = example["doc"], example["data"]["labels"]
    side = math.isqrt(doc["perturbation"]["patch_size"])
    comparisons = _comparisons(verified)
    dominant = _dominant_indices(example)

    def top(values: np.ndarray, k: int) -> set[int]:
        flat = values.ravel().tolist()
        return set(sorted(range(len(flat)), key=lambda p: (-flat[p], p))[:k])

    hits, ious = 0, {k: [] for k in ks}
    for j in range(len(truth)):
        r0, c0 = doc["perturbation"]["locations"][int(labels[dominant[j]])]
        patch = {r * truth.shape[2] + c for r in range(r0, r0 + side) for c in range(c0, c0 + side)}
        hits += min(top(maps[j], 1)) in patch
        for k in ks:
            a, b = top(maps[j], k), top(truth[j], k)
            ious[k].append(len(a & b) / len(a | b))
    per_k = [float(np.mean(ious[k])) for k in ks]
    pointer = f"/claims/methods/{m}"
    assert comparisons[f"{pointer}/hit_accuracy"].recomputed == pytest.approx(hits / len(truth), abs=1e-12)
    for i, value in enumerate(per_k):
        assert comparisons[f"{pointer}/per_k_iou/{i}"].recomputed == pytest.approx(value, abs=1e-12)
    total = sum(weights)
    assert comparisons[f"{pointer}/wiou"].recomputed == pytest.approx(
        sum(w / total * v for w, v in zip(weights, per_k, strict=True)), abs=1e-12
    )


def test_deletion_and_addition_areas_equal_a_step_by_step_loop(
    example: dict[str, Any], verified: Any
) -> None:
    report, truth, data, model = example["report"], example["truth"], example["data"], example["model"]
    steps = report["settings"]["curve_steps"]
    m = next(i for i, row in enumerate(report["claims"]["methods"]) if row["name"] == "gradient")
    maps = _tensors(EXAMPLE / "maps_gradient.safetensors")["maps"]
    labels = data["labels"]
    comparisons = _comparisons(verified)
    deletion_curves, addition_curves = [], []
    index = _dominant_indices(example)
    for j, i in enumerate(index):
        clean, perturbed, label = data["clean_images"][i], data["perturbed_images"][i], int(labels[i])
        flat = maps[j].ravel().tolist()
        order = sorted(range(len(flat)), key=lambda p: (-flat[p], p))[:steps]
        dele, add = perturbed.copy(), clean.copy()
        d_curve = [_model_probability(model, dele, label)]
        a_curve = [_model_probability(model, add, label)]
        for p in order:
            r, c = divmod(p, maps.shape[2])
            dele[:, r, c] = clean[:, r, c]
            add[:, r, c] = perturbed[:, r, c]
            d_curve.append(_model_probability(model, dele, label))
            a_curve.append(_model_probability(model, add, label))
        deletion_curves.append(d_curve)
        addition_curves.append(a_curve)
    assert len(index) == len(truth)

    def trapezoid(values: list[float]) -> float:
        return sum((values[s] + values[s + 1]) / 2 for s in range(len(values) - 1)) / (len(values) - 1)

    deletion = trapezoid(list(np.mean(deletion_curves, axis=0)))
    addition = trapezoid(list(np.mean(addition_curves, axis=0)))
    pointer = f"/claims/methods/{m}"
    assert comparisons[f"{pointer}/deletion_auc"].recomputed == pytest.approx(deletion, abs=1e-6)
    assert comparisons[f"{pointer}/addition_auc"].recomputed == pytest.approx(addition, abs=1e-6)


def _dominant_indices(example: dict[str, Any]) -> list[int]:
    """Dataset indices of the dominant images, from the model's probabilities (MS-2)."""
    data, model, report = example["data"], example["model"], example["report"]
    labels = data["labels"]
    with torch.no_grad():
        p_clean = torch.softmax(model(torch.as_tensor(data["clean_images"])).double(), -1).numpy()
        p_pert = torch.softmax(model(torch.as_tensor(data["perturbed_images"])).double(), -1).numpy()
    rows = np.arange(len(labels))
    mask = (p_pert[rows, labels] - p_clean[rows, labels] > report["settings"]["dominance_threshold"]) & (
        p_clean[rows, labels] < p_clean.max(axis=1)
    )
    return [int(i) for i in np.flatnonzero(mask)]


@pytest.mark.slow
def test_tampered_claims_and_ground_truth_are_not_reproduced(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    report = folder / "report.json"
    truth_path = folder / "shapley.safetensors"
    truth = _tensors(truth_path)["ground_truth"].copy()
    truth[0] *= 1.02
    payload = safetensors_bytes({"ground_truth": truth})
    truth_path.write_bytes(payload)

    def tamper(data: dict[str, Any]) -> None:
        claims = data["claims"]
        claims["clean_accuracy"] -= 0.05
        # n_dominant is pinned by the declared map shapes (C117); the image count is not
        claims["dominance"]["n_images"] += 1
        claims["dominance"]["rate"] = claims["dominance"]["n_dominant"] / claims["dominance"]["n_images"]
        method = claims["methods"][2]
        method["per_k_iou"][0] = max(0.0, method["per_k_iou"][0] - 0.1)
        # keep the report self-consistent (C110), so that only recomputation can tell
        method["wiou"] = weighted_iou(method["per_k_iou"], data["settings"]["wiou_weights"])
        claims["methods"][3]["deletion_auc"] += 0.01
        entry = next(a for a in data["artifacts"] if a["id"] == "shapley")
        entry["sha256"] = hashlib.sha256(payload).hexdigest()
        entry["bytes"] = len(payload)

    _edit(report, tamper)
    result = mibspec.verify(report)
    assert not result.valid
    codes = _codes(result)
    assert {code for code, _ in codes} == {"R103"}
    assert set(codes) == {
        ("R103", "/claims/clean_accuracy"),
        ("R103", "/claims/dominance/n_images"),
        ("R103", "/claims/dominance/rate"),
        ("R103", "/claims/ground_truth"),
        ("R103", "/claims/methods/2/per_k_iou/0"),
        ("R103", "/claims/methods/2/wiou"),
        ("R103", "/claims/methods/3/deletion_auc"),
    }
    finding = next(f for f in result.documents[0].findings if f.pointer == "/claims/clean_accuracy")
    assert finding.data["recomputed"] - finding.data["claimed"] == pytest.approx(0.05, abs=1e-12)


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (lambda d: d["model"].update({"architecture": "resnet-50"}), "/model/architecture"),
        (lambda d: d["settings"].pop("shapley_seed"), "/settings/shapley_seed"),
        (lambda d: d["settings"].update({"shapley_sampler": "exact"}), "/settings/shapley_sampler"),
        (lambda d: d["task"].pop("dataset"), "/task/dataset"),
    ],
)
def test_unusable_declarations_give_r104(tmp_path: Path, change: Any, pointer: str) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "report.json", change)
    result = mibspec.verify(folder / "report.json")
    assert not result.valid
    assert ("R104", pointer) in _codes(result)
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "failed"


def test_no_recompute_skips_the_stage() -> None:
    result = mibspec.verify(EXAMPLE / "report.json", recompute=False)
    assert result.valid
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "skipped"


@pytest.mark.parametrize(
    ("settings", "pointer", "said"),
    [
        # the permutations of one trial cannot be held (8 bytes × 10**12 × 25 players = 182 TiB)
        ({"shapley_permutations": 10**12}, "/settings/shapley_permutations", "holds at least 182 TiB"),
        # a trial count far beyond the time limit is refused before the first trial
        ({"shapley_trials": 10**9}, "/settings/shapley_trials", "over the limit of 3 s"),
    ],
)
def test_declared_shapley_work_beyond_the_machine_is_a_finding(
    tmp_path: Path, settings: dict[str, int], pointer: str, said: str
) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "report.json", lambda data: data["settings"].update(settings))
    result = mibspec.verify(folder / "report.json", limits=Limits(max_recompute_seconds=3))
    assert not result.internal_errors
    [finding] = [f for f in result.findings if f.code.startswith("R")]
    assert (finding.code, finding.pointer) == ("R125", pointer)
    assert said in finding.message
