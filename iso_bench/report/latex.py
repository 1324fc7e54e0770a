"""The leaderboard in LaTeX that pdflatex compiles as written: ``iso-bench leaderboard DIR --format latex``.

By default a complete document (``article``, A4, 2 cm margins; packages ``geometry``, ``booktabs`` and
``graphicx``, all in Debian's ``texlive-latex-base`` and ``texlive-latex-recommended``); with ``fragment`` the
tables alone, to ``\\input`` into a paper, with the packages they need named in a comment at their top.

How a table fits the page:

- a cell is stacked, the value (with ``± sd`` for a merged row) on its first line, the difference from raw on the
  second, the 95% interval in small type on the third: ``82.03`` / ``(+1.62)*`` / ``[81.21, 82.84]``;
- a group's mean comes first after the row label (it decides the ranking); labels and headers wrap;
- a table whose columns are estimated wider than the text block is split by columns into parts, each a float of
  its own with the row labels repeated (``part 1 of 2``); and should a part still be wider than the line, it is
  scaled down to the line width (``\\isobenchfit``), so no table runs into the margin.

Every text is escaped (:func:`iso_bench.report.escape.latex_escape`: the output is ASCII, symbols such as ``≤``
``†`` ``°`` ``−`` and the en dash as LaTeX), and long unbroken words (hashes, model ids) may break anywhere. The
notes, the legend of each table, sit under it in its float; the provenance follows the table in the text,
outside any float, as a list under "Provenance of Table N".

>>> text = render_latex(build_leaderboard(read_results("results")))           # doctest: +SKIP
>>> text.startswith("\\\\documentclass")                                       # doctest: +SKIP
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from iso_bench.report.cells import SAME, Cell, Column, Leaderboard, Table
from iso_bench.report.escape import latex_escape
from iso_bench.report.marks import MARKS
from iso_bench.report.matrix import Matrix, matrix_note, verdict_matrices
from iso_bench.report.tables import MINUS, MISSING, _label, benchmark_lines, format_delta, format_number
from iso_bench.report.verdict import verdict_lines

PACKAGES = ("geometry", "booktabs", "graphicx")
PREAMBLE = (r"\documentclass[a4paper]{article}", r"\usepackage[margin=2cm]{geometry}", r"\usepackage{booktabs}",
            r"\usepackage{graphicx}")
TEXT_WIDTH = 481.0  # pt: A4 (595 pt) less two margins of 2 cm
CHAR = 4.2  # pt: the width of a digit or a lower-case letter of a table cell (\footnotesize), a little more
NARROW, WIDE = 0.6, 1.5  # the width of a narrow (. , [ ] space) and a wide character (capitals, ±, −) against CHAR
SMALL = 0.8  # the interval's \scriptsize against \footnotesize
COLUMN_SEP = 12.0  # pt: \tabcolsep on both sides
LABEL_WRAP, HEADER_WRAP = 22, 14  # characters a row label and a column header wrap at
FIT_MACRO = (r"\ifdefined\isobenchfit\else\newsavebox{\isobenchbox}\newcommand{\isobenchfit}[1]{%",
             r"\sbox{\isobenchbox}{#1}\ifdim\wd\isobenchbox>\linewidth\resizebox{\linewidth}{!}{\usebox{\isobenchbox}}%",
             r"\else\usebox{\isobenchbox}\fi}\fi")


def render_latex(board: Leaderboard, fragment: bool = False) -> str:
    """``board`` as a LaTeX document (``fragment``: the tables and their provenance alone); see the module."""
    body = []
    for s, section in enumerate(board.sections):
        if not fragment:
            body += [f"\\section*{{{breakable(section.title)}}}", ""]
            body += [breakable(section.subtitle), ""] if section.subtitle else []
        for t, table in enumerate(section.tables):
            body += latex_table(table, f"{section.title}: {table.title}", f"tab:iso-bench-{s}-{t}")
        body += [] if fragment else [r"\clearpage", ""]  # a model's tables never float into the next section
    if fragment:
        needs = " ".join("\\usepackage{" + p + "}" for p in PACKAGES[1:])
        head = [f"% iso-bench leaderboard: its tables; needs {needs}",
                "% (booktabs for the rules, graphicx to scale a table that would be wider than the line)",
                *FIT_MACRO, ""]
        return "\n".join(head + body).rstrip("\n") + "\n"
    lead = [r"\section*{iso-bench leaderboard}", "", r"\begin{flushleft}",
            breakable(f"Built from {board.n_files} result files. Every table is followed by the provenance of its "
                      f"numbers; {MISSING} is a missing result, never averaged."), "",
            *(_code_spans(line) for line in benchmark_lines(board, str)), r"\end{flushleft}", ""]
    verdict = latex_verdict(verdict_matrices(board), verdict_lines(board))
    doc = [*PREAMBLE, *FIT_MACRO, r"\begin{document}", "", *lead[:1], "", *verdict, *lead[1:], *body, r"\end{document}"]
    return "\n".join(doc) + "\n"


def latex_table(table: Table, caption: str, label: str) -> list[str]:
    """One table: a float per part (its columns split to fit the text block), the notes under the last part,
    then its provenance as a list outside the float."""
    order = [j for j, c in enumerate(table.columns) if c.kind == "mean"]
    order += [j for j in range(len(table.columns)) if j not in order]  # the deciding mean first
    labels = [[_wrap(_label(row, a), LABEL_WRAP) for a in table.labels] for row in table.rows]
    heads = {j: _wrap(table.columns[j].label, HEADER_WRAP) for j in order}
    cells = {j: [_cell(row.cells[j], table.columns[j]) for row in table.rows] for j in order}
    label_width = sum(_width([_wrap(a, HEADER_WRAP), *(row[i] for row in labels)])
                      for i, a in enumerate(table.labels))
    parts = _split(order, {j: _column_width(heads[j], cells[j]) for j in order}, label_width)
    out = []
    for p, part in enumerate(parts):
        more = f" (part {p + 1} of {len(parts)})" if len(parts) > 1 else ""
        head_row = [_stack(_wrap(a, HEADER_WRAP), "l", "b") for a in table.labels]
        head_row += [_stack(heads[j], "r", "b") for j in part]
        rows = [" & ".join([_stack(labels[i][k], "l", "t") for k in range(len(table.labels))]
                           + [_stack(cells[j][i], "r", "t") for j in part]) + r" \\ \addlinespace[2pt]"
                for i in range(len(table.rows))]
        out += [r"\begin{table}[htbp]", r"\centering", r"\footnotesize",
                f"\\caption{{{breakable(caption + more)}}}\\label{{{label}{_part(p)}}}",
                f"\\isobenchfit{{\\begin{{tabular}}{{{'l' * len(table.labels)}{'r' * len(part)}}}", r"\toprule",
                " & ".join(head_row) + r" \\", r"\midrule", *rows, r"\bottomrule", r"\end{tabular}}"]
        if p == len(parts) - 1 and table.notes:
            out += [r"\par\smallskip\raggedright\scriptsize", *(f"{breakable(n)}\\par" for n in table.notes)]
        out += [r"\end{table}", ""]
    if table.provenance:
        which = f"Table~\\ref{{{label}}}" if len(parts) == 1 else \
            f"Tables~\\ref{{{label}}}--\\ref{{{label}{_part(len(parts) - 1)}}}"
        out += [r"\begin{flushleft}\footnotesize", f"Provenance of {which}:\\par"]
        out += [f"\\hangindent=1.5em\\hangafter=1 \\textit{{{latex_escape(name)}}}: "
                f"{'; '.join(_value(name, v) for v in values)}\\par" for name, values in table.provenance]
        out += [r"\end{flushleft}", ""]
    return out


def latex_verdict(matrices: Sequence[Matrix], lines: Sequence[str]) -> list[str]:
    """The verdict (:mod:`.matrix`): a matrix per fit setting, each cell stacking the winner (or raw) over its
    difference and how many variants are significantly worse, the note, then each judgement in words; scaled to
    the line where wider (``\\isobenchfit``). Nothing when the board has no paired test."""
    if not lines:
        return []
    out = [r"\subsection*{Verdict}", ""]
    for m in matrices:
        head = " & ".join(_stack(_wrap(u, HEADER_WRAP), "l", "b") for u in ("encoder", *m.units))
        rows = []
        for model, cells in zip(m.models, m.cells, strict=True):
            shown = [_stack(_wrap(model, LABEL_WRAP), "l", "t")]
            for c in cells:
                first = c.head if c.variant is None else c.variant
                rest = " ".join(p for p in ("" if c.delta is None else f"{c.delta:+.2f}", c.tail) if p)
                shown.append(_stack([(first, "bold" if c.variant else ""), *([rest] if rest else [])], "l", "t"))
            rows.append(" & ".join(shown) + r" \\ \addlinespace[2pt]")
        setting = m.setting[:1].upper() + m.setting[1:]
        out += [r"\begin{center}\footnotesize", f"\\textit{{{breakable(setting)}}}\\par\\smallskip",
                f"\\isobenchfit{{\\begin{{tabular}}{{{'l' * (len(m.units) + 1)}}}", r"\toprule", head + r" \\",
                r"\midrule", *rows, r"\bottomrule", r"\end{tabular}}", r"\end{center}", ""]
    out += [r"\begin{flushleft}\footnotesize", f"{breakable(matrix_note(matrices))}\\par\\smallskip",
            r"Each judgement in words:\par", *(f"\\hangindent=1.5em\\hangafter=1 {breakable(line)}\\par"
                                                 for line in lines), r"\end{flushleft}", ""]
    return out


def _part(p: int) -> str:
    """The suffix of a part's label: none for the first, ``-part2`` for the second, ..."""
    return f"-part{p + 1}" if p else ""


# ---- a cell: lines of (text, style), measured before they are escaped --------------------------------------
Line = tuple[str, str]  # (text as shown, style): "" plain, "bold", "small"


def _cell(cell: Cell, column: Column) -> list[Line]:
    """The lines of a cell: value (± sd) and mark; the difference from raw (``*`` when significant); the
    interval in small type. A missing or withheld value is the en dash alone, a row whose vectors are raw's there
    ``= raw``."""
    if cell.value is None:
        return [(MISSING, "")]
    if cell.unchanged:  # raw's vectors there: raw's score, no result of the method
        return [(SAME, ""), *([(MARKS[cell.mark], "mark")] if cell.mark in MARKS else [])]
    value = format_number(cell.value, column.fmt, MINUS)
    if cell.sd is not None:
        value += f" ± {format_number(cell.sd, column.fmt, MINUS)}"
    lines = [(value, "bold" if cell.best else ""), *([(MARKS[cell.mark], "mark")] if cell.mark in MARKS else [])]
    if cell.delta is not None:
        lines.append((f"({format_delta(cell.delta, column.fmt, MINUS)})" + ("*" if cell.significant else ""), ""))
    if cell.low is not None and cell.high is not None:
        lines.append((f"[{format_number(cell.low, column.fmt, MINUS)}, {format_number(cell.high, column.fmt, MINUS)}]",
                      "small"))
    return lines


def _shown(line: Line) -> str:
    text, style = line
    if style == "bold":
        return f"\\textbf{{{latex_escape(text)}}}"
    return f"{{\\scriptsize {latex_escape(text)}}}" if style == "small" else latex_escape(text)


def _stack(lines: Sequence[Line] | Sequence[str], align: str, valign: str) -> str:
    """One cell's lines, stacked (a nested tabular) when there are several; a mark joins the line above it."""
    shown: list[str] = []
    for line in lines:
        line = (line, "") if isinstance(line, str) else line
        if line[1] == "mark" and shown:
            shown[-1] += latex_escape(line[0])
        else:
            shown.append(_shown(line))
    if len(shown) == 1:
        return shown[0]
    return f"\\begin{{tabular}}[{valign}]{{@{{}}{align}@{{}}}}" + r" \\ ".join(shown) + r"\end{tabular}"


def _points(line: Line | str) -> float:
    """The estimated width of a line in a table (\\footnotesize), in pt: narrow characters count less."""
    text, style = (line, "") if isinstance(line, str) else line
    chars = sum(NARROW if ch in " .,:;[]()|'!il1" else WIDE if ch.isupper() or ch in "mw±−–*" else 1.0 for ch in text)
    return chars * CHAR * (SMALL if style == "small" else 1.1 if style == "bold" else 1.0)


def _column_width(head: Sequence[str], cells: Sequence[Sequence[Line]]) -> float:
    return max([_points(h) for h in head] + [_points(line) for lines in cells for line in lines]) + COLUMN_SEP


def _width(columns: Sequence[Sequence[str]]) -> float:
    """The estimated width of a label column: its longest line."""
    return max(_points(line) for lines in columns for line in lines) + COLUMN_SEP


def _split(order: list[int], widths: dict[int, float], label_width: float) -> list[list[int]]:
    """The columns in parts that each fit the text block beside the row labels (at least one column a part)."""
    parts: list[list[int]] = [[]]
    used = label_width
    for j in order:
        if parts[-1] and used + widths[j] > TEXT_WIDTH:
            parts.append([])
            used = label_width
        parts[-1].append(j)
        used += widths[j]
    return parts


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters where it has room to break (spaces, then ``/``)."""
    words = re.findall(r"[^\s/]+/?|\s+", text)
    lines = [""]
    for word in words:
        if word.isspace():
            if lines[-1]:
                lines[-1] += " "
            continue
        if lines[-1] and len(lines[-1].rstrip()) + len(word) > width:
            lines[-1] = lines[-1].rstrip()
            lines.append("")
        lines[-1] += word
    return [line.rstrip() for line in lines if line.strip()] or [text]


# ---- running text -------------------------------------------------------------------------------------------
LONG = 16  # a word of more characters may break anywhere


def breakable(text: str) -> str:
    """``text`` escaped, with a break allowed inside every word longer than :data:`LONG` characters (after
    ``/ _ - = , . :`` and at least every 12 characters), so that no hash or model id runs into the margin."""
    out = []
    for word in re.split(r"(\s+)", str(text)):
        if len(word) <= LONG or word.isspace():
            out.append(latex_escape(word))
            continue
        chunks = [chunk for chunk in re.findall(r"[^/_\-=,.:]*[/_\-=,.:]?", word) if chunk]
        pieces = [p for chunk in chunks for p in (re.findall(r".{1,12}", chunk) if len(chunk) > LONG else [chunk])]
        shown = [latex_escape(p) for p in pieces]  # a "[" is braced where it starts the text only (below)
        out.append(r"\allowbreak{}".join([shown[0], *("[" + e[3:] if e.startswith("{[}") else e for e in shown[1:])]))
    shown = "".join(out)
    return "{[}" + shown[1:] if shown.startswith("[") else shown


def _value(name: str, value: str) -> str:
    if name == "command" and value.startswith("iso-bench"):
        return f"\\texttt{{{breakable(value)}}}"
    return breakable(value)


def _code_spans(text: str) -> str:
    """A line with markdown code spans (backticks) as LaTeX: each span in ``\\texttt``."""
    parts = text.split("`")
    return "".join(f"\\texttt{{{breakable(p)}}}" if i % 2 else breakable(p) for i, p in enumerate(parts))
