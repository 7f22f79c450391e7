"""``mibspec verify``: strict parsing, schema, rules, then recomputation of claims.

Layered as the command line is throughout: click parses the options, declared once as the
fields of :class:`~mibspec.verification.request.VerificationRequest` (:mod:`mibspec.cli._request`
derives them), into a request; :func:`run` checks it once (usage errors exit 2), verifies,
writes the report and the receipt, and returns the exit code. The validator, the reporters and
the receipt writer are imported when :func:`run` needs them, so building this command (and
``mibspec verify --help``) stays light.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mibspec.cli._request import request_from_cli, with_verify_parameters
from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, exit_on_internal_errors, usage_error
from mibspec.verification.request import CheckedRequest, RequestError, VerificationRequest, check_request

if TYPE_CHECKING:
    from mibspec.validator import VerificationResult

__all__ = ["run", "verify_command"]


def run(request: VerificationRequest) -> int:
    """Verify as ``request`` says, write the report (and receipt); return the exit code.

    A usage error (exit 2) or a document mibspec itself failed on (exit 3) exits instead.
    """
    checked = _check(request)
    result = _verify(checked)
    _write_report(request, result)
    if request.receipt is not None:
        _write_receipt(checked, result, request.receipt)
    exit_on_internal_errors(result)
    warnings = sum(len(doc.warnings) for doc in result.documents)
    if result.valid and request.error_on_warning and warnings:
        click.echo(f"mibspec: failing on {warnings} warning(s) (--error-on-warning)", err=True)
        return EXIT_FINDINGS
    return EXIT_OK if result.valid else EXIT_FINDINGS


def _check(request: VerificationRequest) -> CheckedRequest:
    """Every check made before verifying, once (:func:`check_request`); a usage error exits 2."""
    try:
        return check_request(request, surface="cli")
    except RequestError as exc:
        usage_error(exc.usage())
    except FileNotFoundError as exc:
        usage_error(str(exc))


def _verify(checked: CheckedRequest) -> VerificationResult:
    """Run the verification, with a progress bar on a terminal (not with -j processes)."""
    import dataclasses

    from mibspec.verification.api import verify_checked
    from mibspec.verification.progress import TerminalProgress

    request = checked.request
    quiet = request.jobs > 1 and request.executor == "process"
    try:
        with TerminalProgress(enabled=False if quiet else None) as progress:
            shown = dataclasses.replace(request, progress=progress)
            return verify_checked(dataclasses.replace(checked, request=shown))
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        usage_error(str(exc))


def _write_report(request: VerificationRequest, result: VerificationResult) -> None:
    """Render the result in the chosen format on stdout or, atomically, into --output."""
    from mibspec.verification.output_formats import REPORTERS

    render = REPORTERS[request.output_format]
    if request.output is None:
        render(result, sys.stdout)
        return
    import io

    from mibspec.core.outputs import write_atomic

    buffer = io.StringIO()
    render(result, buffer)
    write_atomic(request.output, buffer.getvalue(), follow_links=request.follow_output_links)


def _write_receipt(checked: CheckedRequest, result: VerificationResult, receipt: Path) -> None:
    from mibspec.verification.receipt import ReceiptError, write_receipt

    request = checked.request
    options = {
        "recompute": request.recompute,
        "profile": request.profile,
        "select": list(checked.select),
        "ignore": list(checked.ignore),
        "error_on_warning": request.error_on_warning,
        "max_bytes": request.limits.max_bytes,
        "batch_size": checked.batch_size,
        "device": checked.device if request.recompute else None,
    }
    try:
        write_receipt(result, receipt, options=options, follow_links=request.follow_output_links)
    except ReceiptError as exc:  # a referenced file outside the receipt's folder
        usage_error(str(exc))


@with_verify_parameters
def verify_command(**values: Any) -> None:
    """Check documents: strict parsing, schema, rules, then recomputation of claims."""
    raise click.exceptions.Exit(run(request_from_cli(values)))
