"""Figures: each model's isotropy against its mean STS scores (from the leaderboard's tables), and the
outlier report's heatmap.

matplotlib is imported inside the functions that draw (Agg backend). A name is drawn as written
(:func:`iso_bench.report.escape.plot_text`: a ``$`` in it never starts mathtext). Fixed size and dpi, no software or
time metadata: the same data give the same bytes with the same matplotlib.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iso_bench.files import atomic_write_bytes
from iso_bench.report.cells import Leaderboard, Section
from iso_bench.report.escape import plot_text
from iso_bench.report.heatmap import KEY as HEATMAP
from iso_bench.report.heatmap import draw_heatmap, heatmap_files, heatmaps

if TYPE_CHECKING:
    from iso_bench.numerics.outliers import OutlierReport


@dataclass(frozen=True)
class Plot:
    """Points ``(row label, x, y)`` per series: a model's isotropy against each of its STS means.

    ``errors``: per series, per point, the ``(low, high)`` interval of y where its cell shows one, else None;
    () when no point has one (drawn as vertical error bars).
    """

    title: str
    x_label: str
    y_label: str
    series: tuple[tuple[str, tuple[tuple[str, float, float], ...]], ...]
    errors: tuple[tuple[tuple[float, float] | None, ...], ...] = ()


def plot_data(section: Section) -> Plot | None:
    """What a section's plot shows, read from its tables (so plot and tables agree by construction).

    x: the first diagnostics table's sentence IsoScore (else its first column); y: every "mean" column of the
    ranked tables, with its interval where the cell has one; a row (a variant in one setup) is a point where
    both are present. None when there is nothing to plot. IsoScore, not I(W): I(W) is not defined by the vectors
    alone where the eigenvalues of WᵀW are equal (whitening).
    """
    diag = next((t for t in section.tables if any(c.kind == "diagnostic" for c in t.columns)), None)
    if diag is None:
        return None
    j = next((i for i, c in enumerate(diag.columns) if c.key.endswith("/sentence_isoscore")), 0)
    xs = {row.label: row.cells[j].value for row in diag.rows if row.cells[j].value is not None}
    series, errors = [], []
    for table in section.tables:
        for k, col in enumerate(table.columns):
            rows = [row for row in table.rows
                    if col.kind == "mean" and row.label in xs and row.cells[k].value is not None]
            if rows:
                series.append((col.label, tuple((row.label, xs[row.label], row.cells[k].value) for row in rows)))
                errors.append(tuple(None if (c := row.cells[k]).low is None else (c.low, c.high) for row in rows))
    if not series:
        return None
    task = diag.columns[j].key.rsplit("/", 1)[0]
    shown = tuple(errors) if any(e is not None for es in errors for e in es) else ()
    return Plot(f"{section.title} @ {diag.rows[0].revision[:12]}",  # type: ignore[arg-type]
                f"{diag.columns[j].label} on {task}", "mean STS score × 100", tuple(series), shown)


def _pyplot() -> Any:
    import matplotlib  # lazily: matplotlib is slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazily: matplotlib is slow to import

    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def write_plots(board: Leaderboard, folder: str | Path, stem: str) -> dict[str, str]:
    """Save each model's isotropy-vs-STS plot as ``<stem>-<key>.png`` in ``folder``, and the verdict's heatmap
    of each fit setting (:mod:`.heatmap`) as ``<stem>-verdict-<setting>.png``; returns key -> file name.

    >>> write_plots(board, "leaderboards", "minilm")               # doctest: +SKIP
    {'#verdict:fitted on test texts': 'minilm-verdict-fitted-on-test-texts.png',
     'sentence-transformers__all-MiniLM-L6-v2': 'minilm-sentence-transformers__all-MiniLM-L6-v2.png'}
    """
    names = plot_files(board, stem)
    if not names:
        return {}
    plt = _pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for section in board.sections:
        if section.key in names:
            _draw(plt, plot_data(section), folder / names[section.key], board_methods(board))
    for hm in heatmaps(board):
        _save(plt, draw_heatmap(plt, hm), folder / names[f"{HEATMAP}:{hm.setting}"])
    return names


def plot_files(board: Leaderboard, stem: str) -> dict[str, str]:
    """The files :func:`write_plots` writes, by key, without drawing (so that they can be checked first):
    ``<stem>-<key>.png`` for each model with a plot, and the heatmaps' (:func:`.heatmap.heatmap_files`)."""
    return {**{s.key: f"{stem}-{s.key}.png" for s in board.sections if plot_data(s) is not None},
            **heatmap_files(board, stem)}


def svg_plots(board: Leaderboard) -> dict[str, list[tuple[str, str]]]:
    """Each section's figures as inline SVG, by section key, each with the caption that says what it shows (under
    :data:`.heatmap.KEY`, the verdict's heatmap of each fit setting): its isotropy-vs-STS plot (where the
    isotropy task ran) and, per ranked table, each variant's difference from raw per task (with the paired
    interval where there is one). An SVG has no fixed width or height, only its
    ``viewBox``: the page sizes it to the screen. Pinned for equal bytes on equal data: the SVG hash salt (per
    section, so two figures of a page never share an element id), no date."""
    plt = _pyplot()
    out = {}
    verdict = [(hm, lambda plt, hm, _: draw_heatmap(plt, hm), hm.caption) for hm in heatmaps(board)]
    for section in (Section(HEATMAP, "", (), HEATMAP), *board.sections):
        figures: list[tuple[Any, Any, str]] = list(verdict) if section.key == HEATMAP else []
        plot = plot_data(section)
        if plot is not None:
            bars = " (bars: the mean's 95% interval)" if plot.errors else ""
            figures.append((plot, lambda plt, plot, path: _draw(plt, plot, path, board_methods(board)),
                            f"{section.title}: {plot.x_label} against each mean score{bars}."))
        for table in section.tables:
            if _has_deltas(table):
                paired = any(c.delta_low is not None for row in table.rows for c in row.cells)
                figures.append((table, _draw_deltas, f"{table.title}: each variant's difference from raw on each "
                                f"task{' (bars: the paired 95% interval)' if paired else ''}."))
        svgs = []
        for k, (data, draw, caption) in enumerate(figures):
            with plt.rc_context({"svg.hashsalt": f"iso-bench-{section.key}-{k}", "svg.fonttype": "path"}):
                fig = draw(plt, data, None)
                buf = io.BytesIO()
                fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
                plt.close(fig)
            text = buf.getvalue().decode("utf-8")
            text = re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)
            head = text[:text.index(">") + 1]  # the root element: its viewBox stays, its fixed size goes
            text = re.sub(r'\s(?:width|height)="[^"]*"', "", head) + text[len(head):]
            svgs.append((text, caption))  # inline: no XML declaration, doctype or RDF metadata
        if svgs:
            out[section.key] = svgs
    return out


def _has_deltas(table: Any) -> bool:
    return any(c.kind == "score" for c in table.columns) and any(
        cell.delta is not None for row in table.rows for cell, col in zip(row.cells, table.columns, strict=True)
        if col.kind == "score")


def _draw_deltas(plt: Any, table: Any, path: Path | None) -> Any:
    """Per task (x), each variant's difference from raw (y) with its paired 95% interval where there is one."""
    cols = [(j, c) for j, c in enumerate(table.columns) if c.kind == "score"]
    rows = [row for row in table.rows if any(row.cells[j].delta is not None for j, _ in cols)]
    with plt.rc_context({"font.size": 8}):
        fig, ax = plt.subplots(figsize=(max(6.4, 0.9 * len(cols) + 2), 4.2), dpi=100)
        width = 0.8 / max(1, len(rows))
        for k, (row, marker) in enumerate(zip(rows, "os^Dv<>ph*xP" * 4, strict=False)):
            pts = [(i + (k - (len(rows) - 1) / 2) * width, row.cells[j]) for i, (j, _) in enumerate(cols)
                   if row.cells[j].delta is not None]
            dots = ax.scatter([x for x, _ in pts], [c.delta for _, c in pts], marker=marker, s=14,
                              label=plot_text(row.label))
            bars = [(x, c) for x, c in pts if c.delta_low is not None and c.delta_high is not None]
            if bars:
                ax.errorbar([x for x, _ in bars], [c.delta for _, c in bars], fmt="none", linewidth=0.7,
                            ecolor=dots.get_facecolor()[0],
                            yerr=[[max(0.0, c.delta - c.delta_low) for _, c in bars],
                                  [max(0.0, c.delta_high - c.delta) for _, c in bars]])
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(cols)), [plot_text(c.label) for _, c in cols], rotation=30, ha="right")
        ax.set(ylabel="difference from raw (bars: paired 95% interval)", title=plot_text(table.title))
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="best", fontsize=7, ncol=2)
        fig.tight_layout()
    if path is not None:
        _save(plt, fig, path)
    return fig


def _method(label: str) -> str:
    """The method of a row label: ``flow [fitted on held-out texts, seeds 0-4]`` -> ``flow``."""
    return label.split(" [", 1)[0]


def _held_out(label: str) -> bool:
    """Whether a row label says its fit was on texts other than the test texts (drawn hollow)."""
    return "fitted on" in label and "fitted on test texts" not in label


def method_colours(methods: list[str]) -> dict[str, Any]:
    """A colour per method, raw black: the dark hues of matplotlib's tab20 first, then its light ones, then those of
    tab20b and tab20c (60 colours; a board with the bytes axis has over 40 methods)."""
    import matplotlib  # lazily: matplotlib is slow to import

    palette = matplotlib.colormaps["tab20"].colors
    hues = [palette[i] for i in (*range(0, 20, 2), *range(1, 20, 2))]
    hues += [*matplotlib.colormaps["tab20b"].colors, *matplotlib.colormaps["tab20c"].colors]
    others = [m for m in methods if m != "raw"]
    return {"raw": "black", **{m: hues[k % len(hues)] for k, m in enumerate(others)}}


def board_methods(board: Leaderboard) -> list[str]:
    """The methods of every plot of ``board``, raw first: each keeps its colour in every model's plot."""
    plots = [p for p in map(plot_data, board.sections) if p is not None]
    found = {_method(label) for p in plots for _, points in p.series for label, _, _ in points}
    return sorted(found, key=lambda m: (m != "raw", m))


AXES_WIDTH = 7.2  # inches of a scatter plot's figure left of its methods' legend
LEGEND_ROWS = 22  # methods in a column of that legend (a 5-inch figure holds 22 entries at 8 pt and the title)


def _draw(plt: Any, plot: Plot, path: Path | None, palette: list[str] | None = None) -> Any:
    """Each point a row (a variant in one setup): colour = its method (legend; ``palette``, the methods the
    colours are assigned over, :func:`board_methods`), marker = the mean score it is plotted against, hollow
    where fitted on held-out texts; no text at the points, so nothing overlaps."""
    from matplotlib.lines import Line2D  # lazily: matplotlib is slow to import

    methods = list(dict.fromkeys(_method(label) for _, points in plot.series for label, _, _ in points))
    colours = method_colours(palette or sorted(methods, key=lambda m: (m != "raw", m)))
    # the methods' legend right of the axes, in as many columns as its entries need (a column holds
    # LEGEND_ROWS), each as wide as its longest name at 8 pt: at least the right fifth of a 9-inch figure
    ncol = max(1, -(-len(methods) // LEGEND_ROWS))
    legend_width = max(1.8, ncol * (0.35 + 0.062 * max((len(plot_text(m)) for m in methods), default=0)))
    with plt.rc_context({"font.size": 9}):
        fig, ax = plt.subplots(figsize=(AXES_WIDTH + legend_width, 5.0), dpi=100)
        for k, ((_, points), marker) in enumerate(zip(plot.series, "os^Dv<>p", strict=False)):
            errors = plot.errors[k] if plot.errors else (None,) * len(points)
            for (label, x, y), err in zip(points, errors, strict=False):
                colour = colours[_method(label)]
                if err is not None:  # the interval of y: asymmetric, from the percentile bootstrap
                    ax.errorbar([x], [y], yerr=[[y - err[0]], [err[1] - y]], fmt="none", capsize=2, linewidth=0.7,
                                ecolor=colour, alpha=0.6)
                ax.scatter([x], [y], marker=marker, s=30, edgecolors=[colour], linewidths=1.2,
                           facecolors="none" if _held_out(label) else [colour],
                           zorder=4 if _method(label) == "raw" else 3)  # raw over what equals it (clip = raw)
        ax.margins(x=0.08, y=0.08)
        y_label = plot_text(plot.y_label) + ("\n(bars: the interval shown in the table)" if plot.errors else "")
        ax.set(xlabel=plot_text(plot.x_label), ylabel=y_label, title=plot_text(plot.title))
        ax.grid(True, alpha=0.3)
        by_method = [Line2D([], [], color=colours[m], marker="o", linestyle="", label=plot_text(m))
                     for m in sorted(methods, key=lambda m: (m != "raw", m))]
        first = ax.legend(handles=by_method, title="method", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                          fontsize=8, title_fontsize=8, frameon=False, ncol=ncol)
        ax.add_artist(first)
        shapes = [Line2D([], [], color="0.3", marker=marker, linestyle="", label=plot_text(name))
                  for (name, _), marker in zip(plot.series, "os^Dv<>p", strict=False)]
        if any(_held_out(label) for _, points in plot.series for label, _, _ in points):
            shapes += [Line2D([], [], color="0.3", marker="o", linestyle="", label="fitted on test texts"),
                       Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="",
                              label="fitted on held-out texts")]
        ax.legend(handles=shapes, loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, frameon=False,
                  ncol=2)
        fig.tight_layout(rect=(0, 0, AXES_WIDTH / (AXES_WIDTH + legend_width), 1))  # the rest: the methods' legend
    if path is not None:
        _save(plt, fig, path)
    return fig


def plot_outliers(report: OutlierReport, path: str | Path, top: int = 5) -> None:
    """Heatmap PNG: layers by the union of each layer's top dimensions, coloured by extreme-value fraction."""
    import numpy as np  # lazily: numpy stays out of light commands

    plt = _pyplot()
    dims = sorted({j for r in report.layers for j in (*r.stats.top(top), *r.first_outliers)})
    grid = np.array([[r.stats.fraction[j] for j in dims] for r in report.layers])
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(dims) + 2), 0.4 * len(report.layers) + 1.5), dpi=100)
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(dims)), [str(j) for j in dims], rotation=90, fontsize=7)
    ax.set_yticks(range(len(report.layers)), [str(r.layer) for r in report.layers], fontsize=7)
    ax.set_xlabel("dimension")
    ax.set_ylabel("layer (0 = embeddings)")
    ax.set_title(f"{plot_text(report.model)}\nfraction of token vectors in which the dimension is the min or the max",
                 fontsize=8)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    _save(plt, fig, Path(path))
