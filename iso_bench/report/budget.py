"""The board per budget: what a vector's bytes buy. For each model, task group (or task) and fitting setting, the
best variant at each size (full float32, int8, binary, k dimensions, k dimensions in int8 or binary) beside raw at
the same size: ``raw-precision=binary`` for binary, ``truncate-128`` (raw's first 128 coordinates) for 128
dimensions. Each size is its own board of its variants, raw at that size in raw's place, so that "best" is judged by
the same paired bootstrap tests, Benjamini-Hochberg corrected over the size's table, as the verdict
(:mod:`.verdict`); a size whose raw was not run is shown without a test. The bytes are those the results record
(``storage``: float32 4 d, int8 d, binary d / 8), and a picture puts every variant's score against its bytes per
vector on a log scale, raw's points against the post-processed ones.

>>> size_of("whiten-256-precision=binary"), size_of("whiten-256-precision=binary").reference
(Size(dims=256, precision='binary'), 'truncate-256-precision=binary')
>>> size_of("whiten").label, size_of("raw-precision=int8").label, size_of("pca-64").label
('full', 'int8', '64-d')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iso_bench.report.board import build_leaderboard
from iso_bench.report.latex import FIT_MACRO, HEADER_WRAP, LABEL_WRAP, PACKAGES, PREAMBLE, _stack, _wrap, breakable
from iso_bench.report.resample import Bootstrap
from iso_bench.report.results import Result
from iso_bench.report.sizes import Size, size_of
from iso_bench.report.verdict import COMPARISON, _judged, _setting, judgements


@dataclasses.dataclass(frozen=True)
class Budget:
    """One line of the table: at ``size`` (``bytes`` per vector, None where no result records them), in ``unit`` of
    ``model`` fitted in ``setting``: the ``best`` variant that beats raw at this size significantly (None: none
    does) with its ``score``, ``delta`` (95% interval ``low``..``high``, ``q``), and raw at this size with its
    score (None: not run). ``points``: every variant of the size, ``(variant, score)``, for the picture."""

    model: str
    unit: str
    setting: str
    size: Size
    bytes: int | None
    best: str | None
    score: float | None
    delta: float | None
    low: float | None
    high: float | None
    q: float | None
    reference_score: float | None
    points: tuple[tuple[str, float], ...]


def _bytes(results: Sequence[Result]) -> int | None:
    found = [r.record.get("storage", {}).get("bytes") for r in results if isinstance(r.record, dict)]
    return next((b for b in found if isinstance(b, int)), None)


def budgets(results: Sequence[Result], ci: bool = True, boot: Bootstrap | None = None) -> list[Budget]:
    """The per-budget lines of ``results``; none where they hold a single size (the board says it all). ``boot``:
    the :class:`Bootstrap` of the board of ``results``, whose draws the boards per size reuse."""
    sized = [(r, size_of(r.variant)) for r in results]
    sizes = {s for _, s in sized if s is not None}
    if len(sizes) < 2:
        return []
    out: list[Budget] = []
    for size in sorted(sizes, key=Size.order):
        members = [dataclasses.replace(r, variant="raw") if r.variant == size.reference else r
                   for r, s in sized if s == size and (r.variant != "raw" or size.dims is None
                                                       and size.precision == "float32")]
        board = build_leaderboard(members, ci, boot=boot)
        found = {(j.model, j.unit, j.setting): j for j in judgements(board)}
        for section in board.sections:
            if section.key == COMPARISON:
                continue
            nbytes = _bytes([r for r in members if section.title.startswith(r.base)])
            for table in section.tables:
                for index, what in _judged(table):
                    unit = table.title.split(":")[0] if what == "mean" else what
                    by_setting: dict[str, list[Any]] = {}
                    for row in table.rows:
                        if row.cells[index].value is not None:
                            by_setting.setdefault(_setting(row.setup), []).append(row)
                    raws = [row for rows in by_setting.values() for row in rows if row.variant == "raw"]
                    for setting, rows in by_setting.items():
                        if len(raws) == 1 and not any(row.variant == "raw" for row in rows):
                            rows = [*rows, *raws]  # raw at this size unfitted (raw, a cut, signs): every setting's
                        judged = found.get((section.title, unit, setting))
                        best = judged.best if judged is not None else None
                        ref = next((row.cells[index].value for row in rows if row.variant == "raw"), None)
                        cell = best[1] if best else None
                        out.append(Budget(
                            section.title, unit, setting, size, nbytes, best[0].variant if best else None,
                            cell.value if cell else None, cell.delta if cell else None,
                            cell.delta_low if cell else None, cell.delta_high if cell else None,
                            cell.q if cell else None, ref,
                            tuple((size.reference if row.variant == "raw" else row.variant, row.cells[index].value)
                                  for row in rows)))
    return sorted(out, key=lambda b: (b.model, b.unit, b.setting, -(b.bytes or 0), b.size.order()))


def _num(value: float | None, sign: bool = False) -> str:
    return "–" if value is None else f"{value:+.2f}" if sign else f"{value:.2f}"


HEADER = ("model", "task group", "setting", "size", "bytes", "best variant", "score", "raw at this size", "score",
          "difference (95% interval, q)")
"""The columns of the table per budget, in every format."""
NUMERIC = frozenset({4, 6, 8})  # the columns of numbers (bytes, the two scores): right-aligned in HTML and LaTeX
NOTE = ("Per budget: at each size, the variant that beats raw at the same size by the most where the paired "
        "bootstrap test of its difference stays significant (Benjamini-Hochberg q ≤ 0.05 over the size's "
        "variants), as the verdict judges; score = main score × 100 (a group's mean); bytes per vector as stored.")


def budget_rows(lines: Sequence[Budget]) -> list[tuple[str, ...]]:
    """The table's cells (:data:`HEADER`), a tuple of texts per line: what the markdown, HTML and LaTeX tables show.

    >>> line = Budget("org/m", "STS", "fitted on test texts", Size(None, "binary"), 48, "whiten-precision=binary",
    ...               71.92, 18.08, 15.0, 21.0, 0.002, 53.84, ())
    >>> budget_rows([line])[0][3:]  # doctest: +NORMALIZE_WHITESPACE
    ('binary', '48', 'whiten-precision=binary', '71.92', 'raw-precision=binary', '53.84',
     '+18.08 (+15.00 to +21.00, q = 0.002)')
    """
    rows = []
    for b in lines:
        if b.best is None:
            best, score, diff = "none beats raw", "–", "–" if b.reference_score is not None else "no raw at this size"
            if b.reference_score is None:  # untested: the highest score, said as such
                top = max(b.points, key=lambda p: p[1], default=None)
                best, score = (f"{top[0]} (untested)", _num(top[1])) if top else ("–", "–")
        else:
            best, score = b.best, _num(b.score)
            interval = "" if b.low is None else f"{_num(b.low, True)} to {_num(b.high, True)}, "
            diff = f"{_num(b.delta, True)} ({interval}q = {b.q:.3f})" if b.q is not None else _num(b.delta, True)
        rows.append((b.model, b.unit, b.setting, b.size.label, str(b.bytes or "–"), best, score, b.size.reference,
                     _num(b.reference_score), diff))
    return rows


def budget_markdown(lines: Sequence[Budget]) -> str:
    """The table per budget as markdown; "" for no lines."""
    if not lines:
        return ""
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(row) + " |" for row in budget_rows(lines)]
    return "\n".join(out) + "\n\n" + NOTE + "\n"


def budget_html(lines: Sequence[Budget]) -> str:
    """The table per budget as a self-contained web page (every text escaped, nothing fetched); "" for no lines."""
    if not lines:
        return ""
    from html import escape

    def cells(row: Sequence[str], tag: str) -> str:
        shown = (f'<{tag} class="num">' if j in NUMERIC else f"<{tag}>" for j in range(len(row)))
        return "".join(f"{start}{escape(c)}</{tag}>" for start, c in zip(shown, row, strict=True))

    body = [f"<tr>{cells(row, 'td')}</tr>" for row in budget_rows(lines)]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', "<title>iso-bench: per budget</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:1rem;max-width:100%}.scroll{overflow-x:auto}"
        "table{border-collapse:collapse;font-size:0.9rem}th,td{border-bottom:1px solid #ddd;padding:0.3rem 0.5rem;"
        "text-align:left;vertical-align:top}.num{text-align:right}</style>", "</head>", "<body>", "<h1>Per budget</h1>",
        '<div class="scroll"><table>', f"<thead><tr>{cells(HEADER, 'th')}</tr></thead>", "<tbody>", *body,
        "</tbody>", "</table></div>", f"<p>{escape(NOTE)}</p>", "</body>", "</html>", ""])


def budget_latex(lines: Sequence[Budget], fragment: bool = False) -> str:
    """The table per budget as a LaTeX document that pdflatex compiles (``fragment``: the table alone, to ``\\input``;
    the packages it needs named in a comment), scaled to the line where wider (``\\isobenchfit``); "" for no lines."""
    if not lines:
        return ""
    align = "".join("r" if j in NUMERIC else "l" for j in range(len(HEADER)))
    head = " & ".join(_stack(_wrap(h, HEADER_WRAP), align[j], "b") for j, h in enumerate(HEADER))
    rows = [" & ".join(_stack(_wrap(c, LABEL_WRAP), align[j], "t") for j, c in enumerate(row))
            + r" \\ \addlinespace[2pt]" for row in budget_rows(lines)]
    table = [r"\begin{table}[htbp]", r"\centering", r"\footnotesize",
             r"\caption{Per budget: the best variant at each size beside raw at that size}\label{tab:iso-bench-budget}",
             f"\\isobenchfit{{\\begin{{tabular}}{{{align}}}", r"\toprule", head + r" \\", r"\midrule", *rows,
             r"\bottomrule", r"\end{tabular}}", r"\par\smallskip\raggedright\scriptsize", f"{breakable(NOTE)}\\par",
             r"\end{table}"]
    if fragment:
        needs = " ".join("\\usepackage{" + p + "}" for p in PACKAGES[1:])
        return "\n".join([f"% iso-bench: the table per budget; needs {needs}", *FIT_MACRO, "", *table]) + "\n"
    return "\n".join([*PREAMBLE, *FIT_MACRO, r"\begin{document}", "", r"\section*{Per budget}", "", *table, "",
                      r"\end{document}"]) + "\n"


def write_budget_plots(lines: Sequence[Budget], folder: str | Path, stem: str) -> list[Path]:
    """One picture per model: score against bytes per vector (log x), raw at each size in black, every other variant
    in colour, a panel per task group and setting; the paths written (none where no line records bytes)."""
    by_model: dict[str, list[Budget]] = {}
    for b in lines:
        if b.bytes:
            by_model.setdefault(b.model, []).append(b)
    if not by_model:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for model, rows in by_model.items():
        panels = sorted({(b.unit, b.setting) for b in rows})
        fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
        for ax, (unit, setting) in zip(axes[0], panels, strict=True):
            shown = [(b, variant, score) for b in rows if (b.unit, b.setting) == (unit, setting)
                     for variant, score in b.points]
            for ref in (False, True):  # one collection each (a collection a point took seconds to draw)
                xy = [(b.bytes, score) for b, variant, score in shown if (variant == b.size.reference) == ref]
                if xy:
                    ax.scatter(*zip(*xy, strict=True), c="black" if ref else "tab:orange", marker="s" if ref else "o",
                               zorder=3 if ref else 2)
            for b, variant, score in shown:  # the labels after the points: drawn over them
                if b.best == variant or variant == b.size.reference:
                    ax.annotate(variant, (b.bytes, score), fontsize=7, xytext=(4, 2), textcoords="offset points")
            ax.set_xscale("log")
            ax.set_xlabel("bytes per vector (log scale)")
            ax.set_ylabel("main score × 100")
            ax.set_title(f"{unit}, {setting}", fontsize=9)
            ax.grid(True, alpha=0.3)
        fig.suptitle(f"{model}: score against bytes (black squares: raw at each size)", fontsize=10)
        fig.tight_layout()
        path = Path(folder) / f"{stem}-budget-{model.replace('/', '__')}.png"
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written
