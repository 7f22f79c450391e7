"""IOI's ``Token:all`` units of a MIB causal-variable submission folder.

MIB's IOI task evaluates attention heads at every token (its ``get_token_positions`` returns
one position, ``all``); a submission's unit files are named after it
(``AttentionHead(Layer:l,Head:h,Token:all)_indices``). The units here are indices-only (the
identity of the head's 64 values, the public code's default), so no ``.pt`` file is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mibspec.importers import import_mib_cv_submission

CELL = "ioi_task_GPT2LMHeadModel_output_token"


def _submission(tmp_path: Path, *unit_ids: str) -> Path:
    cell = tmp_path / "submission" / CELL
    cell.mkdir(parents=True)
    for unit_id in unit_ids:
        (cell / f"{unit_id}_indices").write_text("[0, 5, 63]", encoding="utf-8")
    return tmp_path / "submission"


def _positions(tmp_path: Path, rules: Any) -> Path:
    path = tmp_path / "positions.json"
    path.write_text(json.dumps(rules, indent=2), encoding="utf-8")
    return path


def _locations(written: list[Path]) -> dict[str, dict[str, Any]]:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in written if p.suffix == ".json"]
    return {d["extensions"]["org.mibspec:mib_unit"]["unit"]: d["location"] for d in docs}


def test_token_all_needs_no_declared_position(tmp_path: Path) -> None:
    """``all`` is read as IOI's position without a mapping; a name MIB's task code does not
    define still needs one (I121, summarised by I122)."""
    source = _submission(
        tmp_path,
        "AttentionHead(Layer:9,Head:6,Token:all)",
        "AttentionHead(Layer-10,Head-7,Token-all)",
        "AttentionHead(Layer:9,Head:9,Token:s2_name)",
    )
    result = import_mib_cv_submission(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [
        ("I121", f"/{CELL}/AttentionHead(Layer:9,Head:9,Token:s2_name)"),
        ("I122", ""),
    ]
    locations = _locations(result.written)
    assert locations["AttentionHead(Layer:9,Head:6,Token:all)"] == {
        "layer": 9,
        "component": "attention_heads",
        "position": {"rule": "all"},
        "heads": [6],
    }
    assert locations["AttentionHead(Layer-10,Head-7,Token-all)"]["position"] == {"rule": "all"}
    assert locations["AttentionHead(Layer:9,Head:9,Token:s2_name)"]["position"] == {
        "rule": "named",
        "name": "s2_name",
    }
    assert "1 of 3 unit(s) lack a declared token position" in result.findings[1].message


def test_a_declared_mapping_of_all_wins(tmp_path: Path) -> None:
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions(tmp_path, {"all": {"rule": "last"}})
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    assert result.findings == []
    assert _locations(result.written)["AttentionHead(Layer:9,Head:6,Token:all)"]["position"] == {
        "rule": "last"
    }


def test_all_mixed_with_an_index_is_refused_where_the_positions_file_says_it(tmp_path: Path) -> None:
    """Every token and token 3 at once: which one a unit reads would be a guess. The mapping is
    refused at its place in the positions file and nothing is written."""
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions(tmp_path, {"last_token": {"rule": "last"}, "all": {"rule": "all", "index": 3}})
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    [finding] = result.findings
    assert (finding.code, finding.pointer) == ("I123", "/all/index")
    assert finding.line is not None
    assert '"index": 3' in positions.read_text(encoding="utf-8").splitlines()[finding.line - 1]
    assert "'index' does not apply to rule 'all'" in finding.message
    assert not result.written
    assert not (tmp_path / "out").exists()


def test_a_list_of_positions_for_all_is_refused(tmp_path: Path) -> None:
    source = _submission(tmp_path, "AttentionHead(Layer:9,Head:6,Token:all)")
    positions = _positions(tmp_path, {"all": [{"rule": "all"}, {"rule": "index", "index": 3}]})
    result = import_mib_cv_submission(source, tmp_path / "out", positions=positions)
    [finding] = result.findings
    assert (finding.code, finding.pointer, finding.line) == ("I123", "/all", 2)
    assert "is not a token-position rule" in finding.message
    assert not result.written


def test_indices_beyond_a_heads_width_at_every_token_are_refused(tmp_path: Path) -> None:
    """An indices-only unit is the identity of its site: index 64 does not exist in a GPT-2
    head of 64 values, so the unit's real featurizer is missing (I119)."""
    source = _submission(tmp_path)
    unit = "AttentionHead(Layer:9,Head:6,Token:all)"
    (source / CELL / f"{unit}_indices").write_text("[3, 64]", encoding="utf-8")
    result = import_mib_cv_submission(source, tmp_path / "out")
    assert [(f.code, f.pointer) for f in result.findings] == [("I119", f"/{CELL}/{unit}_indices")]
    assert "beyond the 64 values of the site" in result.findings[0].message
    assert not result.written
