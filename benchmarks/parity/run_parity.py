"""Parity harness: the public MIB circuit code against mibspec on tiny models of the four
families MIB's leaderboard uses.

For each model the public code (TransformerLens 2.18, EAP-IG, MIB's circuit track) runs in
its own virtual environment (see ``mibspec.parity``) on the same weights, rows,
counterfactuals and circuits as mibspec, and every quantity is compared under the
``mib-2025`` and ``default`` profiles:

* tiny-gpt2: the report ``examples/circuit-ioi`` as shipped;
* tiny-llama: a report written here by ``mibspec score circuit --method eap-ig`` on the
  same dataset;
* tiny-qwen2, tiny-gemma2: random-weight models written here with every structural option
  of Qwen2.5-0.5B and gemma-2-2b on (``mibspec.parity.RANDOM_MODELS``), loaded by the public
  code through ``HookedTransformer.from_pretrained`` under the official names, as MIB loads
  them; reports scored by EAP-IG (Gemma-2: seeded random scores, and no edge-score
  comparison, mibspec's attribution not handling post-attention norms). Gemma-2 runs twice:
  as the public code builds it, and with the public side's attention layer order set to the
  config's (the one difference, SPEC.md PR-5).

The other circuit tasks (MCQA, ARC easy and challenge, arithmetic addition and subtraction)
run on one random model per family with a tokenizer of that family's scheme trained on the
tasks' texts (``mibspec.parity.TASK_MODELS``: ``tiny-gpt2-bpe``, ``tiny-llama-bpe``,
``tiny-qwen2-bpe``, ``tiny-gemma2-sp``): rows are generated in the layout of MIB's released
files, the public side reads them with its own loader, mibspec imports them with ``mibspec
import mib-dataset`` and scores a report on them (``mibspec.parity.task_report``; under
``mib-2025`` where the family's tokenizer splits the space off a number).

``gpt2-small-shape`` (IOI only): a random GPT-2 of GPT-2 small's shape on the first
``SHAPE_ROWS`` IOI rows, comparing logits, the report's circuits, MIB's curves and EAP-IG
scores (node, neuron and mean-ablation curves and EAP edge scores left out for time unless
``--all-quantities`` is given; the matrix says so).

Usage (from the repository root, mibspec's own environment active)::

    python benchmarks/parity/run_parity.py [--peers DIR] [--build-env] [--json OUT.json]
        [--models tiny-gpt2 tiny-llama tiny-qwen2 tiny-gemma2 gpt2-small-shape] [--tasks ioi mcqa ...]
        [--all-quantities]

``--all-quantities`` compares on the non-IOI tasks and at GPT-2 small's shape what IOI on the
tiny models compares (node, neuron and mean-ablation curves, EAP edge scores), which the
default run leaves out for time.

``--build-env`` builds the public code's environment from scratch into the cache
(``$MIBSPEC_PEER_ENV``, default ``~/.cache/mibspec/peer-env``; a few minutes: it downloads
torch and TransformerLens). Prints the results table of ``benchmarks/RESULTS.md``
(largest absolute and relative difference per quantity) and exits 1 when a value a
profile promises differs, 2 when the public code or its environment is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from mibspec.parity import (  # noqa: E402
    PUBLIC_TASKS,
    RANDOM_MODELS,
    SHAPE_ROWS,
    TASK_MODEL,
    TASK_MODELS,
    WIDE_MODELS,
    CircuitInputs,
    PeerUnavailableError,
    circuit_parity,
    circuit_report,
    find_peers,
    first_rows,
    load_circuit_inputs,
    peer_python,
    random_model_dir,
    report_method,
    task_model_dir,
    task_report,
)

PROFILES = ("mib-2025", "default")
TASKS = ("logits", "circuits_patching", "curve", "circuits_mean", "nodes", "neurons", "EAP", "EAP-IG-inputs")
MODELS = ROOT / "examples" / "models"
ALL_MODELS = ("tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-gemma2", *WIDE_MODELS)
FAMILIES = {"tiny-gpt2": "gpt2", "tiny-llama": "llama", "tiny-qwen2": "qwen2", "tiny-gemma2": "gemma2"}
#: What the GPT-2-small-shaped run compares, and what it leaves out.
SHAPE_TASKS = ("logits", "circuits_patching", "curve", "EAP-IG-inputs")
SHAPE_LEFT_OUT = (
    "node, neuron and mean-ablation curves, EAP edge scores: not run at this width (time on 2 shared cores)"
)
ALL_TASKS = ("ioi", *PUBLIC_TASKS)
#: Rows per non-IOI task (the IOI reports keep their 160).
TASK_ROWS = 20
#: What the non-IOI comparisons compare (20 of them), and what they leave out: mean ablation
#: and EAP, measured on the IOI comparisons, for time on 2 shared cores.
TASK_TASKS = ("logits", "circuits_patching", "curve", "EAP-IG-inputs")
TASK_LEFT_OUT = (
    "node and neuron curves, mean ablation, EAP edge scores: not run on the non-IOI tasks (time on "
    "2 shared cores; all compared on every IOI model)"
)
IOI_REPORT = ROOT / "examples" / "causal-variable-ioi" / "report.json"
CAUSAL_ENTRIES = {
    "causal": "causal variable",
    "causal_featurizers": "causal variable, every featurizer type",
    "causal_joint": "causal variable, joint units (several sites in one pass)",
}


def scored_report(model_dir: Path, folder: Path, method: str = "eap-ig") -> Path:
    """A circuit report written by mibspec's producer (``method``) on the IOI example rows."""
    return circuit_report(model_dir, ROOT / "examples" / "circuit-ioi" / "dataset.json", folder, method)


def model_report(model: str, folder: Path) -> Path | None:
    """The report compared for ``model``: the shipped example for tiny-gpt2, else one written
    here (the random models first written under ``folder``); ``None`` for an unknown name."""
    if model == "tiny-gpt2":
        return ROOT / "examples" / "circuit-ioi" / "report.json"
    if model == "tiny-llama":
        return scored_report(MODELS / "tiny-llama", folder)
    if model in RANDOM_MODELS:
        model_dir = random_model_dir(model, folder / "models", MODELS / "tiny-gpt2")
        return scored_report(model_dir, folder, report_method(RANDOM_MODELS[model][0]))
    if model in WIDE_MODELS:
        model_dir = random_model_dir(model, folder / "models", MODELS / "tiny-gpt2")
        dataset = first_rows(ROOT / "examples" / "circuit-ioi" / "dataset.json", SHAPE_ROWS, folder / model)
        return circuit_report(model_dir, dataset, folder, "eap-ig")
    return None


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _fmt(x: float) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.1e}"


def summarise(
    rows_by_profile: dict[str, list[dict]],
) -> list[tuple[str, dict[str, tuple[float, float, bool]]]]:
    """Per quantity group: (max |Δ|, max relative Δ, promised) under each profile."""
    groups: dict[str, dict[str, tuple[float, float, bool]]] = {}
    for profile, rows in rows_by_profile.items():
        for row in rows:
            a, r, p = groups.setdefault(row["group"], {}).get(profile, (0.0, 0.0, True))
            rel = row["rel_diff"] if row["rel_diff"] is not None else math.inf
            # relative differences of values below the absolute tolerance say nothing
            public = row["public"] if row["public"] is not None else math.inf
            rel = rel if abs(public) > 1e-5 or row["group"].endswith("scores") else 0.0
            diff = row["abs_diff"] if row["abs_diff"] is not None else math.inf  # undefined on a side
            groups[row["group"]][profile] = (max(a, diff), max(r, rel), p and row["promised"])
    return list(groups.items())


def markdown(results: dict) -> str:
    lines = []
    for table in _tables(results):
        lines.append(f"\n{table['title']}\n")
        lines.append("| " + " | ".join(table["columns"]) + " |")
        lines.append("|" + "---|" * len(table["columns"]))
        lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def _figures(results: dict, failed: int, not_run: int = 0) -> list[dict]:
    """The run's summary figures: time per model, the promised values that differ and the
    comparisons that could not run."""
    figures: list[dict] = [
        {
            "name": f"{model}: {entry['n_rows']} rows, wall (public side included)",
            "value": entry["seconds"],
            "unit": "s",
        }
        for model, entry in results["models"].items()
    ]
    for key, label in CAUSAL_ENTRIES.items():
        if key in results:
            figures.append({"name": f"{label} (pyvene), wall", "value": results[key]["seconds"], "unit": "s"})
    figures.append({"name": "promised values that differ", "value": failed, "goal": "0", "met": failed == 0})
    figures.append({"name": "comparisons not run", "value": not_run, "goal": "0", "met": not_run == 0})
    return figures


def _verdicts(rows: list[dict]) -> dict[str, str]:
    """Per quantity group: "yes" when every promised value agrees, "NO" when one differs,
    "named difference" when the profile promises none."""
    out: dict[str, str] = {}
    for row in rows:
        before = out.get(row["group"], "named difference")
        if row["promised"]:
            before = "NO" if before == "NO" or not row["ok"] else "yes"
        out[row["group"]] = before
    return out


def _matrix(results: dict) -> dict | None:
    """Architecture × task × quantity: per comparison and quantity group, the largest absolute
    and relative difference under ``mib-2025``, whether it promises the group and whether
    every promised value agrees, and the largest absolute difference under ``default``; the
    quantities a comparison leaves out, with the reason, as "not run"."""
    if not results["models"]:
        return None
    rows = []
    for name, entry in results["models"].items():
        label = f"{entry.get('architecture', name)} · {entry.get('task', 'ioi')}"
        if entry.get("layer_order", "public") != "public":
            label += ", public side in the config's layer order"
        label += f" (`{entry.get('model', name)}`, {entry['n_rows']} rows)"
        if entry.get("status") == "not run":
            rows.append([label, "every quantity", "not run", "", "", entry["reason"], "", ""])
            continue
        verdicts = _verdicts(entry["rows"]["mib-2025"])
        for group, per in summarise(entry["rows"]):
            a, r, p = per["mib-2025"]
            da, _, dp = per.get("default", (math.nan, math.nan, False))
            cells = [label, group, _fmt(a), _fmt(r), "yes" if p else "no", verdicts.get(group, "—")]
            rows.append([*cells, _fmt(da), "yes" if dp else "no"])
        for reason in entry.get("left_out", []):
            rows.append([label, reason.split(":")[0], "not run", "", "", reason.split(": ", 1)[-1], "", ""])
    return {
        "title": "**architecture × task × quantity** (largest differences; `agrees`: every value "
        "`mib-2025` promises within its float32 tolerance)",
        "columns": [
            "architecture · task",
            "quantity",
            "mib-2025: max abs",
            "max rel",
            "promised",
            "agrees",
            "default: max abs",
            "promised",
        ],
        "rows": rows,
    }


def _tables(results: dict) -> list[dict]:
    """The tables :func:`markdown` prints, as data (title, columns, rows)."""
    tables = []
    matrix = _matrix(results)
    if matrix is not None:
        tables.append(matrix)
    for model, entry in results["models"].items():
        if entry.get("task", "ioi") != "ioi" or entry.get("status") == "not run":
            continue  # the matrix holds both profiles' differences, and what did not run
        rows = []
        for group, per in summarise(entry["rows"]):
            cells = [group]
            for profile in PROFILES:
                a, r, p = per.get(profile, (math.nan, math.nan, False))
                cells += [_fmt(a), _fmt(r), "yes" if p else "no"]
            rows.append(cells)
        columns = ["quantity"]
        for profile in PROFILES:
            columns += [f"{profile}: max abs", "max rel", "promised"]
        tables.append(
            {
                "title": f"**{model}** ({entry['n_rows']} rows, report `{entry['report']}`)",
                "columns": columns,
                "rows": rows,
            }
        )
    for key, label in CAUSAL_ENTRIES.items():
        if key not in results:
            continue
        rows = []
        for group, per in summarise({"both": results[key]["rows"]}):
            a, r, p = per["both"]
            rows.append([group, _fmt(a), _fmt(r), "yes" if p else "no"])
        tables.append(
            {
                "title": f"**{label}** (report `{results[key]['report']}`, pyvene; both profiles alike)",
                "columns": ["quantity", "max abs", "max rel", "promised"],
                "rows": rows,
            }
        )
    return tables


def _compare_model(
    inputs: CircuitInputs,
    report: Path,
    peers: Path,
    python: Path,
    layer_order: str,
    tasks: tuple[str, ...] = TASKS,
) -> tuple[dict, int]:
    """One model's comparison (its results entry) and the number of promised values that differ.

    ``layer_order="config"``: a diagnostic run whose public side builds each Gemma-2 layer's
    attention as the config says, isolating TransformerLens's layer order (SPEC.md PR-5).
    """
    t0 = time.perf_counter()
    public, by_profile = circuit_parity(inputs, peers, python, PROFILES, tasks, layer_order=layer_order)
    entry: dict = {
        "report": str(report.relative_to(ROOT)) if report.is_relative_to(ROOT) else "written by the harness",
        "task": inputs.task,
        "architecture": inputs.family,
        "n_rows": len(inputs.rows),
        "layer_order": layer_order,
        "model": inputs.model_dir.name,
        "left_out": _left_out(inputs, tasks),
        "public_attn_types": public.get("attn_types"),
        "public_seconds": public["wall_seconds"],
        "public_timings": public["timings"],
        "rows": {profile: [row.as_dict() for row in rows] for profile, rows in by_profile.items()},
    }
    failed = 0
    for profile, rows in by_profile.items():
        bad = [row.quantity for row in rows if row.promised and not row.ok]
        failed += len(bad)
        label = f"{inputs.model_dir.name} · {inputs.task}" + (
            "" if layer_order == "public" else f" ({layer_order} layer order)"
        )
        print(f"{label} / {profile}: {len(rows)} values, promised differing: {bad or 'none'}", flush=True)
    entry["seconds"] = time.perf_counter() - t0
    return entry, failed


def _left_out(inputs: CircuitInputs, tasks: tuple[str, ...]) -> list[str]:
    """What this comparison does not compare, and why."""
    left = []
    if inputs.family == "gemma2":
        left.append("EAP and EAP-IG edge scores: mibspec's attribution refuses post-attention norms (ME-4)")
    if inputs.model_dir.name in WIDE_MODELS and "nodes" not in tasks:
        left.append(SHAPE_LEFT_OUT)
    elif inputs.task != "ioi" and "nodes" not in tasks:
        left.append(TASK_LEFT_OUT)
    return left


def _compare_task(
    task: str, family: str, quantities: tuple[str, ...], folder: Path, peers: Path, python: Path
) -> tuple[dict, int]:
    """One non-IOI task on ``family``'s task model: rows generated in the released layout,
    imported, scored (EAP-IG; Gemma-2 random) and ``quantities`` compared (the public side
    reads the released rows itself). Reports are written under ``default`` on GPT-2's
    tokenizer, else under ``mib-2025`` (``mibspec.parity.task_report``)."""
    model_dir = task_model_dir(folder / "models", family)
    profile = "default" if family == "gpt2" else "mib-2025"
    method = report_method(family)
    report = task_report(task, model_dir, folder, n_rows=TASK_ROWS, method=method, profile=profile)
    inputs = load_circuit_inputs(report, [folder / "models"])
    return _compare_model(inputs, report, peers, python, "public", quantities)


def _compare_ioi(
    model: str, every_quantity: bool, folder: Path, peers: Path, python: Path
) -> list[tuple[str, dict, int]]:
    """IOI on ``model`` (Gemma-2 twice: as the public code builds it and in the config's order);
    at GPT-2 small's shape the node, neuron and mean-ablation curves and EAP edge scores only
    with ``every_quantity``."""
    report = model_report(model, folder)
    if report is None:
        raise ValueError(f"no report for model {model!r}")
    inputs = load_circuit_inputs(report, [MODELS, folder / "models"])
    orders = ("public", "config") if inputs.family == "gemma2" else ("public",)
    tasks = SHAPE_TASKS if model in WIDE_MODELS and not every_quantity else TASKS
    out = []
    for order in orders:
        name = model if order == "public" else f"{model}, public side in the config's layer order"
        out.append((name, *_compare_model(inputs, report, peers, python, order, tasks)))
    return out


def _plan(args: argparse.Namespace) -> list[tuple[str, str, str, Any, tuple[str, ...]]]:
    """The comparisons to run, in order: GPT-2 small's shape, the non-IOI tasks on the Llama,
    Qwen2 and Gemma-2 task models, IOI on the tiny models, the non-IOI tasks on GPT-2's (so
    that a time budget cuts what earlier runs already measured first)."""
    ioi = [m for m in args.models if "ioi" in args.tasks]
    tasks = [t for t in args.tasks if t != "ioi"]
    quantities = TASKS if args.all_quantities else TASK_TASKS
    plan: list[tuple[str, str, str, Any, tuple[str, ...]]] = []
    every = args.all_quantities
    plan += [(m, WIDE_MODELS[m][0], "ioi", _compare_ioi, (m, every)) for m in ioi if m in WIDE_MODELS]
    families = [FAMILIES[m] for m in args.models if m in FAMILIES]
    for family in [f for f in families if f != "gpt2"]:
        name = TASK_MODELS[family][0]
        plan += [(f"{name}, {t}", family, t, _compare_task, (t, family, quantities)) for t in tasks]
    plan += [(m, FAMILIES[m], "ioi", _compare_ioi, (m, True)) for m in ioi if m in FAMILIES]
    if "gpt2" in families:
        plan += [(f"{TASK_MODEL}, {t}", "gpt2", t, _compare_task, (t, "gpt2", quantities)) for t in tasks]
    return plan


def _not_run(results: dict, name: str, family: str, task: str, reason: str, seconds: float) -> None:
    print(f"{name}: not run ({reason})", flush=True)
    results["models"][name] = {
        "status": "not run",
        "reason": reason,
        "architecture": family,
        "task": task,
        "model": name.split(",")[0],
        "n_rows": 0,
        "rows": {profile: [] for profile in PROFILES},
        "seconds": seconds,
    }


def _run(results: dict, name: str, family: str, task: str, compare: Any, *args: Any) -> int:
    """Run ``compare(*args)`` into ``results["models"]`` and return its promised values that
    differ; a comparison that cannot run here is entered as "not run" with the reason."""
    t0 = time.perf_counter()
    try:
        done = compare(*args)
    except (PeerUnavailableError, ValueError, RuntimeError, OSError, MemoryError) as exc:
        reason = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
        )
        _not_run(results, name, family, task, reason, time.perf_counter() - t0)
        return 0
    failed = 0
    for item in [done] if isinstance(done, tuple) else done:
        key, entry, bad = (name, *item) if len(item) == 2 else item  # a task's (entry, failed)
        results["models"][key] = entry
        failed += bad
    return failed


def _compare_causal(args: argparse.Namespace, results: dict) -> int:
    """pyvene against mibspec on the report's units, on a featurizer of every declared type
    and on joint units on tiny GPT-2 and tiny Llama (``results["causal"]``,
    ``results["causal_featurizers"]``, ``results["causal_joint"]``); the promised values
    that differ."""
    from mibspec.parity._causal import (
        PYVENE_PYTHON_ENV,
        compare_causal,
        compare_featurizers,
        compare_joint,
        pyvene_python,
    )

    pyvene = pyvene_python()
    if pyvene is None:
        print(f"causal-variable parity skipped: {PYVENE_PYTHON_ENV} names no Python with pyvene", flush=True)
        return 0
    failed = 0
    runs = {
        "causal": (compare_causal, args.causal_report),
        "causal_featurizers": (compare_featurizers, IOI_REPORT),
        "causal_joint": (compare_joint, IOI_REPORT),
    }
    for key, (compare, report) in runs.items():
        t0 = time.perf_counter()
        rows = compare(report, [MODELS], pyvene)
        failed += sum(1 for row in rows if row.promised and not row.ok)
        results[key] = {
            "report": str(report.relative_to(ROOT)),
            "rows": [row.as_dict() for row in rows],
            "seconds": time.perf_counter() - t0,
        }
        bad = [row.quantity for row in rows if row.promised and not row.ok]
        print(f"{CAUSAL_ENTRIES[key]} (pyvene): {len(rows)} values, differing: {bad or 'none'}", flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--peers", type=Path, default=None, help="public code folder (default $MIBSPEC_PEERS)"
    )
    parser.add_argument("--build-env", action="store_true", help="build the public code's env when missing")
    parser.add_argument("--env-dir", type=Path, default=None, help="where that env lives (default: cache)")
    parser.add_argument("--json", type=Path, default=None, help="write every compared value here")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds after which no further comparison starts (the rest are entered as not run)",
    )
    parser.add_argument("--models", nargs="+", default=list(ALL_MODELS), choices=ALL_MODELS)
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(ALL_TASKS),
        choices=ALL_TASKS,
        help="circuit tasks (ioi on every --models model; the others on tiny-gpt2-bpe)",
    )
    parser.add_argument(
        "--all-quantities",
        action="store_true",
        help="on the non-IOI tasks and at GPT-2 small's shape also compare node, neuron and "
        "mean-ablation curves and EAP edge scores (as on IOI; about twice their time)",
    )
    parser.add_argument(
        "--causal-report",
        type=Path,
        default=ROOT / "examples" / "causal-variable-arithmetic" / "report.json",
        help="causal-variable report whose featurizers are compared with pyvene ($MIBSPEC_PYVENE_PYTHON)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        peers = find_peers(args.peers)
        python = peer_python(build=args.build_env, env_dir=args.env_dir)
    except PeerUnavailableError as exc:
        print(f"parity harness skipped: {exc}", file=sys.stderr)
        if args.json is not None:
            args.json.write_text(json.dumps({"status": "not run", "reason": str(exc)}), encoding="utf-8")
        return 2
    results: dict = {
        "commit": _commit(),
        "peers": str(peers),
        "python": platform.python_version(),
        "models": {},
    }
    failed = 0
    deadline = started + args.budget if args.budget else math.inf
    with tempfile.TemporaryDirectory(prefix="mibspec-parity-") as tmp:
        for name, family, task, compare, extra in _plan(args):
            if time.perf_counter() > deadline:
                _not_run(
                    results, name, family, task, f"the run's time budget ({args.budget:g} s) was spent", 0.0
                )
                continue
            failed += _run(results, name, family, task, compare, *extra, Path(tmp), peers, python)
    if time.perf_counter() <= deadline:
        failed += _compare_causal(args, results)
    results["seconds"] = time.perf_counter() - started
    not_run = sum(1 for entry in results["models"].values() if entry.get("status") == "not run")
    results.update(status="ok", figures=_figures(results, failed, not_run), tables=_tables(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"\nparity run at {results['commit']}, {results['seconds']:.0f} s")
    print(markdown(results))
    return 1 if failed or not_run else 0


if __name__ == "__main__":
    raise SystemExit(main())
