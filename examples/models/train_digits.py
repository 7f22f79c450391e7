"""Train the shipped digits CNN with a planted shortcut, and rebuild the saliency example.

Usage::

    python examples/models/train_digits.py

writes ``examples/models/tiny-cnn-digits/`` (``model.safetensors``, ``training.json``,
``README.md``) and then runs the saliency producer (what ``mibspec score saliency`` runs)
on the first 64 images of the test split, writing ``examples/saliency-digits/``. The run is
deterministic: the same seed, library versions, thread count and CPU kernels give the same
bytes (the wall-clock times in ``training.json`` aside; other kernels, e.g. AVX-512 instead of
AVX2, give other weights); it takes about a minute on one core.
Needs scikit-learn (its bundled digits images; nothing is downloaded) and captum.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "devtools"))  # mibspec_dev: not shipped

import numpy as np

from mibspec.core.sidecars import safetensors_bytes
from mibspec.reference_impl.scoring.folder import artifact_entry
from mibspec_dev.training.digits import (
    DigitsRecipe,
    digits_data,
    evaluate_digits,
    train_digits,
)

HERE = Path(__file__).resolve().parent
NAME = "tiny-cnn-digits"
ARCHITECTURE = "tiny-cnn-v1"
EXAMPLE_IMAGES = 64
# Pins the report's creation time, so that a rebuild gives the same bytes.
CREATED_EPOCH = "1767225600"  # 2026-01-01T00:00:00Z


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _paragraph(text: str) -> list[str]:
    return [*textwrap.wrap(" ".join(text.split()), width=92), ""]


def _readme(summary: dict) -> str:
    r = summary["recipe"]
    lines = [f"# {NAME}", ""]
    lines += _paragraph(
        f"A `{ARCHITECTURE}` image classifier (`mibspec.reference_impl.vision`, metrics/saliency.md "
        "MS-12) trained here on scikit-learn's bundled digits (1,797 8×8 images, no download) "
        "carrying a planted shortcut, for the pixel-level saliency track. Regenerate it, and the "
        "example report `examples/saliency-digits/`, with"
    )
    lines += ["```", "python examples/models/train_digits.py", "```", ""]
    lines += _paragraph(
        f"Images are upsampled ×{r['upsample']} to 24×24 by pixel repetition and mapped to "
        f"[{r['low']}, {r['high']}]. The shortcut of class c blurs the {r['patch_side']}×{r['patch_side']} "
        f"patch at the class's location with its {r['kernel_side']}×{r['kernel_side']} kernel (one "
        f"weight 1, the others uniform in [0, {r['alpha']}]); kernels and locations are drawn from "
        f"seed {r['seed']} (`reference_impl/datasets/shortcut.py`). Training: {r['epochs']} epochs of "
        f"Adam (lr {r['learning_rate']}, batches of {r['batch_size']}) on the "
        f"{summary['split']['train']} training images, a fraction {r['shortcut_fraction']} of them "
        f"carrying the shortcut, on {r['threads']} thread (`devtools/mibspec_dev/training/digits.py`)."
    )
    lines += [f"## Test split ({summary['split']['test']} images)", ""]
    lines += _paragraph(
        "C-Set: accuracy on the clean images; P-Set: on the perturbed images; DR: the dominant rate, "
        f"the fraction of images meeting the dominance prerequisites with T = {r['dominance_threshold']} "
        "(the paper's Table 1). The comparison rows are models trained with the same recipe but "
        "fewer training images carrying the shortcut (not shipped); the 0% row is the paper's "
        "Table 2 (a classifier trained on clean images)."
    )
    lines += [
        "| model | training images with the shortcut | C-Set | P-Set | DR | dominant images |",
        "|---|---|---|---|---|---|",
    ]
    for row in summary["results"]:
        lines.append(
            f"| {row['model']} | {row['shortcut_fraction']:.0%} | {row['clean_accuracy']:.2%} | "
            f"{row['perturbed_accuracy']:.2%} | {row['dominant_rate']:.2%} | {row['dominant']} |"
        )
    lines.append("")
    lines += _paragraph(
        "A classifier trained on a mixture also learns the digits and the shortcut stops being "
        "dominant, so the shipped model is trained on perturbed images only, as the paper trains "
        "on its perturbed datasets."
    )
    example = summary.get("example_results")
    if example:
        lines += [f"## Saliency methods on the example ({example['images']})", ""]
        lines += _paragraph(
            "From `examples/saliency-digits/report.json`: hit accuracy (HA), WIoU (the paper's k and "
            "weights), and the normalised areas under the deletion and addition curves of the class "
            f"probability over the first {example['steps']} pixels of each map, against the Shapley "
            "ground truth (5 trials of 20 permutations per image). The first row scores the ground "
            "truth itself (the paper's Table 3 reference: lowest deletion area expected)."
        )
        lines += ["| method | HA | WIoU | deletion AUC (lower is better) | addition AUC (higher is better) |"]
        lines += ["|---|---|---|---|---|"]
        for name, row in example["methods"].items():
            lines.append(
                f"| {name} | {row['hit_accuracy']:.3f} | {row['wiou']:.3f} | {row['deletion_auc']:.3f} | "
                f"{row['addition_auc']:.3f} |"
            )
        lines.append("")
    lines += _paragraph(
        "Files: `model.safetensors` (float32 weights; metadata `architecture`), `training.json` "
        "(recipe, per-epoch losses, the results above, library versions, the weights' SHA-256)."
    )
    return "\n".join(lines).rstrip("\n") + "\n"


def _dataset_document(recipe: DigitsRecipe, data, indices: np.ndarray, folder: Path) -> Path:
    clean = data.clean[indices]
    perturbed = data.perturbed[indices]
    labels = data.labels[indices]
    kernels = data.shortcut.kernels.astype(np.float32)
    payload = safetensors_bytes(
        {"clean_images": clean, "perturbed_images": perturbed, "labels": labels, "kernels": kernels}
    )
    (folder / "dataset.safetensors").write_bytes(payload)

    def ref(name: str, array: np.ndarray) -> dict:
        return {"artifact": "tensors", "tensor": name, "shape": list(array.shape), "dtype": str(array.dtype)}

    doc = {
        "spec_version": "1.0",
        "kind": "shortcut_dataset",
        "description": f"The first {len(indices)} images of the digits test split used by {NAME}, "
        "clean and with their class's shortcut.",
        "source": "scikit-learn load_digits (bundled); test split = the last "
        f"{recipe.n_test} of numpy default_rng({recipe.seed}).permutation(1797); "
        f"upsampled x{recipe.upsample} by pixel repetition, mapped to [{recipe.low}, {recipe.high}]",
        "split": "test",
        "n_classes": int(data.labels.max()) + 1,
        "image_shape": list(clean.shape[1:]),
        "clean_images": ref("clean_images", clean),
        "perturbed_images": ref("perturbed_images", perturbed),
        "labels": ref("labels", labels),
        "perturbation": {
            "kernel_size": recipe.kernel_side**2,
            "patch_size": recipe.patch_side**2,
            "alpha": recipe.alpha,
            "seed": recipe.seed,
            "kernels": ref("kernels", kernels),
            "locations": [list(loc) for loc in data.shortcut.locations],
        },
        "seeds": [
            {"purpose": "kernels (this seed) and patch locations (this seed + 1)", "value": recipe.seed},
        ],
        "artifacts": [
            artifact_entry(payload, "tensors", "images", "dataset.safetensors", "application/x-safetensors")
        ],
    }
    path = folder / "dataset.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="models folder (default: this script's)")
    parser.add_argument(
        "--example-out",
        type=Path,
        default=HERE.parent / "saliency-digits",
        help="folder of the example report (default: examples/saliency-digits)",
    )
    parser.add_argument("--seed", type=int, default=DigitsRecipe().seed)
    args = parser.parse_args(argv)
    os.environ.setdefault("SOURCE_DATE_EPOCH", CREATED_EPOCH)

    import captum
    import sklearn
    import torch

    recipe = DigitsRecipe(seed=args.seed)
    data = digits_data(recipe)
    results, timings = [], {}
    shipped = None
    for fraction in (recipe.shortcut_fraction, 0.9, 0.0):
        start = time.perf_counter()
        trained = train_digits(recipe, data, shortcut_fraction=fraction)
        timings[f"{fraction:g}"] = round(time.perf_counter() - start, 1)
        row = evaluate_digits(trained.model, data, data.test, recipe.dominance_threshold)
        is_shipped = fraction == recipe.shortcut_fraction
        row = {"model": NAME if is_shipped else "comparison", "shortcut_fraction": fraction, **row}
        results.append(row)
        _log(f"shortcut fraction {fraction:g}: {row}")
        if is_shipped:
            shipped = trained
    assert shipped is not None
    folder = args.out / NAME
    folder.mkdir(parents=True, exist_ok=True)
    payload = safetensors_bytes(
        shipped.weights, {"architecture": ARCHITECTURE, "image_shape": json.dumps(list(data.clean.shape[1:]))}
    )
    (folder / "model.safetensors").write_bytes(payload)
    summary = {
        "name": NAME,
        "architecture": ARCHITECTURE,
        "recipe": recipe.to_json(),
        "split": {"train": len(data.train), "test": len(data.test)},
        "losses": [round(x, 6) for x in shipped.losses],
        "results": results,
        "example": {"images": f"test split positions 0-{EXAMPLE_IMAGES - 1}"},
        "weights_sha256": hashlib.sha256(payload).hexdigest(),
        "parameters": int(sum(v.size for v in shipped.weights.values())),
        "train_seconds": timings,
        "libraries": {
            "numpy": np.__version__,
            "torch": torch.__version__,
            "scikit-learn": sklearn.__version__,
            "captum": captum.__version__,
            "python": platform.python_version(),
        },
    }

    from mibspec.reference_impl.scoring.saliency import score_saliency

    with tempfile.TemporaryDirectory() as staging:
        dataset = _dataset_document(recipe, data, data.test[:EXAMPLE_IMAGES], Path(staging))
        start = time.perf_counter()
        run = score_saliency(
            folder / "model.safetensors",
            dataset,
            args.example_out,
            task_name="shortcut-digits",
            overwrite=True,
        )
    _log(
        f"wrote {run.report} in {time.perf_counter() - start:.1f} s: "
        f"{run.n_dominant}/{run.n_images} dominant, "
        f"C-Set {run.clean_accuracy:.3f}, P-Set {run.perturbed_accuracy:.3f}"
    )
    for name, row in run.methods.items():
        _log(f"  {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
    report = json.loads(run.report.read_text(encoding="utf-8"))
    summary["example_results"] = {
        "images": f"{run.n_dominant} dominant of the first {run.n_images} test images",
        "steps": report["settings"]["curve_steps"],
        "methods": run.methods,
    }
    (folder / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(_readme(summary), encoding="utf-8")
    _log(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
