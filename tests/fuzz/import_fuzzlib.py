"""Fuzzing the importers and exporters: every file format they read, every folder they list.

Each surface builds its inputs from a small valid seed, damaged by a ``random.Random`` so that
an input is a pure function of (surface, number):

- ``eap-ig-json``, ``eap-ig-pt``: EAP-IG graphs (``import eap-ig``): byte and tree mutations,
  hostile ``cfg`` sizes, scores beyond float32, stride-0 and wrongly shaped tensors, tensors
  of other dtypes, values that are not tensors, node lists with repeats, a callable;
- ``results-pkl``: the results pickles of a circuit-track submission: hostile values,
  direct calls of numpy's constructors with claimed sizes, callables, damaged bytes;
- ``dataset-jsonl``, ``dataset-parquet``: released MIB dataset rows (``import mib-dataset``);
- ``circuit-submission``, ``cv-submission``: submission folders of both tracks: hostile and
  colliding folder and unit names, links out of the folder, in a loop or dangling, damaged
  graph, results, featurizer and indices files, submitted code, a damaged positions file;
- ``circuit-results``, ``causal-results``: leaderboard result files;
- ``export-circuit``, ``export-cv``: the exports of circuit reports and featurizers whose
  names (task, model, variable folder, unit id) climb out of the output folder.

:func:`check` states what must hold for every input: no exception escapes (an export may
refuse with ``ExportError``, a usage error), every finding has a catalogue code and a
location, an import with an error finding writes nothing, nothing is written anywhere in the
scratch folder but the output folder, no callable a file names ever runs, and every document
an import writes passes the parse, schema and artifact checks. :class:`ImportFuzzer` runs the
inputs with a per-input time limit and, through :func:`memory_limit`, with a bounded address
space, so that an allocation of the size a file claims fails (and is reported) instead of
succeeding. ``tests/fuzz/run_imports.py`` is the command-line entry point.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import pickle
import random
import resource
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzlib import (
    HOSTILE_PATHS,
    HOSTILE_VALUES,
    REPO,
    Outcome,
    _byte_mutation,
    _nodes,
    _set,
)
from fuzzlib import _tree_mutation as _json_tree_mutation

SURFACES = (
    "eap-ig-json",
    "eap-ig-pt",
    "results-pkl",
    "dataset-jsonl",
    "dataset-parquet",
    "circuit-submission",
    "cv-submission",
    "circuit-results",
    "causal-results",
    "export-circuit",
    "export-cv",
)
GRID = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
CELL = "arithmetic_GPT2LMHeadModel_ones_carry"
UNIT = "ResidualStream(Layer:3,Token:last_token)"
#: Names of folders, files and units a hostile submission or report may use.
HOSTILE_NAMES = (
    "..",
    ".",
    "",
    "../../escaped",
    "/absolute",
    "a/b",
    "IOI",
    "io i",
    "ünï",
    "x" * 300,
    "\x1b[2K",
    "²",
    "9" * 200,
    "-",
    ".hidden",
    "a\\b",
)
#: Extra address space an input may take beyond what the process holds when it starts.
MEMORY_MARGIN = 2 * 1024**3


# --- limits --------------------------------------------------------------------------------------


class InputHangError(BaseException):
    """An input took longer than its time limit. A BaseException: the verification an export
    runs first reports an Exception raised inside a rule as an internal error and goes on, which
    would swallow the alarm."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`InputHangError` in the main thread after ``seconds`` (SIGALRM)."""

    def expire(signum: int, frame: Any) -> None:
        raise InputHangError(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def memory_limit(margin: int = MEMORY_MARGIN) -> Iterator[None]:
    """Limit this process's address space to what it holds now plus ``margin`` (restored after):
    an allocation of the gigabytes a hostile file claims then fails with MemoryError."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _address_space() + margin
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --- seeds ---------------------------------------------------------------------------------------


def _universe(layers: int = 2, heads: int = 2) -> Any:
    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    return GraphUniverse(GraphConfig(layers, heads))


def graph_json(rng: random.Random, *, scores: bool = True, layers: int = 2, heads: int = 2) -> dict[str, Any]:
    """An EAP-IG graph as json.load gives it: some nodes unscored (NaN), neuron entries."""
    from mibspec.exporters.eap_ig import eap_ig_edge_order

    universe, d_model = _universe(layers, heads), 4
    nodes: dict[str, Any] = {}
    neurons = rng.random() < 0.3
    for i, name in enumerate(universe.forward_names):
        entry: dict[str, Any] = {"in_graph": rng.random() < 0.5}
        if scores and rng.random() < 0.5:
            entry["score"] = float("nan") if i % 3 == 1 else round(rng.gauss(0, 1), 6)
        if neurons:
            entry["neurons"] = [rng.random() < 0.5 for _ in range(d_model)]
            entry["neurons_scores"] = [round(rng.gauss(0, 1), 6) for _ in range(d_model)]
        nodes[name] = entry
    nodes["logits"] = {"in_graph": True}
    edges = {
        name: (
            {"score": round(rng.gauss(0, 1), 6), "in_graph": rng.random() < 0.2}
            if scores
            else {"in_graph": False}
        )
        for name in eap_ig_edge_order(universe)
    }
    return {
        "cfg": {"n_layers": layers, "n_heads": heads, "parallel_attn_mlp": False, "d_model": d_model},
        "nodes": nodes,
        "edges": edges,
    }


def graph_pt(rng: random.Random) -> dict[str, Any]:
    """An EAP-IG graph as torch.save writes it (tensors by source × destination)."""
    import torch

    universe = _universe()
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    n, m = universe.n_forward, universe.n_backward
    graph: dict[str, Any] = {
        "cfg": {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 4},
        "src_nodes": list(universe.forward_names),
        "dst_nodes": list(universe.backward_names),
        "edges_scores": torch.randn(n, m, generator=generator),
        "edges_in_graph": torch.rand(n, m, generator=generator) < 0.2,
    }
    if rng.random() < 0.5:
        graph["nodes_in_graph"] = torch.rand(n, generator=generator) < 0.5
        graph["nodes_scores"] = torch.randn(n, generator=generator)
    if rng.random() < 0.3:
        graph["neurons_in_graph"] = torch.rand(n, 4, generator=generator) < 0.5
        graph["neurons_scores"] = torch.randn(n, 4, generator=generator)
    return graph


def results(rng: random.Random) -> dict[str, Any]:
    """A results dict as MIB's run_evaluation.py pickles it."""
    faithfulness = [*[round(rng.random(), 6) for _ in range(9)], 1.0]
    return {
        "weighted_edge_counts": [float(int(k * 100)) for k in GRID],
        "area_under": 0.5,
        "area_from_1": 0.5,
        "average": sum(faithfulness) / 10,
        "faithfulnesses": faithfulness,
    }


_IOI = "Then, {name_A} and {name_B} went to the {place}. {name_C} gave a {object} to"


def _ioi(a: str, b: str, c: str, io: str) -> dict[str, Any]:
    return {
        "prompt": _IOI.format(name_A=a, name_B=b, name_C=c, place="store", object="drink"),
        "template": _IOI,
        "metadata": {"subject": c, "indirect_object": io, "random_c": "Paul"},
    }


def _mcqa(labels: list[str], texts: list[str], key: int) -> dict[str, Any]:
    options = "".join(f"\n{label}. {text}" for label, text in zip(labels, texts, strict=True))
    return {
        "prompt": f"Question: What color is the banana?{options}\nAnswer:",
        "choices": {"label": labels, "text": texts},
        "answerKey": key,
    }


def _sum(x: int, y: int) -> dict[str, Any]:
    return {"prompt": f"Q: How much is {x} plus {y}? A:", "label": x + y, "operator": "+"}


def dataset_rows(rng: random.Random) -> list[dict[str, Any]]:
    """Two rows of a MIB task in the released layout."""
    task = rng.choice(["ioi", "mcqa", "arithmetic", "ravel"])
    if task == "ioi":
        return [
            {
                **_ioi("Mary", "John", "John", "Mary"),
                "abc_counterfactual": _ioi("Mary", "John", "Paul", "Mary"),
            }
        ] * 2
    if task == "mcqa":
        base = _mcqa(["A", "B"], ["gray", "yellow"], 1)
        return [{**base, "noun_counterfactual": _mcqa(["1", "2"], ["yellow", "gray"], 0)}] * 2
    if task == "arithmetic":
        return [
            {**_sum(17, 25), "random_counterfactual": _sum(30, 47)},
            {**_sum(11, 12), "random_counterfactual": _sum(9, 9)},
        ]
    ravel = {
        "prompt": "Paris is in the country of",
        "entity": "Paris",
        "attribute": "Country",
        "label": "France",
    }
    cf = {"prompt": "Tokyo is in the country of", "entity": "Tokyo", "attribute": "Country", "label": "Japan"}
    return [{**ravel, "entity_counterfactual": cf}] * 2


def circuit_results(rng: random.Random) -> dict[str, Any]:
    curve = {"edge_counts": [float(int(k * 32491)) for k in GRID], "faithfulness": [0.5] * 9 + [1.0]}
    entries = [
        {"model_id": model, "scores": {task: {"CPR": curve, "CMD": copy.deepcopy(curve)}}}
        for model, task in rng.sample(
            [("gpt2", "ioi"), ("gpt2", "mcqa"), ("qwen2.5", "ioi"), ("llama3", "arc_easy")], 2
        )
    ]
    return {"method_name": "m", "description": "d", "results": entries}


def causal_results(rng: random.Random) -> dict[str, Any]:
    units = {}
    for layer in rng.sample(range(12), 3):
        key = f"[[AtomicModelUnit(id='ResidualStream(Layer-{layer},Token-last_token)')]]"
        units[key] = {
            "metadata": {"layer": layer, "position": "last_token"},
            "ones_carry": {"average_score": rng.random()},
        }
    return {
        "method_name": "m",
        "model_name": "gpt2",
        "task_name": "arithmetic",
        "dataset": {"random_test": {"model_unit": units}},
    }


def cv_info(rng: random.Random, rows: int = 8, columns: int = 2) -> dict[str, Any]:
    """The ``model_info`` of a subspace featurizer (rotation: d_model × n_features)."""
    import torch

    matrix = torch.linalg.qr(
        torch.randn(rows, rows, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    )[0]
    matrix = matrix[:, :columns].contiguous()
    return {
        "featurizer_class": "SubspaceFeaturizerModule",
        "inverse_featurizer_class": "SubspaceInverseFeaturizerModule",
        "n_features": columns,
        "additional_config": {"rotation_matrix": matrix},
    }


# --- mutations of Python values ------------------------------------------------------------------


class _Call:
    """Pickles as a call of ``function`` with ``args`` (what a hostile pickle can ask for)."""

    def __init__(self, function: Any, *args: Any) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> Any:
        return (self.function, self.args)


def hostile_tensors(rng: random.Random) -> list[Any]:
    import torch

    return [
        torch.zeros(1).expand(7, 10**8),  # stride 0: 2.8 GB claimed by 4 bytes
        torch.zeros(1, 1).expand(50_000, 50_000),
        torch.zeros(3),
        torch.zeros(0, 4),
        torch.tensor(1.0),
        torch.full((7, 19), 1.7e308, dtype=torch.float64),
        torch.full((7, 19), float("nan")),
        torch.full((7, 19), float("inf")),
        torch.zeros(7, 19, dtype=torch.complex64),
        torch.zeros(7, 19, dtype=torch.bfloat16),
        torch.zeros(7, 19, dtype=torch.int64),
        torch.zeros(7, 19, dtype=torch.uint8),
        torch.zeros(7, 4, dtype=torch.float16),
        torch.zeros(19, 7).T,  # not contiguous
        torch.arange(8.0).reshape(2, 2, 2),
        torch.zeros(1).expand(8, 2),
    ]


def mutate_value(value: Any, rng: random.Random, extra: list[Any], marker: Path) -> tuple[Any, str]:
    """``value`` (a nest of dicts and lists) with one node replaced by a hostile value."""
    value = copy.deepcopy(value)
    nodes = list(_nodes(value))
    path, _ = rng.choice(nodes)
    pool = [*HOSTILE_VALUES, *extra, _Call(os.mkdir, str(marker)), float("nan"), float("inf"), -1.7e308]
    new = rng.choice(pool)
    if isinstance(new, (dict, list)):  # never a tensor: a copy of a stride-0 view is its full size
        new = copy.deepcopy(new)
    if rng.random() < 0.15 and isinstance(value, dict) and value:
        del value[rng.choice(list(value))]
        return value, "a key deleted"
    return _set(value, path, new), f"value at {list(path)[:4]} replaced by {type(new).__name__}"


def _pickled(value: Any, rng: random.Random) -> bytes:
    try:
        return pickle.dumps(value, protocol=rng.choice([0, 2, 4, 5]))
    except Exception:  # a value the pickler itself refuses (a tensor view at protocol 0, ...)
        return pickle.dumps(value, protocol=4)


def _torch_bytes(value: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


# --- the cases -----------------------------------------------------------------------------------


@dataclass
class Case:
    """One input: the files are in ``folder``; ``run(out)`` imports or exports them."""

    surface: str
    number: int
    description: str
    run: Callable[[Path], Any]
    export: bool = False


@dataclass
class _Context:
    rng: random.Random
    folder: Path  # where the input's files go (emptied for every input)
    outside: Path  # a folder beside it, reached only through links
    marker: Path  # must never exist: a callable in a file would create it
    seeds: Path  # files built once (reports, imported featurizers)
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)


def _case_eap_ig_json(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_eap_ig

    rng = ctx.rng
    data = graph_json(rng, scores=rng.random() < 0.8)
    choice = rng.random()
    if choice < 0.35:
        text, what = _json_tree_mutation(data, rng, [])
    elif choice < 0.6:
        text, what = (
            _byte_mutation(json.dumps(data).encode(), rng)[0].decode("utf-8", "replace"),
            "bytes damaged",
        )
    else:
        key = rng.choice(["n_layers", "n_heads", "d_model", "parallel_attn_mlp"])
        data["cfg"][key] = rng.choice([10**9, 10**6, 0, -1, "2", True, 10**4000, 2.0, None, 2**63])
        edge = rng.choice(list(data["edges"]))
        if rng.random() < 0.5 and "score" in data["edges"][edge]:
            data["edges"][edge]["score"] = rng.choice([1.7e308, -3.5e38, 3.4028234663852886e38, 10**400])
        text, what = json.dumps(data), f"cfg {key} and a score made extreme"
    path = ctx.folder / rng.choice(["graph.json", "importances.json"])
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    ctx.note(what)
    model = rng.choice([None, None, "gpt2"])
    return lambda out: import_eap_ig(path, out, model=model)


def _case_eap_ig_pt(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_eap_ig

    rng = ctx.rng
    data = graph_pt(rng)
    choice = rng.random()
    if choice < 0.1:
        ctx.note("undamaged")
    elif choice < 0.45:
        key = rng.choice(list(data))
        data[key] = rng.choice(
            [*hostile_tensors(rng), *HOSTILE_VALUES[:20], _Call(os.mkdir, str(ctx.marker))]
        )
        ctx.note(f"{key} replaced")
    elif choice < 0.6:
        data["cfg"][rng.choice(list(data["cfg"]))] = rng.choice([10**9, 10**5, 0, "2", None, True])
        ctx.note("cfg made hostile")
    elif choice < 0.75:
        names = list(data["src_nodes"])
        variants = [
            [*names, names[0]],
            names[:-1],
            dict(zip(names, [0] * len(names), strict=True)),
            {name: str(i) for i, name in enumerate(names)},
            [*names[:-1], 3],
            {name: i for i, name in enumerate(reversed(names))},
        ]
        data[rng.choice(["src_nodes", "dst_nodes"])] = rng.choice(variants)
        ctx.note("node list damaged")
    raw = _torch_bytes(data)
    if choice >= 0.75:
        raw, what = _byte_mutation(raw, rng)
        ctx.note(f"bytes: {what}")
    path = ctx.folder / "graph.pt"
    path.write_bytes(raw)
    return lambda out: import_eap_ig(path, out)


def _circuit_folder(ctx: _Context, folder: Path, *, pickle_bytes: bytes | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    graph = graph_json(ctx.rng, layers=1, heads=1)
    for edge in graph["edges"].values():
        edge["in_graph"] = False
    (folder / "importances.json").write_text(json.dumps(graph), encoding="utf-8")
    for flag in ("False", "True"):
        data = (
            pickle_bytes if pickle_bytes is not None and flag == "False" else pickle.dumps(results(ctx.rng))
        )
        (folder / f"{folder.name}_validation_abs-{flag}.pkl").write_bytes(data)


def _submission_options() -> Any:
    from mibspec.importers import SubmissionOptions

    return SubmissionOptions(architecture="GPT2LMHeadModel", method="m")


def _case_results_pkl(ctx: _Context) -> Callable[[Path], Any]:
    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct  # numpy 2
    except ImportError:  # numpy 1
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

    from mibspec.importers import import_mib_submission

    rng = ctx.rng
    data: Any = results(rng)
    if rng.random() < 0.3:
        data["faithfulnesses"] = np.array(data["faithfulnesses"])
    calls = [
        _Call(np.ndarray, (10**9,), "f8"),
        _Call(np.ndarray, (2 * 10**8,)),
        _Call(_reconstruct, np.ndarray, (10**9,), b"b"),
        _Call(np.dtype, ("f8", (10**8,))),
        _Call(np.dtype, "O"),
        _Call(eval, "1"),
        _Call(os.system, "true"),
        np.array([object()], dtype=object)[:0],
        np.arange(10, dtype=np.float64).reshape(2, 5),
        np.zeros(10, dtype=np.complex128),
        np.arange(3_000_000, dtype=np.float64),
        {1, 2, 3},
        frozenset(),
    ]
    choice = rng.random()
    if choice < 0.55:
        data, what = mutate_value(data, rng, calls, ctx.marker)
        raw = _pickled(data, rng)
    elif choice < 0.7:
        raw, what = _pickled(rng.choice(calls), rng), "the whole file a hostile object"
    else:
        raw, what = _byte_mutation(_pickled(data, rng), rng)
    ctx.note(what)
    source = ctx.folder / "method"
    _circuit_folder(ctx, source / "ioi_tiny", pickle_bytes=raw)
    return lambda out: import_mib_submission(source, out, _submission_options())


def _dataset_source(ctx: _Context, suffix: str) -> Path:
    rng = ctx.rng
    name = rng.choice(["test", "validation", "train", "..test", "a b test", "x" * 100 + "_test", "²test"])
    return ctx.folder / f"{name}{suffix}"


def _dataset_options(ctx: _Context) -> dict[str, Any]:
    rng = ctx.rng
    options: dict[str, Any] = {}
    if rng.random() < 0.2:
        options["task"] = rng.choice(["ioi", "ravel", "nope", ""])
    if rng.random() < 0.1:
        options["split"] = rng.choice(["test", "dev", ""])
    if rng.random() < 0.1:
        options["hub_id"], options["revision"] = "mib-bench/ioi", rng.choice(["a" * 40, "main"])
    return options


def _mutated_rows(ctx: _Context) -> tuple[Any, str]:
    rng = ctx.rng
    rows = dataset_rows(rng)
    labels = ["²", "٣", "9" * 5000, "-3", " 12 ", 10**30, -(10**19), 1.5, True, None]
    if rng.random() < 0.4:
        row = rng.choice(rows)
        row["label"] = rng.choice(labels)
        return rows, "a hostile label"
    text, what = _json_tree_mutation(rows, rng, [])
    try:
        return json.loads(text), what
    except (ValueError, RecursionError):
        return text, what


def _case_dataset_jsonl(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_mib_dataset

    rng = ctx.rng
    rows, what = _mutated_rows(ctx)
    if isinstance(rows, list):
        raw = "".join(json.dumps(row) + "\n" for row in rows).encode("utf-8", "surrogatepass")
    else:
        raw = str(rows).encode("utf-8", "surrogatepass")
    if rng.random() < 0.3:
        raw, what = _byte_mutation(raw, rng)
    ctx.note(what)
    path = _dataset_source(ctx, ".jsonl")
    path.write_bytes(raw)
    options = _dataset_options(ctx)
    return lambda out: import_mib_dataset([path], out, **options)


def _case_dataset_parquet(ctx: _Context) -> Callable[[Path], Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mibspec.importers import import_mib_dataset

    rng = ctx.rng
    rows, what = _mutated_rows(ctx)
    buffer = io.BytesIO()
    try:
        pq.write_table(pa.Table.from_pylist(rows if isinstance(rows, list) else [{"x": 1}]), buffer)
    except Exception:  # rows pyarrow cannot type (mixed types in a column): the seed rows
        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(dataset_rows(rng)), buffer)
        what = "seed rows"
    raw = buffer.getvalue()
    if rng.random() < 0.4:
        raw, what = _byte_mutation(raw, rng)
    ctx.note(what)
    path = _dataset_source(ctx, ".parquet")
    path.write_bytes(raw)
    options = _dataset_options(ctx)
    return lambda out: import_mib_dataset([path], out, **options)


def _link(ctx: _Context, link: Path, target: Path, directory: bool = False) -> None:
    with contextlib.suppress(OSError):
        if link.exists() or link.is_symlink():
            if link.is_dir() and not link.is_symlink():
                shutil.rmtree(link)
            else:
                link.unlink()
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=directory)


def _case_circuit_submission(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_mib_submission, submission_layout

    rng = ctx.rng
    source = ctx.folder / "method"
    source.mkdir()
    plain = ["ioi_tiny", "mcqa_tiny", "arc-easy_tiny"]
    hostile = ["IOI_tiny", "io i_tiny", "io-i_tiny", "..x_tiny", "a_b_c", "ioi_", "²_tiny"]
    names = rng.sample(plain, 2) if rng.random() < 0.5 else [rng.choice(plain), rng.choice(hostile)]
    for name in names:
        _circuit_folder(ctx, source / name)
    _circuit_folder(ctx, ctx.outside / "ioi_tiny")
    victim = source / rng.choice(names)
    choice = rng.random()
    if choice < 0.15:
        ctx.note("no damage")
    elif choice < 0.3:
        _link(ctx, victim, ctx.outside / "ioi_tiny", directory=True)
        ctx.note(f"{victim.name} links out")
    elif choice < 0.45:
        name = rng.choice([p.name for p in victim.iterdir()])
        target = (
            ctx.outside / "ioi_tiny" / rng.choice(["importances.json", "ioi_tiny_validation_abs-True.pkl"])
        )
        _link(ctx, victim / name, target)
        ctx.note(f"{name} links out")
    elif choice < 0.55:
        _link(ctx, victim / "importances.json", victim / "importances.json")
        ctx.note("a link loop")
    elif choice < 0.65:
        _link(ctx, victim / "importances.json", ctx.folder / "missing")
        ctx.note("a dangling link")
    elif choice < 0.85:
        target = victim / rng.choice([p.name for p in victim.iterdir()])
        target.write_bytes(_byte_mutation(target.read_bytes(), rng)[0])
        ctx.note(f"{target.name} damaged")
    else:
        extra = graph_json(rng, scores=False, layers=1, heads=1)
        (victim / f"circuit_{rng.randrange(20)}.json").write_text(json.dumps(extra))
        ctx.note("an extra circuit file")
    ctx.note(f"folders {names}")
    return lambda out: (submission_layout(source), import_mib_submission(source, out, _submission_options()))[
        1
    ]


def _cv_unit(ctx: _Context, folder: Path, unit_id: str, info: dict[str, Any] | None = None) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    info = cv_info(ctx.rng) if info is None else info
    for suffix in ("_featurizer", "_inverse_featurizer"):
        torch.save({"model_info": info, "state_dict": {}}, folder / f"{unit_id}{suffix}")
    (folder / f"{unit_id}_indices").write_text("[0, 1]", encoding="utf-8")


def _case_cv_submission(ctx: _Context) -> Callable[[Path], Any]:
    import torch

    from mibspec.importers import import_mib_cv_submission, submission_layout

    rng = ctx.rng
    source = ctx.folder / "submission"
    cell = source / CELL
    layer = rng.choice(["3", "3", "²", "9" * 150, "-1", "03", "٣", "1_0"])
    unit = f"ResidualStream(Layer:{layer},Token:last_token)"
    info = cv_info(rng)
    choice = rng.random()
    if choice < 0.35:
        info, what = mutate_value(info, rng, hostile_tensors(rng), ctx.marker)
        ctx.note(f"model_info: {what}")
    _cv_unit(ctx, cell, unit, info)
    _cv_unit(ctx, cell, "AttentionHead(Layer:1,Head:2,Token:last_token)")
    _cv_unit(ctx, ctx.outside / CELL, UNIT)
    if 0.35 <= choice < 0.5:
        suffix = rng.choice(["_featurizer", "_inverse_featurizer", "_indices"])
        _link(ctx, cell / f"{unit}{suffix}", ctx.outside / CELL / f"{UNIT}{suffix}")
        ctx.note(f"{suffix} links out")
    elif 0.5 <= choice < 0.6:
        shutil.rmtree(cell)
        _link(ctx, cell, ctx.outside / CELL, directory=True)
        ctx.note("the variable folder links out")
    elif 0.6 <= choice < 0.8:
        target = cell / f"{unit}{rng.choice(['_featurizer', '_inverse_featurizer', '_indices'])}"
        target.write_bytes(_byte_mutation(target.read_bytes(), rng)[0])
        ctx.note(f"{target.name} damaged")
    elif 0.8 <= choice < 0.9:
        torch.save({"model_info": _Call(os.mkdir, str(ctx.marker))}, cell / f"{unit}_featurizer")
        (source / "featurizer.py").write_text(f"open({str(ctx.marker)!r}, 'w')\n", encoding="utf-8")
        ctx.note("a callable and submitted code")
    positions = None
    if rng.random() < 0.4:
        positions = ctx.folder / "positions.json"
        mapping = {"last_token": {"rule": "last"}}
        text = json.dumps(mapping) if rng.random() < 0.5 else _json_tree_mutation(mapping, rng, [])[0]
        positions.write_bytes(text.encode("utf-8", "surrogatepass"))
    ctx.note(f"layer {layer[:10]!r}")
    return lambda out: (
        submission_layout(source),
        import_mib_cv_submission(source, out, positions=positions),
    )[1]


def _json_case(ctx: _Context, seed: dict[str, Any], name: str) -> Path:
    rng = ctx.rng
    if rng.random() < 0.6:
        text, what = _json_tree_mutation(seed, rng, [])
        raw = text.encode("utf-8", "surrogatepass")
    else:
        raw, what = _byte_mutation(json.dumps(seed).encode(), rng)
    ctx.note(what)
    path = ctx.folder / name
    path.write_bytes(raw)
    return path


def _report_options(ctx: _Context) -> Any:
    from mibspec.importers import ImportOptions

    rng = ctx.rng
    if rng.random() < 0.7:
        return ImportOptions()
    return ImportOptions(
        model_revision=rng.choice([None, "a" * 40, "A" * 40, "²" * 40]),
        split=rng.choice([None, "test", "dev"]),
        dataset=rng.choice([None, f"mib-bench/ioi@{'b' * 40}", "../../x"]),
    )


def _case_circuit_results(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_mib_circuit_results

    seed = circuit_results(ctx.rng)
    if ctx.rng.random() < 0.3:  # a task under a hostile name, or listed twice
        entry = ctx.rng.choice(seed["results"])
        scores = entry["scores"]
        scores[ctx.rng.choice(HOSTILE_NAMES)] = copy.deepcopy(next(iter(scores.values())))
        seed["results"].append(copy.deepcopy(entry))
    path = _json_case(ctx, seed, "results.json")
    options = _report_options(ctx)
    return lambda out: import_mib_circuit_results(path, out, options)


def _case_causal_results(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.importers import import_mib_causal_results

    seed = causal_results(ctx.rng)
    if ctx.rng.random() < 0.3:
        layer = ctx.rng.choice(["²", "9" * 5000, "٣", "-1", "1_0", "3.0"])
        units = seed["dataset"]["random_test"]["model_unit"]
        atom = f"AtomicModelUnit(id='AttentionHead(Layer-{layer},Head-{layer},Token-x)')"
        if ctx.rng.random() < 0.5:  # a joint unit across layers (MIB's IOI unit), one site hostile
            atom = f"AtomicModelUnit(id='AttentionHead(Layer-1,Head-0,Token-x)'), {atom}"
        units[f"[[{atom}]]"] = {"ones_carry": {"average_score": 0.5}}
        seed[ctx.rng.choice(["task_name", "method_name"])] = ctx.rng.choice(HOSTILE_NAMES) or "x"
    path = _json_case(ctx, seed, "results.json")
    options = _report_options(ctx)
    return lambda out: import_mib_causal_results(path, out, options)


def _circuit_report_seed(seeds: Path) -> Path:
    folder = seeds / "circuit-ioi"
    if not folder.exists():
        shutil.copytree(REPO / "examples" / "circuit-ioi", folder)
    return folder


def _case_export_circuit(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.exporters import export_mib_submission

    rng = ctx.rng
    folder = ctx.folder / "report"
    shutil.copytree(_circuit_report_seed(ctx.seeds), folder)
    path = folder / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    choice = rng.random()
    if choice < 0.6:
        report["task"]["name"] = rng.choice([*HOSTILE_NAMES, *HOSTILE_PATHS]) or "x"
        if rng.random() < 0.3:
            report["model"]["path"] = rng.choice(["..", "../../models/x", "/abs/x", "a_b"])
        path.write_text(json.dumps(report), encoding="utf-8")
        ctx.note(f"task {report['task']['name'][:20]!r}")
    else:
        text, what = _json_tree_mutation(report, rng, [])
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        ctx.note(what)
    reports = [path] if rng.random() < 0.8 else [path, path]
    return lambda out: export_mib_submission(reports, out)


def _featurizer_seed(ctx: _Context) -> Path:
    from mibspec.importers import import_mib_cv_submission

    folder = ctx.seeds / "featurizer"
    if not folder.exists():
        submission = ctx.seeds / "cv-submission"
        _cv_unit(ctx, submission / CELL, UNIT, cv_info(random.Random(0)))
        result = import_mib_cv_submission(submission, folder)
        assert result.written, [str(f) for f in result.findings]
    return next(folder.rglob("*.json"))


def _case_export_cv(ctx: _Context) -> Callable[[Path], Any]:
    from mibspec.exporters import export_mib_cv_submission

    rng = ctx.rng
    seed = _featurizer_seed(ctx)
    folder = ctx.folder / "featurizers"
    shutil.copytree(seed.parent, folder)
    path = folder / seed.name
    doc = json.loads(path.read_text(encoding="utf-8"))
    choice = rng.random()
    if choice < 0.6:
        key = rng.choice(["folder", "unit"])
        hostile = rng.choice([*HOSTILE_NAMES, *HOSTILE_PATHS])
        doc["extensions"]["org.mibspec:mib_unit"][key] = (
            f"arithmetic_{hostile}_ones_carry"
            if key == "folder"
            else f"ResidualStream(Layer:3,Token:{hostile})"
        )
        path.write_text(json.dumps(doc), encoding="utf-8")
        ctx.note(f"{key} {hostile[:20]!r}")
    else:
        text, what = _json_tree_mutation(doc, rng, [])
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        ctx.note(what)

    def run(out: Path) -> Any:
        import mibspec

        # as `mibspec export mib-submission` does: only verified declarations are written out
        if not mibspec.verify(path, recompute=False).valid:
            return []
        return export_mib_cv_submission([path], out)

    return run


_BUILDERS: dict[str, Callable[[_Context], Callable[[Path], Any]]] = {
    "eap-ig-json": _case_eap_ig_json,
    "eap-ig-pt": _case_eap_ig_pt,
    "results-pkl": _case_results_pkl,
    "dataset-jsonl": _case_dataset_jsonl,
    "dataset-parquet": _case_dataset_parquet,
    "circuit-submission": _case_circuit_submission,
    "cv-submission": _case_cv_submission,
    "circuit-results": _case_circuit_results,
    "causal-results": _case_causal_results,
    "export-circuit": _case_export_circuit,
    "export-cv": _case_export_cv,
}


# --- running and checking ------------------------------------------------------------------------


def _files(root: Path) -> set[Path]:
    found = set()
    for folder, dirs, files in os.walk(root):
        found.update(Path(folder) / name for name in [*dirs, *files])
    return found


def check(result: Any, out: Path, catalogue: Any, *, export: bool) -> list[str]:
    """What must hold for one import's or export's result; the violations."""
    import mibspec

    problems: list[str] = []
    if export and isinstance(result, list):  # export mib-submission: the files written
        return [
            f"{p} is written outside the output folder"
            for p in result
            if out.resolve() not in p.resolve().parents
        ]
    findings = getattr(result, "findings", None)
    if findings is None:
        return [f"the result is a {type(result).__name__}"]
    for finding in findings:
        if finding.code not in catalogue.by_code:
            problems.append(f"code {finding.code} is not in the catalogue")
        if not finding.line or not finding.column or finding.line < 1 or finding.column < 1:
            problems.append(f"{finding.code} at {finding.pointer!r} is not located")
    errors = [f for f in findings if f.severity.value == "error"]
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    if errors and written:
        problems.append(f"{len(written)} file(s) written although {errors[0].code} refused the input")
    for path in [] if export else result.written:
        # The parse, schema and artifact checks of what the import wrote; a value the source
        # held outside its range (S114) and an unpinned model (A111) are the source's.
        verified = mibspec.verify(path, recompute=False)
        bad = sorted(
            {f.code for f in verified.findings if f.code[0] in "PSA" and f.code not in ("S114", "A111")}
        )
        if bad:
            problems.append(f"{path.name} was written but fails {', '.join(bad)}")
    return problems


class ImportFuzzer:
    """Builds and runs the inputs of every surface in a scratch folder."""

    def __init__(self, scratch: Path, *, seconds_per_input: float = 30.0) -> None:
        from mibspec.validator import catalogue

        self.scratch = scratch
        self.seeds = scratch / "seeds"
        self.seeds.mkdir(parents=True, exist_ok=True)
        self.catalogue = catalogue()
        self.seconds_per_input = seconds_per_input

    def case(self, surface: str, number: int) -> tuple[Case, _Context]:
        """Input ``number`` of ``surface`` (a pure function of both), its files written."""
        work = self.scratch / "work"
        if work.exists():
            shutil.rmtree(work)
        ctx = _Context(
            random.Random(f"{surface}:{number}"),
            work / "in",
            work / "outside",
            self.scratch / "MARKER",
            self.seeds,
        )
        ctx.folder.mkdir(parents=True)
        ctx.outside.mkdir(parents=True)
        run = _BUILDERS[surface](ctx)
        return Case(surface, number, "; ".join(ctx.notes), run, surface.startswith("export")), ctx

    def run(self, surface: str, number: int) -> Outcome:
        from mibspec.core.outputs import OutputPathError
        from mibspec.exporters import ExportError

        outcome = Outcome(number, f"{surface} #{number}", 0.0)
        try:
            case, ctx = self.case(surface, number)
        except Exception as exc:  # the generator's own failure is not mibspec's
            outcome.description += f": input not built ({type(exc).__name__}: {exc})"[:300]
            outcome.codes = ("not built",)
            return outcome
        outcome.description += f": {case.description}"[:300]
        out = ctx.folder.parent / "out"
        before = _files(self.scratch)
        start = time.perf_counter()
        try:
            with time_limit(self.seconds_per_input), memory_limit():
                result = case.run(out)
            outcome.problems.extend(check(result, out, self.catalogue, export=case.export))
            outcome.codes = tuple(sorted({f.code for f in getattr(result, "findings", [])}))
            outcome.valid = not outcome.codes
        except InputHangError as exc:
            outcome.problems.append(f"hang: {exc}")
        except (ExportError, OutputPathError) as exc:
            if not case.export:
                outcome.problems.append(f"uncaught {type(exc).__name__}: {exc}"[:2000])
            outcome.codes = ("usage error",)
        except Exception as exc:
            outcome.problems.append(f"uncaught {type(exc).__name__}: {exc}"[:2000])
        finally:
            outcome.seconds = time.perf_counter() - start
        outside = [
            p
            for p in _files(self.scratch) - before
            if p != out and out not in p.parents and p.parent != self.seeds and self.seeds not in p.parents
        ]
        if outside:
            outcome.problems.append(f"written outside the output folder: {sorted(map(str, outside))[:3]}")
        if ctx.marker.exists():
            outcome.problems.append("a callable named in the input ran")
            ctx.marker.rmdir()
        return outcome

    def run_surface(self, surface: str, numbers: range) -> Iterator[Outcome]:
        for number in numbers:
            yield self.run(surface, number)
