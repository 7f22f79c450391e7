"""Cases of kind ``shortcut_dataset``: 8×8 colour and grayscale images with a shortcut."""

from __future__ import annotations

from ._common import Folder, Json, case, fresh, pickled_npy_bytes, rehash, save
from ._inputs import N_IMAGES, write_shortcut_dataset


@fresh
def shortcut(folder: Folder) -> Json:
    return write_shortcut_dataset(folder, name="document.json")


@case(
    "shortcut_dataset",
    "DK-6 A-8",
    "Eight 3x8x8 float images in two classes, with their kernels and labels in .npy files.",
)
def colour_two_classes(folder: Folder) -> None:
    shortcut(folder)


@case("shortcut_dataset", "DK-6 A-8", "The same images as uint8 grayscale.")
def grayscale_uint8(folder: Folder) -> None:
    write_shortcut_dataset(folder, name="document.json", grayscale=True)


@case(
    "shortcut_dataset",
    "A-4",
    "labels.npy is an object array (a pickle); it is refused, never loaded.",
    ("A105", "/artifacts/2/media_type"),
)
def pickled_object_labels(folder: Folder) -> None:
    doc = shortcut(folder)
    folder.write("labels.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case("shortcut_dataset", "A-4", "clean.npy is cut inside its header.", ("A105", "/artifacts/0/media_type"))
def truncated_npy_header(folder: Folder) -> None:
    doc = shortcut(folder)
    path = folder.root / "clean.npy"
    path.write_bytes(path.read_bytes()[:40])
    save(folder, rehash(folder, doc))


@case(
    "shortcut_dataset",
    "A-4",
    "perturbed.npy is missing the last image's bytes.",
    ("A105", "/artifacts/1/media_type"),
)
def truncated_npy_data(folder: Folder) -> None:
    doc = shortcut(folder)
    path = folder.root / "perturbed.npy"
    path.write_bytes(path.read_bytes()[: -3 * 8 * 8 * 4])
    save(folder, rehash(folder, doc))


@case(
    "shortcut_dataset",
    "A-4",
    '"kind" is only for JSON artifacts that are documents, not for .npy files.',
    ("A105", "/artifacts/0/kind"),
)
def kind_on_npy_artifact(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][0]["kind"] = "shortcut_dataset"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "S-3 DK-6",
    "image_shape lists two dimensions instead of [C, H, W].",
    ("S116", "/image_shape"),
)
def image_shape_two_dims(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["image_shape"] = [8, 8]
    save(folder, doc)


@case("shortcut_dataset", "S-3 DK-6", "n_classes given as a string.", ("S110", "/n_classes"))
def n_classes_string(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["n_classes"] = "2"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "S-3 A-4",
    'media_type "application/octet-stream" is not an allowed media type.',
    ("S113", "/artifacts/3/media_type"),
)
def unknown_media_type(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][3]["media_type"] = "application/octet-stream"
    save(folder, doc)


@case("shortcut_dataset", "S-3 A-3", "A negative byte size.", ("S114", "/artifacts/2/bytes"))
def negative_bytes(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][2]["bytes"] = -1
    save(folder, doc)


@case("shortcut_dataset", "A-8", "labels are declared int32 but stored int64.", ("A110", "/labels/dtype"))
def labels_dtype_mismatch(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["labels"]["dtype"] = "int32"
    save(folder, doc)


@case(
    "shortcut_dataset",
    "A-8",
    "perturbed images are declared 32x32 but stored 8x8.",
    ("A110", "/perturbed_images/shape"),
)
def images_shape_mismatch(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["perturbed_images"]["shape"] = [N_IMAGES, 3, 32, 32]
    save(folder, doc)


@case(
    "shortcut_dataset",
    "A-1",
    "kernels.npy is a symbolic link to a system file outside the repository.",
    ("A101", "/artifacts/3/path"),
)
def symlink_escape_to_system_file(folder: Folder) -> None:
    doc = shortcut(folder)
    (folder.root / "kernels.npy").unlink()
    folder.symlink("kernels.npy", "../" * 12 + "etc/hostname")
    save(folder, doc)


@case("shortcut_dataset", "A-1", "Two artifacts declare the same path.", ("A108", "/artifacts/1/path"))
def duplicate_artifact_path(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["artifacts"][1]["path"] = "clean.npy"
    doc["artifacts"][1]["sha256"] = doc["artifacts"][0]["sha256"]
    save(folder, doc)


@case(
    "shortcut_dataset",
    "B-3 DK-6",
    "Class 1's 5×5 patch starts at row 7 of the 8×8 images: it leaves them.",
    ("B102", "/perturbation/locations/1"),
)
def patch_outside_the_images(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["perturbation"]["locations"][1] = [7, 0]
    save(folder, doc)


@case(
    "shortcut_dataset",
    "B-3",
    "The patch size is 5, not a square, and one location is given for two classes.",
    ("B102", "/perturbation/patch_size"),
    ("B102", "/perturbation/locations"),
)
def patch_not_square_and_locations_missing(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["perturbation"]["patch_size"] = 5
    doc["perturbation"]["locations"] = doc["perturbation"]["locations"][:1]
    save(folder, doc)


@case(
    "shortcut_dataset",
    "B-3 S-3",
    "Class 0's location is [] and class 1's a single coordinate.",
    ("S116", "/perturbation/locations/0"),
    ("S116", "/perturbation/locations/1"),
)
def patch_locations_not_pairs(folder: Folder) -> None:
    doc = shortcut(folder)
    doc["perturbation"]["locations"] = [[], [3]]
    save(folder, doc)
