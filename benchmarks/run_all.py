"""Run every benchmark at one commit and write ``benchmarks/RESULTS.md`` from their figures.

Each benchmark below runs as its own process, one after the other (never two at once), with
the command that defines its rows plus ``--json FILE``; the figures come from that file, never
from the printed text. ``RESULTS.md`` is the template ``RESULTS.template.md`` (the prose, kept
by hand) with its placeholders filled in:

* ``{{header}}``: the commit, ``git describe``, the date, the machine (cores, load average at
  the start and the end, Python and torch versions) and the total time;
* ``{{table NAME}}``: the tables of benchmark NAME (one per command: figures, goals, met or
  not, the exact command);
* ``{{value RUN FIGURE}}``: one figure of one run (``RUN`` as in :data:`RUNS`, e.g.
  ``circuit_engine/eap``), for prose that quotes a measured value.

A benchmark writes ``{"status": "ok", "figures": [...], "tables": [...]}``, where a figure is
``{"name", "value", "unit"?, "goal"?, "met"?}`` and a table ``{"title", "columns", "rows"}``;
or ``{"status": "not run", "reason": ...}`` and exits 2 when something it needs is absent (the
public code's environment, check-jsonschema). Such a run is recorded as "not run: reason",
never as a pass. The working tree must be clean (``--allow-dirty`` to run anyway, said in
the header).

    python benchmarks/run_all.py [--only NAME...] [--skip NAME...] [--quick] [--out PATH]

Exit codes: 0 results written (whatever the goals), 1 written but a benchmark failed,
2 usage error or a dirty tree.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "benchmarks" / "RESULTS.template.md"
OUT = REPO / "benchmarks" / "RESULTS.md"


@dataclass(frozen=True)
class Run:
    """One command of one benchmark: the full-size arguments and the smoke-run ones."""

    name: str
    key: str
    label: str
    script: str
    args: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.name}/{self.key}"

    def command(self, quick: bool) -> list[str]:
        return ["python", self.script, *(self.quick if quick else self.args)]


_TINY_GPT2 = ("--layers", "2", "--heads", "4", "--d-model", "64", "--vocab", "1000", "--examples", "20")

#: Every benchmark of ``benchmarks/``, in the order they run.
RUNS: tuple[Run, ...] = (
    Run("circuit_engine", "random", "random scores", "benchmarks/bench_circuit_engine.py",
        ("--threads", "1"), ("--threads", "1", *_TINY_GPT2)),
    Run("circuit_engine", "eap", "EAP scores", "benchmarks/bench_circuit_engine.py",
        ("--threads", "1", "--scores", "eap"), ("--threads", "1", "--scores", "eap", *_TINY_GPT2)),
    Run("circuit_engine", "random24", "random scores, 24 layers", "benchmarks/bench_circuit_engine.py",
        ("--threads", "1", "--layers", "24", "--public", "skip"),
        ("--threads", "1", "--public", "skip", *_TINY_GPT2[2:], "--layers", "4")),
    Run("circuit_engine", "eap24", "EAP scores, 24 layers", "benchmarks/bench_circuit_engine.py",
        ("--threads", "1", "--scores", "eap", "--layers", "24", "--public", "skip"),
        ("--threads", "1", "--scores", "eap", "--public", "skip", *_TINY_GPT2[2:], "--layers", "4")),
    Run("parity", "all", "", "benchmarks/parity/run_parity.py", (), ("--models", "tiny-gpt2")),
    Run("public_evaluator", "small", "", "benchmarks/bench_public_evaluator.py",
        ("--size", "small"), ("--size", "tiny")),
    Run("causal_bench_behaviour", "default", "", "benchmarks/bench_causal_bench_behaviour.py",
        (), ("--examples", "8")),
    Run("shapley_captum", "default", "", "benchmarks/bench_shapley_captum.py", (),
        ("--images", "2", "--repeats", "2", "--timing-repeats", "5", "--reference", "50")),
    Run("causal_variable", "default", "", "benchmarks/bench_causal_variable.py", (),
        ("--rows", "16", "--batch", "8")),
    Run("grouped_verify", "default", "", "benchmarks/bench_grouped_verify.py",
        ("--rows", "20", "--ray-reports", "4", "--runs", "9"),
        ("--reports", "3", "--rows", "4", "--hash-mib", "8", "--skip-ray", "--small", "4", "--runs", "1")),
    Run("grouped_verify", "gpt2-distinct", "GPT-2-small shape, distinct circuits",
        "benchmarks/bench_grouped_verify.py",
        ("--only", "grouped", "--shape", "gpt2-small", "--reports", "4", "--rows", "20",
         "--circuits", "distinct", "--threads", "1"),
        ("--only", "grouped", "--reports", "3", "--rows", "4", "--circuits", "distinct")),
    Run("grouped_verify", "gpt2-same", "GPT-2-small shape, shared circuits",
        "benchmarks/bench_grouped_verify.py",
        ("--only", "grouped", "--shape", "gpt2-small", "--reports", "4", "--rows", "20", "--threads", "1"),
        ("--only", "grouped", "--reports", "3", "--rows", "4")),
    # 40 rows are two batches of 20; 300 MB holds one batch's runs at this shape (240 MB): a
    # dataset larger than the activation cache, as real datasets are at its default bound
    Run("grouped_verify", "gpt2-distinct-cache",
        "GPT-2-small shape, distinct circuits, a dataset larger than the cache",
        "benchmarks/bench_grouped_verify.py",
        ("--only", "grouped", "--shape", "gpt2-small", "--reports", "4", "--rows", "40",
         "--circuits", "distinct", "--threads", "1", "--cache-bytes", "300000000"),
        ("--only", "grouped", "--reports", "3", "--rows", "4", "--circuits", "distinct",
         "--cache-bytes", "1000")),
    Run("grouped_verify", "gpt2-same-cache",
        "GPT-2-small shape, shared circuits, a dataset larger than the cache",
        "benchmarks/bench_grouped_verify.py",
        ("--only", "grouped", "--shape", "gpt2-small", "--reports", "4", "--rows", "40",
         "--threads", "1", "--cache-bytes", "300000000"),
        ("--only", "grouped", "--reports", "3", "--rows", "4", "--cache-bytes", "1000")),
    Run("batch_verify", "default", "", "benchmarks/bench_batch_verify.py", (),
        ("--copies", "4", "--runs", "1", "--jobs", "1", "2")),
    Run("verify_startup", "default", "", "benchmarks/bench_verify_startup.py", ("--runs", "10"),
        ("--runs", "1")),
    Run("steady", "main_job", "", "benchmarks/bench_steady.py", ("--runs", "10"),
        ("--runs", "1", "--load", "1")),
    Run("model_memory", "qwen_bf16", "Qwen2.5-0.5B shape, bfloat16", "benchmarks/bench_model_memory.py",
        ("--shape", "qwen2.5-0.5b", "--dtype", "bfloat16"),
        ("--shape", "gpt2-small", "--examples", "2")),
    Run("model_memory", "qwen_f32", "Qwen2.5-0.5B shape, float32", "benchmarks/bench_model_memory.py",
        ("--shape", "qwen2.5-0.5b", "--dtype", "float32"),
        ("--shape", "gpt2-small", "--examples", "2", "--dtype", "float32")),
    Run("model_memory", "gemma_f32", "Gemma-2-2B shape, float32", "benchmarks/bench_model_memory.py",
        ("--shape", "gemma-2-2b", "--dtype", "float32", "--examples", "2"),
        ("--shape", "gpt2-small", "--examples", "2", "--dtype", "float32")),
    Run("model_memory", "gemma_bf16", "Gemma-2-2B shape, bfloat16", "benchmarks/bench_model_memory.py",
        ("--shape", "gemma-2-2b", "--dtype", "bfloat16", "--examples", "2"),
        ("--shape", "gpt2-small", "--examples", "2")),
    Run("large_circuit", "llama3", "", "benchmarks/bench_large_circuit.py", (), ("--size", "tiny")),
    Run("eap_ig_import", "llama3", "", "benchmarks/bench_eap_ig_import.py", (), ("--size", "tiny")),
    Run("graph", "llama3", "", "benchmarks/bench_graph.py", (), ("--repeat", "1")),
    Run("permutation_test", "default", "", "benchmarks/bench_permutation_test.py"),
    Run("shapley", "default", "", "benchmarks/bench_shapley.py", (), ("--permutations", "20")),
)  # fmt: skip

NAMES: tuple[str, ...] = tuple(dict.fromkeys(run.name for run in RUNS))


@dataclass
class Outcome:
    """What one run gave: its figures and tables, or why it has none."""

    run: Run
    command: list[str]
    seconds: float = 0.0
    exit_code: int | None = None
    status: str = "not run"  # "ok", "not run" or "failed"
    reason: str = ""
    figures: list[dict[str, Any]] = field(default_factory=list)
    tables: list[dict[str, Any]] = field(default_factory=list)


# --- the tree and the machine ---------------------------------------------------------------------


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def tree_state() -> dict[str, Any]:
    """The commit, ``git describe`` and whether tracked files differ from it."""
    return {
        "commit": _git("rev-parse", "HEAD"),
        "describe": _git("describe", "--always", "--tags", "--dirty"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The machine as the header states it (the load average is taken at start and end)."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "numpy": _version("numpy"),
    }


# --- running --------------------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def execute(run: Run, quick: bool, work: Path, timeout: float | None) -> Outcome:
    """Run one benchmark with ``--json`` and read what it wrote."""
    command = run.command(quick)
    outcome = Outcome(run, command)
    target = work / f"{run.name}-{run.key}.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, *command[1:], "--json", str(target)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        outcome.seconds = time.perf_counter() - started
        outcome.status, outcome.reason = "failed", f"timed out after {timeout:g} s"
        return outcome
    outcome.seconds = time.perf_counter() - started
    outcome.exit_code = done.returncode
    (work / f"{run.name}-{run.key}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    data: dict[str, Any] = {}
    if target.is_file():
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except ValueError as exc:
            outcome.status, outcome.reason = "failed", f"unreadable --json output: {exc}"
            return outcome
    if data.get("status") == "ok":
        outcome.status = "ok"
        outcome.figures, outcome.tables = list(data.get("figures", [])), list(data.get("tables", []))
        if done.returncode != 0:
            outcome.reason = f"exit {done.returncode}"
    elif data.get("status") == "not run" or done.returncode == 2:
        outcome.status = "not run"
        outcome.reason = str(data.get("reason") or _last_line(done.stderr or done.stdout))
    else:
        outcome.status = "failed"
        outcome.reason = f"exit {done.returncode}: {_last_line(done.stderr or done.stdout)}"
    return outcome


# --- rendering ------------------------------------------------------------------------------------


def format_value(value: Any, unit: str = "") -> str:
    """A figure as the tables show it: three significant digits, the unit after it."""
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        if not math.isfinite(value):
            text = str(value)
        elif abs(value) >= 1000:
            text = f"{value:,.0f}"
        else:
            text = f"{value:.3g}"
    else:
        text = str(value)
    return _with_unit(text, unit)


def _with_unit(text: str, unit: str) -> str:
    if not unit:
        return text
    return f"{text}{unit}" if unit == "×" else f"{text} {unit}"


def _bound(goal: str) -> tuple[str, float] | None:
    """A goal's comparison and number (``"≤ 1.15"``, ``"≥ 4"``), or ``None``."""
    found = re.fullmatch(r"\s*([≤≥<>])\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*×?\s*", goal)
    return None if found is None else (found[1], float(found[2].replace(",", "")))


def format_figure(figure: dict[str, Any]) -> str:
    """A figure's value cell: :func:`format_value`, with more digits where three would put a
    value that misses its goal on the goal's bound (0.600009 against "≤ 0.6" reads 0.60001,
    not 0.6), so that the value shown agrees with the verdict beside it."""
    value, unit = figure.get("value"), figure.get("unit", "")
    text = format_value(value, unit)
    bound = _bound(str(figure.get("goal") or ""))
    if bound is None or figure.get("met") is not False or not isinstance(value, float):
        return text
    if not math.isfinite(value):
        return text
    op, limit = bound
    wide = abs(value) >= 1000  # shown with thousands separators and no decimals (format_value)
    for digits in range(7) if wide else range(3, 10):
        shown = f"{value:,.{digits}f}" if wide else f"{value:.{digits}g}"
        number = float(shown.replace(",", ""))
        if {"≤": number > limit, "<": number >= limit, "≥": number < limit, ">": number <= limit}[op]:
            return _with_unit(shown, unit)
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(command: list[str]) -> str:
    return f"`{shlex.join(command)}`"


def render_outcome(outcome: Outcome) -> str:
    """One command's block: its title line and its figures as a table."""
    label = f"**{outcome.run.label}**: " if outcome.run.label else ""
    timing = f" ({outcome.seconds:.0f} s)" if outcome.exit_code is not None else ""
    head = f"{label}{_code(outcome.command)}{timing}"
    if outcome.status != "ok":
        return f"{head}: **{outcome.status}**: {_cell(outcome.reason)}"
    lines = [head + (f"; {outcome.reason}" if outcome.reason else "")]
    if outcome.figures:
        lines += ["", "| figure | value | goal | met |", "|---|---|---|---|"]
    for figure in outcome.figures:
        met = figure.get("met")
        verdict = "" if met is None else ("met" if met else "**not met**")
        value = format_figure(figure)
        lines.append(
            f"| {_cell(figure['name'])} | {_cell(value)} | {_cell(figure.get('goal') or '')} | {verdict} |"
        )
    for table in outcome.tables:
        lines += ["", table["title"], ""]
        lines.append("| " + " | ".join(map(_cell, table["columns"])) + " |")
        lines.append("|" + "---|" * len(table["columns"]))
        lines += ["| " + " | ".join(_cell(str(cell)) for cell in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def render_table(name: str, outcomes: list[Outcome]) -> str:
    """Every command of benchmark ``name``, or why none ran."""
    mine = [o for o in outcomes if o.run.name == name]
    if not mine:
        return "Not run: not selected (`--only` / `--skip`) in this run."
    return "\n\n".join(render_outcome(o) for o in mine)


def render_header(info: dict[str, Any]) -> str:
    """The run's provenance: commit, date, machine, load, versions, total time."""
    tree, host = info["tree"], info["machine"]
    dirty = " **with uncommitted changes** (`--allow-dirty`)" if tree["dirty"] else ""
    mode = "smoke run (`--quick`: reduced sizes, figures not comparable)" if info["quick"] else "full run"
    load = "load average (1, 5, 15 min) {} at the start, {} at the end".format(
        *(" / ".join(f"{x:.2f}" for x in info[k]) for k in ("load_start", "load_end"))
    )
    return "\n".join(
        [
            f"Generated by `{info['invocation']}`: {mode}, every benchmark in one process tree, one",
            "after the other, each command also given `--json FILE` (the figures below are read from it)",
            "and run with this checkout's `src/` first on `PYTHONPATH`.",
            "",
            f"- commit: `{tree['commit']}` (`git describe`: `{tree['describe']}`){dirty}",
            f"- date: {info['started']} to {info['finished']} (UTC); total time {info['seconds']:.0f} s",
            f"- machine: {host['cores']} cores ({host['cpu']}), {host['platform']}; {load}",
            f"- Python {host['python']}, torch {host['torch']}, numpy {host['numpy']}",
        ]
    )


_PLACEHOLDER = re.compile(r"\{\{\s*(header|table|value)\b\s*([^}]*?)\s*\}\}")


def check_template(template: str) -> None:
    """Check every placeholder before anything runs.

    Raises:
        ValueError: a placeholder names no benchmark or run the registry knows.
    """
    known = {run.id for run in RUNS}
    for match in _PLACEHOLDER.finditer(template):
        kind, argument = match[1], match[2]
        if kind == "table" and argument not in NAMES:
            raise ValueError(f"{match[0]}: no benchmark named {argument!r}")
        if kind == "value" and argument.partition(" ")[0] not in known:
            raise ValueError(f"{match[0]}: no run {argument.partition(' ')[0]!r}")


def render(template: str, info: dict[str, Any], outcomes: list[Outcome]) -> str:
    """Fill in the template's placeholders (see the module's docstring).

    A figure the run does not have is said in its place (and on stderr), so that the
    results of a long run are never lost to a renamed figure.

    Raises:
        ValueError: a placeholder names no benchmark or run the registry knows.
    """
    check_template(template)
    by_id = {o.run.id: o for o in outcomes}

    def fill(match: re.Match[str]) -> str:
        kind, argument = match[1], match[2]
        if kind == "header":
            return render_header(info)
        if kind == "table":
            return render_table(argument, outcomes)
        run_id, _, name = argument.partition(" ")
        outcome = by_id.get(run_id)
        if outcome is None or outcome.status != "ok":
            return "(not measured in this run)"
        for figure in outcome.figures:
            if figure["name"] == name:
                return format_value(figure.get("value"), figure.get("unit", ""))
        # a renamed figure must not cost the run's results: say so where it stood
        print(f"run_all: {match[0]}: run {run_id} has no figure {name!r}", file=sys.stderr)
        return f"(no figure {name!r} in this run)"

    text = _PLACEHOLDER.sub(fill, template)
    missing = [name for name in NAMES if not re.search(r"\{\{\s*table\s+" + name + r"\s*\}\}", template)]
    if missing:  # a benchmark the template does not place yet is still reported
        text += "\n## Not placed by the template\n\n"
        text += "\n\n".join(f"### {name}\n\n{render_table(name, outcomes)}" for name in missing) + "\n"
    return text


# --- the command ----------------------------------------------------------------------------------


def _selected(only: list[str] | None, skip: list[str] | None) -> list[Run]:
    def norm(names: list[str] | None) -> set[str]:
        return {n.removeprefix("bench_").removesuffix(".py").replace("-", "_") for n in names or []}

    wanted, unwanted = norm(only), norm(skip)
    unknown = sorted((wanted | unwanted) - set(NAMES))
    if unknown:
        raise SystemExit(f"run_all: unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(NAMES)}")
    return [r for r in RUNS if (not wanted or r.name in wanted) and r.name not in unwanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"run only these ({', '.join(NAMES)})")
    parser.add_argument("--skip", nargs="+", metavar="NAME", help="run all but these")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a measurement")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where to write the results (default: %(default)s)"
    )
    parser.add_argument("--template", type=Path, default=TEMPLATE, help="the prose with placeholders")
    parser.add_argument("--allow-dirty", action="store_true", help="run on a tree with uncommitted changes")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command (default: none)")
    parser.add_argument("--keep", type=Path, default=None, help="keep each command's JSON and log here")
    args = parser.parse_args(argv)
    runs = _selected(args.only, args.skip)
    tree = tree_state()
    if not tree["commit"]:
        print(f"run_all: {REPO} is not a git checkout: no commit to state", file=sys.stderr)
        return 2
    if tree["dirty"] and not args.allow_dirty:
        print(
            "run_all: uncommitted changes to tracked files; commit them or pass --allow-dirty",
            file=sys.stderr,
        )
        return 2
    try:
        template = args.template.read_text(encoding="utf-8")
        check_template(template)
    except (OSError, ValueError) as exc:
        print(f"run_all: template {args.template}: {exc}", file=sys.stderr)
        return 2
    invocation = shlex.join(["python", "benchmarks/run_all.py", *(sys.argv[1:] if argv is None else argv)])
    info: dict[str, Any] = {
        "tree": tree,
        "machine": machine(),
        "quick": args.quick,
        "invocation": invocation,
        "started": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "load_start": os.getloadavg(),
    }
    started = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="mibspec-bench-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for i, run in enumerate(runs, 1):
            print(f"[{i}/{len(runs)}] {shlex.join(run.command(args.quick))}", file=sys.stderr, flush=True)
            outcome = execute(run, args.quick, work, args.timeout)
            print(
                f"      {outcome.status} {outcome.reason} ({outcome.seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
            outcomes.append(outcome)
    info.update(
        seconds=time.perf_counter() - started,
        load_end=os.getloadavg(),
        finished=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    )
    try:
        text = render(template, info, outcomes)
    except ValueError as exc:
        print(f"run_all: template {args.template}: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 1 if any(o.status == "failed" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
