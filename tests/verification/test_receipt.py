"""Verification receipts: ``mibspec verify --receipt`` and ``mibspec verify-receipt``.

Independent anchors: every hash is recomputed here with hashlib from the files on disk;
the set of files a receipt must pin is the example folder's listing (every file in it is
a document or a declared artifact); the spec bundle hash is recomputed by the formula
of ``mibspec cite``; the receipt is validated against its committed JSON Schema; the
stages and recomputed values are compared with the JSON output of the same run.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEMA = REPO / "spec" / "v1" / "schemas" / "receipt.schema.json"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bundle_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((REPO / "spec" / "v1" / "schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _validate(receipt: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(receipt)


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the circuit example: report, circuit, dataset and their sidecars."""
    target = tmp_path / "work" / "circuit"
    shutil.copytree(EXAMPLES / "circuit", target)
    return target


def _write(mibspec_cli: CliRun, example: Path, receipt: Path, *extra: str) -> dict[str, Any]:
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", "--receipt", str(receipt), *extra
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(receipt.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_receipt_pins_every_file_the_verification_read(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    receipt_path = example / "receipt.json"
    receipt = _write(mibspec_cli, example, receipt_path)
    _validate(receipt)
    on_disk = {p.name: p for p in example.iterdir() if p.name != "receipt.json"}
    pinned = {entry["path"]: entry for entry in receipt["files"]}
    assert set(pinned) == set(on_disk)  # paths relative to the receipt's folder
    for name, path in on_disk.items():
        assert pinned[name]["sha256"] == _sha256(path), name
        assert pinned[name]["bytes"] == path.stat().st_size, name
    roles = {name: entry["role"] for name, entry in pinned.items()}
    assert roles == {
        "report.json": "document",
        "circuit.json": "document",
        "dataset.json": "document",
        "circuit.safetensors": "artifact",
        "dataset.jsonl": "artifact",
    }
    assert pinned["circuit.safetensors"]["document"] == str(example / "circuit.json")
    assert receipt["spec"] == {"version": "1.2", "schema_bundle_sha256": _bundle_hash()}
    import mibspec

    assert receipt["tool"] == {"name": "mibspec", "version": mibspec.__version__}
    assert receipt["environment"]["python"] == platform.python_version()
    for name, installed in receipt["environment"]["packages"].items():
        assert installed == version(name), name
    assert "torch" not in receipt["environment"]["packages"]  # not imported without recomputation
    assert receipt["options"] == {
        "recompute": False,
        "profile": None,
        "select": [],
        "ignore": [],
        "error_on_warning": False,
    }


@pytest.mark.slow
def test_receipt_records_the_verdicts_of_the_json_output(mibspec_cli: CliRun, example: Path) -> None:
    receipt = _write(mibspec_cli, example, example / "r.json", "--ignore", "K106")
    output = json.loads(
        mibspec_cli(
            "verify", str(example / "report.json"), "--no-recompute", "--ignore", "K106", "--format", "json"
        ).stdout
    )
    assert receipt["documents"] == output["documents"]
    assert receipt["valid"] is output["valid"] is True
    assert receipt["options"]["ignore"] == ["K106"]


@pytest.mark.slow
def test_receipt_is_deterministic(mibspec_cli: CliRun, example: Path) -> None:
    first = (example / "a.json", example / "b.json")
    for path in first:
        _write(mibspec_cli, example, path)
    assert first[0].read_bytes() == first[1].read_bytes()


@pytest.mark.slow
def test_verify_receipt_passes_on_untouched_files(mibspec_cli: CliRun, example: Path, tmp_path: Path) -> None:
    # The receipt lives two folders above the files, and it is checked from yet another
    # working directory.
    receipt = tmp_path / "circuit.receipt.json"
    _write(mibspec_cli, example, receipt)
    (tmp_path / "elsewhere").mkdir()
    result = mibspec_cli("verify-receipt", str(receipt), cwd=tmp_path / "elsewhere")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        result.stdout.strip().splitlines()[-1]
        == "PASS 5 file(s) and the spec schema bundle match the receipt"
    )


@pytest.mark.slow
def test_verify_receipt_lists_changed_and_missing_files(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    receipt = tmp_path / "receipt.json"
    _write(mibspec_cli, example, receipt)
    jsonl = example / "dataset.jsonl"
    data = bytearray(jsonl.read_bytes())
    data[10] ^= 1  # one bit, same size
    jsonl.write_bytes(bytes(data))
    (example / "circuit.safetensors").unlink()
    result = mibspec_cli("verify-receipt", str(receipt))
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "FAIL 2 of 5 file(s) changed since the receipt"
    assert any(
        line.startswith("changed  work/circuit/dataset.jsonl") and _sha256(jsonl) in line for line in lines
    )
    assert any(line.startswith("missing  work/circuit/circuit.safetensors") for line in lines)
    as_json = json.loads(mibspec_cli("verify-receipt", str(receipt), "--format", "json").stdout)
    statuses = {f["path"]: f["status"] for f in as_json["files"]}
    assert statuses == {
        "work/circuit/report.json": "unchanged",
        "work/circuit/circuit.json": "unchanged",
        "work/circuit/dataset.json": "unchanged",
        "work/circuit/circuit.safetensors": "missing",
        "work/circuit/dataset.jsonl": "changed",
    }
    assert as_json["unchanged"] is False


@pytest.mark.slow
def test_verify_receipt_notices_another_schema_bundle(mibspec_cli: CliRun, example: Path) -> None:
    receipt_path = example / "receipt.json"
    receipt = _write(mibspec_cli, example, receipt_path)
    receipt["spec"]["schema_bundle_sha256"] = "0" * 64
    receipt_path.write_text(json.dumps(receipt), encoding="utf-8")
    result = mibspec_cli("verify-receipt", str(receipt_path))
    assert result.returncode == 1
    assert f"changed  spec schema bundle: sha256 {_bundle_hash()}, receipt {'0' * 64}" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"receipt_version": "1.0", "receipt_version": "1.0"}', "not strict JSON"),
        (b'{"receipt_version": "2.0"}', "not a receipt"),
        (b"[]", "not a receipt"),
    ],
    ids=["duplicate-key", "wrong-version", "not-an-object"],
)
def test_a_malformed_receipt_is_a_usage_error(
    mibspec_cli: CliRun, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "receipt.json"
    path.write_bytes(content)
    result = mibspec_cli("verify-receipt", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert message in result.stderr
    assert mibspec_cli("verify-receipt", str(tmp_path / "absent.json")).returncode == 2


def test_a_receipt_is_written_only_into_a_folder_holding_every_input(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    """Its paths could not stay inside its folder: refused before anything is verified."""
    receipt = tmp_path / "receipts" / "circuit.receipt.json"
    result = mibspec_cli("verify", str(example / "report.json"), "--no-recompute", "--receipt", str(receipt))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "outside the receipt's folder" in result.stderr
    assert not receipt.exists()


def _sparse(path: Path, size: int) -> None:
    """Replace ``path`` by a file of ``size`` bytes that takes no disk space."""
    with path.open("r+b") as handle:
        handle.truncate(size)


@pytest.mark.slow
def test_an_artifact_refused_for_its_size_is_recorded_unhashed(mibspec_cli: CliRun, example: Path) -> None:
    jsonl = example / "dataset.jsonl"
    _sparse(jsonl, 256 * 1024 * 1024)  # A104: its size is not the declared one
    receipt_path = example / "receipt.json"
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", "--receipt", str(receipt_path)
    )
    assert result.returncode == 1
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    _validate(receipt)
    entry = next(e for e in receipt["files"] if e["path"] == "dataset.jsonl")
    assert entry["sha256"] is None
    assert entry["bytes"] == jsonl.stat().st_size
    assert "A104" in entry["refused"]
    assert all("refused" not in e for e in receipt["files"] if e["path"] != "dataset.jsonl")
    check = mibspec_cli("verify-receipt", str(receipt_path))
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[0].startswith("unhashed dataset.jsonl (artifact): refused unread")
    _sparse(jsonl, 256 * 1024 * 1024 + 1)
    check = mibspec_cli("verify-receipt", str(receipt_path), "--format", "json")
    assert check.returncode == 1
    statuses = {f["path"]: f["status"] for f in json.loads(check.stdout)["files"]}
    assert statuses["dataset.jsonl"] == "changed"


@pytest.mark.slow
def test_a_document_over_the_size_limit_is_recorded_unhashed(mibspec_cli: CliRun, example: Path) -> None:
    report = example / "report.json"
    receipt_path = example / "receipt.json"
    limit = report.stat().st_size - 1
    result = mibspec_cli(
        "verify", str(report), "--no-recompute", "--max-bytes", str(limit), "--receipt", str(receipt_path)
    )
    assert result.returncode == 1
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    _validate(receipt)
    [entry] = receipt["files"]  # its artifacts were never reached
    assert (entry["path"], entry["sha256"], entry["bytes"]) == ("report.json", None, report.stat().st_size)
    assert "P107" in entry["refused"]


def test_verify_receipt_never_hashes_a_refused_file(
    mibspec_cli: CliRun, example: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mibspec
    from mibspec.verification import receipt as _receipt

    _sparse(example / "dataset.jsonl", 256 * 1024 * 1024)
    receipt_path = example / "receipt.json"
    result = mibspec.verify(example / "report.json", recompute=False)
    hashed: list[Path] = []
    real = _receipt._sha256

    def spy(path: Path) -> Any:
        hashed.append(path.resolve())
        return real(path)

    monkeypatch.setattr(_receipt, "_sha256", spy)
    _receipt.write_receipt(result, receipt_path, options={})
    check = _receipt.check_receipt(receipt_path)
    assert (example / "dataset.jsonl").resolve() not in hashed
    assert len(hashed) == 2 * 4  # the other four files, once writing and once checking
    assert check.unchanged


@pytest.mark.slow
@pytest.mark.parametrize(
    "hostile", ["/etc/passwd", "../../outside.txt", "sub/../../../outside.txt", "link.txt"]
)
def test_verify_receipt_refuses_paths_outside_its_folder(
    mibspec_cli: CliRun, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: str
) -> None:
    from mibspec.verification import receipt as _receipt

    receipt_path = example / "receipt.json"
    receipt = _write(mibspec_cli, example, receipt_path)
    outside = tmp_path / "outside.txt"
    outside.write_text("a secret\n", encoding="utf-8")
    (example / "sub").mkdir()
    os.symlink(outside, example / "link.txt")
    if not hostile.startswith("/"):
        assert (example / hostile).resolve() == outside  # a file is there to be hashed
    receipt["files"].append(dict(receipt["files"][0], path=hostile))  # last: the others come first
    receipt_path.write_text(json.dumps(receipt), encoding="utf-8")
    result = mibspec_cli("verify-receipt", str(receipt_path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert repr(hostile) in result.stderr
    assert "nothing was hashed" in result.stderr
    assert _sha256(outside) not in result.stderr
    hashed: list[Path] = []
    monkeypatch.setattr(_receipt, "_sha256", lambda path: hashed.append(path))
    with pytest.raises(_receipt.ReceiptError):
        _receipt.check_receipt(receipt_path)
    assert hashed == []


@pytest.mark.recompute
@pytest.mark.slow
def test_receipt_of_a_parallel_recomputation(mibspec_cli: CliRun, tmp_path: Path) -> None:
    """Recomputed values and the workers' torch/transformers versions reach the receipt."""
    pytest.importorskip("torch")
    root = tmp_path / "results"
    shutil.copytree(EXAMPLES / "circuit-ioi", root / "circuit-ioi")
    shutil.copytree(EXAMPLES / "causal_bench", root / "causal_bench")
    # The receipt names the model files used, so the model root lies inside its folder too.
    shutil.copytree(EXAMPLES / "models" / "tiny-gpt2", tmp_path / "models" / "tiny-gpt2")
    receipt_path = tmp_path / "receipt.json"
    result = mibspec_cli(
        "verify",
        str(root),
        "-j",
        "2",
        "--model-root",
        str(tmp_path / "models"),
        "--format",
        "json",
        "--receipt",
        str(receipt_path),
    )
    output = json.loads(result.stdout)
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    _validate(receipt)
    assert receipt["documents"] == output["documents"]
    report = next(d for d in receipt["documents"] if d["path"].endswith("circuit-ioi/report.json"))
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert report["recomputed"]
    assert all(c["within"] for c in report["recomputed"])
    packages = receipt["environment"]["packages"]
    for name in ("torch", "transformers"):
        assert packages[name] == version(name)
    assert receipt["options"]["recompute"] is True
    pinned = {entry["path"] for entry in receipt["files"] if entry["role"] != "model"}
    listing = {str(p.relative_to(tmp_path)) for p in root.rglob("*") if p.is_file()}
    assert pinned == listing
    # the model files recomputation used, with the hashes of their bytes
    model = tmp_path / "models" / "tiny-gpt2"
    used = {
        (tmp_path / entry["path"]).resolve(): (entry["sha256"], entry["bytes"], entry["document"])
        for entry in receipt["files"]
        if entry["role"] == "model"
    }
    assert used == {
        (model / name).resolve(): (_sha256(model / name), (model / name).stat().st_size, report["path"])
        for name in ("config.json", "model.safetensors", "tokenizer.json")
    }


@pytest.mark.slow
def test_verify_receipt_refuses_what_is_not_a_regular_file(mibspec_cli: CliRun, tmp_path: Path) -> None:
    """A FIFO would block the read forever and a device could be endless: both are refused
    before anything is read, like a folder."""
    fifo = tmp_path / "receipt.json"
    os.mkfifo(fifo)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "folder").mkdir()
    for name in ("receipt.json", "zero.json", "folder"):
        result = mibspec_cli("verify-receipt", str(tmp_path / name))
        assert result.returncode == 2, result.stdout + result.stderr
        assert "cannot read the receipt (not a regular file)" in result.stderr


@pytest.mark.slow
def test_verify_receipt_never_hashes_a_file_whose_size_changed(
    mibspec_cli: CliRun, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file grown to 20 GiB (sparse) since the receipt is changed by its size alone: hashing
    it would read 20 GiB for nothing."""
    from mibspec.verification import receipt as _receipt

    receipt = tmp_path / "receipt.json"
    _write(mibspec_cli, example, receipt)
    recorded = (example / "dataset.jsonl").stat().st_size
    _sparse(example / "dataset.jsonl", 20 * 1024**3)
    hashed: list[Path] = []
    real = _receipt._sha256

    def spy(path: Path) -> Any:
        hashed.append(path.resolve())
        return real(path)

    monkeypatch.setattr(_receipt, "_sha256", spy)
    check = _receipt.check_receipt(receipt)
    assert (example / "dataset.jsonl").resolve() not in hashed
    [changed] = check.changed
    assert (changed.path, changed.status) == ("work/circuit/dataset.jsonl", "changed")
    assert f"{20 * 1024**3} bytes, receipt {recorded} bytes (not hashed)" in "\n".join(check.lines())
    as_json = check.to_json()
    entry = next(f for f in as_json["files"] if f["path"] == "work/circuit/dataset.jsonl")
    assert entry["size"] == [20 * 1024**3, recorded]
