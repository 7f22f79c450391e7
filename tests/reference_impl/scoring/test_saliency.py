"""``mibspec score saliency``: the written folder verifies with recomputation and is reproducible."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import mibspec

pytest.importorskip("torch")
pytest.importorskip("captum")

from mibspec.core.sidecars import load_tensor, read_safetensors_header, safetensors_bytes

pytestmark = pytest.mark.recompute

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "saliency-digits"
EPOCH = "1767225600"


def _small_dataset(folder: Path, n_images: int = 16) -> Path:
    """The example's shortcut dataset cut to its first ``n_images`` images."""
    source = EXAMPLE / "dataset.safetensors"
    tensors = {
        name: np.array(load_tensor(source, info)) for name, info in read_safetensors_header(source).items()
    }
    for name in ("clean_images", "perturbed_images", "labels"):
        tensors[name] = tensors[name][:n_images]
    payload = safetensors_bytes(tensors)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.safetensors").write_bytes(payload)
    doc = json.loads((EXAMPLE / "dataset.json").read_text(encoding="utf-8"))
    for name in ("clean_images", "perturbed_images", "labels"):
        doc[name]["shape"][0] = n_images
    doc["artifacts"][0].update({"sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)})
    path = folder / "dataset.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


ARGS = ("--method", "gradient", "--method", "occlusion", "--permutations", "4", "--seed", "3")


@pytest.mark.slow
def test_score_writes_a_report_that_verifies_and_reproduces(
    tmp_path: Path, mibspec_cli, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    dataset = _small_dataset(tmp_path / "input")
    out = tmp_path / "out"
    weights = EXAMPLE / "model.safetensors"
    run = mibspec_cli(
        "score", "saliency", "-w", str(weights), "-d", str(dataset), "-o", str(out), *ARGS,
        env={"SOURCE_DATE_EPOCH": EPOCH},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "conformant without recomputation" in run.stdout
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [m["name"] for m in report["claims"]["methods"]] == [
        "shapley_ground_truth",
        "gradient",
        "occlusion",
    ]
    assert report["settings"]["shapley_seed"] == 3
    assert report["settings"]["shapley_permutations"] == 4
    assert report["claims"]["dominance"]["n_dominant"] >= 2

    result = mibspec.verify(out / "report.json")
    assert result.valid, [(f.code, f.pointer, f.message) for d in result.documents for f in d.findings]
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    # WIoU of the ground truth against itself is 1, and its hit accuracy is 1 (its top pixel is in the patch)
    assert report["claims"]["methods"][0]["wiou"] == pytest.approx(1.0, abs=1e-12)

    from mibspec.reference_impl.scoring.saliency import score_saliency

    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    again = tmp_path / "again"
    score_saliency(
        weights, dataset, again, methods=["gradient", "occlusion"], n_permutations=4, shapley_seed=3
    )
    for path in sorted(out.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_score_reports_bad_arguments(tmp_path: Path, mibspec_cli) -> None:  # type: ignore[no-untyped-def]
    from mibspec.reference_impl.scoring.saliency import score_saliency

    dataset = _small_dataset(tmp_path / "input", n_images=4)
    weights = EXAMPLE / "model.safetensors"
    with pytest.raises(ValueError, match="methods: expected distinct names"):
        score_saliency(weights, dataset, tmp_path / "o", methods=["lime"])
    with pytest.raises(ValueError, match="sampler: expected one of"):
        score_saliency(weights, dataset, tmp_path / "o", sampler="kernel")
    missing = mibspec_cli(
        "score", "saliency", "-w", str(weights), "-d", str(tmp_path / "none.json"), "-o", str(tmp_path / "o")
    )
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "no safetensors header length"),
        (b"hello, this is not a safetensors file\n", "does not fit"),
        ((2**63).to_bytes(8, "little") + b"{}", "does not fit"),  # a header length of 8 EiB, never read
        (b"\x02\x00\x00\x00\x00\x00\x00\x00[]", "not a JSON object"),
    ],
    ids=["empty", "text", "huge-header-length", "array-header"],
)
def test_weights_that_are_not_safetensors_are_a_usage_error(
    tmp_path: Path, mibspec_cli, content: bytes, said: str
) -> None:  # type: ignore[no-untyped-def]
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(content)
    done = mibspec_cli(
        "score",
        "saliency",
        "-w",
        str(weights),
        "-d",
        str(EXAMPLE / "dataset.json"),
        "-o",
        str(tmp_path / "o"),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("mibspec: error: weights: ")
    assert said in done.stderr
    assert not (tmp_path / "o" / "report.json").exists()
