"""conformance/README.md's coverage table counts the cases on disk.

Independent anchor: the case folders (each holds an expected.json) are counted here, by
kind, verdict and, for reports, the track their id starts with.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from mibspec.core.tracks import track_of_case

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "conformance" / "v1"

ROW = re.compile(
    r"^\| `(?P<kind>[a-z_]+)`(?:, track `(?P<track>[a-z_]+)`| \(parsing\))?"
    r" \| (?P<valid>\d+) \| (?P<invalid>\d+) \|$"
)


def _on_disk() -> Counter[tuple[str, str | None, str]]:
    counts: Counter[tuple[str, str | None, str]] = Counter()
    for expected in SUITE.glob("*/*/*/expected.json"):
        case = expected.parent
        kind, verdict = case.parent.parent.name, case.parent.name
        track = None
        if kind == "report":  # the id starts with the track (an invalid case may declare a wrong one)
            track = track_of_case(case.name)
        counts[(kind, track, verdict)] += 1
    return counts


def test_the_coverage_table_counts_the_cases_on_disk() -> None:
    text = (REPO / "conformance" / "README.md").read_text(encoding="utf-8")
    section = text.split("## Coverage", 1)[1].split("\n## ", 1)[0]
    table: Counter[tuple[str, str | None, str]] = Counter()
    rows = [m for m in map(ROW.match, section.splitlines()) if m]
    assert rows, "no coverage table found"
    for row in rows:
        table[(row["kind"], row["track"], "valid")] += int(row["valid"])
        table[(row["kind"], row["track"], "invalid")] += int(row["invalid"])
    assert +table == _on_disk()
