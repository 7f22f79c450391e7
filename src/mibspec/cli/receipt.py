"""``mibspec verify-receipt``: re-hash the files a verification receipt lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, OutputFormat, usage_error
from mibspec.core.display import visible

__all__ = ["verify_receipt_command"]


def verify_receipt_command(
    receipt: Annotated[Path, Argument(help="A receipt written by `mibspec verify --receipt`.")],
    output_format: Annotated[
        OutputFormat, Option("--format", "-f", help="Output format.")
    ] = OutputFormat.text,
) -> None:
    """Re-hash the files a receipt lists (no recomputation); exit 1 listing what changed."""
    from mibspec.verification.receipt import ReceiptError, check_receipt

    try:
        check = check_receipt(receipt)
    except ReceiptError as exc:
        usage_error(str(exc))
        return
    if output_format is OutputFormat.json:
        click.echo(json.dumps(check.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in check.lines():
            click.echo(visible(line))
    raise click.exceptions.Exit(EXIT_OK if check.unchanged else EXIT_FINDINGS)
