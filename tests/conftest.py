"""Shared fixtures: a runner for the command line, paths to the repository's data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from mibspec.core.tracks import track_of_case

# Property tests draw the same examples on every run (derived from each test's name), so a
# run's verdict does not depend on chance; HYPOTHESIS_PROFILE=explore draws new ones.
settings.register_profile("mibspec", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mibspec"))

# Under pytest-xdist the workers already fill the cores, so each runs torch (and the
# subprocesses it starts) on one thread unless the environment says otherwise: two threads
# per worker on a 2-core machine made the default run take about a third longer.
if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if "torch" in sys.modules:  # imported before this file: the variable came too late
        sys.modules["torch"].set_num_threads(1)

REPO = Path(__file__).resolve().parent.parent
#: The conformance suite of spec 1.0, read from the repository.
CONFORMANCE = REPO / "conformance" / "v1"

#: The smallest conformance suite the tests accept, the one statement of its size: the number of
#: (valid, invalid) cases per kind, report cases per track. The suite may grow; a case removed below
#: these counts fails the tests.
SUITE_MINIMUM: dict[str, tuple[int, int]] = {
    "json": (3, 16),
    "report/circuit": (8, 41),
    "report/causal_variable": (7, 17),
    "report/causal_bench": (6, 35),
    "report/saliency": (2, 15),
    "circuit": (7, 23),
    "featurizer": (6, 21),
    "counterfactual_dataset": (3, 23),
    "causal_model": (3, 9),
    "shortcut_dataset": (2, 15),
    "leaderboard": (2, 5),
}


@dataclass(frozen=True)
class SuiteMinimum:
    """:data:`SUITE_MINIMUM`, and how a suite's cases are counted against it."""

    counts: dict[str, tuple[int, int]]

    @property
    def total(self) -> int:
        return sum(valid + invalid for valid, invalid in self.counts.values())

    @staticmethod
    def group(expected: dict[str, Any]) -> str:
        """A case's kind, for a report ``report/<track>`` (its id starts with the track)."""
        kind = str(expected["kind"])
        if kind != "report":
            return kind
        ident = str(expected["id"])
        track = track_of_case(ident) or "?"
        return f"report/{track}"

    def shortfalls(self, cases: Iterable[dict[str, Any]]) -> list[str]:
        """Every (group, verdict) with fewer cases in ``cases`` (expected.json contents) than the minimum."""
        found: Counter[tuple[str, str]] = Counter((self.group(c), str(c["verdict"])) for c in cases)
        return [
            f"{group} {verdict}: {found[group, verdict]} < {least}"
            for group, pair in self.counts.items()
            for verdict, least in zip(("valid", "invalid"), pair, strict=True)
            if found[group, verdict] < least
        ]


@pytest.fixture
def suite_minimum() -> SuiteMinimum:
    return SuiteMinimum(SUITE_MINIMUM)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing in the test suite may reach a model hub.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    # The text output fits COLUMNS when it is set (pytest-xdist sets it to 80 in its workers, a
    # shell may export it): every test sees the output of a file, whatever ran it.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    # The file-hash cache of recomputation is written into a folder of the test run, never
    # into the user's cache.
    monkeypatch.setenv("MIBSPEC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mibspec-cache"))


CliRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def mibspec_cli() -> CliRun:
    """Run ``python -m mibspec ARGS`` in a fresh process (exit codes, stdout, stderr)."""

    def run(
        *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
        # Run outside the source tree so `-m mibspec` imports the installed package.
        return subprocess.run(
            [sys.executable, "-m", "mibspec", *args],
            capture_output=True,
            text=True,
            cwd=cwd or tempfile.gettempdir(),
            env=full_env,
            timeout=600,
            check=False,
        )

    return run


SmallDataset = Callable[[Path, int], Path]


@pytest.fixture(scope="session")
def small_ioi_dataset() -> SmallDataset:
    """``make(folder, n)``: the first ``n`` rows of the shipped IOI test split as a dataset in
    ``folder/ioi-small`` (its ``.meta.json`` notes the cut); returns the ``.meta.json``."""

    def make(folder: Path, n: int) -> Path:
        import json

        source = REPO / "examples" / "datasets" / "ioi"
        meta = json.loads((source / "test.meta.json").read_text(encoding="utf-8"))
        lines = (source / "test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:n]
        target = folder / "ioi-small"
        target.mkdir()
        (target / "test.jsonl").write_text("".join(lines), encoding="utf-8")
        meta["filters"].append(
            {"name": "other", "kept": n, "dropped": len(lines) - n, "detail": f"first {n} rows"}
        )
        meta["rows"] = n
        (target / "test.meta.json").write_text(json.dumps(meta), encoding="utf-8")
        return target / "test.meta.json"

    return make


InjectedRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def injected_cli(tmp_path: Path) -> InjectedRun:
    """Run ``python -m mibspec ARGS`` in ``tmp_path`` with ``code`` as its ``sitecustomize``
    (run at start-up by the process and every worker it spawns): a defect injected from
    outside, to see how a run survives it."""

    def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
        inject = tmp_path / "inject"
        inject.mkdir(exist_ok=True)
        (inject / "sitecustomize.py").write_text(code, encoding="utf-8")
        pythonpath = os.pathsep.join(filter(None, [str(inject), os.environ.get("PYTHONPATH")]))
        return subprocess.run(
            [sys.executable, "-m", "mibspec", *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": pythonpath},
            timeout=600,
        )

    return run


@pytest.fixture(scope="session")
def report_copies() -> Callable[..., None]:
    """``build_corpus(root, n, rows, batch_sizes)`` of ``benchmarks/bench_grouped_verify.py``:
    copies of the IOI circuit report, each evaluating other circuits on the same rows."""
    import importlib.util

    path = REPO / "benchmarks" / "bench_grouped_verify.py"
    spec = importlib.util.spec_from_file_location("bench_grouped_verify", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build: Callable[..., None] = module.build_corpus
    return build


#: Markers of runs of minutes to an hour, left out unless the -m expression names them:
#: ``pytest -m long`` selects the long runs, while ``pytest`` and ``pytest -m "not slow"`` leave
#: all three out. (An -m in addopts would not do: a -m given on the command line replaces it.)
OPT_IN_MARKERS = ("long", "parity", "soundness")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expression = str(config.getoption("markexpr") or "")
    named = {m for m in OPT_IN_MARKERS if re.search(rf"\b{m}\b", expression)}
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        opt_in = {m.name for m in item.iter_markers() if m.name in OPT_IN_MARKERS}
        (left_out if opt_in - named else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


#: Set by CI, which installs every extra: a test skipped because an optional package is
#: missing then fails the run instead of passing as a skip.
REQUIRE_EXTRAS = "MIBSPEC_REQUIRE_EXTRAS"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(REQUIRE_EXTRAS) != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter is not None else []
    missing = sorted({str(r.longrepr[-1]) for r in skipped if "could not import" in str(r.longrepr)})
    if missing:
        if reporter is not None:
            reporter.write_line(f"{REQUIRE_EXTRAS}=1 and optional packages are missing:", red=True)
            for reason in missing:
                reporter.write_line(f"  {reason}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
