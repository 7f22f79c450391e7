"""Import MIB causal-variable-track result files as causal-variable reports.

A result file holds one method's scores on one model and task, per counterfactual
dataset and model unit::

    {"method_name": ..., "model_name": ..., "task_name": ...,
     "dataset": {"<counterfactual>_test": {"model_unit": {
         "[[AtomicModelUnit(id='ResidualStream(Layer-3,Token-last_token)')]]": {
             "metadata": {"layer": 3, "position": "last_token"},
             "<variable>": {"average_score": 0.81, ...}}}}}}

Unit ids come in both forms the public code writes, ``ResidualStream(Layer-3,Token-last_token)``
and ``ResidualStream(Layer:3,Token:last_token)``, with or without ``metadata``. Joint targets
appear as their variable names joined by ``-``. The files record scores
only: not the featurizers (the public evaluator imports them as submitted Python), not the
token positions (functions of the submission, known here by name), not the dataset rows,
not the model revision. The imported report says so and keeps every unit's scores; the
aggregates (per layer, Average, best) are computed by the reference metric
(``aggregate_scores``), so that C112 checks exactly what the leaderboard would show. V110
and A111 then list what recomputation would need.

Conventions pinned here (SPEC.md CV-7, MV-8): ``ResidualStream`` units are the residual
stream leaving their layer (``residual_post``), ``AttentionHead`` units the listed heads'
outputs, ``MLP`` units the MLP output; the position ``last_token`` is the rule ``last``,
IOI's ``all`` the rule ``all`` (every token), any other position name is ``named``. A unit
joining model units of several layers at one position (MIB's IOI evaluation scores all the
submitted heads as one such unit) is one joint unit (spec 1.2, CV-8): one site per model unit
(one head each), the lowest (layer, head) its location and the others its ``joint_sites`` in
that order, whatever its ``metadata`` says (MIB's names the first listed head's layer only).
Heads of one layer scored together stay one location listing them, as in spec 1.1. A unit
joining several positions or components is refused (I101). IOI is scored by squared error,
lower is better: the best of an IOI variable is the minimum over layers (the public aggregator
takes the maximum; the report's description says which it reports).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mibspec.core.folders import safe_name
from mibspec.core.integers import parse_int
from mibspec.core.mib_causal import MIB_POSITION_RULES, UNIT_COMPONENTS, parse_unit_id, result_key_units
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.version import __version__
from mibspec.documents import CausalVariableReport
from mibspec.documents.common import Method, Provenance, ToolInfo
from mibspec.documents.kinds import Location
from mibspec.documents.report import (
    CausalVariableClaims,
    CausalVariableSettings,
    JointSite,
    TaskRef,
    UnitScore,
    VariableClaims,
)

from ._options import ImportOptions, mib_model
from .eap_ig import ImportResult, _MalformedError
from .mib_results import import_reports, source_created

__all__ = [
    "CAUSAL_MODELS",
    "CausalResults",
    "hub_id",
    "import_mib_causal_results",
    "read_causal_results",
    "variable_claims",
]

#: MIB model names (hub ids, short ids and class names) → (hub id, architecture, config).
_GPT2 = ("gpt2", "GPT2LMHeadModel", {"n_layers": 12, "n_heads": 12, "d_model": 768, "vocab_size": 50257})
_QWEN = (
    "Qwen/Qwen2.5-0.5B",
    "Qwen2ForCausalLM",
    {"n_layers": 24, "n_heads": 14, "d_model": 896, "n_kv_heads": 2, "vocab_size": 151936},
)
_GEMMA = (
    "google/gemma-2-2b",
    "Gemma2ForCausalLM",
    {"n_layers": 26, "n_heads": 8, "d_model": 2304, "n_kv_heads": 4, "vocab_size": 256000},
)
_LLAMA = (
    "meta-llama/Llama-3.1-8B",
    "LlamaForCausalLM",
    {"n_layers": 32, "n_heads": 32, "d_model": 4096, "n_kv_heads": 8, "vocab_size": 128256},
)
CAUSAL_MODELS: dict[str, tuple[str, str, dict[str, int]]] = {
    **dict.fromkeys(("gpt2", "GPT2LMHeadModel", "GPT2Model"), _GPT2),
    **dict.fromkeys(("qwen2.5", "Qwen/Qwen2.5-0.5B", "Qwen2ForCausalLM"), _QWEN),
    **dict.fromkeys(("gemma2", "google/gemma-2-2b", "Gemma2ForCausalLM"), _GEMMA),
    **dict.fromkeys(("llama3", "meta-llama/Llama-3.1-8B", "LlamaForCausalLM"), _LLAMA),
}


def hub_id(model: str) -> str:
    """The hub repository of a MIB model name (``qwen2.5`` → ``Qwen/Qwen2.5-0.5B``); any other
    name as it is.

    >>> hub_id("gemma2"), hub_id("org/model")
    ('google/gemma-2-2b', 'org/model')
    """
    return CAUSAL_MODELS[model][0] if model in CAUSAL_MODELS else model


#: Position names read as rules: the last token, and MIB's (IOI's ``all``, every token).
_POSITION_RULES = {"last_token": {"rule": "last"}, "last": {"rule": "last"}, **MIB_POSITION_RULES}
_RESERVED = {"metadata", "feature_indices"}


def import_mib_causal_results(
    source: Path | Sequence[Path], out_dir: Path, options: ImportOptions | None = None
) -> ImportResult:
    """Write ``out_dir/<task>_<model>_<method>_<variable>/report.json`` for each result file
    ``source`` (one per file; a file scoring several variables names each, in order).

    MIB writes one file per variable and names every method ``submission``: the variable is
    what tells two files of a run apart, so it is part of the name. Two files that would be
    written under one name are refused (I126) and nothing is written.
    """
    return import_reports(source, out_dir, _reports, options)


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _MalformedError("I101", f"/{key}" if key in data else "", detail=f"missing {key} (a string)")
    return value


@dataclass(frozen=True)
class CausalResults:
    """A MIB causal-variable result file, read: its names and its unit scores regrouped as
    variable → unit key → ``{"location": ..., "scores": {counterfactual set: value}}``, with
    ``"joint_sites"`` (layer, component, heads) for a unit across layers."""

    method: str
    model_name: str
    task: str
    variables: dict[str, dict[str, dict[str, Any]]]

    @property
    def ioi(self) -> bool:
        """IOI is scored by squared error (lower is better), the other tasks by IIA."""
        return "ioi" in self.task.lower()


def read_causal_results(data: Any, config: Mapping[str, int] | None = None) -> CausalResults:
    """The result file ``data`` (parsed JSON) read and checked; unit layers and heads are
    checked against ``config`` (``n_layers``, ``n_heads``), else against the MIB model the
    file names.

    Raises:
        _MalformedError: the file does not have the format (I101) or names an unknown MIB
            model while ``config`` is None (I102); the pointer says where.
    """
    if not isinstance(data, dict) or not isinstance(data.get("dataset"), dict) or not data["dataset"]:
        raise _MalformedError(
            "I101", "", detail="a MIB causal-variable result file is an object with a non-empty 'dataset'"
        )
    method, model_name, task = (_text(data, k) for k in ("method_name", "model_name", "task_name"))
    if config is None:
        if model_name not in CAUSAL_MODELS:
            known = ", ".join(sorted({v[0] for v in CAUSAL_MODELS.values()}))
            raise _MalformedError(
                "I102", "/model_name", detail=f"unknown MIB model {model_name!r}; known: {known}"
            )
        config = CAUSAL_MODELS[model_name][2]
    return CausalResults(method, model_name, task, _unit_scores(data["dataset"], config))


def _reports(data: Any, source: Path) -> Iterator[tuple[str, CausalVariableReport, str]]:
    results = read_causal_results(data)
    method, model_name, task, ioi = results.method, results.model_name, results.task, results.ioi
    hub_id, architecture, config = CAUSAL_MODELS[model_name]
    variables = results.variables
    claims = [variable_claims(name, variables[name], ioi) for name in sorted(variables)]
    scoring = (
        "IOI is scored by squared error, lower is better: per layer and best take the minimum "
        "(the public aggregator takes the maximum)."
        if ioi
        else "Scores are interchange-intervention accuracies (substring checker, as in the public code)."
    )
    report = CausalVariableReport(
        profile="mib-2025",
        title=f"{method} on {task} ({model_name}), imported from MIB results",
        description=(
            f"Imported from {source.name} by mibspec {__version__}. The result file records scores per "
            "counterfactual dataset and model unit only: the featurizers, the token-position functions, "
            "the dataset rows and the model revision are absent, so the scores cannot be recomputed "
            "(V110 and A111 list what is missing). Per layer, Average and best were computed from the "
            f"unit scores as the MIB leaderboard aggregates them. {scoring}"
        ),
        method=Method(name=method),
        task=TaskRef(name=task),
        model=mib_model(
            {"source": "hub", "id": hub_id, "architecture": architecture, "config": config}, "causal_variable"
        ),
        settings=CausalVariableSettings(checker="substring"),
        claims=CausalVariableClaims(variables=claims),
        provenance=Provenance(
            tool=ToolInfo(name="mibspec", version=__version__),
            created=source_created(source),
            command=f"mibspec import mib-causal-results {source.name}",
        ),
    )
    yield safe_name(task, model_name, method, *sorted(variables)), report, ""


def _unit_scores(dataset: dict[str, Any], config: Mapping[str, int]) -> dict[str, dict[str, dict[str, Any]]]:
    """The file's scores regrouped: variable → unit key → {"location": ..., "scores":
    {counterfactual: value}} (and "joint_sites" for a joint unit); each unit is placed the same
    in every counterfactual set."""
    variables: dict[str, dict[str, dict[str, Any]]] = {}
    for cf, block in dataset.items():
        pointer = f"/dataset/{escape_pointer_token(cf)}"
        units = block.get("model_unit") if isinstance(block, dict) else None
        if not isinstance(units, dict) or not units:
            raise _MalformedError(
                "I101", pointer, detail="each counterfactual dataset needs a 'model_unit' object"
            )
        for key, entry in units.items():
            upointer = f"{pointer}/model_unit/{escape_pointer_token(key)}"
            if not isinstance(entry, dict):
                raise _MalformedError("I101", upointer, detail="a model unit's results must be an object")
            placed = _placement(key, entry.get("metadata"), upointer, config)
            scored = False
            for name, result in entry.items():
                if name in _RESERVED or not isinstance(result, dict) or "average_score" not in result:
                    continue
                score = result["average_score"]
                if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                    raise _MalformedError(
                        "I101",
                        f"{upointer}/{escape_pointer_token(name)}/average_score",
                        detail="a score is a finite number",
                    )
                unit = variables.setdefault(name, {}).setdefault(key, {**placed, "scores": {}})
                if {k: v for k, v in unit.items() if k != "scores"} != placed:
                    raise _MalformedError(
                        "I101",
                        f"{upointer}/metadata",
                        detail=f"unit {_cut(key, 120)} has another location in another set",
                    )
                unit["scores"][cf] = float(score)
                scored = True
            if not scored:
                raise _MalformedError(
                    "I101", upointer, detail="a model unit holds no variable with an 'average_score'"
                )
    return variables


def variable_claims(
    name: str,
    units: Mapping[str, Mapping[str, Any]],
    ioi: bool,
    featurizers: Mapping[str, str] | None = None,
) -> VariableClaims:
    """One variable's claims: its units' scores (by layer, then id) and the leaderboard's
    aggregates of them (per layer, Average, best). ``units`` maps a unit id to its
    ``location``, ``scores`` and, for a joint unit, ``joint_sites`` (as :class:`CausalResults`
    holds them; a site may name its ``featurizer`` artifact); ``featurizers``, where known, maps
    a unit id to the artifact id of its location's featurizer.

    Raises:
        _MalformedError: a unit is scored on some counterfactual sets only (I101).
    """
    from mibspec.metrics.causal_variable import Better, CellKey, aggregate_scores

    table: dict[CellKey, float] = {
        (cf, u["location"]["layer"], key): v for key, u in units.items() for cf, v in u["scores"].items()
    }
    better: Better = "lower" if ioi else "higher"
    try:
        aggregate = aggregate_scores(table, better=better)
    except ValueError as exc:  # a unit scored on some counterfactual sets only
        raise _MalformedError("I101", "/dataset", detail=f"variable {name!r}: {exc}") from exc
    return VariableClaims(
        name=name,
        metric="mse" if ioi else "iia",
        better=better,
        units=[
            _unit_score(key, u, (featurizers or {}).get(key))
            for key, u in sorted(units.items(), key=lambda item: (item[1]["location"]["layer"], item[0]))
        ],
        per_layer={str(layer): value for layer, value in sorted(aggregate.per_layer.items())},
        average=aggregate.average,
        best=aggregate.best,
    )


def _unit_score(key: str, unit: Mapping[str, Any], featurizer: str | None) -> UnitScore:
    """A unit's scores; its featurizer set only where known (an unset one is left out of the
    document, where an explicit null would not be)."""
    score = UnitScore(
        id=key,
        location=Location.model_validate(unit["location"]),
        scores=dict(sorted(unit["scores"].items())),
    )
    if unit.get("joint_sites"):
        sites = [JointSite.model_validate(site) for site in unit["joint_sites"]]
        score = score.model_copy(update={"joint_sites": sites})
    return score if featurizer is None else score.model_copy(update={"featurizer": featurizer})


def _cut(text: str, width: int = 40) -> str:
    """``repr(text)`` cut to about ``width`` characters (a 5,000-digit layer is not repeated)."""
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def _placement(key: str, metadata: Any, pointer: str, config: Mapping[str, int]) -> dict[str, Any]:
    """Where a unit key such as ``[[AtomicModelUnit(id='AttentionHead(Layer-3,Head-5,
    Token-last_token)')]]`` intervenes: ``{"location": ...}``, and ``"joint_sites"`` when the key
    joins model units of several layers (CV-7, CV-8).

    A unit of one layer takes the layer and position of ``metadata`` where given (heads of one
    layer scored together stay one location listing them, as in spec 1.1). A unit across
    layers is a joint unit of one site per model unit, whatever ``metadata`` names: MIB's
    names the first listed head's layer only.
    """
    atoms = result_key_units(key)
    parsed = []
    for atom in atoms:
        found = parse_unit_id(atom)
        if found is None or found[0] not in UNIT_COMPONENTS:
            raise _MalformedError(
                "I101",
                pointer,
                detail=f"unit {_cut(atom, 120)} is not one of "
                f"{', '.join(f'{k}(...)' for k in UNIT_COMPONENTS)}",
            )
        parsed.append(found)
    kinds = {kind for kind, _ in parsed}
    layers = {params["Layer"] for _, params in parsed if "Layer" in params}
    positions = {params["Token"] for _, params in parsed if "Token" in params}
    if len(positions) > 1 or (len(layers) > 1 and len(kinds) > 1):
        raise _MalformedError(
            "I101",
            pointer,
            detail=f"unit {_cut(key, 120)} joins model units of layers {_cut(', '.join(sorted(layers)))} "
            f"at positions {_cut(', '.join(sorted(positions)))} ({', '.join(sorted(kinds))}); a joint "
            "unit is imported only of model units of one component at one position",
        )
    if len(layers) > 1:
        return _joint(key, parsed, pointer, config)
    return {"location": _location(key, parsed, metadata, pointer, config)}


def _joint(
    key: str, atoms: list[tuple[str, dict[str, str]]], pointer: str, config: Mapping[str, int]
) -> dict[str, Any]:
    """A unit across layers: one site per model unit (one head each), sorted by layer and head;
    the first is the location, the others its joint sites (MV-10)."""
    sites = []
    for kind, params in atoms:
        needed = ("Layer", "Token", "Head") if kind == "AttentionHead" else ("Layer", "Token")
        if any(name not in params for name in needed):
            raise _MalformedError(
                "I101",
                pointer,
                detail=f"unit {_cut(key, 120)} joins model units of several layers; each of them must "
                f"name its {', '.join(needed).lower()} ({kind}({_cut(','.join(params))}) does not)",
            )
        site: dict[str, Any] = {
            "layer": _layer(key, params["Layer"], pointer, config),
            "component": UNIT_COMPONENTS[kind],
        }
        if kind == "AttentionHead":
            site["heads"] = _heads(key, [params["Head"]], pointer, config)
        sites.append(site)
    sites.sort(key=lambda s: (s["layer"], s.get("heads") or []))
    [position] = {params["Token"] for _, params in atoms}
    location = {**sites[0], "position": _position_rule(position)}
    return {"location": location, "joint_sites": sites[1:]}


def _layer(key: str, text: str, pointer: str, config: Mapping[str, int]) -> int:
    layer = parse_int(text)
    if layer is None or layer >= config["n_layers"]:
        raise _MalformedError(
            "I101", pointer, detail=f"unit {_cut(key, 120)}: layer {_cut(text)} is not in the model"
        )
    return layer


def _heads(key: str, heads: list[str], pointer: str, config: Mapping[str, int]) -> list[int]:
    numbers = [parse_int(h) for h in heads]
    in_model = [h for h in numbers if h is not None and h < config["n_heads"]]
    if not heads or len(in_model) != len(heads):
        raise _MalformedError(
            "I101",
            pointer,
            detail=f"unit {_cut(key, 120)}: heads {_cut(', '.join(heads))} are not in the model",
        )
    return in_model


def _position_rule(position: str) -> dict[str, Any]:
    rule = _POSITION_RULES.get(position)
    return dict(rule) if rule is not None else {"rule": "named", "name": position}


def _location(
    key: str,
    atoms: list[tuple[str, dict[str, str]]],
    metadata: Any,
    pointer: str,
    config: Mapping[str, int],
) -> dict[str, Any]:
    """The ``Location`` of a unit of one layer, with the layer and position of ``metadata``
    taking precedence."""
    kinds = {kind for kind, _ in atoms}
    layers = {params["Layer"] for _, params in atoms if "Layer" in params}
    positions = {params["Token"] for _, params in atoms if "Token" in params}
    heads = [params["Head"] for _, params in atoms if "Head" in params]
    meta = metadata if isinstance(metadata, dict) else {}
    if meta.get("layer") is not None:
        layers = {str(meta["layer"])}
    if isinstance(meta.get("position"), str):
        positions = {meta["position"]}
    if not heads and meta.get("head") is not None:
        heads = [str(meta["head"])]
    if len(kinds) != 1 or len(layers) != 1 or len(positions) != 1:
        raise _MalformedError(
            "I101",
            pointer,
            detail=f"unit {_cut(key, 120)} spans several components, layers or positions; "
            "a location holds one",
        )
    [kind], [layer_text], [position] = kinds, layers, positions
    location: dict[str, Any] = {
        "layer": _layer(key, layer_text, pointer, config),
        "component": UNIT_COMPONENTS[kind],
    }
    if kind == "AttentionHead":
        location["heads"] = _heads(key, heads, pointer, config)
    location["position"] = _position_rule(position)
    return location
