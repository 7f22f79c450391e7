"""Every reference method writes a report that verifies with recomputation; the answer checkers.

Independent anchors: the PCA components are compared with numpy's SVD of the standardised
activations written out here; the substring rule with MIB's example ("1" matches "10"); the
orthonormality of every written DAS rotation, to 1e-4, computed here. Units at every token
(MIB's IOI ``Token:all``) and joint units of heads on two layers are trained by every method
and verify; two runs of one seed write the same featurizer files, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import mibspec
from mibspec.reference_impl.scoring.causal_variable import parse_position

if TYPE_CHECKING:
    from conftest import SmallDataset

pytestmark = pytest.mark.recompute
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    source = REPO / "examples" / "datasets" / "arithmetic"
    lines = (source / "test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:12]
    (folder / "test.jsonl").write_text("".join(lines), encoding="utf-8")
    meta = json.loads((source / "test.meta.json").read_text(encoding="utf-8"))
    dropped = meta["rows"] - 12
    meta["filters"].append({"name": "other", "kept": 12, "dropped": dropped, "detail": "first rows"})
    meta["rows"] = 12
    (folder / "test.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder / "test.meta.json"


def _run(dataset: Path, out: Path, **options: Any) -> dict[str, Any]:
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    settings: dict[str, Any] = {
        "layers": [1],
        "positions": ["last"],
        "counterfactuals": ["ones_carry", "random_operands"],
        "train_rows": 40,
        "steps": 5,
        **options,
    }
    run = score_causal_variable(MODELS / "tiny-gpt2", dataset, out, **settings)
    result = mibspec.verify(run.report, model_roots=[MODELS])
    assert result.valid, [str(f) for f in result.findings]
    report = result.documents[0]
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    data: dict[str, Any] = json.loads(run.report.read_text(encoding="utf-8"))
    # every claim compared: the row count, and per variable each unit's scores and kept-pair
    # counts, each layer, Average and best
    expected = 1 + sum(
        2 + len(v["per_layer"]) + sum(len(u["scores"]) + len(u.get("n_examples") or {}) for u in v["units"])
        for v in data["claims"]["variables"]
    )
    assert len(report.comparisons) == expected
    assert all(c.claimed is not None and c.within for c in report.comparisons)
    return data


def _featurizer(folder: Path, report: dict[str, Any]) -> dict[str, Any]:
    ident = report["claims"]["variables"][0]["units"][0]["featurizer"]
    path = next(a["path"] for a in report["artifacts"] if a["id"] == ident)
    return json.loads((folder / path).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.slow
def test_pca_method_declares_its_centring_and_standardised_components(dataset: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from mibspec.reference_impl.scoring._featurizer_training import fit_pca

    report = _run(dataset, tmp_path / "pca", method="pca", pca_centring="uncentred")
    doc = _featurizer(tmp_path / "pca", report)
    assert (doc["type"], doc["pca_centring"], doc["n_features"]) == ("pca", "uncentred", 64)
    assert doc["feature_indices"]
    weights = load_file(str(tmp_path / "pca" / doc["artifacts"][0]["path"]))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 6)) * np.arange(1, 7) + np.arange(6)
    fitted = fit_pca(x, 3)
    z = (x - x.mean(0)) / x.std(0)
    _, _, vt = np.linalg.svd(z)
    for row in range(3):  # the same directions up to sign
        assert abs(float(np.dot(fitted["components"][row], vt[row]))) == pytest.approx(1.0, abs=1e-5)
    assert weights["components"].shape == (64, 64)


def test_sae_method_with_a_learned_mask(dataset: Path, tmp_path: Path) -> None:
    report = _run(dataset, tmp_path / "sae", method="sae", sae_latents=96)
    doc = _featurizer(tmp_path / "sae", report)
    assert (doc["type"], doc["sae_activation"], doc["n_features"]) == ("sae", "relu", 96)
    assert 1 <= len(doc["feature_indices"]) <= 96


def test_attention_heads_and_the_mib_2025_substring_rule(dataset: Path, tmp_path: Path) -> None:
    report = _run(
        dataset,
        tmp_path / "heads",
        method="full_vector",
        component="attention_heads",
        heads=[2, 0],
        profile="mib-2025",
    )
    assert report["settings"]["checker"] == "substring"
    unit = report["claims"]["variables"][0]["units"][0]
    assert unit["location"]["heads"] == [2, 0]
    assert _featurizer(tmp_path / "heads", report)["input_dim"] == 32


class _Codec:
    def decode(self, ids: list[int]) -> str:
        return " ".join({1: "10", 2: "1", 3: "21"}[i] for i in ids)


def test_answer_checkers() -> None:
    from mibspec.reference_impl.recompute.causal_variable import _check_answer

    # exact tokens: only the same token sequence
    assert _check_answer("exact_token", [2], [2], " 1", _Codec())
    assert not _check_answer("exact_token", [1], [2], " 1", _Codec())
    # substring (the public MIB checker): "1" is found in "10" and in "21"
    assert _check_answer("substring", [1], [2], " 1", _Codec())
    assert _check_answer("substring", [3], [2], " 1", _Codec())
    assert not _check_answer("substring", [2], [1], " 10", _Codec())


def test_all_is_a_position_of_its_own() -> None:
    assert parse_position("all") == {"rule": "all"}
    with pytest.raises(ValueError, match="expected last, all, index:N"):
        parse_position("all:3")  # every token takes no parameter


# --------------------------------------------------------------------------- joint units of heads


def test_joint_heads_are_read_as_layer_colon_head() -> None:
    from mibspec.reference_impl.scoring.causal_variable import parse_joint_head

    assert parse_joint_head("7:3") == (7, 3)
    assert parse_joint_head("0:10") == (0, 10)
    for bad in ("7", "7,3", "7:", ":3", "-1:3", "7:3:1", "7.3"):
        with pytest.raises(ValueError, match=r"LAYER:HEAD"):
            parse_joint_head(bad)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"component": "residual_post"}, r"attention heads; component is 'residual_post'"),
        ({"layers": [1]}, r"leave out layers and heads"),
        ({"heads": [0]}, r"leave out layers and heads"),
        ({"joint_heads": [(1, 0)]}, r"at least two distinct"),
        ({"joint_heads": [(1, 0), (1, 0)]}, r"at least two distinct"),
    ],
)
def test_joint_units_the_run_cannot_score_are_refused_before_loading(
    settings: dict[str, Any], message: str, tmp_path: Path
) -> None:
    """A joint unit is two or more distinct heads, given instead of layers and heads: the run
    stops before any model or dataset is read."""
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    options: dict[str, Any] = {
        "method": "full_vector",
        "component": "attention_heads",
        "joint_heads": [(1, 0), (3, 1)],
        "positions": ["last"],
        **settings,
    }
    with pytest.raises(ValueError, match=message):
        # neither path exists: a refusal that read them would fail otherwise
        score_causal_variable(
            tmp_path / "no-model", tmp_path / "no-dataset.json", tmp_path / "out", **options
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_joint_head_outside_the_model_is_named(tmp_path: Path) -> None:
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    with pytest.raises(ValueError, match=r"joint_heads: \(1, 4\): site: heads must lie in \[0, 4\)"):
        score_causal_variable(
            MODELS / "tiny-gpt2",
            REPO / "examples" / "datasets" / "ioi" / "test.meta.json",
            tmp_path / "out",
            method="full_vector",
            component="attention_heads",
            joint_heads=[(1, 0), (1, 4)],
            positions=["all"],
        )
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- trained at every token, jointly


@pytest.fixture(scope="module")
def ioi(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> Path:
    return small_ioi_dataset(tmp_path_factory.mktemp("ioi"), 16)


def _ioi(dataset: Path, out: Path, **options: Any) -> dict[str, Any]:
    """A verified IOI report of units at every token (``_run``'s checks)."""
    settings: dict[str, Any] = {
        "layers": None,
        "component": "attention_heads",
        "positions": ["all"],
        "variables": ["output_token"],
        "counterfactuals": ["random_names", "io_s2_flip"],
        "steps": 10,
        **options,
    }
    return _run(dataset, out, **settings)


def _site_documents(folder: Path, report: dict[str, Any]) -> list[dict[str, Any]]:
    """The featurizer document of the unit's location, then of each joint site."""
    unit = report["claims"]["variables"][0]["units"][0]
    idents = [unit["featurizer"], *(site["featurizer"] for site in unit.get("joint_sites", []))]
    paths = {a["id"]: a["path"] for a in report["artifacts"]}
    return [json.loads((folder / paths[i]).read_text(encoding="utf-8")) for i in idents]


def _rotations_are_orthonormal(folder: Path, report: dict[str, Any]) -> None:
    """Each site's subspace rows are orthonormal to 1e-4, and its document, verified on its
    own, raises no finding (V101 among them)."""
    from safetensors.numpy import load_file

    unit = report["claims"]["variables"][0]["units"][0]
    paths = {a["id"]: a["path"] for a in report["artifacts"]}
    for ident in [unit["featurizer"], *(site["featurizer"] for site in unit.get("joint_sites", []))]:
        doc = json.loads((folder / paths[ident]).read_text(encoding="utf-8"))
        assert (doc["type"], doc["n_features"], doc["location"]["position"]) == (
            "subspace",
            4,
            {"rule": "all"},
        )
        rotation = load_file(str(folder / doc["artifacts"][0]["path"]))["rotation"].astype(np.float64)
        assert float(np.abs(rotation @ rotation.T - np.eye(4)).max()) <= 1e-4
        alone = mibspec.verify(folder / paths[ident])
        assert alone.valid
        assert not [f.code for d in alone.documents for f in d.findings]


@pytest.mark.slow
def test_das_at_every_token_of_one_head_verifies(ioi: Path, tmp_path: Path) -> None:
    report = _ioi(ioi, tmp_path / "all", method="das", layers=[3], heads=[1])
    [unit] = report["claims"]["variables"][0]["units"]
    assert unit["location"]["position"] == {"rule": "all"}
    assert "Token-all" in unit["id"]
    _rotations_are_orthonormal(tmp_path / "all", report)


@pytest.mark.slow
def test_joint_das_over_heads_of_two_layers_verifies_and_one_seed_writes_the_same_files(
    ioi: Path, tmp_path: Path
) -> None:
    """MIB's IOI DAS baseline: one rotation per head, trained together at every token."""
    heads = [(3, 1), (1, 2), (1, 0)]
    first = _ioi(ioi, tmp_path / "one", method="das", joint_heads=heads, seed=3)
    [unit] = first["claims"]["variables"][0]["units"]
    assert [(s["layer"], s["heads"]) for s in unit["joint_sites"]] == [(1, [2]), (3, [1])]
    _rotations_are_orthonormal(tmp_path / "one", first)
    second = _ioi(ioi, tmp_path / "two", method="das", joint_heads=heads, seed=3)
    sidecars = sorted(p.name for p in (tmp_path / "one").glob("*.safetensors"))
    assert len(sidecars) == 3
    for name in sidecars:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert first["claims"] == second["claims"]
    # another seed trains other rotations
    other = _ioi(ioi, tmp_path / "other", method="das", joint_heads=heads, seed=4)
    assert any(
        (tmp_path / "one" / name).read_bytes() != (tmp_path / "other" / name).read_bytes()
        for name in sidecars
    )
    assert other["claims"] != first["claims"]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dbm", "pca", "sae"])
def test_masked_methods_train_joint_units_at_every_token(ioi: Path, tmp_path: Path, method: str) -> None:
    """One mask per head, trained together; PCA and the SAE fitted on every token's activation
    of each head on the train split's base prompts."""
    report = _ioi(ioi, tmp_path / method, method=method, joint_heads=[(1, 0), (3, 1)])
    docs = _site_documents(tmp_path / method, report)
    assert [d["location"]["heads"] for d in docs] == [[0], [1]]
    width = {"dbm": 16, "pca": 16, "sae": 64}[method]
    for doc in docs:
        assert doc["n_features"] == width
        assert 1 <= len(doc["feature_indices"]) <= width
