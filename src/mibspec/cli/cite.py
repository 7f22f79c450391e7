"""``mibspec cite``: how to cite the spec version and its schema bundle."""

from __future__ import annotations

import enum
from typing import Annotated

import click

from mibspec.cli._options import Option

__all__ = ["cite_command"]


class CiteFormat(str, enum.Enum):
    bibtex = "bibtex"
    text = "text"
    cff = "cff"


def cite_command(
    output_format: Annotated[
        CiteFormat, Option("--format", "-f", help="Citation format.")
    ] = CiteFormat.bibtex,
) -> None:
    """How to cite the spec version and the exact schema bundle a report was checked with."""
    from mibspec.spec_tools.citation import citation_bibtex, citation_cff, citation_text

    render = {
        CiteFormat.bibtex: citation_bibtex,
        CiteFormat.cff: citation_cff,
        CiteFormat.text: citation_text,
    }
    click.echo(render[output_format](), nl=False)
