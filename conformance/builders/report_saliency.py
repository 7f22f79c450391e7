"""Report cases of the saliency track (ids ``saliency-…``)."""

from __future__ import annotations

import numpy as np

from ._common import Folder, case, pickled_npy_bytes, read_json, rehash, save
from ._inputs import N_IMAGES, saliency_maps
from ._reports import saliency_report


@case(
    "report",
    "DK-1 A-6 A-7",
    "Two saliency methods on the shortcut dataset against Shapley ground truth: hit "
    "accuracy, WIoU with the paper's k and weights, IoU per k.",
)
def saliency_two_methods(folder: Folder) -> None:
    save(folder, saliency_report(folder))


@case("report", "DK-1 A-6 A-7", "The same evaluation with deletion and addition curve areas.")
def saliency_with_curves(folder: Folder) -> None:
    save(folder, saliency_report(folder, curves=True))


@case(
    "report",
    "D-5",
    "task.n_examples counts one image more than the shortcut dataset holds.",
    ("D105", "/task/n_examples"),
)
def saliency_example_count_not_the_datasets(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["task"]["n_examples"] = N_IMAGES + 1
    save(folder, doc)


@case(
    "report",
    "D-4",
    "Monte-Carlo Shapley ground truth from 3 trials; the default profile requires 5.",
    ("D104", "/settings/shapley_trials"),
)
def saliency_too_few_shapley_trials(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["shapley_trials"] = 3
    save(folder, doc)


@case(
    "report",
    "C-6",
    "The gradient method's WIoU is 0.05 above the weighted mean of its per-k IoUs.",
    ("C110", "/claims/methods/0/wiou"),
)
def saliency_wiou_inconsistent(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["wiou"] += 0.05
    save(folder, doc)


@case(
    "report",
    "C-6",
    "WIoU weighted with the raw paper weights (summing to 79) instead of normalised ones.",
    ("C110", "/claims/methods/1/wiou"),
)
def saliency_wiou_not_normalised(folder: Folder) -> None:
    doc = saliency_report(folder)
    method = doc["claims"]["methods"][1]
    weights = doc["settings"]["wiou_weights"]
    method["wiou"] = min(1.0, sum(w * v for w, v in zip(weights, method["per_k_iou"], strict=True)))
    save(folder, doc)


@case(
    "report",
    "C-6",
    "A dominance rate of 0.8 for 6 dominant images out of 8.",
    ("C111", "/claims/dominance/rate"),
)
def saliency_dominance_rate_inconsistent(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["dominance"]["rate"] = 0.8
    save(folder, doc)


@case("report", "S-3 DK-1", "A hit accuracy of 1.2.", ("S114", "/claims/methods/0/hit_accuracy"))
def saliency_hit_accuracy_above_one(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["hit_accuracy"] = 1.2
    save(folder, doc)


@case("report", "S-3 DK-1", "WIoU without any k.", ("S116", "/settings/wiou_ks"))
def saliency_no_wiou_ks(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["wiou_ks"] = []
    save(folder, doc)


@case("report", "S-3 DK-1", 'Shapley sampler "kernel" is not defined.', ("S113", "/settings/shapley_sampler"))
def saliency_unknown_sampler(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["settings"]["shapley_sampler"] = "kernel"
    save(folder, doc)


@case(
    "report",
    "A-7",
    "A method's maps name an artifact the report does not declare.",
    ("A109", "/claims/methods/1/maps/artifact"),
)
def saliency_undeclared_maps(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][1]["maps"]["artifact"] = "maps-lime"
    save(folder, doc)


@case(
    "report",
    "A-8",
    "A method's maps are declared with one image fewer than the file holds.",
    ("A110", "/claims/methods/0/maps/shape"),
    ("C117", "/claims/methods/0/maps/shape"),
)
def saliency_maps_shape_differs_from_file(folder: Folder) -> None:
    doc = saliency_report(folder)
    doc["claims"]["methods"][0]["maps"]["shape"][0] -= 1
    save(folder, doc)


@case(
    "report",
    "C-6",
    "The ground truth holds one map per image, not one per dominant image.",
    ("C117", "/claims/ground_truth/shape"),
)
def saliency_ground_truth_not_per_dominant_image(folder: Folder) -> None:
    doc = saliency_report(folder)
    truth, _, _ = saliency_maps()
    everything = np.zeros((N_IMAGES, *truth.shape[1:]), dtype=truth.dtype)
    everything[: len(truth)] = truth
    folder.npy("shapley.npy", everything)
    doc["claims"]["ground_truth"]["shape"] = list(everything.shape)
    save(folder, rehash(folder, doc))


@case(
    "report",
    "C-6",
    "A method's maps are twice as wide as the ground truth's.",
    ("C117", "/claims/methods/1/maps/shape"),
)
def saliency_maps_shape_differs_from_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    name = doc["claims"]["methods"][1]["name"]
    _, maps, _ = saliency_maps()
    wide = np.ascontiguousarray(np.concatenate([maps[name], maps[name]], axis=2))
    folder.npy(f"maps_{name}.npy", wide)
    doc["claims"]["methods"][1]["maps"]["shape"] = list(wide.shape)
    save(folder, rehash(folder, doc))


@case(
    "report",
    "A-4",
    "The ground-truth maps are an object array (a pickle).",
    ("A105", "/artifacts/1/media_type"),
)
def saliency_pickled_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    folder.write("shapley.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case("report", "A-2", "The ground-truth maps file is missing.", ("A102", "/artifacts/1/path"))
def saliency_missing_ground_truth(folder: Folder) -> None:
    doc = saliency_report(folder)
    (folder.root / "shapley.npy").unlink()
    save(folder, doc)


@case(
    "report",
    "A-6 A-8",
    "The referenced shortcut dataset is itself invalid (labels declared int32, stored int64).",
    ("A110", "/labels/dtype", "dataset.json"),
    ("A107", "/artifacts/0"),
)
def saliency_referenced_dataset_invalid(folder: Folder) -> None:
    doc = saliency_report(folder)
    dataset = read_json(folder, "dataset.json")
    dataset["labels"]["dtype"] = "int32"
    save(folder, dataset, "dataset.json")
    save(folder, rehash(folder, doc))
