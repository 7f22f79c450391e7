"""Declared work without a bound (SPEC.md R-4, R-6): sizes and counts a report declares are
checked against the time and memory recomputation was given before it starts (R125), a
default time limit stops what still runs long (R105), and the stop does not depend on the
recomputation reporting progress.

Each hostile report is verified in a fresh process with a wall-clock timeout and its peak
memory measured: before these checks, the scaling study below ran for more than 19 minutes
and grew past 4.7 GB. The expected findings and pointers are written from the spec.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hardening_support import REPO

import mibspec
from mibspec.core.strict_json import Limits
from mibspec.core.work import Work, over_limits

PLANTED = REPO / "examples" / "causal-bench-planted" / "report.json"
MB = 1024 * 1024


def _run(report: Path, *args: str, timeout: float = 120) -> tuple[dict[str, Any], float, int]:
    """The JSON output, wall time and peak resident memory (KiB) of ``mibspec verify``."""
    script = textwrap.dedent(
        """
        import resource, runpy, sys
        sys.argv = ["mibspec", *sys.argv[1:]]

        def peak():
            # VmHWM belongs to this program's own memory map; ru_maxrss may carry the peak of
            # the process that started it across exec (Linux keeps it in the signal struct)
            try:
                with open("/proc/self/status") as status:
                    for line in status:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1])
            except OSError:
                pass
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        try:
            runpy.run_module("mibspec", run_name="__main__")
        finally:
            print(peak(), file=sys.stderr)
        """
    )
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script, "verify", str(report), "-f", "json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    return json.loads(done.stdout), elapsed, int(done.stderr.strip().splitlines()[-1])


def _planted(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    data = json.loads(PLANTED.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _codes(output: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["code"], f["pointer"]) for doc in output["documents"] for f in doc["findings"]]


@pytest.mark.parametrize(
    ("change", "pointer", "said"),
    [
        # one scaling size changed from 8 to 8007 heads: circuit discovery over 64,064 components
        (
            lambda d: d["claims"]["scaling"][3].update(n_heads=8007),
            "/claims/scaling/3",
            "over the limit of 3600 s (--max-recompute-seconds)",
        ),
        # the behaviour's heads: the universe alone would not fit (4 × 10**9 ids)
        (
            lambda d: d["behaviour"].update(n_heads=10**9),
            "/behaviour",
            "over the limit of 8 GiB (--max-recompute-bytes)",
        ),
        # 10**12 null draws of the convergence test (declared consistently: B101, C107)
        (
            lambda d: (
                d["settings"].update(n_permutations=10**12),
                d["claims"].pop("scaling"),
                d["claims"]["convergence"].update(n_permutations=10**12, p=2 / (10**12 + 1)),
            ),
            "/claims/convergence/n_permutations",
            "over the limit of 8 GiB",
        ),
        # a million layers in a scaling configuration
        (
            lambda d: d["claims"]["scaling"][5].update(n_layers=10**6),
            "/claims/scaling/5",
            "over the limit of 8 GiB",
        ),
    ],
    ids=["scaling-heads", "behaviour-heads", "null-draws", "scaling-layers"],
)
def test_declared_work_over_the_limits_is_refused_before_it_starts(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], pointer: str, said: str
) -> None:
    output, elapsed, peak = _run(_planted(tmp_path, change), timeout=300)
    assert _codes(output) == [("R125", pointer)]
    [finding] = output["documents"][0]["findings"]
    assert said in finding["message"]
    assert "nothing was recomputed" in finding["message"]
    assert not output["documents"][0].get("recomputed")
    assert elapsed < 120
    assert peak < 1024 * 1024  # KiB: well under a GiB (the universe alone would be 373 GiB)


@pytest.mark.slow
def test_the_example_study_is_within_the_default_limits_and_its_estimate_is_below_its_cost() -> None:
    """The estimates are lower bounds: the planted example and a scaling study of 808
    components (8L/100H) take longer than their estimates say, on this machine."""
    from types import SimpleNamespace

    from mibspec.reference_impl.recompute import work

    data = json.loads(PLANTED.read_text(encoding="utf-8"))
    data["claims"]["scaling"] = data["claims"]["scaling"][3:4]
    data["claims"]["scaling"][0]["n_heads"] = 100
    items = work.causal_bench(SimpleNamespace(data=data, device="cpu"))  # type: ignore[arg-type]
    assert over_limits(items, Limits()) is None
    estimate = sum(item.seconds for item in items)
    from mibspec.reference_impl.behaviour.localization import PAPER_PROCEDURES, identify
    from mibspec.reference_impl.behaviour.study import planted_model

    model = planted_model(data["behaviour"], 8, 100)
    start = time.perf_counter()
    identify(PAPER_PROCEDURES["circuit_discovery"], model, 0)  # one of the items, alone
    assert time.perf_counter() - start > max(
        item.seconds for item in items if "8L/100H" in item.what and "circuit discovery" in item.what
    )
    assert 0 < estimate < 60


def test_over_limits_checks_memory_then_time_and_leaves_short_work_alone() -> None:
    limits = Limits(max_recompute_seconds=10.0, max_recompute_bytes=1000)
    assert over_limits([Work("/a", "a", seconds=5.0, bytes=999)], limits) is None
    work, why, option = over_limits([Work("/a", "a", seconds=50.0, bytes=1001)], limits)  # type: ignore[misc]
    assert (work.pointer, option) == ("/a", "--max-recompute-bytes")
    assert why == "holds at least 1001 bytes at once, over the limit of 1000 bytes"
    _, _, option = over_limits([Work("/b", "b", seconds=50.0)], limits)  # type: ignore[misc]
    assert option == "--max-recompute-seconds"
    # a limit of 0 s refuses no work estimated under a second: the running stage stops it (R105)
    assert over_limits([Work("/c", "c", seconds=0.5)], Limits(max_recompute_seconds=0.0)) is None
    assert over_limits([Work("/d", "d", seconds=1e9)], Limits(max_recompute_seconds=math.inf)) is None
    assert over_limits([Work("/d", "d", seconds=1e9)], Limits(max_recompute_seconds=None)) is None


def test_the_default_time_limit_is_one_hour_and_inf_lifts_it(tmp_path: Path) -> None:
    assert Limits().max_recompute_seconds == 3600.0
    report = _planted(tmp_path, lambda d: d["claims"]["scaling"][3].update(n_heads=8007))
    # without a time limit, the memory limit still refuses the study (2 × 64,064² bytes)
    output, _, _ = _run(report, "--max-recompute-seconds", "inf", "--max-recompute-bytes", str(4 * 1024**3))
    [finding] = output["documents"][0]["findings"]
    assert (finding["code"], finding["pointer"]) == ("R125", "/claims/scaling/3")
    assert "over the limit of 4 GiB (--max-recompute-bytes)" in finding["message"]
    result = mibspec.verify(report, limits=Limits(max_recompute_seconds=None, max_recompute_bytes=10**6))
    assert [(f.code, f.pointer) for f in result.findings] == [("R125", "/claims/scaling/3")]


_STUCK = """
import sys, time
import mibspec
from mibspec.reference_impl.recompute import causal_bench
from mibspec.validator import Limits

def stuck(*args, **kwargs):
    while True:  # a loop that reports no progress
        sum(range(1000))

causal_bench._study = stuck
start = time.monotonic()
result = mibspec.verify(sys.argv[1], limits=Limits(max_recompute_seconds=1.0))
print(time.monotonic() - start)
print([(f.code, f.pointer) for f in result.findings])
print(result.documents[0].stages)
"""


@pytest.mark.slow
def test_the_time_limit_stops_a_recomputation_that_reports_no_progress() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STUCK, str(PLANTED)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    elapsed, codes, _ = done.stdout.strip().splitlines()
    assert codes == "[('R105', '')]"
    assert float(elapsed) < 20


def test_the_timer_is_disarmed_and_the_previous_handler_restored() -> None:
    import signal

    before = signal.getsignal(signal.SIGALRM)
    result = mibspec.verify(PLANTED, limits=Limits(max_recompute_seconds=600.0))
    assert result.valid
    assert signal.getsignal(signal.SIGALRM) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
