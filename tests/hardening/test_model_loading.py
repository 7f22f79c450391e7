"""Model folders and files recomputation reads (SPEC.md M-2, M-4).

A config that implies a huge model is refused before anything is built (R107), the
size limit applies to the files too, and the time limit is honoured while they are read;
the folder and its files stay inside the folder the model was found in (links out are
refused without hashing what they point to); a model whose files are not pinned gets
R106 and the receipt still lists the files used; the bytes that were hashed are the
bytes the model is built from, whatever happens to the files afterwards. Digests come from
the bytes read in the run (the file-hash cache only when the run trusts it, and then said
with R111), and a hub cache's files must hash to their blobs' names.

Independent anchors: hashes are recomputed here with hashlib; "nothing was built" is
observed by hooking transformers' model constructors.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hardening_support import REPO

import mibspec
from mibspec.validator import Limits, Stage

pytestmark = pytest.mark.recompute

EXAMPLE = REPO / "examples" / "circuit-ioi"
MODEL = REPO / "examples" / "models" / "tiny-gpt2"


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the circuit example (report) and of its model under a model root (models)."""
    report = tmp_path / "report"
    shutil.copytree(EXAMPLE, report)
    models = tmp_path / "models"
    shutil.copytree(MODEL, models / "tiny-gpt2")
    return report, models


def _edit_model(report: Path, change: Any) -> None:
    path = report / "report.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data["model"])
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _repin(report: Path, model_dir: Path, name: str) -> None:
    _edit_model(report, lambda m: m["files"].update({name: _sha256(model_dir / name)}))


@pytest.fixture
def never_built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Calls of transformers' model constructors (none may happen); each call fails fast."""
    pytest.importorskip("torch")
    import transformers

    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append("from_pretrained")
        raise RuntimeError("a model was built")

    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    return calls


# --- size limits, before anything is built ----------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"n_layer": 1_000_000}, "--max-model-bytes"),  # 50 G parameters
        ({"n_layer": 6000, "n_embd": 4, "n_head": 1, "n_inner": 16}, "tensors"),  # few bytes, 72,004 tensors
    ],
    ids=["bytes", "tensors"],
)
def test_a_config_implying_a_huge_model_is_refused_before_anything_is_built(
    tmp_path: Path, never_built: list[str], change: dict[str, int], reason: str
) -> None:
    report, models = _setup(tmp_path)
    config = models / "tiny-gpt2" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text(encoding="utf-8")), **change}))
    _repin(report, models / "tiny-gpt2", "config.json")
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert _codes(result) == [("R107", "/model")]
    assert reason in result.documents[0].findings[0].message
    assert never_built == []


def test_the_size_limit_applies_to_the_config_and_to_the_files(
    tmp_path: Path, never_built: list[str]
) -> None:
    from safetensors import safe_open

    report, models = _setup(tmp_path)
    folder = models / "tiny-gpt2"
    with safe_open(folder / "model.safetensors", "pt") as handle:  # the tied head is stored once
        parameters = sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())  # noqa: SIM118
    files = sum((folder / n).stat().st_size for n in ("config.json", "model.safetensors", "tokenizer.json"))
    # float32 parameters: 4 bytes each; the files read hold more than that
    assert files - 1 >= 4 * parameters
    for limit, fragment in ((4 * parameters - 1, "the config implies"), (files - 1, "its files hold")):
        result = mibspec.verify(
            report / "report.json", model_roots=[models], limits=Limits(max_model_bytes=limit)
        )
        [finding] = result.documents[0].findings
        assert (finding.code, finding.pointer) == ("R107", "/model")
        assert fragment in finding.message
    assert never_built == []


def test_a_model_larger_than_the_free_memory_is_refused_before_it_is_read(
    tmp_path: Path, never_built: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.reference_impl import devices

    report, models = _setup(tmp_path)
    folder = models / "tiny-gpt2"
    files = sum((folder / n).stat().st_size for n in ("model.safetensors", "tokenizer.json"))
    # beside the files (the weights are views of them), one batch's activations: a quarter of
    # the weight bytes, at least 256 MiB (engine.md ME-9), here the 256 MiB
    need = files + 2**28
    read: list[str] = []
    real_open = Path.open

    def watched(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "model.safetensors":
            read.append(str(self))
        return real_open(self, *args, **kwargs)

    # the machine has one byte fewer than loading and running need
    monkeypatch.setattr(devices, "free_memory", lambda device: need - 1)
    monkeypatch.setattr(Path, "open", watched)
    result = mibspec.verify(report / "report.json", model_roots=[models])
    [finding] = result.documents[0].findings
    assert (finding.code, finding.pointer) == ("R104", "/model")
    assert f"needs about {need} bytes" in finding.message
    assert f"({files} bytes for its files, {2**28} bytes for a batch's activations)" in finding.message
    assert f"{need - 1} bytes are available" in finding.message
    assert (read, never_built) == ([], [])
    # with the memory it needs, the files are read and the model is built (here: refused by
    # the fixture, which counts the attempt)
    monkeypatch.setattr(devices, "free_memory", lambda device: need)
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert "memory" not in result.documents[0].findings[0].message
    assert read
    assert never_built == ["from_pretrained"]


def test_a_group_counts_the_runs_it_keeps_and_checks_its_model_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two reports over the same model are one group: the check before the model is read
    counts the runs the group may keep (the activation cache's bound) and runs once; the
    second report uses the model the first built, whatever memory is left beside it."""
    from mibspec.reference_impl import devices

    report, models = _setup(tmp_path)
    second = tmp_path / "second"
    shutil.copytree(report, second)
    folder = models / "tiny-gpt2"
    files = sum((folder / n).stat().st_size for n in ("model.safetensors", "tokenizer.json"))
    kept = 10**8
    monkeypatch.setenv("MIBSPEC_ACTIVATION_CACHE_BYTES", str(kept))
    need = files + 2**28 + kept
    asked: list[int] = []

    def free(device: str, available: int) -> int:
        asked.append(available)
        return available

    monkeypatch.setattr(devices, "free_memory", lambda device: free(device, need - 1))
    paths = (report / "report.json", second / "report.json")
    result = mibspec.verify(*paths, model_roots=[models])
    reports = [d for d in result.documents if d.kind == "report"]
    assert len(reports) == 2
    for document in reports:
        [finding] = document.findings
        assert (finding.code, finding.pointer) == ("R104", "/model")
        assert f"needs about {need} bytes" in finding.message
        assert f"{kept} bytes for the runs kept for the group's other reports" in finding.message
    # with what loading needs the first time and nothing the second, both are verified
    answers = iter([need])
    asked.clear()
    monkeypatch.setattr(devices, "free_memory", lambda device: free(device, next(answers, 0)))
    result = mibspec.verify(*paths, model_roots=[models])
    assert [(d.kind, d.valid, d.findings) for d in result.documents if d.kind == "report"] == [
        ("report", True, []),
        ("report", True, []),
    ]
    assert asked == [need]
    # alone, a report keeps no runs for others: the bound is not counted
    monkeypatch.setattr(devices, "free_memory", lambda device: free(device, files + 2**28))
    assert mibspec.verify(paths[0], model_roots=[models]).documents[0].findings == []


def test_a_group_that_keeps_no_runs_does_not_count_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Causal-variable recomputation keeps no runs for the reports that follow: a group of
    two such reports needs the files and a batch's activations, checked once."""
    from mibspec.reference_impl import devices

    models = tmp_path / "models"
    shutil.copytree(MODEL, models / "tiny-gpt2")
    paths = []
    for name in ("first", "second"):
        shutil.copytree(REPO / "examples" / "causal-variable-ioi", tmp_path / name)
        paths.append(tmp_path / name / "report.json")
    folder = models / "tiny-gpt2"
    need = sum((folder / n).stat().st_size for n in ("model.safetensors", "tokenizer.json")) + 2**28
    asked: list[str] = []
    monkeypatch.setattr(devices, "free_memory", lambda device: asked.append(device) or need)
    result = mibspec.verify(*paths, model_roots=[models])
    reports = [d for d in result.documents if d.kind == "report"]
    assert [(d.valid, [f.code for f in d.findings]) for d in reports] == [(True, []), (True, [])]
    assert asked == ["cpu"]


def _gpt2(layers: int, heads: int, width: int) -> dict[str, Any]:
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "n_layer": layers,
        "n_head": heads,
        "n_embd": width,
        "vocab_size": 50257,
        "n_positions": 1024,
    }


#: Parameters of GPT-2 small and GPT-2 XL, the tied head counted once (the published figures).
SMALL, XL = 124_439_808, 1_557_611_200


@pytest.mark.parametrize(
    ("shape", "dtype", "file_bytes", "device", "need"),
    [
        # float32 files as stored: the files, and a batch's activations at a quarter of the
        # 498 MB of weights (124 MB) or 256 MiB, whichever is more
        ((12, 12, 768), "float32", 4 * SMALL, "cpu", 4 * SMALL + 2**28),
        # float32 files built in bfloat16: converted, so both are held
        ((12, 12, 768), "bfloat16", 4 * SMALL, "cpu", 4 * SMALL + 2 * SMALL + 2**28),
        # on a CUDA device the batch's activations are in the device's memory
        ((12, 12, 768), "float32", 4 * SMALL, "cuda:0", 4 * SMALL),
        # 6.2 GB of float32 weights: the quarter is over 256 MiB
        ((48, 25, 1600), "float32", 4 * XL, "cpu", 4 * XL + XL),
    ],
)
def test_the_memory_check_counts_the_files_a_conversion_and_a_batch(
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int, int],
    dtype: str,
    file_bytes: int,
    device: str,
    need: int,
) -> None:
    from mibspec.reference_impl import devices
    from mibspec.reference_impl.recompute._inputs import UnusableInputError, check_memory

    asked: list[str] = []

    def free(where: str, available: int) -> int:
        asked.append(where)
        return available

    monkeypatch.setattr(devices, "free_memory", lambda where: free(where, need))
    check_memory(_gpt2(*shape), dtype, file_bytes, "/model", device)  # exactly enough: no finding
    monkeypatch.setattr(devices, "free_memory", lambda where: free(where, need - 1))
    with pytest.raises(UnusableInputError) as raised:
        check_memory(_gpt2(*shape), dtype, file_bytes, "/model", device)
    assert f"needs about {need} bytes" in raised.value.detail
    assert f"{need - 1} bytes are available" in raised.value.detail
    assert set(asked) == {"cpu"}  # the machine's memory, whatever the device


def test_weights_that_do_not_match_the_config_are_refused_before_loading(
    tmp_path: Path, never_built: list[str]
) -> None:
    report, models = _setup(tmp_path)
    config = models / "tiny-gpt2" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text(encoding="utf-8")), "n_layer": 5}))
    _repin(report, models / "tiny-gpt2", "config.json")
    # The report declares what the config says (R109 otherwise, before the weights are read);
    # a 5-layer graph is not its circuit's 4-layer one (K110), set aside to reach the loader.
    _edit_model(report, lambda m: m["config"].update(n_layers=5))
    result = mibspec.verify(report / "report.json", model_roots=[models], ignore=["K110"])
    [finding] = result.documents[0].findings
    assert (finding.code, finding.pointer) == ("R104", "/model")
    assert "the config implies" in finding.message
    assert never_built == []


def test_the_time_limit_is_honoured_while_the_model_is_read(tmp_path: Path, never_built: list[str]) -> None:
    report, models = _setup(tmp_path)
    result = mibspec.verify(
        report / "report.json", model_roots=[models], limits=Limits(max_recompute_seconds=0.0)
    )
    assert _codes(result) == [("R105", "")]
    assert never_built == []


# --- links out of the folder the model was found in --------------------------------------------------


def test_a_model_folder_linked_out_of_the_report_folder_is_refused(
    tmp_path: Path, never_built: list[str]
) -> None:
    report, models = _setup(tmp_path)
    (report / "tiny-gpt2").symlink_to(models / "tiny-gpt2", target_is_directory=True)
    result = mibspec.verify(report / "report.json")  # found in the report's folder, resolves outside
    assert _codes(result) == [("R104", "/model/path")]
    assert "outside" in result.documents[0].findings[0].message
    assert never_built == []


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "weights"])
def test_a_model_file_linked_to_a_system_file_is_refused_unhashed(
    tmp_path: Path, never_built: list[str], declared: bool
) -> None:
    outside = Path("/etc/hostname") if Path("/etc/hostname").is_file() else Path("/etc/passwd")
    report, models = _setup(tmp_path)
    folder = models / "tiny-gpt2"
    if declared:
        (folder / "extra.json").symlink_to(outside)
        _edit_model(report, lambda m: m["files"].update({"extra.json": "0" * 64}))
    else:
        (folder / "model.safetensors").unlink()
        (folder / "model.safetensors").symlink_to(outside)
    result = mibspec.verify(report / "report.json", model_roots=[models])
    [finding] = result.documents[0].findings
    assert finding.code == "R104"
    assert finding.pointer == "/model/files"
    assert "outside" in finding.message
    assert _sha256(outside) not in str(finding)
    assert never_built == []


# --- pinning and the bytes used -----------------------------------------------------------------------


@pytest.mark.slow
def test_unpinned_model_files_are_reported_and_listed_in_the_receipt(tmp_path: Path) -> None:
    from mibspec.verification.receipt import build_receipt

    report, models = _setup(tmp_path)
    _edit_model(report, lambda m: m.pop("files"))
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert _codes(result) == [("R106", "/model")]
    finding = result.documents[0].findings[0]
    assert finding.severity.value == "error"
    assert all(name in finding.message for name in ("config.json", "model.safetensors", "tokenizer.json"))
    # the claims were still recomputed, and reproduced
    assert result.documents[0].comparisons
    assert all(c.within for c in result.documents[0].comparisons)
    receipt = build_receipt(result, tmp_path / "receipt.json", {})
    used = {e["path"]: (e["sha256"], e["bytes"]) for e in receipt["files"] if e["role"] == "model"}
    folder = models / "tiny-gpt2"
    assert used == {
        f"models/tiny-gpt2/{n}": (_sha256(folder / n), (folder / n).stat().st_size)
        for n in ("config.json", "model.safetensors", "tokenizer.json")
    }


@pytest.mark.slow
def test_weights_swapped_after_hashing_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is replaced by other weights right after its hash is taken: recomputation
    still reproduces the claims of the hashed weights, and the receipt pins those bytes."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    from mibspec.reference_impl.recompute import _hash_cache, _inputs
    from mibspec.verification.receipt import build_receipt, check_receipt

    report, models = _setup(tmp_path)
    weights = models / "tiny-gpt2" / "model.safetensors"
    original = _sha256(weights)
    tensors = load_file(weights)
    other = tmp_path / "other.safetensors"
    with torch.no_grad():
        save_file({name: t * 1.5 for name, t in tensors.items()}, other)
    real_sha256 = hashlib.sha256
    swaps: list[str] = []

    class Hook:
        def __init__(self, *args: Any) -> None:
            self.digest = real_sha256(*args)

        def update(self, data: bytes) -> None:
            self.digest.update(data)

        def hexdigest(self) -> str:
            value = self.digest.hexdigest()
            if value == original and not swaps:
                shutil.copyfile(other, weights)  # between the hash and the load
                swaps.append(value)
            return value

    # the bytes are hashed by the model reader, or by the file-hash cache when it is on
    monkeypatch.setattr(_inputs, "hashlib", SimpleNamespace(sha256=Hook))
    monkeypatch.setattr(_hash_cache, "hashlib", SimpleNamespace(sha256=Hook))
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert swaps == [original]
    assert _sha256(weights) != original
    assert result.valid, _codes(result)
    assert result.documents[0].stages[Stage.RECOMPUTE][0].value == "passed"
    receipt_path = tmp_path / "receipt.json"
    receipt = build_receipt(result, receipt_path, {})
    [pinned] = [e for e in receipt["files"] if e["path"].endswith("model.safetensors")]
    assert pinned["sha256"] == original
    receipt_path.write_text(json.dumps(receipt), encoding="utf-8")
    check = check_receipt(receipt_path)
    assert [(f.path, f.status) for f in check.changed] == [("models/tiny-gpt2/model.safetensors", "changed")]


def _blob_name(data: bytes, large: bool) -> str:
    """How the hub names a blob: the SHA-256 of a file in large-file storage, git's SHA-1 of
    a blob (``blob <size>\\0`` then the bytes) for the others."""
    if large:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _hub_cache(
    cache: Path,
    repo: str,
    revision: str,
    outside: Path | None = None,
    weights: Path = MODEL / "model.safetensors",
) -> None:
    """The layout of the hub client's cache: snapshot files link into the repository's blobs,
    each named by its digest; ``weights`` is stored under the name of the model's own weights."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "blobs").mkdir(parents=True)
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        large = name.endswith(".safetensors")
        blob = folder / "blobs" / _blob_name((MODEL / name).read_bytes(), large)
        shutil.copyfile(weights if large else MODEL / name, blob)
        target = outside if (outside is not None and large) else blob
        (snapshot / name).symlink_to(target)


@pytest.mark.parametrize(
    "linked_out", [pytest.param(False, marks=pytest.mark.slow), True], ids=["cache", "linked-out"]
)
def test_a_hub_model_is_read_from_the_cache_inside_its_repository_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked_out: bool
) -> None:
    pytest.importorskip("torch")
    from huggingface_hub import constants

    import mibspec.reference_impl.recompute._inputs as inputs

    report = tmp_path / "report"
    shutil.copytree(EXAMPLE, report)
    revision = "a" * 40
    elsewhere = tmp_path / "elsewhere.safetensors"
    shutil.copyfile(MODEL / "model.safetensors", elsewhere)
    _hub_cache(tmp_path / "hub", "local-org/tiny-gpt2", revision, elsewhere if linked_out else None)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    downloads: list[str] = []
    monkeypatch.setattr(inputs, "_unreachable", lambda endpoint: downloads.append(endpoint))

    def to_hub(model: dict[str, Any]) -> None:
        model.pop("path")
        model.update({"source": "hub", "id": "local-org/tiny-gpt2", "revision": revision})

    _edit_model(report, to_hub)
    result = mibspec.verify(report / "report.json")
    assert downloads == []  # found in the cache: the hub is never contacted
    if linked_out:
        assert _codes(result) == [("R104", "/model/files")]
        assert "outside" in result.documents[0].findings[0].message
    else:
        assert result.valid, _codes(result)
        assert len(result.documents[0].model_files) == 3


def test_a_hub_blob_whose_bytes_are_not_its_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The revision pins the files only through the cache's blob names: weights swapped in
    under the blob of the original ones are refused, the digests compared with the bytes."""
    torch = pytest.importorskip("torch")
    from huggingface_hub import constants
    from safetensors.torch import load_file, save_file

    report = tmp_path / "report"
    shutil.copytree(EXAMPLE, report)
    other = tmp_path / "other.safetensors"
    with torch.no_grad():
        save_file({name: t * 1.5 for name, t in load_file(MODEL / "model.safetensors").items()}, other)
    revision = "b" * 40
    _hub_cache(tmp_path / "hub", "local-org/tiny-gpt2", revision, weights=other)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def to_hub(model: dict[str, Any]) -> None:
        model.pop("path")
        model.pop("files")  # pinned by the revision alone
        model.update({"source": "hub", "id": "local-org/tiny-gpt2", "revision": revision})

    _edit_model(report, to_hub)
    result = mibspec.verify(report / "report.json")
    assert _codes(result) == [("R104", "/model")]
    message = result.documents[0].findings[0].message
    assert f"blob {_sha256(MODEL / 'model.safetensors')}" in message
    assert _sha256(other) in message
    assert not result.documents[0].comparisons


# --- digests of the bytes read, and the file-hash cache a run may trust -----------------------------


def _rewrite_in_place(path: Path) -> None:
    """One bit of the last float of the weights flipped through a shared memory mapping (same
    inode, same size), and the access and modification times set back."""
    import mmap
    import os

    before = path.stat()
    with path.open("r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
        mapped[-4] ^= 1  # the lowest bit of a little-endian float32: one unit in the last place
        mapped.flush()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
        before.st_size,
        before.st_ino,
        before.st_mtime_ns,
    )


def _stale_entry(path: Path, digest: str) -> None:
    """A cache entry for the file as it is now holding ``digest``: what the cache keeps when a
    write through a mapping left the file's times as they were when it was hashed."""
    import os
    import time

    from mibspec.reference_impl.recompute._hash_cache import FileHashCache, default_cache_dir, file_key

    later = time.time_ns() + 10**10
    cache = FileHashCache(default_cache_dir(), clock=lambda: later)
    cache.store(file_key(str(path.resolve()), os.stat(path)), digest, later)
    cache.save()


@pytest.mark.slow
def test_weights_rewritten_in_place_are_refused_unless_the_cache_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.verification.receipt import build_receipt

    monkeypatch.setenv("MIBSPEC_CACHE_DIR", str(tmp_path / "cache"))
    report, models = _setup(tmp_path)
    weights = models / "tiny-gpt2" / "model.safetensors"
    original = _sha256(weights)
    _rewrite_in_place(weights)
    assert _sha256(weights) != original
    _stale_entry(weights, original)
    [cache_file] = (tmp_path / "cache").iterdir()
    cached = cache_file.read_bytes()

    # by default: the digest of the bytes read, never the cache's
    result = mibspec.verify(report / "report.json", model_roots=[models])
    assert _codes(result) == [("R104", "/model/files")]
    assert (
        f"'model.safetensors' is {_sha256(weights)}, declared {original}"
        in result.documents[0].findings[0].message
    )
    assert cache_file.read_bytes() == cached  # neither used nor written

    # trusted: the stale digest is taken, and the output and the receipt say so
    trusted = mibspec.verify(report / "report.json", model_roots=[models], trust_hash_cache=True)
    doc = trusted.documents[0]
    assert [(f.code, f.pointer, f.severity.value) for f in doc.findings] == [("R111", "/model/files", "info")]
    assert "model.safetensors" in doc.findings[0].message
    assert "config.json" not in doc.findings[0].message  # not in the cache: hashed from its bytes
    assert [f.name for f in doc.model_files if f.cached] == ["model.safetensors"]
    receipt = build_receipt(trusted, tmp_path / "receipt.json", {})
    [entry] = [d for d in receipt["documents"] if d["path"] == doc.path]
    assert [f["code"] for f in entry["findings"]] == ["R111"]
