"""Reporting: results folder -> leaderboard (markdown, CSV, LaTeX, plots); the run summary; outlier reports.

The flow is one way: :mod:`.results` reads the mteb result files (plain and experiment folders), :mod:`.board`
aggregates them into a table model (a row per variant and setup, :mod:`.setups`, :mod:`.index`; groups from the
task cards, means, the model comparison; :mod:`.provenance` under every table; each cell's interval, seed spread
and paired test against raw from the evaluation units beside the results, :mod:`.units` and
:mod:`.uncertainty`), :mod:`.tables` and :mod:`.plots` render it.
No argparse here: the command line calls these functions. Importing this package loads neither torch nor mteb;
matplotlib only when a plot is drawn.

Example:
    >>> text = write_leaderboard("results")                                 # doctest: +SKIP
    >>> paths = write_leaderboard("results", "leaderboards/leaderboard.md")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iso_bench.files import NotARegularFile, atomic_write_text, file_kind, write_target
from iso_bench.report.board import build_leaderboard
from iso_bench.report.budget import Budget, budget_html, budget_latex, budget_markdown, budgets, write_budget_plots
from iso_bench.report.cells import Leaderboard
from iso_bench.report.html import render_html
from iso_bench.report.latex import render_latex
from iso_bench.report.plots import plot_data, plot_files, plot_outliers, svg_plots, write_plots
from iso_bench.report.resample import Bootstrap
from iso_bench.report.results import LeaderboardError, Result, read_results, split_model_name
from iso_bench.report.tables import (
    format_summary,
    markdown_table,
    render_csv,
    render_markdown,
    render_outlier_markdown,
    summary_header,
)
from iso_bench.report.units import UnitsStore

if TYPE_CHECKING:
    from iso_bench.numerics.outliers import OutlierReport

RENDERERS: dict[str, Callable[[Leaderboard], str]] = {"markdown": render_markdown, "csv": render_csv,
                                                      "latex": render_latex}
FORMATS: tuple[str, ...] = (*RENDERERS, "html")
BUDGET: dict[str, tuple[str, Callable[..., str]]] = {
    "markdown": (".md", lambda lines, _: "# Per budget\n\n" + budget_markdown(lines)),
    "html": (".html", lambda lines, _: budget_html(lines)), "latex": (".tex", budget_latex)}
"""The table per budget beside a board, per format: the file's suffix and its text (of the lines and ``fragment``)."""
HTML_INDEX = "index.html"


def render(board: Leaderboard, fmt: str = "markdown", fragment: bool = False) -> str:
    """``board`` in one of :data:`FORMATS` (``fragment``: LaTeX's tables without the document around them);
    :class:`LeaderboardError` for another name."""
    if fmt == "html":
        return render_html(board, svg_plots(board))
    if fmt not in RENDERERS:
        raise LeaderboardError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    return render_latex(board, fragment) if fmt == "latex" else RENDERERS[fmt](board)


def write_leaderboard(results_dir: str | Path, output: str | Path | None = None, fmt: str = "markdown",
                      plot: bool = True, accept_modified: bool = False, ci: bool = True,
                      fragment: bool = False) -> list[Path] | str:
    """The leaderboard of ``results_dir``: its text when ``output`` is None, else the files written.

    With ``output``, markdown also gets one plot per model (``<stem>-<model>.png`` beside ``output``, linked
    from it) unless ``plot`` is False; the paths come back output first, then the plots, sorted. ``html`` writes
    one self-contained page, ``output/index.html`` for a folder (plots inline as SVG). Where the variants store
    vectors of several sizes (storage stages, dimension cuts), markdown also gets ``<stem>-budget.md``, the best
    variant at each size beside raw at that size, and a picture per model of score against bytes
    (:mod:`.budget`); html and latex the same table beside the board (``<stem>-budget.html``, ``.tex``: a page, a
    document or with ``fragment`` a fragment), the board itself unchanged. Raises
    :class:`LeaderboardError` (an ``IsoBenchError``: bad input, with the folder or file named) for a missing
    or empty folder (or a file given as one), a malformed result file, an unknown format, an ``output`` that
    cannot be written (:func:`writable_output`, checked before any work), and for a result file whose scores no
    longer match the digest written with them (edited after its run) unless ``accept_modified``: then it is
    rendered with its cells marked † and a legend note. Results without a digest are marked ° (unverified).

    With ``ci`` (the default) each score cell shows its 95% interval, each difference from raw its paired test
    (``*``: significant after Benjamini-Hochberg over the table), and runs that differ only in seed one row of
    their mean ± standard deviation (:mod:`.uncertainty`); a units file whose bytes no longer match the SHA-256
    in its record is refused like a modified result (or marked †, without interval, with ``accept_modified``).
    ``ci=False`` renders the tables without any of it, reading no units file.

    ``latex`` is a complete document that pdflatex compiles as written; ``fragment`` gives its tables alone (with
    their provenance), to ``\\input`` into a paper (:mod:`.latex`).

    >>> write_leaderboard("leaderboards", "leaderboards/leaderboard.md")   # doctest: +SKIP
    [PosixPath('leaderboards/leaderboard.md'), PosixPath('leaderboards/leaderboard-org__model.png')]
    """
    _check_format(fmt, fragment)
    _check_folder(results_dir)
    if fmt == "html" and output is not None:
        output = _html_index(output)
    out = None if output is None else writable_output(output)
    computed = compute_leaderboard(results_dir, accept_modified, ci)
    if out is None:
        return render(computed.board, fmt, fragment)
    return _write(computed, out, fmt, plot, fragment)


@dataclasses.dataclass
class ComputedBoard:
    """A results folder read and aggregated once (:func:`compute_leaderboard`): its ``results``, its ``board`` (every
    interval and paired test) and, computed on first use, its per-budget lines (:func:`.budget.budgets`);
    :func:`write_computed` writes it in any format, so that several formats of one folder cost one computation."""

    results: list[Result]
    board: Leaderboard
    ci: bool = True
    accept_modified: bool = False
    boot: Bootstrap | None = dataclasses.field(default=None, repr=False)  # the board's draws, reused per budget

    @functools.cached_property
    def budget_lines(self) -> list[Budget]:
        return budgets(self.results, self.ci, boot=self.boot)


def compute_leaderboard(results_dir: str | Path, accept_modified: bool = False, ci: bool = True) -> ComputedBoard:
    """What :func:`write_leaderboard` renders from ``results_dir`` (same arguments, same errors), computed once."""
    _check_folder(results_dir)
    results = read_results(results_dir, accept_modified)
    boot = Bootstrap(UnitsStore()) if ci else None
    return ComputedBoard(results, build_leaderboard(results, ci, accept_modified, boot=boot), ci, accept_modified, boot)


def write_computed(computed: ComputedBoard, output: str | Path, fmt: str = "markdown", plot: bool = True,
                   fragment: bool = False) -> list[Path]:
    """The files :func:`write_leaderboard` writes to ``output`` in ``fmt``, from a :class:`ComputedBoard`."""
    _check_format(fmt, fragment)
    return _write(computed, writable_output(_html_index(output) if fmt == "html" else output), fmt, plot, fragment)


def _check_format(fmt: str, fragment: bool) -> None:
    if fmt not in FORMATS:
        raise LeaderboardError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if fragment and fmt != "latex":
        raise LeaderboardError(f"--fragment (the tables without the document around them) is for --format latex, "
                               f"not {fmt}: add --format latex, or leave --fragment out")


def _check_folder(results_dir: str | Path) -> None:
    if Path(results_dir).is_file():
        raise LeaderboardError(f"{results_dir}: is a file, not a results folder; give the folder that holds "
                               "results/<model>/<revision>/<task>.json (the --results folder of iso-bench run)")


def _write(computed: ComputedBoard, out: Path, fmt: str, plot: bool, fragment: bool) -> list[Path]:
    """Write ``computed`` to ``out`` (checked writable) in ``fmt``: the board, its plots, its table per budget."""
    board, budget = computed.board, not computed.accept_modified
    if fmt == "markdown" and plot:  # the plots' files, beside the output, are checked before any is drawn
        for name in plot_files(board, out.stem).values():
            writable_output(out.parent / name)
    if fmt == "html":
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out, render(board, fmt))
            return [out, *(_write_budget(computed, out, False, fmt) if budget else [])]
        except OSError as exc:
            raise LeaderboardError(_cannot_write(out, exc)) from None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        plots = write_plots(board, out.parent, out.stem) if fmt == "markdown" and plot else {}
        drawn = fmt == "markdown" and plot  # plots asked for: a section without one says why
        atomic_write_text(out, render_markdown(board, plots) if drawn else render(board, fmt, fragment))
        extra = _write_budget(computed, out, drawn, fmt, fragment) if fmt in BUDGET and budget else []
    except OSError as exc:
        raise LeaderboardError(_cannot_write(out, exc)) from None
    return [out, *(out.parent / name for name in sorted(plots.values())), *extra]


def _write_budget(computed: ComputedBoard, out: Path, plot: bool, fmt: str = "markdown",
                  fragment: bool = False) -> list[Path]:
    """Where the variants store vectors of several sizes (:mod:`.budget`): the table of the best variant at each
    size beside raw at that size, beside the board in its format (``<stem>-budget.md``, ``.html``, ``.tex``; the
    board's own bytes unchanged), and with ``plot`` (markdown) a picture per model of score against bytes."""
    lines = computed.budget_lines
    if not lines:
        return []
    suffix, text = BUDGET[fmt]
    path = out.parent / f"{out.stem}-budget{suffix}"
    atomic_write_text(path, text(lines, fragment))
    return [path, *(write_budget_plots(lines, out.parent, out.stem) if plot else [])]


def _html_index(output: str | Path) -> Path:
    """The page of ``--format html -o OUT``: ``OUT/index.html`` for a folder (existing, or named with a
    trailing ``/`` or without a suffix), else ``OUT`` itself (a file such as ``page.html``)."""
    text = str(output)
    if not text.strip():
        return Path(text)  # refused by writable_output, with its message
    out = Path(text)
    if out.is_dir() or text.endswith(("/", "\\")) or not out.suffix:
        return out / HTML_INDEX
    return out


def writable_output(output: str | Path) -> Path:
    """``output`` as a path the leaderboard (and its plots, beside it) can be written to, checked before any
    work: :class:`LeaderboardError`, naming it and what to do, for an empty path, a folder, a path under a file,
    anything else that is not a regular file (a FIFO, a device such as ``/dev/null`` or ``/dev/stdout``, a
    socket: a temporary file renamed over it would replace it, and its reader would get nothing), or a folder
    that cannot be written (read-only file system, ``/proc``, no permission). A symlink is written through to
    its target (:func:`iso_bench.files.write_target`), whose folder is the one checked."""
    if not str(output).strip():
        raise LeaderboardError("the output path is empty (-o ''): give a file to write, e.g. -o leaderboard.md, "
                               "or leave -o out to print to standard output")
    out = Path(output)
    if out.is_dir():
        raise LeaderboardError(f"{out}: is a folder, not a file; give a file to write, e.g. -o "
                               f"{out / 'leaderboard.md'}")
    try:
        target = write_target(out)
    except NotARegularFile as exc:
        raise LeaderboardError(f"{exc}; to print the leaderboard, leave -o out (and redirect standard output)"
                               ) from None
    folder = next((p for p in target.parents if p.exists()), Path("."))  # the nearest folder that is there
    if not folder.is_dir():
        kind = file_kind(folder)
        raise LeaderboardError(f"{out}: {folder} is {'a file' if kind == 'a regular file' else kind}, not a folder; "
                               "give a file path in a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise LeaderboardError(_cannot_write(out, exc)) from None
    return out


def _cannot_write(out: Path, exc: OSError) -> str:
    return (f"{out}: cannot write the leaderboard there ({exc.strerror or exc}); give a file in a folder you can "
            "write to")


def write_outlier_reports(report: OutlierReport, folder: str | Path, top: int = 5) -> list[Path]:
    """Write ``<model>-outliers.{md,json,png}`` of an :class:`iso_bench.numerics.outliers.OutlierReport` into
    ``folder``.

    Returns the paths, markdown first. The markdown lists ``top`` dimensions per layer, the JSON
    ``max(top, 10)``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = report.model.replace("/", "__") + "-outliers"
    png, md, js = folder / f"{stem}.png", folder / f"{stem}.md", folder / f"{stem}.json"
    plot_outliers(report, png, top)
    atomic_write_text(md, render_outlier_markdown(report, top, png.name) + "\n")
    atomic_write_text(js, json.dumps(report.to_dict(max(top, 10)), indent=2, sort_keys=True, allow_nan=False,
                                     default=_json_default) + "\n")
    return [md, js, png]


def _json_default(value: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {value!r}")


__all__ = ["FORMATS", "ComputedBoard", "Leaderboard", "LeaderboardError", "Result", "build_leaderboard",
           "compute_leaderboard", "format_summary", "markdown_table", "plot_data", "read_results", "render",
           "render_csv", "render_latex", "render_markdown", "render_outlier_markdown", "split_model_name",
           "summary_header", "writable_output", "write_computed", "write_leaderboard", "write_outlier_reports",
           "write_plots"]
