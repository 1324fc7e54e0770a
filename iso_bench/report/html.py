"""The leaderboard as one self-contained web page (``iso-bench leaderboard DIR --format html -o site/``).

The same :class:`~iso_bench.report.cells.Leaderboard` the markdown renders, as ``index.html``: per model, the
same tables (score, 95% interval, difference from raw, significance mark), sortable by any column and filterable
by task group and by method; each cell's hover (its ``title``, and a panel at the foot of the screen when the
cell is tapped or focused) carries what the markdown cannot fit: the paired test's interval, p and q, the number
of evaluation units, the spread across seeds, the fit corpus of the row. The plots are inline SVG, each with the
caption of what it shows; the provenance of each table is folded (``<details>``). No CDN, no server, no external
file: the page opens from disk and works on any static host.

From a 390 px phone to a wide screen: the document is never wider than the screen (a table scrolls in its own
box, its row labels stay in view), a group's mean, which decides the ranking, is the first column after the row
label, a cell stacks its value, difference and interval, hashes and long names wrap, the plots scale to the
width, and the filter bar is not sticky, so it never covers a table's header.

Rendered with Jinja2 (its autoescaping: every text from a result file or a model name lands as text, never as
markup), from the template ``templates/leaderboard.html``; numbers are formatted as in the markdown
(:func:`~iso_bench.report.tables.format_cell`). Deterministic: the same results give the same bytes (the SVG
plots pin matplotlib's hash salt and date, :func:`iso_bench.report.plots.svg_plots`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from iso_bench.methods import METHODS
from iso_bench.report.cells import SAME, Cell, Column, Leaderboard, Row, Table
from iso_bench.report.heatmap import KEY as HEATMAP
from iso_bench.report.marks import MARKS
from iso_bench.report.matrix import Matrix, MatrixCell, matrix_note, verdict_matrices
from iso_bench.report.tables import (
    MINUS,
    MISSING,
    _label,
    benchmark_lines,
    board_benchmark,
    format_cell,
    format_delta,
    format_number,
)
from iso_bench.report.verdict import verdict_lines
from iso_bench.results.benchmark import bibtex

TEMPLATES = Path(__file__).resolve().parent / "templates"


def render_html(board: Leaderboard, plots: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> str:
    """``board`` as an HTML page; ``plots`` maps a section's key to its figures: ``(inline SVG, caption)``; those
    of :data:`iso_bench.report.heatmap.KEY` (the heatmaps) go under the verdict's matrices."""
    from jinja2 import (  # lazily: only the web page needs it
        Environment,
        FileSystemLoader,
        StrictUndefined,
        select_autoescape,
    )
    from markupsafe import Markup  # lazily: only the web page needs it

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    sections = []
    for s_index, section in enumerate(board.sections):
        tables = [_table(t, f"t{s_index}-{t_index}", section.title) for t_index, t in enumerate(section.tables)]
        figures = [{"svg": Markup(svg), "caption": caption} for svg, caption in (plots or {}).get(section.key, ())]
        sections.append({"title": section.title, "subtitle": section.subtitle, "tables": tables,
                         "figures": figures, "id": f"s{s_index}"})
    groups = sorted({t["group"] for s in sections for t in s["tables"]})
    methods = sorted({row["method"] for s in sections for t in s["tables"] for row in t["rows"]})
    matrices = verdict_matrices(board)
    return env.get_template("leaderboard.html").render(
        board=board, sections=sections, groups=groups, methods=methods, missing=MISSING,
        benchmark=" ".join(benchmark_lines(board, str)).replace("`", ""), bibtex=bibtex(board_benchmark(board)),
        verdict=verdict_lines(board), matrices=[_matrix(m) for m in matrices], matrix_note=matrix_note(matrices),
        heatmaps=[{"svg": Markup(_at_least_native(svg)), "caption": caption}
                  for svg, caption in (plots or {}).get(HEATMAP, ())])


def _at_least_native(svg: str) -> str:
    """A heatmap's SVG never drawn narrower than its own width (a pixel per point of its ``viewBox``, so its
    numbers stay readable): on a narrow screen it scrolls in its box instead of shrinking."""
    found = re.search(r'viewBox="0 0 ([0-9.]+) ', svg[:svg.index(">")])
    return svg if found is None else svg.replace("<svg ", f'<svg style="min-width:{float(found[1]):.0f}px" ', 1)


def _matrix(matrix: Matrix) -> dict[str, Any]:
    """A verdict matrix as the template shows it: each cell's two lines and its colour (:func:`_shade`)."""
    rows = [{"model": model, "cells": [{"unit": unit, "head": c.head, "tail": c.tail, "style": _shade(c)}
                                       for unit, c in zip(matrix.units, cells, strict=True)]}
            for model, cells in zip(matrix.models, matrix.cells, strict=True)]
    return {"setting": matrix.setting[:1].upper() + matrix.setting[1:], "units": matrix.units, "rows": rows}


def _shade(cell: MatrixCell) -> str:
    """A cell's background: green, darker with the winner's difference (full at +15 points and more); grey where
    raw stays best, white where nothing is judged. Dark text stays readable on every shade (lightness >= 62%)."""
    if cell.delta is None:
        return "background:#f1f1f1" if cell.judged else "background:#fff"
    lightness = 94 - 32 * min(max(cell.delta, 0.0), 15.0) / 15.0
    return f"background:hsl(125,55%,{lightness:.0f}%)"


def _table(table: Table, table_id: str, section: str) -> dict[str, Any]:
    """A table as the template shows it: one row-label column (several labels stacked in it), then the means
    (what decides the ranking), then the other columns in the board's order."""
    order = [j for j, c in enumerate(table.columns) if c.kind == "mean"]
    order += [j for j in range(len(table.columns)) if j not in order]
    columns = [{"label": table.columns[j].label, "kind": table.columns[j].kind} for j in order]
    fits = next((values for name, values in table.provenance if name == "fit"), ())
    rows = []
    for row in table.rows:
        method = _method(row)
        fit = [v for v in fits if v.startswith((f"{method} (", f"{method}:"))]
        labels = [_label(row, a) for a in table.labels]
        rows.append({"labels": labels, "sort": " ".join(labels), "method": method,
                     "cells": [_cell(row.cells[j], table.columns[j], row, fit) for j in order]})
    group = table.title.split(":")[0] if table.labels == ("variant",) else "models compared"
    return {"id": table_id, "title": table.title, "group": group, "label": " / ".join(table.labels),
            "columns": columns, "rows": rows, "notes": list(table.notes), "provenance": table.provenance,
            "section": section}


def _method(row: Row) -> str:
    """The method a row shows (its variant's method name): what the method filter selects."""
    spec = row.variant
    names = sorted((n for n in METHODS if spec == n or spec.startswith(n + "-")), key=len)
    return names[-1] if names else spec


def _cell(cell: Cell, column: Column, row: Row, fit: list[str]) -> dict[str, Any]:
    """The parts a cell stacks (value with its spread, difference from raw, interval), as the markdown writes
    them, the number a sort reads, and the hover text."""
    parts = {"value": MISSING, "delta": "", "interval": ""}
    if cell.value is not None:
        plain = Cell(cell.value, sd=cell.sd)  # the value and its spread alone
        parts = {"value": format_cell(plain, column, MINUS),
                 "delta": "" if cell.delta is None else f"({format_delta(cell.delta, column.fmt)})",
                 "interval": "" if cell.low is None or cell.high is None else
                 f"[{format_number(cell.low, column.fmt, MINUS)}, {format_number(cell.high, column.fmt, MINUS)}]"}
    if cell.unchanged:  # raw's vectors, so raw's score: no result of the method (the sort still reads the value)
        parts = {"value": SAME, "delta": "", "interval": ""}
    return {**parts, "sort": "" if cell.value is None else repr(float(cell.value)), "best": cell.best,
            "significant": cell.significant and not cell.unchanged, "mark": MARKS.get(cell.mark, ""),
            "title": _hover(cell, column, row, fit),
            "missing": cell.value is None}


def _hover(cell: Cell, column: Column, row: Row, fit: list[str]) -> str:
    """What the markdown cannot fit: the paired test (its interval, p and q), the units the value is computed from,
    the seeds' spread, the setup and the fit corpus (the table's provenance lines of the row's method)."""
    if cell.value is None:
        return "withheld: not meaningful for this row (see the notes)" if cell.withheld else "missing result"
    parts = [f"{row.label}: {column.label}"]
    if cell.unchanged:
        parts.append(f"{SAME}: every fit zeroed no dimension here, so the vectors are raw's and the score is raw's "
                     f"({format_number(cell.value, column.fmt, MINUS)})")
    if cell.low is not None:
        parts.append(f"95% interval [{_num(cell.low)}, {_num(cell.high)}]")
    if cell.n is not None:
        parts.append(f"n = {cell.n:,} evaluation units" + (" over its tasks" if column.kind == "mean" else ""))
    if cell.sd is not None:
        parts.append(f"seed spread: standard deviation {_num(cell.sd)} across the seeds")
    if cell.delta is not None:
        diff = f"difference from raw {format_delta(cell.delta, column.fmt)}"
        if cell.delta_low is not None:
            diff += f" [{_num(cell.delta_low)}, {_num(cell.delta_high)}]"
        parts.append(diff)
    if cell.p is not None:
        parts.append(f"paired test: p = {cell.p:.6g}, q = {cell.q:.6g}" + (" (significant)" if cell.significant
                                                                             else " (not significant)"))
    if row.setup:
        parts.append(f"setup: {row.setup}")
    parts += [f"fit: {line}" for line in fit]
    return "; ".join(parts)


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.4g}".replace("-", MINUS)
