"""The float64 arbiter of edge-score rows (``mibspec.parity.arbitrate_edge_scores``): a
float32 difference outside the tolerance is decided by both sides' float64 values."""

from __future__ import annotations

from typing import Any

import numpy as np

from mibspec.parity import ParityRow, arbitrate_edge_scores

TOL = 1e-5


def _row(public: np.ndarray, ours: np.ndarray, key: str = "EAP") -> ParityRow:
    diff = np.abs(public - ours)
    i = int(np.argmax(diff))
    scale = float(np.abs(public).max())
    return ParityRow(f"{key} edge scores", float(public[i]), float(ours[i]), True, 0.0, TOL, scale=scale)


def _case(
    public32: np.ndarray, ours32: np.ndarray, public64: np.ndarray, ours64: np.ndarray
) -> tuple[list[ParityRow], list[Any]]:
    rows = {"mib-2025": [_row(public32, ours32)]}
    asked: list[Any] = []

    def public_wide(keys: list[str]) -> dict[str, Any]:
        asked.append(("public", keys))
        return {"EAP": public64}

    def ours_wide(profile: str, keys: list[str]) -> dict[str, Any]:
        asked.append((profile, keys))
        return {"EAP": ours64}

    arbitrate_edge_scores(rows, {"EAP": public32}, {"mib-2025": {"EAP": ours32}}, public_wide, ours_wide)
    return rows["mib-2025"], asked


EXACT = np.linspace(-1.0, 1.0, 50)


def test_two_roundings_each_within_tolerance_are_decided_by_float64() -> None:
    """Each side 0.7 tolerance from the exact value, in opposite directions: 1.4 apart."""
    public32, ours32 = EXACT + 0.7 * TOL, EXACT - 0.7 * TOL
    rows, asked = _case(public32, ours32, EXACT, EXACT + 1e-12)
    assert asked == [("public", ["EAP"]), ("mib-2025", ["EAP"])]
    first, *arbiters = rows
    assert not first.ok
    assert not first.promised
    assert "float64" in first.note
    assert [r.quantity.split(": ")[1] for r in arbiters] == [
        "both sides in float64",
        "public code, float32 against its float64",
        "mibspec, float32 against its float64",
    ]
    assert all(r.promised and r.ok for r in arbiters)
    assert {r.group for r in arbiters} == {"EAP edge scores, float64 arbiter"}


def test_a_real_difference_stays_a_difference_in_float64() -> None:
    ours64 = EXACT.copy()
    ours64[7] += 5 * TOL  # one edge formed differently
    rows, _ = _case(EXACT, ours64, EXACT, ours64)
    both = next(r for r in rows if r.quantity.endswith("both sides in float64"))
    assert both.promised
    assert not both.ok


def test_a_side_that_rounds_worse_than_float32_allows_fails() -> None:
    public32 = EXACT + 3 * TOL  # far from its own float64 values
    rows, _ = _case(public32, EXACT, EXACT, EXACT)
    public_row = next(r for r in rows if "public code, float32" in r.quantity)
    assert public_row.promised
    assert not public_row.ok


def test_rows_within_tolerance_ask_for_nothing() -> None:
    rows, asked = _case(EXACT, EXACT + 0.5 * TOL, EXACT, EXACT)
    assert asked == []
    assert len(rows) == 1
    assert rows[0].promised
    assert rows[0].ok
