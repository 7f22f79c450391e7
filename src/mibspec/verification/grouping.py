"""Verifying many reports: grouped, in this process, in worker processes or as Ray tasks.

Reports whose forward passes are the same — same track, model (source, folder or hub id,
revision, pinned files), dtype, dataset document, counterfactual type, ablation, positions
and batch size — form a *group*. The reports of a group are verified one after another
in one process with one :class:`~mibspec.reference_impl.recompute._session.RecomputeSession`:
the model is read, hashed and built once, the clean and ablation runs of each batch are
computed once, and so is each distinct circuit on each batch (reports of a group share the
full and empty circuits at least, and re-submissions share all of theirs). Grouping only
decides what runs where: every cache is keyed by content, and a circuit's metrics do not
depend on the circuits evaluated with it beyond floating-point reassociation (engine.md
ME-10), so a report's result is the one it gets when verified alone, its recomputed values
within that bound.

A *unit* is the list of reports one worker verifies: a group (split in parts when there are
fewer groups than workers), or, without recomputation, a run of consecutive reports. Each
report is verified by its own runner (every document it references is verified under it);
the results are merged in input order, each document listed the first time it is reached,
which is the serial run's list.

Executors:

* ``process`` (``jobs`` > 1): ``jobs - 1`` persistent worker processes and this process
  claim units in order, each the next one when it is done with its last, so worker start-up
  overlaps with work and costs once per worker, never once per report, and no process
  waits while another still has work queued (workers are forked where that is safe, see
  :func:`_start_method`; without recomputation, after this process verified the first
  report, so that they start with its imports and compiled schemas);
* ``ray``: one task per unit on a Ray cluster (``address``, else a local one), with
  ``num_gpus=1`` when the device is CUDA. A task whose worker dies is retried
  :data:`RAY_MAX_RETRIES` times; after that its reports are failed (a failed stage and an
  internal error, exit code 3), never passed. Paths are those of this process: a remote
  machine needs the same files at the same paths (a shared file system).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mibspec.validator import (
    DocumentResult,
    VerificationResult,
    VerifyOptions,
    printable_path,
    record_internal_error,
    verify_paths,
)
from mibspec.verification.request import EXECUTORS
from mibspec.verification.versions import note_imported, watched_imports

__all__ = ["EXECUTORS", "RAY_MAX_RETRIES", "group_key", "plan_units", "task_gpus", "verify_many"]

#: How many times a Ray task whose worker died is run again before its reports fail.
RAY_MAX_RETRIES = 2
#: Without recomputation, each unit takes one share in this many per worker of the reports
#: left: long runs first, single reports last, so the processes end together while there
#: are few units (each costs one message), and a unit lost with its worker is a small part.
_UNITS_PER_WORKER = 4
#: Environment variable naming a folder of injected faults for the Ray executor's tests.
_FAULT_ENV = "MIBSPEC_RAY_FAULT_DIR"

PathResult = tuple[list[DocumentResult], list[str]]


def group_key(path: str, max_bytes: int) -> str | None:
    """What determines a report's forward passes (a canonical JSON string), or ``None``
    when the file is not a report that could be read (it then forms a group of its own)."""
    try:
        raw = _read_regular(Path(path), max_bytes)
        if raw is None:
            return None
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("kind") != "report":
            return None
        model, task, settings = data.get("model"), data.get("task"), data.get("settings")
        if not isinstance(model, dict) or not isinstance(task, dict) or not isinstance(settings, dict):
            return None
        dataset = None
        for artifact in data.get("artifacts") or []:
            if isinstance(artifact, dict) and artifact.get("id") == task.get("dataset"):
                dataset = _digest(Path(path).parent, str(artifact.get("path")), max_bytes)
        key = {
            "track": data.get("track"),
            "model": {k: model.get(k) for k in ("source", "path", "id", "revision", "files", "dtype")},
            "dataset": dataset,
            "counterfactual": task.get("counterfactual_type"),
            "settings": {k: settings.get(k) for k in ("ablation", "positions", "batch_size")},
        }
        return json.dumps(key, sort_keys=True, default=str)
    except (OSError, ValueError, RecursionError, TypeError):
        return None


def _digest(folder: Path, relative: str, max_bytes: int) -> str | None:
    """SHA-256 of the artifact ``relative`` to the report's ``folder``, or ``None`` when it
    is not a regular file inside that folder of at most ``max_bytes`` (the rules stage
    reports why; grouping only needs equal files to be seen as equal)."""
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        return None
    try:
        target = (folder / relative).resolve()
        if not target.is_relative_to(folder.resolve()):
            return None
        raw = _read_regular(target, max_bytes)
    except (OSError, RuntimeError):  # RuntimeError: a loop of links
        return None
    return None if raw is None else hashlib.sha256(raw).hexdigest()


def _read_regular(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``, else ``None``:
    never a device, a FIFO (which would block) or more than the limit.

    Raises:
        OSError: it cannot be read.
    """
    if not stat.S_ISREG(path.stat().st_mode):
        return None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the check
            return None
        raw = handle.read(max_bytes + 1)
    return None if len(raw) > max_bytes else raw


def plan_units(files: Sequence[str], options: VerifyOptions, workers: int) -> list[list[int]]:
    """The units (lists of indices into ``files``), in the order they should start."""
    n = len(files)
    if not options.recompute:  # runs of consecutive reports, shorter and shorter
        units, start = [], 0
        while start < n:
            size = -(-(n - start) // (_UNITS_PER_WORKER * workers))
            units.append(list(range(start, start + size)))
            start += size
        return units
    groups: dict[Any, list[int]] = {}
    for i, path in enumerate(files):
        key = group_key(path, options.limits.max_bytes)
        groups.setdefault(("key", key) if key is not None else ("alone", i), []).append(i)
    units = list(groups.values())
    # fewer groups than workers: halve the largest group until every worker has a unit
    while len(units) < workers and max(len(u) for u in units) > 1:
        largest = max(range(len(units)), key=lambda j: len(units[j]))
        unit = units[largest]
        units[largest : largest + 1] = [unit[: len(unit) // 2], unit[len(unit) // 2 :]]
    return units


def verify_unit(paths: Sequence[str], options: VerifyOptions) -> list[PathResult]:
    """Verify each path with its own runner and one shared recompute session."""
    session = None
    if options.recompute:
        from mibspec.reference_impl.recompute import RecomputeSession

        # a report runs each batch once: a unit of one report has no runs to share
        session = RecomputeSession(
            trust_hash_cache=options.trust_hash_cache, share_activations=len(paths) > 1
        )
        options = replace(options, session=session)
    try:
        out: list[PathResult] = []
        for path in paths:
            docs = verify_paths([path], options).documents
            out.append((docs, watched_imports()))
        return out
    finally:
        if session is not None:
            session.close()


def _failed(paths: Sequence[str], exc: BaseException) -> list[PathResult]:
    out: list[PathResult] = []
    for path in paths:
        failed = DocumentResult(path=printable_path(path))
        record_internal_error(failed, exc)
        out.append(([failed], []))
    return out


def verify_many(
    files: list[str],
    options: VerifyOptions,
    jobs: int = 1,
    *,
    executor: str = "process",
    address: str | None = None,
    progress: Any = None,
) -> VerificationResult:
    """Verify ``files`` in groups; the result is that of ``verify_paths(files, options)``, its
    recomputed values within floating-point reassociation (engine.md ME-10).

    Args:
        files: report files (folders already expanded).
        options: the run's options (``progress`` is used only when everything runs here).
        jobs: processes for the ``process`` executor (this one included).
        executor: ``process`` or ``ray``.
        address: the Ray cluster to connect to (default: a local one, or the one this
            process already joined).
        progress: told how many reports are done (``ray`` only).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    workers = 1 if executor == "process" and jobs == 1 else max(jobs, 1)
    units = plan_units(files, options, workers)
    results: list[PathResult | None] = [None] * len(files)

    def keep(unit: list[int], out: list[PathResult]) -> None:
        for index, item in zip(unit, out, strict=True):
            results[index] = item

    if executor == "ray":
        _run_ray(files, units, replace(options, progress=None, session=None), address, keep, progress)
    elif jobs == 1:
        for unit in units:
            keep(unit, verify_unit([files[i] for i in unit], options))
    else:
        _run_processes(files, units, replace(options, progress=None, session=None), jobs, keep)
    documents: list[DocumentResult] = []
    seen: set[Path] = set()
    for item in results:
        assert item is not None
        docs, imported = item
        note_imported(imported)
        for doc in docs:
            key = Path(doc.path).resolve()
            if key not in seen:
                seen.add(key)
                documents.append(doc)
    return VerificationResult(documents=documents, profile=options.profile)


def _run_processes(
    files: list[str],
    units: list[list[int]],
    options: VerifyOptions,
    jobs: int,
    keep: Callable[[list[int], list[PathResult]], None],
) -> None:
    """``jobs - 1`` worker processes and this one claim units in order from a shared counter.

    Each process takes the next unit when it is done with its last, so none waits while
    another still has a queue of its own. Without recomputation this process first
    verifies the first report itself: the workers, forked after it, start with every
    module verification needs imported and the schemas compiled. A unit whose worker
    died is failed, never passed, and the other processes go on with the rest.
    """
    if not options.recompute and units and units[0]:
        first, *rest = units[0]
        keep([first], verify_unit([files[first]], options))
        units = [rest, *units[1:]] if rest else units[1:]
    if not units:
        return
    context = _start_method()
    claims = _Claims(context, len(units))
    results = context.Queue()
    workers = [
        context.Process(target=_worker, args=(n, files, units, options, claims, results), daemon=True)
        for n in range(1, min(jobs - 1, len(units)) + 1)
    ]
    for worker in workers:
        worker.start()
    received: set[int] = set()

    def take(index: int, status: str, payload: Any) -> None:
        received.add(index)
        if status == "unreadable":  # an unreadable input: a usage error, as in the serial run
            raise payload
        keep(units[index], payload)

    try:
        while (index := claims.next(0)) is not None:  # this process works too
            received.add(index)
            keep(units[index], verify_unit([files[i] for i in units[index]], options))
            while not results.empty():
                take(*results.get())
        _collect(workers, claims, results, received, take)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
    for index in range(len(units)):  # claimed by a worker that died before it was done
        if index not in received:
            code = workers[claims.owner(index) - 1].exitcode
            lost = WorkerLostError(f"the worker process verifying it exited with code {code}")
            keep(units[index], _failed([files[i] for i in units[index]], lost))


def _collect(
    workers: list[Any],
    claims: _Claims,
    results: Any,
    received: set[int],
    take: Callable[[int, str, Any], None],
) -> None:
    """Take the workers' results until every unit is done or its worker is gone."""
    import queue

    def outstanding() -> bool:
        live = {n + 1 for n, worker in enumerate(workers) if worker.exitcode is None}
        return any(index not in received and claims.owner(index) in live for index in range(claims.size))

    while outstanding():
        try:
            take(*results.get(timeout=0.05))
        except queue.Empty:
            continue
    while True:  # a worker that exited normally flushed its results before it did
        try:
            take(*results.get(timeout=0.01))
        except queue.Empty:
            return


class _Claims:
    """Which process took which unit: a counter and an owner per unit, shared by all."""

    def __init__(self, context: Any, size: int) -> None:
        self.size = size
        self._lock = context.Lock()
        self._next = context.RawValue("l", 0)
        self._owner = context.RawArray("l", size)

    def next(self, worker: int) -> int | None:
        """The next unit for ``worker`` (0: this process, n: the n-th worker), if any is left."""
        with self._lock:
            index = self._next.value
            if index >= self.size:
                return None
            self._next.value = index + 1
            self._owner[index] = worker
            return index

    def owner(self, index: int) -> int:
        return int(self._owner[index])


def _worker(
    number: int,
    files: list[str],
    units: list[list[int]],
    options: VerifyOptions,
    claims: _Claims,
    results: Any,
) -> None:
    """Worker ``number``: verify units until none is left, each result sent as it is done."""
    while (index := claims.next(number)) is not None:
        paths = [files[i] for i in units[index]]
        try:
            results.put((index, "ok", verify_unit(paths, options)))
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            results.put((index, "unreadable", exc))
        except Exception as exc:  # the unit's reports fail, as they would in this process
            results.put((index, "ok", _failed(paths, exc)))
    results.close()
    results.join_thread()


def _start_method() -> Any:
    """How worker processes start.

    "fork" on Linux while this process runs one thread and has not imported torch: a worker
    then starts at once with the modules and compiled schemas already loaded. Otherwise
    "spawn", a fresh interpreter per worker, safe after a library that keeps threads was
    imported (fork would copy its locks).
    """
    if sys.platform.startswith("linux") and threading.active_count() == 1 and "torch" not in sys.modules:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


# --- Ray --------------------------------------------------------------------------------------


class WorkerLostError(Exception):
    """The Ray task verifying a report did not return (its worker died), after its retries."""


def _ray_unit(cwd: str, paths: list[str], options: VerifyOptions) -> list[PathResult]:
    """A Ray task: verify ``paths`` (relative to ``cwd``, this process's folder)."""
    if os.path.isdir(cwd):
        os.chdir(cwd)  # relative paths, and the paths shown, are those of the caller
    _injected_fault(paths)
    return verify_unit(paths, options)


def _injected_fault(paths: list[str]) -> None:
    """Kill this worker when a test asks to (``$MIBSPEC_RAY_FAULT_DIR``).

    For a report ``p`` of the unit, a file ``exit-<h>`` in that folder (``h``: the first 16
    hex digits of the SHA-256 of ``p``'s absolute path) holding a number n makes the first
    n attempts exit at once; each attempt appends a byte to ``attempts-<h>``.
    """
    folder = os.environ.get(_FAULT_ENV)
    if not folder:
        return
    for path in paths:
        name = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
        trigger = Path(folder) / f"exit-{name}"
        if trigger.is_file():
            attempts = Path(folder) / f"attempts-{name}"
            with attempts.open("ab") as handle:
                handle.write(b".")
            if attempts.stat().st_size <= int(trigger.read_text().strip() or "0"):
                os._exit(70)


def task_gpus(options: Any) -> int:
    """GPUs a Ray task asks for: one when the run's device is CUDA (``cuda``, ``cuda:N``)."""
    device = str(getattr(options, "device", None) or "")
    return 1 if device == "cuda" or device.startswith("cuda:") else 0


def _run_ray(
    files: list[str],
    units: list[list[int]],
    options: VerifyOptions,
    address: str | None,
    keep: Callable[[list[int], list[PathResult]], None],
    progress: Any,
) -> None:
    import ray

    joined = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
        joined = True
    try:
        task = ray.remote(max_retries=RAY_MAX_RETRIES, retry_exceptions=False, num_gpus=task_gpus(options))(
            _ray_unit
        )
        cwd = os.getcwd()
        refs = {
            task.remote(cwd, [files[i] for i in unit], options): index for index, unit in enumerate(units)
        }
        if progress is not None:
            progress.start(f"verifying {len(files)} reports in {len(units)} Ray tasks", len(files))
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                index = refs.pop(ref)
                paths = [files[i] for i in units[index]]
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # raised inside the task
                    cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                    if isinstance(cause, FileNotFoundError | IsADirectoryError | PermissionError):
                        raise cause from None
                    out = _failed(paths, cause)
                except ray.exceptions.RayError as exc:  # the worker died on every attempt
                    lost = WorkerLostError(
                        f"the Ray task verifying it failed {RAY_MAX_RETRIES + 1} times ({type(exc).__name__})"
                    )
                    out = _failed(paths, lost)
                keep(units[index], out)
                if progress is not None:
                    progress.advance(len(paths))
    finally:
        if joined:
            ray.shutdown()
