"""Output paths of every writing command: checked before the work, never an input, written atomically.

Independent anchors: the files are compared byte by byte (and by inode) with copies taken
before the command ran; "nothing was printed" is the empty standard output; the usual
mode of a new file is that of a file made here with ``open``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mibspec.core.outputs import Inputs, OutputPathError, check_writable, input_files, write_atomic

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """A copy of the circuit example: report, circuit, dataset and their sidecars."""
    target = tmp_path / "circuit"
    shutil.copytree(EXAMPLES / "circuit", target)
    return target


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_ino) for p in sorted(folder.iterdir()) if p.is_file()}


def _usage_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mibspec: error: ")
    for needle in needles:
        assert needle in lines[0]


# -- an output never overwrites an input ---------------------------------------------------


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("-o", "report.json"),  # the document given
        ("-o", "circuit.json"),  # a referenced document
        ("--receipt", "circuit.safetensors"),  # an artifact of the referenced document
        ("--receipt", "dataset.jsonl"),
    ],
)
def test_verify_refuses_an_output_that_is_an_input(
    mibspec_cli: CliRun, example: Path, option: str, name: str
) -> None:
    before = _snapshot(example)
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", option, str(example / name)
    )
    _usage_error(result, "would overwrite the input", name)
    assert result.stdout == ""  # refused before the verification printed anything
    assert _snapshot(example) == before


def test_verify_refuses_links_to_an_input(mibspec_cli: CliRun, example: Path, tmp_path: Path) -> None:
    before = _snapshot(example)
    symlink = tmp_path / "alias.json"
    symlink.symlink_to(example / "report.json")
    hardlink = tmp_path / "hard.safetensors"
    os.link(example / "circuit.safetensors", hardlink)
    # The folder given is expanded to its reports; a path through "." is the same file.
    for option, target in (
        ("-o", symlink),
        ("--receipt", hardlink),
        ("-o", example / "." / "dataset.json"),
    ):
        result = mibspec_cli("verify", str(example), "--no-recompute", option, str(target))
        _usage_error(result, "would overwrite the input")
    assert _snapshot(example) == before
    assert hardlink.read_bytes() == (example / "circuit.safetensors").read_bytes()


def test_verify_refuses_two_outputs_on_one_file(mibspec_cli: CliRun, example: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", "-o", str(out), "--receipt", str(out)
    )
    _usage_error(result, "would overwrite the output")
    assert not out.exists()


@pytest.mark.slow
def test_verify_writes_beside_its_inputs(mibspec_cli: CliRun, example: Path) -> None:
    """Outputs in the folder verified are fine when they are not inputs (the common CI case)."""
    result = mibspec_cli(
        "verify",
        str(example),
        "--no-recompute",
        "-f",
        "json",
        "-o",
        str(example / "result.json"),
        "--receipt",
        str(example / "receipt.json"),
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((example / "result.json").read_text(encoding="utf-8"))["valid"] is True
    assert mibspec_cli("verify-receipt", str(example / "receipt.json")).returncode == 0


@pytest.mark.slow
def test_report_and_leaderboard_refuse_their_inputs(mibspec_cli: CliRun, example: Path) -> None:
    before = _snapshot(example)
    _usage_error(
        mibspec_cli("html", str(example / "report.json"), "-o", str(example / "report.json")),
        "would overwrite the input",
    )
    _usage_error(
        mibspec_cli("html", str(example / "report.json"), "--png-dir", str(example / "report.json")),
        "--png-dir",
    )
    _usage_error(
        mibspec_cli("leaderboard", str(example.parent), "-o", str(example / "dataset.json")),
        "would overwrite the input",
    )
    assert _snapshot(example) == before


@pytest.mark.slow
def test_conformance_run_refuses_an_output_in_its_suite(mibspec_cli: CliRun, tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    case = REPO / "conformance" / "v1" / "json" / "valid"
    first = sorted(case.iterdir())[0]
    shutil.copytree(first, suite / "json" / "valid" / first.name)
    expected = suite / "json" / "valid" / first.name / "expected.json"
    before = expected.read_bytes()
    result = mibspec_cli("conformance", "run", "--suite", str(suite), "-o", str(expected))
    _usage_error(result, "would overwrite the input")
    assert expected.read_bytes() == before
    fine = mibspec_cli("conformance", "run", "--suite", str(suite), "-o", str(tmp_path / "r" / "ctrf.json"))
    assert fine.returncode == 0, fine.stderr
    assert json.loads((tmp_path / "r" / "ctrf.json").read_text(encoding="utf-8"))["results"]


@pytest.mark.slow
def test_mib_results_import_refuses_to_overwrite_its_source(mibspec_cli: CliRun, tmp_path: Path) -> None:
    results = tmp_path / "mib" / "ioi_gpt2_m" / "report.json"  # <task>_<model>_<method>/report.json
    results.parent.mkdir(parents=True)
    payload = {
        "method_name": "m",
        "results": [
            {
                "model_id": "gpt2",
                "scores": {
                    "ioi": {
                        "CPR": {"edge_counts": [1, 2], "faithfulness": [0.5, 1.0]},
                        "CMD": {"edge_counts": [1, 2], "faithfulness": [0.5, 1.0]},
                    }
                },
            }
        ],
    }
    results.write_text(json.dumps(payload), encoding="utf-8")
    before = results.read_bytes()
    _usage_error(
        mibspec_cli("import", "mib-circuit-results", str(results), "-o", str(tmp_path / "mib")),
        "would overwrite the input",
    )
    assert results.read_bytes() == before


def test_schema_export_refuses_the_spec_folder(mibspec_cli: CliRun, tmp_path: Path) -> None:
    from mibspec.core.spec import spec_dir

    schemas = spec_dir() / "schemas"  # the bundle the command exports (installed or checkout)
    before = _snapshot(schemas)
    _usage_error(mibspec_cli("schema", "export", str(schemas)), "would overwrite the input")
    assert _snapshot(schemas) == before


def test_output_folder_never_overwrites_a_producer_input(tmp_path: Path) -> None:
    from mibspec.reference_impl.scoring.folder import OutputFolder

    data = tmp_path / "data"
    shutil.copytree(EXAMPLES / "circuit", data)
    before = _snapshot(data)
    folder = OutputFolder(data, overwrite=True, inputs=input_files([data / "dataset.json"]))
    for name in ("dataset.json", "dataset.jsonl"):  # the document and the rows it declares
        with pytest.raises(OutputPathError, match="would overwrite the input"):
            folder.write(name, b"{}")
    folder.write("other.json", b"{}")
    assert _snapshot(data) == {**before, "other.json": (b"{}", (data / "other.json").stat().st_ino)}
    model = tmp_path / "model"
    model.mkdir()
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        OutputFolder(model / "out", inputs=input_files([model]))


@pytest.mark.recompute
def test_score_refuses_an_output_folder_inside_its_model(mibspec_cli: CliRun, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    model = tmp_path / "tiny-gpt2"
    shutil.copytree(EXAMPLES / "models" / "tiny-gpt2", model)
    before = _snapshot(model)
    result = mibspec_cli(
        "score",
        "circuit",
        "--model",
        str(model),
        "--dataset",
        str(EXAMPLES / "datasets" / "ioi" / "test.meta.json"),
        "-c",
        "io_s2_flip",
        "--method",
        "random",
        "-o",
        str(model / "out"),
    )
    _usage_error(result, "would overwrite the input")
    assert _snapshot(model) == before
    assert not (model / "out").exists()


@pytest.mark.slow
@pytest.mark.recompute
def test_score_never_overwrites_its_dataset(mibspec_cli: CliRun, tmp_path: Path) -> None:
    """A dataset document in the output folder, named as the one the producer writes."""
    pytest.importorskip("torch")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("dataset.json", "dataset.jsonl"):
        shutil.copy(EXAMPLES / "circuit" / name, data / name)
    before = _snapshot(data)
    result = mibspec_cli(
        "score",
        "circuit",
        "--model",
        str(EXAMPLES / "models" / "tiny-gpt2"),
        "--dataset",
        str(data / "dataset.json"),
        "-c",
        "io_s2_flip",
        "--method",
        "random",
        "-o",
        str(data),
    )
    _usage_error(result, "would overwrite the input")
    assert {name: before[name] for name in before} == {name: _snapshot(data)[name] for name in before}


# -- outputs are checked before the work; I/O problems are usage errors ------------------------


def test_receipt_into_an_unusable_folder_fails_before_verifying(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", "--receipt", str(blocker / "receipt.json")
    )
    _usage_error(result, "is not a folder")
    assert result.stdout == ""  # no PASS line before the failure
    result = mibspec_cli("verify", str(example / "report.json"), "--no-recompute", "-o", str(tmp_path))
    _usage_error(result, "is a folder")


@pytest.mark.slow
def test_outputs_into_missing_folders_are_made(mibspec_cli: CliRun, example: Path, tmp_path: Path) -> None:
    # A receipt's folder holds every input, so it exists already; -o may name a new folder.
    out, receipt = tmp_path / "a" / "b" / "out.txt", tmp_path / "receipt.json"
    result = mibspec_cli(
        "verify", str(example / "report.json"), "--no-recompute", "-o", str(out), "--receipt", str(receipt)
    )
    assert result.returncode == 0, result.stderr
    assert out.read_text(encoding="utf-8").rstrip().splitlines()[-1].startswith("PASS")
    assert json.loads(receipt.read_text(encoding="utf-8"))["valid"] is True


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("verify", "{long}"),
        ("verify", "{report}", "--no-recompute", "-o", "{long}"),
        ("verify", "{report}", "--no-recompute", "--receipt", "{tmp}/missing/{long}"),
        ("html", "{long}", "-o", "{tmp}/x.html"),
        ("leaderboard", "{long}"),
        ("import", "eap-ig", "{long}", "-o", "{tmp}/x"),
        ("migrate", "{long}", "-o", "{tmp}/x.json"),
        ("schema", "export", "{tmp}/{long}"),
    ],
    ids=["verify-input", "verify-output", "receipt", "html", "leaderboard", "import", "migrate", "export"],
)
def test_a_path_too_long_is_a_usage_error(
    mibspec_cli: CliRun, example: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    long = "a" * 300  # longer than any file name the file system takes (255 bytes)
    args = [a.format(long=long, report=example / "report.json", tmp=tmp_path) for a in command]
    result = mibspec_cli(*args)
    _usage_error(result)
    assert "name too long" in result.stderr.lower()
    assert "PASS" not in result.stdout


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that permissions apply to")
def test_a_read_only_folder_is_refused_before_verifying(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = mibspec_cli(
            "verify", str(example / "report.json"), "--no-recompute", "--receipt", str(locked / "r.json")
        )
        _usage_error(result, "permission denied")
        assert result.stdout == ""
    finally:
        locked.chmod(0o755)


def test_check_writable_reports_each_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_writable(tmp_path / "new" / "deeper" / "file.json", "-o")  # missing folders are fine
    check_writable(tmp_path / "dir", "--png-dir", folder=True)
    with pytest.raises(OutputPathError, match="is a folder"):
        check_writable(tmp_path, "-o")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(OutputPathError, match="permission denied"):
        check_writable(tmp_path / "file.json", "--receipt")


# -- atomic writes ---------------------------------------------------------------------------


def test_write_atomic_replaces_whole_files_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.txt"
    write_atomic(target, "first\n")
    reference = tmp_path / "reference.txt"
    with open(reference, "w", encoding="utf-8") as handle:  # the usual mode of a new file
        handle.write("x")
    assert stat.S_IMODE(target.stat().st_mode) == stat.S_IMODE(reference.stat().st_mode)
    target.chmod(0o640)

    def fail(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "second\n")
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "reference.txt"]  # no temporary left
    write_atomic(target, b"third\n")
    assert target.read_bytes() == b"third\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the replaced file's mode is kept


def test_write_atomic_keeps_links_and_writes_special_files_in_place(tmp_path: Path) -> None:
    """Links followed on purpose: a link stays a link (the file it names is replaced); a FIFO
    or a device stays what it is and receives the bytes; neither is replaced by a regular file."""
    import threading

    (tmp_path / "real.json").write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    check_writable(link, "-o", follow_links=True)
    write_atomic(link, "new", follow_links=True)
    assert link.is_symlink()
    assert os.readlink(link) == "real.json"
    assert (tmp_path / "real.json").read_text(encoding="utf-8") == "new"

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    check_writable(fifo, "-o")
    write_atomic(fifo, "through the pipe")
    reader.join(timeout=10)
    assert received == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe", "real.json"]

    null = tmp_path / "null"
    null.symlink_to("/dev/null")
    check_writable(null, "-o", follow_links=True)
    write_atomic(null, "discarded", follow_links=True)
    assert null.is_symlink()
    assert stat.S_ISCHR(Path("/dev/null").stat().st_mode)


def test_inputs_protect_files_links_and_folders(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text("{}", encoding="utf-8")
    model = tmp_path / "model"
    model.mkdir()
    inputs = Inputs([data, model])
    link = tmp_path / "link.json"
    link.symlink_to(data)
    hard = tmp_path / "hard.json"
    os.link(data, hard)
    for path in (data, tmp_path / "." / "data.json", link, hard, model / "config.json", model):
        assert inputs.clash(path) is not None, path
    for path in (tmp_path / "other.json", tmp_path / "model-other" / "x"):
        assert inputs.clash(path) is None, path


# -- an output is never written through a link planted in a scanned folder -----------------


@pytest.fixture
def planted(example: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The scanned folder holds ``x.sarif``, a link to a file outside it (a planted link)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n", encoding="utf-8")
    (example / "x.sarif").symlink_to(outside)
    return example / "x.sarif", outside


@pytest.mark.slow
def test_verify_refuses_an_output_link_planted_in_the_scanned_folder(
    mibspec_cli: CliRun, example: Path, planted: tuple[Path, Path]
) -> None:
    link, outside = planted
    result = mibspec_cli("verify", str(example), "--no-recompute", "-f", "sarif", "-o", str(link))
    _usage_error(result, "x.sarif", "symbolic link", "--follow-output-links")
    assert outside.read_text(encoding="utf-8") == "precious\n"
    assert link.is_symlink()
    receipt = mibspec_cli("verify", str(example), "--no-recompute", "--receipt", str(link))
    _usage_error(receipt, "--receipt", "symbolic link")
    assert outside.read_text(encoding="utf-8") == "precious\n"


def test_verify_writes_through_a_link_when_asked(
    mibspec_cli: CliRun, example: Path, planted: tuple[Path, Path]
) -> None:
    link, outside = planted
    result = mibspec_cli(
        "verify", str(example), "--no-recompute", "-f", "sarif", "-o", str(link), "--follow-output-links"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(outside.read_text(encoding="utf-8"))["version"] == "2.1.0"
    assert link.is_symlink()


@pytest.mark.slow
def test_a_folder_link_on_the_output_path_is_refused(
    mibspec_cli: CliRun, example: Path, tmp_path: Path
) -> None:
    """A link to a folder anywhere on the path, also one undone by ``..`` after it."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (example / "out").symlink_to(elsewhere / "sub")
    for output in (example / "out" / "x.sarif", Path(f"{example}/out/../x.sarif")):
        result = mibspec_cli("verify", str(example), "--no-recompute", "-o", str(output))
        _usage_error(result, "passes through", "out, which is a symbolic link")
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["sub"]
    schema = mibspec_cli("schema", "export", str(example / "out" / "schemas"))
    _usage_error(schema, "symbolic link")
    assert sorted(p.name for p in elsewhere.rglob("*")) == ["sub"]
    asked = mibspec_cli("schema", "export", str(example / "out" / "schemas"), "--follow-output-links")
    assert asked.returncode == 0, asked.stderr
    assert (elsewhere / "sub" / "schemas" / "report.schema.json").is_file()


@pytest.mark.slow
def test_dev_stdout_is_still_an_output(mibspec_cli: CliRun, example: Path) -> None:
    result = mibspec_cli("verify", str(example / "report.json"), "--no-recompute", "-o", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert "conformant" in result.stdout


def test_write_atomic_replaces_a_link_without_following_it(tmp_path: Path) -> None:
    """A link that appears at the destination after the checks is replaced, its target kept."""
    target = tmp_path / "target.txt"
    target.write_text("precious", encoding="utf-8")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    with pytest.raises(OutputPathError, match="symbolic link"):
        check_writable(link, "-o")
    write_atomic(link, "new")
    assert not link.is_symlink()
    assert link.read_text(encoding="utf-8") == "new"
    assert target.read_text(encoding="utf-8") == "precious"


@pytest.mark.slow
def test_migrate_refuses_an_output_link(mibspec_cli: CliRun, tmp_path: Path) -> None:
    source = tmp_path / "report.json"
    report = json.loads((EXAMPLES / "causal-bench-planted" / "report.json").read_text(encoding="utf-8"))
    report["spec_version"] = "1.0"
    source.write_text(json.dumps(report), encoding="utf-8")
    outside = tmp_path / "outside.json"
    outside.write_text("precious", encoding="utf-8")
    link = tmp_path / "migrated.json"
    link.symlink_to(outside)
    _usage_error(mibspec_cli("migrate", str(source), "-o", str(link)), "symbolic link")
    assert outside.read_text(encoding="utf-8") == "precious"
    asked = mibspec_cli("migrate", str(source), "-o", str(link), "--follow-output-links")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(outside.read_text(encoding="utf-8"))["spec_version"] == "1.2"
    assert link.is_symlink()
