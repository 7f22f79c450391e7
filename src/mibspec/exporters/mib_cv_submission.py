"""Export causal-variable reports as a MIB causal-variable submission folder.

The folder has the layout :mod:`mibspec.importers.mib_cv_submission` reads: per task, model and
variable a ``<TASK>_<MODEL>_<VARIABLE>`` folder with the three files of each unit, named after
the unit's id. The two ``.pt`` files hold plain tensors (``model_info`` with the rotation; the
state dict left empty, as its keys are the internals of the submitter's modules), the indices
are JSON, the declared position rules go to ``token_positions.json`` (the public evaluator
needs a token-position function, which mibspec does not write as code) and a listing of what
was written to ``mibspec_submission.json``. A report's unit scores are written back as MIB's
result file, in its variable's folder (where the public evaluator saves it): one key per unit
listing its model units (the unit's id when it is such a key, in the source's order; else a
joint unit's (spec 1.2, MV-10) location first and then its joint sites in order), each site's
featurizer written as its own unit files, as MIB's IOI evaluation
loads one featurizer per head. Every file is planned before the first is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mibspec.core.folders import (
    InputFolder,
    NameClashError,
    OutputPlan,
    OutsideFolderError,
    name_problem,
    safe_name,
)
from mibspec.core.mib_causal import (
    FEATURIZER_CLASSES,
    LISTING_FILE,
    MIB_TASKS,
    POSITIONS_FILE,
    TASK_FOLDERS,
    UNIT_COMPONENTS,
    UNIT_FILE_SUFFIXES,
    UNIT_RECORD,
    mib_cell,
    parse_unit_id,
    result_key,
    result_key_units,
)
from mibspec.core.outputs import Inputs
from mibspec.core.version import __version__
from mibspec.validator import Finding, Limits, catalogue, load_json_file, make_finding

__all__ = ["ExportResult", "export_mib_cv_submission"]

#: featurizer type → (MIB featurizer class, inverse class)
_TYPES = {kind: (cls, inverse) for cls, (kind, inverse) in FEATURIZER_CLASSES.items()}
#: location component → MIB unit kind
_UNIT_KINDS = {component: kind for kind, component in UNIT_COMPONENTS.items()}


@dataclass
class ExportResult:
    """What an export wrote, or the findings that refused it (then nothing is written)."""

    findings: list[Finding] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


class _UnitError(Exception):
    def __init__(self, code: str, pointer: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.pointer, self.detail = code, pointer, detail


def _short(value: str, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def export_mib_cv_submission(reports: list[Path], out_dir: Path) -> ExportResult:
    """Write the featurizers of causal-variable ``reports`` as a MIB submission folder.

    ``reports`` are causal-variable reports, or featurizer documents imported from a
    submission (which name their folder). They are expected to verify (``mibspec export
    mib-submission`` verifies them first): featurizer documents and weights are read as
    declared, from the report's folder only (a link out of it is I127). A report's task, model
    architecture and variables name the folders (made safe as an import makes them); each
    unit's featurizer, and each joint site's, becomes the three unit files, named after the
    unit id (once, when several units use it), and each report variable's unit scores become
    MIB's result file in its folder. A unit or joint site without a featurizer, a featurizer
    type other than ``subspace`` or ``identity``, a location the layout cannot name, or a unit
    id that cannot name a file is refused (I125), two units written under one name are I126,
    and then nothing is written. ``written`` lists the files written.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is an input (or a link to one).
    """
    cat = catalogue()
    result = ExportResult()
    export = _Export(OutputPlan(out_dir), {}, [], [])
    for report_path in reports:
        try:
            _export_report(report_path, export)
        except _UnitError as exc:
            result.findings.append(
                make_finding(cat, None, exc.code, exc.pointer, detail=exc.detail).located(1, 1)
            )
    if result.findings:
        return result
    positions = (json.dumps(export.positions, indent=2, sort_keys=True) + "\n").encode()
    export.plan.add(POSITIONS_FILE, positions, source="the declared token positions")
    summary = {
        "format": "MIB causal-variable submission, written by mibspec",
        "mibspec_version": __version__,
        "token_positions": POSITIONS_FILE,
        "note": (
            "Token positions are declared rules (token_positions.json), not code: the public "
            "evaluator needs a token_position.py, which mibspec does not write. `mibspec import "
            "mib-submission DIR --positions token_positions.json` reads this folder back."
        ),
        "units": export.listing,
        "results": export.results,
    }
    listing = (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode()
    export.plan.add(LISTING_FILE, listing, source="the listing of the export")
    inputs = Inputs([*reports, *export.reads])
    clashes = export.plan.replaced(inputs)
    if clashes:
        result.findings = [make_finding(cat, None, "I126", "", detail=str(e)).located(1, 1) for e in clashes]
        return result
    result.written = export.plan.write(inputs)
    return result


@dataclass
class _Export:
    """What an export collects before anything is written."""

    plan: OutputPlan
    positions: dict[str, dict[str, Any]]
    listing: list[dict[str, Any]]
    reads: list[Path]
    results: list[str] = field(default_factory=list)  # the result files, relative paths
    #: (folder, unit id) → (featurizer document, position name) of the unit files planned
    units: dict[tuple[str, str], tuple[Path, str]] = field(default_factory=dict)


def _read_inside(folder: Path, path: str, pointer: str) -> Path:
    """``folder/path``, once it stays inside ``folder`` with links resolved."""
    try:
        return InputFolder(folder).check(folder / path)
    except OutsideFolderError as exc:
        raise _UnitError("I127", pointer, str(exc)) from None


def _imported(doc: dict[str, Any], key: str, default: Any = None) -> Any:
    """What a featurizer imported from a submission records of it (its folder, its unit id);
    ``default`` where it records nothing (extensions are free-form: any JSON value)."""
    extensions = doc.get("extensions")
    record = extensions.get(UNIT_RECORD) if isinstance(extensions, dict) else None
    return record.get(key, default) if isinstance(record, dict) else default


def _export_report(source: Path, export: _Export) -> None:
    name = source.name
    parsed = load_json_file(source, Limits())
    document = parsed.data
    if parsed.problems or not isinstance(document, dict):
        raise _UnitError("I125", "", f"{name} is not a strict JSON document")
    if document.get("kind") == "featurizer":
        cell = _imported(document, "folder")
        if not isinstance(cell, str) or mib_cell(cell) is None:
            raise _UnitError(
                "I125",
                "/extensions",
                f"{name} does not name its <TASK>_<MODEL>_<VARIABLE> folder (it was not imported from a "
                "submission); export the report that uses it",
            )
        _export_featurizer(export, source, document, cell, "", name)
        return
    if document.get("kind") != "report" or document.get("track") != "causal_variable":
        raise _UnitError("I125", "/kind", f"{name} is neither a causal-variable report nor a featurizer")
    task = document["task"]["name"]
    folder = TASK_FOLDERS.get(task, task if task in MIB_TASKS else None)
    if folder is None:
        raise _UnitError(
            "I125", "/task/name", f"task {task!r} is not one of MIB's ({', '.join(TASK_FOLDERS)})"
        )
    model = document["model"].get("architecture")
    if not isinstance(model, str) or not re.fullmatch(r"[A-Za-z0-9]+", model):
        raise _UnitError(
            "I125", "/model/architecture", "the MIB layout names the model by its architecture class"
        )
    artifacts = {a["id"]: a for a in document.get("artifacts", [])}
    for v, variable in enumerate(document["claims"]["variables"]):
        cell = f"{folder}_{model}_{variable['name']}"
        units: dict[str, Any] = {}
        for u, unit in enumerate(variable["units"]):
            pointer = f"/claims/variables/{v}/units/{u}"
            sites = [(f"{pointer}/featurizer", unit.get("featurizer"))] + [
                (f"{pointer}/joint_sites/{j}/featurizer", site.get("featurizer"))
                for j, site in enumerate(unit.get("joint_sites") or [])
            ]
            ids = []
            for at, ident in sites:
                doc_path, doc = _site_document(source, artifacts, ident, at, cell)
                ids.append(_export_featurizer(export, doc_path, doc, cell, at, name))
            units[_unit_key(unit, [unit_id for unit_id, _ in ids])] = _result_entry(unit, ids[0][1])
        _plan_results(export, document, folder, model, variable["name"], units, name)


def _unit_key(unit: dict[str, Any], unit_ids: list[str]) -> str:
    """The result-file key of a unit of model units ``unit_ids`` (its sites in the report's
    order): the unit's id when that is a key listing the same model units (the order the source
    listed them in, MIB's ``--heads_list``), so that a key read back is the key written."""
    own = unit.get("id")
    listed = result_key_units(own) if isinstance(own, str) else []
    if sorted(listed) == sorted(unit_ids) and result_key(listed) == own:
        return str(own)
    return result_key(unit_ids)


def _site_document(
    source: Path, artifacts: dict[str, Any], ident: Any, pointer: str, cell: str
) -> tuple[Path, dict[str, Any]]:
    """The featurizer document a unit's site names, read from the report's folder."""
    entry = artifacts.get(ident)
    if entry is None:
        raise _UnitError("I125", pointer, "a unit without a featurizer has no MIB files")
    doc_path = _read_inside(source.parent, entry["path"], pointer)
    doc = load_json_file(doc_path, Limits()).data
    if not isinstance(doc, dict) or doc.get("kind") != "featurizer":
        raise _UnitError("I125", pointer, f"{entry['path']} is not a featurizer document")
    imported = _imported(doc, "folder", cell)
    if imported != cell:
        raise _UnitError("I125", pointer, f"the featurizer was imported for {imported}, not {cell}")
    return doc_path, doc


def _result_entry(unit: dict[str, Any], position: str) -> dict[str, Any]:
    """A unit's entry of a result file, per counterfactual set: the location's layer (and head)
    and position in ``metadata``, as the public code names the first listed model unit's."""
    location = unit["location"]
    metadata: dict[str, Any] = {"layer": location["layer"], "position": position}
    if location.get("heads"):
        metadata["head"] = location["heads"][0]
    return {"metadata": metadata, "scores": unit["scores"]}


def _plan_results(
    export: _Export,
    document: dict[str, Any],
    folder: str,
    model: str,
    variable: str,
    units: dict[str, Any],
    source: str,
) -> None:
    """Plan a variable's result file in its folder, named as the public evaluator names it
    (variable, task, model and method, then ``results.json``); counterfactual sets carry the
    report's split as the public files do (``<type>_<split>``)."""
    split = document["task"].get("split")
    dataset: dict[str, Any] = {}
    for key, entry in units.items():
        for cf, score in entry["scores"].items():
            block = dataset.setdefault(f"{cf}_{split}" if split else cf, {"model_unit": {}})
            block["model_unit"][key] = {"metadata": entry["metadata"], variable: {"average_score": score}}
    method = document["method"]["name"]
    payload = {
        "method_name": method,
        "model_name": model,
        "task_name": folder,
        "target_variables": variable,
        "dataset": dataset,
    }
    cell = safe_name(f"{folder}_{model}_{variable}")
    relative = f"{cell}/{safe_name(f'{variable}{folder}{model}{method}results')}.json"
    try:
        export.plan.add(relative, (json.dumps(payload, indent=2) + "\n").encode(), source=source)
    except NameClashError as exc:
        raise _UnitError("I126", "/claims/variables", str(exc)) from None
    export.results.append(relative)


def _export_featurizer(
    export: _Export, doc_path: Path, doc: dict[str, Any], cell: str, pointer: str, source: str
) -> tuple[str, str]:
    """Plan the three unit files of one featurizer document (once, when several units use it);
    its unit id and position name."""
    import io

    import torch

    unit_id, position_name = _unit_id(doc, pointer)
    planned = export.units.get((cell, unit_id))
    if planned is not None and planned[0] == doc_path.resolve():
        return unit_id, position_name
    export.units[(cell, unit_id)] = (doc_path.resolve(), position_name)
    export.reads.append(doc_path)
    export.reads.extend(_read_inside(doc_path.parent, a["path"], pointer) for a in doc.get("artifacts", []))
    rule = doc["location"]["position"]
    if position_name in export.positions and export.positions[position_name] != rule:
        raise _UnitError("I125", pointer, f"position name {position_name!r} stands for two rules")
    if rule.get("rule") != "named":
        export.positions[position_name] = rule
    if doc["type"] not in _TYPES or doc.get("error", "add_base_error") != "add_base_error":
        raise _UnitError("I125", pointer, f"a {doc['type']} featurizer has no MIB featurizer class")
    for suffix in UNIT_FILE_SUFFIXES:
        problem = name_problem(f"{unit_id}{suffix}")
        if problem is not None:
            raise _UnitError(
                "I125", pointer, f"unit id {_short(unit_id)} cannot name a file: the name {problem}"
            )
    featurizer_class, inverse_class = _TYPES[doc["type"]]
    config: dict[str, Any] = {}
    if doc["type"] == "subspace":
        rotation = _weights(doc_path.parent, doc, "rotation", pointer)
        config = {"rotation_matrix": torch.from_numpy(rotation.T.copy()), "requires_grad": False}
    info = {
        "featurizer_class": featurizer_class,
        "inverse_featurizer_class": inverse_class,
        "n_features": doc["n_features"],
        "additional_config": config,
    }
    created = (doc.get("provenance") or {}).get("created")
    # the unit files keep the featurizer's creation time (read back on import)
    stamp = datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() if created else None
    files: dict[str, bytes] = {}
    for suffix in ("_featurizer", "_inverse_featurizer"):
        buffer = io.BytesIO()
        # The state dict stays empty: its keys are the internals of the submitter's modules
        # (for a subspace, torch's orthogonal parametrization), which are not reproduced here;
        # the rotation itself is additional_config's rotation_matrix.
        torch.save({"model_info": info, "state_dict": {}}, buffer)
        files[suffix] = buffer.getvalue()
    files["_indices"] = json.dumps(doc.get("feature_indices")).encode()
    where = f"{source} ({cell}/{unit_id})"
    try:
        for suffix, data in files.items():
            export.plan.add(f"{safe_name(cell)}/{unit_id}{suffix}", data, source=where, mtime=stamp)
    except NameClashError as exc:
        raise _UnitError("I126", pointer, str(exc)) from None
    export.listing.append({"folder": cell, "unit": unit_id, "position": position_name, "source": source})
    return unit_id, position_name


def _unit_id(doc: dict[str, Any], pointer: str) -> tuple[str, str]:
    """The unit id the files are named after and its position name: the imported one when the
    featurizer came from a submission, else built from the location."""
    location = doc["location"]
    imported = _imported(doc, "unit")
    if isinstance(imported, str):
        parsed = parse_unit_id(imported)
        if parsed is not None and parsed[1].get("Token"):
            return imported, parsed[1]["Token"]
    kind = _UNIT_KINDS.get(location["component"])
    heads = location.get("heads") or []
    if kind is None or (kind == "AttentionHead" and len(heads) != 1):
        raise _UnitError("I125", pointer, f"a {location['component']} location has no MIB unit id")
    rule = location["position"]
    name = {
        "last": "last_token",
        "all": "all",  # MIB's IOI position, read back as the rule without a mapping
        "named": rule.get("name"),
        "index": f"index_{rule.get('index')}",
        "slot": f"slot_{rule.get('slot')}",
    }.get(rule["rule"], f"{rule['rule']}_{rule.get('token')}")
    if rule["rule"] == "slot" and rule.get("occurrence") is not None:
        name += f"_{rule['occurrence']}"
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.{}-]+", name):
        raise _UnitError("I125", pointer, f"position {name!r} cannot name a file")
    head = f"Head:{heads[0]}," if kind == "AttentionHead" else ""
    return f"{kind}(Layer:{location['layer']},{head}Token:{name})", name


def _weights(folder: Path, doc: dict[str, Any], name: str, pointer: str) -> Any:
    import numpy as np

    from mibspec.core.sidecars import load_tensor, tensor_infos

    ref = doc["weights"][name]
    artifact = next(a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"])
    path = _read_inside(folder, artifact["path"], pointer)
    info = tensor_infos(path, artifact["media_type"])[ref.get("tensor")]
    return np.array(load_tensor(path, info))
