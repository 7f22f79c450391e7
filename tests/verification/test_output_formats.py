"""``mibspec verify`` in CI: output formats, code selection, batches, the action, citation.

Independent anchors: the SARIF output is validated against the OASIS SARIF 2.1.0 schema
and the citation file against the CFF 1.2.0 schema (both copied from registry packages,
tests/data/README.md); the JUnit output is read back with ``junitparser``; GitHub
workflow commands are checked against strings written by hand from GitHub's escaping
rules and decoded with their inverse; every format is compared finding by finding with
the JSON output (the stable contract).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import junitparser
import pytest
import yaml

from mibspec.validator import DocumentResult, Finding, Severity, Stage, StageStatus, VerificationResult
from mibspec.verification.output_formats import render_github, render_junit

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = REPO / "conformance" / "v1"
EXAMPLES = REPO / "examples"
DATA = Path(__file__).resolve().parents[1] / "data"

CliRun = Callable[..., subprocess.CompletedProcess[str]]

NOT_NESTED = CONFORMANCE / "circuit" / "valid" / "circuits-not-nested" / "document.json"  # K106 warning
SHA_MISMATCH = CONFORMANCE / "counterfactual_dataset" / "invalid" / "sha256-mismatch" / "document.json"
SCHEMA_ERROR = CONFORMANCE / "featurizer" / "invalid" / "zero-input-dim" / "document.json"  # S114


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    """A causal model with a missing property (S111), an out-of-range value and an odd key."""
    path = tmp_path / "bad.json"
    path.write_text(
        '{\n  "spec_version": "1.0",\n  "kind": "causal_model",\n  "task": "",\n  "odd,key:%": 1\n}\n',
        encoding="utf-8",
    )
    return path


def _json_findings(mibspec_cli: CliRun, *args: str) -> list[dict[str, Any]]:
    result = mibspec_cli("verify", *args, "--format", "json")
    return [
        {**finding, "path": doc["path"]}
        for doc in json.loads(result.stdout)["documents"]
        for finding in doc["findings"]
    ]


# --- text ---------------------------------------------------------------------------------------

_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colour_codes(text: str) -> set[int]:
    """SGR parameters that set a colour (30–38, 40–48, 90–97, 100–107)."""
    params = {int(p) for match in _SGR.findall(text) for p in match.split(";") if p}
    return {p for p in params if 30 <= p <= 38 or 40 <= p <= 48 or 90 <= p <= 97 or 100 <= p <= 107}


@pytest.mark.slow
def test_text_output_is_coloured_only_without_no_color(mibspec_cli: CliRun, broken: Path) -> None:
    coloured = mibspec_cli("verify", str(broken), env={"NO_COLOR": "", "FORCE_COLOR": "1"})
    assert coloured.returncode == 1
    assert _colour_codes(coloured.stdout), "FORCE_COLOR without NO_COLOR should colour the verdict"
    plain = mibspec_cli("verify", str(broken), env={"NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert plain.returncode == 1
    assert _colour_codes(plain.stdout) == set()
    assert "S111" in plain.stdout
    assert "not conformant" in plain.stdout


# --- github -------------------------------------------------------------------------------------


def _one_document(finding: Finding, path: str = "dir/a,b:c.json") -> VerificationResult:
    doc = DocumentResult(path=path, kind="report", findings=[finding])
    for stage in Stage:
        doc.set_stage(stage, StageStatus.PASSED)
    return VerificationResult(documents=[doc])


def test_github_commands_escape_as_github_specifies() -> None:
    finding = Finding(
        code="C101",
        severity=Severity.ERROR,
        message="50% off, a: b\r\nnext",
        pointer="/claims/cpr",
        line=7,
        column=3,
        hint="use 100%",
    )
    out = io.StringIO()
    render_github(_one_document(finding), out)
    first = out.getvalue().splitlines()[0]
    # Properties escape % CR LF : , ; the message escapes % CR LF only. A line break taken
    # from a document is shown as an escape (a command is one line); the hint's is GitHub's %0A.
    assert first == (
        "::error file=dir/a%2Cb%3Ac.json,line=7,col=3,title=C101::"
        "50%25 off, a: b\\x0d\\x0anext (at /claims/cpr)%0Ahint: use 100%25"
    )


@pytest.mark.parametrize(("severity", "command"), [(Severity.WARNING, "warning"), (Severity.INFO, "notice")])
def test_github_levels(severity: Severity, command: str) -> None:
    out = io.StringIO()
    render_github(_one_document(Finding(code="K106", severity=severity, message="m", line=1, column=1)), out)
    assert out.getvalue().startswith(f"::{command} file=")


def _unescape(text: str) -> str:
    return (
        text.replace("%2C", ",")
        .replace("%3A", ":")
        .replace("%0A", "\n")
        .replace("%0D", "\r")
        .replace("%25", "%")
    )


_COMMAND = re.compile(r"^::(error|warning|notice) (.*?)::(.*)$")


@pytest.mark.slow
def test_github_output_matches_the_json_contract(mibspec_cli: CliRun, broken: Path) -> None:
    result = mibspec_cli("verify", str(broken), "--format", "github")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("FAIL 1 document(s)")
    decoded = []
    for line in lines[:-1]:
        match = _COMMAND.match(line)
        assert match, line
        props = dict(item.split("=", 1) for item in match.group(2).split(","))
        decoded.append(
            (
                _unescape(props["file"]),
                int(props["line"]),
                int(props["col"]),
                _unescape(props["title"]),
                _unescape(match.group(3)),
            )
        )
    expected = []
    for f in _json_findings(mibspec_cli, str(broken)):
        message = f["message"] + (f" (at {f['pointer']})" if f["pointer"] else "")
        message += f"\nhint: {f['hint']}" if f.get("hint") else ""
        expected.append((f["path"], f["line"], f["column"], f["code"], message))
    assert decoded == expected
    assert {code for *_, code, _ in decoded} >= {"S111", "S112", "S116"}


# --- sarif --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator() -> Any:
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    return jsonschema.validators.validator_for(schema)(schema)


def test_sarif_output_is_valid_sarif_2_1_0(mibspec_cli: CliRun, broken: Path, sarif_validator: Any) -> None:
    result = mibspec_cli("verify", str(broken), str(NOT_NESTED), "--format", "sarif")
    assert result.returncode == 1
    log = json.loads(result.stdout)
    errors = sorted(sarif_validator.iter_errors(log), key=str)
    assert errors == [], errors[0].message if errors else ""
    # The schema check is not vacuous: a level SARIF does not define is rejected.
    log["runs"][0]["results"][0]["level"] = "fatal"
    assert list(sarif_validator.iter_errors(log))


@pytest.mark.slow
def test_sarif_rules_are_the_catalogue_and_results_the_findings(
    mibspec_cli: CliRun, broken: Path, sarif_validator: Any
) -> None:
    log = json.loads(mibspec_cli("verify", str(broken), str(NOT_NESTED), "--format", "sarif").stdout)
    [run] = log["runs"]
    assert log["version"] == "2.1.0"
    driver = run["tool"]["driver"]
    assert driver["name"] == "mibspec"
    catalogue = json.loads((REPO / "spec" / "v1" / "rules.json").read_text(encoding="utf-8"))["rules"]
    assert [(r["id"], r["name"], r["shortDescription"]["text"]) for r in driver["rules"]] == [
        (r["code"], r["symbol"], r["summary"]) for r in catalogue
    ]
    levels = {"error": "error", "warning": "warning", "info": "note"}
    expected = [
        (f["code"], levels[f["severity"]], f["message"], f["path"], f["line"], f["column"], f["pointer"])
        for f in _json_findings(mibspec_cli, str(broken), str(NOT_NESTED))
    ]
    got = []
    for r in run["results"]:
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        [location] = r["locations"]
        physical = location["physicalLocation"]
        got.append(
            (
                r["ruleId"],
                r["level"],
                r["message"]["text"],
                "file://" + physical["artifactLocation"]["uri"].removeprefix("file://"),
                physical["region"]["startLine"],
                physical["region"]["startColumn"],
                r["properties"]["pointer"],
            )
        )
    assert got == [(c, lv, m, "file://" + p, line, col, ptr) for c, lv, m, p, line, col, ptr in expected]
    assert "K106" in {r["ruleId"] for r in run["results"]}
    verdicts = {d["path"]: d["valid"] for d in run["properties"]["documents"]}
    assert verdicts == {str(broken): False, str(NOT_NESTED): True}


def test_sarif_relative_paths_stay_relative(mibspec_cli: CliRun, broken: Path, sarif_validator: Any) -> None:
    (broken.parent / "with space").mkdir()
    moved = broken.parent / "with space" / "bad.json"
    shutil.move(broken, moved)
    result = mibspec_cli("verify", "with space/bad.json", "--format", "sarif", cwd=broken.parent)
    log = json.loads(result.stdout)
    assert list(sarif_validator.iter_errors(log)) == []
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]
    }
    assert uris == {"with%20space/bad.json"}


# --- junit --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_junit_output_reads_back_with_a_junit_parser(
    mibspec_cli: CliRun, broken: Path, tmp_path: Path
) -> None:
    out = tmp_path / "junit.xml"
    result = mibspec_cli(
        "verify", str(broken), str(NOT_NESTED), "--no-recompute", "--format", "junit", "--output", str(out)
    )
    assert result.returncode == 1
    xml = junitparser.JUnitXml.fromfile(str(out))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {str(broken), str(NOT_NESTED)}

    bad = {case.name: case for case in suites[str(broken)]}
    assert list(bad) == ["parse", "schema", "rules", "recompute"]
    failures = [r for r in bad["schema"].result if isinstance(r, junitparser.Failure)]
    expected = [
        f for f in _json_findings(mibspec_cli, str(broken), "--no-recompute") if f["severity"] == "error"
    ]
    assert [(f.type, f.message) for f in failures] == [(e["code"], e["message"]) for e in expected]
    for failure, finding in zip(failures, expected, strict=True):
        assert f"{broken}:{finding['line']}:{finding['column']} {finding['code']}" in failure.text
        assert f"(at {finding['pointer'] or '/'})" in failure.text
    assert bad["parse"].is_passed
    assert [type(r).__name__ for r in bad["rules"].result] == ["Skipped"]  # not run after the schema
    assert suites[str(broken)].failures == 1
    assert suites[str(broken)].skipped == 2

    good = {case.name: case for case in suites[str(NOT_NESTED)]}
    assert good["rules"].is_passed
    assert "K106" in (good["rules"].system_out or "")  # a warning is reported, not failed


def test_junit_escapes_text_xml_cannot_carry() -> None:
    import xml.etree.ElementTree as ET

    finding = Finding(code="S112", severity=Severity.ERROR, message="key '\x01' <&> \"q\"", line=1, column=1)
    out = io.StringIO()
    render_junit(_one_document(finding), out)
    root = ET.fromstring(out.getvalue().encode("utf-8"))  # raises on malformed XML
    [failure] = root.iter("failure")
    assert failure.get("message") == "key '\\x01' <&> \"q\""  # shown as in every other format


# --- select, ignore, error-on-warning ----------------------------------------------------------


def test_unknown_codes_are_usage_errors(mibspec_cli: CliRun) -> None:
    for option, value in (("--select", "Z9"), ("--ignore", "no-such-rule"), ("--ignore", "A103,Q")):
        result = mibspec_cli("verify", str(NOT_NESTED), option, value)
        assert result.returncode == 2, (option, value)
        assert "Traceback" not in result.stderr
        assert "expected a rule code" in result.stderr


@pytest.mark.slow
def test_ignore_a_rules_code_passes_the_document(mibspec_cli: CliRun) -> None:
    assert mibspec_cli("verify", str(SHA_MISMATCH)).returncode == 1
    for spelling in ("A103", "a10", "artifact-hash-mismatch", "K1,A"):
        result = mibspec_cli("verify", str(SHA_MISMATCH), "--ignore", spelling, "--format", "json")
        assert result.returncode == 0, spelling
        [doc] = json.loads(result.stdout)["documents"]
        assert doc["findings"] == []
        assert doc["valid"] is True


@pytest.mark.slow
def test_select_reports_only_the_selected_codes(mibspec_cli: CliRun, broken: Path) -> None:
    everything = {f["code"] for f in _json_findings(mibspec_cli, str(broken))}
    assert {"S111", "S112", "S116"} <= everything
    selected = {
        f["code"] for f in _json_findings(mibspec_cli, str(broken), "--select", "S111", "--select", "S116")
    }
    assert selected == {"S111", "S116"}
    rest = {f["code"] for f in _json_findings(mibspec_cli, str(broken), "--select", "S", "--ignore", "S112")}
    assert rest == everything - {"S112"}


@pytest.mark.slow
def test_a_schema_failure_still_fails_when_its_codes_are_hidden(mibspec_cli: CliRun) -> None:
    result = mibspec_cli("verify", str(SCHEMA_ERROR), "--ignore", "S", "--format", "json")
    assert result.returncode == 1
    [doc] = json.loads(result.stdout)["documents"]
    assert doc["findings"] == []
    assert {s["name"]: s["status"] for s in doc["stages"]}["schema"] == "failed"
    github = mibspec_cli("verify", str(SCHEMA_ERROR), "--ignore", "S", "--format", "github")
    assert github.stdout.startswith(
        f"::error file={SCHEMA_ERROR},title=not conformant::the schema stage failed"
    )


@pytest.mark.slow
def test_error_on_warning(mibspec_cli: CliRun) -> None:
    assert mibspec_cli("verify", str(NOT_NESTED)).returncode == 0
    strict = mibspec_cli("verify", str(NOT_NESTED), "--error-on-warning")
    assert strict.returncode == 1
    assert "--error-on-warning" in strict.stderr
    assert mibspec_cli("verify", str(NOT_NESTED), "--error-on-warning", "--ignore", "K106").returncode == 0


# --- batches and determinism -------------------------------------------------------------------


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    """Five report files: three examples, one sharing references with another, one broken."""
    root = tmp_path / "results"
    for name in ("circuit", "causal_bench", "saliency"):
        shutil.copytree(EXAMPLES / name, root / name)
    shutil.copy(root / "circuit" / "report.json", root / "circuit" / "again.report.json")
    case = CONFORMANCE / "report" / "invalid" / "circuit-cpr-inconsistent"
    shutil.copytree(case, root / "broken", ignore=shutil.ignore_patterns("expected.json"))
    (root / "broken" / "document.json").rename(root / "broken" / "report.json")
    return root


@pytest.mark.slow
def test_batch_output_is_identical_across_runs_and_job_counts(mibspec_cli: CliRun, batch: Path) -> None:
    outputs = []
    for jobs in ("1", "1", "2", "3"):
        result = mibspec_cli(
            "verify", "results", "--no-recompute", "--format", "json", "-j", jobs, cwd=batch.parent
        )
        assert result.returncode == 1, result.stderr
        outputs.append(result.stdout.encode("utf-8"))
    assert len(set(outputs)) == 1
    documents = json.loads(outputs[0])["documents"]
    paths = [doc["path"] for doc in documents]
    assert len(paths) == len(set(paths))  # a shared referenced document is listed once
    reports = sorted(str(p.relative_to(batch.parent)) for p in batch.rglob("*report.json"))
    assert [p for p in paths if p in reports] == reports  # input order
    assert "results/circuit/circuit.json" in paths


@pytest.mark.slow
def test_batch_summary_line(mibspec_cli: CliRun, batch: Path) -> None:
    serial = mibspec_cli("verify", "results", "--no-recompute", cwd=batch.parent)
    parallel = mibspec_cli("verify", "results", "--no-recompute", "-j", "2", cwd=batch.parent)
    assert serial.stdout == parallel.stdout
    documents = json.loads(
        mibspec_cli("verify", "results", "--no-recompute", "-f", "json", cwd=batch.parent).stdout
    )["documents"]
    given = sum("referenced_by" not in d for d in documents)
    valid = sum(d["valid"] for d in documents)
    errors = sum(f["severity"] == "error" for d in documents for f in d["findings"])
    warnings = sum(f["severity"] == "warning" for d in documents for f in d["findings"])
    assert serial.stdout.rstrip().splitlines()[-1] == (
        f"FAIL {len(documents)} document(s) ({given} given, {len(documents) - given} referenced), "
        f"{valid} conformant; {errors} error(s), {warnings} warning(s)"
    )
    assert given == 5


def test_jobs_must_be_positive(mibspec_cli: CliRun) -> None:
    assert mibspec_cli("verify", str(NOT_NESTED), "-j", "0").returncode == 2


# --- the GitHub Action --------------------------------------------------------------------------


def test_action_is_composite_and_keeps_inputs_out_of_scripts() -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    assert set(action["inputs"]) >= {"paths", "format", "args"}
    assert action["inputs"]["format"]["default"] == "github"
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], "inputs must reach scripts through env"
            assert step["shell"] == "bash"


def test_action_installs_the_pinned_torch_from_the_declared_index(tmp_path: Path) -> None:
    """The Install step, run with ``python`` replaced by a stand-in that records its arguments:
    torch at .ci/run's pin, from the index the input names (the CPU build by default)."""
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    [step] = [s for s in action["runs"]["steps"] if s.get("name") == "Install mibspec"]
    assert action["inputs"]["torch-index-url"]["default"] == "https://download.pytorch.org/whl/cpu"
    stand_in = tmp_path / "bin" / "python"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n', encoding="utf-8")
    stand_in.chmod(0o755)
    env = {
        "PATH": f"{stand_in.parent}{os.pathsep}{os.environ['PATH']}",
        "MIBSPEC_ACTION_PATH": "/action",
        "MIBSPEC_RECOMPUTE": "true",
        "MIBSPEC_TORCH_INDEX": "https://index.example/cpu",
    }
    subprocess.run(["bash", "-e", "-c", step["run"]], env=env, check=True)
    [pin] = re.findall(r"torch==[0-9.]+", (REPO / ".ci" / "run").read_text(encoding="utf-8"))
    assert (tmp_path / "calls").read_text(encoding="utf-8").splitlines() == [
        f"-m pip install --quiet {pin} --index-url https://index.example/cpu",
        "-m pip install --quiet /action[recompute]",
    ]


def test_action_verify_step_annotates_a_bad_report(tmp_path: Path, broken: Path) -> None:
    action = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
    [step] = [s for s in action["runs"]["steps"] if s.get("name") == "Verify"]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "NO_COLOR": "1",
        "MIBSPEC_PATHS": f"{broken} {NOT_NESTED}",
        "MIBSPEC_FORMAT": "github",
        "MIBSPEC_ARGS": "--ignore K106",
        "MIBSPEC_RECOMPUTE": "false",
    }
    result = subprocess.run(
        ["bash", "-e", "-c", step["run"]], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert result.returncode == 1, result.stderr
    assert f"::error file={broken},line=1,col=1,title=S111::" in result.stdout
    assert "K106" not in result.stdout


# --- citation -----------------------------------------------------------------------------------


def _bundle_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted((REPO / "spec" / "v1" / "schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_citation_file_is_valid_cff_1_2_0() -> None:
    schema = json.loads((DATA / "cff-schema-1.2.0.json").read_text(encoding="utf-8"))
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(schema).validate(citation)
    assert citation["cff-version"] == "1.2.0"
    # Not vacuous: the schema rejects a file without authors.
    assert list(
        jsonschema.Draft7Validator(schema).iter_errors({k: v for k, v in citation.items() if k != "authors"})
    )


def test_cite_agrees_with_the_citation_file(mibspec_cli: CliRun) -> None:
    cff = mibspec_cli("cite", "--format", "cff")
    assert cff.returncode == 0
    assert cff.stdout == (REPO / "CITATION.cff").read_text(encoding="utf-8"), (
        "CITATION.cff is out of date; regenerate with `mibspec cite --format cff > CITATION.cff`"
    )
    citation = yaml.safe_load(cff.stdout)
    bundle = _bundle_hash()
    assert citation["identifiers"][0]["value"] == f"mibspec-spec-1.2-schema-bundle-sha256:{bundle}"
    assert citation["title"].endswith("specification 1.2")
    import mibspec

    assert citation["version"] == mibspec.__version__
    bibtex = mibspec_cli("cite").stdout
    assert "version = {1.2}" in bibtex
    assert f"sha256:{bundle}" in bibtex
    assert citation["title"].removeprefix("mibspec") in bibtex
    text = mibspec_cli("cite", "--format", "text").stdout
    assert citation["title"] in text
    assert bundle in text
    assert mibspec.__version__ in text


# --- the claimed-vs-recomputed table -------------------------------------------------------------

#: A report whose recomputation is quick and whose table holds long names and numbers
#: of up to 11 characters (0.000999001).
PLANTED = EXAMPLES / "causal-bench-planted" / "report.json"


def _planted_comparisons(mibspec_cli: CliRun) -> list[dict[str, Any]]:
    result = json.loads(mibspec_cli("verify", str(PLANTED), "--format", "json").stdout)
    comparisons: list[dict[str, Any]] = result["documents"][0]["recomputed"]
    assert len(comparisons) > 100
    return comparisons


def _numbers(comparisons: list[dict[str, Any]]) -> Counter[str]:
    """Every claimed and recomputed number of the table, at 6 significant digits."""
    numbers: Counter[str] = Counter()
    for c in comparisons:
        numbers.update(["-" if c["claimed"] is None else f"{c['claimed']:.6g}", f"{c['recomputed']:.6g}"])
    return numbers


def _table_section(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = lines.index("claimed vs recomputed")
    return lines[start + 1 : -1]  # up to the summary line


def _tokens(lines: list[str]) -> Counter[str]:
    return Counter(token for line in lines for token in re.split(r"[\s,:]+", line) if token)


@pytest.mark.slow
@pytest.mark.parametrize("columns", [None, "120", "100", "80", "40"])
def test_no_number_of_the_table_is_cut_in_a_pipe(
    mibspec_cli: CliRun, monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    comparisons = _planted_comparisons(mibspec_cli)
    result = mibspec_cli("verify", str(PLANTED), env={"COLUMNS": columns} if columns else {})
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    section = _table_section(result.stdout)
    assert _numbers(comparisons) - _tokens(section) == Counter()  # every number, in full
    if columns is None:
        # No width to fit: a header, then one row per claim with the whole quantity on it.
        assert len(section) == 1 + len(comparisons)
        for line, c in zip(section[1:], comparisons, strict=True):
            assert line.strip().startswith(c["quantity"] + " ")
    elif int(columns) >= 80:
        assert max(len(line.rstrip()) for line in section) <= int(columns)


def _run_on_a_terminal(args: list[str], columns: int) -> str:
    """Run ``python -m mibspec ARGS`` with stdout on a pseudo-terminal ``columns`` wide."""
    import fcntl
    import pty
    import struct
    import termios
    import threading

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"NO_COLOR": "1"}
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mibspec", *args],
            stdout=slave,
            stderr=subprocess.PIPE,
            env=env,
            timeout=600,
            check=False,
        )
    finally:
        os.close(slave)
        reader.join(timeout=60)
        os.close(master)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # styles such as italic stay without colour


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 100])
def test_a_narrow_terminal_keeps_every_number(mibspec_cli: CliRun, columns: int) -> None:
    comparisons = _planted_comparisons(mibspec_cli)
    stdout = _run_on_a_terminal(["verify", str(PLANTED)], columns)
    assert "…" not in stdout
    section = _table_section(stdout)
    assert _numbers(comparisons) - _tokens(section) == Counter()
    assert max(len(line.rstrip()) for line in section) <= columns
