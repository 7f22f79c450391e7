"""Verifying many reports: grouped against separate, the file-hash cache, Ray, `-j 2`.

All ratios come from one run of this script:

1. **Grouped recomputation.** ``--reports`` (20) copies of the IOI circuit example on the
   shipped tiny model (4 layers, 4 heads, d_model 64), all on the same dataset rows
   (the first ``--rows``) and counterfactual, each evaluating *different* circuits (report
   i takes the membership rows of its curves rotated by i). Timed in this process: the
   first report verified alone, the reports verified one by one (a fresh session each: the
   model read, hashed and built for every report), and the reports verified grouped. The
   JSON outputs of the two ways must agree: equal but for recomputed values, which may
   differ by floating-point reassociation (engine.md ME-10), as circuits of several
   reports share a stack. Goal: grouped ≤ 2× one report.
   Printed beside it, the lower bound of the workload: one report plus the CPU time of the
   patched passes of the circuits the first report lacks (timed in the grouped run), so
   that grouped − bound is overhead, not arithmetic.
2. **File-hash cache.** Digest of a model file of ``--hash-mib`` MiB (a GPT-2-small
   float32 checkpoint is 498 MiB) on a first run (hashed) and a second run (from the
   cache), each a fresh cache object reading the cache file as a new process would.
3. **Ray against `-j 2`.** ``mibspec verify DIR`` over ``--ray-reports`` reports in two
   groups, as two processes: ``-j 2`` and ``--executor ray`` (which starts a local Ray
   cluster of 2 CPUs: its start-up is part of the time, as a user sees it; the time with
   the cluster already up is printed too). Outputs must be byte-identical.
4. **`-j 2` against `-j 1`** on ``--small`` (50) copies of the circuit example,
   ``--no-recompute`` (milliseconds of work per report), whole processes, median of
   ``--runs``. Goal: ``-j 2`` ≥ 1.6× faster.

Run: ``python benchmarks/bench_grouped_verify.py [--reports 20] [--rows 40] [--circuits same|mixed|distinct]
[--shape tiny|gpt2-small] [--cache-bytes N] [--skip-ray] [--json OUT]``. ``--cache-bytes`` bounds the
activation cache as ``MIBSPEC_ACTIVATION_CACHE_BYTES`` does: with a bound that holds fewer batches'
runs than the dataset has, part 1 measures what grouping saves on a dataset larger than the cache.
With ``--shape gpt2-small`` part 1's reports are about a GPT-2-small-shaped model with random
weights, written by ``mibspec score circuit --method eap`` (see :func:`gpt2_small_example`).
Goals of part 1: grouped ≤ 2× one report when the reports share circuits (``same``,
``mixed``), grouped ≤ 1.1× the lower bound when each report's circuits are its own
(``distinct``).
CPU time (``process_time`` of this process and its children) is printed next to wall
time: on a shared machine it is the steadier figure.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "circuit-ioi"
MODELS = REPO / "examples" / "models"


def _edit(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _repin(document: Path, name: str) -> None:
    data = (document.parent / name).read_bytes()

    def change(doc: Any) -> None:
        for artifact in doc["artifacts"]:
            if artifact["path"] == name:
                artifact["bytes"], artifact["sha256"] = len(data), hashlib.sha256(data).hexdigest()

    _edit(document, change)


#: ``--circuits``: which membership rows the reports share (see :func:`build_corpus`).
CIRCUITS = ("same", "mixed", "distinct")


def build_corpus(
    root: Path,
    n: int,
    rows: int,
    batch_sizes: tuple[int, ...] = (20,),
    circuits: str = "same",
    example: Path = EXAMPLE,
) -> None:
    """``n`` report folders on the first ``rows`` dataset rows, report i's circuit document
    holding its membership rows rotated by i (the entries' indices and the curve points
    follow, so each point still names its own circuit), and the batch size
    ``batch_sizes[i % len]`` (the tests build their reports with it too).

    ``example``: the report folder copied (default: the shipped circuit example).
    ``circuits``: ``same`` (every report evaluates the example's 20 membership rows, each
    curve point another row: one set of circuits for all), ``distinct`` (every report but
    the first has its own version of each circuit other than the empty and the full one:
    one edge swapped for another, all of the same size) or ``mixed`` (only the rows of the
    absolute-score curve are report's own; the signed curve's are shared by all).
    """
    seen: set[bytes] = set()
    for i in range(n):
        target = root / f"run{i:03d}"
        shutil.copytree(example, target)
        lines = (target / "dataset.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
        (target / "dataset.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        _edit(target / "dataset.json", lambda d: d["artifacts"][0].update(rows=rows))
        _repin(target / "dataset.json", "dataset.jsonl")
        if circuits != "same" and i > 0:
            _own_circuits(target, range(2, 9) if circuits == "mixed" else range(20), seen, i)
        _rotate_rows(target, i)

        listed = json.loads((target / "circuit.json").read_text(encoding="utf-8"))["circuits"]
        by_row = {entry["index"]: entry for entry in listed}

        def change(doc: Any, i: int = i, by_row: dict[int, Any] = by_row) -> None:
            doc["task"]["n_examples"] = rows
            doc["settings"]["batch_size"] = batch_sizes[i % len(batch_sizes)]
            for curve in doc["claims"]["curves"]:
                for point in curve["points"]:
                    point["circuit"] = (point["circuit"] + i) % 20
                    point["weighted_size"] = by_row[point["circuit"]]["weighted_size"]  # a row of its own

        _edit(target / "report.json", change)
        _repin(target / "report.json", "dataset.json")
        _repin(target / "report.json", "circuit.json")


#: ``--shape``: the model the reports of part 1 are about.
SHAPES = ("tiny", "gpt2-small")


def gpt2_small_example(tmp: Path, rows: int) -> tuple[Path, Path]:
    """A circuit report on a GPT-2-small-shaped model with random weights: its folder and the
    model root.

    The model is the shipped tiny model's configuration and tokenizer at GPT-2 small's
    shape (12 layers, 12 heads, d_model 768, d_ff 3072; the tokenizer's vocabulary of 855
    is kept, which only the embedding reads), weights from a seeded initialisation. The
    report is written by ``mibspec score circuit --method eap`` on the example's first
    ``rows`` dataset rows.
    """
    import torch
    import transformers

    models = tmp / "models"
    folder = models / "gpt2-small-random"
    shutil.copytree(MODELS / "tiny-gpt2", folder, ignore=shutil.ignore_patterns("training.json"))
    _edit(folder / "config.json", lambda cfg: cfg.update(n_layer=12, n_head=12, n_embd=768, n_inner=3072))
    with torch.random.fork_rng():  # the library initialises from the global generator
        torch.manual_seed(0)
        config = transformers.GPT2Config.from_pretrained(folder, trust_remote_code=False)
        transformers.GPT2LMHeadModel(config).eval().save_pretrained(folder)
    data = tmp / "gpt2-small-data"
    data.mkdir()
    lines = (EXAMPLE / "dataset.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
    (data / "dataset.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copy(EXAMPLE / "dataset.json", data / "dataset.json")
    _edit(data / "dataset.json", lambda d: d["artifacts"][0].update(rows=rows))
    _repin(data / "dataset.json", "dataset.jsonl")
    example = tmp / "gpt2-small-report"
    command = [sys.executable, "-m", "mibspec", "score", "circuit", "-m", str(folder)]
    command += ["-d", str(data / "dataset.json"), "-c", "io_s2_flip", "-o", str(example), "--method", "eap"]
    subprocess.run(command, check=True, capture_output=True)
    return example, models


def _rotate_rows(folder: Path, shift: int) -> None:
    """Move membership row r to row (r + shift) mod n, with the ``circuits`` entry naming it."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    path = folder / "circuit.safetensors"
    tensors = load_file(str(path))
    n = tensors["membership"].shape[0]
    save_file({**tensors, "membership": np.roll(tensors["membership"], shift, axis=0)}, str(path))

    def change(doc: Any) -> None:
        for entry in doc["circuits"]:
            entry["index"] = (entry["index"] + shift) % n

    _edit(folder / "circuit.json", change)
    _repin(folder / "circuit.json", "circuit.safetensors")


def _own_circuits(folder: Path, rows: Any, seen: set[bytes], seed: int) -> None:
    """Swap one edge of each membership row in ``rows`` (but the empty and the full ones)
    for another, so that the pruned circuit is one no earlier report has."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from mibspec.metrics.graph import GraphConfig, GraphUniverse

    path = folder / "circuit.safetensors"
    tensors = load_file(str(path))
    membership = tensors["membership"].copy()
    graph = json.loads((folder / "circuit.json").read_text(encoding="utf-8"))["graph"]
    universe = GraphUniverse(GraphConfig(graph["n_layers"], graph["n_heads"], graph["parallel_attn_mlp"]))
    if not seen:  # the first report's circuits, as they are
        seen.update(np.packbits(universe.prune(m)).tobytes() for m in membership)
    rng = np.random.default_rng(seed)
    for row in rows:
        members = np.flatnonzero(membership[row])
        if len(members) in (0, membership.shape[1]):
            continue
        for _ in range(1000):
            trial = membership[row].copy()
            trial[rng.choice(members)] = False
            trial[rng.choice(np.flatnonzero(~membership[row]))] = True
            key = np.packbits(universe.prune(trial)).tobytes()
            if key not in seen:
                seen.add(key)
                membership[row] = trial
                break
    save_file({**tensors, "membership": membership}, str(path))

    def sizes(doc: Any) -> None:  # what the circuit document declares of each row
        for entry in doc["circuits"]:
            entry["weighted_size"] = float(universe.weighted_edge_count(membership[entry["index"]]))

    _edit(folder / "circuit.json", sizes)
    _repin(folder / "circuit.json", "circuit.safetensors")


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), _cpu()
    out = fn()
    return time.perf_counter() - wall, _cpu() - cpu, out


class _PassClock:
    """CPU time spent in the engine's patched passes (the circuits' own arithmetic), in all
    and per circuit: a stacked pass's time is shared equally by its circuits, each known by
    the digest of its pruned edges (and neuron mask)."""

    def __init__(self) -> None:
        from mibspec.reference_impl.engine import _evaluate

        self.seconds, self.circuits = 0.0, 0
        self.by_circuit: dict[bytes, float] = {}
        original = _evaluate._stacked_passes

        def timed(*args: Any, **kwargs: Any) -> Any:
            plan = args[1]
            passes = original(*args, **kwargs)
            while True:
                start = time.process_time()
                try:
                    group, values = next(passes)
                except StopIteration:
                    self.seconds += time.process_time() - start
                    return
                spent = time.process_time() - start
                self.seconds += spent
                self.circuits += len(group)
                for i in group.tolist():
                    digest = plan.digests[i]
                    self.by_circuit[digest] = self.by_circuit.get(digest, 0.0) + spent / len(group)
                yield group, values

        _evaluate._stacked_passes = timed

    def read(self) -> tuple[float, int]:
        return self.seconds, self.circuits

    def take(self) -> dict[bytes, float]:
        """The per-circuit times recorded since the last call (summed over batches)."""
        out, self.by_circuit = self.by_circuit, {}
        return out


def _grouped(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    from mibspec.validator import VerifyOptions
    from mibspec.verification.api import collect_paths
    from mibspec.verification.grouping import verify_many
    from mibspec.verification.output_formats import REPORTERS

    root = tmp / f"grouped-{args.circuits}"
    example, models = EXAMPLE, MODELS
    if args.shape == "gpt2-small":
        example, models = gpt2_small_example(tmp, args.rows)
    build_corpus(root, args.reports, args.rows, circuits=args.circuits, example=example)
    files = collect_paths([root])
    options = VerifyOptions(model_roots=(models,))
    clock = _PassClock()

    def render(result: Any) -> str:
        buffer = io.StringIO()
        REPORTERS["json"](result, buffer)
        return buffer.getvalue()

    verify_many(files[:1], options)  # warm up: imports, first allocations
    before = clock.read()
    clock.take()
    one_wall, one_cpu, _ = _timed(lambda: verify_many(files[:1], options))
    one_pass = clock.read()[0] - before[0]
    first = clock.take()  # the first report's circuits
    documents: list[Any] = []
    own_runs: dict[bytes, float] = {}  # each circuit's passes as timed in its own report's run

    def separately() -> None:
        for path in files:
            documents.extend(verify_many([path], options).documents)
            for digest, seconds in clock.take().items():
                own_runs.setdefault(digest, seconds)

    sep_wall, sep_cpu, _ = _timed(separately)
    before = clock.read()
    grp_wall, grp_cpu, grouped = _timed(lambda: verify_many(files, options))
    grp_pass, grp_circuits = (after - was for after, was in zip(clock.read(), before, strict=True))
    clock.take()
    # the least a grouped run can cost: one report, plus the passes of the circuits it lacks,
    # each as long as it took in a run of its own report (not in the grouped run, whose own
    # slowness would otherwise raise the bound with it)
    lacking = sum(seconds for digest, seconds in own_runs.items() if digest not in first)
    bound = one_cpu + lacking
    from mibspec.core.comparisons import REASSOCIATION, first_difference
    from mibspec.validator import VerificationResult

    alone = json.loads(render(VerificationResult(documents=documents)))
    agree = first_difference(json.loads(render(grouped)), alone, REASSOCIATION["float32"]) is None
    what_circuits = {
        "same": "one set of 20 circuits for all, each report's points on other rows",
        "mixed": "signed-curve circuits shared, absolute-curve ones each report's own",
        "distinct": "each report's circuits its own, but the empty and full ones",
    }[args.circuits]
    model_name = "tiny model" if args.shape == "tiny" else "GPT-2-small shape, random weights"
    print(f"1. {args.reports} circuit reports ({model_name}, {args.rows} rows), --circuits {args.circuits}:")
    print(f"   {what_circuits}")
    print(f"   {'':<28} {'wall s':>8} {'CPU s':>8} {'× one report (CPU)':>19}")
    for name, wall, cpu in (
        ("one report alone", one_wall, one_cpu),
        (f"{args.reports} reports one by one", sep_wall, sep_cpu),
        (f"{args.reports} reports grouped", grp_wall, grp_cpu),
        ("lower bound (see below)", float("nan"), bound),
    ):
        print(f"   {name:<28} {wall:>8.2f} {cpu:>8.2f} {cpu / one_cpu:>19.2f}")
    print(
        f"   lower bound: one report ({one_cpu:.2f} s, {one_pass:.2f} s of it in patched passes) + the"
        f" passes of the circuits it lacks, timed in their own reports' runs ({lacking:.2f} s; grouped:"
        f" {grp_circuits} circuit passes, {grp_pass:.2f} s); grouped − bound = {grp_cpu - bound:.2f} s"
    )
    # the same distinct circuits' passes in the grouped run and in the reports' own runs
    passes_alone = sum(own_runs.values())
    slowdown = grp_pass / passes_alone if passes_alone else float("nan")
    print(f"   patched passes, grouped / in the reports' own runs (CPU): {slowdown:.2f}")
    print(f"   grouped / one by one (CPU): {grp_cpu / sep_cpu:.2f}; outputs agree (ME-10): {agree}")
    print(f"   grouped / lower bound (CPU): {grp_cpu / bound:.2f} (goal ≤ 1.1 with distinct circuits)")
    what = f"1. {args.reports} reports, {args.rows} rows"
    what += "" if args.shape == "tiny" else ", GPT-2-small shape"
    what += "" if args.circuits == "same" else f", {args.circuits} circuits"
    what += "" if args.cache_bytes is None else f", activation cache {args.cache_bytes / 1e6:g} MB"
    ratio = grp_cpu / one_cpu
    over = grp_cpu / bound
    return [
        {"name": f"{what}: one report alone, CPU", "value": one_cpu, "unit": "s"},
        {"name": f"{what}: one by one, CPU", "value": sep_cpu, "unit": "s"},
        {"name": f"{what}: grouped, CPU", "value": grp_cpu, "unit": "s"},
        # shared circuits: at most 2× one report; distinct ones: within 10 % of the lower bound
        _goal(f"{what}: grouped / one report, CPU", ratio, 2.0, args.circuits != "distinct"),
        {"name": f"{what}: lower bound / one report, CPU", "value": bound / one_cpu},
        _goal(f"{what}: grouped / lower bound, CPU", over, 1.1, args.circuits == "distinct"),
        {"name": f"{what}: grouped / one by one, CPU", "value": grp_cpu / sep_cpu},
        {"name": f"{what}: patched passes, grouped / in their own reports' runs, CPU", "value": slowdown},
        {"name": f"{what}: outputs agree (ME-10)", "value": agree},
    ]


def _goal(name: str, value: float, most: float, applies: bool) -> dict[str, Any]:
    """A figure, with the goal ``≤ most`` when it applies to the workload."""
    if not applies:
        return {"name": name, "value": value}
    return {"name": name, "value": value, "goal": f"≤ {most:g}", "met": value <= most}


def _hash_cache(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    import numpy as np

    from mibspec.reference_impl.recompute import FileHashCache

    path = tmp / "model.safetensors"
    rng = np.random.default_rng(0)
    with path.open("wb") as handle:
        for _ in range(args.hash_mib):
            handle.write(rng.bytes(1 << 20))
    old = time.time() - 60  # settled: written well before it is hashed
    os.utime(path, (old, old))
    time.sleep(1.1)  # the change time is that of the utime call: let it settle too
    size = path.stat().st_size
    runs = []
    for _ in range(2):
        cache = FileHashCache(tmp / "cache")
        wall, cpu, _ = _timed(lambda cache=cache: cache.read(path, size, keep=False))
        cache.save()
        runs.append((wall, cpu, cache.hashed))
    (w1, c1, h1), (w2, c2, h2) = runs
    print(f"2. file-hash cache, one {args.hash_mib} MiB model file")
    print(f"   first run  {w1:8.3f} s wall {c1:8.3f} s CPU (files hashed: {h1})")
    print(f"   second run {w2:8.3f} s wall {c2:8.3f} s CPU (files hashed: {h2}); saved {w1 - w2:.3f} s")
    what = f"2. hash cache, {args.hash_mib} MiB"
    return [
        {"name": f"{what}: first run (hashed {h1}), wall", "value": w1, "unit": "s"},
        {"name": f"{what}: second run (hashed {h2}), wall", "value": w2, "unit": "s"},
    ]


def _cli(folder: Path, *extra: str) -> tuple[float, bytes]:
    elapsed, _, out = _cli_cpu(folder, *extra)
    return elapsed, out


def _cli_cpu(folder: Path, *extra: str) -> tuple[float, float, bytes]:
    """Wall time, CPU time of the process and its workers, and the output of one run."""
    command = [sys.executable, "-m", "mibspec", "verify", str(folder), "-f", "json", *extra]
    elapsed, cpu, done = _timed(lambda: subprocess.run(command, capture_output=True, check=False))
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(extra)} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, cpu, done.stdout


def _ray(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    root = tmp / "ray"
    build_corpus(root, args.ray_reports, args.rows, batch_sizes=(20, 10))
    roots = ("--model-root", str(MODELS))
    j2, out_j2 = _cli(root, *roots, "-j", "2")
    ray_time, out_ray = _cli(root, *roots, "--executor", "ray")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        from mibspec.verification.api import verify

        warm, _, _ = _timed(lambda: verify(root, model_roots=[MODELS], executor="ray"))
    finally:
        ray.shutdown()
    print(f"3. {args.ray_reports} reports in 2 groups: --executor ray (local, 2 CPUs) against -j 2")
    print(f"   -j 2 {j2:.2f} s; ray {ray_time:.2f} s (cluster start included), {warm:.2f} s on a running")
    print(f"   cluster; ray / -j 2: {ray_time / j2:.2f} ({warm / j2:.2f})")
    print(f"   outputs byte-identical: {out_j2 == out_ray}")
    what = f"3. {args.ray_reports} reports in 2 groups"
    return [
        {"name": f"{what}: -j 2, wall", "value": j2, "unit": "s"},
        {"name": f"{what}: ray with the cluster's start, wall", "value": ray_time, "unit": "s"},
        {"name": f"{what}: ray on a running cluster, wall", "value": warm, "unit": "s"},
        {"name": f"{what}: outputs byte-identical", "value": out_j2 == out_ray},
    ]


def _jobs(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    root = tmp / "small"
    for i in range(args.small):
        shutil.copytree(REPO / "examples" / "circuit", root / f"run{i:03d}")
    _cli(root, "--no-recompute")  # warm the file cache and bytecode
    times: dict[int, list[float]] = {1: [], 2: []}
    cpus: dict[int, list[float]] = {1: [], 2: []}
    outputs: set[bytes] = set()
    for _ in range(args.runs):
        for jobs in (1, 2):
            elapsed, cpu, out = _cli_cpu(root, "--no-recompute", "-j", str(jobs))
            times[jobs].append(elapsed)
            cpus[jobs].append(cpu)
            outputs.add(out)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(f"4. {args.small} small reports, --no-recompute, median of {args.runs} runs")
    print(f"   -j 1 {one:.3f} s; -j 2 {two:.3f} s; speed-up {one / two:.2f}× (goal ≥ 1.6×)")
    c1, c2 = statistics.median(cpus[1]), statistics.median(cpus[2])
    print(f"   CPU of all processes: -j 1 {c1:.3f} s, -j 2 {c2:.3f} s (-j 2 / -j 1: {c2 / c1:.2f})")
    print(f"   outputs byte-identical: {len(outputs) == 1}")
    what = f"4. {args.small} small reports, median of {args.runs}"
    return [
        {"name": f"{what}: -j 1, wall", "value": one, "unit": "s"},
        {"name": f"{what}: -j 2, wall", "value": two, "unit": "s"},
        {
            "name": f"{what}: speed-up",
            "value": one / two,
            "unit": "×",
            "goal": "≥ 1.6",
            "met": one / two >= 1.6,
        },
        {"name": f"{what}: CPU of all processes, -j 2 / -j 1", "value": c2 / c1},
        {"name": f"{what}: outputs byte-identical", "value": len(outputs) == 1},
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--hash-mib", type=int, default=498)
    parser.add_argument("--ray-reports", type=int, default=8)
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--circuits",
        choices=CIRCUITS,
        default="same",
        help="part 1: which circuits the reports share (default: same, one set for all)",
    )
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="tiny",
        help="part 1: the shipped tiny model, or GPT-2 small's shape with random weights",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="part 1: torch threads in this process (default: torch's)"
    )
    parser.add_argument(
        "--cache-bytes",
        type=int,
        default=None,
        help="part 1: the activation cache's bound (MIBSPEC_ACTIVATION_CACHE_BYTES; default: verify's)",
    )
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--only", choices=["grouped", "hash", "ray", "jobs"], action="append")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    parts = args.only or ["grouped", "hash", "ray", "jobs"]
    if args.skip_ray and "ray" in parts:
        parts.remove("ray")
    if args.cache_bytes is not None:
        os.environ["MIBSPEC_ACTIVATION_CACHE_BYTES"] = str(args.cache_bytes)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    print(f"{os.cpu_count()} CPUs; load average at start {os.getloadavg()[0]:.1f}")
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        # the benchmark's own cache folder: never the user's
        os.environ["MIBSPEC_CACHE_DIR"] = str(tmp / "cache")
        # -j runs before Ray: a local Ray cluster's processes can still be exiting after it
        # shuts down, and would take a core from the -j 2 run; the figures keep part order
        run = {"grouped": _grouped, "hash": _hash_cache, "ray": _ray, "jobs": _jobs}
        measured = {part: run[part](args, tmp) for part in sorted(parts, key=lambda name: name == "ray")}
        for part in parts:
            figures += measured[part]
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"status": "ok", "figures": figures}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
