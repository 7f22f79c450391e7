"""The node-tensor rule on circuit documents whose membership tensor has a malformed shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import mibspec

CASE = Path(__file__).parents[3] / "conformance" / "v1" / "circuit" / "valid" / "eap-ig-node-scores-unscored"


@pytest.mark.parametrize("shape", [[], [3]])
def test_node_membership_beside_a_membership_of_any_shape_is_a_finding_not_a_crash(
    tmp_path: Path, shape: list[int]
) -> None:
    folder = tmp_path / "case"
    shutil.copytree(CASE, folder)
    path = folder / "document.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert "node_membership" in doc
    doc["membership"]["shape"] = shape
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = mibspec.verify(path, recompute=False)
    [document] = result.documents
    assert document.internal_error is None
    assert not result.valid
    assert any(f.code == "A110" for f in result.findings), [str(f) for f in result.findings]
