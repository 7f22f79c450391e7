"""What recomputation needs a report to declare (numpy- and torch-free: the validator's
rules read it too)."""

from __future__ import annotations

from typing import Any

__all__ = ["missing_declarations"]


def missing_declarations(report: dict[str, Any]) -> list[tuple[str, str]]:
    """``(pointer, detail)`` for every declaration recomputation needs and the report lacks.

    Reports imported from result files record scores, not the means to recompute them: no
    dataset, no featurizers, positions known only by name. All of it is reported at once, one
    finding per kind of gap and variable, so that the reader sees the whole list. The rules
    stage reports them as warnings (V110), the recompute stage as errors (R104).
    """
    missing = []
    if report["task"].get("dataset") is None:
        missing.append(("/task/dataset", "the report declares no counterfactual dataset to recompute on"))
    for v, variable in enumerate(report["claims"]["variables"]):
        base = f"/claims/variables/{v}/units"
        units = variable["units"]
        bare = [u for u, unit in enumerate(units) if unit.get("featurizer") is None]
        if bare:
            missing.append(
                (
                    f"{base}/{bare[0]}",
                    f"{len(bare)} of {len(units)} units of {variable['name']!r} declare no featurizer "
                    f"(first: unit {units[bare[0]]['id']!r})",
                )
            )
        named = [u for u, unit in enumerate(units) if unit["location"]["position"].get("rule") == "named"]
        if named:
            names = sorted({str(units[u]["location"]["position"].get("name")) for u in named})
            missing.append(
                (
                    f"{base}/{named[0]}/location/position",
                    f"{len(named)} of {len(units)} units of {variable['name']!r} sit at positions known "
                    f"only by name ({', '.join(names)}): declare each as a rule",
                )
            )
    return missing
