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
    """Save each model's isotropy-vs-STS plot as ``<stem>-<key>.png`` in ``folder``; returns key -> file name.

    >>> write_plots(board, "leaderboards", "minilm")               # doctest: +SKIP
    {'sentence-transformers__all-MiniLM-L6-v2': 'minilm-sentence-transformers__all-MiniLM-L6-v2.png'}
    """
    names = plot_files(board, stem)
    if not names:
        return {}
    plt = _pyplot()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for section in board.sections:
        if section.key in names:
            _draw(plt, plot_data(section), folder / names[section.key])
    return names


def plot_files(board: Leaderboard, stem: str) -> dict[str, str]:
    """The files :func:`write_plots` writes, by section key, without drawing (so that they can be checked first):
    ``<stem>-<key>.png`` for each model with a plot."""
    return {s.key: f"{stem}-{s.key}.png" for s in board.sections if plot_data(s) is not None}


def svg_plots(board: Leaderboard) -> dict[str, list[tuple[str, str]]]:
    """Each section's figures as inline SVG, by section key, each with the caption that says what it shows: its
    isotropy-vs-STS plot (where the isotropy task ran) and, per ranked table, each variant's difference from raw
    per task (with the paired interval where there is one). An SVG has no fixed width or height, only its
    ``viewBox``: the page sizes it to the screen. Pinned for equal bytes on equal data: the SVG hash salt (per
    section, so two figures of a page never share an element id), no date."""
    plt = _pyplot()
    out = {}
    for section in board.sections:
        figures: list[tuple[Any, Any, str]] = []
        plot = plot_data(section)
        if plot is not None:
            bars = " (bars: the mean's 95% interval)" if plot.errors else ""
            figures.append((plot, _draw, f"{section.title}: {plot.x_label} against each mean score{bars}."))
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


def _draw(plt: Any, plot: Plot, path: Path | None) -> Any:
    with plt.rc_context({"font.size": 9}):
        fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
        texts: list[tuple[float, float, str]] = []
        for k, ((label, points), marker) in enumerate(zip(plot.series, "os^Dv<>p", strict=False)):
            dots = ax.scatter([p[1] for p in points], [p[2] for p in points], marker=marker, label=plot_text(label))
            bars = [(x, y, e) for (_, x, y), e in zip(points, plot.errors[k] if plot.errors else (), strict=False)
                    if e is not None]
            if bars:  # the interval of y: asymmetric, from the percentile bootstrap
                ax.errorbar([b[0] for b in bars], [b[1] for b in bars], fmt="none", capsize=2, linewidth=0.8,
                            ecolor=dots.get_facecolor()[0], yerr=[[b[1] - b[2][0] for b in bars],
                                                                  [b[2][1] - b[1] for b in bars]])
            # variants at the same point (e.g. clip that zeroed nothing, and raw) share one label
            labels: dict[tuple[float, float], list[str]] = {}
            for variant, x, y in points:
                labels.setdefault((x, y), []).append(variant)
            texts += [(x, y, plot_text(", ".join(variants))) for (x, y), variants in labels.items()]
        ax.margins(x=0.15, y=0.1)
        _place_labels(ax, texts)
        y_label = plot_text(plot.y_label) + ("\n(bars: the interval shown in the table)" if plot.errors else "")
        ax.set(xlabel=plot_text(plot.x_label), ylabel=y_label, title=plot_text(plot.title))
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
    if path is not None:
        _save(plt, fig, path)
    return fig


def _place_labels(ax: Any, texts: list[tuple[float, float, str]], line_px: float = 12.0, tries: int = 12) -> None:
    """Each point's label beside it, moved down in steps of one text line where it would overlap a label placed
    before it (labels placed from the top of the plot down; after ``tries`` lines it stays at the last), with a
    thin line back to its point when moved. The axes' limits must be set (margins) before. Deterministic: the
    same points give the same places."""
    ax.autoscale_view()
    to_px = ax.transData.transform
    placed: list[tuple[float, float, float, float]] = []  # x0, y0, x1, y1 in pixels
    char_px = 6.2  # a character's width at 8 points (11 pixels at 100 dpi), about
    for x, y, text in sorted(texts, key=lambda t: (-t[1], t[0], t[2])):
        px, py = to_px((x, y))
        width = char_px * len(text)
        for shift in range(tries):
            x0, y0 = px + 5.5, py + 4 - shift * line_px
            box = (x0, y0, x0 + width, y0 + line_px)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        placed.append(box)
        offset = (4, 3 - shift * line_px * 72 / ax.figure.dpi)  # offset points: 72 per inch
        ax.annotate(text, (x, y), textcoords="offset points", xytext=offset, fontsize=8,
                    arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"} if shift else None)


def plot_outliers(report: OutlierReport, path: str | Path, top: int = 5) -> None:
    """Heatmap PNG: layers by the union of each layer's top dimensions, coloured by extreme-value fraction."""
    import numpy as np  # lazily: numpy stays out of light commands

    plt = _pyplot()
    dims = sorted({j for r in report.layers for j in r.stats.top(top)})
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
