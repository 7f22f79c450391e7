"""Import MIB circuit-track submission folders as circuit documents and reports.

A submission holds one folder per task and model, named ``<task>_<model>`` (``ioi_gpt2``,
``arc-easy_llama3``), with either one importance file (an EAP-IG graph with scores,
``.json`` or ``.pt``) or nine circuit files, one per grid point below k = 1 (SPEC.md I-3).
Each folder becomes ``<out>/<task>_<model>/circuit.json`` with its sidecar. Where the
folder also holds the results MIB's evaluator writes (``<task>_<model>_<split>_abs-<bool>.pkl``,
read by a restricted unpickler), a report claiming them is written beside it: ``abs-False``
is the curve of circuits ranked by signed score (CPR), ``abs-True`` by |score| (CMD).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mibspec.core.folders import InputFolder, NameClashError, OutputPlan, OutsideFolderError, safe_name
from mibspec.core.outputs import Inputs
from mibspec.core.version import __version__
from mibspec.documents import CircuitReport, document_bytes, dump, parse_document
from mibspec.documents.common import Method, Provenance, ToolInfo, model_ref
from mibspec.documents.kinds import Circuit, CircuitEntry
from mibspec.documents.report import (
    CircuitClaims,
    CircuitSettings,
    Curve,
    NonNegativeClaim,
    ScalarClaim,
    TaskRef,
)
from mibspec.validator import Finding, catalogue, load_profile, make_finding

from ._options import KNOWN_MODELS, DatasetCopy, ImportOptions, OptionError, hub_model
from ._safe_pickle import UnsafePickleError, load_results_pickle
from .eap_ig import (
    EapIgGraph,
    ImportResult,
    _MalformedError,
    graph_document,
    malformed_finding,
    plan_circuit,
    read_eap_ig,
    tensor_ref,
    unfit_value,
)

__all__ = [
    "SubmissionOptions",
    "circuit_grid",
    "import_mib_submission",
    "pinned_model_files",
    "submission_folders",
]

_GRAPH_SUFFIXES = (".json", ".pt")
_RESULTS = re.compile(r"^(?P<name>.+)_(?P<split>train|validation|test)_abs-(?P<abs>True|False)\.pkl$")
_N_CIRCUITS = 9
_CLASS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SubmissionOptions(ImportOptions):
    """The options of :class:`ImportOptions`, plus what a MIB folder cannot say."""

    #: Counterfactual type of the corrupted run (recomputation needs it).
    counterfactual_type: str | None = None
    #: Architecture of a model outside MIB's five (``--architecture``): the model class its
    #: config.json names under ``architectures``, e.g. ``GPT2LMHeadModel``.
    architecture: str | None = None
    method: str | None = None
    #: A local copy of the model whose files (config, weights, tokenizer) are pinned by hash.
    model_files: Path | None = None

    def check(self) -> DatasetCopy | dict[str, str] | None:
        """Validate the options, with the architecture: a class name, and the one the
        config.json of ``model_files`` names when both are given.

        Raises:
            OptionError: a malformed option.
        """
        if self.architecture is not None:
            if not _CLASS_NAME.match(self.architecture):
                raise OptionError(
                    f"--architecture {self.architecture!r} is not a model class name: give the one "
                    'the model\'s config.json names under "architectures", e.g. GPT2LMHeadModel'
                )
            if self.model_files is not None:
                named = _config_architectures(self.model_files)
                if named is not None and self.architecture not in named:
                    raise OptionError(
                        f"--architecture {self.architecture!r}: the config.json of --model-files "
                        f"names {', '.join(map(repr, named)) or 'no architecture'}"
                    )
        return super().check()


@dataclass
class _Folder:
    path: Path
    task: str
    model: str
    graphs: list[Path] = field(default_factory=list)
    results: list[Path] = field(default_factory=list)


def circuit_grid() -> list[float]:
    """The grid points of the nine circuits: ``mib-2025``'s grid below k = 1."""
    return [k for k in load_profile("mib-2025").grid if k < 1]


def submission_folders(source: Path) -> list[Path]:
    """``source`` itself when it holds graph files, else its sub-folders (sorted)."""
    if any(p.suffix in _GRAPH_SUFFIXES for p in source.iterdir() if p.is_file()):
        return [source]
    return sorted(p for p in source.iterdir() if p.is_dir())


def import_mib_submission(
    source: Path, out_dir: Path, options: SubmissionOptions | None = None
) -> ImportResult:
    """Import every ``<task>_<model>`` folder of ``source`` (or ``source`` itself).

    Never raises for bad input: problems come back as findings (nothing is written then).

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is one of the inputs.
    """
    options = options or SubmissionOptions()
    cat = catalogue()
    result = ImportResult()
    try:
        dataset = options.check()
    except OptionError as exc:
        result.findings.append(make_finding(cat, None, "I111", "", detail=exc.detail).located(1, 1))
        return result
    except OutsideFolderError as exc:
        result.findings.append(make_finding(cat, None, "I127", "", detail=str(exc)).located(1, 1))
        return result
    folders = submission_folders(source)
    if not folders:
        result.findings.append(
            make_finding(cat, None, "I107", "", detail=f"{source} holds no <task>_<model> folder").located(
                1, 1
            )
        )
        return result
    reader = InputFolder(source)
    plan = OutputPlan(out_dir)
    documents: list[Path] = []
    reports: list[Path] = []
    for folder in folders:
        try:
            converted = _convert(reader, folder, options, dataset)
            name, planned = converted[0], _plan(plan, folder, converted, dataset)
        except _MalformedError as exc:
            where = exc.params.pop("_file", folder)
            finding = malformed_finding(cat, exc, where if where.is_file() else folder / ".")
            result.findings.append(_in_file(finding, where))
            continue
        except OptionError as exc:
            result.findings.append(make_finding(cat, None, "I111", "", detail=exc.detail).located(1, 1))
            continue
        except OutsideFolderError as exc:
            result.findings.append(make_finding(cat, None, "I127", "", detail=str(exc)).located(1, 1))
            continue
        except NameClashError as exc:
            result.findings.append(make_finding(cat, None, "I126", "", detail=str(exc)).located(1, 1))
            continue
        except ValidationError as exc:  # a value the documents cannot hold, which no check named
            detail = f"{folder.name}: {unfit_value(exc)}"
            result.findings.append(make_finding(cat, None, "I101", "", detail=detail).located(1, 1))
            continue
        documents.append(planned[0])
        result.sidecars.append(planned[1])
        if planned[2] is None:
            result.notes.append(
                f"{name}: no report, since the folder holds no results file "
                f"({name}_<split>_abs-<True|False>.pkl, as MIB's run_evaluation.py writes it); "
                "the circuit document alone was written"
            )
        else:
            reports.append(planned[2])
    if result.findings:
        result.sidecars, result.notes = [], []
        return result
    plan.write(Inputs([source, *([options.model_files] if options.model_files else [])]))
    result.written = [*documents, *reports]
    return result


_Converted = tuple[str, Circuit, dict[str, Any], dict[str, Any] | None]


def _plan(
    plan: OutputPlan, folder: Path, converted: _Converted, dataset: DatasetCopy | dict[str, str] | None
) -> tuple[Path, Path, Path | None]:
    """Plan one folder's circuit document, sidecar and (with results) report and dataset copy;
    their paths (the report's None without results).

    Raises:
        NameClashError: another folder of the submission is written under the same name.
    """
    from mibspec.reference_impl.producers.folder import artifact_entry

    name, document, tensors, report = converted
    source = f"the folder {folder.name}"
    circuit, sidecar, data = plan_circuit(plan, name, document, tensors, source)
    if report is None:
        return circuit, sidecar, None
    entry = artifact_entry(data, "circuit", "circuit", "circuit.json", "application/json", kind="circuit")
    written = parse_document("report", {**report, "artifacts": [entry, *report.get("artifacts", [])]})
    for rel, payload in ImportOptions.files(dataset):
        plan.add(f"{name}/{rel}", payload, source=source)
    return circuit, sidecar, plan.add(f"{name}/report.json", document_bytes(written), source=source)


def _in_file(finding: Finding, where: Path) -> Finding:
    from dataclasses import replace

    return replace(finding, message=f"{where.name}: {finding.message}")


def _folder(reader: InputFolder, path: Path) -> _Folder:
    parts = path.name.split("_")
    if len(parts) != 2 or not all(parts):
        raise _MalformedError(
            "I110",
            "",
            detail=f"folder {path.name!r} is not named <task>_<model> (for example ioi_gpt2)",
            _file=path,
        )
    folder = _Folder(path, parts[0], parts[1])
    for item in reader.listing(path):
        if item.is_file() and item.suffix in _GRAPH_SUFFIXES:
            folder.graphs.append(reader.check(item))
        elif item.is_file() and item.suffix == ".pkl":
            folder.results.append(reader.check(item))
    return folder


def _convert(
    reader: InputFolder, path: Path, options: SubmissionOptions, dataset: DatasetCopy | dict[str, str] | None
) -> _Converted:
    """One ``<task>_<model>`` folder read: its output folder's name, circuit document, sidecar
    tensors and report (None without results).

    Raises:
        _MalformedError, OptionError: the folder cannot be imported.
        OutsideFolderError: a file or folder to read leads out of the submission.
    """
    folder = _folder(reader, path)
    grid = circuit_grid()
    graphs = []
    for file in folder.graphs:
        try:
            graphs.append(read_eap_ig(file))
        except _MalformedError as exc:
            exc.params["_file"] = file
            raise
    scored = [g for g in graphs if g.edge_scores is not None]
    if len(graphs) == 1 and scored:
        document, tensors = graph_document(
            graphs[0], f"the MIB submission file {path.name}/{folder.graphs[0].name}"
        )
        points = None
    elif len(graphs) == _N_CIRCUITS:
        document, tensors, points = _nine(folder, graphs, grid)
    else:
        raise _MalformedError("I107", "", detail=_missing(folder, graphs, grid), _file=path)
    name = safe_name(folder.task, folder.model)
    built = _report(folder, document, tensors, points, options) if folder.results else None
    report = None
    if built is not None:
        report = options.apply(dump(built), dataset)
        if options.model_files is not None:
            report["model"]["files"] = pinned_model_files(options.model_files)
    return name, document, tensors, report


def _missing(folder: _Folder, graphs: list[EapIgGraph], grid: list[float]) -> str:
    found = ", ".join(p.name for p in folder.graphs) or "no .json or .pt file"
    if len(graphs) == 1:
        return (
            f"{folder.path.name}: {found} carries no edge scores, so it is one circuit, "
            "not an importance file; "
            f"give one importance file, or {_N_CIRCUITS} circuit files (one per k in {grid})"
        )
    if len(graphs) < _N_CIRCUITS:
        return (
            f"{folder.path.name}: {found}; expected one importance file or {_N_CIRCUITS} circuit files "
            f"(one per k in {grid}): {_N_CIRCUITS - len(graphs)} circuit file(s) missing"
        )
    return (
        f"{folder.path.name}: {len(graphs)} graph files ({found}); "
        f"expected one importance file or {_N_CIRCUITS}"
    )


def _nine(
    folder: _Folder, graphs: list[EapIgGraph], grid: list[float]
) -> tuple[Circuit, dict[str, Any], list[int]]:
    import numpy as np

    from mibspec.reference_impl.metrics.circuit import edges_at

    universe = graphs[0].universe
    for file, graph in zip(folder.graphs, graphs, strict=True):
        if graph.universe.cfg != universe.cfg:
            raise _MalformedError(
                "I112", "/cfg", detail=f"its cfg differs from that of {folder.graphs[0].name}", _file=file
            )
    # The public backend sorts the circuits by size and places the i-th at the i-th grid point.
    order = sorted(range(len(graphs)), key=lambda i: (int(graphs[i].in_graph.sum()), folder.graphs[i].name))
    for slot, i in enumerate(order):
        size, limit = int(graphs[i].in_graph.sum()), edges_at(grid[slot], universe.n_edges, "floor")
        if size > limit:
            raise _MalformedError(
                "I108",
                "",
                file=folder.graphs[i].name,
                size=size,
                limit=limit,
                k=grid[slot],
                _file=folder.graphs[i],
            )
    rows = [graphs[i] for i in order]
    membership = np.stack([g.in_graph for g in rows] + [np.ones(universe.n_edges, dtype=bool)])
    first, tensors = graph_document(
        EapIgGraph(universe, None, membership[0]), f"the MIB submission folder {folder.path.name}"
    )
    tensors = {"membership": membership}
    n, n_rows = universe.n_edges, len(rows) + 1
    update: dict[str, Any] = {"membership": tensor_ref("membership", [n_rows, n], "bool")}
    if all(g.node_in_graph is not None for g in rows):
        flags = [g.node_in_graph for g in rows if g.node_in_graph is not None]
        nodes = np.stack([*flags, np.ones(universe.n_forward, dtype=bool)])
        tensors["node_membership"] = nodes
        update["node_membership"] = tensor_ref("node_membership", [n_rows, universe.n_forward], "bool")
    update["circuits"] = [
        CircuitEntry(
            index=index,
            k=k,
            n_edges=int(membership[index].sum()),
            weighted_size=universe.weighted_edge_count(membership[index]),
        )
        for index, k in enumerate([*grid, 1.0])
    ]
    return first.model_copy(update=update), tensors, list(range(n_rows))


def _results(folder: _Folder, split: str | None) -> tuple[str, dict[str, dict[str, Any]]]:
    """The split and, per ranking, the evaluator's results of the folder."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for file in folder.results:
        match = _RESULTS.match(file.name)
        if match is None or match["name"] != f"{folder.task}_{folder.model}":
            raise _MalformedError(
                "I112",
                "",
                detail=f"results file {file.name!r} is not named "
                f"{folder.task}_{folder.model}_<split>_abs-<True|False>.pkl",
                _file=file,
            )
        try:
            data = load_results_pickle(file)
        except UnsafePickleError as exc:
            raise _MalformedError("I109", "", detail=str(exc), _file=file) from None
        ranking = "absolute" if match["abs"] == "True" else "signed"
        found.setdefault(match["split"], {})[ranking] = _check_results(data, file)
    splits = [split] if split is not None else sorted(found)
    if len(splits) != 1 or splits[0] not in found:
        raise _MalformedError(
            "I112",
            "",
            detail=f"results for the splits {sorted(found)}; choose one with --split",
            _file=folder.path,
        )
    return splits[0], found[splits[0]]


def _check_results(data: Any, file: Path) -> dict[str, Any]:
    import numpy as np

    keys = ("weighted_edge_counts", "faithfulnesses", "area_under", "area_from_1")
    grid = load_profile("mib-2025").grid
    if not isinstance(data, dict) or not all(k in data for k in keys):
        raise _MalformedError(
            "I101", "", detail=f"a results file is a dict with {', '.join(keys)}", _file=file
        )
    values = {}
    for key in keys:
        value = data[key]
        if key in keys[:2]:
            if not isinstance(value, (list, tuple)) and not (
                isinstance(value, np.ndarray) and value.ndim == 1
            ):
                raise _MalformedError("I101", "", detail=f"{key} must be a list of numbers", _file=file)
            if len(value) != len(grid):  # before an array is turned into Python numbers
                raise _MalformedError(
                    "I112", "", detail=f"{key} has {len(value)} values for a grid of {len(grid)}", _file=file
                )
            items = value.tolist() if isinstance(value, np.ndarray) else list(value)
        else:
            items = [value]
        # an integer beyond the float range (10**400) is not a finite number either
        numbers = [
            float(v)
            for v in items
            if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= sys.float_info.max
        ]
        if len(numbers) != len(items) or not all(math.isfinite(v) for v in numbers):
            raise _MalformedError("I101", "", detail=f"{key} must hold finite numbers", _file=file)
        if key == keys[0] and any(number < 0 for number in numbers):
            raise _MalformedError("I101", "", detail=f"{key} must not be negative", _file=file)
        if key in keys[:2] and len(numbers) != len(grid):
            raise _MalformedError(
                "I112", "", detail=f"{key} has {len(numbers)} values for a grid of {len(grid)}", _file=file
            )
        values[key] = numbers if key in keys[:2] else numbers[0]
    return values


def _recorded_sizes(
    document: Circuit, tensors: dict[str, Any], points: list[int] | None, grid: list[float], ranking: Any
) -> list[float | None]:
    """The size ``mib-2025`` says a report records (``recorded_size``) of each point's circuit:
    the row it names, else the circuit rebuilt from the document's scores (MC-12); ``None``
    where nothing determines the circuit (neuron-level scores), which then declares no size.
    MIB's own recorded sizes (``weighted_edge_counts``, after one pruning round, PR-5) are not
    this size and are not copied."""
    from mibspec.reference_impl.graph import GraphConfig, GraphUniverse, recorded_size
    from mibspec.reference_impl.recompute import RebuiltCircuits, UnusableInputError

    graph = document.graph
    universe = GraphUniverse(
        GraphConfig(graph.n_layers, graph.n_heads, graph.parallel_attn_mlp, graph.d_model)
    )
    convention = load_profile("mib-2025").recorded_size
    if points is not None:
        return [recorded_size(universe, tensors["membership"][index], None, convention) for index in points]
    rebuilt = RebuiltCircuits(
        universe,
        document.granularity,
        "floor",
        edge_scores=tensors.get("scores"),
        node_scores=tensors.get("node_scores"),
        node_scored=tensors.get("node_scored"),
    )
    try:
        return [recorded_size(universe, rebuilt.circuit(k, ranking), None, convention) for k in grid]
    except UnusableInputError:
        return [None] * len(grid)


def _report(
    folder: _Folder,
    document: Circuit,
    tensors: dict[str, Any],
    points: list[int] | None,
    options: SubmissionOptions,
) -> CircuitReport:
    split, results = _results(folder, options.split)
    profile = load_profile("mib-2025")
    grid = list(profile.grid)
    if folder.model in KNOWN_MODELS:
        model = hub_model(folder.model, None)
    elif options.architecture is not None:
        model = {"source": "hub", "id": folder.model, "architecture": options.architecture}
    else:
        raise _MalformedError(
            "I110",
            "",
            detail=f"model {folder.model!r} is not one of MIB's ({', '.join(KNOWN_MODELS)}); "
            "give its architecture with --architecture",
            _file=folder.path,
        )
    curves = []
    for ranking in ("signed", "absolute"):
        if ranking not in results:
            continue
        data = results[ranking]
        sizes = _recorded_sizes(document, tensors, points, grid, ranking)
        curve_points = []
        for i, k in enumerate(grid):
            point: dict[str, Any] = {"k": k}
            if points is not None:
                point["circuit"] = points[i]
            if sizes[i] is not None:
                point["weighted_size"] = sizes[i]
            point["faithfulness"] = data["faithfulnesses"][i]
            curve_points.append(point)
        curves.append(Curve.model_validate({"ranking": ranking, "points": curve_points}))
    # _results returns at least one ranking
    cpr_from = results.get("signed") or results["absolute"]
    cmd_from = results.get("absolute") or results["signed"]
    task: dict[str, Any] = {"name": folder.task.replace("-", "_"), "split": split}
    # the type given, else the one the profile's public loader reads for the task
    counterfactual = options.counterfactual_type or profile.counterfactual_types.get(task["name"])
    if counterfactual is not None:
        task["counterfactual_type"] = counterfactual
    method = options.method or folder.path.resolve().parent.name
    return CircuitReport(
        profile="mib-2025",
        title=f"{method} on {folder.task} ({folder.model}), imported from a MIB submission",
        description=(
            f"Imported from the MIB submission folder {folder.path.name} by mibspec {__version__}: the "
            "circuits from its graph files, the faithfulness curves, CPR and CMD from the results MIB's "
            "evaluator wrote."
        ),
        method=Method(name=method),
        task=TaskRef.model_validate(task),
        model=model_ref(model),
        settings=CircuitSettings(
            ablation="counterfactual",
            granularity=document.granularity,
            grid=grid,
            ranking={
                "cpr": "signed" if "signed" in results else "absolute",
                "cmd": "absolute" if "absolute" in results else "signed",
            },
            edge_count_rounding="floor",
            metric="logit_difference",
        ),
        claims=CircuitClaims(
            circuit="circuit",
            n_edges=document.graph.n_edges,
            curves=curves,
            cpr=ScalarClaim(value=cpr_from["area_under"]),
            cmd=NonNegativeClaim(value=cmd_from["area_from_1"]),
        ),
        provenance=Provenance(
            tool=ToolInfo(name="mibspec", version=__version__),
            created=_created(folder),
            command=f"mibspec import mib-submission {folder.path.name}",
        ),
    )


_MODEL_FILES = ("config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json")


def _config_architectures(folder: Path) -> list[str] | None:
    """The ``architectures`` a model folder's config.json names, or ``None`` when it has no
    readable config.json with such a list (:func:`_pinned_files` reports a missing one)."""
    from mibspec.core.strict_json import load_json_file

    try:
        parsed = load_json_file(InputFolder(folder).check(folder / "config.json"))
    except OSError:
        return None
    if parsed.problems or not isinstance(parsed.data, dict):
        return None
    named = parsed.data.get("architectures")
    if not isinstance(named, list) or not all(isinstance(name, str) for name in named):
        return None
    return named


def pinned_model_files(folder: Path) -> dict[str, str]:
    """SHA-256 of the model files in ``folder`` that recomputation reads (SPEC.md M-4), by name.

    Raises:
        OptionError: the folder holds no config.json.
        OutsideFolderError: a model file leads out of the folder through a link.
    """
    from mibspec.core.files import sha256_file

    if not (folder / "config.json").is_file():
        raise OptionError(f"--model-files {folder}: no config.json there")
    reader = InputFolder(folder)
    names = [n for n in _MODEL_FILES if (folder / n).is_file()]
    names += sorted(p.name for p in folder.glob("model-*-of-*.safetensors"))
    return {name: sha256_file(reader.check(folder / name)) for name in sorted(names)}


def _created(folder: _Folder) -> str:
    from .mib_results import source_created

    return source_created(max(folder.results, key=lambda p: p.stat().st_mtime))
