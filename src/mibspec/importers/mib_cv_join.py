"""MIB causal-variable result files joined with the featurizers of a submission: one
causal-variable report per ``<TASK>_<MODEL>_<VARIABLE>`` folder, which recomputation can check.

A result file (:mod:`.mib_causal_results`) scores model units by their ids; the featurizer
documents imported from the submission (:mod:`.mib_cv_submission`) record the folder and unit
id they came from. A unit is joined with the featurizer of the same task, model, variable and
unit id (``Layer``, ``Head`` and ``Token`` compared, in either spelling the public code
writes); the featurizer's declared location wins over the one the id implies. A key listing
several model units (MIB's IOI evaluation scores all the submitted heads as one) is one joint
unit (spec 1.2, MV-10) joined with the featurizer of each: the site of lowest (layer, heads) is
its location, the others its ``joint_sites`` in that order, each naming its featurizer. Each
report is written beside its folder's featurizer documents, with a copy of the dataset document
and a causal model document, all referenced as artifacts with their SHA-256.

A unit scored without a featurizer (for a joint unit, without the featurizer of one of its
model units), a variable without a folder, a counterfactual set the
dataset does not have, and a folder scored twice are I112: the claim could not be recomputed,
so nothing is written. A featurizer no result file scores claims nothing; it is named in a note.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mibspec.core.folders import NameClashError, OutputPlan, safe_name
from mibspec.core.mib_causal import MIB_TASKS, UNIT_RECORD, mib_cell, parse_unit_id, result_key_units
from mibspec.core.outputs import Inputs
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.version import __version__
from mibspec.documents import CausalVariableReport, document_bytes, parse_document
from mibspec.documents.common import Artifact, Method, Provenance, ToolInfo
from mibspec.documents.report import CausalVariableClaims, CausalVariableSettings, TaskRef
from mibspec.validator import Finding, Limits, catalogue, load_json_file, make_finding

from ._options import DATASET_FILE, DATASET_ID, DatasetCopy, ImportOptions, checked_options, mib_model
from .eap_ig import ImportResult, _MalformedError, import_parse_findings, unfit_value
from .mib_causal_results import CausalResults, read_causal_results, variable_claims
from .mib_results import source_created

__all__ = ["ResultsModel", "UnresolvedModelError", "join_mib_cv_results"]

_CAUSAL_MODEL_ID = "causal-model"
_TASKS = {task for task, _ in MIB_TASKS.values()}
_SHOWN = 12
_JOINT = (
    ". A unit joining several model units (MIB's IOI evaluation scores all the submitted heads as one) "
    "is joined with the featurizer of each of them, one per head: every one must be in the folder"
)


@dataclass(frozen=True)
class ResultsModel:
    """The model a result file names, as the report declares it.

    Attributes:
        block: the report's ``model`` (hub id and revision, or a local folder).
        config: ``n_layers`` and ``n_heads``, to check the unit ids against.
        names: what a submission folder may call the model (``<TASK>_<MODEL>_<VARIABLE>``).
    """

    block: dict[str, Any]
    config: Mapping[str, int]
    names: frozenset[str]


class UnresolvedModelError(Exception):
    """The model a result file names cannot be declared: the code and what to do."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass
class _Unit:
    """One imported featurizer document."""

    path: Path
    unit_id: str
    location: dict[str, Any]


@dataclass
class _Cell:
    """A ``<TASK>_<MODEL>_<VARIABLE>`` folder of imported featurizers, by normalised unit id."""

    name: str
    task: str
    model: str
    variable: str
    units: dict[tuple[str, ...], _Unit] = field(default_factory=dict)
    scored: str | None = None  # the result file that scores it


@dataclass
class _Scored:
    """One variable of one result file, joined with its folder."""

    cell: _Cell
    source: Path
    results: CausalResults
    model: ResultsModel
    units: dict[str, dict[str, Any]]  # unit key → location (the featurizer's), joint sites, scores
    featurizers: dict[str, list[_Unit]]  # unit key → the featurizer of each site, location first


def join_mib_cv_results(
    results: Sequence[Path],
    featurizers: Iterable[Path],
    out_dir: Path,
    *,
    dataset: Path,
    resolve: Callable[[str], ResultsModel],
    split: str | None = None,
) -> ImportResult:
    """Write ``out_dir/<folder>/report.json`` for each featurizer folder the ``results`` score.

    ``featurizers`` are the documents :func:`import_mib_cv_submission` wrote into ``out_dir``;
    ``dataset`` a counterfactual-dataset document (copied beside each report); ``resolve``
    declares the model a result file names (raising :class:`UnresolvedModelError`). Nothing is
    written when a finding is an error.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is an input.
    """
    cat = catalogue()
    result = ImportResult()
    copy, result.findings = checked_options(ImportOptions(dataset=str(dataset)))
    if result.findings:
        return result
    assert isinstance(copy, DatasetCopy)  # a file given as the dataset is copied
    described = json.loads(copy.document)
    types = [str(t) for t in described.get("counterfactual_types", [])]
    cells = _cells(featurizers)
    joined: list[_Scored] = []
    for source in results:
        findings, of_file = _join_file(source, cells, resolve, types, split or described.get("split"))
        result.findings.extend(findings)
        joined.extend(of_file)
    result.notes.extend(_unscored(cells, joined))
    if result.findings or not joined:
        return result
    plan = OutputPlan(out_dir)
    try:
        for scored in joined:
            result.written.append(_plan_report(plan, scored, copy, described, split))
    except ValidationError as exc:  # a value the report cannot hold, which no check named
        result.findings.append(make_finding(cat, None, "I101", "", detail=unfit_value(exc)).located(1, 1))
    except NameClashError as exc:
        result.findings.append(make_finding(cat, None, "I126", "", detail=str(exc)).located(1, 1))
    if result.findings:
        result.written = []
        return result
    plan.write(Inputs([*results, dataset, *(u.path for c in cells.values() for u in c.units.values())]))
    return result


def _unscored(cells: dict[str, _Cell], joined: list[_Scored]) -> list[str]:
    """A note per folder with featurizers no result file scores (they claim nothing)."""
    used = {id(u) for scored in joined for sites in scored.featurizers.values() for u in sites}
    notes = []
    for cell in cells.values():
        left = sorted(u.unit_id for u in cell.units.values() if id(u) not in used)
        if left:
            notes.append(
                f"{cell.name}: {len(left)} of {len(cell.units)} featurizer(s) scored by no result file, so "
                f"nothing of them is claimed or recomputed: {_listed(left)}"
            )
    return notes


def _listed(names: list[str]) -> str:
    more = len(names) - _SHOWN
    return ", ".join(names[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _atom_keys(key: str) -> list[tuple[str, ...] | None]:
    """The model units a result file's key ``[[AtomicModelUnit(id='...'), ...]]`` lists (or the
    key itself, a bare unit id), each as :func:`_unit_key` compares it."""
    return [_unit_key(atom) for atom in result_key_units(key)]


def _unit_key(unit_id: str) -> tuple[str, ...] | None:
    """A unit id compared by kind, layer, heads and token position, whatever its spelling."""
    parsed = parse_unit_id(unit_id)
    if parsed is None:
        return None
    kind, params = parsed
    return (kind, *(f"{name}={params.get(name, '')}" for name in ("Layer", "Head", "Token")))


def _cells(featurizers: Iterable[Path]) -> dict[str, _Cell]:
    """The imported featurizer documents, by the submission folder they came from."""
    cells: dict[str, _Cell] = {}
    for path in featurizers:
        data = json.loads(path.read_bytes())
        record = (data.get("extensions") or {}).get(UNIT_RECORD) or {}
        folder, unit_id = record.get("folder"), record.get("unit")
        if not isinstance(folder, str) or not isinstance(unit_id, str):
            continue  # not imported from a submission folder: the import records both
        parsed, key = mib_cell(folder), _unit_key(unit_id)
        if parsed is None or key is None:
            continue
        mib_task, model, variable = parsed
        cell = cells.setdefault(folder, _Cell(folder, MIB_TASKS[mib_task][0], model, variable))
        cell.units[key] = _Unit(path, unit_id, data["location"])
    return cells


def _task(name: str) -> str | None:
    """The mibspec task of a result file's ``task_name`` (a MIB folder name or the task)."""
    if name in MIB_TASKS:
        return MIB_TASKS[name][0]
    lowered = name.lower()
    return lowered if lowered in _TASKS else None


def _join_file(
    source: Path,
    cells: dict[str, _Cell],
    resolve: Callable[[str], ResultsModel],
    types: list[str],
    split: str | None,
) -> tuple[list[Finding], list[_Scored]]:
    """One result file joined with its folders; the findings instead when it cannot be."""
    cat = catalogue()
    parsed = load_json_file(source, Limits())
    if parsed.problems:
        return [_in_file(f, source) for f in import_parse_findings(parsed, cat)], []
    try:
        return [], list(_joined(source, parsed.data, cells, resolve, types, split))
    except _MalformedError as exc:
        finding = make_finding(cat, None, exc.code, exc.pointer, **exc.params)
        line, column = parsed.locate(exc.pointer) if parsed.text else (None, None)
        return [_in_file(finding.located(line or 1, column or 1), source)], []
    except UnresolvedModelError as exc:
        finding = make_finding(cat, None, exc.code, "/model_name", detail=exc.detail)
        line, column = parsed.locate("/model_name") if parsed.text else (None, None)
        return [_in_file(finding.located(line or 1, column or 1), source)], []


def _in_file(finding: Finding, source: Path) -> Finding:
    return replace(finding, message=f"{source.name}: {finding.message}")


def _joined(
    source: Path,
    data: Any,
    cells: dict[str, _Cell],
    resolve: Callable[[str], ResultsModel],
    types: list[str],
    split: str | None,
) -> Iterable[_Scored]:
    name = data.get("model_name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise _MalformedError("I101", "", detail="missing model_name (a string)")
    model = resolve(name)
    results = read_causal_results(data, model.config)
    task = _task(results.task)
    if task is None:
        raise _MalformedError(
            "I102", "/task_name", detail=f"task {results.task!r} is not one of MIB's ({', '.join(MIB_TASKS)})"
        )
    for variable in sorted(results.variables):
        found = [
            c for c in cells.values() if c.task == task and c.variable == variable and c.model in model.names
        ]
        if len(found) != 1:
            what = "no" if not found else f"{len(found)} ({', '.join(c.name for c in found)})"
            raise _MalformedError(
                "I112",
                "/dataset",
                detail=f"variable {variable!r} of {name} on {results.task}: the submission has {what} "
                f"<TASK>_<MODEL>_{variable} folder of featurizers for it (model named {sorted(model.names)})",
            )
        cell = found[0]
        if cell.scored is not None:
            raise _MalformedError(
                "I112", "/dataset", detail=f"{cell.name} is scored by {cell.scored} and by {source.name}"
            )
        cell.scored = source.name
        yield _scored(source, results, model, cell, variable, types, split)


def _scored(
    source: Path,
    results: CausalResults,
    model: ResultsModel,
    cell: _Cell,
    variable: str,
    types: list[str],
    split: str | None,
) -> _Scored:
    """One variable's units, each with its folder's featurizer and the dataset's names of the
    counterfactual sets.

    Raises:
        _MalformedError: a unit without a featurizer, or a set the dataset does not have (I112).
    """
    units: dict[str, dict[str, Any]] = {}
    featurizers: dict[str, list[_Unit]] = {}
    missing: list[str] = []
    for key, unit in results.variables[variable].items():
        found = [None if atom is None else cell.units.get(atom) for atom in _atom_keys(key)]
        sites = [f for f in found if f is not None]
        if len(sites) != len(found):
            missing.append(key)
            continue
        scores = {}
        for cf, value in unit["scores"].items():
            scores[_counterfactual(cf, types, split, f"/dataset/{escape_pointer_token(cf)}")] = value
        if len(sites) == 1:
            units[key] = {"location": sites[0].location, "scores": scores}
        else:  # a joint unit (MV-10): one featurizer per site, the lowest (layer, head) first
            sites.sort(key=_site_order)
            units[key] = {"location": sites[0].location, "joint_sites": [], "scores": scores}
        featurizers[key] = sites
    if missing:
        first = next(iter(results.variables[variable][missing[0]]["scores"]))
        raise _MalformedError(
            "I112",
            f"/dataset/{escape_pointer_token(first)}/model_unit/{escape_pointer_token(missing[0])}",
            detail=f"{len(missing)} unit(s) of {variable!r} are scored but {cell.name} holds no featurizer "
            f"for them, so their scores cannot be recomputed: {_listed(missing)}"
            + (_JOINT if any(key.count("AtomicModelUnit(") > 1 for key in missing) else ""),
        )
    return _Scored(cell, source, results, model, units, featurizers)


def _site_order(unit: _Unit) -> tuple[int, list[int], str]:
    location = unit.location
    return location["layer"], location.get("heads") or [], location["component"]


def _counterfactual(name: str, types: list[str], split: str | None, pointer: str) -> str:
    """The dataset's counterfactual type a result file's set names (``<type>`` or, as the
    public code writes it, ``<type>_<split>``)."""
    if name in types:
        return name
    for suffix in ([split] if split else []) + ["train", "validation", "test", "private_test"]:
        if name.endswith(f"_{suffix}") and name[: -len(suffix) - 1] in types:
            return name[: -len(suffix) - 1]
    raise _MalformedError(
        "I112",
        pointer,
        detail=f"counterfactual set {name!r} is not a counterfactual type of the dataset "
        f"({', '.join(types) or 'none declared'}), so its scores cannot be recomputed on it",
    )


def _json_artifact(ident: str, role: str, path: str, data: bytes, kind: str) -> Artifact:
    return Artifact(
        id=ident,
        role=role,
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        bytes=len(data),
        media_type="application/json",
        kind=kind,
    )


def _causal_model_bytes(task: str, copy: DatasetCopy, described: Mapping[str, Any]) -> bytes:
    """The causal model document of ``task``, with the parameters of the dataset's own causal
    model where it declares one of the same mechanism (else the MIB defaults)."""
    from mibspec.metrics.causal_models import TASK_MECHANISMS, causal_model_document

    parameters = None
    ident = described.get("causal_model")
    entry = next((a for a in described.get("artifacts", []) if a.get("id") == ident), None)
    files = dict(copy.files)
    if entry is not None and entry.get("path") in files:
        declared = json.loads(files[entry["path"]])
        if declared.get("mechanism") == TASK_MECHANISMS.get(task):
            parameters = declared.get("parameters")
    document = parse_document("causal_model", causal_model_document(task, parameters))
    return document_bytes(document)


def _plan_report(
    plan: OutputPlan, scored: _Scored, copy: DatasetCopy, described: Mapping[str, Any], split: str | None
) -> Path:
    """Plan a folder's report, its dataset copy and its causal model; the report's path."""
    cell, results = scored.cell, scored.results
    folder, where = safe_name(cell.name), f"{scored.source.name} ({cell.name})"
    taken = {DATASET_FILE, *(name for name, _ in copy.files)}
    # the dataset's own causal model may be a causal_model.json of its files
    model_file = next(n for n in ("causal_model.json", "mib_causal_model.json") if n not in taken)
    for rel, payload in ImportOptions.files(copy):
        plan.add(f"{folder}/{rel}", payload, source=where)
    causal_model = _causal_model_bytes(cell.task, copy, described)
    plan.add(f"{folder}/{model_file}", causal_model, source=where)
    artifacts = [
        _json_artifact(DATASET_ID, "dataset", DATASET_FILE, copy.document, "counterfactual_dataset"),
        _json_artifact(_CAUSAL_MODEL_ID, "causal_model", model_file, causal_model, "causal_model"),
    ]
    by_path: dict[Path, str] = {}  # one artifact per featurizer file, whichever units use it
    for _, sites in sorted(scored.featurizers.items()):
        for unit in sites:
            if unit.path not in by_path:
                ident = by_path[unit.path] = _artifact_id(unit.path.stem, set(by_path.values()))
                data = unit.path.read_bytes()
                artifacts.append(_json_artifact(ident, "featurizer", unit.path.name, data, "featurizer"))
    ids = {key: by_path[sites[0].path] for key, sites in scored.featurizers.items()}
    units = {
        key: {**unit, "joint_sites": [_joint_site(s, by_path[s.path]) for s in scored.featurizers[key][1:]]}
        if "joint_sites" in unit
        else unit
        for key, unit in scored.units.items()
    }
    claims = variable_claims(cell.variable, units, results.ioi, ids)
    report = CausalVariableReport(
        profile="mib-2025",
        title=f"{results.method} on {results.task} ({results.model_name}), {cell.variable}",
        description=(
            f"The scores of {scored.source.name} for {cell.variable}, joined by mibspec {__version__} with "
            f"the featurizers of the submission folder {cell.name} (matched by unit id; each featurizer's "
            "declared location). Per layer, Average and best are computed from the unit scores as the "
            "MIB leaderboard aggregates them"
            + (" (IOI: squared error, lower is better, so the minimum)." if results.ioi else ".")
        ),
        method=Method(name=results.method),
        task=TaskRef.model_validate(
            {"name": cell.task, "dataset": DATASET_ID, "split": described.get("split") or split}
        ),
        model=mib_model(scored.model.block, "causal_variable"),
        settings=CausalVariableSettings(checker="substring", causal_model=_CAUSAL_MODEL_ID),
        claims=CausalVariableClaims(variables=[claims]),
        artifacts=artifacts,
        provenance=Provenance(
            tool=ToolInfo(name="mibspec", version=__version__),
            created=source_created(scored.source),
            command=f"mibspec verify-submission --results {scored.source.name}",
        ),
    )
    return plan.add(f"{folder}/report.json", document_bytes(report), source=where)


def _joint_site(unit: _Unit, ident: str) -> dict[str, Any]:
    """A joint site: where its featurizer reads (its position is the unit's) and that featurizer."""
    site = {k: unit.location[k] for k in ("layer", "component", "heads") if unit.location.get(k) is not None}
    return {**site, "featurizer": ident}


def _artifact_id(stem: str, taken: set[str]) -> str:
    """An artifact id made of a featurizer file's name, unique in the report."""
    base = "".join(c if c.isalnum() or c in "_.-" else "-" for c in stem).strip("-._")[:100] or "featurizer"
    base = base if base[0].isalnum() else f"f{base}"
    ident, n = base, 2
    while ident in taken or ident in (DATASET_ID, _CAUSAL_MODEL_ID):
        ident, n = f"{base}-{n}", n + 1
    return ident
