"""``benchmarks/run_all.py``: one run of the benchmarks rendered into RESULTS.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _scripts import load_script

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


run_all = load_script("benchmarks/run_all.py", "run_all")

INFO: dict[str, Any] = {
    "tree": {
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "describe": "v1.1-3-g0123456",
        "dirty": False,
    },
    "machine": {
        "cores": 2,
        "cpu": "a CPU",
        "platform": "Linux",
        "python": "3.11.7",
        "torch": "2.13.0",
        "numpy": "2.4",
    },
    "quick": False,
    "invocation": "python benchmarks/run_all.py",
    "started": "2026-01-01 00:00:00",
    "finished": "2026-01-01 01:00:00",
    "seconds": 3600.0,
    "load_start": (0.5, 0.25, 0.125),
    "load_end": (1.5, 1.25, 1.125),
}


def _run(run_id: str) -> Any:
    return next(run for run in run_all.RUNS if run.id == run_id)


def _outcome_from(path: Path) -> Any:
    """An outcome as ``execute`` builds it from a benchmark's ``--json`` file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    name, _, key = path.stem.partition("-")
    run = _run(f"{name}/{key}")
    outcome = run_all.Outcome(
        run, run.command(False), seconds=12.0, exit_code=0 if data["status"] == "ok" else 2
    )
    outcome.status = data["status"]
    outcome.reason = data.get("reason", "")
    outcome.figures, outcome.tables = data.get("figures", []), data.get("tables", [])
    return outcome


def _fixtures() -> list[Any]:
    return [_outcome_from(path) for path in sorted(DATA.glob("*.json"))]


TEMPLATE = """# Results

{{header}}

## Engine

{{table circuit_engine}}

Reachable: {{value circuit_engine/random sharing: patched circuits}}; 24 layers:
{{value circuit_engine/eap24 engine, CPU}}.

## Parity

{{table parity}}

## Shapley

{{table shapley}}
"""


def test_rendering_from_fixture_json() -> None:
    outcomes = _fixtures()
    text = run_all.render(TEMPLATE, INFO, outcomes)
    # the header states the commit, its description, the date, the machine and the total time
    for fact in ("0123456789abcdef0123456789abcdef01234567", "v1.1-3-g0123456", "2026-01-01 00:00:00"):
        assert fact in text
    assert "0.50 / 0.25 / 0.12" in text
    assert "1.50 / 1.25 / 1.12" in text
    assert "3600 s" in text
    assert "torch 2.13.0" in text
    assert "2 cores" in text
    # each figure of the fixture is a row with its value, goal and verdict
    engine = json.loads((DATA / "circuit_engine-random.json").read_text(encoding="utf-8"))
    for figure in engine["figures"]:
        name = figure["name"].replace("|", "\\|")
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        if "goal" in figure:
            assert figure["goal"] in row
            assert ("**not met**" in row) is (not figure["met"])
    assert "| speed-up over two-pass, CPU | 6.94× | ≥ 4 | met |" in text
    assert "| engine, CPU | 25.3 s |  |  |" in text
    # the exact command of the run precedes its table
    assert "`python benchmarks/bench_circuit_engine.py --threads 1`" in text
    # an absent requirement is "not run" with its reason, never a pass
    reason = json.loads((DATA / "parity-all.json").read_text(encoding="utf-8"))["reason"]
    parity = text.split("## Parity")[1].split("## Shapley")[0]
    assert "**not run**" in parity
    assert reason in parity
    assert "| figure |" not in parity
    # a table a benchmark hands over is rendered as it is
    assert "| n | exact evals | err plain |" in text
    assert "| 8 | 256 | 3.10e-02 |" in text
    # prose placeholders take the run's figure, or say it was not measured
    assert "Reachable: 6;" in text
    assert "(not measured in this run)" in text
    assert "{{" not in text
    # benchmarks the template does not place are still reported, as not selected
    assert "## Not placed by the template" in text
    assert "### graph" in text


@pytest.mark.parametrize(
    ("value", "goal", "met", "unit", "shown"),
    [
        (0.6000094198595964, "≤ 0.6", False, "", "0.60001"),  # three digits would read 0.6
        (1.5985387657544936, "≥ 1.6", False, "×", "1.599×"),
        (1.15, "< 1.15", False, "", "1.15"),  # on the bound of a strict goal: missed as shown
        (1.4023, "≤ 1.15", False, "", "1.4"),  # clearly missed: three digits as everywhere
        (0.5999, "≤ 0.6", True, "", "0.6"),  # met: the verdict is not contradicted
        (1234.5, "≤ 1000", False, " s", "1,234 s"),
        (1000.4, "≤ 1000", False, " s", "1,000.4 s"),  # no decimals would read 1,000
    ],
)
def test_a_missed_goal_is_not_shown_on_its_bound(
    value: float, goal: str, met: bool, unit: str, shown: str
) -> None:
    assert run_all.format_figure({"value": value, "goal": goal, "met": met, "unit": unit.strip()}) == shown
    # whenever more digits were needed, the shown number misses the goal as the verdict says
    number = float(shown.rstrip("×s ").replace(",", ""))
    limit = float(goal.split()[1])
    if not met and goal.startswith("≤"):
        assert number > limit
    if not met and goal.startswith("≥"):
        assert number < limit


def test_unknown_placeholders_are_refused_before_anything_runs() -> None:
    for bad in ("{{table no_such_bench}}", "{{value circuit_engine/nope engine, CPU}}"):
        with pytest.raises(ValueError, match="no "):
            run_all.check_template(bad)
    # a figure the run lacks is said in its place: the run's other results are kept
    text = run_all.render(
        "{{value circuit_engine/random no such figure}}\n{{table shapley}}", INFO, _fixtures()
    )
    assert "(no figure 'no such figure' in this run)" in text
    assert "| 8 | 256 | 3.10e-02 |" in text


def test_the_shipped_template_places_every_benchmark() -> None:
    template = (REPO / "benchmarks" / "RESULTS.template.md").read_text(encoding="utf-8")
    run_all.check_template(template)
    for name in run_all.NAMES:
        assert f"{{{{table {name}}}}}" in template
    # every benchmark script of the folder has a command in the registry
    scripts = {p.relative_to(REPO).as_posix() for p in (REPO / "benchmarks").glob("bench_*.py")}
    scripts.add("benchmarks/parity/run_parity.py")
    assert scripts == {run.script for run in run_all.RUNS}


@pytest.mark.parametrize(
    ("code", "writes", "status"),
    [
        (
            "write({'status': 'ok', 'figures': [{'name': 'x', 'value': 1.5}]}); raise SystemExit(0)",
            True,
            "ok",
        ),
        ("write({'status': 'not run', 'reason': 'needs the moon'}); raise SystemExit(2)", True, "not run"),
        ("print('needs the sun', file=sys.stderr); raise SystemExit(2)", False, "not run"),
        ("raise RuntimeError('broken')", False, "failed"),
        ("write({'status': 'ok', 'figures': []}); raise SystemExit(1)", True, "ok"),
    ],
)
def test_execute_reads_the_status_from_the_json_and_the_exit_code(
    tmp_path: Path, code: str, writes: bool, status: str
) -> None:
    script = tmp_path / "bench_fake.py"
    script.write_text(
        "import json, sys\n"
        "def write(data):\n"
        "    open(sys.argv[sys.argv.index('--json') + 1], 'w').write(json.dumps(data))\n" + code + "\n",
        encoding="utf-8",
    )
    run = run_all.Run("fake", "default", "", str(script))
    outcome = run_all.execute(run, False, tmp_path, timeout=120)
    assert outcome.status == status
    if status == "not run":
        assert outcome.reason in ("needs the moon", "needs the sun")
    if status == "failed":
        assert "RuntimeError: broken" in outcome.reason
    if code.endswith("SystemExit(1)"):
        assert outcome.reason == "exit 1"  # figures kept, the exit code said beside them
    assert (tmp_path / "fake-default.json").is_file() is writes


def test_a_dirty_tree_is_refused_unless_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        run_all, "tree_state", lambda: {"commit": "abc", "describe": "abc-dirty", "dirty": True}
    )
    ran: list[Any] = []
    monkeypatch.setattr(run_all, "execute", lambda *args: ran.append(args))
    out = tmp_path / "RESULTS.md"
    assert run_all.main(["--only", "shapley", "--out", str(out)]) == 2
    assert not out.exists()
    assert not ran


def test_unknown_benchmark_names_are_a_usage_error() -> None:
    with pytest.raises(SystemExit, match="unknown benchmark"):
        run_all.main(["--only", "no_such_bench", "--allow-dirty"])


@pytest.mark.slow
def test_quick_run_of_two_benchmarks(tmp_path: Path) -> None:
    out, keep = tmp_path / "RESULTS.md", tmp_path / "keep"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run_all.py"), "--quick", "--allow-dirty",
         "--only", "permutation_test", "shapley", "--out", str(out), "--keep", str(keep)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"`{commit}`" in text
    for run_id in ("permutation_test/default", "shapley/default"):
        run = _run(run_id)
        assert f"`{' '.join(run.command(True))}`" in text
        data = json.loads((keep / f"{run.name}-{run.key}.json").read_text(encoding="utf-8"))
        assert data["status"] == "ok"
        for figure in data["figures"]:
            value = run_all.format_figure(figure)
            assert f"| {figure['name']} | {value} |" in text
        for table in data.get("tables", []):
            for row in table["rows"]:
                assert "| " + " | ".join(row) + " |" in text
        assert data["figures"] or data.get("tables")
    # the benchmarks left out are said to be so, not silently dropped
    assert text.count("not selected") == len(run_all.NAMES) - 2
