"""HTML building blocks of ``mibspec html``'s page: escaped text, numbers, tables and the
claim catalogue's labels."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from mibspec.core.claims import claim_catalogue
from mibspec.core.display import visible

__all__ = ["claim_label", "escape", "html_table", "number"]


def escape(value: Any) -> str:
    """``value`` as text, without control characters, escaped for HTML."""
    return html.escape(visible(str(value)), quote=True)


def number(value: Any) -> str:
    """A number for a table cell: integers as written, floats to 6 significant digits."""
    if isinstance(value, bool) or value is None:
        return escape("–" if value is None else value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return escape(value)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[bool] = ()) -> str:
    """A table; ``rows`` hold escaped HTML, except the cells ``numeric`` marks (numbers)."""
    out = ["<table><thead><tr>", *(f"<th>{escape(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            if i < len(numeric) and numeric[i]:
                out.append(f'<td class="num">{number(cell)}</td>')
            else:
                out.append(f"<td>{cell}</td>")  # already escaped by the caller
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def claim_label(track: str, pointer: str) -> str:
    """The claim catalogue's label of the number at ``pointer`` of a ``track`` report."""
    row = claim_catalogue().row(track, pointer)
    return pointer if row is None else row.label
