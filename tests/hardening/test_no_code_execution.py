"""Submitted code is never executed (SPEC.md A-9).

Python files with a side effect (each creates a marker file when imported) are placed
next to a report; after verification through the API, the console script and
``python -m mibspec``, no marker exists and no such module was imported. ``.pt`` files
are read with ``torch.load(..., weights_only=True)`` only, checked at run time (a
recording ``torch.load``) and statically over the source tree, as is
``trust_remote_code=False`` on every ``from_pretrained``. A pickle that would create a
marker file is refused by ``mibspec import eap-ig``, and model folders that ask for
remote code are refused by recomputation.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hardening_support import REPO

import mibspec

EXAMPLES = REPO / "examples"
#: Module names a submission could ship, including ones that shadow what mibspec imports.
PLANTED = (
    "featurizer",
    "__init__",
    "model",
    "modeling",
    "json",
    "re",
    "hashlib",
    "enum",
    "dataclasses",
    "click",
    "numpy",
    "jsonschema",
    "rich",
    "safetensors",
)


def plant(folder: Path, markers: Path) -> None:
    """Put a module that creates ``markers/<name>`` on import into ``folder`` for each name."""
    for name in PLANTED:
        marker = markers / name
        (folder / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'w').close()\nraise SystemExit('submitted code ran')\n", encoding="utf-8"
        )


def assert_nothing_ran(markers: Path) -> None:
    assert sorted(p.name for p in markers.iterdir()) == []


@pytest.fixture
def submission(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "submission"
    shutil.copytree(EXAMPLES / "causal_variable", folder)
    markers = tmp_path / "markers"
    markers.mkdir()
    plant(folder, markers)
    return folder, markers


def test_api_never_imports_submission_modules(submission: tuple[Path, Path]) -> None:
    folder, markers = submission
    before = set(sys.modules)
    result = mibspec.verify(folder / "report.json", recompute=False)
    assert result.valid, [(f.code, f.pointer) for f in result.findings]
    assert_nothing_ran(markers)
    for name in set(sys.modules) - before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        assert not module_file.startswith(str(folder)), name
    assert "featurizer" not in sys.modules


@pytest.mark.parametrize("command", ["script", "module"])
def test_cli_run_inside_the_submission_folder_imports_nothing_from_it(
    submission: tuple[Path, Path], command: str
) -> None:
    folder, markers = submission
    program = (
        [str(Path(sys.executable).parent / "mibspec")]
        if command == "script"
        else [sys.executable, "-m", "mibspec"]
    )
    done = subprocess.run(
        [*program, "verify", ".", "--no-recompute", "-f", "json"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["valid"] is True
    assert_nothing_ran(markers)


# --- pickles ---------------------------------------------------------------------------------------


class _Payload:
    """Unpickling this calls ``exec`` on code that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


CFG = {"n_layers": 1, "n_heads": 1, "parallel_attn_mlp": False, "d_model": 4}


@pytest.mark.slow
@pytest.mark.recompute
@pytest.mark.parametrize("container", ["pickle", "torch-zip"])
def test_a_pt_pickle_that_would_run_code_is_refused(tmp_path: Path, container: str) -> None:
    torch = pytest.importorskip("torch")
    marker = tmp_path / "MARKER"
    source = tmp_path / "graph.pt"
    payload = {"cfg": CFG, "edges_scores": _Payload(marker)}
    if container == "pickle":
        source.write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, source)
    assert not marker.exists()  # writing it ran nothing
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mibspec",
            "import",
            "eap-ig",
            str(source),
            "-o",
            str(tmp_path / "out"),
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    codes = {f["code"] for doc in json.loads(done.stdout)["documents"] for f in doc["findings"]}
    assert codes == {"I101"}
    assert not marker.exists()
    assert not (tmp_path / "out" / "circuit.json").exists()


@pytest.mark.recompute
def test_torch_load_is_called_with_weights_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from mibspec.importers import import_eap_ig
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    universe = GraphUniverse(GraphConfig(1, 1))
    source = tmp_path / "graph.pt"
    torch.save(
        {
            "cfg": CFG,
            "src_nodes": list(universe.forward_names),
            "dst_nodes": list(universe.backward_names),
            "edges_scores": torch.ones(universe.n_forward, universe.n_backward),
            "edges_in_graph": torch.zeros(universe.n_forward, universe.n_backward, dtype=torch.bool),
        },
        source,
    )
    calls: list[dict[str, Any]] = []
    real_load = torch.load

    def recording_load(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    result = import_eap_ig(source, tmp_path / "out")
    assert result.ok, [(f.code, f.message) for f in result.findings]
    assert calls, "the .pt file was not read through torch.load"
    assert all(call.get("weights_only") is True for call in calls), calls


# --- the source tree ---------------------------------------------------------------------------------


#: The project's own code (a virtual environment inside the checkout, as CI makes, is not).
_PROJECT_FOLDERS = (
    "src",
    "tests",
    "benchmarks",
    "examples",
    "conformance",
)


def _python_files() -> list[Path]:
    files = sorted(REPO.glob("*.py"))
    for folder in _PROJECT_FOLDERS:
        files += sorted(p for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _keyword(call: ast.Call, name: str) -> Any:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value.value if isinstance(keyword.value, ast.Constant) else keyword.value
    return None


@pytest.mark.slow
def test_static_every_load_is_safe() -> None:
    """Over every Python file of the repository: torch.load passes weights_only=True,
    from_pretrained passes trust_remote_code=False, numpy never allows pickles, and no
    pickle, marshal or joblib loader is called."""
    problems: list[str] = []
    files = _python_files()
    assert len(files) > 100
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            owner = (
                func.value.id
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                else None
            )
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if owner == "torch" and name == "load" and _keyword(node, "weights_only") is not True:
                problems.append(f"{where}: torch.load without weights_only=True")
            if name == "from_pretrained" and _keyword(node, "trust_remote_code") is not False:
                problems.append(f"{where}: from_pretrained without trust_remote_code=False")
            if (
                any(k.arg == "allow_pickle" for k in node.keywords)
                and _keyword(node, "allow_pickle") is not False
            ):
                problems.append(f"{where}: allow_pickle is not False")
            if owner in ("pickle", "marshal", "joblib", "dill") and name in ("load", "loads", "Unpickler"):
                problems.append(f"{where}: {owner}.{name}")
    assert problems == []


def test_static_no_eval_or_exec_in_the_packages() -> None:
    problems = []
    for path in _python_files():
        if path.relative_to(REPO).parts[0] != "src":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("eval", "exec")
            ):
                problems.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert problems == []


# --- model folders asking for remote code ------------------------------------------------------------


@pytest.mark.recompute
@pytest.mark.parametrize(
    "request_code",
    [
        {"auto_map": {"AutoModelForCausalLM": "modeling.Model", "AutoConfig": "modeling.Config"}},
        {"trust_remote_code": True},
    ],
    ids=["auto_map", "trust_remote_code"],
)
def test_a_model_folder_asking_for_remote_code_is_refused(
    tmp_path: Path, request_code: dict[str, Any]
) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "report"
    shutil.copytree(EXAMPLES / "circuit-ioi", report)
    models = tmp_path / "models"
    shutil.copytree(EXAMPLES / "models" / "tiny-gpt2", models / "tiny-gpt2")
    markers = tmp_path / "markers"
    markers.mkdir()
    plant(models / "tiny-gpt2", markers)
    plant(report, markers)
    config = models / "tiny-gpt2" / "config.json"
    config.write_text(
        json.dumps({**json.loads(config.read_text(encoding="utf-8")), **request_code}, indent=2)
    )
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    data["model"]["files"]["config.json"] = hashlib.sha256(config.read_bytes()).hexdigest()
    (report / "report.json").write_text(json.dumps(data, indent=2), encoding="utf-8")

    result = mibspec.verify(report / "report.json", model_roots=[models])
    [main] = [doc for doc in result.documents if doc.referenced_by is None]
    assert main.stages[mibspec.validator.Stage.RULES][0].value == "passed"
    assert main.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "failed"
    refusals = [f for f in main.findings if f.code == "R104"]
    assert refusals
    assert all(f.pointer.startswith("/model") for f in refusals)
    assert any("remote code" in f.message for f in refusals), [f.message for f in refusals]
    assert_nothing_ran(markers)
    assert "modeling" not in sys.modules
