"""The Python API behind the command line: verify documents, collect report paths, resolve
rule codes, hash the schema bundle."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mibspec.core.spec import SPEC_VERSION, spec_dir
from mibspec.core.version import __version__
from mibspec.validator import VerificationResult, VerifyOptions, verify_paths
from mibspec.verification.request import (
    CheckedRequest,
    api_docs,
    api_signature,
    check_request,
    request_from_keywords,
)

__all__ = ["SPEC_VERSION", "collect_paths", "resolve_codes", "schema_bundle_hash", "verify", "verify_checked"]

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


def verify(*paths: str | os.PathLike[str], **options: Any) -> VerificationResult:
    """Verify documents (and every document they reference), as ``mibspec verify`` does.

    Its keywords are the fields of :class:`~mibspec.verification.request.VerificationRequest`
    that the API takes (listed below, from their declarations), checked once by
    :func:`~mibspec.verification.request.check_request`.

    Reports are verified in groups that share their forward passes (model, dtype,
    dataset, counterfactual, ablation, ...): each group loads its model once and computes
    each batch's clean and ablation runs once (see :mod:`mibspec.verification.grouping`); the result
    is the same as verifying each report alone. With ``jobs`` above 1 the result is the same as
    with one: documents in input order, each listed once.

    Args:
        paths: document files, or folders searched for ``report.json`` / ``*.report.json``.
        {keywords}

    Returns:
        The verification result; ``result.valid`` is the verdict.

    Raises:
        FileNotFoundError: a path does not exist (a usage error, not a finding).
        TypeError: a keyword ``verify`` does not take.
        RequestError: a ``ValueError`` naming the keyword: ``jobs`` below 1, an unknown
            executor, an address without the ``ray`` executor, the ``ray`` executor without
            the ``ray`` extra, a malformed ``batch_size``, a device that is malformed or not
            present, a code prefix that matches no catalogue code.
    """
    return verify_checked(check_request(request_from_keywords(paths, options)))


verify.__signature__ = api_signature()  # type: ignore[attr-defined]  # the declared keywords
verify.__doc__ = (verify.__doc__ or "").replace("{keywords}", api_docs(" " * 8))


def verify_checked(checked: CheckedRequest) -> VerificationResult:
    """Verify as a checked request says (its device already resolved: it is not resolved again)."""
    request = checked.request
    options = VerifyOptions(
        recompute=request.recompute,
        skipped_because=request.skipped_because,
        profile=request.profile,
        limits=request.limits,
        model_roots=tuple(Path(root) for root in request.model_roots),
        progress=request.progress if request.jobs == 1 else None,
        select=checked.select,
        ignore=checked.ignore,
        device=checked.device,
        batch_size=checked.batch_size,
        trust_hash_cache=request.trust_hash_cache,
    )
    files = list(checked.files)
    result = _verify_files(files, options, request.jobs, request.executor, request.address, request.progress)
    return _drop_unreported(result, options)


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
