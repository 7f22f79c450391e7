"""``mibspec leaderboard``: conformant circuit reports in MIB-style tables, the rest listed with codes."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mibspec.pages.leaderboard import build_leaderboard, render_markdown

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


def _trapezoid(ks: list[float], values: list[float]) -> float:
    return sum((ks[i + 1] - ks[i]) * (values[i] + values[i + 1]) / 2 for i in range(len(ks) - 1))


def _circuit_report(
    folder: Path, *, method: str, task: str, model: str, scale: float = 1.0, version: str | None = None
) -> tuple[float, float]:
    """A copy of the circuit example under another method/task/model, with f scaled by ``scale``.

    CPR and CMD are set to the trapezoids of the scaled curves so the report stays consistent;
    returns them (the values the table must show).
    """
    shutil.copytree(EXAMPLES / "circuit", folder)
    path = folder / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    report["method"]["name"] = method
    if version is None:
        report["method"].pop("version", None)
    else:
        report["method"]["version"] = version
    report["task"]["name"] = task
    report["model"]["id"] = model
    for curve in report["claims"]["curves"]:
        for point in curve["points"]:
            point["faithfulness"] = round(point["faithfulness"] * scale, 6)
    curves = {c["ranking"]: c["points"] for c in report["claims"]["curves"]}
    signed, absolute = (
        curves[report["settings"]["ranking"]["cpr"]],
        curves[report["settings"]["ranking"]["cmd"]],
    )
    cpr = _trapezoid([p["k"] for p in signed], [p["faithfulness"] for p in signed])
    cmd = _trapezoid([p["k"] for p in absolute], [abs(1 - p["faithfulness"]) for p in absolute])
    report["claims"]["cpr"]["value"] = cpr
    report["claims"]["cmd"]["value"] = cmd
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return cpr, cmd


def _sigmoid_mean(values: list[float]) -> float:
    return sum(1.0 / (1.0 + math.exp(-v)) for v in values) / len(values)


@pytest.fixture
def results(tmp_path: Path) -> tuple[Path, dict[tuple[str, str], tuple[float, float]]]:
    root = tmp_path / "results"
    root.mkdir()
    cells = {
        ("EAP-IG", "ioi"): _circuit_report(root / "eap-ioi", method="EAP-IG", task="ioi", model="org/gpt2"),
        ("EAP-IG", "mcqa"): _circuit_report(
            root / "eap-mcqa", method="EAP-IG", task="mcqa", model="org/gpt2", scale=0.9
        ),
        ("Random", "ioi"): _circuit_report(
            root / "rnd-ioi", method="Random", task="ioi", model="org/gpt2", scale=0.5
        ),
    }
    # Rejected: a CPR that does not follow from its curve (C101), a sidecar whose hash is off (A103).
    _circuit_report(root / "bad-cpr", method="Broken", task="ioi", model="org/gpt2")
    bad = json.loads((root / "bad-cpr" / "report.json").read_text(encoding="utf-8"))
    bad["claims"]["cpr"]["value"] += 0.1
    (root / "bad-cpr" / "report.json").write_text(json.dumps(bad), encoding="utf-8")
    _circuit_report(root / "bad-hash", method="Tampered", task="mcqa", model="org/gpt2")
    sidecar = root / "bad-hash" / "circuit.safetensors"
    raw = bytearray(sidecar.read_bytes())
    raw[-1] ^= 0x01
    sidecar.write_bytes(bytes(raw))
    # Conformant but not circuit-track: listed, not tabulated.
    shutil.copytree(EXAMPLES / "causal_bench", root / "bench")
    return root, cells


def test_table_holds_the_conformant_circuit_reports(results: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    root, cells = results
    board = build_leaderboard(root)
    assert board.methods == ["EAP-IG", "Random"]
    assert board.cells == [("ioi", "org/gpt2"), ("mcqa", "org/gpt2")]
    for (method, task), (cpr, cmd) in cells.items():
        assert board.value(method, (task, "org/gpt2"), "cpr") == pytest.approx(cpr, abs=1e-12)
        assert board.value(method, (task, "org/gpt2"), "cmd") == pytest.approx(cmd, abs=1e-12)
    assert board.value("Random", ("mcqa", "org/gpt2"), "cpr") is None
    rejected = {Path(r.path).parent.name: r.codes for r in board.rejected}
    assert rejected == {"bad-cpr": ("C101",), "bad-hash": ("A103", "A107")}
    assert [Path(r.path).parent.name for r in board.not_tabulated] == ["bench"]


def _markdown_table(text: str, title: str) -> list[list[str]]:
    block = text.split(f"## {title}", 1)[1].split("\n\n", 2)[1]
    rows = [line.strip("|").split("|") for line in block.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows if not set("".join(row)) <= set("-: ")]


@pytest.mark.slow
def test_markdown_average_and_score_follow_mib(results: tuple[Path, dict], mibspec_cli: CliRun) -> None:  # type: ignore[type-arg]
    root, cells = results
    out = root.parent / "board.md"
    result = mibspec_cli("leaderboard", str(root), "-o", str(out))
    assert result.returncode == 1  # some reports were rejected
    text = out.read_text(encoding="utf-8")
    for metric, index, title in (
        ("cpr", 0, "CPR (higher is better)"),
        ("cmd", 1, "CMD (lower is better; so is its Score)"),
    ):
        header, *rows = _markdown_table(text, title)
        assert header == ["Method", "ioi / org/gpt2", "mcqa / org/gpt2", "Average", "Score"]
        eap = [cells[("EAP-IG", "ioi")][index], cells[("EAP-IG", "mcqa")][index]]
        rnd = [cells[("Random", "ioi")][index]]
        assert rows[0] == [
            "EAP-IG",
            f"{eap[0]:.3f}",
            f"{eap[1]:.3f}",
            f"{sum(eap) / 2:.3f}",
            f"{_sigmoid_mean(eap):.3f}",
        ], metric
        assert rows[1] == [
            "Random (1/2 cells)",
            f"{rnd[0]:.3f}",
            "–",
            f"{rnd[0]:.3f}",
            f"{_sigmoid_mean(rnd):.3f}",
        ]
    rejected = text.split("## Rejected reports", 1)[1].split("##", 1)[0]
    assert re.search(r"bad-cpr/report\.json` — C101", rejected)
    assert re.search(r"bad-hash/report\.json` — A103, A107", rejected)
    assert "bench/report.json" in text.split("## Not tabulated", 1)[1]


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.slow
def test_html_output(results: tuple[Path, dict], mibspec_cli: CliRun) -> None:  # type: ignore[type-arg]
    root, cells = results
    out = root.parent / "board.html"
    assert mibspec_cli("leaderboard", str(root), "-o", str(out)).returncode == 1
    parser = _Cells()
    parser.feed(out.read_text(encoding="utf-8"))
    assert not parser.tags & {"script", "link", "img"}
    cpr_table, cmd_table = parser.tables
    assert cpr_table[1][:3] == [
        "EAP-IG",
        f"{cells[('EAP-IG', 'ioi')][0]:.3f}",
        f"{cells[('EAP-IG', 'mcqa')][0]:.3f}",
    ]
    assert cmd_table[2][0] == "Random (1/2 cells)"


@pytest.mark.slow
def test_stdout_is_markdown_and_all_conformant_exits_zero(tmp_path: Path, mibspec_cli: CliRun) -> None:
    _circuit_report(tmp_path / "one", method="EAP", task="ioi", model="org/gpt2", version="2")
    result = mibspec_cli("leaderboard", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Circuit localization leaderboard")
    assert "| EAP 2 |" in result.stdout
    assert "Rejected" not in result.stdout


def test_duplicate_cells_are_not_tabulated_twice(tmp_path: Path) -> None:
    _circuit_report(tmp_path / "a", method="EAP", task="ioi", model="org/gpt2")
    _circuit_report(tmp_path / "b", method="EAP", task="ioi", model="org/gpt2", scale=0.5)
    board = build_leaderboard(tmp_path)
    assert len(board.entries) == 1
    assert board.entries[0].path.endswith("a/report.json")
    [duplicate] = board.not_tabulated
    assert duplicate.path.endswith("b/report.json")
    assert "second report" in duplicate.reason
    assert "EAP" in render_markdown(board)


@pytest.mark.slow
def test_usage_errors(tmp_path: Path, mibspec_cli: CliRun) -> None:
    assert mibspec_cli("leaderboard", str(tmp_path / "missing")).returncode == 2
    assert mibspec_cli("leaderboard", str(tmp_path)).returncode == 2  # no report below it
    _circuit_report(tmp_path / "one", method="EAP", task="ioi", model="org/gpt2")
    assert mibspec_cli("leaderboard", str(tmp_path), "-o", str(tmp_path / "board.txt")).returncode == 2


@pytest.mark.slow
def test_json_output_is_a_leaderboard_document_that_verifies(
    results: tuple[Path, dict],  # type: ignore[type-arg]
    mibspec_cli: CliRun,
) -> None:
    root, cells = results
    out = root.parent / "board.json"
    assert mibspec_cli("leaderboard", str(root), "-o", str(out)).returncode == 1
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["kind"] == "leaderboard"
    assert "bad-cpr" in document["description"]
    cpr_table, cmd_table = document["tables"]
    assert (cpr_table["metric"], cmd_table["metric"]) == ("cpr", "cmd")
    for table, index in ((cpr_table, 0), (cmd_table, 1)):
        eap, rnd = table["rows"]
        assert eap["method"] == "EAP-IG"
        values = [cells[("EAP-IG", "ioi")][index], cells[("EAP-IG", "mcqa")][index]]
        assert [c["value"] for c in eap["cells"]] == pytest.approx(values, abs=1e-12)
        assert eap["average"] == pytest.approx(sum(values) / 2, abs=1e-12)
        assert eap["score"] == pytest.approx(_sigmoid_mean(values), abs=1e-12)
        assert [(c["task"], c["model"]) for c in rnd["cells"]] == [("ioi", "org/gpt2")]
    verified = mibspec_cli("verify", str(out), "--format", "json")
    assert verified.returncode == 0, verified.stdout
    # Written twice from the same reports: the same bytes.
    again = root.parent / "again.json"
    mibspec_cli("leaderboard", str(root), "-o", str(again))
    assert again.read_bytes() == out.read_bytes()


def test_a_quoted_score_that_does_not_follow_from_its_cells_is_caught(
    tmp_path: Path, mibspec_cli: CliRun
) -> None:
    values = [0.8, 0.6, 0.95]
    row = {
        "method": "EAP-IG",
        "cells": [
            {"task": t, "model": "gpt2", "value": v}
            for t, v in zip(("ioi", "mcqa", "arc"), values, strict=True)
        ],
        "average": sum(values) / 3,
        "score": _sigmoid_mean(values) + 0.01,  # e.g. quoted from a table with a slip
    }
    duplicate = {**row, "cells": [*row["cells"], row["cells"][0]]}
    board = {
        "spec_version": "1.0",
        "kind": "leaderboard",
        "track": "circuit",
        "title": "As quoted",
        "tables": [{"metric": "cpr", "rows": [row, {**duplicate, "method": "Other"}]}],
    }
    path = tmp_path / "board.json"
    path.write_text(json.dumps(board, indent=1), encoding="utf-8")
    result = mibspec_cli("verify", str(path), "--format", "json")
    assert result.returncode == 1
    [document] = json.loads(result.stdout)["documents"]
    found = {(f["code"], f["pointer"]) for f in document["findings"]}
    assert found == {
        ("C115", "/tables/0/rows/0/score"),
        ("C115", "/tables/0/rows/1/score"),
        ("C115", "/tables/0/rows/1/average"),
        ("C116", "/tables/0/rows/1/cells/3"),
    }
    score = next(f for f in document["findings"] if f["pointer"] == "/tables/0/rows/0/score")
    assert score["data"]["recomputed"] == pytest.approx(_sigmoid_mean(values), abs=1e-12)


@pytest.mark.slow
def test_html_page_of_a_leaderboard_document_shows_its_tables(tmp_path: Path, mibspec_cli: CliRun) -> None:
    pytest.importorskip("matplotlib")  # the page draws its figures
    source = (
        REPO / "conformance" / "v1" / "leaderboard" / "valid" / "leaderboard-two-tables" / "document.json"
    )
    out = tmp_path / "board.html"
    result = mibspec_cli("html", str(source), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "not drawn" not in result.stdout + result.stderr
    parser = _Cells()
    parser.feed(out.read_text(encoding="utf-8"))
    tables = [t for t in parser.tables if t and t[0][:1] == ["method"]]
    assert [t[0] for t in tables] == [
        ["method", "ioi / gpt2", "ioi / qwen2.5", "mcqa / gpt2", "Average", "Score"]
    ] * 2
    document = json.loads(source.read_text(encoding="utf-8"))
    eap = document["tables"][0]["rows"][0]
    assert tables[0][1] == ["EAP-IG", "0.92", "1.18", "0.71", f"{eap['average']:.6g}", f"{eap['score']:.6g}"]


# --- names that are HTML, Markdown or terminal controls --------------------------------------------

HOSTILE_METHOD = "<img src=x onerror=alert(1)>*em* _u_ [a](javascript:alert(1)) `c` ~s~ #h !x \\ & \x1b[2K"
HOSTILE_TASK = "<script>alert(1)</script>|x"
HOSTILE_FOLDER = "bad`<script>`` x"


def _md_unescape(text: str) -> str:
    """Markdown text back to what it shows: backslash escapes (CommonMark §2.4), then entities."""
    import html

    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text))


def _md_cells(line: str) -> list[str]:
    """A GFM table row's cells: split at the pipes that are not escaped."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    root.mkdir()
    _circuit_report(root / "one", method=HOSTILE_METHOD, task=HOSTILE_TASK, model="org/gpt2")
    _circuit_report(root / HOSTILE_FOLDER, method="Broken", task="ioi", model="org/gpt2")
    bad = json.loads((root / HOSTILE_FOLDER / "report.json").read_text(encoding="utf-8"))
    bad["claims"]["cpr"]["value"] += 0.1  # C101: rejected, listed with its path
    (root / HOSTILE_FOLDER / "report.json").write_text(json.dumps(bad), encoding="utf-8")
    return root


@pytest.mark.slow
def test_markdown_shows_hostile_names_as_text(hostile: Path, mibspec_cli: CliRun) -> None:
    out = hostile.parent / "board.md"
    assert mibspec_cli("leaderboard", str(hostile), "-o", str(out)).returncode == 1
    text = out.read_text(encoding="utf-8")
    assert "\x1b" not in text
    rejected = text.split("## Rejected reports", 1)[1]
    [item] = [line for line in rejected.splitlines() if line.startswith("- ")]
    # The path is a code span (shown as written, never HTML) fenced past its backtick runs.
    fence = re.match(r"- (`+)", item).group(1)  # type: ignore[union-attr]
    assert fence == "```"
    span = item[2 + len(fence) : item.index(fence, 2 + len(fence))]
    assert span.strip() == str(hostile / HOSTILE_FOLDER / "report.json")
    assert "<" not in text.replace(fence + span + fence, "")  # no HTML outside the code span
    for title in ("CPR (higher is better)", "CMD (lower is better; so is its Score)"):
        header, *rows = [
            _md_cells(line)
            for line in text.split(f"## {title}", 1)[1].split("\n\n", 2)[1].splitlines()
            if not set(line) <= set("|-: ")
        ]
        assert [len(row) for row in (header, *rows)] == [4, 4]  # no cell split at a name's "|"
        assert _md_unescape(header[1]) == f"{HOSTILE_TASK} / org/gpt2"
        assert _md_unescape(rows[0][0]) == HOSTILE_METHOD.replace("\x1b", "\\x1b")


@pytest.mark.slow
def test_html_shows_hostile_names_as_text(hostile: Path, mibspec_cli: CliRun) -> None:
    out = hostile.parent / "board.html"
    assert mibspec_cli("leaderboard", str(hostile), "-o", str(out)).returncode == 1
    text = out.read_text(encoding="utf-8")
    assert "\x1b" not in text
    parser = _Cells()
    parser.feed(text)
    assert not parser.tags & {"script", "img", "a"}
    cpr_table, _ = parser.tables
    assert cpr_table[0][1] == f"{HOSTILE_TASK} / org/gpt2"
    assert cpr_table[1][0] == HOSTILE_METHOD.replace("\x1b", "\\x1b")


@pytest.mark.slow
def test_reports_of_different_profiles_are_never_ranked_in_one_table(
    tmp_path: Path, mibspec_cli: CliRun
) -> None:
    """The same method and cell under `default` and under `mib-2025` (which checks no size
    against k and takes f(1) as 1): two tables, each headed by its profile and what it leaves
    unchecked, never one column mixing them."""
    root = tmp_path / "results"
    root.mkdir()
    strict = _circuit_report(root / "strict", method="EAP-IG", task="ioi", model="org/gpt2")
    _circuit_report(root / "lenient", method="EAP-IG", task="ioi", model="org/gpt2", scale=0.9)
    path = root / "lenient" / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    report["profile"] = "mib-2025"
    curves = {c["ranking"]: c["points"] for c in report["claims"]["curves"]}
    areas = []
    for metric, distance in (("cpr", lambda f: f), ("cmd", lambda f: abs(1 - f))):
        points = curves[report["settings"]["ranking"][metric]]
        values = [p["faithfulness"] for p in points[:-1]] + [1.0]  # mib-2025 takes f(1) as 1
        areas.append(_trapezoid([p["k"] for p in points], [distance(f) for f in values]))
        report["claims"][metric]["value"] = areas[-1]
    lenient = tuple(areas)
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")

    board = build_leaderboard(root)
    assert board.profiles == ["default", "mib-2025"]
    assert board.not_tabulated == []
    assert board.rejected == []
    cell = ("ioi", "org/gpt2")
    assert board.value("EAP-IG", cell, "cpr", "default") == pytest.approx(strict[0], abs=1e-12)
    assert board.value("EAP-IG", cell, "cpr", "mib-2025") == pytest.approx(lenient[0], abs=1e-12)
    assert board.not_checked["default"] == []
    assert any("K103" in gap for gap in board.not_checked["mib-2025"])

    text = render_markdown(board)
    sections = text.split("## Profile ")[1:]
    assert [section.split("\n", 1)[0] for section in sections] == ["default", "mib-2025"]
    for section, value in zip(sections, (strict[0], lenient[0]), strict=True):
        [row] = [line for line in section.splitlines() if line.startswith("| EAP-IG")][:1]
        assert f"{value:.3f}" in row
        assert section.count("| EAP-IG") == 2  # its CPR and CMD tables hold this profile's report only
    assert "K103" in sections[1]
    assert "K103" not in sections[0]

    out = tmp_path / "board.json"
    assert mibspec_cli("leaderboard", str(root), "-o", str(out)).returncode == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    assert [(t["metric"], t["profile"]) for t in document["tables"]] == [
        ("cpr", "default"),
        ("cmd", "default"),
        ("cpr", "mib-2025"),
        ("cmd", "mib-2025"),
    ]
    assert all(len(table["rows"]) == 1 for table in document["tables"])
    assert mibspec_cli("verify", str(out)).returncode == 0
    # a table that mixes them, written by hand, cannot say under which profile its cells stand
    del document["tables"][0]["profile"]
    out.write_text(json.dumps(document), encoding="utf-8")
    verified = mibspec_cli("verify", str(out), "--format", "json")
    codes = [(f["code"], f["pointer"]) for f in json.loads(verified.stdout)["documents"][0]["findings"]]
    assert codes == [("S111", "/tables/0")]
