"""The command line: exit codes, output contract, and hostile inputs (never a traceback)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import jsonschema
import pytest

import mibspec
from mibspec.core.spec import spec_dir
from mibspec.spec_tools.conformance import discover_cases
from mibspec.validator import Stage

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance" / "v1"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


def _valid_case(kind: str) -> Path:
    for case in discover_cases(CONFORMANCE):
        if case.parent.parent.name == kind and case.parent.name == "valid":
            return case / "document.json"
    raise AssertionError(f"the conformance suite has no valid {kind} case")


def _output_schema() -> dict[str, object]:
    return json.loads(
        (spec_dir() / "schemas" / "verification-result.schema.json").read_text(encoding="utf-8")
    )


def _tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_version(mibspec_cli: CliRun) -> None:
    result = mibspec_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"mibspec {mibspec.__version__} (spec 1.2)"
    assert mibspec.__version__ == version("mibspec")


def test_valid_report_exits_zero_with_json_contract(mibspec_cli: CliRun) -> None:
    document = _valid_case("report")
    before = _tree_digest(document.parent)
    result = mibspec_cli("verify", str(document), "--no-recompute", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    output = json.loads(result.stdout)
    jsonschema.Draft202012Validator(_output_schema()).validate(output)
    assert output["valid"] is True
    assert output["spec_version"] == "1.2"
    first = output["documents"][0]
    assert first["path"] == str(document)
    assert first["kind"] == "report"
    assert first["valid"] is True
    stages = {stage["name"]: stage["status"] for stage in first["stages"]}
    assert stages["recompute"] == "skipped"  # never "passed" when it did not run
    assert _tree_digest(document.parent) == before  # inputs are never modified


def test_invalid_document_exits_one_with_located_findings(mibspec_cli: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "spec_version": "1.0",\n  "kind": "causal_model",\n  "task": ""\n}\n')
    result = mibspec_cli("verify", str(path), "--format", "json")
    assert result.returncode == 1
    output = json.loads(result.stdout)
    jsonschema.Draft202012Validator(_output_schema()).validate(output)
    findings = {(f["code"], f["pointer"], f["line"]) for f in output["documents"][0]["findings"]}
    assert ("S116", "/task", 4) in findings  # minLength
    assert ("S111", "", 1) in findings  # missing mechanism, variables, outputs


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b'{"spec_version": "1.0", "spec_version": "1.0"}', "P102"),
        (b'{"spec_version": "1.0", "x": NaN}', "P103"),
        (b"[" * 100_000 + b"]" * 100_000, "P106"),
        (b'{"a": 1,}', "P101"),
        (b"\xef\xbb\xbf{}", "P105"),
        (b'{"a": "\xc3\x28"}', "P104"),
        (b"[1, 2]", "P108"),
    ],
    ids=["duplicate-key", "nan", "deep-nesting", "syntax", "bom", "bad-utf8", "not-object"],
)
def test_hostile_inputs_give_a_code_not_a_traceback(
    mibspec_cli: CliRun, tmp_path: Path, content: bytes, code: str
) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(content)
    result = mibspec_cli("verify", str(path), "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    [finding] = json.loads(result.stdout)["documents"][0]["findings"]
    assert finding["code"] == code
    assert finding["line"] >= 1
    assert finding["column"] >= 1


@pytest.mark.slow
def test_a_200_megabyte_file_is_refused_without_reading_it(mibspec_cli: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:  # sparse: the size is what matters, not the bytes on disk
        handle.truncate(200 * 1024 * 1024)
    result = mibspec_cli("verify", str(path), "--format", "json")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [finding] = json.loads(result.stdout)["documents"][0]["findings"]
    assert finding["code"] == "P107"


@pytest.mark.slow
def test_usage_errors_exit_two(mibspec_cli: CliRun, tmp_path: Path) -> None:
    assert mibspec_cli("verify", str(tmp_path / "missing.json")).returncode == 2
    assert mibspec_cli("verify", str(tmp_path)).returncode == 2  # a folder without reports
    valid = _valid_case("report")
    unknown_profile = mibspec_cli("verify", str(valid), "--profile", "nope")
    assert unknown_profile.returncode == 2
    assert "unknown profile" in unknown_profile.stderr
    assert mibspec_cli("verify", str(valid), "--format", "xml").returncode == 2
    assert mibspec_cli("rules", "Z999").returncode == 2
    assert mibspec_cli("schema", "show", "nothing").returncode == 2


def test_text_output_names_code_position_and_verdict(mibspec_cli: CliRun, tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"spec_version": "9.9", "kind": "report"}')
    result = mibspec_cli("verify", str(path))
    assert result.returncode == 1
    assert f"{path}:1:18 S102" in result.stdout
    assert "not conformant" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("FAIL")
    assert "\x1b[" not in result.stdout  # NO_COLOR is respected


def test_rules_lists_the_whole_catalogue(mibspec_cli: CliRun) -> None:
    listed = mibspec_cli("rules", "--format", "json")
    assert listed.returncode == 0
    codes = [entry["code"] for entry in json.loads(listed.stdout)]
    catalogue = json.loads((spec_dir() / "rules.json").read_text(encoding="utf-8"))
    assert codes == [rule["code"] for rule in catalogue["rules"]]
    explained = mibspec_cli("rules", "A103")
    assert explained.returncode == 0
    assert "artifact-hash-mismatch" in explained.stdout
    assert "A-3" in explained.stdout


def test_schema_list_show_export(mibspec_cli: CliRun, tmp_path: Path) -> None:
    listed = mibspec_cli("schema", "list")
    assert "urn:mibspec:schema:report:1.2" in listed.stdout
    shown = mibspec_cli("schema", "show", "circuit")
    assert json.loads(shown.stdout)["$id"] == "urn:mibspec:schema:circuit:1.2"
    assert mibspec_cli("schema", "export", str(tmp_path / "out")).returncode == 0
    for path in (spec_dir() / "schemas").glob("*.schema.json"):
        assert (tmp_path / "out" / path.name).read_bytes() == path.read_bytes()


def test_cite_names_version_and_schema_bundle_hash(mibspec_cli: CliRun) -> None:
    digest = hashlib.sha256()
    for path in sorted((spec_dir() / "schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    bibtex = mibspec_cli("cite")
    assert bibtex.returncode == 0
    assert bibtex.stdout.startswith("@misc{mibspec_1_2,")
    assert f"sha256:{digest.hexdigest()}" in bibtex.stdout
    assert digest.hexdigest() in mibspec_cli("cite", "--format", "cff").stdout


def test_python_api_mirrors_the_cli() -> None:
    document = _valid_case("report")
    result = mibspec.verify(document, recompute=False)
    assert result.valid
    assert result.documents[0].kind == "report"
    with pytest.raises(FileNotFoundError):
        mibspec.verify("/nonexistent/report.json")


def test_the_skipped_recompute_stage_names_the_flag_that_skipped_it(mibspec_cli: CliRun) -> None:
    """The API says "not requested"; the command says which of its flags turned it off."""
    report = str(Path(__file__).resolve().parents[2] / "examples" / "circuit" / "report.json")
    result = mibspec_cli("verify", report, "--no-recompute", "--format", "json")
    documents = json.loads(result.stdout)["documents"]
    stages = [s for d in documents for s in d["stages"] if s["name"] == "recompute"]
    assert {s.get("detail") for s in stages if s["status"] == "skipped"} >= {"disabled (--no-recompute)"}
    assert "not requested" not in result.stdout


@pytest.mark.slow
def test_the_skipped_recompute_detail_reaches_every_worker(mibspec_cli: CliRun, tmp_path: Path) -> None:
    """The reason the recompute stage was skipped is a verification option, so reports
    verified in worker processes (-j 2) carry it as those verified here do."""
    example = Path(__file__).resolve().parents[2] / "examples" / "circuit"
    for name in ("a", "b", "c"):
        shutil.copytree(example, tmp_path / name)
    result = mibspec_cli("verify", str(tmp_path), "--no-recompute", "-j", "2", "--format", "json")
    reports = [d for d in json.loads(result.stdout)["documents"] if d["kind"] == "report"]
    assert len(reports) == 3
    for document in reports:
        [stage] = [s for s in document["stages"] if s["name"] == "recompute"]
        assert stage == {"name": "recompute", "status": "skipped", "detail": "disabled (--no-recompute)"}


def test_the_api_takes_the_reason_a_skipped_recompute_stage_gives() -> None:
    report = Path(__file__).resolve().parents[2] / "examples" / "circuit" / "report.json"
    result = mibspec.verify(report, recompute=False, skipped_because="checked by the caller only")
    [document] = [d for d in result.documents if d.kind == "report"]
    assert document.stages[Stage.RECOMPUTE][1] == "checked by the caller only"
    assert mibspec.verify(report, recompute=False).documents[0].stages[Stage.RECOMPUTE][1] == "not requested"
