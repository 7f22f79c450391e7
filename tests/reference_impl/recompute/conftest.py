"""What the recomputation tests share: a circuit report's claims written from a slow loop."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

WriteClaims = Callable[..., dict[str, Any]]


def write_slow_claims(
    folder: Path,
    report: dict[str, Any],
    values: Sequence[Sequence[float]],
    m_full: float,
    m_empty: float,
    *,
    full_circuit_is_one: bool = False,
) -> dict[str, Any]:
    """Claim what a slow loop computed and write the report to ``folder/report.json``.

    ``values`` holds each curve's faithfulness per point; CPR and CMD are computed from the
    points of the curve each ranks with (``settings.ranking``). With ``full_circuit_is_one``
    the point at k = 1 claims f = 1, as mib-2025 forces it. Returns the report's claims.
    """
    from mibspec.metrics.circuit import cmd, cpr

    claims: dict[str, Any] = report["claims"]
    claims["m_full"], claims["m_empty"] = m_full, m_empty
    for curve, curve_values in zip(claims["curves"], values, strict=True):
        for point, value in zip(curve["points"], curve_values, strict=True):
            point["faithfulness"] = 1.0 if full_circuit_is_one and point["k"] == 1.0 else value
    by_ranking = {curve["ranking"]: curve for curve in claims["curves"]}
    for metric, compute in (("cpr", cpr), ("cmd", cmd)):
        points = by_ranking[report["settings"]["ranking"][metric]]["points"]
        claims[metric]["value"] = compute([p["k"] for p in points], [p["faithfulness"] for p in points])
    (folder / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return claims


@pytest.fixture(scope="session")
def slow_claims() -> WriteClaims:
    """:func:`write_slow_claims`: ``slow_claims(folder, report, values, m_full, m_empty)``."""
    return write_slow_claims
