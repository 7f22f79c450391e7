"""The Python API behind the command line: verify documents, collect report paths, resolve
rule codes and devices, hash the schema bundle."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mibspec.core.spec import SPEC_VERSION, spec_dir
from mibspec.core.version import __version__
from mibspec.validator import (
    DEFAULT_LIMITS,
    RECOMPUTE_NOT_REQUESTED,
    Limits,
    VerificationResult,
    VerifyOptions,
    verify_paths,
)

__all__ = ["SPEC_VERSION", "collect_paths", "resolve_codes", "run_device", "schema_bundle_hash", "verify"]

REPORT_PATTERNS = ("report.json", "*.report.json")


def collect_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Expand directories to the report files below them (``report.json``, ``*.report.json``).

    Raises:
        FileNotFoundError: a path does not exist, or a directory holds no report.
    """
    found: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            reports = sorted({str(p) for pattern in REPORT_PATTERNS for p in path.rglob(pattern)})
            if not reports:
                raise FileNotFoundError(f"{raw}: no report.json or *.report.json below this folder")
            found.extend(reports)
        elif path.exists():
            found.append(str(raw))
        else:
            raise FileNotFoundError(f"{raw}: no such file or folder")
    return found


def verify(
    *paths: str | os.PathLike[str],
    recompute: bool = True,
    skipped_because: str = RECOMPUTE_NOT_REQUESTED,
    profile: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    model_roots: Iterable[str | os.PathLike[str]] = (),
    progress: Any = None,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    jobs: int = 1,
    device: str = "cpu",
    batch_size: int | str | None = None,
    executor: str = "process",
    address: str | None = None,
    trust_hash_cache: bool = False,
) -> VerificationResult:
    """Verify documents (and every document they reference), as ``mibspec verify`` does.

    Args:
        paths: document files, or folders searched for ``report.json`` / ``*.report.json``.
        recompute: recompute claims from the declared artifacts (needs the ``recompute`` extra).
        skipped_because: without ``recompute``, why the recompute stage was skipped, as its
            detail says (default "not requested").
        profile: check under this profile instead of the one each report declares.
        limits: parse limits per document.
        model_roots: extra folders in which local model paths are looked up.
        progress: an object with ``start(description, total)`` and ``advance(steps=1)``
            that the recompute stage reports to (default: none; unused when ``jobs > 1``).
        select: report only findings whose code starts with one of these prefixes.
        ignore: drop findings whose code starts with one of these prefixes. Filtered
            rules-stage codes do not fail the rules stage (like a profile's ``off``);
            findings of the other stages are only dropped from the result, and a stage
            that failed still fails its document. See :func:`resolve_codes`.
        jobs: verify the report files in this many worker processes. The result is the
            same as with ``jobs=1``: documents in input order, each listed once.
        device: where recomputation runs: ``cpu`` (default), ``cuda``, ``cuda:N``, ``mps``
            or ``auto`` (CUDA if present, else MPS, else the CPU).
        batch_size: examples per forward pass of recomputation: ``None`` (default: the
            batch size each report declares), a positive integer, or ``"auto"`` (chosen
            from the device's free memory and halved when it runs out of memory). Results
            depend on it by floating-point reassociation at most (engine.md ME-10).
        executor: ``process`` (``jobs`` processes on this machine) or ``ray`` (one Ray
            task per group of reports; needs the ``ray`` extra).
        address: the Ray cluster to join (``ray`` only; default: a local cluster).
        trust_hash_cache: take unchanged model files' digests from the file-hash cache
            instead of hashing the bytes read, each reported (R111); off by default
            (``mibspec.reference_impl.recompute._hash_cache`` says what it trusts).

    Reports are verified in groups that share their forward passes (model, dtype,
    dataset, counterfactual, ablation, ...): each group loads its model once and computes
    each batch's clean and ablation runs once (see :mod:`mibspec.verification.grouping`); the result
    is the same as verifying each report alone.

    Returns:
        The verification result; ``result.valid`` is the verdict.

    Raises:
        FileNotFoundError: a path does not exist (a usage error, not a finding).
        ValueError: ``jobs`` is below 1, an unknown executor, an address without the
            ``ray`` executor, a code prefix matches no catalogue code, a malformed
            ``batch_size``, or a device that is malformed or not present (``DeviceError``,
            a ``ValueError``).
    """
    device, batch_size = _checked_run(jobs, device, batch_size, recompute, executor, address)
    options = VerifyOptions(
        recompute=recompute,
        skipped_because=skipped_because,
        profile=profile,
        limits=limits,
        model_roots=tuple(Path(root) for root in model_roots),
        progress=progress if jobs == 1 else None,
        select=resolve_codes(select, "select"),
        ignore=resolve_codes(ignore, "ignore"),
        device=device,
        batch_size=batch_size,
        trust_hash_cache=trust_hash_cache,
    )
    result = _verify_files(collect_paths(paths), options, jobs, executor, address, progress)
    return _drop_unreported(result, options)


def _checked_run(
    jobs: int, device: str, batch_size: int | str | None, recompute: bool, executor: str, address: str | None
) -> tuple[str, int | str | None]:
    """Check how :func:`verify` is to run (in the order its Raises lists); the device and batch
    size it runs with."""
    if jobs < 1:
        raise ValueError(f"jobs: expected an integer >= 1, got {jobs!r}")
    device, batch_size = run_device(device, batch_size, recompute)
    if executor != "process":  # the default is known without loading the grouping module
        from mibspec.verification.grouping import EXECUTORS

        if executor not in EXECUTORS:
            raise ValueError(f"executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        raise ValueError("address: only the ray executor joins a cluster")
    return device, batch_size


def _verify_files(
    files: list[str], options: VerifyOptions, jobs: int, executor: str, address: str | None, progress: Any
) -> VerificationResult:
    """Verify ``files`` in this process, or grouped in worker processes or Ray tasks."""
    if executor != "ray" and not options.recompute and (jobs == 1 or len(files) == 1):
        return verify_paths(files, options)
    # Grouped verification (processes, Ray) is loaded only when it runs: a plain
    # `verify --no-recompute` starts without it.
    from mibspec.verification.grouping import verify_many

    if executor == "ray":
        return verify_many(files, options, jobs, executor="ray", address=address, progress=progress)
    return verify_many(files, options, jobs)


def _drop_unreported(result: VerificationResult, options: VerifyOptions) -> VerificationResult:
    """``result`` without the findings that ``select`` / ``ignore`` leave out."""
    if options.select or options.ignore:
        for doc in result.documents:
            doc.findings = [f for f in doc.findings if options.reports(f.code)]
    return result


def run_device(
    device: str, batch_size: int | str | None, recompute: bool = True
) -> tuple[str, int | str | None]:
    """The device and batch size a run uses, checked: the device resolved when recomputation
    runs (and torch is installed: without it the recompute stage says so, R101), else only
    checked for its form.

    Raises:
        ValueError: a malformed batch size; ``DeviceError`` (a ``ValueError``): a malformed
            device, or one that is not present.
    """
    from mibspec.reference_impl.devices import parse_batch_size, parse_device, resolve_device

    size = None if batch_size is None else parse_batch_size(batch_size)
    name = parse_device(device)
    if recompute and importlib.util.find_spec("torch") is not None:
        name = resolve_device(name)
    return name, size


def resolve_codes(codes: Iterable[str], argument: str = "codes") -> tuple[str, ...]:
    """Normalise code prefixes for ``select`` / ``ignore``.

    Each item is a code (``A103``), a prefix of codes (``K1``, ``K``) or a rule symbol
    (``unpinned-model``); items may also be comma-separated (``"A103,K1"``). Prefixes are
    upper-cased; a symbol becomes its code.

    Raises:
        ValueError: an item matches no code of the catalogue.
    """
    from mibspec.validator import catalogue

    cat = catalogue(SPEC_VERSION)
    resolved: list[str] = []
    for raw in codes:
        for item in filter(None, (part.strip() for part in raw.split(","))):
            if item in cat.by_symbol:
                resolved.append(cat.by_symbol[item].code)
                continue
            prefix = item.upper()
            if not any(rule.code.startswith(prefix) for rule in cat.rules):
                raise ValueError(
                    f"{argument}: expected a rule code, code prefix or symbol from `mibspec rules`, "
                    f"got {item!r}"
                )
            resolved.append(prefix)
    return tuple(dict.fromkeys(resolved))


def schema_bundle_hash(version: str = SPEC_VERSION) -> str:
    """SHA-256 over the spec's schema files (names and bytes, in name order): what a citation pins."""
    digest = hashlib.sha256()
    for path in sorted((spec_dir(version) / "schemas").glob("*.schema.json")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def tool_version() -> str:
    return __version__
