"""Renderers of the table model (:mod:`.board`): markdown (tabulate) and CSV (LaTeX: :mod:`.latex`); the run
summary of ``iso-bench run``; the markdown of an outlier report.

Pure functions of their input, so the same results always give the same bytes. Numbers are formatted once
(:func:`format_cell`), with the same rules in every format. A cell computed from a modified or unverified
result is followed by its mark (:data:`iso_bench.report.marks.MARKS`: ``†``, ``°``), outside its bold; CSV
gives it in a column of its own, ``check``.

A board with intervals (``Leaderboard.ci``) shows a cell as ``82.03 [81.21, 82.84] (+1.62)*``: the interval in
brackets (CSV: columns of their own, with the test's bounds, p and q), a merged row's spread as ``± 0.27`` after
the value, and ``*`` (outside the bold) after a difference from raw that stays significant over the table.

Every text that comes from a result file or a model name (names, revisions, setups, notes, provenance) goes
through the escape of its format (:mod:`.escape`): it is shown as written, never read as markup.

>>> board = build_leaderboard(read_results("results"))          # doctest: +SKIP
>>> text = render_markdown(board)                              # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from iso_bench.kinds.cards import Group, find_card
from iso_bench.report.cells import COMPARISON, PERCENT_DECIMALS, SAME, Cell, Column, Leaderboard, Row, Section, Table
from iso_bench.report.escape import csv_text, md_code, md_text, md_url
from iso_bench.report.heatmap import KEY as HEATMAP
from iso_bench.report.heatmap import heatmaps
from iso_bench.report.index import NO_BENCHMARK
from iso_bench.report.marks import MARKS
from iso_bench.report.matrix import Matrix, matrix_note, verdict_matrices
from iso_bench.report.plots import plot_data
from iso_bench.report.verdict import verdict_lines
from iso_bench.results.benchmark import CITATION_KEY, NAME, VERSIONS, definition_sha256
from iso_bench.results.result_files import VERIFIED

if TYPE_CHECKING:
    from iso_bench.numerics.outliers import OutlierReport

MISSING = "–"  # en dash: a missing result
MINUS = "−"  # U+2212 in markdown; CSV uses "-" and LaTeX "$-$"


def format_number(value: float, fmt: str, minus: str = "-") -> str:
    """``82.03`` for a percent, ``0.7666`` for a fraction (``1.2e-05`` when tiny); ``minus`` for a negative.

    >>> format_number(82.0349, "percent"), format_number(0.766573, "fraction"), format_number(1.2e-5, "fraction")
    ('82.03', '0.7666', '1.2e-05')
    """
    if fmt == "percent":
        text = f"{value:.{PERCENT_DECIMALS}f}"
    else:
        text = f"{value:.4f}" if value == 0 or abs(value) >= 1e-3 else f"{value:.1e}"
    return minus + text[1:] if text.startswith("-") else text


def format_delta(delta: float, fmt: str, minus: str = MINUS, zero: str = "±") -> str:
    """A signed difference: ``+1.20``, ``−2.10`` and ``±0.00`` (zero as shown).

    >>> format_delta(-2.1, "percent"), format_delta(0.0, "percent"), format_delta(0.5, "percent", "-")
    ('−2.10', '±0.00', '+0.50')
    """
    text = format_number(abs(delta), fmt)
    if float(text) == 0:
        return f"{zero}{text}"
    return f"{'+' if delta > 0 else minus}{text}"


def format_cell(cell: Cell, column: Column, minus: str = MINUS, bounds: bool = True) -> str:
    """``82.03``, ``79.93 (−2.10)``, ``–`` (missing or withheld) or ``= raw`` (the row's vectors are raw's there),
    without emphasis (each renderer adds its own bold); with what the cell carries: ``78.52 ± 0.27 [77.90, 79.10]
    (−2.10)`` (the interval only with ``bounds``)."""
    if cell.value is None:
        return MISSING
    if cell.unchanged:
        return SAME
    text = format_number(cell.value, column.fmt, minus)
    if cell.sd is not None:
        text += f" ± {format_number(cell.sd, column.fmt, minus)}"
    if bounds and cell.low is not None and cell.high is not None:
        text += f" [{format_number(cell.low, column.fmt, minus)}, {format_number(cell.high, column.fmt, minus)}]"
    return text if cell.delta is None else f"{text} ({format_delta(cell.delta, column.fmt, minus)})"


def _label(row: Row, attr: str) -> str:
    if attr == "variant":  # "clip (best)"; a tag that is a phrase of its own: "clip = raw (no dimension zeroed)"
        return row.label + (f" {row.tag}" if row.tag.startswith("=") else f" ({row.tag})" if row.tag else "")
    return row.revision[:12] if attr == "revision" else getattr(row, attr)


def _grid(table: Table, bold: Callable[[str], str], minus: str, escape: Callable[[str], str],
          star: str = "*") -> list[list[str]]:
    """The cells as text, each with its interval, difference, significance and mark."""
    def shown(c: Cell, col: Column) -> str:
        text = escape(format_cell(c, col, minus))
        sig = star if c.significant and not c.unchanged else ""
        return (bold(text) if c.best else text) + sig + escape(MARKS.get(c.mark, ""))

    return [[escape(_label(row, a)) for a in table.labels]
            + [shown(c, col) for c, col in zip(row.cells, table.columns, strict=True)] for row in table.rows]


def _tabulate(table: Table, fmt: str, bold: Callable[[str], str], minus: str, escape: Callable[[str], str],
              star: str = "*") -> str:
    headers = [escape(h) for h in (*table.labels, *(c.label for c in table.columns))]
    align = ("left",) * len(table.labels) + ("right",) * len(table.columns)
    return tabulate(_grid(table, bold, minus, escape, star), headers=headers, tablefmt=fmt,
                    disable_numparse=True, colalign=align)


def _md_cell(text: str) -> str:
    return md_text(text, cell=True)


def markdown_table(table: Table) -> str:
    """One table in GitHub markdown (tabulate's "pipe"), then its notes and its provenance, as lists; every text
    that comes from a result file or a model name escaped (:func:`iso_bench.report.escape.md_text`)."""
    out = [_tabulate(table, "pipe", lambda s: f"**{s}**", MINUS, _md_cell, "\\*"), ""]
    out += [f"- {md_text(n, block=True)}" for n in table.notes] + ["", "Provenance:", ""]
    for name, values in table.provenance:
        if len(values) == 1:
            out.append(f"- {md_text(name)}: {_md_value(name, values[0])}")
        else:
            out += [f"- {md_text(name)}:"] + [f"  - {_md_value(name, v, block=True)}" for v in values]
    return "\n".join(out) + "\n"


def render_markdown(board: Leaderboard, plots: Mapping[str, str] | None = None) -> str:
    """The leaderboard as GitHub markdown; ``plots`` maps a section's key to its plot's relative file name (and
    each heatmap's key, :func:`iso_bench.report.heatmap.heatmap_files`, to its own: shown under the matrices).

    A section per model (a table per task group, each followed by its notes and provenance, then its plot, or
    with ``plots`` given a line saying why it has none: :func:`no_plot_note`), then the model comparison.
    Deterministic: a function of the data only.
    """
    out = ["# iso-bench leaderboard", "",
           f"Built from {board.n_files} result files. Every table is followed by the provenance of its numbers; "
           f"{MISSING} is a missing result, never averaged.", "", *benchmark_lines(board, md_text), ""]
    found = verdict_lines(board)
    if found:
        pictures = [(hm, plots[key]) for hm in heatmaps(board) if (key := f"{HEATMAP}:{hm.setting}") in (plots or {})]
        out += ["## Verdict", "", *matrix_markdown(verdict_matrices(board))]
        for hm, name in pictures:
            alt = md_text(f"heatmap: difference from raw, {hm.setting}", brackets=True)
            out += [f"![{alt}]({md_url(name)})", "", md_text(hm.caption, block=True), ""]
        out += ["Each judgement in words:", "", *[f"- {md_text(line)}" for line in found], ""]
    for section in board.sections:
        out += [f"## {md_text(section.title)}", ""]
        out += [md_text(section.subtitle, block=True), ""] if section.subtitle else []
        for table in section.tables:
            out += [f"### {md_text(table.title)}", "", markdown_table(table)]
        plot = plot_data(section) if plots and section.key in plots else None
        if plot is not None:
            alt = md_text(f"{plot.y_label} against {plot.x_label}, {plot.title}", brackets=True)
            out += [f"![{alt}]({md_url(plots[section.key])})", ""]
        elif plots is not None and section.key != COMPARISON:
            out += [no_plot_note(section), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def matrix_markdown(matrices: Sequence[Matrix]) -> list[str]:
    """The verdict matrices (:mod:`.matrix`) in markdown: per fit setting a line naming it, then a table (a row per
    encoder, a column per judged unit); the note on how a cell is decided under them."""
    out = []
    for m in matrices:
        rows = [[_md_cell(model), *(_md_cell(c.text) for c in cells)] for model, cells in zip(m.models, m.cells,
                                                                                             strict=True)]
        table = tabulate(rows, headers=["encoder", *(_md_cell(u) for u in m.units)], tablefmt="pipe",
                         disable_numparse=True)
        out += [f"**{md_text(m.setting[:1].upper() + m.setting[1:])}**", "", table, ""]
    return out + [md_text(matrix_note(matrices), block=True), ""] if out else []


def no_plot_note(section: Section) -> str:
    """Why a model's section of a board written with plots has none: its plot shows the isotropy task's sentence
    IsoScore against the model's mean scores, and one of the two is missing."""
    if not any(c.kind == "diagnostic" for t in section.tables for c in t.columns):
        why = "no isotropy diagnostics (run the isotropy suite: iso-bench run --tasks isotropy)"
    else:
        why = "no table with a mean score to plot them against"
    return (f"No plot for {md_text(section.title)}: the plot shows each variant's sentence IsoScore against its mean "
            f"scores, and its results have {why}.")


def board_benchmark(board: Leaderboard) -> str:
    """The benchmark a board is of: the one definition its results record where that is a published version (the
    v1 and v2 boards stay v1 and v2 boards), else this iso-bench's (:data:`~iso_bench.results.benchmark.NAME`)."""
    labels = [label for label, _ in board.benchmarks if label != NO_BENCHMARK]
    known = {f"{name}, definition {definition_sha256(name)[:12]}": name for name in VERSIONS}
    return known[labels[0]] if len(labels) == 1 and labels[0] in known else NAME


def benchmark_lines(board: Leaderboard, escape: Callable[[str], str]) -> list[str]:
    """The benchmark the board is of (:func:`board_benchmark`), how many of the board's results record which
    benchmark, and how to cite it (:mod:`iso_bench.results.benchmark`)."""
    counts = "; ".join(f"{escape(label)}: {n}" for label, n in board.benchmarks) or "none"
    name = board_benchmark(board)
    where = "definition()" if name == NAME else f"definition({name!r})"
    return [f"Benchmark: {name}, definition SHA-256 {definition_sha256(name)} (its tasks, main scores, fit protocol "
            f"and method defaults: `iso_bench.results.benchmark.{where}`). Result files by the benchmark they record: "
            f"{counts}. Cite as `{CITATION_KEY}` (CITATION.cff at the repository root), with the definition's "
            "SHA-256."]


def _md_value(name: str, value: str, block: bool = False) -> str:
    if name == "command" and value.startswith("iso-bench"):
        return md_code(value)
    return md_text(value, block=block)


def render_csv(board: Leaderboard) -> str:
    """One line per cell (tidy): table, model, revision, variant, tag, column, value, delta_vs_raw, best, check.

    ``variant`` is the row's label: ``whiten``, or ``whiten [fitted on held-out texts]`` where a variant has several
    setups (:mod:`.setups`). A board with intervals adds :data:`CI_COLUMNS`: the interval, the standard
    deviation across seeds of a merged row, the paired test of the difference from raw (its interval, p and
    q-value) and whether it is significant (1/0; empty where untested).

    Numbers as shown in markdown but plain (ASCII minus, no ``±``), so ``float()`` reads them; an empty
    value is a missing result, or one withheld (I(W) of whitened vectors). A name is one line (a newline shown
    as a space), and one that starts like a formula (``=`` ``+`` ``-`` ``@``) gets a leading ``'``. Notes and
    provenance stay in the markdown and LaTeX outputs. ``check`` is ``verified``, ``modified`` (a result the value
    is computed from no longer matches its digest) or ``unverified`` (one has no digest); empty where the value is.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["table", "model", "revision", "variant", "tag", "column", "value", "delta_vs_raw", "best",
                     "check", *(CI_COLUMNS if board.ci else ())])
    for section in board.sections:
        for table in section.tables:
            for row in table.rows:
                for cell, col in zip(row.cells, table.columns, strict=True):
                    value = "" if cell.value is None else format_number(cell.value, col.fmt)
                    delta = "" if cell.delta is None else format_delta(cell.delta, col.fmt, "-", "")
                    check = "" if cell.value is None else cell.mark or VERIFIED
                    names = [csv_text(t) for t in (table.title, row.model, row.revision, row.label)]
                    writer.writerow([*names, csv_text(row.tag), csv_text(col.label), value, delta,
                                     "1" if cell.best else "0", check,
                                     *(_csv_uncertainty(cell, col) if board.ci else ())])
    return buf.getvalue()


CI_COLUMNS = ("low", "high", "sd_seeds", "delta_low", "delta_high", "p_value", "q_value", "significant")


def _csv_uncertainty(cell: Cell, col: Column) -> list[str]:
    """The :data:`CI_COLUMNS` of a cell: its interval, its spread across seeds, its test; empty where none."""
    def number(v: float | None) -> str:
        return "" if v is None else format_number(v, col.fmt)

    def prob(v: float | None) -> str:
        return "" if v is None else f"{v:.6g}"

    return [number(cell.low), number(cell.high), number(cell.sd), number(cell.delta_low), number(cell.delta_high),
            prob(cell.p), prob(cell.q), "" if cell.q is None else "1" if cell.significant else "0"]


# ------------------------------------------------------------------ the run summary of `iso-bench run`


def format_summary(summary: Any) -> str:
    """A small plain table of main scores x 100, variants as rows (``summary``: a RunSummary, with ``.scores``
    by variant model name and task, and ``.tasks``): first, for each group of ranked tasks of which two or more
    ran, its unweighted mean (– where a task is missing) and that mean's difference from raw (of the shown,
    rounded values); then each task."""
    groups: dict[str, tuple[Group, list[str]]] = {}
    for task in summary.tasks:
        card = find_card(task)
        if card is not None and card.group.ranked and card.group.mean:
            groups.setdefault(card.group.key, (card.group, []))[1].append(task)
    means = [(g, ts) for g, ts in sorted(groups.values(), key=lambda item: (item[0].order, item[0].key)) if len(ts) > 1]

    def mean(row: Mapping[str, float | None], tasks: list[str]) -> float | None:
        values = [v for v in (row.get(t) for t in tasks) if v is not None]
        return round(100 * math.fsum(values) / len(tasks), 2) if len(values) == len(tasks) else None

    raw = next((row for name, row in summary.scores.items() if name.rpartition("+")[2] == "raw"), None)
    headers = ["variant", *(h for g, ts in means for h in (f"mean {g.mean} ({len(ts)} tasks)", "vs raw")),
               *summary.tasks]
    rows = []
    for name, row in summary.scores.items():
        cells = []
        for _, tasks in means:
            value, ref = mean(row, tasks), None if raw is None else mean(raw, tasks)
            delta = "" if row is raw else MISSING if value is None or ref is None else format_delta(value - ref,
                                                                                                   "percent")
            cells += [MISSING if value is None else f"{value:.2f}", delta]
        rows.append([name.rpartition("+")[2], *cells,
                     *[(MISSING if row.get(t) is None else f"{100 * row[t]:.2f}") for t in summary.tasks]])
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def summary_header(summary: Any) -> str:
    """The line above :func:`format_summary`: the model, and the metric of each group of tasks that ran.

    >>> import types
    >>> summary_header(types.SimpleNamespace(model="m", revision="r", tasks=["EmotionClassification"]))
    'm @ r: main score x 100 (EmotionClassification: main score)'
    """
    groups: dict[str, Group] = {}
    uncarded: list[str] = []
    for task in summary.tasks:
        card = find_card(task)
        if card is None:
            uncarded.append(task)
        else:
            groups.setdefault(card.group.key, card.group)
    parts = [f"{g.title}: {g.metric}" for g in sorted(groups.values(), key=lambda g: (g.order, g.key))]
    parts += [f"{', '.join(uncarded)}: main score"] if uncarded else []
    return f"{summary.model} @ {summary.revision}: main score x 100" + (f" ({'; '.join(parts)})" if parts else "")


# ------------------------------------------------------------------ the outlier report


def render_outlier_markdown(report: OutlierReport, top: int = 5, png_name: str | None = None) -> str:
    """A markdown report: per layer, the detected outliers and the top dimensions with their statistics."""
    lines = [f"# Outlier dimensions of {md_text(report.model)}", "",
             f"Revision {md_code(report.revision)}; corpus: {md_text(report.corpus)} ({report.n_texts:,} texts, "
             f"{report.n_tokens:,} token vectors, {report.tokens}"
             f"{'; run in ' + report.extraction['dtype'] if report.extraction.get('dtype') else ''}).", "",
             "A dimension is an outlier when it is the smallest or largest coordinate of at least max(10/d, 5%) "
             "of the token vectors and its mean lies at least 3 standard deviations (of the other dimensions' "
             "means) from the others; `clip` uses the same rule. *pos. corr.* is the Pearson correlation between "
             "token position and the dimension's mean value at that position. *first-pos. share* is the share of the "
             "vectors in which the dimension is the smallest or largest coordinate that are a text's first; "
             "*first-position dimensions* are the outliers of the first-position vectors alone (the same rule): "
             "dimensions of huge value at the first token only, as decoders carry, which the counts over all "
             "tokens dilute.", ""]
    if png_name:
        lines += [f"![extreme-value fraction per layer]({png_name})", ""]
    summary = [[r.layer, ", ".join(map(str, r.outliers)) or "none", ", ".join(map(str, r.first_outliers)) or "none"]
               for r in report.layers]
    lines += [tabulate(summary, headers=["layer", "outlier dimensions", "first-position dimensions"],
                       tablefmt="github", disable_numparse=True), ""]
    for r in report.layers:
        rows = [[t["dim"], f"{t['argmin_fraction']:.3f}", f"{t['argmax_fraction']:.3f}", f"{t['mean']:.3f}",
                 f"{t['mean_z']:.1f}", "–" if t["position_correlation"] is None else f"{t['position_correlation']:.2f}",
                 "–" if t["first_share"] is None else f"{t['first_share']:.2f}",
                 "yes" if t["outlier"] else "", "yes" if t["first_outlier"] else ""] for t in r.top(top)]
        lines += [f"## Layer {r.layer}", "",
                  tabulate(rows, headers=["dim", "argmin frac.", "argmax frac.", "mean", "mean z", "pos. corr.",
                                          "first-pos. share", "outlier", "first-position"], tablefmt="github",
                           disable_numparse=True), ""]
    return "\n".join(lines)
