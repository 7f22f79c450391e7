"""Figures of a report, drawn with matplotlib (the ``plots`` extra).

One function per figure kind; each reads the report (a dict) and, where needed, its
sidecars, and returns the figure as PNG bytes. The kinds:

* ``faithfulness`` (circuit): f(k) of the CPR curve with CPR, the area under f, shaded,
  and f(k) of the CMD curve with CMD, the area between f and 1, shaded (MIB, Figure 2).
  Between grid points the curve is drawn as the straight line of the linear trapezoid
  (MC-*), so on a log k axis it bends, and the shaded area is the integrated one.
* ``radar`` (causal_bench): F, C, M, S and COS per method.
* ``null`` (causal_bench): the convergence test's null distribution, redrawn from the
  declared sets and seed (MB-11), with the observed mean pairwise Jaccard.
* ``jaccard`` (causal_bench): the claimed method × method Jaccard matrix.
* ``layer_position`` (causal_variable): per variable, the unit score (mean over
  counterfactual datasets) by layer and token position.
* ``saliency`` (saliency): the ground truth and every method's map for the first images,
  with the dominant area outlined and the most salient pixel marked (MS-1, MS-3). The
  dominant area is the support of the Shapley ground truth: pixels outside it are null
  players with value 0 (MS-9).

Output is deterministic: a fixed style and rc (including ``svg.hashsalt``), no
timestamps or software tags in the files, so the same report gives the same bytes.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mibspec.core.files import sha256_file
from mibspec.core.tracks import TRACKS

__all__ = [
    "FIGURE_KINDS",
    "RC",
    "Figure",
    "MissingFigureDataError",
    "Skipped",
    "figure_kinds_for",
    "render_figures",
]

KAxis = Literal["log", "linear"]
ImageFormat = Literal["png", "svg"]

#: rc settings every figure is drawn under, on top of matplotlib's default style.
RC: dict[str, Any] = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.hashsalt": "mibspec",
    "svg.fonttype": "path",
    "path.simplify": False,
    "image.interpolation": "nearest",
    "image.resample": False,
}

#: Metadata entries matplotlib would otherwise write (creation time, software version).
_NO_METADATA: dict[ImageFormat, dict[str, None]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
}

#: The figure kinds of each track (declared in the track registry), in the order the HTML page
#: shows them.
FIGURE_KINDS: dict[str, tuple[str, ...]] = {name: track.figures for name, track in TRACKS.items()}

_BENCH_METRICS = ("F", "C", "M", "S", "COS")
_MAX_SALIENCY_IMAGES = 4
_MAX_SIDECAR_BYTES = 256 * 1024 * 1024
_MAX_NULL_DRAWS = 1_000_000  # redrawing more would take minutes; the figure is skipped instead
_MAX_NULL_WORK = 10**9  # components × draws × (methods + pairs of methods): seconds of numpy
#: The largest figure drawn, in inches at ``figure.dpi`` (100): 4,000 × 4,000 pixels. A larger
#: one (a causal-variable report of 24 variables × 32 layers asked for 65,860 × 63,000) is
#: not drawn, and the page says why.
MAX_FIGURE_INCHES = 40.0
#: The most marks (cells with their labels, points, legend entries) a figure draws.
MAX_FIGURE_MARKS = 10_000


@dataclass(frozen=True)
class Figure:
    """A drawn figure: ``name`` is the file stem (``<name>.png``)."""

    name: str
    title: str
    caption: str
    data: bytes
    format: ImageFormat = "png"


@dataclass(frozen=True)
class Skipped:
    """A figure kind that could not be drawn for this report, and why."""

    name: str
    reason: str


class MissingFigureDataError(Exception):
    """The report lacks what a figure needs (the message says what)."""


#: The largest magnitude a figure plots: an axis over a wider range has no readable ticks, and
#: matplotlib's tick arithmetic overflows near the largest float.
MAX_PLOTTED = 1e12


#: The longest name a figure writes (a method, a variable, a tick label); longer ones are cut
#: with "…" so that no label can push the plot out of its figure.
MAX_LABEL = 40


def _label(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _plottable(values: Any, what: str) -> None:
    """Refuse values a figure cannot place on an axis (not finite, or beyond
    :data:`MAX_PLOTTED`) before anything is drawn.

    Raises:
        MissingFigureDataError: naming the values.
    """
    array = np.asarray(values, dtype=np.float64)
    finite = array[np.isfinite(array)]
    if finite.size != array.size or (finite.size and float(np.abs(finite).max()) > MAX_PLOTTED):
        raise MissingFigureDataError(f"{what} hold values that cannot be plotted (beyond ±{MAX_PLOTTED:g})")


def _bounded(width: float, height: float, marks: int, what: str) -> None:
    """Refuse a figure beyond :data:`MAX_FIGURE_INCHES` or :data:`MAX_FIGURE_MARKS` before
    anything is drawn (it is listed as not drawn, with the reason).

    Raises:
        MissingFigureDataError: saying how large the figure would be.
    """
    dpi = RC["figure.dpi"]
    if width > MAX_FIGURE_INCHES or height > MAX_FIGURE_INCHES:
        raise MissingFigureDataError(
            f"{what} would need a {width * dpi:.0f} × {height * dpi:.0f} px figure; figures are drawn up "
            f"to {MAX_FIGURE_INCHES * dpi:.0f} × {MAX_FIGURE_INCHES * dpi:.0f} px"
        )
    if marks > MAX_FIGURE_MARKS:
        raise MissingFigureDataError(
            f"{what} would draw {marks} marks; figures draw at most {MAX_FIGURE_MARKS}"
        )


def figure_kinds_for(report: dict[str, Any]) -> tuple[str, ...]:
    """The figure kinds of the report's track (none for an unknown track or another kind)."""
    if report.get("kind") != "report":
        return ()
    track = report.get("track")
    return FIGURE_KINDS.get(track, ()) if isinstance(track, str) else ()


def render_figures(
    report: dict[str, Any],
    folder: Path,
    *,
    k_axis: KAxis = "log",
    image_format: ImageFormat = "png",
) -> tuple[list[Figure], list[Skipped]]:
    """Draw every figure of the report's track.

    Args:
        report: the report document (a dict that passed the schema stage; anything the
            figures need and do not find is reported as skipped, never raised).
        folder: the report's folder (sidecars are read relative to it).
        k_axis: ``"log"`` or ``"linear"`` k axis of the faithfulness figure.
        image_format: ``"png"`` or ``"svg"``.

    Returns:
        The figures drawn and the kinds skipped with the reason.

    Raises:
        ValueError: on an unknown ``k_axis`` or ``image_format``.
    """
    if k_axis not in ("log", "linear"):
        raise ValueError(f"k_axis must be 'log' or 'linear'; got {k_axis!r}")
    if image_format not in _NO_METADATA:
        raise ValueError(f"image_format must be 'png' or 'svg'; got {image_format!r}")
    drawers: dict[str, Callable[[], Figure]] = {
        "faithfulness": lambda: _faithfulness(report, k_axis, image_format),
        "radar": lambda: _radar(report, image_format),
        "null": lambda: _null(report, image_format),
        "jaccard": lambda: _jaccard(report, image_format),
        "layer_position": lambda: _layer_position(report, image_format),
        "saliency": lambda: _saliency(report, folder, image_format),
    }
    figures, skipped = [], []
    for kind in figure_kinds_for(report):
        try:
            figures.append(drawers[kind]())
        except MissingFigureDataError as exc:
            skipped.append(Skipped(kind, str(exc)))
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            # The report passed no schema, or holds values no figure can show.
            skipped.append(Skipped(kind, f"the report's data cannot be drawn ({type(exc).__name__}: {exc})"))
    return figures, skipped


# --------------------------------------------------------------------------- drawing helpers


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib
    import matplotlib.style

    # The default style, not the user's matplotlibrc, then the fixed rc on top. A name in a
    # script the font lacks is drawn as boxes; matplotlib's warning about it is not the page's.
    with (
        matplotlib.style.context("default"),
        matplotlib.rc_context(RC),  # type: ignore[arg-type]
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)
        yield


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure as MplFigure

    return MplFigure(figsize=(width, height), layout="constrained")


def _encode(fig: Any, image_format: ImageFormat) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=image_format, metadata=_NO_METADATA[image_format])
    return buffer.getvalue()


def _fmt(value: float) -> str:
    return f"{value:.4g}"


# --------------------------------------------------------------------------- circuit


def _dense_segments(ks: list[float], fs: list[float], per_segment: int = 48) -> tuple[Any, Any]:
    """Points along the piecewise-linear (in k) curve through (k_i, f_i)."""
    xs, ys = [], []
    for i in range(len(ks) - 1):
        t = np.linspace(0.0, 1.0, per_segment, endpoint=False)
        xs.append(ks[i] + t * (ks[i + 1] - ks[i]))
        ys.append(fs[i] + t * (fs[i + 1] - fs[i]))
    xs.append(np.array([ks[-1]]))
    ys.append(np.array([fs[-1]]))
    return np.concatenate(xs), np.concatenate(ys)


def _curve_for(claims: dict[str, Any], ranking: str) -> tuple[list[float], list[float]] | None:
    for curve in claims["curves"]:
        if curve["ranking"] == ranking:
            points = sorted(curve["points"], key=lambda p: p["k"])
            return [float(p["k"]) for p in points], [float(p["faithfulness"]) for p in points]
    return None


def _faithfulness(report: dict[str, Any], k_axis: KAxis, image_format: ImageFormat) -> Figure:
    from mibspec.metrics.circuit import cmd, cpr

    claims, rankings = report["claims"], report["settings"]["ranking"]
    panels = []
    for metric in ("cpr", "cmd"):
        ranking = rankings.get(metric)
        curve = _curve_for(claims, ranking) if ranking else None
        if curve is None or len(curve[0]) < 2:
            continue
        panels.append((metric, ranking, *curve))
    if not panels:
        raise MissingFigureDataError("no curve with at least two points for the CPR or CMD ranking")
    notes = []
    _bounded(4.2 * len(panels), 3.4, sum(len(panel[2]) for panel in panels), "the curves' grid points")
    for metric, _, ks, fs in panels:
        _plottable([*ks, *fs, float(claims[metric]["value"])], f"the {metric.upper()} curve and claim")
    with _style():
        fig = _new_figure(4.2 * len(panels), 3.4)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (metric, ranking, ks, fs) in zip(axes, panels, strict=True):
            xs, ys = _dense_segments(ks, fs)
            claimed = float(claims[metric]["value"])
            if metric == "cpr":
                area = cpr(ks, fs)
                ax.fill_between(xs, 0.0, ys, color="tab:blue", alpha=0.25, linewidth=0, label="CPR area")
                label = f"CPR = {_fmt(claimed)}"
            else:
                area = cmd(ks, fs)
                ax.fill_between(xs, ys, 1.0, color="tab:orange", alpha=0.3, linewidth=0, label="CMD area")
                label = f"CMD = {_fmt(claimed)}"
            ax.plot(xs, ys, color="black", linewidth=1.2)
            ax.plot(ks, fs, "o", color="black", markersize=3.5, label="grid points")
            ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
            ax.axhline(0.0, color="grey", linewidth=0.6)
            ax.set_xscale(k_axis)
            ax.set_xlabel("k (proportion of edges)" + (", log scale" if k_axis == "log" else ""))
            ax.set_ylabel("faithfulness f(k)")
            ax.set_title(f"{metric.upper()}: {_label(ranking)} ranking")
            ax.text(0.03, 0.95, label, transform=ax.transAxes, va="top", fontsize=9)
            ax.legend(loc="lower right", fontsize=7)
            notes.append(
                f"{metric.upper()} uses the {ranking} ranking; claimed {_fmt(claimed)}, "
                f"area of the drawn curve {_fmt(area)}"
            )
        data = _encode(fig, image_format)
    return Figure(
        "faithfulness",
        "Faithfulness curves",
        "Faithfulness f(k) at the grid points, joined by the straight lines of the linear trapezoid. "
        "Shaded: the area under f (CPR) and the area between f and 1 (CMD; CMD takes |1 − f| at the grid "
        "points, so where f crosses 1 between two points the shading and CMD differ slightly). "
        + "; ".join(notes)
        + ".",
        data,
        image_format,
    )


# --------------------------------------------------------------------------- CAUSAL-BENCH


def _radar(report: dict[str, Any], image_format: ImageFormat) -> Figure:
    methods = report["claims"]["methods"]
    values = [[float(m["metrics"][name]) for name in _BENCH_METRICS] for m in methods]
    top = max(1.0, max(max(row) for row in values))
    angles = [2 * math.pi * i / len(_BENCH_METRICS) for i in range(len(_BENCH_METRICS))]
    # each method is a legend entry, about 0.15 in tall beside the 4.4 in plot
    _bounded(5.6, 4.4 + 0.15 * len(methods), len(methods) * len(_BENCH_METRICS), f"{len(methods)} methods")
    _plottable(values, "the methods' metrics")
    with _style():
        fig = _new_figure(5.6, 4.4)
        ax = fig.add_subplot(projection="polar")
        colors = [f"C{i % 10}" for i in range(len(methods))]
        for method, row, color in zip(methods, values, colors, strict=True):
            closed_angles, closed = [*angles, angles[0]], [*row, row[0]]
            ax.plot(closed_angles, closed, color=color, linewidth=1.4, label=_label(method["name"]))
            ax.fill(closed_angles, closed, color=color, alpha=0.08)
        ax.set_xticks(angles)
        ax.set_xticklabels(list(_BENCH_METRICS))
        ax.set_ylim(0.0, top)
        ax.set_title("CAUSAL-BENCH metrics per method")
        fig.legend(loc="outside right upper", fontsize=7)
        data = _encode(fig, image_format)
    return Figure(
        "radar",
        "F, C, M, S and COS per method",
        "Faithfulness F, completeness C, minimality M, stability S and causal optimality COS of each "
        f"method, as claimed (radius 0 to {_fmt(top)}).",
        data,
        image_format,
    )


def _null(report: dict[str, Any], image_format: ImageFormat) -> Figure:
    from mibspec.metrics.causal_bench import convergence_test

    conv = report["claims"].get("convergence")
    if not conv:
        raise MissingFigureDataError("the report claims no convergence test")
    if int(conv["n_permutations"]) > _MAX_NULL_DRAWS:
        raise MissingFigureDataError(
            f"{conv['n_permutations']} null draws are more than the {_MAX_NULL_DRAWS} the figure redraws"
        )
    # the redraw's work: every component, method and pair of methods in every draw (MB-11)
    m = len(report["claims"]["methods"])
    work = len(report["universe"]) * int(conv["n_permutations"]) * (m + m * (m - 1) // 2)
    if work > _MAX_NULL_WORK:
        raise MissingFigureDataError(
            f"redrawing the null of {m} methods over {len(report['universe'])} components "
            f"{conv['n_permutations']} times is {work} steps; the figure redraws at most {_MAX_NULL_WORK}"
        )
    settings = report["settings"]
    sets = [method["components"] for method in report["claims"]["methods"]]
    result = convergence_test(
        sets,
        len(report["universe"]),
        n_permutations=int(conv["n_permutations"]),
        seed=int(conv["seed"]),
        p_convention=settings.get("p_convention", "plus_one"),
        ddof=int(settings.get("z_ddof", 0)),
    )
    j_obs = float(conv["j_obs"])
    _plottable([j_obs, float(conv["p"]), float(conv.get("z") or 0.0)], "the claimed convergence statistics")
    agrees = math.isclose(result.null_mean, float(conv["null_mean"]), rel_tol=1e-9, abs_tol=1e-12) and (
        math.isclose(result.null_std, float(conv["null_std"]), rel_tol=1e-9, abs_tol=1e-12)
    )
    with _style():
        fig = _new_figure(5.6, 3.4)
        ax = fig.add_subplot()
        edges = np.histogram_bin_edges(result.null, bins=30)
        ax.hist(
            result.null,
            bins=edges,
            color="tab:grey",
            alpha=0.7,
            label=f"null ({result.n_permutations} draws)",
        )
        ax.axvline(j_obs, color="tab:red", linewidth=1.6, label=f"observed J = {_fmt(j_obs)}")
        ax.axvline(result.null_mean, color="black", linestyle="--", linewidth=1, label="null mean")
        ax.set_xlabel("mean pairwise Jaccard")
        ax.set_ylabel("draws")
        z = conv.get("z")
        stats = f"p = {_fmt(float(conv['p']))}" + (f", z = {_fmt(float(z))}" if z is not None else "")
        ax.set_title(f"Convergence test: {stats}")
        ax.legend(fontsize=7)
        data = _encode(fig, image_format)
    check = (
        "The redrawn null reproduces the claimed mean and standard deviation."
        if agrees
        else f"The redrawn null does NOT reproduce the claims: mean {_fmt(result.null_mean)} "
        f"(claimed {_fmt(float(conv['null_mean']))}), std {_fmt(result.null_std)} "
        f"(claimed {_fmt(float(conv['null_std']))})."
    )
    return Figure(
        "null",
        "Convergence test: null distribution",
        f"The {result.n_permutations} null statistics redrawn from the methods' set sizes, the "
        f"{len(report['universe'])}-component universe and seed {result.seed} (MB-11), and the observed "
        f"mean pairwise Jaccard. {check}",
        data,
        image_format,
    )


def _jaccard(report: dict[str, Any], image_format: ImageFormat) -> Figure:
    block = report["claims"].get("jaccard")
    if not block:
        raise MissingFigureDataError("the report claims no Jaccard matrix")
    names = list(block["methods"])
    matrix = np.array(block["matrix"], dtype=np.float64)
    if matrix.shape != (len(names), len(names)):
        raise MissingFigureDataError(f"the Jaccard matrix is {matrix.shape}, not {len(names)} × {len(names)}")
    size = 1.6 + 0.9 * len(names)
    _bounded(size + 1.2, size, len(names) ** 2, f"a {len(names)} × {len(names)} Jaccard matrix")
    _plottable(matrix, "the Jaccard matrix's cells")
    with _style():
        fig = _new_figure(size + 1.2, size)
        ax = fig.add_subplot()
        image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis")
        ax.grid(False)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([_label(n) for n in names], rotation=35, ha="right")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels([_label(n) for n in names])
        for (i, j), value in np.ndenumerate(matrix):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="white" if value < 0.6 else "black")
        fig.colorbar(image, ax=ax, shrink=0.8, label="Jaccard")
        ax.set_title("Pairwise Jaccard of the identified sets")
        data = _encode(fig, image_format)
    return Figure(
        "jaccard", "Jaccard heatmap", "The claimed Jaccard matrix of the methods' sets.", data, image_format
    )


# --------------------------------------------------------------------------- causal variable


def _position_label(position: dict[str, Any]) -> str:
    rule = position.get("rule")
    if rule == "last":
        label = "last"
    elif rule == "index":
        label = f"index {position.get('index')}"
    elif rule in ("first_occurrence", "last_occurrence"):
        label = f"{rule.split('_')[0]} '{position.get('token')}'"
    elif rule == "slot":
        occurrence = position.get("occurrence")
        label = f"{position.get('slot')}" + (f"[{occurrence}]" if occurrence is not None else "")
    else:
        label = str(rule)
    if position.get("subtoken") == "first":
        label += " (first subtoken)"
    return label


def _row_label(unit: dict[str, Any], several_components: bool) -> str:
    """A unit's row: its position (and component), its heads, and how many further sites a
    joint unit intervenes on with them (MV-10)."""
    location = unit["location"]
    label = _position_label(location["position"])
    if several_components:
        label = f"{location['component']} @ {label}"
    if location.get("heads"):
        label += f" h{','.join(str(h) for h in location['heads'])}"
    joint = len(unit.get("joint_sites") or [])
    if joint:
        label += f" +{joint} joint site{'s' if joint > 1 else ''}"
    return label


def _layer_position(report: dict[str, Any], image_format: ImageFormat) -> Figure:
    variables = report["claims"]["variables"]
    panels = []
    for variable in variables:
        units = variable["units"]
        components = {u["location"]["component"] for u in units}
        lower = variable["metric"] == "mse"
        cells: dict[tuple[str, int], float] = {}
        for unit in units:
            key = (_row_label(unit, len(components) > 1), int(unit["location"]["layer"]))
            scores = [float(v) for v in unit["scores"].values()]
            _plottable(scores, f"unit {unit.get('id')!r}'s scores")
            value = float(np.mean(scores))
            if key in cells:  # two units at one place: keep the better one
                value = min(value, cells[key]) if lower else max(value, cells[key])
            cells[key] = value
        rows = sorted({r for r, _ in cells}, key=lambda r: (r != "last", r))
        layers = sorted({layer for _, layer in cells})
        grid = np.full((len(rows), len(layers)), np.nan)
        for (row, layer), value in cells.items():
            grid[rows.index(row), layers.index(layer)] = value
        panels.append((variable, rows, layers, grid, lower))
    width = sum(1.8 + 0.8 * len(p[2]) for p in panels) + 1.0
    height = 1.8 + 0.45 * max(len(p[1]) for p in panels)
    marks = sum(len(p[1]) * len(p[2]) for p in panels)
    most_layers, most_positions = max(len(p[2]) for p in panels), max(len(p[1]) for p in panels)
    what = f"{len(panels)} variable(s) over {most_layers} layer(s) and {most_positions} position(s)"
    _bounded(width, height, marks, what)
    with _style():
        fig = _new_figure(width, height)
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (variable, rows, layers, grid, lower) in zip(axes, panels, strict=True):
            image = ax.imshow(
                np.ma.masked_invalid(grid), cmap="viridis_r" if lower else "viridis", aspect="auto"
            )
            ax.grid(False)
            ax.set_xticks(range(len(layers)))
            ax.set_xticklabels([_label(layer) for layer in layers])
            ax.set_yticks(range(len(rows)))
            ax.set_yticklabels([_label(row) for row in rows])
            ax.set_xlabel("layer")
            finite = grid[np.isfinite(grid)]
            middle = float((finite.min() + finite.max()) / 2) if finite.size else 0.0
            for (i, j), value in np.ndenumerate(grid):
                if np.isfinite(value):
                    dark = value > middle if lower else value < middle
                    ax.text(
                        j, i, f"{value:.3g}", ha="center", va="center", color="white" if dark else "black"
                    )
            better = "lower" if lower else "higher"
            ax.set_title(f"{_label(variable['name'])}: {variable['metric'].upper()} ({better} is better)")
            fig.colorbar(image, ax=ax, shrink=0.9)
        data = _encode(fig, image_format)
    return Figure(
        "layer_position",
        "Scores by layer and position",
        "Each cell: a unit's score averaged over its counterfactual datasets, by layer (columns) and token "
        "position (rows); blank cells have no unit. Per layer, the variable's per-layer score is the best "
        "cell of its column.",
        data,
        image_format,
    )


# --------------------------------------------------------------------------- saliency


def _load_maps(report: dict[str, Any], folder: Path, ref: dict[str, Any]) -> Any:
    """Declared maps (``.npy`` or safetensors), read only from a file inside the folder
    that matches its declared size and hash."""
    from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos

    artifact_id = ref.get("artifact")
    entry = next((a for a in report.get("artifacts", []) if a.get("id") == artifact_id), None)
    if entry is None:
        raise MissingFigureDataError(f"no artifact {artifact_id!r} is declared")
    try:
        root = folder.resolve()
        path = (folder / entry["path"]).resolve()
        inside = path.is_relative_to(root) and path.is_file()
        size = path.stat().st_size if inside else 0
    except (OSError, RuntimeError, ValueError) as exc:  # a name too long, a link loop, a NUL
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise MissingFigureDataError(f"artifact {artifact_id!r} cannot be read ({why})") from exc
    if not inside:
        raise MissingFigureDataError(
            f"artifact {artifact_id!r} ({entry['path']}) is not a file in the report's folder"
        )
    if size != entry.get("bytes") or size > _MAX_SIDECAR_BYTES:
        raise MissingFigureDataError(f"artifact {artifact_id!r} does not have its declared size")
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise MissingFigureDataError(f"artifact {artifact_id!r} cannot be read ({exc.strerror})") from exc
    if digest != entry.get("sha256"):
        raise MissingFigureDataError(f"artifact {artifact_id!r} does not match its declared SHA-256")
    try:
        info = tensor_infos(path, str(entry.get("media_type")))[ref.get("tensor")]
        array = np.array(load_tensor(path, info))
    except (SidecarError, KeyError, OSError, ValueError) as exc:
        raise MissingFigureDataError(
            f"artifact {artifact_id!r} holds no readable tensor {ref.get('tensor')!r} ({exc})"
        ) from exc
    if array.ndim != 3 or not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        raise MissingFigureDataError(
            f"artifact {artifact_id!r} is not a finite (images, height, width) array: shape {array.shape}"
        )
    _plottable(array, f"artifact {artifact_id!r}'s maps")
    return array.astype(np.float64)


def _outline(mask: Any) -> list[list[tuple[float, float]]]:
    """Pixel edges between the mask and its complement (or the border), in image coordinates."""
    padded = np.pad(mask, 1)
    segments = []
    for r, c in zip(*np.nonzero(mask), strict=True):
        if not padded[r, c + 1]:  # the pixel above is outside
            segments.append([(c - 0.5, r - 0.5), (c + 0.5, r - 0.5)])
        if not padded[r + 2, c + 1]:
            segments.append([(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)])
        if not padded[r + 1, c]:
            segments.append([(c - 0.5, r - 0.5), (c - 0.5, r + 0.5)])
        if not padded[r + 1, c + 2]:
            segments.append([(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)])
    return segments


def _saliency(report: dict[str, Any], folder: Path, image_format: ImageFormat) -> Figure:
    from matplotlib.collections import LineCollection

    claims = report["claims"]
    # one column per method, checked before any map is read
    _bounded(1.9 * (len(claims["methods"]) + 1) + 0.4, 0, 0, f"{len(claims['methods'])} methods' maps")
    truth = _load_maps(report, folder, claims["ground_truth"])
    columns: list[tuple[str, Any, float | None]] = [("Shapley ground truth", truth, None)]
    for method in claims["methods"]:
        maps = _load_maps(report, folder, method["maps"])
        if maps.shape != truth.shape:
            raise MissingFigureDataError(
                f"maps of {method['name']!r} are {maps.shape}, the ground truth is {truth.shape}"
            )
        columns.append((method["name"], maps, float(method["hit_accuracy"])))
    n_images = min(_MAX_SALIENCY_IMAGES, truth.shape[0])
    if n_images == 0:
        raise MissingFigureDataError("the ground truth holds no image")
    _bounded(
        1.9 * len(columns) + 0.4,
        1.9 * n_images + 0.5,
        len(columns) * n_images * int(np.count_nonzero(truth[0])),
        f"{len(columns) - 1} methods' maps",
    )
    with _style():
        fig = _new_figure(1.9 * len(columns) + 0.4, 1.9 * n_images + 0.5)
        axes = fig.subplots(n_images, len(columns), squeeze=False)
        for row in range(n_images):
            area = truth[row] != 0.0
            for col, (name, maps, hit_accuracy) in enumerate(columns):
                ax = axes[row][col]
                values = maps[row]
                ax.imshow(values, cmap="inferno")
                ax.grid(False)
                ax.set_xticks([])
                ax.set_yticks([])
                ax.add_collection(LineCollection(_outline(area), colors="cyan", linewidths=1.4))
                top = int(np.argmax(values))  # first maximum in C order: the MS-1 tie-break
                r, c = divmod(top, values.shape[1])
                hit = bool(area[r, c])
                ax.plot([c], [r], marker="x", color="lime" if hit else "red", markersize=8, mew=2)
                if row == 0:
                    title = (
                        _label(name) if hit_accuracy is None else f"{_label(name)}\nHA = {hit_accuracy:.2f}"
                    )
                    ax.set_title(title, fontsize=8)
                if col == 0:
                    ax.set_ylabel(f"image {row}")
        data = _encode(fig, image_format)
    return Figure(
        "saliency",
        "Saliency maps and the dominant area",
        f"The first {n_images} images of the maps (dominant images in dataset order): the Shapley ground "
        "truth and each method's map. Cyan outline: the dominant area, the support of the ground truth "
        "(pixels outside it are null players with value 0, MS-9). Cross: the most salient pixel (MS-1), "
        "green when it lies in the dominant area (a hit, MS-3), red otherwise. HA: the claimed hit accuracy.",
        data,
        image_format,
    )
