"""Cases of kind ``featurizer``: DAS, SAE, PCA and identity featurizers."""

from __future__ import annotations

import numpy as np

from ._common import Folder, Json, case, pickled_npy_bytes, rehash, save
from ._inputs import das_featurizer, identity_featurizer, orthonormal_rows, pca_featurizer, sae_featurizer


def das_document(folder: Folder) -> Json:
    """The DAS featurizer of ``das-layer3-last-token``, written as the case's document."""
    return das_featurizer(folder, name="document.json", sidecar="rotation.safetensors")


@case(
    "featurizer",
    "DK-3 A-8",
    "DAS: a one-dimensional subspace of GPT-2 small's residual stream after layer 3 at the last token.",
)
def das_layer3_last_token(folder: Folder) -> None:
    das_document(folder)


@case("featurizer", "DK-3 A-8", "A ReLU SAE read at the last sub-token of the second mention of the subject.")
def sae_subject_slot(folder: Folder) -> None:
    sae_featurizer(folder, name="document.json")


@case(
    "featurizer",
    "DK-3 A-8",
    "PCA with its standardisation declared (uncentred application), weights in three .npy files.",
)
def pca_uncentred(folder: Folder) -> None:
    pca_featurizer(folder, name="document.json")


@case("featurizer", "DK-3", "The full-vector baseline: an identity featurizer needs no weights.")
def identity_full_vector(folder: Folder) -> None:
    identity_featurizer(folder, layer=12, name="document.json")


@case("featurizer", "S-2", "The document does not say which kind it is.", ("S103", ""))
def missing_kind(folder: Folder) -> None:
    doc = das_document(folder)
    del doc["kind"]
    save(folder, doc)


@case("featurizer", "S-2", 'kind "feature_map" is not a document kind.', ("S103", "/kind"))
def unknown_kind(folder: Folder) -> None:
    doc = das_document(folder)
    doc["kind"] = "feature_map"
    save(folder, doc)


@case(
    "featurizer",
    "S-3 DK-3",
    "A property the location object does not define.",
    ("S112", "/location/hook_name"),
)
def location_additional_property(folder: Folder) -> None:
    doc = das_document(folder)
    doc["location"]["hook_name"] = "blocks.3.hook_resid_post"
    save(folder, doc)


@case("featurizer", "S-3 DK-3", "A featurizer whose input dimension is 0.", ("S114", "/input_dim"))
def zero_input_dim(folder: Folder) -> None:
    doc = das_document(folder)
    doc["input_dim"] = 0
    save(folder, doc)


@case(
    "featurizer",
    "S-3 DK-3",
    'Token position rule "second_last" is not defined.',
    ("S113", "/location/position/rule"),
)
def unknown_position_rule(folder: Folder) -> None:
    doc = das_document(folder)
    doc["location"]["position"] = {"rule": "second_last"}
    save(folder, doc)


@case(
    "featurizer",
    "A-8",
    "The rotation is declared 768x1 but stored 1x768; 768x1 is not a subspace's shape either.",
    ("A110", "/weights/rotation/shape"),
    ("V102", "/weights/rotation/shape"),
)
def rotation_shape_mismatch(folder: Folder) -> None:
    doc = das_document(folder)
    doc["weights"]["rotation"]["shape"] = [768, 1]
    save(folder, doc)


@case(
    "featurizer",
    "A-8",
    "The rotation is declared float64 but stored float32.",
    ("A110", "/weights/rotation/dtype"),
)
def rotation_dtype_mismatch(folder: Folder) -> None:
    doc = das_document(folder)
    doc["weights"]["rotation"]["dtype"] = "float64"
    save(folder, doc)


@case(
    "featurizer",
    "A-4",
    "The PCA components file is an object array (a pickle); it is refused, never loaded.",
    ("A105", "/artifacts/2/media_type"),
)
def pickled_npy_weights(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    folder.write("pca_components.npy", pickled_npy_bytes())
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "A-4",
    "The PCA components file's .npy header holds a fourth key beside descr, fortran_order and shape.",
    ("A105", "/artifacts/2/media_type"),
)
def npy_header_extra_key(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    path = folder.root / "pca_components.npy"
    raw = path.read_bytes()
    length = int.from_bytes(raw[8:10], "little")
    header = raw[10 : 10 + length].decode("latin1").rstrip().removesuffix("}")
    header += "'extra': 1, }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    folder.write(
        "pca_components.npy",
        raw[:8] + len(header).to_bytes(2, "little") + header.encode("latin1") + raw[10 + length :],
    )
    save(folder, rehash(folder, doc))


@case("featurizer", "A-2", "The weights sidecar is absent.", ("A102", "/artifacts/0/path"))
def missing_weights_file(folder: Folder) -> None:
    das_document(folder)
    (folder.root / "rotation.safetensors").unlink()


@case(
    "featurizer", "A-2", "The weights path names a folder, not a regular file.", ("A102", "/artifacts/0/path")
)
def weights_path_is_folder(folder: Folder) -> None:
    das_document(folder)
    (folder.root / "rotation.safetensors").unlink()
    (folder.root / "rotation.safetensors").mkdir()
    (folder.root / "rotation.safetensors" / "README").write_bytes(b"weights go here\n")


@case(
    "featurizer",
    "A-4",
    "A safetensors file declared with the .bin extension.",
    ("A105", "/artifacts/0/media_type"),
)
def weights_wrong_extension(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.bin")
    save(folder, doc)


@case("featurizer", "DK-3 CV-1", "A full rotation of a 16-dimensional input with four selected features.")
def full_rotation_selected_features(folder: Folder) -> None:
    doc = das_featurizer(
        folder, name="document.json", sidecar="rotation.safetensors", input_dim=16, n_features=1
    )
    folder.safetensors("rotation.safetensors", {"rotation": orthonormal_rows(16, 16, 11)})
    doc |= {"type": "rotation", "n_features": 16, "feature_indices": [0, 3, 7, 15]}
    doc["weights"]["rotation"]["shape"] = [16, 16]
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "DK-3 CV-1 CV-2",
    "A top-k SAE on two attention heads' outputs (2 x 8 values) at the correct choice's label.",
)
def topk_sae_on_attention_heads(folder: Folder) -> None:
    doc = sae_featurizer(folder, name="document.json")
    rng = np.random.default_rng(13)
    d, n = 16, 32
    tensors = {
        "W_enc": (rng.normal(size=(d, n)) / 4).astype(np.float32),
        "b_enc": np.zeros(n, dtype=np.float32),
        "W_dec": (rng.normal(size=(n, d)) / 4).astype(np.float32),
        "b_dec": np.zeros(d, dtype=np.float32),
    }
    folder.safetensors("sae.safetensors", tensors)
    doc["weights"] = {
        key: {"artifact": "sae", "tensor": key, "shape": list(value.shape), "dtype": "float32"}
        for key, value in tensors.items()
    }
    doc |= {"input_dim": d, "n_features": n, "sae_activation": "topk", "sae_k": 4, "feature_indices": [1, 2]}
    doc["location"] = {
        "layer": 3,
        "component": "attention_heads",
        "heads": [1, 3],
        "position": {"rule": "slot", "slot": "label_{answer_pointer}"},
    }
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "CV-1",
    "A DAS rotation whose rows are not orthonormal (scaled by 1.1).",
    ("V101", "/weights/rotation"),
)
def rotation_not_orthonormal(folder: Folder) -> None:
    doc = das_featurizer(folder, name="document.json", sidecar="rotation.safetensors", n_features=2)
    folder.safetensors("rotation.safetensors", {"rotation": orthonormal_rows(2, 768, 0) * np.float32(1.1)})
    save(folder, rehash(folder, doc))


@case("featurizer", "CV-1", "PCA components with two equal rows.", ("V101", "/weights/components"))
def pca_components_repeat_a_row(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    components = orthonormal_rows(8, 32, 10)
    components[1] = components[0]
    folder.npy("pca_components.npy", components)
    save(folder, rehash(folder, doc))


@case(
    "featurizer",
    "CV-1",
    "A jumprelu SAE without its threshold, and an identity featurizer field set on it.",
    ("V102", "/weights"),
    ("V102", "/pca_centring"),
)
def jumprelu_without_threshold(folder: Folder) -> None:
    doc = sae_featurizer(folder, name="document.json")
    doc["sae_activation"] = "jumprelu"
    doc["pca_centring"] = "centred"
    save(folder, doc)


@case(
    "featurizer",
    "CV-1",
    "A centred PCA without its mean and scale.",
    ("V102", "/weights"),
    ("V102", "/weights"),
)
def centred_pca_without_mean(folder: Folder) -> None:
    doc = pca_featurizer(folder, name="document.json")
    doc["pca_centring"] = "centred"
    del doc["weights"]["mean"], doc["weights"]["scale"]
    save(folder, doc)


@case(
    "featurizer", "CV-1", "An identity featurizer with fewer features than inputs.", ("V102", "/n_features")
)
def identity_fewer_features(folder: Folder) -> None:
    doc = identity_featurizer(folder, layer=12, name="document.json")
    doc["n_features"] = 100
    save(folder, doc)


@case(
    "featurizer",
    "CV-1",
    "Feature index 1 of a one-feature subspace, and index 0 listed twice.",
    ("V103", "/feature_indices/1"),
    ("V103", "/feature_indices"),
)
def feature_index_out_of_range(folder: Folder) -> None:
    doc = das_document(folder)
    doc["feature_indices"] = [0, 1, 0]
    save(folder, doc)


@case(
    "featurizer",
    "CV-2",
    "A slot position without its slot name, carrying an index of the index rule.",
    ("V104", "/location/position"),
    ("V104", "/location/position/index"),
)
def slot_position_without_slot(folder: Folder) -> None:
    doc = das_document(folder)
    doc["location"]["position"] = {"rule": "slot", "index": 3}
    save(folder, doc)


@case(
    "featurizer",
    "CV-2",
    "An attention-heads location without heads.",
    ("V104", "/location/heads"),
)
def attention_heads_without_heads(folder: Folder) -> None:
    doc = das_document(folder)
    doc["location"]["component"] = "attention_heads"
    save(folder, doc)


@case(
    "featurizer",
    "CV-2 MV-8",
    "A named position without its name, carrying the token text of an occurrence rule.",
    ("V104", "/location/position"),
    ("V104", "/location/position/token"),
)
def named_position_without_name(folder: Folder) -> None:
    doc = das_document(folder)
    doc["location"]["position"] = {"rule": "named", "token": " A"}
    save(folder, doc)
