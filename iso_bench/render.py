"""The table model of a leaderboard (plain data) and its renderers: markdown (tabulate), CSV, LaTeX, PNG.

:mod:`iso_bench.leaderboard` reads results and fills the model (:class:`Leaderboard` of sections of
:class:`Table` rows of :class:`Cell`, each table with notes and :func:`provenance` lines); the renderers
here are pure functions of it, so the same results always give the same bytes. Numbers are formatted
once (:func:`format_cell`), with the same rules in every format.

>>> from iso_bench.leaderboard import build_leaderboard, read_results
>>> board = build_leaderboard(read_results("results"))          # doctest: +SKIP
>>> text = render_markdown(board)                              # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

if TYPE_CHECKING:
    from iso_bench.leaderboard import Result

PERCENT_DECIMALS = 2  # scores are shown × 100 with two decimals
MISSING = "–"  # en dash: a missing result
MINUS = "−"  # U+2212 in markdown; CSV uses "-" and LaTeX "$-$"


@dataclass(frozen=True)
class Column:
    """A data column: ``kind`` is "score" (a task), "mean" or "diagnostic"; ``fmt`` "percent" or "fraction"."""

    key: str
    label: str
    kind: str = "score"
    fmt: str = "percent"


@dataclass(frozen=True)
class Cell:
    """A number as shown (percent cells are already rounded), its difference from raw, and the best flag."""

    value: float | None = None
    delta: float | None = None
    best: bool = False

    @property
    def missing(self) -> bool:
        return self.value is None


@dataclass(frozen=True)
class Row:
    """One variant of one model; ``tag`` marks a role such as "best" in the model comparison."""

    model: str
    revision: str
    variant: str
    cells: tuple[Cell, ...]
    tag: str = ""


@dataclass(frozen=True)
class Table:
    """Rows of labelled cells plus the notes and provenance shown under the table."""

    title: str
    labels: tuple[str, ...]  # which row attributes label a row: ("variant",) or ("model", "revision", "variant")
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    provenance: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Section:
    """A heading (a model, or the comparison) with its tables; ``key`` names its files (plots)."""

    title: str
    subtitle: str
    tables: tuple[Table, ...]
    key: str = ""


@dataclass(frozen=True)
class Leaderboard:
    """Per-model sections, then the model comparison; ``n_files`` result files went in."""

    sections: tuple[Section, ...]
    n_files: int = 0


# ------------------------------------------------------------------ provenance: records as citable lines

NOT_RECORDED = "not recorded"


def provenance(results: Sequence[Result]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What makes the numbers of ``results`` citable, as ``(field, sorted values)`` pairs.

    Versions; model and revision; extraction; each task's dataset (revision and checksum, no local
    path); each variant's fit (corpus, seed); the days of the runs; hardware; software; the commands.

    >>> dict(provenance(read_results("results")))["command"]     # doctest: +SKIP
    ('iso-bench run --model sentence-transformers/all-MiniLM-L6-v2 --methods raw whiten --tasks mteb-sts',)
    """
    recs = [r.record for r in results]
    envs = [rec["environment"] if isinstance(rec.get("environment"), dict) else {} for rec in recs]
    days = sorted({r.date for r in results if r.date})
    return (
        ("iso-bench", _uniq([rec.get("iso_bench_version") for rec in recs])),
        ("mteb", _uniq([r.mteb_version for r in results])),
        ("model", _uniq([f"{r.base} @ {r.revision}" for r in results])),
        ("extraction", _uniq([_pairs(rec.get("extraction")) for rec in recs])),
        ("data", _uniq([_data(r) for r in results], key=lambda text: text.split(": ", 1)[0])),
        ("fit", _uniq([_fit(r) for r in results])),
        ("date", (" to ".join(dict.fromkeys((days[0], days[-1]))) if days else NOT_RECORDED,)),
        ("hardware", _uniq([f"{e['hardware']} ({e.get('device', '?')})" if e.get("hardware") else None
                            for e in envs])),
        ("software", _uniq([_pairs({k: e[k] for k in ("python", "torch", "transformers", "platform") if k in e})
                            for e in envs])),
        ("command", _uniq([rec.get("command") for rec in recs])),
    )


def _uniq(values: Sequence[Any], key: Any = None) -> tuple[str, ...]:
    """Sorted distinct values, and how many results lack one when some do."""
    found = tuple(sorted(sorted({str(v) for v in values if v}), key=key))
    lacking = sum(1 for v in values if not v)
    if not found:
        return (NOT_RECORDED,)
    return found + ((f"{NOT_RECORDED} in {lacking} of {len(values)} result files",) if lacking else ())


def _pairs(mapping: Any) -> str:
    """``a=1, b=null``: sorted keys, JSON values (stable text for any mapping)."""
    if not isinstance(mapping, dict):
        return ""
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}"
                     for k, v in sorted(mapping.items()))


def _data(r: Result) -> str:
    d = r.record.get("data")
    if not isinstance(d, dict):
        return f"{r.task}: dataset revision {r.dataset_revision or '?'} (source {NOT_RECORDED})"
    sha = f", sha256 {d['sha256']}" if d.get("sha256") else ""
    extra = "".join(f"; {k} {v.get('revision', '?')} (sha256 {v.get('sha256', '?')})"  # e.g. WordNet for WSD
                    for k, v in sorted(d.items()) if isinstance(v, dict))
    return f"{r.task}: {d.get('repo', '?')} @ {d.get('revision', '?')} ({d.get('source', '?')}{sha}){extra}"


def _fit(r: Result) -> str:
    if not r.record:
        return f"{r.variant}: {NOT_RECORDED}"
    variant = r.record["variant"] if isinstance(r.record.get("variant"), dict) else {}
    fit = r.record["fit"] if isinstance(r.record.get("fit"), dict) else {"fit_corpus": variant.get("fit_corpus")}
    params = _pairs(variant.get("params"))
    name = f"{variant.get('method', r.variant)}" + (f" ({params})" if params else "")
    corpus, splits = fit.get("fit_corpus"), list(fit.get("splits") or ["?"])
    if not corpus:
        return f"{name}: nothing fitted"
    where = {"task": f"the evaluated task's own texts (split{'s' * (len(splits) > 1)} {'+'.join(splits)}; "
                     "transductive)",
             "file": f"file {Path(str(fit.get('path', '?'))).name} ({fit.get('n_texts', '?')} texts, "
                     f"sha256 {fit.get('texts_sha256', '?')})"}.get(corpus, str(corpus))
    levels = sorted({f["level"] for f in fit.get("fits") or [] if isinstance(f, dict) and f.get("level")})
    level = "+".join(levels) or fit.get("level") or variant.get("level", "?")  # where it was fitted
    # what clip zeroed, per fit: "none" says why a clip row equals raw
    zeroed = sorted({",".join(str(d) for d in f["learned"]["dims_"]) or "none" for f in fit.get("fits") or []
                     if isinstance(f, dict) and isinstance(f.get("learned"), dict) and "dims_" in f["learned"]})
    dims = f"; dimensions zeroed: {' | '.join(zeroed)}" if zeroed else ""
    return f"{name}: fit on {where}, {level} level, seed {fit.get('seed', variant.get('seed', '?'))}{dims}"


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


def format_cell(cell: Cell, column: Column, minus: str = MINUS) -> str:
    """``82.03``, ``79.93 (−2.10)`` or ``–``, without emphasis (each renderer adds its own bold)."""
    if cell.value is None:
        return MISSING
    text = format_number(cell.value, column.fmt, minus)
    return text if cell.delta is None else f"{text} ({format_delta(cell.delta, column.fmt, minus)})"


def _label(row: Row, attr: str) -> str:
    if attr == "variant":
        return row.variant + (f" ({row.tag})" if row.tag else "")
    return row.revision[:12] if attr == "revision" else getattr(row, attr)


def _grid(table: Table, bold: Callable[[str], str], minus: str, escape: Callable[[str], str]) -> list[list[str]]:
    return [[escape(_label(row, a)) for a in table.labels]
            + [bold(escape(format_cell(c, col, minus))) if c.best else escape(format_cell(c, col, minus))
               for c, col in zip(row.cells, table.columns, strict=True)] for row in table.rows]


def _tabulate(table: Table, fmt: str, bold: Callable[[str], str], minus: str, escape: Callable[[str], str]) -> str:
    headers = [escape(h) for h in (*table.labels, *(c.label for c in table.columns))]
    align = ("left",) * len(table.labels) + ("right",) * len(table.columns)
    return tabulate(_grid(table, bold, minus, escape), headers=headers, tablefmt=fmt, disable_numparse=True,
                    colalign=align)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(table: Table) -> str:
    """One table in GitHub markdown (tabulate's "pipe"), then its notes and its provenance, as lists."""
    out = [_tabulate(table, "pipe", lambda s: f"**{s}**", MINUS, _md_escape), ""]
    out += [f"- {n}" for n in table.notes] + ["", "Provenance:", ""]
    for name, values in table.provenance:
        if len(values) == 1:
            out.append(f"- {name}: {_md_value(name, values[0])}")
        else:
            out += [f"- {name}:"] + [f"  - {_md_value(name, v)}" for v in values]
    return "\n".join(out) + "\n"


def render_markdown(board: Leaderboard, plots: Mapping[str, str] | None = None) -> str:
    """The leaderboard as GitHub markdown; ``plots`` maps a section's key to its plot's relative file name.

    A section per model (a table per task group, each followed by its notes and provenance), then the
    model comparison. Deterministic: a function of the data only.
    """
    out = ["# iso-bench leaderboard", "",
           f"Built from {board.n_files} result files. Every table is followed by the provenance of its numbers; "
           f"{MISSING} is a missing result, never averaged.", ""]
    for section in board.sections:
        out += [f"## {section.title}", ""] + ([section.subtitle, ""] if section.subtitle else [])
        for table in section.tables:
            out += [f"### {table.title}", "", markdown_table(table)]
        plot = plot_data(section) if plots and section.key in plots else None
        if plot is not None:
            out += [f"![{plot.y_label} against {plot.x_label}, {plot.title}]({plots[section.key]})", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _md_value(name: str, value: str) -> str:
    return f"`{value}`" if name == "command" and value.startswith("iso-bench") else value


def render_csv(board: Leaderboard) -> str:
    """One line per cell (tidy): table, model, revision, variant, tag, column, value, delta_vs_raw, best.

    Numbers as shown in markdown but plain (ASCII minus, no ``±``), so ``float()`` reads them; an empty
    value is a missing result. Notes and provenance stay in the markdown and LaTeX outputs.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["table", "model", "revision", "variant", "tag", "column", "value", "delta_vs_raw", "best"])
    for section in board.sections:
        for table in section.tables:
            for row in table.rows:
                for cell, col in zip(row.cells, table.columns, strict=True):
                    value = "" if cell.value is None else format_number(cell.value, col.fmt)
                    delta = "" if cell.delta is None else format_delta(cell.delta, col.fmt, "-", "")
                    writer.writerow([table.title, row.model, row.revision, row.variant, row.tag, col.label,
                                     value, delta, "1" if cell.best else "0"])
    return buf.getvalue()


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", MINUS: "$-$", MISSING: "--",
          "×": r"$\times$", "±": r"$\pm$", "ᵀ": r"$^\top$"}


def latex_escape(text: str) -> str:
    r"""Text safe in LaTeX: ``latex_escape("a_b × 2")`` is ``a\_b $\times$ 2``."""
    return "".join(_LATEX.get(ch, ch) for ch in text)


def render_latex(board: Leaderboard) -> str:
    """One ``table`` float per table (booktabs rules), its notes and provenance in small print below."""
    out = ["% iso-bench leaderboard; needs \\usepackage{booktabs}", ""]
    for section in board.sections:
        for table in section.tables:
            body = _tabulate(table, "latex_raw", lambda s: f"\\textbf{{{s}}}", MINUS, latex_escape).splitlines()
            rules = iter(("\\toprule", "\\midrule", "\\bottomrule"))
            body = [next(rules) if line == "\\hline" else line for line in body]
            caption = latex_escape(f"{section.title}: {table.title}")
            out += ["\\begin{table}[ht]", "\\centering", "\\small", f"\\caption{{{caption}}}", *body, "",
                    "\\smallskip", "\\footnotesize\\raggedright"]
            out += [f"{latex_escape(n)}\\\\" for n in table.notes]
            out += [f"\\textit{{{latex_escape(name)}}}: {'; '.join(_latex_value(name, v) for v in values)}\\\\"
                    for name, values in table.provenance]
            out += ["\\end{table}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _latex_value(name: str, value: str) -> str:
    if name == "command" and value.startswith("iso-bench"):
        return f"\\texttt{{{latex_escape(value).replace('--', '-{}-')}}}"
    return latex_escape(value)


RENDERERS: dict[str, Callable[[Leaderboard], str]] = {"markdown": render_markdown, "csv": render_csv,
                                                      "latex": render_latex}


@dataclass(frozen=True)
class Plot:
    """Points ``(variant, x, y)`` per series: a model's isotropy against each of its STS means."""

    title: str
    x_label: str
    y_label: str
    series: tuple[tuple[str, tuple[tuple[str, float, float], ...]], ...]


def plot_data(section: Section) -> Plot | None:
    """What a section's plot shows, read from its tables (so plot and tables agree by construction).

    x: the first diagnostics table's sentence IsoScore (else its first column); y: every "mean" column of the
    ranked tables; a variant is a point where both are present. None when there is nothing to plot. IsoScore,
    not I(W): I(W) is not defined by the vectors alone where the eigenvalues of WᵀW are equal (whitening).
    """
    diag = next((t for t in section.tables if any(c.kind == "diagnostic" for c in t.columns)), None)
    if diag is None:
        return None
    j = next((i for i, c in enumerate(diag.columns) if c.key.endswith("/sentence_isoscore")), 0)
    xs = {row.variant: row.cells[j].value for row in diag.rows if row.cells[j].value is not None}
    series = []
    for table in section.tables:
        for k, col in enumerate(table.columns):
            points = tuple((row.variant, xs[row.variant], row.cells[k].value) for row in table.rows
                           if col.kind == "mean" and row.variant in xs and row.cells[k].value is not None)
            series += [(col.label, points)] if points else []
    if not series:
        return None
    task = diag.columns[j].key.rsplit("/", 1)[0]
    return Plot(f"{section.title} @ {diag.rows[0].revision[:12]}",
                f"{diag.columns[j].label} on {task}", "mean STS score × 100", tuple(series))  # type: ignore[arg-type]


def write_plots(board: Leaderboard, folder: str | Path, stem: str) -> dict[str, str]:
    """Save each model's isotropy-vs-STS plot as ``<stem>-<key>.png`` in ``folder``; returns key -> file name.

    Fixed size and dpi, the Agg backend, no software or time metadata: the same data give the same bytes
    with the same matplotlib.

    >>> write_plots(board, "leaderboards", "minilm")               # doctest: +SKIP
    {'sentence-transformers__all-MiniLM-L6-v2': 'minilm-sentence-transformers__all-MiniLM-L6-v2.png'}
    """
    plots = [(s.key, p) for s in board.sections if (p := plot_data(s)) is not None]
    if not plots:
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for key, plot in plots:
        _draw(plt, plot, folder / f"{stem}-{key}.png")
    return {key: f"{stem}-{key}.png" for key, _ in plots}


def _draw(plt: Any, plot: Plot, path: Path) -> None:
    with plt.rc_context({"font.size": 9}):
        fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
        for (label, points), marker in zip(plot.series, "os^Dv<>p", strict=False):
            ax.scatter([p[1] for p in points], [p[2] for p in points], marker=marker, label=label)
            # variants at the same point (e.g. clip that zeroed nothing, and raw) share one label
            labels: dict[tuple[float, float], list[str]] = {}
            for variant, x, y in points:
                labels.setdefault((x, y), []).append(variant)
            for (x, y), variants in labels.items():
                ax.annotate(", ".join(variants), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
        ax.set(xlabel=plot.x_label, ylabel=plot.y_label, title=plot.title)
        ax.margins(x=0.15, y=0.1)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        fig.savefig(path, format="png", metadata={"Software": None})
        plt.close(fig)
