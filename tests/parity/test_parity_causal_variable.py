"""``mibspec parity causal-variable``: pyvene and mibspec on a causal-variable report's units.

The quick tests need no pyvene: a missing environment is a usage error (exit 2) saying how
to build one; a report that does not verify is refused before anything it points to is read;
a joint unit (MV-10) becomes cases intervening at every one of its sites. The tests marked
``parity`` (``-m parity``, ``$MIBSPEC_PYVENE_PYTHON`` naming a Python with pyvene) run the
command on the IOI example and on a joint unit of two attention heads written by ``score
causal-variable``, and expect every value to agree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import CliRun, SmallDataset

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"
IOI = REPO / "examples" / "causal-variable-ioi"
JOINT_CASE = REPO / "conformance" / "v1" / "report" / "valid" / "causal-variable-joint-heads"


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _write(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


# -- quick: no pyvene needed -------------------------------------------------------------------


def test_a_missing_pyvene_environment_is_a_usage_error_saying_how_to_build_one(
    mibspec_cli: CliRun, tmp_path: Path
) -> None:
    from mibspec.parity import PYVENE_REQUIREMENTS

    env = {"MIBSPEC_PYVENE_PYTHON": str(tmp_path / "no-such-python")}
    done = mibspec_cli("parity", "causal-variable", str(IOI / "report.json"), env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    for requirement in (r for group in PYVENE_REQUIREMENTS for r in group):
        assert requirement in done.stderr  # every pinned package, so the message can be followed
    assert "--pyvene-python" in done.stderr
    assert "MIBSPEC_PYVENE_PYTHON" in done.stderr
    named = mibspec_cli(
        "parity", "causal-variable", str(IOI / "report.json"), "--pyvene-python", str(tmp_path / "py")
    )
    assert named.returncode == 2
    assert str(tmp_path / "py") in named.stderr


def test_a_report_that_does_not_exist_is_a_usage_error(mibspec_cli: CliRun, tmp_path: Path) -> None:
    done = mibspec_cli("parity", "causal-variable", str(tmp_path / "report.json"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr


def _escaping(root: Path) -> Path:
    """The IOI example whose report names a dataset outside its folder (a faithful copy, with
    its hash, so that only the path is wrong)."""
    folder = root / "report"
    shutil.copytree(IOI, folder)
    outside = root / "outside"
    outside.mkdir()
    for name in ("dataset.json", "dataset.jsonl"):
        shutil.copy(IOI / name, outside / name)
    report = _read(folder / "report.json")
    next(a for a in report["artifacts"] if a["id"] == "dataset")["path"] = "../outside/dataset.json"
    _write(folder / "report.json", report)
    return folder / "report.json"


def _changed_rows(root: Path) -> Path:
    """The IOI example whose dataset rows no longer match their SHA-256."""
    folder = root / "report"
    shutil.copytree(IOI, folder)
    rows = (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "dataset.jsonl").write_text("".join(rows[1:] + rows[:1]), encoding="utf-8")
    return folder / "report.json"


@pytest.mark.parametrize(("make", "code"), [(_escaping, "A101"), (_changed_rows, "A103")])
def test_a_report_that_does_not_verify_is_refused_before_anything_is_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make: Any, code: str
) -> None:
    from click.testing import CliRunner

    import mibspec.parity
    from mibspec.cli._options import build_command
    from mibspec.cli.parity import parity_causal_variable_command
    from mibspec.parity import _causal

    report = make(tmp_path)
    read: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        read.append(repr(args))
        raise AssertionError("the report's inputs were read")

    for module, name in ((mibspec.parity, "causal_parity"), (_causal, "_report_inputs")):
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr(mibspec.parity, "pyvene_python", lambda python=None: Path(sys.executable))
    command = build_command(parity_causal_variable_command, "causal-variable")
    done = CliRunner().invoke(command, [str(report), "--model-root", str(MODELS)])
    assert done.exit_code == 2, done.output
    assert read == []
    assert "does not verify" in done.output
    assert f" {code} [error]" in done.output  # the findings are printed with their codes


def test_an_artifact_path_leaving_the_folder_is_refused_by_the_library_too(tmp_path: Path) -> None:
    from mibspec.parity._causal import _report_inputs

    with pytest.raises(ValueError, match="leaves the folder"):
        _report_inputs(_escaping(tmp_path))


@pytest.mark.recompute
def test_a_joint_unit_becomes_one_case_per_set_writing_every_joint_site_in_order() -> None:
    from mibspec.parity._causal import _report_cases

    report = _read(JOINT_CASE / "document.json")
    not_compared: list[tuple[str, str]] = []
    cases = _report_cases(report, JOINT_CASE, not_compared)
    unit = report["claims"]["variables"][0]["units"][0]
    assert not_compared == []
    assert [(case.unit, case.cf) for case in cases] == [(unit["id"], cf) for cf in unit["scores"]]
    featurizers = {a["id"]: _read(JOINT_CASE / a["path"]) for a in report["artifacts"]}
    for case in cases:
        assert case.location == unit["location"]
        assert case.doc == featurizers[unit["featurizer"]]
        assert len(case.joint) == 2
        for write, site in zip(case.joint, unit["joint_sites"], strict=True):
            expected = {k: site[k] for k in ("layer", "component", "heads")}
            assert write.location == expected | {"position": {"rule": "all"}}
            assert write.doc == featurizers[site["featurizer"]]
            assert set(write.weights) == set(write.doc["weights"])
    # each site's own weights: the three heads' rotations all differ
    rotations = [cases[0].weights["rotation"], *(w.weights["rotation"] for w in cases[0].joint)]
    assert all((a != b).any() for i, a in enumerate(rotations) for b in rotations[i + 1 :])


def test_units_pyvene_cannot_address_are_listed_not_dropped() -> None:
    from mibspec.parity._causal import _report_cases

    report = _read(JOINT_CASE / "document.json")
    unit = report["claims"]["variables"][0]["units"][0]
    named = unit | {
        "id": "named",
        "location": unit["location"] | {"position": {"rule": "named", "name": "io"}},
    }
    hookless_site = {"layer": 8, "component": "mlp_input", "featurizer": "x"}
    mlp_in = unit | {"id": "hookless", "joint_sites": [hookless_site]}
    heads = unit | {"id": "two heads", "location": unit["location"] | {"heads": [3, 4]}, "joint_sites": []}
    bare = {k: v for k, v in unit.items() if k != "featurizer"} | {"id": "bare"}
    site_bare = unit | {
        "id": "site bare",
        "joint_sites": [{"layer": 8, "component": "attention_heads", "heads": [1]}],
    }
    report["claims"]["variables"][0]["units"] = [named, mlp_in, heads, bare, site_bare]
    not_compared: list[tuple[str, str]] = []
    assert _report_cases(report, JOINT_CASE, not_compared) == []
    reasons = dict(not_compared)
    variable = report["claims"]["variables"][0]["name"]
    assert list(reasons) == [
        f"{variable}: {u}" for u in ("named", "hookless", "two heads", "bare", "site bare")
    ]
    assert "only known by name" in reasons[f"{variable}: named"]
    assert "'mlp_input'" in reasons[f"{variable}: hookless"]
    assert "several heads" in reasons[f"{variable}: two heads"]
    assert "no featurizer" in reasons[f"{variable}: bare"]
    assert "no featurizer" in reasons[f"{variable}: site bare"]  # a joint site without one too


# -- parity: against pyvene ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pyvene() -> Path:
    from mibspec.parity import PYVENE_PYTHON_ENV, pyvene_python

    python = pyvene_python()
    if python is None:
        pytest.skip(f"{PYVENE_PYTHON_ENV} names no Python that imports pyvene")
    return python


def _parity(report: Path, pyvene: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    args = ["--model-root", str(MODELS), "--pyvene-python", str(pyvene), "-f", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", "parity", "causal-variable", str(report), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"},
        timeout=1800,
    )
    return done, (json.loads(done.stdout) if done.stdout.strip() else {})


def _promised(report: Path) -> list[tuple[str, str]]:
    """``("variable: unit id", counterfactual set)`` of every score the report claims."""
    variables = _read(report)["claims"]["variables"]
    return [(f"{v['name']}: {u['id']}", cf) for v in variables for u in v["units"] for cf in u["scores"]]


@pytest.mark.parity
@pytest.mark.recompute
def test_every_unit_of_the_ioi_example_agrees_with_pyvene(pyvene: Path) -> None:
    done, document = _parity(IOI / "report.json", pyvene)
    assert done.returncode == 0, done.stderr[-3000:]
    assert document["ok"] is True
    assert document["not_compared"] == []
    rows = document["rows"]
    assert [r["quantity"] for r in rows if not r["ok"]] == []
    logits = [r["quantity"] for r in rows if r["group"] == "intervened logits (pyvene)"]
    promised = _promised(IOI / "report.json")
    assert len(promised) == 2 * 8 * 4  # two variables, eight units, four counterfactual sets
    assert sorted(logits) == sorted(f"intervened logits {name} / {cf}" for name, cf in promised)


@pytest.mark.parity
@pytest.mark.recompute
def test_a_joint_unit_written_by_score_agrees_with_pyvene(
    pyvene: Path, tmp_path: Path, small_ioi_dataset: SmallDataset
) -> None:
    dataset = small_ioi_dataset(tmp_path, 24)
    out = tmp_path / "joint"
    args = [
        *("-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset), "--method", "full_vector"),
        *("--position", "all", "--variable", "output_token", "-c", "random_names", "-c", "io_s2_flip"),
        *("--joint-head", "1:0", "--joint-head", "3:1", "-o", str(out)),
    ]
    score = subprocess.run(
        [sys.executable, "-m", "mibspec", "score", "causal-variable", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "SOURCE_DATE_EPOCH": "1748856600", "HF_HUB_OFFLINE": "1"},
        timeout=1800,
    )
    assert score.returncode == 0, score.stdout + score.stderr
    report = out / "report.json"
    (unit,) = _read(report)["claims"]["variables"][0]["units"]
    assert [s["heads"] for s in unit["joint_sites"]] == [[1]]  # 1.0 the location, 3.1 its joint site
    done, document = _parity(report, pyvene)
    assert done.returncode == 0, done.stderr[-3000:]
    assert document["ok"] is True
    assert document["not_compared"] == []
    rows = document["rows"]
    assert len(rows) == 3 * 2  # logits, effect and IIA for each counterfactual set
    assert [r["quantity"] for r in rows if not r["ok"]] == []
    for row in rows:
        assert unit["id"] in row["quantity"]
        if row["group"].startswith("intervention effect"):
            assert row["mibspec"] > 1e-2, row["quantity"]  # the joint write changed the logits
