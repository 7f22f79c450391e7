"""Import MIB circuit-track leaderboard results as circuit reports.

A results file holds, per model and task, the faithfulness curves the public
backend computed for the CPR and CMD rankings::

    {"method_name": ..., "description": ...,
     "results": [{"model_id": "gpt2", "scores": {"ioi": {"CPR": {"edge_counts": [...],
                                                                  "faithfulness": [...]},
                                                          "CMD": {...}}}}]}

The public backend places the i-th smallest circuit at the i-th grid point and
forces faithfulness at k = 1 to 1.0; the imported reports therefore declare the
``mib-2025`` profile. CPR and CMD are computed from the curves by the reference
metrics, as the leaderboard does. The files record neither the circuits, nor the
model revision, nor the baseline metrics: the reports say so, and recomputation
reports what is missing. The file's edge counts only order the circuits: a report
records the size of a circuit it declares (SPEC.md K-9), and these circuits are not
in the file, so the points declare no size.

The per-task results pickle MIB's ``run_evaluation.py`` writes
(``<task>_<model>_<split>_abs-<True|False>.pkl``) is read too, by the restricted unpickler
only: one report of its one curve, with the same conventions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from mibspec.core.findings import Finding
from mibspec.core.folders import NameClashError, OutputPlan, safe_name
from mibspec.core.outputs import Inputs
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.version import __version__
from mibspec.documents import CircuitReport, document_bytes, dump, parse_document
from mibspec.documents.common import Method, Provenance, ToolInfo
from mibspec.documents.report import (
    CircuitClaims,
    CircuitSettings,
    Curve,
    CurvePoint,
    NonNegativeClaim,
    Ranking,
    ScalarClaim,
    TaskRef,
)
from mibspec.validator import Limits, catalogue, load_json_file, load_profile, make_finding

from ._options import KNOWN_MODELS, ImportOptions, checked_options, mib_model
from ._results_pickle import RESULTS_PATTERN, ResultsName, read_results, results_name
from .eap_ig import ImportResult, _MalformedError, import_parse_findings, unfit_value

__all__ = ["KNOWN_MODELS", "import_mib_circuit_results", "import_reports", "source_created"]


def import_mib_circuit_results(
    source: Path | Sequence[Path], out_dir: Path, options: ImportOptions | None = None
) -> ImportResult:
    """Write ``out_dir/<task>_<model>_<method>/report.json`` for every model and task in each
    results file ``source`` (with the model revision, dataset and split of ``options``, SPEC.md
    I-4): a leaderboard results JSON, or a results pickle of MIB's ``run_evaluation.py`` (read
    by the restricted unpickler; task, model, split and ranking from its name)."""
    return import_reports(source, out_dir, _any_reports, options, read=_read_pickle)


def _any_reports(data: Any, source: Path) -> Iterator[tuple[str, CircuitReport, str]]:
    """The reports of a results pickle or of a leaderboard results JSON."""
    return _pickle_reports(data, source) if _is_pickle(source) else _reports(data, source)


def _is_pickle(source: Path) -> bool:
    """A pickle by its name, or by its first byte (protocol 2 and later open with 0x80)."""
    if source.suffix in (".pkl", ".pickle"):
        return True
    with source.open("rb") as handle:
        return handle.read(1) == b"\x80"


def import_reports(
    sources: Path | Sequence[Path],
    out_dir: Path,
    build: Callable[[Any, Path], Iterator[tuple[str, BaseModel, str]]],
    options: ImportOptions | None = None,
    read: Callable[[Path], Any] | None = None,
) -> ImportResult:
    """Parse each of ``sources`` strictly, build ``(folder name, report model, pointer)`` triples
    with ``build`` (the pointer: where in the source the report comes from) and write each as
    ``out_dir/<name>/report.json`` (atomically, through the report model), with ``options``
    recorded and a dataset document copied beside each. Parse errors, malformed options,
    :class:`_MalformedError`, two reports of one folder name (I126, across all the sources) and
    a report already in ``out_dir`` that another command or source wrote (I126, SPEC.md I-7)
    become located findings, each naming its source when there are several; nothing is
    written unless every source converts.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is a source (or a link to it).
    """
    paths = [sources] if isinstance(sources, Path) else list(sources)
    result = ImportResult()
    options = options or ImportOptions()
    dataset, result.findings = checked_options(options)
    if result.findings:
        return result
    plan = OutputPlan(out_dir)
    commands: dict[Path, tuple[str, str]] = {}  # report path → (its provenance command, its source)
    for source in paths:
        pickled = read if read is not None and _is_pickle(source) else None
        findings = _plan_source(source, plan, (build, pickled), options, dataset, commands, result)
        named = len(paths) > 1 and pickled is None  # a pickle's findings already name their file
        result.findings.extend(_named(f, source) if named else f for f in findings)
    if not result.findings:
        inputs = Inputs(paths)
        result.findings.extend(_replaced_elsewhere(plan, commands, inputs))
    if result.findings:
        result.written = []
        return result
    plan.write(inputs)
    return result


def _plan_source(
    source: Path,
    plan: OutputPlan,
    readers: tuple[Callable[[Any, Path], Iterator[tuple[str, BaseModel, str]]], Callable[[Path], Any] | None],
    options: ImportOptions,
    dataset: Any,
    commands: dict[Path, tuple[str, str]],
    result: ImportResult,
) -> list[Finding]:
    """Plan the reports of one source (``readers``: the builder, and the reader of a pickled
    source, None for strict JSON); its findings."""
    build, read = readers
    cat = catalogue()
    parsed: Any = None
    if read is None:
        parsed = load_json_file(source, Limits())
        if parsed.problems:
            return list(import_parse_findings(parsed, cat))
    try:
        data = parsed.data if read is None else read(source)
        if read is not None:
            _check_split(source, options)
        reports = list(build(data, source))
    except _MalformedError as exc:
        params = {k: v for k, v in exc.params.items() if not k.startswith("_")}
        finding = make_finding(cat, None, exc.code, exc.pointer, **params)
        if read is not None:  # a pickle has no lines: the finding names the file
            finding = replace(finding, message=f"{source.name}: {finding.message}")
        return [_located(finding, parsed, exc.pointer)]
    except ValidationError as exc:  # a value the report cannot hold, which no check above named
        return [make_finding(cat, None, "I101", "", detail=unfit_value(exc)).located(1, 1)]
    findings = []
    for name, report, pointer in reports:
        where = f"{source.name} at {pointer}" if pointer else source.name
        try:
            for rel, data in options.files(dataset):
                plan.add(f"{name}/{rel}", data, source=where)
            written = parse_document("report", options.apply(dump(report), dataset))
            path = plan.add(f"{name}/report.json", document_bytes(written), source=where)
        except NameClashError as exc:
            finding = make_finding(cat, None, "I126", pointer, detail=str(exc))
            findings.append(_located(finding, parsed, pointer))
            continue
        result.written.append(path)
        commands[path] = (str(written.provenance.command), where)
    return findings


def _named(finding: Finding, source: Path) -> Finding:
    """``finding`` with the source it is about named first (an import of several files)."""
    return replace(finding, message=f"{source.name}: {finding.message}")


def _replaced_elsewhere(
    plan: OutputPlan, commands: dict[Path, tuple[str, str]], inputs: Inputs
) -> list[Finding]:
    """I126 for each report folder to write that already holds files another command or
    another source wrote (its report's ``provenance.command`` differs, or there is no report):
    an import replaces only what the same import of the same source wrote (SPEC.md I-7)."""
    planned = {path.parent: command for path, (command, _) in commands.items()}

    def same_input(path: Path) -> bool:
        command = planned.get(path.parent)
        return command is not None and _provenance_command(path.parent / "report.json") == command

    def earlier(path: Path) -> str | None:
        command = _provenance_command(path.parent / "report.json")
        return f"`{command}`" if command else None

    return [
        make_finding(catalogue(), None, "I126", "", detail=str(exc)).located(1, 1)
        for exc in plan.replaced(inputs, same_input, earlier)
    ]


def _provenance_command(path: Path) -> str | None:
    """The ``provenance.command`` of the report at ``path``; None when there is none to read."""
    parsed = load_json_file(path, Limits()) if path.is_file() else None
    if parsed is None or parsed.problems or not isinstance(parsed.data, dict):
        return None
    provenance = parsed.data.get("provenance")
    command = provenance.get("command") if isinstance(provenance, dict) else None
    return command if isinstance(command, str) else None


def _located(finding: Any, parsed: Any, pointer: str) -> Any:
    """``finding`` at the line and column of ``pointer`` in the parsed source (1:1 where the
    pointer has none, as for a document that is ``null``, or the source is a pickle, whose
    findings name the file)."""
    line, column = parsed.locate(pointer) if parsed is not None and parsed.text else (None, None)
    return finding.located(line or 1, column or 1)


def source_created(source: Path) -> str:
    """The source file's modification time, as a report's ``provenance.created``."""
    return datetime.fromtimestamp(source.stat().st_mtime, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reports(data: Any, source: Path) -> Iterator[tuple[str, CircuitReport, str]]:
    from mibspec.metrics.circuit import cmd, cpr
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise _MalformedError("I101", "", detail="a MIB results file is an object with a 'results' list")
    method = data.get("method_name")
    if not isinstance(method, str) or not method:
        raise _MalformedError(
            "I101", "/method_name" if "method_name" in data else "", detail="missing method_name"
        )
    grid = list(load_profile("mib-2025").grid)
    created = source_created(source)
    description = {"description": data["description"]} if isinstance(data.get("description"), str) else {}
    for r, entry in enumerate(data["results"]):
        base = f"/results/{r}"
        if not isinstance(entry, dict) or not isinstance(entry.get("scores"), dict):
            raise _MalformedError("I101", base, detail="each result needs model_id and a scores object")
        model_id = entry.get("model_id")
        if not isinstance(model_id, str) or model_id not in KNOWN_MODELS:
            raise _MalformedError(
                "I102",
                f"{base}/model_id",
                detail=f"unknown MIB model id {model_id!r}; known: {', '.join(KNOWN_MODELS)}",
            )
        architecture, layers, heads = KNOWN_MODELS[model_id]
        n_edges = GraphUniverse(GraphConfig(layers, heads)).n_edges
        for task, blocks in entry["scores"].items():
            pointer = f"{base}/scores/{escape_pointer_token(task)}"
            if not isinstance(blocks, dict):
                raise _MalformedError("I101", pointer, detail="a task's scores must be an object")
            curves: list[Curve] = []
            rankings: tuple[tuple[str, Ranking], ...] = (("CPR", "signed"), ("CMD", "absolute"))
            for metric, ranking in rankings:
                curves.append(_curve(blocks.get(metric), ranking, grid, f"{pointer}/{metric}"))
            signed, absolute = ([p.faithfulness for p in c.points] for c in curves)
            ks = [p.k for p in curves[0].points]
            forced = [*signed[:-1], 1.0] if math.isclose(ks[-1], 1.0) else signed
            forced_abs = [*absolute[:-1], 1.0] if math.isclose(ks[-1], 1.0) else absolute
            report = CircuitReport(
                profile="mib-2025",
                title=f"{method} on {task} ({model_id}), imported from MIB results",
                description=(
                    f"Imported from {source.name} by mibspec {__version__}. The results file records the "
                    "faithfulness curves only: the circuits (so their sizes), the model revision and the "
                    "baseline metrics are absent, so the curves cannot be recomputed. CPR and CMD were "
                    "computed from the curves with faithfulness at k = 1 taken as 1.0, as the MIB "
                    "leaderboard does."
                ),
                method=Method(name=method, **description),
                task=TaskRef(name=task),
                model=mib_model({"source": "hub", "id": model_id, "architecture": architecture}, "circuit"),
                settings=CircuitSettings(
                    ablation="counterfactual",
                    granularity="edge",
                    grid=grid,
                    ranking={"cpr": "signed", "cmd": "absolute"},
                    edge_count_rounding="floor",
                    metric="logit_difference",
                ),
                claims=CircuitClaims(
                    n_edges=n_edges,
                    curves=curves,
                    cpr=ScalarClaim(value=cpr(ks, forced)),
                    cmd=NonNegativeClaim(value=cmd(ks, forced_abs)),
                ),
                provenance=Provenance(
                    tool=ToolInfo(name="mibspec", version=__version__),
                    created=created,
                    command=f"mibspec import mib-circuit-results {source.name}",
                ),
            )
            yield safe_name(task, model_id, method), report, pointer


def _curve(block: Any, ranking: Ranking, grid: list[float], pointer: str) -> Curve:
    if not isinstance(block, dict):
        raise _MalformedError("I101", pointer, detail="needs edge_counts and faithfulness lists")
    counts, values = block.get("edge_counts"), block.get("faithfulness")
    if not (isinstance(counts, list) and isinstance(values, list) and len(counts) == len(values)):
        raise _MalformedError(
            "I101", pointer, detail="edge_counts and faithfulness must be lists of one length"
        )
    if not 1 <= len(counts) <= len(grid):
        raise _MalformedError(
            "I101", pointer, detail=f"expected at most {len(grid)} grid points, got {len(counts)}"
        )
    numbers = [*counts, *values]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in numbers):
        raise _MalformedError("I101", pointer, detail="edge counts and faithfulness must be finite numbers")
    if any(count < 0 for count in counts):
        raise _MalformedError("I101", pointer, detail="edge counts must not be negative")
    # The public backend sorts circuits by size and places the i-th at the i-th grid point. The
    # sizes are not written: the file holds no circuit they could be checked against (K-9).
    order = sorted(range(len(counts)), key=lambda i: counts[i])
    points = [CurvePoint(k=grid[slot], faithfulness=float(values[i])) for slot, i in enumerate(order)]
    return Curve(ranking=ranking, points=points)


#: MIB's ``--level`` (the last part of its output folder ``<method>_<ablation>_<level>``).
_LEVELS = ("edge", "node", "neuron")


def _read_pickle(source: Path) -> tuple[ResultsName, dict[str, Any]]:
    """What the results pickle ``source`` says, by its name and its content.

    Raises:
        _MalformedError: a name MIB does not write, or a pickle refused or malformed.
    """
    named = results_name(source.name)
    if named is None:
        raise _MalformedError(
            "I101",
            "",
            detail=f"a results pickle records no task, model or split: its name must, as "
            f"{RESULTS_PATTERN} (MIB's run_evaluation.py names it so)",
        )
    return named, read_results(source)


def _check_split(source: Path, options: ImportOptions) -> None:
    """Refuse a ``--split`` other than the one the pickle's name says (I111)."""
    named = results_name(source.name)
    if options.split is not None and named is not None and options.split != named.split:
        raise _MalformedError(
            "I111",
            "",
            detail=f"--split {options.split}: the results file is named for the {named.split} split",
        )


def _pickle_reports(data: Any, source: Path) -> Iterator[tuple[str, CircuitReport, str]]:
    """The report of one results pickle: its one curve (ranked as its ``abs-`` flag says) and
    the areas the evaluator computed on it, with the ``mib-2025`` conventions of the leaderboard
    JSON's reports. The method, and the level, come from the folder MIB writes the file into,
    ``<method>_<ablation>_<level>`` (the ablation is not passed on by MIB's evaluator, which
    always patches from the counterfactual run)."""
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    named, results = data
    if named.model not in KNOWN_MODELS:
        raise _MalformedError(
            "I102", "", detail=f"unknown MIB model id {named.model!r}; known: {', '.join(KNOWN_MODELS)}"
        )
    architecture, layers, heads = KNOWN_MODELS[named.model]
    folder = source.resolve().parent.name
    parts = folder.rsplit("_", 2)
    method, level = (parts[0], parts[2]) if len(parts) == 3 and parts[2] in _LEVELS else (folder, "edge")
    granularity: Literal["edge", "node", "neuron"] = "node" if level == "node" else "edge"
    if level == "neuron":
        granularity = "neuron"
    task = named.task.replace("-", "_")
    grid = list(load_profile("mib-2025").grid)
    ranking: Ranking = "absolute" if named.ranking == "absolute" else "signed"
    by = "|score|" if ranking == "absolute" else "signed score"
    points = [CurvePoint(k=k, faithfulness=f) for k, f in zip(grid, results["faithfulnesses"], strict=True)]
    report = CircuitReport(
        profile="mib-2025",
        title=f"{method} on {task} ({named.model}), imported from MIB results",
        description=(
            f"Imported from {source.name} by mibspec {__version__}. The results file records one "
            f"faithfulness curve (circuits ranked by {by}) "
            "and the areas MIB's evaluator computed on it: the circuits (so their sizes), the model "
            "revision and the baseline metrics are absent, so the curve cannot be recomputed."
        ),
        method=Method(name=method or "unknown"),
        task=TaskRef(name=task, split=named.split),
        model=mib_model({"source": "hub", "id": named.model, "architecture": architecture}, "circuit"),
        settings=CircuitSettings(
            ablation="counterfactual",
            granularity=granularity,
            grid=grid,
            ranking={"cpr": ranking, "cmd": ranking},
            edge_count_rounding="floor",
            metric="logit_difference",
        ),
        claims=CircuitClaims(
            n_edges=GraphUniverse(GraphConfig(layers, heads)).n_edges,
            curves=[Curve(ranking=ranking, points=points)],
            cpr=ScalarClaim(value=results["area_under"]),
            cmd=NonNegativeClaim(value=results["area_from_1"]),
        ),
        provenance=Provenance(
            tool=ToolInfo(name="mibspec", version=__version__),
            created=source_created(source),
            command=f"mibspec import mib-circuit-results {source.name}",
        ),
    )
    # a folder per curve: the pickles of both rankings (and splits) of one method never collide
    yield safe_name(task, named.model, method, named.split, ranking), report, ""
