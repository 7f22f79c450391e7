"""``mibspec rules --coverage``: the requirement → rules / schema / reason table, and its check."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import CliRun


def test_coverage_table_lists_requirements_with_their_rules(mibspec_cli: CliRun) -> None:
    result = mibspec_cli("rules", "--coverage")
    assert result.returncode == 0, result.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in result.stdout.splitlines()[2:]}
    assert "C123" in rows["MB-8"]
    assert "R108, R109, R110" in rows["M-5"]


def test_coverage_json_and_check(mibspec_cli: CliRun) -> None:
    listed = mibspec_cli("rules", "--coverage", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert all(row["rules"] or row["schema"] or row["reason"] for row in rows)
    assert {"requirement", "file", "line", "rules", "schema", "reason"} == set(rows[0])
    checked = mibspec_cli("rules", "--coverage", "--check")
    assert checked.returncode == 0, checked.stderr


def test_check_without_coverage_is_a_usage_error(mibspec_cli: CliRun) -> None:
    assert mibspec_cli("rules", "--check").returncode == 2
    assert mibspec_cli("rules", "A103", "--coverage").returncode == 2
