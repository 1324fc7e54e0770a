"""The verdict in one picture: a heatmap per fit setting, a row per method and a column per (encoder, judged
unit), coloured by the method's difference from raw there, marked where the paired test is significant.

The judged units are the verdict's (:func:`iso_bench.report.verdict.judgements`, as in :mod:`.matrix`): a task
group's mean where the group has one (MTEB STS, paper STS), else each task on its own column (the word tasks,
Banking77, SciFact): each column is a difference with its own paired test, so every mark is a test's. The colour
saturates at ±:data:`LIMIT` points; the number in each cell is the difference itself.

>>> from iso_bench.report.cells import Cell, Column, Leaderboard, Row, Section, Table
>>> raw, good = Cell(80.0, 0.0), Cell(82.5, 2.5, q=0.004, significant=True)
>>> table = Table("MTEB STS: main score × 100", ("variant",), (Column("mean:sts", "mean", "mean"),),
...               (Row("org/m", "r1", "raw", (raw,)), Row("org/m", "r1", "whiten", (good,))))
>>> [hm] = heatmaps(Leaderboard((Section("org/m", "revision r1", (table,), "m"),)))
>>> hm.setting, hm.methods, hm.columns, hm.cells[0][0]
('fitted on test texts', ('whiten',), (('org/m', 'MTEB STS'),), HeatCell(delta=2.5, significant=True, same=False))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from iso_bench.report.cells import Leaderboard
from iso_bench.report.escape import plot_text
from iso_bench.report.index import variant_order
from iso_bench.report.verdict import apart_note, judged_apart, judgements

KEY = "#verdict"  # the key of the heatmaps among a board's figures (never a section's: those have no "#")
LIMIT = 10.0  # points: the colour of a larger difference is that of ±LIMIT
CMAP = "RdBu"  # red below raw, blue above, white at raw


@dataclass(frozen=True)
class HeatCell:
    """A method's difference from raw on one column (None: no result), whether its paired test is significant,
    and ``same``: its vectors are raw's there (clip that zeroed no dimension)."""

    delta: float | None = None
    significant: bool = False
    same: bool = False

    @property
    def text(self) -> str:
        """As the cell prints it: ``+3.2*`` (* significant), ``=`` (raw's vectors), ``–`` (no result)."""
        if self.same:
            return "="
        if self.delta is None:
            return "–"
        return f"{self.delta:+.1f}".replace("-", "−") + "*" * self.significant


@dataclass(frozen=True)
class Heatmap:
    """One fit setting: ``cells[i][j]`` is ``methods[i]`` on ``columns[j]`` = (encoder, judged unit)."""

    setting: str
    methods: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    cells: tuple[tuple[HeatCell, ...], ...]
    apart: tuple[str, ...] = ()  # the sizes judged per budget instead (verdict.judged_apart)

    @property
    def caption(self) -> str:
        setting = self.setting[:1].upper() + self.setting[1:]
        return (f"{setting}: each method's difference from raw (points, main score × 100) per encoder and judged "
                "unit: a task group's mean where the group has one (MTEB STS, paper STS), else each task in a "
                "column of its own (the word tasks, Banking77, SciFact), as in the matrix. * = significant (paired "
                "bootstrap, Benjamini-Hochberg q ≤ 0.05 over its table); = : the method's vectors are raw's there; "
                f"– = no result; blue above raw, red below, the colour full at ±{LIMIT:.0f} points and beyond."
                + apart_note(self.apart))


def heatmaps(board: Leaderboard) -> list[Heatmap]:
    """One :class:`Heatmap` per fit setting of ``board``'s verdict, in the matrix's order (fitted on test texts
    first), methods in the board's order (raw, never compared with itself, left out)."""
    found, apart = [j for j in judgements(board) if j.no_verdict is None], judged_apart(board)
    settings = list(dict.fromkeys(j.setting for j in found))
    settings.sort(key=lambda s: not s.startswith("fitted on test texts"))
    out = []
    for setting in settings:
        mine = [j for j in found if j.setting == setting]
        columns = tuple(dict.fromkeys((j.model, j.unit) for j in mine))
        methods = tuple(variant_order(row.variant for j in mine for row, _ in j.tested))
        by: dict[tuple[str, str, str], HeatCell] = {}
        for j in mine:
            for row, cell in j.tested:
                if cell.mark == "modified":  # edited after its run: no paired test, never drawn as a result
                    continue
                by.setdefault((row.variant, j.model, j.unit), HeatCell(cell.delta, cell.significant, cell.unchanged))
        out.append(Heatmap(setting, methods, columns,
                           tuple(tuple(by.get((m, *c), HeatCell()) for c in columns) for m in methods), apart))
    return out


def heatmap_files(board: Leaderboard, stem: str) -> dict[str, str]:
    """The PNG of each heatmap by its key (``#verdict:<setting>``): ``<stem>-verdict-<setting in words>.png``."""
    return {f"{KEY}:{hm.setting}": f"{stem}-verdict-{_slug(hm.setting)}.png" for hm in heatmaps(board)}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _short(model: str) -> str:
    """An encoder as a column group names it: its name without the organisation (``all-MiniLM-L6-v2``)."""
    return model.rsplit("/", 1)[-1]


def draw_heatmap(plt: Any, hm: Heatmap) -> Any:
    """The heatmap as a matplotlib figure (:mod:`.plots` saves it): methods down, encoders' units across (each
    encoder's columns under its name, wrapped to their width, a rule between encoders), each cell its difference
    printed in it. Laid out by matplotlib's constrained layout, then measured: a figure whose texts (a long title
    over one column, a long encoder or method name) do not fit, or whose encoder names run into each other, is
    drawn again larger, so that every text lies whole inside it and none overlaps another."""
    import warnings

    width, height = _first_size(hm)
    for _ in range(6):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig, names = _draw(plt, hm, width, height)
            fig.canvas.draw()
        grow = _overflow(fig, names)
        if not caught and grow == (0.0, 0.0, 1.0):
            return fig
        plt.close(fig)
        collapsed = 1.0 if caught else 0.0  # constrained layout gave up: more room for the axes' decorations
        width, height = width * grow[2] + grow[0] + collapsed, height + grow[1] + collapsed
    return _draw(plt, hm, width, height)[0]


NAME_CHARS = 22  # an encoder's name is wrapped to lines of this many characters, or 8 a column where it has more


def _first_size(hm: Heatmap) -> tuple[float, float]:
    """Inches: the figure's width and height as first guessed from the texts' lengths."""
    n_rows, n_cols = len(hm.cells), len(hm.columns)
    lines = max((len(_wrapped(_short(m), 1).splitlines()) for m, _ in hm.columns), default=1)
    label = max((len(m) for m in hm.methods), default=0) * 0.075
    title = len(hm.setting) * 0.1 + 2.4
    return max(2.6 + 0.62 * n_cols + label, title), 2.1 + 0.32 * n_rows + 0.17 * lines


def _wrapped(name: str, columns: int) -> str:
    import textwrap

    return textwrap.fill(plot_text(name), max(NAME_CHARS, 8 * columns), break_long_words=True, break_on_hyphens=True)


def _draw(plt: Any, hm: Heatmap, width: float, height: float) -> tuple[Any, list[Any]]:
    """The figure at ``width`` x ``height`` inches, and the texts of the encoders' names (one per encoder)."""
    import numpy as np  # lazily: numpy stays out of light commands
    from matplotlib.colors import Normalize

    grid = np.ma.masked_invalid(np.array([[np.nan if c.delta is None or c.same else c.delta for c in row]
                                          for row in hm.cells], float))
    n_rows, n_cols = grid.shape
    norm, cmap = Normalize(-LIMIT, LIMIT), plt.get_cmap(CMAP).with_extremes(bad="#eeeeee")
    with plt.rc_context({"font.size": 10}):
        fig = plt.figure(figsize=(width, height), dpi=100, layout="constrained")
        ax = fig.add_subplot()
        image = ax.pcolormesh(np.arange(n_cols + 1) - 0.5, np.arange(n_rows + 1) - 0.5, grid, cmap=cmap, norm=norm,
                              edgecolors="white", linewidth=0.5)  # one quad per cell (a path each in SVG)
        for i, row in enumerate(hm.cells):
            for j, c in enumerate(row):
                strong = c.delta is not None and not c.same and abs(c.delta) > 0.6 * LIMIT
                ax.text(j, i, c.text, ha="center", va="center", fontsize=9, color="white" if strong else "black",
                        fontweight="bold" if c.significant and not c.same else "normal")
        ax.set_xticks(range(n_cols), [plot_text(unit) for _, unit in hm.columns], rotation=40, ha="right")
        ax.set_yticks(range(n_rows), [plot_text(m) for m in hm.methods])
        ax.tick_params(length=0)
        names = []
        for model in dict.fromkeys(model for model, _ in hm.columns):
            span = [j for j, (m, _) in enumerate(hm.columns) if m == model]
            names.append(ax.annotate(_wrapped(_short(model), len(span)), xy=((span[0] + span[-1]) / 2, 1),
                                     xycoords=("data", "axes fraction"), xytext=(0, 4), textcoords="offset points",
                                     ha="center", va="bottom", fontsize=10, fontweight="bold"))
            if span[0]:
                ax.axvline(span[0] - 0.5, color="black", linewidth=1.2)
        ax.set_ylim(n_rows - 0.5, -0.5)
        fig.suptitle(plot_text(f"{hm.setting[:1].upper()}{hm.setting[1:]}: difference from raw"))
        bar = fig.colorbar(image, ax=ax, extend="both", fraction=0.03, pad=0.02)
        bar.set_label("points (* = significant)")
    return fig, names


def _overflow(fig: Any, names: list[Any]) -> tuple[float, float, float]:
    """How much larger the drawn ``fig`` must be: inches of width and height by which its texts leave it, and the
    factor by which its columns must widen so that neighbouring encoder names keep apart (1: they do)."""
    from matplotlib.text import Text

    renderer, page = fig.canvas.get_renderer(), fig.bbox
    boxes = [t.get_window_extent(renderer) for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    dx = max([page.x0 - b.x0 for b in boxes] + [b.x1 - page.x1 for b in boxes] + [0.0])
    dy = max([page.y0 - b.y0 for b in boxes] + [b.y1 - page.y1 for b in boxes] + [0.0])
    spread = 1.0
    extents = [n.get_window_extent(renderer) for n in names]
    for a, b in zip(extents, extents[1:], strict=False):
        if a.x1 + 6 > b.x0:
            spread = max(spread, 1.0 + (a.x1 + 6 - b.x0) / max(b.x1 - a.x0, 1.0) * 2)
    inch = fig.dpi
    return (2 * dx / inch + 0.1 if dx else 0.0), (2 * dy / inch + 0.1 if dy else 0.0), spread
