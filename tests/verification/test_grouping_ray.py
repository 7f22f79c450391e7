"""`verify --executor ray` on a local Ray cluster started here: the bytes of `-j 1`, a worker
that dies is retried, and a task that keeps dying fails its reports (never passes them)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mibspec.validator import VerificationResult, VerifyOptions, verify_paths
from mibspec.verification.api import collect_paths
from mibspec.verification.api import verify as run_verify
from mibspec.verification.grouping import RAY_MAX_RETRIES, task_gpus, verify_many
from mibspec.verification.output_formats import REPORTERS

ray = pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "circuit"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One local cluster for the module; its workers read injected faults from the folder."""
    faults = tmp_path_factory.mktemp("faults")
    cache = tmp_path_factory.mktemp("cache")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"MIBSPEC_RAY_FAULT_DIR": str(faults), "MIBSPEC_CACHE_DIR": str(cache)}},
    )
    try:
        yield faults
    finally:
        ray.shutdown()


@pytest.fixture
def reports(tmp_path: Path) -> list[str]:
    for name in ("a", "b", "c"):
        shutil.copytree(EXAMPLE, tmp_path / name)
    return collect_paths([tmp_path])


def _json(result: VerificationResult) -> str:
    buffer = io.StringIO()
    REPORTERS["json"](result, buffer)
    return buffer.getvalue()


def _fault(faults: Path, report: str, attempts: int) -> Path:
    """Make the first ``attempts`` runs of the task holding ``report`` kill their worker."""
    name = hashlib.sha256(os.path.abspath(report).encode()).hexdigest()[:16]
    (faults / f"exit-{name}").write_text(str(attempts))
    return faults / f"attempts-{name}"


OPTIONS = VerifyOptions(recompute=False)


@pytest.mark.slow
def test_ray_output_is_the_bytes_of_one_process(cluster: Path, reports: list[str]) -> None:
    serial = _json(verify_paths(reports, OPTIONS))
    assert _json(verify_many(reports, OPTIONS, executor="ray")) == serial
    # the public API: a cluster this process joined is used, and left running
    assert _json(run_verify(*reports, recompute=False, executor="ray")) == serial
    assert ray.is_initialized()


class _Progress:
    def __init__(self) -> None:
        self.started: list[tuple[str, int]] = []
        self.done = 0

    def start(self, description: str, total: int) -> None:
        self.started.append((description, total))

    def advance(self, steps: int = 1) -> None:
        self.done += steps


@pytest.mark.slow
def test_a_dead_worker_is_retried(cluster: Path, reports: list[str]) -> None:
    attempts = _fault(cluster, reports[1], 1)
    progress = _Progress()
    result = verify_many(reports, OPTIONS, executor="ray", progress=progress)
    assert attempts.stat().st_size == 2  # killed once, then run again
    assert _json(result) == _json(verify_paths(reports, OPTIONS))
    assert progress.done == len(reports)
    assert progress.started[0][1] == len(reports)


@pytest.mark.slow
def test_a_task_that_keeps_dying_fails_its_reports(cluster: Path, reports: list[str]) -> None:
    attempts = _fault(cluster, reports[1], 1000)
    result = verify_many(reports, VerifyOptions(recompute=False), executor="ray")
    assert attempts.stat().st_size == RAY_MAX_RETRIES + 1
    documents = {doc.path: doc for doc in result.documents}
    lost = documents[reports[1]]
    assert not lost.valid
    assert lost.internal_error is not None
    assert "failed" in lost.internal_error
    assert any(status.value == "failed" for status, _ in lost.stages.values())
    # nothing else is lost: every other report and its documents are there, verified
    serial = {doc.path: doc.to_json() for doc in verify_paths(reports, OPTIONS).documents}
    others = {p: d.to_json() for p, d in documents.items() if p != reports[1]}
    assert others == {p: d for p, d in serial.items() if not p.startswith(str(Path(reports[1]).parent))}
    assert not result.valid


@pytest.mark.slow
def test_the_cli_refuses_an_address_without_ray(mibspec_cli: Any, reports: list[str]) -> None:
    done = mibspec_cli("verify", reports[0], "--no-recompute", "--address", "127.0.0.1:6379")
    assert done.returncode == 2
    assert "--address" in done.stderr
    assert mibspec_cli("verify", reports[0], "--no-recompute", "--executor", "dask").returncode == 2


@pytest.mark.parametrize(("device", "gpus"), [(None, 0), ("cpu", 0), ("cuda", 1), ("cuda:1", 1), ("mps", 0)])
def test_a_task_asks_for_a_gpu_when_the_device_is_cuda(device: str | None, gpus: int) -> None:
    class Options:
        pass

    options = Options()
    options.device = device  # type: ignore[attr-defined]
    assert task_gpus(options) == gpus
    assert task_gpus(OPTIONS) == 0  # no device option: the CPU


@pytest.mark.slow
@pytest.mark.recompute
def test_ray_recomputation_is_the_bytes_of_one_process(
    cluster: Path, tmp_path: Path, report_copies: Any
) -> None:
    report_copies(tmp_path, 3, 8, batch_sizes=(4, 8, 4))  # two groups: two tasks
    files = collect_paths([tmp_path])
    options = VerifyOptions(model_roots=(REPO / "examples" / "models",))
    serial = _json(verify_paths(files, options))
    assert '"recomputed"' in serial
    assert _json(verify_many(files, options, executor="ray")) == serial
