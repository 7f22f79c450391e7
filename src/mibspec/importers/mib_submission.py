"""Import MIB circuit-track submission folders as circuit documents and reports.

A submission holds one folder per task and model, named ``<task>_<model>`` (``ioi_gpt2``,
``arc-easy_llama3``), with either one importance file (an EAP-IG graph with scores,
``.json`` or ``.pt``) or nine circuit files, one per grid point below k = 1 (SPEC.md I-3).
Each folder becomes ``<out>/<task>_<model>/circuit.json`` with its sidecar. Where the
folder also holds the results MIB's evaluator writes (``<task>_<model>_<split>_abs-<bool>.pkl``,
read by a restricted unpickler), or is given them from anywhere (``--results``, matched to the
folder by the task and model of the file name), a report claiming them is written beside it:
``abs-False`` is the curve of circuits ranked by signed score (CPR), ``abs-True`` by |score|
(CMD). Nine circuit files keep the edge scores they share in the circuit document.
"""

from __future__ import annotations

import re
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

from ._options import (
    KNOWN_MODELS,
    DatasetCopy,
    ImportOptions,
    OptionError,
    checked_options,
    hub_model,
    mib_model,
)
from ._results_pickle import RESULTS_PATTERN, read_results, results_name
from .eap_ig import (
    EapIgGraph,
    ImportResult,
    _MalformedError,
    graph_document,
    malformed_finding,
    plan_circuit,
    read_eap_ig,
    replace_finding,
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
    #: Results files from anywhere (``--results``), each matched to the ``<task>_<model>``
    #: folder its name names.
    results: tuple[Path, ...] = ()

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
    dataset, result.findings = checked_options(options)
    if result.findings:
        return result
    folders = submission_folders(source)
    if not folders:
        result.findings.append(
            make_finding(cat, None, "I107", "", detail=f"{source} holds no <task>_<model> folder").located(
                1, 1
            )
        )
        return result
    given = _given_results(folders, options.results)
    if isinstance(given, Finding):
        result.findings.append(given)
        return result
    reader = InputFolder(source)
    plan = OutputPlan(out_dir)
    documents: list[Path] = []
    reports: list[Path] = []
    for folder in folders:
        try:
            converted = _convert(reader, folder, options, dataset, given.get(folder.name, []))
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
        result.notes += [n for n in (converted[4], _no_report_note(name, planned[2])) if n is not None]
        reports += [planned[2]] if planned[2] is not None else []
    return _finish(source, options, plan, result, (documents, reports))


def _finish(
    source: Path,
    options: SubmissionOptions,
    plan: OutputPlan,
    result: ImportResult,
    written: tuple[list[Path], list[Path]],
) -> ImportResult:
    """Refuse report options no report uses (I111) and files another input wrote (I126, a
    folder whose circuits are unchanged being the same submission's); else write the plan."""
    cat = catalogue()
    documents, reports = written
    if not result.findings and not reports:
        unused = _unused_report_options(options)
        if unused is not None:
            result.findings.append(make_finding(cat, None, "I111", "", detail=unused).located(1, 1))
    extra = [*options.results, *([options.model_files] if options.model_files else [])]
    inputs = Inputs([source, *extra])
    if not result.findings:
        sidecars = set(result.sidecars)
        same = lambda path: any(plan.unchanged(s) for s in sidecars if s.parent == path.parent)  # noqa: E731
        result.findings.extend(replace_finding(cat, exc) for exc in plan.replaced(inputs, same))
    if result.findings:
        result.sidecars, result.notes = [], []
        return result
    plan.write(inputs)
    result.written = [*documents, *reports]
    return result


def _no_report_note(name: str, report: Path | None) -> str | None:
    if report is not None:
        return None
    return (
        f"{name}: no report, since the folder holds no results file and none was given with "
        f"--results ({name}_<split>_abs-<True|False>.pkl, as MIB's run_evaluation.py writes it); "
        "the circuit document alone was written"
    )


#: A folder read: output name, circuit document, sidecar tensors, report (or None), note (or None).
_Converted = tuple[str, Circuit, dict[str, Any], dict[str, Any] | None, str | None]


def _plan(
    plan: OutputPlan, folder: Path, converted: _Converted, dataset: DatasetCopy | dict[str, str] | None
) -> tuple[Path, Path, Path | None]:
    """Plan one folder's circuit document, sidecar and (with results) report and dataset copy;
    their paths (the report's None without results).

    Raises:
        NameClashError: another folder of the submission is written under the same name.
    """
    from mibspec.reference_impl.scoring.folder import artifact_entry

    name, document, tensors, report, _ = converted
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


def _given_results(folders: list[Path], files: tuple[Path, ...]) -> dict[str, list[Path]] | Finding:
    """The results files given with ``--results``, by the name of the folder each one's name
    names; the finding refusing one that is not named as MIB names results, that names no
    folder of the submission, or that repeats another's folder, split and ranking."""
    cat = catalogue()
    by_name = {folder.name: folder for folder in folders}
    matched: dict[str, list[Path]] = {}
    seen: dict[tuple[str, str, str], Path] = {}
    for file in files:
        named = results_name(file.name)
        detail = None
        if named is None:
            detail = (
                f"--results {file}: not named {RESULTS_PATTERN}, as MIB's run_evaluation.py names results"
            )
        elif named.folder not in by_name:
            detail = (
                f"--results {file}: names the folder {named.folder}, which the submission does not "
                f"have (its folders: {', '.join(sorted(by_name)) or 'none'})"
            )
        else:
            inside = [p for p in by_name[named.folder].glob("*.pkl") if results_name(p.name) == named]
            key = (named.folder, named.split, named.ranking)
            other = seen.get(key) or (inside[0] if inside else None)
            if other is not None:
                detail = (
                    f"--results {file}: the folder {named.folder} already has results for the "
                    f"{named.split} split ranked {named.ranking} ({other}); give one file per folder, "
                    "split and ranking"
                )
            seen[key] = file
        if detail is not None:
            return make_finding(cat, None, "I112", "", detail=detail).located(1, 1)
        if named is not None:
            matched.setdefault(named.folder, []).append(file)
    return matched


#: The options only a report records, by the flag that gives them.
_REPORT_OPTIONS = {
    "dataset": "--dataset",
    "split": "--split",
    "counterfactual_type": "--counterfactual-type",
    "method": "--method",
}


def _unused_report_options(options: SubmissionOptions) -> str | None:
    """Why the report-only options given cannot be used, when no folder wrote a report."""
    given = [flag for name, flag in _REPORT_OPTIONS.items() if getattr(options, name) is not None]
    if not given:
        return None
    return (
        f"{', '.join(given)}: recorded in reports only, and no folder holds results, so no report "
        f"is written; give the results files ({RESULTS_PATTERN}) with --results, or drop the option(s)"
    )


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
    reader: InputFolder,
    path: Path,
    options: SubmissionOptions,
    dataset: DatasetCopy | dict[str, str] | None,
    given: list[Path],
) -> _Converted:
    """One ``<task>_<model>`` folder read (with the results files ``given`` for it): its output
    folder's name, circuit document, sidecar tensors and report (None without results). The
    model options (``--model-revision``, ``--model-files``) are recorded in the circuit
    document too, so that they are kept when no report is written.

    Raises:
        _MalformedError, OptionError: the folder cannot be imported.
        OutsideFolderError: a file or folder to read leads out of the submission.
    """
    folder = _folder(reader, path)
    folder.results.extend(given)
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
        points, note = None, None
    elif len(graphs) == _N_CIRCUITS:
        document, tensors, points = _nine(folder, graphs, grid)
        note = scores_note(path, graphs)
    else:
        raise _MalformedError("I107", "", detail=_missing(folder, graphs, grid), _file=path)
    name = safe_name(folder.task, folder.model)
    if options.model_revision is not None or options.model_files is not None:
        block = _model_block(folder, options)
        if options.model_revision is not None:
            block["revision"] = options.model_revision
        if options.model_files is not None:
            block["files"] = pinned_model_files(options.model_files)
        document = document.model_copy(update={"model": model_ref(block)})
    built = _report(folder, document, tensors, points, options) if folder.results else None
    report = None
    if built is not None:
        report = options.apply(dump(built), dataset)
        if options.model_files is not None:
            report["model"]["files"] = pinned_model_files(options.model_files)
    return name, document, tensors, report, note


def _model_block(folder: _Folder, options: SubmissionOptions) -> dict[str, Any]:
    """The unpinned ``model`` block of the folder's model.

    Raises:
        _MalformedError: a model outside MIB's five, without ``--architecture``.
    """
    if folder.model in KNOWN_MODELS:
        return hub_model(folder.model, None)
    if options.architecture is not None:
        return {"source": "hub", "id": folder.model, "architecture": options.architecture}
    raise _MalformedError(
        "I110",
        "",
        detail=f"model {folder.model!r} is not one of MIB's ({', '.join(KNOWN_MODELS)}); "
        "give its architecture with --architecture",
        _file=folder.path,
    )


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

    from mibspec.metrics.circuit import edges_at

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
    scores = _shared_scores(rows)
    first, tensors = graph_document(
        EapIgGraph(universe, scores, membership[0]), f"the MIB submission folder {folder.path.name}"
    )
    tensors = {"membership": membership, **({"scores": tensors["scores"]} if scores is not None else {})}
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


def _shared_scores(graphs: list[EapIgGraph]) -> Any | None:
    """The edge scores the circuit files carry, when they all carry the same ones (EAP-IG's
    ``to_json`` writes each circuit with the scores it was cut from); else ``None``."""
    import numpy as np

    first = graphs[0].edge_scores
    if first is None or any(
        g.edge_scores is None or not np.array_equal(g.edge_scores, first) for g in graphs[1:]
    ):
        return None
    return first


def scores_note(folder: Path, graphs: list[EapIgGraph]) -> str | None:
    """The note for circuit files whose edge scores are not kept: they differ between files."""
    scored = sum(g.edge_scores is not None for g in graphs)
    if scored == 0 or _shared_scores(graphs) is not None:
        return None
    return (
        f"{folder.name}: the edge scores of its circuit files were not kept ({scored} of "
        f"{len(graphs)} files carry scores, and not the same ones); the circuits were"
    )


def _results(folder: _Folder, split: str | None) -> tuple[str, dict[str, dict[str, Any]]]:
    """The split and, per ranking, the evaluator's results of the folder."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for file in folder.results:
        named = results_name(file.name)
        if named is None or named.folder != f"{folder.task}_{folder.model}":
            raise _MalformedError(
                "I112",
                "",
                detail=f"results file {file.name!r} is not named "
                f"{folder.task}_{folder.model}_<split>_abs-<True|False>.pkl",
                _file=file,
            )
        found.setdefault(named.split, {})[named.ranking] = read_results(file)
    splits = [split] if split is not None else sorted(found)
    if len(splits) != 1 or splits[0] not in found:
        raise _MalformedError(
            "I112",
            "",
            detail=f"results for the splits {sorted(found)}; choose one with --split",
            _file=folder.path,
        )
    return splits[0], found[splits[0]]


def _recorded_sizes(
    document: Circuit, tensors: dict[str, Any], points: list[int] | None, grid: list[float], ranking: Any
) -> list[float | None]:
    """The size ``mib-2025`` says a report records (``recorded_size``) of each point's circuit:
    the row it names, else the circuit rebuilt from the document's scores (MC-12); ``None``
    where nothing determines the circuit (neuron-level scores), which then declares no size.
    MIB's own recorded sizes (``weighted_edge_counts``, after one pruning round, PR-5) are not
    this size and are not copied."""
    from mibspec.metrics.graph import GraphConfig, GraphUniverse, recorded_size
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
    model = _model_block(folder, options)
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
        model=mib_model(model, "circuit"),
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
