"""``mibspec migrate``: the step registry, atomic writes, and the command line.

The published steps 1.0 → 1.1 → 1.2 are tested on the bundled examples written the 1.0 way. The
chaining mechanism is exercised with toy steps built here, in front of it: a 0.9 → 1.0 step
(in a "0.9" circuit report the grid was called ``k_grid``) and a 0.8 → 0.9 step before it.
No fake spec version is shipped.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec.core.outputs import OutputPathError
from mibspec.core.tracks import TRACKS
from mibspec.spec_tools import migrate as _migrate
from mibspec.spec_tools.migrate import (
    REGISTRY,
    InvalidInputError,
    MigrationError,
    MigrationRegistry,
    MigrationStep,
    UnreadableDocumentError,
    migrate_document,
    migrate_file,
    version_key,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "circuit" / "report.json"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


def _rename_k_grid(doc: dict[str, Any]) -> dict[str, Any]:
    settings = doc["settings"]
    settings["grid"] = settings.pop("k_grid")
    doc["spec_version"] = "1.0"
    return doc


def _drop_legacy_note(doc: dict[str, Any]) -> dict[str, Any]:
    doc.pop("legacy_note", None)
    doc["spec_version"] = "0.9"
    return doc


TOY = MigrationStep("0.9", "1.0", _rename_k_grid, "settings.k_grid is now settings.grid")
EARLIER = MigrationStep("0.8", "0.9", _drop_legacy_note, "legacy_note is dropped")
PUBLISHED = tuple(REGISTRY.steps)  # 1.0 → 1.1 → 1.2


def _toy_chain() -> MigrationRegistry:
    """The toy step in front of the published ones: 0.9 → 1.0 → 1.1 → 1.2."""
    return MigrationRegistry([TOY, *REGISTRY.steps])


def _as_09(doc: dict[str, Any]) -> dict[str, Any]:
    """The example written the 0.9 way (built by hand here, independently of the step)."""
    old = copy.deepcopy(doc)
    old["spec_version"] = "0.9"
    old["settings"] = {("k_grid" if k == "grid" else k): v for k, v in old["settings"].items()}
    return old


def _example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def test_toy_step_turns_a_09_document_into_the_current_document() -> None:
    current = _example()
    old = _as_09(current)
    before = copy.deepcopy(old)
    result = migrate_document(old, registry=_toy_chain())
    assert result.document == current
    assert result.steps == (TOY, *PUBLISHED)
    assert result.from_version == "0.9"
    assert result.to_version == mibspec.SPEC_VERSION == "1.2"
    assert old == before  # the input is never modified, although the step mutates its argument


def test_steps_are_chained_in_order() -> None:
    registry = MigrationRegistry([*PUBLISHED, TOY, EARLIER])  # registration order does not matter
    assert [s.from_version for s in registry.steps] == ["0.8", "0.9", "1.0", "1.1"]
    old = _as_09(_example()) | {"spec_version": "0.8", "legacy_note": "x"}
    result = migrate_document(old, registry=registry)
    assert result.steps == (EARLIER, TOY, *PUBLISHED)
    assert result.document == _example()
    assert migrate_document(old, "0.9", registry=registry).steps == (EARLIER,)
    assert registry.path("0.8", "1.0") == [EARLIER, TOY]
    assert registry.versions() == {"0.8", "0.9", "1.0", "1.1", "1.2"}


def test_already_current_document_takes_no_step() -> None:
    result = migrate_document(_example(), registry=_toy_chain())
    assert result.already_current
    assert result.steps == ()
    assert result.document == _example()


def test_no_path_and_broken_steps_are_errors() -> None:
    registry = _toy_chain()
    with pytest.raises(MigrationError, match=re.escape("no migration from spec 0.7 to spec 1.2")):
        migrate_document({"spec_version": "0.7"}, registry=registry)
    with pytest.raises(MigrationError, match=re.escape("no migration from spec 1.2 to spec 0.9")):
        migrate_document(_example(), "0.9", registry=registry)  # no downgrades
    with pytest.raises(MigrationError, match="spec_version"):
        migrate_document({"kind": "report"}, registry=registry)
    forgetful = MigrationStep("0.9", "1.0", lambda d: {**d, "settings": d["settings"]}, "forgets the version")
    with pytest.raises(MigrationError, match=re.escape("must return a document of spec 1.0; got '0.9'")):
        migrate_document(_as_09(_example()), "1.0", registry=MigrationRegistry([forgetful]))


def test_registry_rejects_backward_and_ambiguous_steps() -> None:
    with pytest.raises(ValueError, match="to_version must be later"):
        MigrationStep("1.0", "0.9", _rename_k_grid, "backwards")
    with pytest.raises(ValueError, match="already migrates"):
        MigrationRegistry([TOY, MigrationStep("0.9", "1.2", _rename_k_grid, "a second way out of 0.9")])
    with pytest.raises(ValueError, match=re.escape("MAJOR.MINOR")):
        version_key("1")


def test_published_registry_leads_from_10_to_the_current_version() -> None:
    assert [(s.from_version, s.to_version) for s in REGISTRY.steps] == [("1.0", "1.1"), ("1.1", "1.2")]
    assert migrate_document(_example()).already_current


def _old_file(tmp_path: Path) -> Path:
    folder = tmp_path / "circuit"
    shutil.copytree(EXAMPLE.parent, folder)
    path = folder / "report.json"
    path.write_text(json.dumps(_as_09(_example()), indent=2), encoding="utf-8")
    return path


def test_migrated_file_verifies_and_the_input_is_kept(tmp_path: Path) -> None:
    source = _old_file(tmp_path)
    before = source.read_bytes()
    destination = source.parent / "report.v1.json"
    result = migrate_file(source, destination, registry=_toy_chain())
    assert result.steps == (TOY, *PUBLISHED)
    assert source.read_bytes() == before
    assert json.loads(destination.read_text(encoding="utf-8")) == _example()
    verified = mibspec.verify(destination, recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]
    assert not [p for p in source.parent.iterdir() if p.name.endswith(".tmp")]


def test_in_place_replaces_the_input_and_keeps_its_mode(tmp_path: Path) -> None:
    source = _old_file(tmp_path)
    source.chmod(0o640)
    with pytest.raises(ValueError, match="in place"):
        migrate_file(source, source, registry=_toy_chain())
    with pytest.raises(ValueError, match="in place"):
        migrate_file(source, source.parent / "." / source.name, registry=_toy_chain())
    link = source.parent / "hardlink.json"
    os.link(source, link)
    with pytest.raises(ValueError, match="in place"):
        migrate_file(source, link, registry=_toy_chain())
    link.unlink()
    migrate_file(source, in_place=True, registry=_toy_chain())
    assert json.loads(source.read_text(encoding="utf-8")) == _example()
    assert stat.S_IMODE(source.stat().st_mode) == 0o640


@pytest.mark.parametrize("name", ["circuit.json", "dataset.json", "circuit.safetensors", "dataset.jsonl"])
def test_the_destination_is_never_a_file_the_document_declares(tmp_path: Path, name: str) -> None:
    """A referenced document, the dataset, their sidecars: each is read by the verification
    of the migrated report, so none may be overwritten by it (or through a link to it)."""
    source = _old_file(tmp_path)
    folder = source.parent
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(OutputPathError, match=re.escape(name)):
        migrate_file(source, folder / name, registry=_toy_chain())
    os.symlink(folder / name, tmp_path / "link.json")
    with pytest.raises(OutputPathError, match=re.escape(name)):
        migrate_file(source, tmp_path / "link.json", registry=_toy_chain())
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_failed_write_leaves_the_destination_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _old_file(tmp_path)
    original = source.read_bytes()

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_migrate.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        migrate_file(source, in_place=True, registry=_toy_chain())
    assert source.read_bytes() == original
    assert sorted(p.name for p in source.parent.iterdir()) == sorted(p.name for p in EXAMPLE.parent.iterdir())


def test_nothing_is_written_for_a_current_document(tmp_path: Path) -> None:
    destination = tmp_path / "out.json"
    result = migrate_file(EXAMPLE, destination, registry=_toy_chain())
    assert result.already_current
    assert not destination.exists()


def test_unreadable_documents_carry_findings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"spec_version": "1.0", "kind": "report", "kind": "circuit"}', encoding="utf-8")
    with pytest.raises(UnreadableDocumentError) as info:
        migrate_file(bad, tmp_path / "out.json")
    assert [(f.code, f.pointer) for f in info.value.findings] == [("P102", "/kind")]
    unversioned = tmp_path / "unversioned.json"
    unversioned.write_text('{"kind": "report"}', encoding="utf-8")
    with pytest.raises(UnreadableDocumentError) as info:
        migrate_file(unversioned, tmp_path / "out.json")
    assert [f.code for f in info.value.findings] == ["S101"]
    with pytest.raises(ValueError, match="destination is required"):
        migrate_file(EXAMPLE)
    with pytest.raises(ValueError, match="omitted"):
        migrate_file(EXAMPLE, tmp_path / "x.json", in_place=True)


@pytest.mark.slow
def test_cli(tmp_path: Path, mibspec_cli: CliRun) -> None:
    result = mibspec_cli("migrate", str(EXAMPLE), "-o", str(tmp_path / "out.json"))
    assert result.returncode == 0
    assert "already at spec 1.2" in result.stdout
    assert "nothing written" in result.stdout
    assert not (tmp_path / "out.json").exists()
    old = _old_file(tmp_path)
    result = mibspec_cli("migrate", str(old), "-o", str(tmp_path / "out.json"))
    assert result.returncode == 2
    assert "no migration from spec 0.9 to spec 1.2" in result.stderr
    assert mibspec_cli("migrate", str(old)).returncode == 2  # neither -o nor --in-place
    assert mibspec_cli("migrate", str(old), "-o", str(old)).returncode == 2
    assert mibspec_cli("migrate", str(old), "-o", str(tmp_path / "x.json"), "--in-place").returncode == 2
    assert mibspec_cli("migrate", str(tmp_path / "missing.json"), "--in-place").returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    result = mibspec_cli("migrate", str(bad), "--in-place")
    assert result.returncode == 1
    assert "P108" in result.stdout
    assert bad.read_text(encoding="utf-8") == "[1, 2]"


def _as_10(doc: dict[str, Any]) -> dict[str, Any]:
    """A bundled 1.2 document written the 1.0 way (built by hand, independently of the step):
    version 1.0, a causal-variable variable's ``best`` called ``highest`` in its place."""
    old = copy.deepcopy(doc)
    old["spec_version"] = "1.0"
    if old.get("track") == "causal_variable":
        old["claims"]["variables"] = [
            {("highest" if key == "best" else key): value for key, value in variable.items()}
            for variable in old["claims"]["variables"]
        ]
    return old


@pytest.mark.parametrize("track", list(TRACKS))
def test_published_steps_turn_each_10_example_into_the_current_example(tmp_path: Path, track: str) -> None:
    current = json.loads((REPO / "examples" / track / "report.json").read_text(encoding="utf-8"))
    old = _as_10(current)
    assert '"rounding"' not in json.dumps(old)  # a 1.0 document: nothing of 1.1 but the name
    before = copy.deepcopy(old)
    result = migrate_document(old)
    assert result.steps == PUBLISHED
    assert result.document == current
    assert json.dumps(result.document) == json.dumps(current)  # same key order: best where highest was
    assert old == before
    # The 1.0 document stays valid as 1.0, beside the 1.2 documents it references.
    folder = tmp_path / track
    shutil.copytree(REPO / "examples" / track, folder)
    (folder / "report.json").write_text(json.dumps(old, indent=2), encoding="utf-8")
    verified = mibspec.verify(folder / "report.json", recompute=False)
    assert verified.valid, [str(f) for f in verified.findings]
    migrate_file(folder / "report.json", in_place=True)
    assert json.loads((folder / "report.json").read_text(encoding="utf-8")) == current


def test_published_step_moves_every_kind_and_leaves_best_alone() -> None:
    circuit = json.loads((REPO / "examples" / "circuit" / "circuit.json").read_text(encoding="utf-8"))
    assert migrate_document({**circuit, "spec_version": "1.0"}).document == circuit
    # A 1.0 variable that somehow carries both names keeps both (the schema reports it).
    odd = _as_10(
        json.loads((REPO / "examples" / "causal_variable" / "report.json").read_text(encoding="utf-8"))
    )
    odd["claims"]["variables"][0]["best"] = 0.5
    moved = migrate_document(odd).document["claims"]["variables"][0]
    assert (moved["best"], "highest" in moved) == (0.5, True)


def _invalid_10_report(tmp_path: Path) -> Path:
    """The IOI circuit example written the 1.0 way, but declaring a rounding (which 1.0 refuses,
    S112) and claiming CPR 0.45 above its curve: under 1.1 the rounding to 0 decimals would
    stand for ±0.5 and let that CPR through."""
    folder = tmp_path / "ioi"
    shutil.copytree(REPO / "examples" / "circuit-ioi", folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["spec_version"] = "1.0"
    report["rounding"] = {"decimals": 0}
    report["claims"]["cpr"]["value"] += 0.45
    path = folder / "report.json"
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    assert [f.code for f in mibspec.verify(path, recompute=False).findings] == ["S112"]
    return path


@pytest.mark.slow
def test_an_input_that_does_not_verify_is_refused_with_its_findings(
    tmp_path: Path, mibspec_cli: CliRun
) -> None:
    source = _invalid_10_report(tmp_path)
    before = source.read_bytes()
    destination = tmp_path / "out.json"
    with pytest.raises(InvalidInputError) as info:
        migrate_file(source, destination)
    assert [(f.code, f.pointer) for _, f in info.value.findings] == [("S112", "/rounding")]
    assert not destination.exists()
    result = mibspec_cli("migrate", str(source), "-o", str(destination))
    assert result.returncode == 1
    assert "S112" in result.stdout
    assert "--keep-invalid" in result.stdout
    assert not destination.exists()
    assert mibspec_cli("migrate", str(source), "--in-place").returncode == 1
    assert source.read_bytes() == before


@pytest.mark.slow
def test_kept_invalid_the_output_carries_the_findings_and_does_not_verify(
    tmp_path: Path, mibspec_cli: CliRun
) -> None:
    source = _invalid_10_report(tmp_path)
    destination = source.parent / "report.v12.json"
    result = mibspec_cli("migrate", str(source), "-o", str(destination), "--keep-invalid")
    assert result.returncode == 1
    assert "S112" in result.stdout
    migrated = json.loads(destination.read_text(encoding="utf-8"))
    assert migrated["spec_version"] == "1.2"
    record = migrated["extensions"]["mibspec:migration"]
    assert (record["from"], record["to"]) == ("1.0", "1.2")
    assert [(f["code"], f["pointer"]) for f in record["input_findings"]] == [("S112", "/rounding")]
    verified = mibspec.verify(destination, recompute=False)
    found = {(f.code, f.pointer) for f in verified.findings}
    assert ("C127", "/extensions/mibspec:migration") in found
    # 1.2 refuses the rounding itself too: coarser than the profile accepts, claims not printed to it
    assert {code for code, _ in found} == {"C127", "C130", "C131"}


@pytest.mark.slow
def test_an_input_whose_referenced_document_does_not_verify_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ioi"
    shutil.copytree(REPO / "examples" / "circuit-ioi", folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    report["spec_version"] = "1.0"
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    assert mibspec.verify(folder / "report.json", recompute=False).valid
    migrate_file(folder / "report.json", tmp_path / "fine.json")  # a valid input migrates
    sidecar = folder / "circuit.safetensors"
    sidecar.write_bytes(sidecar.read_bytes()[:-1] + b"\x00")
    with pytest.raises(InvalidInputError) as info:
        migrate_file(folder / "report.json", tmp_path / "out.json")
    found = {(Path(path).name, f.code) for path, f in info.value.findings}
    assert ("circuit.json", "A103") in found
    assert ("report.json", "A107") in found
