"""MIB causal-variable submission folders, imported as featurizer documents.

A submission folder holds, per task, model and variable, a folder
``<TASK>_<MODEL>_<VARIABLE>`` (for example ``4_answer_MCQA_Qwen2ForCausalLM_answer_pointer``),
possibly one level deeper, with three files per model unit, named after the unit's id::

    ResidualStream(Layer:3,Token:last_token)_featurizer          torch.save of a dict
    ResidualStream(Layer:3,Token:last_token)_inverse_featurizer  torch.save of a dict
    ResidualStream(Layer:3,Token:last_token)_indices             JSON: a list of ints, or null

The two ``.pt`` files hold ``{"model_info": {"featurizer_class", "inverse_featurizer_class",
"n_features", "additional_config": {"rotation_matrix": (d_model × n_features)}}, "state_dict"}``
(a subspace featurizer: f = x·R; an identity featurizer has no configuration). MIB's methods
save as these two classes: DAS (a trained rotation), DBM+SVD and DBM+PCA (SVD or PCA
components, applied as a subspace, uncentred) are ``SubspaceFeaturizerModule``; DBM and the
full vector are ``IdentityFeaturizerModule`` (DBM's learned mask becomes the indices). An SAE
featurizer (``SAEFeaturizerModule``) is saved as no file at all, its SAE being loaded by code,
so its unit is refused (I119). They are read
with ``torch.load(weights_only=True)``: only tensors and plain containers are rebuilt, never
code. A featurizer class and a ``token_position.py`` may come with the submission as Python;
mibspec never imports or runs them. Token positions come instead from a declared mapping of
the position names the submission uses to token-position rules (``--positions``); IOI's
``all`` (every token) needs no mapping; a unit whose name is not mapped keeps the ``named``
rule, which cannot be recomputed, and the import lists every such unit.

Unit ids in both forms the public code writes parse (``Layer-3`` and ``Layer:3``):
``ResidualStream`` units read the residual stream leaving their layer, ``AttentionHead`` units
the listed heads' outputs, ``MLP`` units the MLP output (as for imported results).

:mod:`mibspec.exporters.mib_cv_submission` writes the same layout back from causal-variable
reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mibspec.core.folders import (
    InputFolder,
    NameClashError,
    OutputPlan,
    OutsideFolderError,
    safe_name,
)
from mibspec.core.integers import parse_int
from mibspec.core.mib_causal import (
    FEATURIZER_CLASSES,
    MIB_POSITION_RULES,
    POSITIONS_FILE,
    UNIT_COMPONENTS,
    UNIT_FILE_SUFFIXES,
    UNIT_RECORD,
    mib_cell,
    parse_unit_id,
)
from mibspec.core.outputs import Inputs
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.sidecars import safetensors_bytes
from mibspec.core.spec import install_hint
from mibspec.core.version import __version__
from mibspec.documents import document_bytes
from mibspec.documents.common import Artifact, Provenance, ToolInfo
from mibspec.documents.kinds import Featurizer, Location, TensorRef, TokenPosition
from mibspec.metrics.positions import position_problems
from mibspec.validator import Finding, Limits, catalogue, load_json_file, make_finding

from ._safe_torch import MAX_PT_BYTES, PtFileError, load_pt
from .eap_ig import ImportResult, unfit_value
from .mib_causal_results import CAUSAL_MODELS
from .mib_results import source_created

__all__ = ["MAX_PT_BYTES", "import_mib_cv_submission"]

_DTYPES = {"torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16"}
_SAE_NOT_SAVED = (
    "MIB's code saves no featurizer file for an SAE (SAEFeaturizerModule: the SAE is loaded by code from "
    "its release, whose name, weights and activation the submission files do not hold), so it cannot be "
    "imported; declare it as an 'sae' featurizer document with its weights in safetensors"
)


class _UnitError(Exception):
    def __init__(self, code: str, pointer: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.pointer, self.detail = code, pointer, detail


@dataclass
class _Unit:
    cell: str
    folder: Path  # where the unit's files are
    unit_id: str
    files: dict[str, Path]  # suffix → path


def import_mib_cv_submission(source: Path, out_dir: Path, *, positions: Path | None = None) -> ImportResult:
    """Write ``out_dir/<TASK>_<MODEL>_<VARIABLE>/<unit>.json`` (+ ``.safetensors``) for every
    unit of the submission folder ``source``.

    Nothing is written when any unit cannot be imported (error findings); warnings (units
    whose token positions are undeclared, folders and code that were not imported) come back
    with what was written. Nothing from the submission is executed.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is an input (or a link to one).
    """
    cat = catalogue()
    result = ImportResult()
    findings: list[Finding] = []

    def report(code: str, pointer: str, detail: str, at: tuple[int | None, int | None] = (1, 1)) -> None:
        line, column = at
        findings.append(make_finding(cat, None, code, pointer, detail=detail).located(line or 1, column or 1))

    reader = InputFolder(source)
    rules = _submission_positions(reader, positions, report)
    units = list(_units(reader, report))
    if not units and not any(f.severity.value == "error" for f in findings):
        report("I120", "", f"{source.name} holds no <TASK>_<MODEL>_<VARIABLE> folder with unit files")
    plan = OutputPlan(out_dir)
    undeclared: list[str] = []
    for unit in units:
        try:
            document, tensors = _document(unit, rules)
        except _UnitError as exc:
            report(exc.code, exc.pointer, exc.detail)
            continue
        except ValidationError as exc:  # a value the featurizer document cannot hold
            report(
                "I101",
                f"/{escape_pointer_token(unit.cell)}/{escape_pointer_token(unit.unit_id)}",
                unfit_value(exc),
            )
            continue
        position = document.location.position
        pointer = f"/{escape_pointer_token(unit.cell)}/{escape_pointer_token(unit.unit_id)}"
        if position.rule == "named":
            undeclared.append(f"{unit.cell}/{unit.unit_id}")
            report(
                "I121",
                pointer,
                f"unit {unit.unit_id!r} of {unit.cell}: no declared rule for token position "
                f"{position.name!r} (map it in --positions or the submission's {POSITIONS_FILE}); "
                "the unit keeps the 'named' rule",
            )
        stem, folder = safe_name(unit.unit_id), safe_name(unit.cell)
        where = f"unit {unit.unit_id!r} of {unit.cell}"
        try:
            if tensors:
                data = safetensors_bytes(tensors)
                name = f"{stem}.safetensors"
                document = document.model_copy(update={"artifacts": [_artifact(data, name)]})
                plan.claim(f"{folder}/{stem}.json", where)
                result.sidecars.append(plan.add(f"{folder}/{name}", data, source=where))
            result.written.append(plan.add(f"{folder}/{stem}.json", document_bytes(document), source=where))
        except NameClashError as exc:
            report("I126", pointer, str(exc))
    if undeclared:
        shown = ", ".join(undeclared[:20]) + (
            f" and {len(undeclared) - 20} more" if len(undeclared) > 20 else ""
        )
        report(
            "I122",
            "",
            f"{len(undeclared)} of {len(result.written)} unit(s) lack a declared token position: {shown}",
        )
    inputs = Inputs([source, *([positions] if positions else [])])
    if not any(f.severity.value == "error" for f in findings):
        _refuse_replacing(plan, inputs, report)
    result.findings = findings
    if any(f.severity.value == "error" for f in findings):
        result.written, result.sidecars = [], []
        return result
    plan.write(inputs)
    return result


def _refuse_replacing(plan: OutputPlan, inputs: Inputs, report: Any) -> None:
    """I126 for each unit folder in which a file another input wrote would be replaced; a unit
    whose weights are the ones already there is the same input's, imported again."""
    for clash in plan.replaced(inputs, lambda path: plan.unchanged(path.with_suffix(".safetensors"))):
        report("I126", "", str(clash))


def _submission_positions(
    reader: InputFolder, positions: Path | None, report: Any
) -> dict[str, dict[str, Any]]:
    """The declared token positions: ``positions`` (``--positions``) and the folder's own
    ``token_positions.json`` (which ``export mib-submission`` writes), either alone or both
    when they agree. A name the two map to different rules is I123, at that name in
    ``positions``."""
    own = reader.root / POSITIONS_FILE
    try:
        present = reader.check(own).is_file() if own.exists() or own.is_symlink() else False
    except OutsideFolderError as exc:
        report("I127", f"/{POSITIONS_FILE}", str(exc))
        return {}
    found = _read_positions(own, report) if present else {}
    if positions is None:
        return found
    given = _read_positions(positions, report)
    for name in sorted(given.keys() & found.keys()):
        if given[name] != found[name]:
            report(
                "I123",
                f"/{escape_pointer_token(name)}",
                f"{positions.name}: position {name!r} maps to {json.dumps(given[name], sort_keys=True)}, "
                f"the submission's {POSITIONS_FILE} to {json.dumps(found[name], sort_keys=True)}; "
                "make them agree, or leave --positions out to use the submission's",
            )
    return {**found, **given}


def _read_positions(path: Path, report: Any) -> dict[str, dict[str, Any]]:
    parsed = load_json_file(path, Limits())
    if parsed.problems or not isinstance(parsed.data, dict):
        report("I123", "", f"{path.name} is not a strict JSON object of position names → rules")
        return {}
    rules: dict[str, dict[str, Any]] = {}
    for name, rule in parsed.data.items():
        pointer = f"/{escape_pointer_token(name)}"
        at = parsed.locate(pointer)  # findings in the positions file point into it
        try:
            TokenPosition.model_validate(rule)
        except ValueError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "invalid"
            report(
                "I123", pointer, f"{path.name}: position {name!r} is not a token-position rule ({first})", at
            )
            continue
        if rule.get("rule") == "named":
            report(
                "I123", pointer, f"{path.name}: position {name!r} maps to 'named', which declares nothing", at
            )
            continue
        problems = position_problems(rule)
        if problems:  # e.g. 'all' with an index: which one the unit reads would be a guess
            below, detail = problems[0]
            where = f"{pointer}{below}"
            report("I123", where, f"{path.name}: position {name!r}: {detail}", parsed.locate(where))
            continue
        rules[name] = rule
    return rules


def _unit_files(reader: InputFolder, folder: Path) -> dict[str, dict[str, Path]]:
    """The unit files of ``folder`` by unit id and suffix.

    Raises:
        OutsideFolderError: the folder, or a unit file in it, leads out of the submission.
    """
    found: dict[str, dict[str, Path]] = {}
    for path in reader.listing(folder):
        if not path.is_file():
            continue
        for suffix in UNIT_FILE_SUFFIXES:
            if path.name.endswith(suffix) and len(path.name) > len(suffix):
                found.setdefault(path.name[: -len(suffix)], {})[suffix] = reader.check(path)
                break
    return found


def _units(reader: InputFolder, report: Any) -> Iterator[_Unit]:
    source = reader.root
    try:
        entries = sorted(source.iterdir())
    except OSError as exc:
        report("I101", "", f"{source} cannot be listed: {exc.strerror}")
        return
    for entry in entries:
        pointer = f"/{escape_pointer_token(entry.name)}"
        if entry.is_file():
            if entry.suffix == ".py":
                report("I124", pointer, f"{entry.name} is submitted code; mibspec never imports or runs it")
            continue
        if mib_cell(entry.name) is None:
            report("I124", pointer, f"{entry.name} is not a <TASK>_<MODEL>_<VARIABLE> folder; skipped")
            continue
        try:
            files = _unit_files(reader, entry)
            folder = entry
            if not files:  # the public verifier also looks one level deeper
                for sub in (p for p in reader.listing(entry) if p.is_dir()):
                    files = _unit_files(reader, sub)
                    if files:
                        folder = sub
                        break
        except OutsideFolderError as exc:
            report("I127", pointer, str(exc))
            continue
        except OSError as exc:
            report("I101", pointer, f"{entry.name} cannot be listed: {exc.strerror or exc}")
            continue
        for unit_id, unit_files in sorted(files.items()):
            yield _Unit(entry.name, folder, unit_id, unit_files)


def _load(path: Path, pointer: str) -> Any:
    try:
        import torch  # noqa: F401  (only to say so when it is missing)
    except ImportError:
        raise _UnitError(
            "I104", pointer, f"reading .pt files needs torch: {install_hint('recompute')}"
        ) from None
    try:
        return load_pt(path)
    except PtFileError as exc:
        code = {"unsafe": "I118", "over-limits": "I128"}.get(exc.kind, "I101")
        raise _UnitError(code, pointer, exc.detail) from None


def _info(checkpoint: Any, name: str, pointer: str) -> dict[str, Any]:
    # Only model_info is read: the state dict holds the modules' parameters under names of the
    # submitter's classes, and the rotation is in model_info's additional_config.
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model_info"), dict):
        raise _UnitError("I120", pointer, f"{name} is not a dict with 'model_info'")
    return checkpoint["model_info"]


def _rotation(info: dict[str, Any], name: str, pointer: str) -> Any:
    import torch

    config = info.get("additional_config")
    matrix = config.get("rotation_matrix") if isinstance(config, dict) else None
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or 0 in matrix.shape:
        raise _UnitError(
            "I119", pointer, f"{name}: a subspace featurizer needs additional_config.rotation_matrix"
        )
    if str(matrix.dtype) not in _DTYPES and matrix.dtype != torch.bfloat16:
        raise _UnitError("I119", pointer, f"{name}: rotation_matrix has dtype {matrix.dtype}, not a float")
    return matrix


def _document(unit: _Unit, rules: dict[str, dict[str, Any]]) -> tuple[Featurizer, dict[str, Any]]:
    cell_pointer = f"/{escape_pointer_token(unit.cell)}"
    pointer = f"{cell_pointer}/{escape_pointer_token(unit.unit_id)}"
    location = _unit_location(unit, rules, pointer)
    if "_indices" not in unit.files:
        raise _UnitError("I120", f"{pointer}_indices", f"unit {unit.unit_id!r} has no indices file")
    indices = _indices(unit.files["_indices"], f"{pointer}_indices")
    folder, model, variable = mib_cell(unit.cell) or ("", "", "")
    read = _read_featurizer(unit, model, location, pointer)
    optional: dict[str, Any] = {} if indices is None else {"feature_indices": indices}
    if read.tensors:
        array = read.tensors["rotation"]
        rotation = {
            "artifact": "weights",
            "tensor": "rotation",
            "shape": list(array.shape),
            "dtype": str(array.dtype),
        }
        optional["weights"] = {"rotation": TensorRef.model_validate(rotation)}
    document = Featurizer(
        type=FEATURIZER_CLASSES[read.featurizer_class][0],
        location=Location.model_validate(location),
        input_dim=int(read.input_dim),
        n_features=int(read.n_features),
        **optional,
        error="add_base_error",
        description=(
            f"Imported by mibspec {__version__} from the MIB causal-variable submission unit "
            f"{unit.unit_id} ({read.featurizer_class}) of {unit.cell}: {variable} of {folder} on {model}."
        ),
        extensions={UNIT_RECORD: {"unit": unit.unit_id, "folder": unit.cell}},
        provenance=Provenance(
            tool=ToolInfo(name="mibspec", version=__version__),
            created=source_created(read.created),
            command="mibspec import mib-submission",
        ),
    )
    return document, read.tensors


def _unit_location(unit: _Unit, rules: dict[str, dict[str, Any]], pointer: str) -> dict[str, Any]:
    """The unit's location, from its id: layer, component, heads and the declared position rule
    of its token (MIB's own for ``all``, the ``named`` rule when ``--positions`` does not map it)."""
    parsed = parse_unit_id(unit.unit_id)
    if parsed is None or parsed[0] not in UNIT_COMPONENTS:
        raise _UnitError(
            "I101",
            pointer,
            f"unit {unit.unit_id!r} is not one of {', '.join(f'{k}(...)' for k in UNIT_COMPONENTS)}",
        )
    kind, params = parsed
    layer, token = parse_int(params.get("Layer", "")), params.get("Token", "")
    if layer is None or not token:
        raise _UnitError(
            "I101", pointer, f"unit {unit.unit_id!r} needs Layer (a number of at most 18 digits) and Token"
        )
    location: dict[str, Any] = {"layer": layer, "component": UNIT_COMPONENTS[kind]}
    if kind == "AttentionHead":
        head = parse_int(params.get("Head", ""))
        if head is None:
            raise _UnitError(
                "I101", pointer, f"unit {unit.unit_id!r} needs Head (a number of at most 18 digits)"
            )
        location["heads"] = [head]
    rule = rules.get(token, MIB_POSITION_RULES.get(token))
    location["position"] = dict(rule) if rule is not None else {"rule": "named", "name": token}
    return location


@dataclass(frozen=True)
class _ReadFeaturizer:
    """What a unit's featurizer files say: the class, the widths, the tensors to write (the
    rotation of a subspace featurizer) and the file whose time the document is created at."""

    featurizer_class: str
    input_dim: int
    n_features: Any  # as the featurizer declares it (equal to the rotation's width)
    tensors: dict[str, Any]
    created: Path


def _read_featurizer(unit: _Unit, model: str, location: dict[str, Any], pointer: str) -> _ReadFeaturizer:
    has = ("_featurizer" in unit.files, "_inverse_featurizer" in unit.files)
    if has == (False, False):  # indices only: the public evaluator keeps its default (identity)
        width = _width(model, location, pointer)
        beyond = [i for i in _indices(unit.files["_indices"], f"{pointer}_indices") or [] if i >= width]
        if beyond:
            raise _UnitError(
                "I119",
                f"{pointer}_indices",
                f"indices up to {max(beyond)} name features beyond the {width} values of the site, so the "
                f"unit's featurizer is not the identity and its files are missing. {_SAE_NOT_SAVED}",
            )
        return _ReadFeaturizer("IdentityFeaturizerModule", width, width, {}, unit.files["_indices"])
    if has != (True, True):
        missing = "_inverse_featurizer" if has[0] else "_featurizer"
        raise _UnitError("I120", f"{pointer}{missing}", f"unit {unit.unit_id!r} has no {missing[1:]} file")
    forward = _info(_load(unit.files["_featurizer"], f"{pointer}_featurizer"), "featurizer", pointer)
    inverse = _info(
        _load(unit.files["_inverse_featurizer"], f"{pointer}_inverse_featurizer"),
        "inverse featurizer",
        pointer,
    )
    featurizer_class = _featurizer_class(forward, inverse, pointer)
    n_features = forward.get("n_features")
    if n_features is not None and type(n_features) is not int:
        raise _UnitError(
            "I120", f"{pointer}_featurizer", f"n_features is a {type(n_features).__name__}, not an integer"
        )
    tensors: dict[str, Any] = {}
    if featurizer_class == "SubspaceFeaturizerModule":
        input_dim, tensors["rotation"] = _subspace_rotation(forward, inverse, n_features, pointer)
    else:
        input_dim = _width(model, location, pointer)
        if n_features not in (None, input_dim):
            raise _UnitError(
                "I120",
                f"{pointer}_featurizer",
                f"an identity featurizer of {input_dim} values has {n_features}",
            )
        n_features = input_dim
    return _ReadFeaturizer(featurizer_class, input_dim, n_features, tensors, unit.files["_featurizer"])


def _featurizer_class(forward: dict[str, Any], inverse: dict[str, Any], pointer: str) -> str:
    """The declared featurizer class, checked against its inverse's."""
    declared = forward.get("featurizer_class")
    if declared == "SAEFeaturizerModule":
        raise _UnitError("I119", f"{pointer}_featurizer", _SAE_NOT_SAVED)
    if not isinstance(declared, str) or declared not in FEATURIZER_CLASSES:
        raise _UnitError(
            "I119",
            f"{pointer}_featurizer",
            f"featurizer class {declared!r} has no declared featurizer type "
            f"(declared: {', '.join(FEATURIZER_CLASSES)}); submitted code is never run",
        )
    expected_inverse = FEATURIZER_CLASSES[declared][1]
    named, named_forward = inverse.get("inverse_featurizer_class"), inverse.get("featurizer_class")
    if not (isinstance(named, str) and named == expected_inverse) or not (
        named_forward is None or (isinstance(named_forward, str) and named_forward == declared)
    ):
        raise _UnitError(
            "I120",
            f"{pointer}_inverse_featurizer",
            f"the inverse of a {declared} is a {expected_inverse}, got {_short(named)}",
        )
    return declared


def _subspace_rotation(
    forward: dict[str, Any], inverse: dict[str, Any], n_features: Any, pointer: str
) -> tuple[int, Any]:
    """A subspace featurizer's input width and its rotation as a numpy array (n_features ×
    input width), after checking that the inverse holds the same rotation."""
    import torch

    matrix = _rotation(forward, "featurizer", f"{pointer}_featurizer")
    inverse_matrix = _rotation(inverse, "inverse featurizer", f"{pointer}_inverse_featurizer")
    if inverse_matrix.shape != matrix.shape or not torch.equal(inverse_matrix, matrix):
        raise _UnitError(
            "I120", f"{pointer}_inverse_featurizer", "the inverse featurizer holds another rotation"
        )
    input_dim = int(matrix.shape[0])
    if n_features != matrix.shape[1]:
        raise _UnitError(
            "I120",
            f"{pointer}_featurizer",
            f"n_features {n_features!r} but the rotation has {matrix.shape[1]} columns",
        )
    dtype = _DTYPES.get(str(matrix.dtype), "float32")  # bfloat16 widens exactly to float32
    array = matrix.detach().to(torch.float32 if dtype == "float32" else matrix.dtype).T.contiguous()
    return input_dim, array.numpy()


def _short(value: Any, width: int = 80) -> str:
    text = repr(value) if isinstance(value, (str, int, float, type(None))) else f"a {type(value).__name__}"
    return text if len(text) <= width else text[: width - 1] + "…"


def _indices(path: Path, pointer: str) -> list[int] | None:
    parsed = load_json_file(path, Limits(max_bytes=64 * 1024 * 1024))
    data = parsed.data
    if parsed.problems or not (
        data is None or (isinstance(data, list) and all(type(i) is int and i >= 0 for i in data))
    ):
        raise _UnitError("I101", pointer, f"{path.name} is not JSON null or a list of non-negative integers")
    return data


def _width(model: str, location: dict[str, Any], pointer: str) -> int:
    if model not in CAUSAL_MODELS:
        raise _UnitError(
            "I120", pointer, f"an identity featurizer's width needs a known MIB model, not {model!r}"
        )
    config = CAUSAL_MODELS[model][2]
    if location["component"] == "attention_heads":
        return len(location["heads"]) * config["d_model"] // config["n_heads"]
    return config["d_model"]


def _artifact(data: bytes, path: str) -> Artifact:
    import hashlib

    return Artifact(
        id="weights",
        role="weights",
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        bytes=len(data),
        media_type="application/x-safetensors",
    )
