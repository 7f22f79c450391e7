"""Circuit-track producer: edge scores → circuits on the grid → faithfulness, CPR, CMD → report.

What ``mibspec score circuit`` runs. The written folder holds ``report.json``,
``circuit.json`` + ``circuit.safetensors`` (the edge scores as float32 and one membership
row per (ranking, k)), and ``dataset.json`` + ``dataset.jsonl`` (a copy of the dataset
used). Circuits are the top ``edges_at(k)`` edges by signed score and by |score|
(``rank_edges``: ties broken by canonical edge index), ranked on the stored float32
scores so that the circuits follow from the stored file exactly. The numbers are computed
with the same engine and metric functions the recompute stage uses.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.files import sha256_file
from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.spec import SPEC_VERSION

from ..metrics.circuit import DEFAULT_GRID, cmd, cpr, edges_at, faithfulness, rank_edges
from ..recompute import ModelSource, encode_function
from ..recompute.circuit import tokenize_pairs
from .folder import OutputFolder, created_timestamp

__all__ = ["METHODS", "CircuitRun", "grid_circuits", "score_circuit", "write_circuit_document"]

METHODS: dict[str, dict[str, Any]] = {
    "eap": {
        "name": "EAP",
        "description": "Edge attribution patching: (clean − corrupted source output) · gradient of the "
        "metric at the destination's input on the clean run.",
        "citation": {
            "text": "Syed, Rager and Conmy (2023). Attribution Patching Outperforms Automated Circuit "
            "Discovery.",
            "url": "https://arxiv.org/abs/2310.10348",
        },
    },
    "eap-ig": {
        "name": "EAP-IG (inputs)",
        "description": "Edge attribution patching with integrated gradients: the gradient averaged over "
        "runs whose input embeddings interpolate from the corrupted to the clean input.",
        "citation": {
            "text": "Hanna, Pezzelle and Belinkov (2024). Have Faith in Faithfulness: Going Beyond Circuit "
            "Overlap When Finding Model Mechanisms.",
            "url": "https://arxiv.org/abs/2403.17806",
        },
    },
    "random": {
        "name": "Random scores",
        "description": "Independent standard normal edge scores from a seeded generator (a baseline).",
    },
    "scores": {
        "name": "Given edge scores",
        "description": "Edge scores read from a file supplied to the producer.",
    },
}

_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


@dataclass(frozen=True)
class CircuitRun:
    """What :func:`score_circuit` wrote and computed."""

    report: Path
    m_full: float
    m_empty: float
    faithfulness: dict[str, list[float]]
    cpr: float
    cmd: float


def _load_scores(path: Path, n_edges: int) -> np.ndarray:
    if path.suffix == ".npy":
        scores = np.load(path, allow_pickle=False)
    elif path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        tensors = load_file(str(path))
        if "scores" not in tensors:
            raise ValueError(f"scores: {path} holds no tensor named 'scores' (has {sorted(tensors)})")
        scores = tensors["scores"]
    else:
        raise ValueError(f"scores: expected a .npy or .safetensors file, got {path.name!r}")
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (n_edges,) or not np.isfinite(scores).all():
        raise ValueError(
            f"scores: expected {n_edges} finite values in canonical edge order, got shape {scores.shape}"
        )
    return scores


def grid_circuits(
    universe: Any, scores: np.ndarray, grid: Sequence[float]
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The circuits of a report: the top ⌊k·n⌋ edges by signed score, then by |score|, at
    each grid point.

    Returns:
        The ``circuits`` entries of the circuit document (index, k, ranking, edge count,
        weighted size) and their ``(2·len(grid), n_edges)`` boolean membership rows.
    """
    rows: list[np.ndarray] = []
    entries: list[dict[str, Any]] = []
    for ranking in ("signed", "absolute"):
        order = rank_edges(scores, ranking)
        for k in grid:
            count = edges_at(k, universe.n_edges, "floor")
            row = np.zeros(universe.n_edges, dtype=bool)
            row[order[:count]] = True
            entries.append(
                {
                    "index": len(rows),
                    "k": k,
                    "ranking": ranking,
                    "n_edges": count,
                    "weighted_size": universe.weighted_edge_count(row),
                }
            )
            rows.append(row)
    return entries, np.stack(rows)


def write_circuit_document(
    folder: OutputFolder,
    *,
    description: str,
    model: dict[str, Any],
    universe: Any,
    scores: np.ndarray,
    membership: np.ndarray,
    entries: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> None:
    """Write ``circuit.safetensors`` (float32 scores, membership) and ``circuit.json``."""
    folder.safetensors("circuit.safetensors", {"scores": scores, "membership": membership})
    config = universe.cfg
    folder.json(
        "circuit.json",
        {
            "spec_version": SPEC_VERSION,
            "kind": "circuit",
            "description": description,
            "model": model,
            "graph": {
                "convention": "eap-ig",
                "n_layers": config.n_layers,
                "n_heads": config.n_heads,
                "parallel_attn_mlp": config.parallel_attn_mlp,
                "d_model": config.d_model,
                "n_edges": universe.n_edges,
            },
            "granularity": "edge",
            "scores": {
                "artifact": "tensors",
                "tensor": "scores",
                "shape": [universe.n_edges],
                "dtype": "float32",
            },
            "membership": {
                "artifact": "tensors",
                "tensor": "membership",
                "shape": list(membership.shape),
                "dtype": "bool",
            },
            "circuits": entries,
            "artifacts": [
                folder.artifact("tensors", "scores", "circuit.safetensors", "application/x-safetensors")
            ],
            "provenance": provenance,
        },
    )


def score_circuit(
    model_dir: Path,
    dataset_path: Path,
    out_dir: Path,
    *,
    counterfactual_type: str,
    method: str = "eap-ig",
    scores_path: Path | None = None,
    steps: int = 5,
    seed: int = 0,
    batch_size: int = 20,
    grid: Sequence[float] = DEFAULT_GRID,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> CircuitRun:
    """Score edges, build the circuits of the grid, evaluate them and write a report folder.

    Args:
        model_dir: a local model folder (config.json, model.safetensors, tokenizer.json); the
            report names it by its folder name, to be found with ``--model-root``.
        dataset_path: a counterfactual dataset document (its rows file beside it).
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        counterfactual_type: the dataset's counterfactual type to patch from.
        method: ``eap``, ``eap-ig``, ``random``, or ``scores`` with ``scores_path``.
        scores_path: ``.npy`` or ``.safetensors`` (tensor ``scores``) edge scores.
        steps: EAP-IG interpolation steps.
        seed: seed of the random method.
        batch_size: examples per pass.
        grid: the k-grid (the default profile's by default).
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    from mibspec.reference_impl.engine import attribute_edges, evaluate_circuits, graph_universe, load_model

    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if (method == "scores") != (scores_path is not None):
        raise ValueError("scores_path: required with method 'scores' and only accepted with it")
    model_dir = Path(model_dir)
    model = load_model(model_dir)
    source = ModelSource(str(model_dir), None, local=True)
    encode = encode_function(source)
    dataset, rows_bytes = _dataset_input(Path(dataset_path))
    if counterfactual_type not in dataset.get("counterfactual_types", []):
        raise ValueError(
            f"counterfactual_type: {counterfactual_type!r} is not one of the dataset's "
            f"{dataset.get('counterfactual_types')}"
        )
    rows = _strict_rows(rows_bytes)
    ids, cids, mask, correct, counter = tokenize_pairs(rows, counterfactual_type, encode, "dataset")
    n = ids.shape[0]
    universe = graph_universe(model)

    if method == "scores":
        assert scores_path is not None
        scores = _load_scores(Path(scores_path), universe.n_edges)
    else:
        scores = attribute_edges(
            model,
            ids,
            cids,
            mask,
            correct,
            counter,
            method=method,  # type: ignore[arg-type]
            steps=steps,
            seed=seed,
            batch_size=batch_size,
            progress=start_task(progress, f"{METHODS[method]['name']} edge scores", n),
        )
    stored = scores.astype(np.float32)
    ranked = stored.astype(np.float64)

    entries, membership = grid_circuits(universe, ranked, grid)

    result = evaluate_circuits(
        model,
        ids,
        cids,
        mask,
        correct,
        counter,
        membership,
        batch_size=batch_size,
        progress=start_task(progress, f"evaluating {len(entries)} circuits", n),
    )
    m_circuits = result.circuits.mean(axis=1)
    m_full = float(result.clean.mean())
    m_empty = float(result.empty.mean())
    values = [faithfulness(float(m), m_full, m_empty) for m in m_circuits]

    folder = OutputFolder(
        Path(out_dir), overwrite=overwrite, inputs=input_files([model_dir, dataset_path, scores_path])
    )
    created = created_timestamp()
    provenance = _provenance(created)
    folder.write("dataset.jsonl", rows_bytes)
    dataset_copy = dict(dataset)
    dataset_copy["artifacts"] = [
        folder.artifact(dataset["examples"], "dataset", "dataset.jsonl", "application/jsonl", rows=len(rows))
    ]
    dataset_copy.setdefault("provenance", provenance)
    folder.json("dataset.json", dataset_copy)
    model_ref = _model_ref(model_dir, model)
    write_circuit_document(
        folder,
        description=f"{METHODS[method]['name']} edge scores on {dataset.get('task')} "
        f"({counterfactual_type}) and the circuits built from them: the top ⌊k·n⌋ edges by signed "
        "score and by |score| at each grid point.",
        model=model_ref,
        universe=universe,
        scores=stored,
        membership=membership,
        entries=entries,
        provenance=provenance,
    )
    curves: list[dict[str, Any]] = []
    by_ranking: dict[str, list[float]] = {}
    for ranking in ("signed", "absolute"):
        points = []
        for entry, value in zip(entries, values, strict=True):
            if entry["ranking"] != ranking:
                continue
            points.append(
                {
                    "k": entry["k"],
                    "circuit": entry["index"],
                    "n_edges": entry["n_edges"],
                    "weighted_size": entry["weighted_size"],
                    "faithfulness": value,
                }
            )
        by_ranking[ranking] = [p["faithfulness"] for p in points]
        curves.append({"ranking": ranking, "points": points})
    cpr_value = cpr(list(grid), by_ranking["signed"])
    cmd_value = cmd(list(grid), by_ranking["absolute"])
    info = METHODS[method]
    method_block: dict[str, Any] = {
        "name": info["name"],
        "version": "1.0",
        "description": info["description"],
    }
    if method == "eap-ig":
        method_block["hyperparameters"] = {"ig_steps": steps}
    if "citation" in info:
        method_block["citation"] = info["citation"]
    report = {
        "spec_version": SPEC_VERSION,
        "kind": "report",
        "track": "circuit",
        "profile": "default",
        "title": f"{info['name']} circuits for {dataset.get('task')} on {model_dir.name}",
        "method": method_block,
        "task": {
            "name": dataset.get("task"),
            "dataset": "dataset",
            **({"split": dataset["split"]} if dataset.get("split") else {}),
            "counterfactual_type": counterfactual_type,
            "n_examples": n,
        },
        "seeds": [{"purpose": "random edge scores", "value": seed}] if method == "random" else [],
        "model": model_ref,
        "settings": {
            "ablation": "counterfactual",
            "granularity": "edge",
            "grid": list(grid),
            "ranking": {"cpr": "signed", "cmd": "absolute"},
            "edge_count_rounding": "floor",
            "metric": "logit_difference",
            "batch_size": batch_size,
            "padding_side": "right",
        },
        "claims": {
            "circuit": "circuit",
            "n_edges": universe.n_edges,
            "m_full": m_full,
            "m_empty": m_empty,
            "curves": curves,
            "cpr": {"value": cpr_value},
            "cmd": {"value": cmd_value},
        },
        "artifacts": [
            folder.artifact("circuit", "circuit", "circuit.json", "application/json", kind="circuit"),
            folder.artifact(
                "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
            ),
        ],
        "provenance": provenance,
    }
    folder.json("report.json", report)
    return CircuitRun(folder.root / "report.json", m_full, m_empty, by_ranking, cpr_value, cmd_value)


def _strict_rows(rows_bytes: bytes) -> list[dict[str, Any]]:
    """A dataset's JSON Lines rows, each parsed as strictly as a document."""
    from mibspec.core.strict_json import JsonLinesError, read_json_lines

    try:
        return [row for _, row in read_json_lines(io.BytesIO(rows_bytes))]
    except JsonLinesError as exc:
        raise ValueError(f"dataset_path: the rows are not strict JSON objects: {exc}") from exc


def _dataset_input(path: Path) -> tuple[dict[str, Any], bytes]:
    """A dataset document (without its artifact list) and its rows' bytes.

    Accepts a counterfactual dataset document, or the ``<stem>.meta.json`` that
    ``reference_impl.datasets.write_dataset`` writes beside ``<stem>.jsonl`` (the shipped
    datasets): the metadata holds the document's fields.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"dataset_path: {path} does not hold a JSON object")
    if data.get("kind") == "counterfactual_dataset":
        entry = next((a for a in data.get("artifacts", []) if a["id"] == data.get("examples")), None)
        if entry is None:
            raise ValueError(f"dataset_path: {path} declares no artifact for its rows")
        rows_bytes = (path.parent / entry["path"]).read_bytes()
        document = {key: value for key, value in data.items() if key != "artifacts"}
        return document, rows_bytes
    if path.name.endswith(".meta.json") and "task" in data:
        rows_path = path.with_name(path.name[: -len(".meta.json")] + ".jsonl")
        document = {
            "spec_version": SPEC_VERSION,
            "kind": "counterfactual_dataset",
            "task": data["task"],
            **({"split": data["split"]} if "split" in data else {}),
            "examples": "rows",
            "counterfactual_types": data["counterfactual_types"],
            "variables": data.get("variables", []),
            "generator": data["generator"],
            "filters": data.get("filters", []),
        }
        return document, rows_path.read_bytes()
    raise ValueError(
        f"dataset_path: {path} is neither a counterfactual dataset document nor a dataset .meta.json"
    )


def _model_ref(model_dir: Path, model: Any) -> dict[str, Any]:
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    architectures = config.get("architectures") or ["unknown"]
    return {
        "source": "local",
        "path": model_dir.name,
        "architecture": architectures[0],
        "dtype": "float32",
        "config": {
            "n_layers": model.n_layers,
            "n_heads": model.n_heads,
            "d_model": model.d_model,
            "vocab_size": model.vocab_size,
        },
        "files": {
            name: sha256_file(model_dir / name) for name in _MODEL_FILES if (model_dir / name).is_file()
        },
    }


def _provenance(created: str) -> dict[str, Any]:
    import platform

    import numpy
    import torch
    import transformers

    from mibspec.core.version import __version__

    return {
        "tool": {"name": "mibspec", "version": __version__},
        "created": created,
        "libraries": {
            "numpy": numpy.__version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
        "command": "mibspec score circuit",
    }
