"""``mibspec export mib-submission``: a unit at every token is written as MIB names it.

The bundled IOI report's layer-0 units are moved to the position ``all`` (featurizer and
unit alike, the artifacts re-pinned); the export names their files ``...,Token:all)`` as MIB's
IOI submissions are named, and the import reads them back at ``all`` without the positions
file the export writes beside them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mibspec.exporters import export_mib_cv_submission
from mibspec.importers import import_mib_cv_submission

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "causal-variable-ioi"


def _at_every_token(folder: Path) -> Path:
    """The example with its layer-0 units at ``all``; the report's path."""
    shutil.copytree(EXAMPLE, folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    artifacts = {a["id"]: a for a in report["artifacts"]}
    for variable in report["claims"]["variables"]:
        variable["units"] = [u for u in variable["units"] if u["location"]["position"]["rule"] == "last"]
        for unit in variable["units"]:
            if unit["location"]["layer"] != 0:
                continue
            unit["location"]["position"] = {"rule": "all"}
            entry = artifacts[unit["featurizer"]]
            path = folder / entry["path"]
            featurizer = json.loads(path.read_text(encoding="utf-8"))
            featurizer["location"]["position"] = {"rule": "all"}
            data = json.dumps(featurizer, indent=2).encode()
            path.write_bytes(data)
            entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    path = folder / "report.json"
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


@pytest.mark.slow
def test_units_at_every_token_are_named_token_all_and_read_back(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    exported = export_mib_cv_submission([_at_every_token(tmp_path / "report")], tmp_path / "submission")
    assert exported.findings == []
    names = sorted(p.name for p in (tmp_path / "submission").rglob("*_indices"))
    assert "ResidualStream(Layer:0,Token:all)_indices" in names
    assert "ResidualStream(Layer:1,Token:last_token)_indices" in names
    positions = json.loads((tmp_path / "submission" / "token_positions.json").read_text(encoding="utf-8"))
    assert positions["all"] == {"rule": "all"}
    (tmp_path / "submission" / "token_positions.json").unlink()  # MIB's own folders have none
    imported = import_mib_cv_submission(tmp_path / "submission", tmp_path / "imported")
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in imported.written]
    at_all = [
        d["location"] for d in docs if d["extensions"]["org.mibspec:mib_unit"]["unit"].endswith("Token:all)")
    ]
    assert len(at_all) == 2  # output_token and output_position at layer 0
    assert all(loc["position"] == {"rule": "all"} and loc["layer"] == 0 for loc in at_all)
    # the other units' position, last_token, is the submission's to declare (I121)
    assert {f.code for f in imported.findings} == {"I121", "I122"}
