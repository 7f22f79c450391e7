"""``mibspec html``: figures of every kind from the shipped examples, a self-contained and
deterministic HTML page, and the page as a browser shows it (headless Chromium)."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import mibspec
from mibspec.core.comparisons import Comparison
from mibspec.core.tracks import TRACKS
from mibspec.pages.figures import FIGURE_KINDS, _outline, render_figures
from mibspec.pages.html import build_html_page, render_html

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def _plots() -> None:
    """Figures need matplotlib (the ``plots`` extra): without it the test is skipped."""
    pytest.importorskip("matplotlib")


#: A test that draws figures, directly or through ``mibspec html``.
draws = pytest.mark.usefixtures("_plots")


def _load(track: str) -> dict[str, object]:
    return json.loads((EXAMPLES / track / "report.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- an independent PNG reader


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """Chunks of a PNG file, checking the signature and every chunk's CRC (PNG spec §5)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        offset += 12 + length
    assert chunks[-1][0] == b"IEND"
    return chunks


def _png_size(data: bytes) -> tuple[int, int]:
    """(width, height), after checking that the image data inflates to the size IHDR implies."""
    chunks = _png_chunks(data)
    kind, ihdr = chunks[0]
    assert kind == b"IHDR"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[colour]
    assert depth == 8
    assert interlace == 0
    raw = zlib.decompress(b"".join(body for k, body in chunks if k == b"IDAT"))
    assert len(raw) == height * (1 + width * channels)  # one filter byte per row
    return width, height


# --------------------------------------------------------------------------- figures


@pytest.mark.slow
@draws
@pytest.mark.parametrize("track", list(TRACKS))
def test_every_figure_kind_is_drawn_from_the_shipped_example(track: str) -> None:
    figures, skipped = render_figures(_load(track), EXAMPLES / track)
    assert skipped == []
    assert [f.name for f in figures] == list(FIGURE_KINDS[track])
    for figure in figures:
        width, height = _png_size(figure.data)
        assert width >= 200
        assert height >= 200
        kinds = {kind for kind, _ in _png_chunks(figure.data)}
        # No creation time, software version or other text metadata.
        assert not kinds & {b"tEXt", b"zTXt", b"iTXt", b"tIME"}, kinds


@pytest.mark.slow
@draws
@pytest.mark.parametrize("track", list(TRACKS))
def test_figures_are_byte_identical_when_drawn_twice(track: str) -> None:
    first, _ = render_figures(_load(track), EXAMPLES / track)
    second, _ = render_figures(_load(track), EXAMPLES / track)
    assert [f.data for f in first] == [f.data for f in second]


@pytest.mark.slow
@draws
def test_svg_figures_are_deterministic_and_carry_no_date() -> None:
    first, _ = render_figures(_load("causal_bench"), EXAMPLES / "causal_bench", image_format="svg")
    second, _ = render_figures(_load("causal_bench"), EXAMPLES / "causal_bench", image_format="svg")
    assert [f.data for f in first] == [f.data for f in second]
    for figure in first:
        text = figure.data.decode("utf-8")
        assert text.startswith("<?xml")
        assert "<svg" in text
        assert "<dc:date>" not in text
        assert "Matplotlib v" not in text


@draws
def test_faithfulness_caption_states_the_trapezoid_areas_of_the_curves() -> None:
    report = _load("circuit")
    [figure], _ = render_figures(report, EXAMPLES / "circuit")
    claims, ranking = report["claims"], report["settings"]["ranking"]  # type: ignore[index]
    for metric, transform in (("cpr", lambda f: f), ("cmd", lambda f: abs(1.0 - f))):
        [curve] = [c for c in claims["curves"] if c["ranking"] == ranking[metric]]  # type: ignore[index]
        ks = [p["k"] for p in curve["points"]]
        fs = [transform(p["faithfulness"]) for p in curve["points"]]
        area = 0.0
        for i in range(len(ks) - 1):  # the linear trapezoid, one segment at a time
            area += (ks[i + 1] - ks[i]) * (fs[i] + fs[i + 1]) / 2
        assert f"area of the drawn curve {area:.4g}" in figure.caption
        assert f"claimed {claims[metric]['value']:.4g}" in figure.caption  # type: ignore[index]


@pytest.mark.slow
@draws
def test_linear_k_axis_draws_a_different_figure() -> None:
    report = _load("circuit")
    [log_figure], _ = render_figures(report, EXAMPLES / "circuit", k_axis="log")
    [linear_figure], _ = render_figures(report, EXAMPLES / "circuit", k_axis="linear")
    assert log_figure.data != linear_figure.data
    with pytest.raises(ValueError, match="k_axis"):
        render_figures(report, EXAMPLES / "circuit", k_axis="logit")  # type: ignore[arg-type]


@pytest.mark.slow
@draws
def test_null_figure_says_whether_the_redrawn_null_matches_the_claims() -> None:
    report = _load("causal_bench")
    figures, _ = render_figures(report, EXAMPLES / "causal_bench")
    assert "reproduces the claimed mean and standard deviation" in figures[1].caption
    report["claims"]["convergence"]["null_mean"] = 0.5  # type: ignore[index]
    figures, _ = render_figures(report, EXAMPLES / "causal_bench")
    assert "does NOT reproduce" in figures[1].caption


def test_dominant_area_outline_is_the_boundary_of_the_mask() -> None:
    mask = np.zeros((8, 9), dtype=bool)
    mask[2:5, 3:7] = True  # a 3 × 4 rectangle: perimeter 2·(3 + 4) unit edges
    segments = _outline(mask)
    assert len(segments) == 14
    for (x0, y0), (x1, y1) in segments:
        assert abs(x1 - x0) + abs(y1 - y0) == 1.0
        on_vertical = x0 == x1 and x0 in (2.5, 6.5)
        on_horizontal = y0 == y1 and y0 in (1.5, 4.5)
        assert on_vertical or on_horizontal
    corner = np.zeros((3, 3), dtype=bool)
    corner[0, 0] = True  # a pixel at the image border still gets all four edges
    assert len(_outline(corner)) == 4


@pytest.mark.slow
@draws
def test_saliency_maps_in_safetensors_are_drawn() -> None:
    # the producer's folder: ground truth and maps are named tensors of safetensors files
    figures, skipped = render_figures(_load("saliency-digits"), EXAMPLES / "saliency-digits")
    assert skipped == []
    assert [f.name for f in figures] == ["saliency"]
    _png_size(figures[0].data)


@draws
def test_tampered_sidecar_skips_its_figure_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "saliency"
    shutil.copytree(EXAMPLES / "saliency", folder)
    maps = folder / "maps_occlusion.npy"
    raw = bytearray(maps.read_bytes())
    raw[-1] ^= 0xFF
    maps.write_bytes(bytes(raw))
    figures, skipped = render_figures(_load("saliency"), folder)
    assert figures == []
    assert [s.name for s in skipped] == ["saliency"]
    assert "SHA-256" in skipped[0].reason


# --------------------------------------------------------------------------- the HTML page


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


def _embedded_pngs(text: str) -> list[bytes]:
    prefix = "data:image/png;base64,"
    return [
        base64.b64decode(str(attrs["src"])[len(prefix) :], validate=True)
        for tag, attrs in _tags(text)
        if tag == "img"
    ]


@pytest.mark.slow
@draws
@pytest.mark.parametrize("track", list(TRACKS))
def test_page_is_self_contained(track: str, mibspec_cli: CliRun, tmp_path: Path) -> None:
    out, pngs = tmp_path / "page.html", tmp_path / "png"
    result = mibspec_cli(
        "html", str(EXAMPLES / track / "report.json"), "-o", str(out), "--png-dir", str(pngs)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text(encoding="utf-8")
    tags = _tags(text)
    names = {tag for tag, _ in tags}
    assert not names & {"script", "link", "iframe", "object", "embed", "base"}
    for tag, attrs in tags:
        assert "href" not in attrs, (tag, attrs)
        if "src" in attrs:
            assert tag == "img"
            assert str(attrs["src"]).startswith("data:image/png;base64,")
    assert "url(" not in text
    assert "@import" not in text
    # The embedded images are exactly the files written with --png-dir, in figure order.
    written = [(pngs / f"{name}.png").read_bytes() for name in FIGURE_KINDS[track]]
    assert _embedded_pngs(text) == written
    assert sorted(p.name for p in pngs.iterdir()) == sorted(f"{name}.png" for name in FIGURE_KINDS[track])


def test_report_is_not_a_command(mibspec_cli: CliRun) -> None:
    # the page has one command, html: `report` is refused as any unknown command is (exit 2)
    result = mibspec_cli("report", str(EXAMPLES / "circuit" / "report.json"))
    assert result.returncode == 2
    assert "No such command 'report'" in result.stderr
    assert "mibspec --help" in result.stderr
    listing = mibspec_cli("--help").stdout.split("Commands:")[1]
    commands = [line.split()[0] for line in listing.splitlines() if line.strip()]
    assert "html" in commands
    assert "report" not in commands


@pytest.mark.slow
@draws
def test_page_shows_verdict_stages_claims_and_documents(mibspec_cli: CliRun, tmp_path: Path) -> None:
    out = tmp_path / "circuit.html"
    result = mibspec_cli("html", str(EXAMPLES / "circuit" / "report.json"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    report = _load("circuit")
    assert html.escape(str(report["title"])) in text
    assert ">conformant<" in text
    assert "parse: passed" in text
    assert "recompute: skipped" in text
    for name in ("report.json", "circuit.json", "dataset.json"):
        assert name in text  # every verified document is listed
    claims = report["claims"]
    assert f"{claims['cpr']['value']:.6g}" in text  # type: ignore[index]
    assert f"{claims['cmd']['value']:.6g}" in text  # type: ignore[index]
    assert "No findings." in text
    assert "Claimed vs recomputed" not in text  # the recompute stage did not run


@pytest.mark.slow
@draws
def test_page_of_a_failing_report_lists_its_findings(mibspec_cli: CliRun, tmp_path: Path) -> None:
    folder = tmp_path / "saliency"
    shutil.copytree(EXAMPLES / "saliency", folder)
    maps = folder / "maps_occlusion.npy"
    raw = bytearray(maps.read_bytes())
    raw[-1] ^= 0xFF
    maps.write_bytes(bytes(raw))
    out = tmp_path / "page.html"
    result = mibspec_cli("html", str(folder / "report.json"), "-o", str(out))
    assert result.returncode == 1
    text = out.read_text(encoding="utf-8")
    assert ">not conformant<" in text
    assert "A103" in text
    assert "/artifacts/4/sha256" in text
    assert "Not drawn:" in text
    assert "SHA-256" in text


def test_page_has_a_claimed_vs_recomputed_table_when_there_are_comparisons() -> None:
    path = EXAMPLES / "circuit" / "report.json"
    result = mibspec.verify(path, recompute=False)
    result.documents[0].comparisons = [
        Comparison("/claims/cpr/value", "CPR", 0.96894, 0.968941, 1e-6, 1e-5),
        Comparison("/claims/cmd/value", "CMD", 0.0467896, 0.051, 1e-6, 1e-5),
    ]
    text = render_html(build_html_page(result, path, figures=False))
    section = text.split("<h2>Claimed vs recomputed</h2>", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1])
    assert len(rows) == 2
    assert "0.96894" in rows[0]
    assert "0.968941" in rows[0]
    assert ">ok<" in rows[0]
    assert "0.0467896" in rows[1]
    assert "0.051" in rows[1]
    assert ">differs<" in rows[1]
    assert f"{abs(0.0467896 - 0.051):.6g}" in rows[1]


@pytest.mark.slow
@draws
def test_markup_in_a_report_is_escaped(mibspec_cli: CliRun, tmp_path: Path) -> None:
    report = _load("causal_bench")
    report["title"] = "<script>alert(1)</script>"
    report["method"]["name"] = '<img src="https://example.org/x.png">'  # type: ignore[index]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    out = tmp_path / "page.html"
    result = mibspec_cli("html", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert not {tag for tag, _ in _tags(text)} & {"script"}
    assert all(str(attrs.get("src", "data:")).startswith("data:") for _, attrs in _tags(text))


def test_control_characters_in_a_report_are_shown_as_escapes() -> None:
    path = EXAMPLES / "causal_bench" / "report.json"
    report = _load("causal_bench")
    report["title"] = "t\x1b[2K\u202e\x85"
    report["claims"]["methods"][0]["name"] = "m\x1b]8;;x\x07\u2028"  # type: ignore[index]
    result = mibspec.verify(path, recompute=False)
    result.documents[0].comparisons = [Comparison("/claims/z", "q\r\n\x9b2J", 1.0, 1.0, 1e-6, 0.0)]
    page = build_html_page(result, path, figures=False)
    page.report = report
    text = render_html(page)
    assert not set(text) & set("\x1b\x07\r\x85\x9b\u202e\u2028")
    assert "t\\x1b[2K\\u202e\\x85" in text
    assert "m\\x1b]8;;x\\x07\\u2028" in text
    assert "q\\x0d\\x0a\\x9b2J" in text


@pytest.mark.slow
@draws
def test_same_input_gives_the_same_bytes_across_processes(mibspec_cli: CliRun, tmp_path: Path) -> None:
    outputs = []
    for seed in ("0", "12345"):
        out, pngs = tmp_path / f"page-{seed}.html", tmp_path / f"png-{seed}"
        result = mibspec_cli(
            "html",
            str(EXAMPLES / "causal_bench" / "report.json"),
            "-o",
            str(out),
            "--png-dir",
            str(pngs),
            env={"PYTHONHASHSEED": seed},
        )
        assert result.returncode == 0, result.stderr
        outputs.append((out.read_bytes(), {p.name: p.read_bytes() for p in pngs.iterdir()}))
    assert outputs[0] == outputs[1]


def test_usage_errors(mibspec_cli: CliRun, tmp_path: Path) -> None:
    assert mibspec_cli("html", str(EXAMPLES / "circuit" / "report.json")).returncode == 2  # nothing to write
    assert mibspec_cli("html", str(tmp_path / "missing.json"), "-o", str(tmp_path / "x.html")).returncode == 2
    result = mibspec_cli("html", str(EXAMPLES), "-o", str(tmp_path / "x.html"))
    assert result.returncode == 2
    assert "reports" in result.stderr


# --------------------------------------------------------------------------- in a browser

_PROBE = """<script>
window.addEventListener("load", function () {
  var out = [];
  for (const img of document.images) {
    out.push([img.alt, img.complete, img.naturalWidth, img.naturalHeight]);
  }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "headless Chromium is needed to check the HTML page: apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it (.ci/run): its absence there is a failure
        pytest.skip(message)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("track", list(TRACKS))
def test_figures_decode_in_headless_chromium(track: str, tmp_path: Path) -> None:
    chromium = _chromium()
    path = EXAMPLES / track / "report.json"
    page = render_html(build_html_page(mibspec.verify(path, recompute=False), path))
    expected = [_png_size(data) for data in _embedded_pngs(page)]
    assert len(expected) == len(FIGURE_KINDS[track])
    probed = tmp_path / "page.html"
    # The probe is added to a copy only: the page itself carries no script.
    probed.write_text(page.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    completed = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # needed when the tests run as root (CI)
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    match = re.search(r'<pre id="probe">(.*?)</pre>', completed.stdout, re.S)
    assert match is not None, completed.stdout[-2000:]
    images = json.loads(html.unescape(match.group(1)))
    assert [(width, height) for _, _, width, height in images] == expected
    assert all(complete and width > 0 for _, complete, width, _ in images)


@pytest.mark.parametrize(
    "path",
    [
        EXAMPLES / "causal_variable" / "report.json",
        EXAMPLES / "causal-variable-ioi" / "report.json",
        REPO / "conformance" / "v1" / "report" / "valid" / "causal-variable-highest-in-1-0" / "document.json",
    ],
    ids=["causal_variable", "causal-variable-ioi", "highest-in-1-0"],
)
def test_a_variables_best_score_is_named_best_in_1_1_and_1_0(path: Path) -> None:
    """The aggregate row says what the number is: for IOI MSE the best score is the lowest error.
    The two examples are 1.1 reports (``best``), the conformance case a 1.0 one (``highest``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    text = render_html(build_html_page(mibspec.verify(path, recompute=False), path, figures=False))
    for variable in data["claims"]["variables"]:
        best = variable["highest"] if data["spec_version"] == "1.0" else variable["best"]
        assert best == min(variable["per_layer"].values())  # MSE: lower is better
    assert re.search(r">Best</t[dh]>", text)
    assert not re.search(r">Highest</t[dh]>", text)  # (a 1.0 description may still say Highest)


def _many_units_report(tmp_path: Path, n_variables: int, positions: int) -> Path:
    """The causal-variable example with ``n_variables`` variables of one unit per layer 0..31
    and, in the first, ``positions`` units at index positions: with 24 and 1,400 the figure
    would need a 65,860 × 63,225 px canvas."""
    folder = tmp_path / "big"
    shutil.copytree(EXAMPLES / "causal-variable-arithmetic", folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    template = report["claims"]["variables"][0]
    unit = template["units"][0]
    variables = []
    for v in range(n_variables):
        units = []
        for layer in range(32):
            units.append({**unit, "id": f"v{v}-l{layer}", "location": {**unit["location"], "layer": layer}})
        if v == 0:
            for index in range(positions):
                location = {**unit["location"], "position": {"rule": "index", "index": index}}
                units.append({**unit, "id": f"p{index}", "location": location})
        variables.append({**template, "name": f"{template['name']}_{v}", "units": units})
    report["claims"]["variables"] = variables
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return folder / "report.json"


@pytest.mark.slow
def test_a_figure_too_large_is_not_drawn_and_the_page_says_why(mibspec_cli: CliRun, tmp_path: Path) -> None:
    """24 variables × 32 layers and 1,400 positions asked matplotlib for 65,860 × 63,000 px
    (exit 3): the figure is bounded before it is drawn, listed as not drawn with its size."""
    from mibspec.pages.figures import MAX_FIGURE_INCHES, RC

    report = _many_units_report(tmp_path, 24, 1400)
    page = tmp_path / "page.html"
    done = mibspec_cli("html", str(report), "-o", str(page))
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr
    text = page.read_text(encoding="utf-8")
    limit = int(MAX_FIGURE_INCHES * RC["figure.dpi"])
    assert "Not drawn:" in text
    # 24 panels of 1.8 + 0.8 × 32 in, and 1.8 + 0.45 in per position (1,400 and "last"), at 100 dpi
    assert f"would need a 65860 × 63225 px figure; figures are drawn up to {limit} × {limit} px" in text
    assert "figure layer_position not drawn" in done.stderr
    # within the bound, the same kind of figure is drawn, no larger than the bound
    small = json.loads(report.read_text(encoding="utf-8"))
    figures, skipped = render_figures(_trimmed(small, 1, 40), report.parent)
    assert not skipped
    width, height = _png_size(figures[0].data)
    assert width <= limit
    assert height <= limit


def _trimmed(report: dict[str, object], variables: int, units: int) -> dict[str, object]:
    claims = dict(report["claims"])  # type: ignore[arg-type]
    claims["variables"] = [
        {**variable, "units": variable["units"][:units]} for variable in claims["variables"][:variables]
    ]
    return {**report, "claims": claims}


@pytest.mark.parametrize(
    ("track", "change", "said"),
    [
        (
            "causal_bench",
            lambda r: r["claims"]["jaccard"].update(
                methods=[f"m{i}" for i in range(80)], matrix=[[0.5] * 80] * 80
            ),
            "a 80 × 80 Jaccard matrix",
        ),
        (
            "causal_bench",
            lambda r: r["claims"]["methods"].extend(r["claims"]["methods"] * 600),
            "2404 methods",
        ),
        (
            "causal_bench",
            lambda r: r["claims"]["methods"].extend(r["claims"]["methods"] * 600),
            "null of 2404",
        ),
        (
            "circuit",
            lambda r: r["claims"]["curves"][0]["points"].extend(
                [dict(r["claims"]["curves"][0]["points"][-1]) for _ in range(20_000)]
            ),
            "grid points",
        ),
    ],
    ids=["jaccard", "radar", "null", "faithfulness"],
)
def test_every_figure_kind_is_bounded(
    track: str, change: Callable[[dict[str, object]], object], said: str
) -> None:
    report = _load(track)
    change(report)
    _, skipped = render_figures(report, EXAMPLES / track)
    reasons = {s.name: s.reason for s in skipped}
    assert any(
        said in reason and ("figures are drawn up to" in reason or "at most" in reason)
        for reason in reasons.values()
    ), reasons


def test_a_map_path_the_system_refuses_is_a_figure_not_drawn() -> None:
    """A sidecar path too long for the file system ended the page with OSError."""
    report = _load("saliency")
    artifact = next(a for a in report["artifacts"] if a["id"] == report["claims"]["ground_truth"]["artifact"])
    artifact["path"] = "a" * 300 + ".npy"
    figures, skipped = render_figures(report, EXAMPLES / "saliency")
    assert figures == []
    [(name, reason)] = [(s.name, s.reason) for s in skipped]
    assert name == "saliency"
    assert "cannot be read (File name too long)" in reason


@pytest.mark.parametrize(
    ("track", "change", "what"),
    [
        ("circuit", lambda r: r["claims"]["curves"][0]["points"][3].update(faithfulness=1e308), "CPR curve"),
        ("causal_bench", lambda r: r["claims"]["methods"][0]["metrics"].update(F=-1e300), "metrics"),
        ("causal_bench", lambda r: r["claims"]["convergence"].update(j_obs=1e300), "convergence"),
        ("causal_bench", lambda r: r["claims"]["jaccard"]["matrix"][0].__setitem__(1, 1e200), "Jaccard"),
        (
            "causal_variable",
            lambda r: r["claims"]["variables"][0]["units"][0]["scores"].update(
                dict.fromkeys(r["claims"]["variables"][0]["units"][0]["scores"], 1.7e308)
            ),
            "scores",
        ),
    ],
    ids=["faithfulness", "radar", "null", "jaccard", "layer-position"],
)
def test_values_no_axis_can_hold_are_not_drawn(
    track: str, change: Callable[[dict[str, object]], object], what: str
) -> None:
    """1e308 on an axis overflowed matplotlib's tick arithmetic (a RuntimeWarning, an error
    under this suite's filterwarnings): the figure is listed as not drawn instead."""
    report = _load(track)
    change(report)
    _, skipped = render_figures(report, EXAMPLES / track)
    assert any(what in s.reason and "cannot be plotted" in s.reason for s in skipped), skipped
