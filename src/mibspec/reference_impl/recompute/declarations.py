"""What recomputation needs a report to declare (numpy- and torch-free: the validator's
rules and its stage without recomputation read it too)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from mibspec.core.tracks import TRACKS

__all__ = [
    "causal_bench_gaps",
    "causal_variable_gaps",
    "circuit_gaps",
    "counterfactual_type_choice",
    "dataset_gap",
    "missing_declarations",
    "recompute_gaps",
    "saliency_gaps",
]

#: What a report given no dataset document can do next (both commands read a hub dataset
#: from the local Hugging Face cache).
_NEXT_STEP = (
    "write a counterfactual-dataset document with `mibspec import mib-dataset {hub} -o DIR` and import "
    "the report again with `--dataset DIR/<file>.json`, or run `mibspec verify-submission "
    "SUBMISSION --dataset {hub} -o OUT`, which does both and recomputes"
)


def dataset_gap(task: Mapping[str, Any], what: str = "counterfactual dataset") -> str | None:
    """Why recomputation cannot read the task's rows, naming the next step; ``None`` when
    ``task.dataset`` names a dataset document.

    A report imported with a hub dataset (``--dataset ID@REV``) records it as
    ``task.hub_dataset``: a pin, not rows. Recomputation reads rows from a dataset document
    only, so the message says what the report declares and how to turn it into one.
    """
    if task.get("dataset") is not None:
        return None
    hub = task.get("hub_dataset")
    if isinstance(hub, Mapping) and hub.get("id") and hub.get("revision"):
        pinned = f"{hub['id']}@{hub['revision']}"
        return (
            f"the report declares its dataset only as the hub dataset {pinned} (task.hub_dataset), a pin "
            f"and not rows: recomputation reads the rows of a {what} document named by task.dataset. "
            "Next: " + _NEXT_STEP.format(hub=pinned)
        )
    return (
        f"the report declares no dataset (task.dataset names no {what} document) to recompute on. "
        "Next: " + _NEXT_STEP.format(hub="ID@REV")
    )


def _lacks_featurizer(unit: Mapping[str, Any]) -> bool:
    """Whether a unit's location or one of its joint sites (MV-10) has no featurizer."""
    from mibspec.metrics.featurizers import unit_sites  # numpy: only when a report is read

    return any(site.featurizer is None for site in unit_sites(unit))


def missing_declarations(report: dict[str, Any]) -> list[tuple[str, str]]:
    """``(pointer, detail)`` for every declaration recomputation needs and the report lacks.

    Reports imported from result files record scores, not the means to recompute them: no
    dataset, no featurizers, positions known only by name. All of it is reported at once, one
    finding per kind of gap and variable, so that the reader sees the whole list. The rules
    stage reports them as warnings (V110), the recompute stage as errors (R104).
    """
    missing = []
    gap = dataset_gap(report["task"])
    if gap is not None:
        missing.append(("/task/dataset", gap))
    for v, variable in enumerate(report["claims"]["variables"]):
        base = f"/claims/variables/{v}/units"
        units = variable["units"]
        bare = [u for u, unit in enumerate(units) if _lacks_featurizer(unit)]
        if bare:
            missing.append(
                (
                    f"{base}/{bare[0]}",
                    f"{len(bare)} of {len(units)} units of {variable['name']!r} declare no featurizer "
                    f"for every site (first: unit {units[bare[0]]['id']!r})",
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


def counterfactual_type_choice(task: Mapping[str, Any], profile: Any) -> str | None:
    """The report's ``task.counterfactual_type``, else the one its profile declares for the task
    (``counterfactual_types``, PR-3), else ``None``."""
    declared = task.get("counterfactual_type")
    if declared is not None:
        return str(declared)
    chosen = dict(profile.get("counterfactual_types") or {}).get(task.get("name"))
    return None if chosen is None else str(chosen)


def circuit_gaps(report: dict[str, Any], profile: Any) -> list[tuple[str, str]]:
    """What keeps a circuit report from being recomputed, in the order recomputation meets it."""
    settings, task = report["settings"], report["task"]
    gaps = []
    if settings.get("metric", "logit_difference") != "logit_difference":
        gaps.append(("/settings/metric", "only the logit_difference metric can be recomputed"))
    if settings.get("padding_side", "right") != "right":
        gaps.append(("/settings/padding_side", "only right padding can be recomputed"))
    if settings.get("ablation", "counterfactual") == "optimal":
        gaps.append(("/settings/ablation", "optimal ablation values are not declared in the report"))
    gap = dataset_gap(task)
    if gap is not None:
        gaps.append(("/task/dataset", gap))
    if counterfactual_type_choice(task, profile) is None:
        gaps.append(
            (
                "/task/counterfactual_type",
                "the report declares no counterfactual type, and its profile none for task "
                f"{task.get('name')!r}",
            )
        )
    if report["claims"].get("circuit") is None:
        gaps.append(("/claims/circuit", "the report declares no circuit document"))
    return gaps


def saliency_gaps(report: dict[str, Any], profile: Any) -> list[tuple[str, str]]:
    """A saliency report needs its shortcut dataset document."""
    if report["task"].get("dataset") is None:
        return [("/task/dataset", "the report declares no shortcut dataset to recompute on")]
    return []


def causal_bench_gaps(report: dict[str, Any], profile: Any) -> list[tuple[str, str]]:
    """A transformer behaviour needs the model, its dataset and counterfactual type; a planted
    one is built from the report alone."""
    if report.get("behaviour", {}).get("kind") != "transformer":
        return []
    gaps = []
    if report.get("model") is None:
        gaps.append(("/behaviour", "a transformer behaviour needs the report's model"))
    gap = dataset_gap(report["task"])
    if gap is not None:
        gaps.append(("/task/dataset", gap))
    if report["task"].get("counterfactual_type") is None:
        gaps.append(("/task/counterfactual_type", "a transformer behaviour needs task.counterfactual_type"))
    return gaps


def causal_variable_gaps(report: dict[str, Any], profile: Any) -> list[tuple[str, str]]:
    """:func:`missing_declarations` (the rules stage reports them as V110)."""
    return missing_declarations(report)


def recompute_gaps(report: dict[str, Any], profile: Any) -> list[tuple[str, str]]:
    """``(pointer, detail)`` for every declaration, read from the report alone, without which
    its recomputation cannot run (R104 when it is asked for; R112 without it). Whatever needs
    the model or the artifacts opened (a model not found, a row that does not tokenize) is
    found only by recomputing."""
    track = TRACKS.get(str(report.get("track")))
    if track is None:
        return []
    module, name = track.gaps.split(":")
    gaps: Callable[[dict[str, Any], Any], list[tuple[str, str]]] = getattr(
        importlib.import_module(module), name
    )
    return gaps(report, profile)
