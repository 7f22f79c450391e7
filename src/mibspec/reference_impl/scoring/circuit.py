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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from mibspec.core.files import sha256_file
from mibspec.core.outputs import input_files
from mibspec.core.profiles import known_profiles, load_profile
from mibspec.core.progress import Progress, start_task
from mibspec.core.sidecars import safetensors_bytes
from mibspec.core.strict_json import DEFAULT_LIMITS, JsonLinesError, read_json_lines
from mibspec.documents import CircuitReport, document_bytes
from mibspec.documents.common import Artifact, Citation, Method, Provenance, Seed, model_ref
from mibspec.documents.kinds import Circuit, CircuitEntry, CounterfactualDataset, GraphSpec, TensorRef
from mibspec.documents.report import (
    CircuitClaims,
    CircuitSettings,
    Curve,
    NonNegativeClaim,
    ScalarClaim,
    TaskRef,
)
from mibspec.metrics.circuit import DEFAULT_GRID, cmd, cpr, edges_at, rank_edges

from ..recompute import ModelSource, config_start_token, encode_function
from ..recompute.circuit import answer_token_choice, circuit_faithfulness, tokenize_pairs
from .folder import OutputFolder, artifact_entry, created_timestamp, score_provenance

__all__ = [
    "METHODS",
    "CircuitOptions",
    "CircuitResult",
    "CircuitRun",
    "ModelAndDataset",
    "build_circuit_files",
    "circuit_files",
    "compute_circuit",
    "dataset_artifact",
    "dataset_files",
    "grid_circuits",
    "open_model_and_dataset",
    "score_circuit",
]

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
class CircuitOptions:
    """What ``mibspec score circuit`` asks :func:`score_circuit` for.

    Attributes:
        model_dir: a local model folder (config.json, model.safetensors, tokenizer.json); the
            report names it by its folder name, to be found with ``--model-root``.
        dataset_path: a counterfactual dataset document (its rows file beside it).
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        counterfactual_type: the dataset's counterfactual type to patch from.
        method: ``eap``, ``eap-ig``, ``random``, or ``scores`` with ``scores_path``.
        scores_path: ``.npy`` or ``.safetensors`` (tensor ``scores``) edge scores.
        steps: EAP-IG interpolation steps.
        seed: seed of the random method.
        batch_size: examples per pass, or ``"auto"`` (chosen from the device's free memory,
            halved on out-of-memory; the report declares the size used).
        grid: the k-grid (the default profile's by default).
        overwrite: replace a report already in ``out_dir``.
        device: where the model computes (``cpu``, ``cuda:N``, ``mps``; see
            ``mibspec.reference_impl.devices.resolve_device``).
        profile: the profile the report is written under; its ``start_token``,
            ``ig_points`` and ``attribution_scale`` conventions are applied.
        dtype: the dtype the model computes in (``float32``, ``float16``, ``bfloat16``), which
            the report declares.
        max_model_bytes: the largest model loaded, its parameters in ``dtype`` (as ``verify
            --max-model-bytes`` bounds the recomputation).
    """

    model_dir: Path
    dataset_path: Path
    out_dir: Path
    counterfactual_type: str
    method: str = "eap-ig"
    scores_path: Path | None = None
    steps: int = 5
    seed: int = 0
    batch_size: int | str = 20
    grid: Sequence[float] = DEFAULT_GRID
    overwrite: bool = False
    device: str = "cpu"
    profile: str = "default"
    dtype: str = "float32"
    max_model_bytes: int = DEFAULT_LIMITS.max_model_bytes

    def check(self) -> None:
        """Raises ValueError for a method the producer does not know or a misplaced scores file."""
        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {sorted(METHODS)}, got {self.method!r}")
        if (self.method == "scores") != (self.scores_path is not None):
            raise ValueError("scores_path: required with method 'scores' and only accepted with it")
        if self.profile not in known_profiles():
            raise ValueError(f"profile: expected one of {known_profiles()}, got {self.profile!r}")
        self._check_dtype()

    def _check_dtype(self) -> None:
        """Raises ValueError for a dtype the report could not be verified in (SPEC.md M-6, R113)."""
        from mibspec.reference_impl.recompute import dtype_narrowing, stored_dtype

        model_dir = Path(self.model_dir)
        try:
            stored = stored_dtype(sorted(model_dir.glob("*.safetensors")))
        except (OSError, ValueError):
            return  # loading the model says what is wrong with its files
        names = {model_dir.name, *_architectures(model_dir)}
        problem = dtype_narrowing(load_profile(self.profile), "circuit", names, self.dtype, stored)
        if problem is not None:
            raise ValueError(f"dtype: {problem}; verification would refuse it (R113)")


def _architectures(model_dir: Path) -> list[str]:
    """The architectures a model folder's config.json names (none when it cannot be read)."""
    try:
        names = json.loads((model_dir / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


@dataclass(frozen=True)
class ModelAndDataset:
    """A local model and the counterfactual dataset a producer scores it on."""

    model: Any
    encode: Any
    dataset: CounterfactualDataset  # its artifact list left out
    rows_bytes: bytes
    rows: list[dict[str, Any]]


def open_model_and_dataset(
    model_dir: Path,
    dataset_path: Path,
    counterfactual_type: str,
    device: str = "cpu",
    dtype: str = "float32",
    max_model_bytes: int = DEFAULT_LIMITS.max_model_bytes,
) -> ModelAndDataset:
    """Load the model (onto ``device``, in ``dtype``, refused over ``max_model_bytes``) and its
    tokenizer, and read the dataset's document and rows.

    Raises:
        ValueError: the dataset is unusable or has no ``counterfactual_type`` counterfactuals.
    """
    from mibspec.reference_impl.engine import load_model  # torch: only when scoring

    model = load_model(model_dir, dtype=dtype, device=device, max_bytes=max_model_bytes)
    encode = encode_function(ModelSource(str(model_dir), None, local=True))
    dataset, rows_bytes = _dataset_input(Path(dataset_path))
    if counterfactual_type not in dataset.counterfactual_types:
        raise ValueError(
            f"counterfactual_type: {counterfactual_type!r} is not one of the dataset's "
            f"{dataset.counterfactual_types}"
        )
    return ModelAndDataset(model, encode, dataset, rows_bytes, _strict_rows(rows_bytes))


@dataclass(frozen=True)
class CircuitResult:
    """What :func:`compute_circuit` computed: the scored edges, the circuits and their curves."""

    inputs: ModelAndDataset
    n_examples: int
    universe: Any
    scores: np.ndarray  # float32, as stored; the circuits are ranked on these values
    entries: list[dict[str, Any]]  # the circuit document's ``circuits``
    membership: np.ndarray
    m_full: float
    m_empty: float
    curves: list[dict[str, Any]]  # the report's ``claims.curves``
    faithfulness: dict[str, list[float]]  # ranking → f at each grid point
    cpr: float
    cmd: float
    batch_size: int = 20  # examples per pass, as used (and declared by the report)


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


def circuit_files(
    *,
    description: str,
    model: dict[str, Any],
    universe: Any,
    scores: np.ndarray,
    membership: np.ndarray,
    entries: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> dict[str, bytes]:
    """``circuit.safetensors`` (float32 scores, membership) and ``circuit.json``, by file name."""
    tensors = safetensors_bytes({"scores": scores, "membership": membership})
    config = universe.cfg
    document = Circuit(
        description=description,
        model=model_ref(model),
        graph=GraphSpec(
            convention="eap-ig",
            n_layers=config.n_layers,
            n_heads=config.n_heads,
            parallel_attn_mlp=config.parallel_attn_mlp,
            d_model=config.d_model,
            n_edges=universe.n_edges,
        ),
        granularity="edge",
        scores=TensorRef(artifact="tensors", tensor="scores", shape=[universe.n_edges], dtype="float32"),
        membership=TensorRef(
            artifact="tensors", tensor="membership", shape=list(membership.shape), dtype="bool"
        ),
        circuits=[CircuitEntry.model_validate(entry) for entry in entries],
        artifacts=[
            Artifact.model_validate(
                artifact_entry(
                    tensors, "tensors", "scores", "circuit.safetensors", "application/x-safetensors"
                )
            )
        ],
        provenance=Provenance.model_validate(provenance),
    )
    return {"circuit.safetensors": tensors, "circuit.json": document_bytes(document)}


def score_circuit(options: CircuitOptions, progress: Progress | None = None) -> CircuitRun:
    """Score edges, build the circuits of the grid, evaluate them and write a report folder.

    Args:
        options: what to score and where to write it.
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    result = compute_circuit(options, progress)
    files = build_circuit_files(options, result)
    inputs = input_files([options.model_dir, options.dataset_path, options.scores_path])
    folder = OutputFolder(Path(options.out_dir), overwrite=options.overwrite, inputs=inputs)
    folder.write_all(files)
    return CircuitRun(
        folder.root / "report.json",
        result.m_full,
        result.m_empty,
        result.faithfulness,
        result.cpr,
        result.cmd,
    )


# --------------------------------------------------------------------------- compute


def compute_circuit(options: CircuitOptions, progress: Progress | None = None) -> CircuitResult:
    """Edge scores, the grid's circuits, their faithfulness curves, CPR and CMD."""
    from mibspec.reference_impl.devices import example_bytes, parse_batch_size, plan_batch, with_oom_backoff
    from mibspec.reference_impl.engine import (  # torch: only when scoring
        activation_batch,
        evaluate_circuits,
        graph_universe,
    )

    options.check()
    inputs = open_model_and_dataset(
        Path(options.model_dir),
        options.dataset_path,
        options.counterfactual_type,
        options.device,
        options.dtype,
        options.max_model_bytes,
    )
    profile = load_profile(options.profile)
    start = _start_token(Path(options.model_dir)) if profile["start_token"] == "prepend" else None
    answers = _answer_token(options.profile, inputs.dataset.task)
    tokens = tokenize_pairs(
        inputs.rows, options.counterfactual_type, inputs.encode, "dataset", start, answer_token=answers
    )
    n = tokens[0].shape[0]
    universe = graph_universe(inputs.model)
    per_example = example_bytes(inputs.model, tokens[0].shape[1])
    requested = parse_batch_size(options.batch_size)
    batch, halve = plan_batch(requested, options.device, 20, per_example, n)
    if requested == 20 or requested == "auto":
        # the default batch (or the planned one) keeps a batch's activations within the
        # engine's share of the weight bytes (engine.md ME-9); the report declares it
        batch = min(batch, activation_batch(inputs.model, per_example))
    scores, batch = with_oom_backoff(
        lambda size: _edge_scores(options, profile, inputs.model, tokens, universe.n_edges, progress, size),
        batch,
        retry=halve,
    )
    stored = scores.astype(np.float32)
    entries, membership = grid_circuits(universe, stored.astype(np.float64), options.grid)
    evaluation, batch = with_oom_backoff(
        lambda size: evaluate_circuits(
            inputs.model,
            *tokens,
            membership,
            batch_size=size,
            progress=start_task(progress, f"evaluating {len(entries)} circuits", n),
        ),
        batch,
        retry=halve,
    )
    m_full, m_empty, values = circuit_faithfulness(evaluation)
    curves, by_ranking = _curves(entries, values)
    return CircuitResult(
        inputs=inputs,
        n_examples=n,
        universe=universe,
        scores=stored,
        entries=entries,
        membership=membership,
        m_full=m_full,
        m_empty=m_empty,
        curves=curves,
        faithfulness=by_ranking,
        cpr=cpr(list(options.grid), by_ranking["signed"]),
        cmd=cmd(list(options.grid), by_ranking["absolute"]),
        batch_size=batch,
    )


def _edge_scores(
    options: CircuitOptions,
    profile: Any,
    model: Any,
    tokens: tuple[np.ndarray, ...],
    n_edges: int,
    progress: Progress | None,
    batch_size: int,
) -> np.ndarray:
    """The edge scores of the options' method (or file), in float64."""
    from mibspec.reference_impl.engine import attribute_edges  # torch: only when scoring

    if options.method == "scores":
        assert options.scores_path is not None
        return _load_scores(Path(options.scores_path), n_edges)
    return attribute_edges(
        model,
        *tokens,
        method=options.method,  # type: ignore[arg-type]
        steps=options.steps,
        seed=options.seed,
        batch_size=batch_size,
        ig_points=profile["ig_points"],
        scale=profile["attribution_scale"],
        progress=start_task(progress, f"{METHODS[options.method]['name']} edge scores", tokens[0].shape[0]),
    )


def _start_token(model_dir: Path) -> int:
    """The start token of a local model folder's ``config.json``.

    Raises:
        ValueError: the config declares none.
    """
    from mibspec.reference_impl.engine import read_config  # torch: only when scoring

    config = read_config((model_dir / "config.json").read_bytes(), "config.json")
    token = config_start_token(config)
    if token is None:
        raise ValueError("model_dir: config.json declares neither bos_token_id nor eos_token_id")
    return token


def _curves(
    entries: list[dict[str, Any]], values: list[float]
) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """The report's curves (one per ranking) and f at each grid point by ranking."""
    curves: list[dict[str, Any]] = []
    by_ranking: dict[str, list[float]] = {}
    for ranking in ("signed", "absolute"):
        points = [
            {
                "k": entry["k"],
                "circuit": entry["index"],
                "n_edges": entry["n_edges"],
                "weighted_size": entry["weighted_size"],
                "faithfulness": value,
            }
            for entry, value in zip(entries, values, strict=True)
            if entry["ranking"] == ranking
        ]
        by_ranking[ranking] = [p["faithfulness"] for p in points]
        curves.append({"ranking": ranking, "points": points})
    return curves, by_ranking


# --------------------------------------------------------------------------- build the documents


def build_circuit_files(options: CircuitOptions, result: CircuitResult) -> dict[str, bytes]:
    """The report folder's files by name, in writing order: the dataset copy, the circuit
    document and its tensors, then ``report.json``."""
    provenance = _provenance(created_timestamp())
    inputs = result.inputs
    dataset = inputs.dataset
    files = dataset_files(dataset, inputs.rows_bytes, len(inputs.rows), provenance)
    model = _model_ref(Path(options.model_dir), inputs.model, options.dtype)
    files |= circuit_files(
        description=f"{METHODS[options.method]['name']} edge scores on {dataset.task} "
        f"({options.counterfactual_type}) and the circuits built from them: the top ⌊k·n⌋ edges by signed "
        "score and by |score| at each grid point.",
        model=model,
        universe=result.universe,
        scores=result.scores,
        membership=result.membership,
        entries=result.entries,
        provenance=provenance,
    )
    artifacts = [
        artifact_entry(
            files["circuit.json"], "circuit", "circuit", "circuit.json", "application/json", kind="circuit"
        ),
        dataset_artifact(files),
    ]
    report = _circuit_report(options, result, model, artifacts, provenance)
    files["report.json"] = document_bytes(report)
    return files


def dataset_files(
    dataset: CounterfactualDataset, rows_bytes: bytes, n_rows: int, provenance: dict[str, Any]
) -> dict[str, bytes]:
    """``dataset.jsonl`` and ``dataset.json``: a copy of the dataset document (without its
    artifacts) with the rows used beside it; ``provenance`` where the document has none."""
    rows = artifact_entry(
        rows_bytes, dataset.examples, "dataset", "dataset.jsonl", "application/jsonl", rows=n_rows
    )
    document = dataset.model_copy(
        update={
            "artifacts": [Artifact.model_validate(rows)],
            "provenance": dataset.provenance or Provenance.model_validate(provenance),
        }
    )
    return {"dataset.jsonl": rows_bytes, "dataset.json": document_bytes(document)}


def dataset_artifact(files: Mapping[str, bytes]) -> dict[str, Any]:
    """A report's artifact entry of the ``dataset.json`` among ``files``."""
    return artifact_entry(
        files["dataset.json"],
        "dataset",
        "dataset",
        "dataset.json",
        "application/json",
        kind="counterfactual_dataset",
    )


def _circuit_report(
    options: CircuitOptions,
    result: CircuitResult,
    model: dict[str, Any],
    artifacts: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> CircuitReport:
    dataset, info = result.inputs.dataset, METHODS[options.method]
    start_token: dict[str, Any] = {"start_token": "prepend"} if _prepends(options.profile) else {}
    answers = _answer_token(options.profile, dataset.task)
    if answers != "as_written":
        start_token["answer_token"] = answers
    return CircuitReport(
        profile=options.profile,
        title=f"{info['name']} circuits for {dataset.task} on {Path(options.model_dir).name}",
        method=_method_block(options),
        task=TaskRef(
            name=dataset.task,
            dataset="dataset",
            split=dataset.split,
            counterfactual_type=options.counterfactual_type,
            n_examples=result.n_examples,
        ),
        seeds=[Seed(purpose="random edge scores", value=options.seed)] if options.method == "random" else [],
        model=model_ref(model),
        settings=CircuitSettings(
            ablation="counterfactual",
            granularity="edge",
            grid=list(options.grid),
            ranking={"cpr": "signed", "cmd": "absolute"},
            edge_count_rounding="floor",
            metric="logit_difference",
            batch_size=result.batch_size,
            padding_side="right",
            **start_token,
        ),
        claims=CircuitClaims(
            circuit="circuit",
            n_edges=result.universe.n_edges,
            m_full=result.m_full,
            m_empty=result.m_empty,
            curves=[Curve.model_validate(curve) for curve in result.curves],
            cpr=ScalarClaim(value=result.cpr),
            cmd=NonNegativeClaim(value=result.cmd),
        ),
        artifacts=[Artifact.model_validate(entry) for entry in artifacts],
        provenance=Provenance.model_validate(provenance),
    )


def _answer_token(profile: str, task: str) -> str:
    """The profile's answer-token convention for ``task`` (PR-3), which the report then declares."""
    return answer_token_choice({"task": {"name": task}, "settings": {}}, load_profile(profile))


def _prepends(profile: str) -> bool:
    return bool(load_profile(profile)["start_token"] == "prepend")


def _method_block(options: CircuitOptions) -> Method:
    info = METHODS[options.method]
    optional: dict[str, Any] = {}
    if options.method == "eap-ig":
        optional["hyperparameters"] = {"ig_steps": options.steps}
    if "citation" in info:
        optional["citation"] = Citation.model_validate(info["citation"])
    return Method(name=info["name"], version="1.0", description=info["description"], **optional)


def _strict_rows(rows_bytes: bytes) -> list[dict[str, Any]]:
    """A dataset's JSON Lines rows, each parsed as strictly as a document."""
    try:
        return [row for _, row in read_json_lines(io.BytesIO(rows_bytes))]
    except JsonLinesError as exc:
        raise ValueError(f"dataset_path: the rows are not strict JSON objects: {exc}") from exc


def _dataset_input(path: Path) -> tuple[CounterfactualDataset, bytes]:
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
        fields = {key: value for key, value in data.items() if key != "artifacts"}
        return _dataset_document(path, fields), rows_bytes
    if path.name.endswith(".meta.json") and "task" in data:
        rows_path = path.with_name(path.name[: -len(".meta.json")] + ".jsonl")
        fields = {
            "task": data["task"],
            **({"split": data["split"]} if "split" in data else {}),
            "examples": "rows",
            "counterfactual_types": data["counterfactual_types"],
            "variables": data.get("variables", []),
            "generator": data["generator"],
            "filters": data.get("filters", []),
        }
        return _dataset_document(path, fields), rows_path.read_bytes()
    raise ValueError(
        f"dataset_path: {path} is neither a counterfactual dataset document nor a dataset .meta.json"
    )


def _dataset_document(path: Path, fields: dict[str, Any]) -> CounterfactualDataset:
    try:
        return CounterfactualDataset.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"dataset_path: {path} is not a valid counterfactual dataset: {exc}") from exc


def _model_ref(model_dir: Path, model: Any, dtype: str = "float32") -> dict[str, Any]:
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    architectures = config.get("architectures") or ["unknown"]
    return {
        "source": "local",
        "path": model_dir.name,
        "architecture": architectures[0],
        "dtype": dtype,
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
    return score_provenance("mibspec score circuit", ("numpy", "torch", "transformers", "python"), created)
