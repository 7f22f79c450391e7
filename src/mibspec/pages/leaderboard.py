"""``mibspec leaderboard``: a MIB-style circuit-track table from a folder of reports.

Every report found below the folder (``report.json``, ``*.report.json``) is verified on
its own (with the documents it references); only conformant circuit reports enter the
table. The rest are listed below it with their codes.

The tables follow the MIB leaderboard's circuit tabs: one for CPR and one for CMD per
profile, methods as rows (sorted by name), one column per task × model cell (sorted), then

* **Average**: the arithmetic mean of the row's cells
  (:func:`mibspec.metrics.circuit.leaderboard_average`);
* **Score**: the mean over the row's cells of σ(cell)
  (:func:`mibspec.metrics.circuit.leaderboard_score`); on the CMD tab a
  lower Score is better, as in MIB.

Both are taken over the cells a method has; a row missing cells says how many it has.

Reports are never ranked across profiles: a profile fixes conventions and what is checked
(``mib-2025`` checks no circuit size against k and takes f(1) as 1, so the full circuit at
every k scores CPR 0.999 there), so each profile a tabulated report was verified under gets
tables of its own, headed by the profile and what it does not check (SPEC.md C-9, V-5).

A report whose only error is A111 (a hub model without a revision, as every report
imported from MIB's published results is unless ``--model-revision`` pins it) is
tabulated in a row of its own, its method marked ``(unpinned)``: the numbers are MIB's,
but which weights produced them is not recorded.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mibspec.core.display import visible
from mibspec.documents import Leaderboard as LeaderboardDocument
from mibspec.documents import document_bytes
from mibspec.documents.kinds import LeaderboardCell, LeaderboardRow, LeaderboardTable
from mibspec.validator import VerificationResult

__all__ = [
    "Cell",
    "Entry",
    "Leaderboard",
    "Rejected",
    "build_leaderboard",
    "render_html",
    "render_json",
    "render_markdown",
]

Cell = tuple[str, str]  # (task, model)


@dataclass(frozen=True)
class Entry:
    """A conformant circuit report: one method's CPR and CMD on one task × model cell."""

    path: str
    method: str
    task: str
    model: str
    cpr: float
    cmd: float
    #: The report passes but for A111: its model is not pinned to a revision.
    unpinned: bool = False
    #: The profile the report was verified under.
    profile: str = "default"

    @property
    def cell(self) -> Cell:
        return (self.task, self.model)


@dataclass(frozen=True)
class Rejected:
    """A report left out of the table: its error codes, or why it was not tabulated."""

    path: str
    codes: tuple[str, ...]
    reason: str


@dataclass
class Leaderboard:
    entries: list[Entry] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    not_tabulated: list[Rejected] = field(default_factory=list)
    #: Per profile of a tabulated report: what it does not check (``NotChecked.what``).
    not_checked: dict[str, list[str]] = field(default_factory=dict)

    @property
    def profiles(self) -> list[str]:
        """The profiles of the tabulated reports, each ranked in tables of its own."""
        return sorted({entry.profile for entry in self.entries})

    def _of(self, profile: str | None) -> list[Entry]:
        return [e for e in self.entries if profile is None or e.profile == profile]

    def cells_of(self, profile: str | None = None) -> list[Cell]:
        return sorted({entry.cell for entry in self._of(profile)})

    def methods_of(self, profile: str | None = None) -> list[str]:
        return sorted({entry.method for entry in self._of(profile)})

    @property
    def cells(self) -> list[Cell]:
        return self.cells_of()

    @property
    def methods(self) -> list[str]:
        return self.methods_of()

    def value(self, method: str, cell: Cell, metric: str, profile: str | None = None) -> float | None:
        """The method's value in the cell; with several profiles, ``profile`` says whose."""
        for entry in self._of(profile):
            if entry.method == method and entry.cell == cell:
                return float(getattr(entry, metric))
        return None

    def row(self, method: str, metric: str, profile: str) -> list[float | None]:
        return [self.value(method, cell, metric, profile) for cell in self.cells_of(profile)]


def _model_label(model: object) -> str:
    if not isinstance(model, dict):
        return "?"
    if model.get("source") == "hub":
        return str(model.get("id"))
    if model.get("source") == "local":
        return os.path.basename(os.path.normpath(str(model.get("path"))))
    return str(model.get("architecture"))


def _method_label(method: object) -> str:
    if not isinstance(method, dict):
        return "?"
    name, version = str(method.get("name")), method.get("version")
    return f"{name} {version}" if version else name


def _error_codes(result: VerificationResult) -> tuple[str, ...]:
    codes = {finding.code for doc in result.documents for finding in doc.errors}
    return tuple(sorted(codes))


def _failed_stages(result: VerificationResult) -> str:
    failed = [
        f"{stage.value} stage of {doc.path}: {detail or status.value}"
        for doc in result.documents
        for stage, (status, detail) in doc.stages.items()
        if status.value == "failed"
    ]
    return "; ".join(failed) or "not conformant"


def build_leaderboard(
    directory: str | os.PathLike[str],
    *,
    recompute: bool = False,
    profile: str | None = None,
    model_roots: Iterable[str | os.PathLike[str]] = (),
) -> Leaderboard:
    """Verify every report below ``directory`` and collect the conformant circuit reports.

    Args:
        directory: folder searched for ``report.json`` / ``*.report.json``.
        recompute: also run the recompute stage (default: parse, schema and rules only).
        profile: verify under this profile instead of the declared ones.
        model_roots: extra folders in which local model paths are looked up.

    Raises:
        FileNotFoundError: ``directory`` does not exist or holds no report.
    """
    from mibspec.verification.api import collect_paths
    from mibspec.verification.api import verify as run_verify

    board = Leaderboard()
    seen: dict[tuple[str, str, Cell], str] = {}
    for path in collect_paths([directory]):
        result = run_verify(path, recompute=recompute, profile=profile, model_roots=model_roots)
        main = result.documents[0]
        unpinned = not result.valid and _error_codes(result) == ("A111",) and main.kind == "report"
        if not result.valid and not unpinned:
            board.rejected.append(Rejected(path, _error_codes(result), _failed_stages(result)))
            continue
        if main.kind != "report":
            board.not_tabulated.append(Rejected(path, (), f"a {main.kind} document, not a report"))
            continue
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("track") != "circuit":
            board.not_tabulated.append(
                Rejected(path, (), f"a {data.get('track')} report; the leaderboard covers the circuit track")
            )
            continue
        entry = Entry(
            path=path,
            method=_method_label(data["method"]) + (" (unpinned)" if unpinned else ""),
            task=str(data["task"]["name"]),
            model=_model_label(data["model"]),
            cpr=float(data["claims"]["cpr"]["value"]),
            cmd=float(data["claims"]["cmd"]["value"]),
            unpinned=unpinned,
            profile=main.profile or "default",
        )
        key = (entry.profile, entry.method, entry.cell)
        if key in seen:
            board.not_tabulated.append(
                Rejected(
                    path,
                    (),
                    f"a second report for {entry.method} on {entry.task} × {entry.model} under profile "
                    f"{entry.profile} (the table shows {seen[key]})",
                )
            )
            continue
        seen[key] = path
        board.entries.append(entry)
        board.not_checked[entry.profile] = [item.what for item in main.not_checked or ()]
    return board


# --------------------------------------------------------------------------- rendering


def _aggregates(values: list[float | None]) -> tuple[float | None, float | None]:
    from mibspec.metrics.circuit import leaderboard_average, leaderboard_score

    present = [v for v in values if v is not None]
    if not present:
        return None, None
    return leaderboard_average(present), leaderboard_score(present)


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


_METRICS: tuple[tuple[Literal["cpr", "cmd"], str], ...] = (
    ("cpr", "CPR (higher is better)"),
    ("cmd", "CMD (lower is better; so is its Score)"),
)


def _table_rows(board: Leaderboard, metric: str, profile: str) -> list[list[str]]:
    rows = []
    n_cells = len(board.cells_of(profile))
    for method in board.methods_of(profile):
        values = board.row(method, metric, profile)
        average, score = _aggregates(values)
        present = sum(v is not None for v in values)
        label = method if present == n_cells else f"{method} ({present}/{n_cells} cells)"
        rows.append([label, *(_fmt(v) for v in values), _fmt(average), _fmt(score)])
    return rows


def _headers(board: Leaderboard, profile: str) -> list[str]:
    return ["Method", *(f"{task} / {model}" for task, model in board.cells_of(profile)), "Average", "Score"]


def _profile_note(board: Leaderboard, profile: str) -> str:
    """Under which profile a table's reports were verified, and what it does not check."""
    gaps = board.not_checked.get(profile) or []
    unchecked = f" It does not check: {'; '.join(gaps)}." if gaps else " It leaves no check out."
    return f"Reports verified under profile {profile}, ranked only against each other.{unchecked}"


#: Markdown-significant ASCII punctuation, backslash-escaped (CommonMark §2.4); ``<``, ``>``
#: and ``&`` become entities so that no HTML tag, autolink or entity can be written.
_MD_ESCAPES = {ord(c): "\\" + c for c in "\\`*_[]|~#!"} | {
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord("&"): "&amp;",
}


def _md_escape(text: str) -> str:
    """Text shown as itself in Markdown, also inside a table cell (``|`` escaped)."""
    return visible(text).translate(_MD_ESCAPES)


def _md_code(text: str) -> str:
    """A code span showing ``text`` as itself: the fence is one backtick longer than the
    longest run of backticks inside (CommonMark §6.1)."""
    shown = visible(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def render_json(board: Leaderboard) -> str:
    """The leaderboard as a ``leaderboard`` document (SPEC.md DK-7), which ``mibspec verify``
    checks: each row lists the cells the method has, with the Average and Score over them.
    Rejected and untabulated reports are listed in ``description``."""
    tables = []
    for profile in board.profiles or ["default"]:
        for metric, _ in _METRICS:
            rows = []
            for method in board.methods_of(profile):
                present = [
                    (cell, value)
                    for cell, value in zip(
                        board.cells_of(profile), board.row(method, metric, profile), strict=True
                    )
                    if value is not None
                ]
                cells = [
                    LeaderboardCell(task=task, model=model, value=value) for (task, model), value in present
                ]
                average, score = _aggregates([value for _, value in present])
                if average is None or score is None:  # pragma: no cover - a method has a cell per metric
                    continue
                rows.append(LeaderboardRow(method=method, cells=cells, average=average, score=score))
            tables.append(_table(metric, profile, rows))
    left_out = [f"{item.path} ({', '.join(item.codes) or item.reason})" for item in board.rejected]
    left_out += [f"{item.path} ({item.reason})" for item in board.not_tabulated]
    notes = [
        f"{profile} does not check {'; '.join(board.not_checked[profile])}"
        for profile in board.profiles
        if board.not_checked.get(profile)
    ]
    document = LeaderboardDocument(
        title="Circuit localization leaderboard",
        description=(
            f"{len(board.entries)} conformant circuit report(s) tabulated, in tables per profile"
            + (f" ({'; '.join(notes)})" if notes else "")
            + (f"; left out: {'; '.join(left_out)}" if left_out else "")
        ),
        tables=tables,
    )
    return document_bytes(document).decode("utf-8")


def _table(metric: Literal["cpr", "cmd"], profile: str, rows: list[LeaderboardRow]) -> LeaderboardTable:
    if not rows:
        # No conformant circuit report: the table is still written, without rows (which the
        # schema refuses, so that `mibspec verify` says the leaderboard is empty).
        return LeaderboardTable.model_construct(metric=metric, profile=profile, rows=[])
    return LeaderboardTable(metric=metric, profile=profile, rows=rows)


def render_markdown(board: Leaderboard) -> str:
    """The leaderboard as GitHub-flavoured Markdown."""
    lines = ["# Circuit localization leaderboard", ""]
    if board.entries:
        for profile in board.profiles:
            lines += [f"## Profile {_md_escape(profile)}", "", _md_escape(_profile_note(board, profile)), ""]
            for metric, title in _METRICS:
                headers = _headers(board, profile)
                lines += [f"### {title}, profile {_md_escape(profile)}", ""]
                lines.append("| " + " | ".join(_md_escape(h) for h in headers) + " |")
                lines.append("|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|")
                for row in _table_rows(board, metric, profile):
                    lines.append("| " + " | ".join(_md_escape(c) for c in row) + " |")
                lines.append("")
        lines += [
            "Average: mean of the row's cells. "
            "Score: mean over the row's cells of sigmoid(cell) (MIB App. D.6).",
            "",
        ]
    else:
        lines += ["No conformant circuit report was found.", ""]
    lines += _md_list("Rejected reports", board.rejected, with_codes=True)
    lines += _md_list("Not tabulated", board.not_tabulated, with_codes=False)
    return "\n".join(lines).rstrip("\n") + "\n"


def _md_list(title: str, items: list[Rejected], *, with_codes: bool) -> list[str]:
    if not items:
        return []
    lines = [f"## {title}", ""]
    for item in items:
        codes = f" — {', '.join(item.codes)}" if with_codes and item.codes else ""
        lines.append(f"- {_md_code(item.path)}{_md_escape(codes)}: {_md_escape(item.reason)}")
    return [*lines, ""]


def render_html(board: Leaderboard) -> str:
    """The leaderboard as one self-contained HTML page."""

    def e(text: str) -> str:
        return html.escape(visible(text))

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>Circuit localization leaderboard</title>',
        "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:80em;padding:0 1em}"
        "table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ddd;padding:.25em .6em}"
        "th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}</style>",
        "</head><body><h1>Circuit localization leaderboard</h1>",
    ]
    if board.entries:
        for profile in board.profiles:
            parts.append(f"<h2>Profile {e(profile)}</h2><p>{e(_profile_note(board, profile))}</p>")
            for metric, title in _METRICS:
                parts.append(f"<h3>{e(title)}, profile {e(profile)}</h3><table><thead><tr>")
                parts += [f"<th>{e(h)}</th>" for h in _headers(board, profile)]
                parts.append("</tr></thead><tbody>")
                for row in _table_rows(board, metric, profile):
                    cells = [f"<td>{e(row[0])}</td>", *(f'<td class="num">{e(c)}</td>' for c in row[1:])]
                    parts.append("<tr>" + "".join(cells) + "</tr>")
                parts.append("</tbody></table>")
        parts.append(
            "<p>Average: mean of the row's cells. Score: mean over the row's cells of sigmoid(cell) "
            "(MIB App. D.6).</p>"
        )
    else:
        parts.append("<p>No conformant circuit report was found.</p>")
    for title, items, with_codes in (
        ("Rejected reports", board.rejected, True),
        ("Not tabulated", board.not_tabulated, False),
    ):
        if not items:
            continue
        parts.append(f"<h2>{e(title)}</h2><ul>")
        for item in items:
            codes = f" — {', '.join(item.codes)}" if with_codes and item.codes else ""
            parts.append(f"<li><code>{e(item.path)}</code>{e(codes)}: {e(item.reason)}</li>")
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
