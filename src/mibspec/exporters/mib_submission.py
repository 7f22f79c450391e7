"""Export circuit reports as MIB circuit-track submission folders.

Each report becomes ``<out>/<task>_<model>/`` (task names spelled with ``-``, as MIB's
folders are; the name made safe as an import makes names, :mod:`mibspec.core.folders`):
``importances.json`` when its circuit document has edge scores and its circuits, if any, are
cut from them by a ranking, otherwise one circuit file per grid point below k = 1
(``circuit_<k>.json``, with the document's edge scores, else ``NaN`` scores: EAP-IG's
``Graph.from_json`` reads a ``score`` for every edge); and, for each claimed curve over the
whole ``mib-2025`` grid, the results file MIB's evaluator writes
(``<task>_<model>_<split>_abs-<True|False>.pkl``: plain dicts, lists and floats). Every file
is planned before the first is written; two reports for one folder are refused.
``mibspec import mib-submission`` on the folder gives the same documents back.
"""

from __future__ import annotations

import pickle
from datetime import datetime
from pathlib import Path
from typing import Any

from mibspec.core.folders import NameClashError, OutputPlan, safe_name
from mibspec.core.outputs import Inputs

from .eap_ig import ExportError, eap_ig_text, inside, read_circuit, read_conformant

__all__ = ["export_mib_submission", "submission_folder_name"]


def submission_folder_name(report: dict[str, Any]) -> str:
    """``<task>_<model>``: the task with ``-`` for ``_``, the last part of the model's hub id
    or its folder's name, made safe (:func:`~mibspec.core.folders.safe_name`): a task named
    ``../../x`` or ``/abs`` names a folder inside the output folder, never a path out of it."""
    model = report["model"]
    name = str(model.get("id") or Path(model.get("path", "model")).name).split("/")[-1]
    return safe_name(str(report["task"]["name"]).replace("_", "-"), name.replace("_", "-"))


def _files(report_path: Path, report: dict[str, Any]) -> dict[str, bytes | str]:
    from mibspec.metrics.circuit import cmd, cpr
    from mibspec.validator import load_profile

    artifacts = {a["id"]: a for a in report.get("artifacts", [])}
    ref = report["claims"].get("circuit")
    if ref is None:
        raise ExportError(f"{report_path}: the report names no circuit document (claims.circuit)")
    document, tensors = read_circuit(inside(report_path.parent, artifacts[ref]["path"]))
    files: dict[str, bytes | str] = {}
    membership = tensors.get("membership")
    entries = document.get("circuits", [])
    # circuits given per grid point (not cut from the scores by a ranking: a nine-circuit
    # submission) are written as circuit files, with the edge scores where the document keeps them
    circuits = len(entries) > 1 and all(e.get("k") is not None and "ranking" not in e for e in entries)
    if "scores" in tensors and not circuits:
        rows = 0 if membership is not None and membership.shape[0] == 1 else None
        if rows is None:
            tensors = {
                k: v for k, v in tensors.items() if k not in ("membership", "node_membership", "neuron_masks")
            }
        files["importances.json"] = eap_ig_text(document, tensors, 0)
    else:
        for entry in entries:
            k = entry.get("k")
            if k is None:
                raise ExportError(f"{report_path}: circuit {entry['index']} of its document declares no k")
            if k < 1:
                files[f"circuit_{k:g}.json"] = eap_ig_text(document, tensors, entry["index"])
    grid = list(load_profile("mib-2025").grid)
    base = submission_folder_name(report)
    split = report["task"].get("split", "validation")
    ranking = report["settings"]["ranking"]
    for curve in report["claims"]["curves"]:
        ks = [p["k"] for p in curve["points"]]
        if ks != grid:
            continue  # MIB's evaluator writes whole-grid curves only
        values = [p["faithfulness"] for p in curve["points"]]
        unsized = [p["k"] for p in curve["points"] if "weighted_size" not in p]
        if unsized:
            raise ExportError(
                f"{report_path}: the {curve['ranking']} curve declares no weighted size at k = "
                f"{', '.join(f'{k:g}' for k in unsized)}; MIB's results record one per grid point"
            )
        results = {
            "weighted_edge_counts": [p["weighted_size"] for p in curve["points"]],
            "area_under": report["claims"]["cpr"]["value"]
            if ranking.get("cpr") == curve["ranking"]
            else cpr(ks, values),
            "area_from_1": report["claims"]["cmd"]["value"]
            if ranking.get("cmd") == curve["ranking"]
            else cmd(ks, values),
            "average": sum(values) / len(values),
            "faithfulnesses": values,
        }
        flag = "True" if curve["ranking"] == "absolute" else "False"
        files[f"{base}_{split}_abs-{flag}.pkl"] = pickle.dumps(results, protocol=4)
    return files


def _timestamp(report: dict[str, Any]) -> float | None:
    created = report.get("provenance", {}).get("created")
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() if created else None
    except ValueError:
        return None


def export_mib_submission(reports: list[Path], out_dir: Path) -> list[Path]:
    """Write the submission folders of ``reports`` under ``out_dir``; return the files written.

    Raises:
        ExportError: a report is not a conformant circuit report, or two reports need one folder.
        mibspec.core.outputs.OutputPathError: a file to be written is an input.
    """
    plan = OutputPlan(out_dir)
    inputs = Inputs(reports)
    for path in reports:
        report = read_conformant(path)
        if report.get("kind") != "report" or report.get("track") != "circuit":
            raise ExportError(f"{path}: not a circuit-track report")
        name = submission_folder_name(report)
        created = _timestamp(report)
        try:
            plan.claim(name, str(path))
            for file, data in _files(path, report).items():
                # The import dates a report by its results file: the round trip keeps the date.
                stamp = created if file.endswith(".pkl") else None
                plan.add(f"{name}/{file}", data, source=str(path), mtime=stamp)
        except NameClashError as exc:
            raise ExportError(str(exc)) from None
        for artifact in report.get("artifacts", []):
            inputs.add(path.parent / artifact["path"])
    clashes = plan.replaced(
        inputs, option="--output"
    )  # what the same reports would write again is left as it is
    if clashes:
        raise ExportError("; ".join(str(exc) for exc in clashes))
    return plan.write(inputs, "--output")
