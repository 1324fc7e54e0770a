"""The LaTeX leaderboard: a document pdflatex compiles as written (Debian's texlive-latex-base and
texlive-latex-recommended; the compiling tests skip, saying why, where pdflatex is not installed: CI installs it),
each table fitting the page, the provenance after its table outside any float, every text escaped to ASCII."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iso_bench.report import build_leaderboard, read_results, render, write_leaderboard
from iso_bench.report.cells import Cell, Column, Leaderboard, Row, Table
from iso_bench.report.escape import latex_escape
from iso_bench.report.latex import TEXT_WIDTH, breakable, latex_table, render_latex
from iso_bench.report.results import LeaderboardError
from tests.report_helpers import small_case, sts_units, write_scored
from tests.test_report_escape import HOSTILE, hostile_case

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(PDFLATEX is None, reason="pdflatex is not installed (apt-get install "
                                    "texlive-latex-base texlive-latex-recommended); CI installs it")

EXPECTED_TABLE = r"""\begin{table}[htbp]
\centering
\footnotesize
\caption{org/alpha: MTEB STS: main score $\times$ 100 (cosine Spearman)}\label{tab:iso-bench-0-0}
\isobenchfit{\begin{tabular}{lrrr}
\toprule
variant & \begin{tabular}[b]{@{}r@{}}mean MTEB-STS \\ (2 tasks, \\ cosine \\ Spearman)\end{tabular} & STS12 & STSBenchmark \\
\midrule
raw & \textbf{77.20} & \textbf{72.37} & \textbf{82.03} \\ \addlinespace[2pt]
abtt & -- & \begin{tabular}[t]{@{}r@{}}\textbf{72.37} \\ ($\pm$0.00)\end{tabular} & -- \\ \addlinespace[2pt]
whiten & \begin{tabular}[t]{@{}r@{}}72.70 \\ ($-$4.50)\end{tabular} & \begin{tabular}[t]{@{}r@{}}65.47 \\ ($-$6.90)\end{tabular} & \begin{tabular}[t]{@{}r@{}}79.93 \\ ($-$2.10)\end{tabular} \\ \addlinespace[2pt]
\bottomrule
\end{tabular}}
\par\smallskip\raggedright\scriptsize
Main score $\times$ 100 (cosine Spearman), two decimals; (+d) / ($-$d) = difference from raw, computed from the rounded values; bold = best in its column (ties: all bold).\par
mean MTEB-STS (2 tasks, cosine Spearman) = unweighted mean of STS12, STSBenchmark; a variant missing any of them gets -- (never a mean of the present cells).\par
Missing (--): abtt on STSBenchmark: no result file, or a non-finite score.\par
\end{table}

\begin{flushleft}\footnotesize
Provenance of Table~\ref{tab:iso-bench-0-0}:\par
\hangindent=1.5em\hangafter=1 \textit{iso-bench}: 0.1.0\par
\hangindent=1.5em\hangafter=1 \textit{mteb}: 2.26.24\par
\hangindent=1.5em\hangafter=1 \textit{model}: org/alpha @ 0123456789ab\allowbreak{}cdef01234567\allowbreak{}89abcdef0123\allowbreak{}4567\par
\hangindent=1.5em\hangafter=1 \textit{extraction}: layer=-1, max\_length=256, normalize=true, pooling=mean\par
"""  # noqa: E501


def test_latex_exact(tmp_path: Path) -> None:
    """The small case's first table, hand-checked: the mean first after the label, a cell's difference under its
    value, missing as an en dash, the notes in the float, the provenance after it, hashes breakable."""
    board = build_leaderboard(read_results(small_case(tmp_path)), ci=False)
    fragment = render_latex(board, fragment=True)
    assert fragment.startswith("% iso-bench leaderboard: its tables; needs \\usepackage{booktabs} "
                               "\\usepackage{graphicx}\n")
    assert EXPECTED_TABLE in fragment
    document = render_latex(board)
    assert document.startswith("\\documentclass[a4paper]{article}\n") and document.endswith("\\end{document}\n")
    assert EXPECTED_TABLE in document and "\\section*{org/alpha}" in document and "\\section*" not in fragment
    assert render(board, "latex") == document and render(board, "latex", fragment=True) == fragment
    assert document.isascii() and fragment.isascii()


def test_an_interval_is_stacked_under_its_value(tmp_path: Path) -> None:
    for variant, noise in (("raw", 1.0), ("whiten", 1.3)):
        for t, task in enumerate(("STS12", "STS13")):
            write_scored(tmp_path, "org/m", variant, task, sts_units(400, noise, seed=t, gold_seed=t))
    board = build_leaderboard(read_results(tmp_path))
    cell = board.sections[0].tables[0].rows[1].cells[0]  # whiten on STS12
    latex = render_latex(board, fragment=True)
    stacked = (f"\\begin{{tabular}}[t]{{@{{}}r@{{}}}}{cell.value:.2f} \\\\ ($-${abs(cell.delta):.2f})"
               f"{'*' if cell.significant else ''} \\\\ {{\\scriptsize {{[}}{cell.low:.2f}, {cell.high:.2f}]}}"
               "\\end{tabular}")
    assert stacked in latex  # no low/high columns: the interval sits under its value, in small type
    head = next(line for line in latex.splitlines() if line.startswith("variant & "))
    assert head.index("mean") < head.index("STS12") < head.index("STS13")


def _wide_table(n: int) -> Table:
    columns = tuple(Column(f"T{i}", f"SomeTask{i:02d}") for i in range(n)) + (Column("m", "mean X (n tasks)", "mean"),)
    cell = Cell(71.234, -1.5, low=70.1, high=72.9, significant=True)
    rows = tuple(Row("org/m", "r", v, (cell,) * (n + 1)) for v in ("raw", "whiten", "cluster-pca"))
    return Table("wide: main score", ("variant",), columns, rows, ("a note",), (("command", ("iso-bench run",)),))


def test_a_wide_table_is_split_into_parts_that_fit_the_page() -> None:
    text = "\n".join(latex_table(_wide_table(14), "org/m: wide", "tab:w"))
    floats = re.findall(r"\\begin\{table\}.*?\\end\{table\}", text, re.S)
    assert len(floats) >= 2 and all(f"(part {i + 1} of {len(floats)})" in f for i, f in enumerate(floats))
    heads = [next(line for line in f.splitlines() if line.startswith("variant & ")) for f in floats]
    assert "mean X" in heads[0] and sum(h.count("SomeTask") for h in heads) == 14  # every column once, mean first
    assert all(f.count("\ncluster-pca & ") == 1 for f in floats)  # the row labels repeated in every part
    for f in floats:  # each part's estimated width within the text block, a cell ~50 pt: at most 8 columns a part
        assert f.count("SomeTask") <= (TEXT_WIDTH - 60) // 50
    assert text.count("a note") == 1 and "a note" in floats[-1]  # the notes under the last part
    assert text.index("Provenance of Tables~\\ref{tab:w}--\\ref{tab:w-part") > text.rindex("\\end{table}")
    assert breakable("sha256 " + "ab" * 32).count("\\allowbreak{}") == 5  # 64 hex digits break every 12


def test_fragment_is_for_latex_only(tmp_path: Path) -> None:
    with pytest.raises(LeaderboardError, match="--fragment .* is for --format latex, not markdown"):
        write_leaderboard(small_case(tmp_path), fmt="markdown", fragment=True)
    assert latex_escape("q ≤ 0.05 … −1 – † ° ‡ é 中") == (
        r"q $\le$ 0.05 \dots{} $-$1 -- $^\dagger$ $^{\circ}$ $^\ddagger$ \'{e} [U+4E2D]")


# ---- compiled with a real pdflatex ----------------------------------------------------------------------
OVERFULL = re.compile(r"^Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\)(.*)$", re.M)


def compile_latex(text: str, folder: Path) -> str:
    """Run pdflatex twice (for the references) on ``text``; the log, after checking there is a PDF."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "board.tex").write_text(text, encoding="ascii")
    for _ in range(2):
        done = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "board.tex"], cwd=folder,
                              capture_output=True, text=True, timeout=300)
    log = (folder / "board.log").read_text(encoding="latin-1")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert done.returncode == 0 and not errors, errors or done.stdout[-2000:]
    assert (folder / "board.pdf").stat().st_size > 1000
    return log


def assert_fits(log: str) -> None:
    """No overfull box wider than 10 pt (a table or a line into the margin)."""
    wide = [(float(width), where) for width, where in OVERFULL.findall(log) if float(width) > 10]
    assert not wide, wide


@needs_pdflatex
def test_the_published_board_compiles_with_pdflatex(published_board: Leaderboard, tmp_path: Path) -> None:
    document = render(published_board, "latex")  # what `iso-bench leaderboard leaderboards/v2 --format latex` writes
    assert document.isascii()
    log = compile_latex(document, tmp_path / "document")
    assert_fits(log)
    assert re.search(r"Output written on board\.pdf \((\d+) pages", log)
    # the provenance of every table after its float, outside any float
    floats = re.sub(r"\\begin\{table\}.*?\\end\{table\}", "", document, flags=re.S)
    assert document.count("Provenance of Table") == floats.count("Provenance of Table") == sum(
        len(s.tables) for s in published_board.sections)
    # the fragment, put in a document with the packages its comment names
    fragment = render(published_board, "latex", fragment=True)
    needs = re.findall(r"\\usepackage\{\w+\}", fragment.splitlines()[0])
    wrapper = "\n".join(["\\documentclass[a4paper]{article}", "\\usepackage[margin=2cm]{geometry}", *needs,
                         "\\begin{document}", fragment, "\\end{document}"])
    assert_fits(compile_latex(wrapper, tmp_path / "fragment"))


@needs_pdflatex
def test_hostile_and_unicode_names_compile(tmp_path: Path) -> None:
    for i, text in enumerate([*HOSTILE.values(), "é中≤ ‡ 100%_{x}^~ #&"]):
        hostile_case(tmp_path / "in", f"{i}{text}")
    latex = write_leaderboard(tmp_path / "in", fmt="latex", ci=False)
    assert isinstance(latex, str) and latex.isascii()
    assert_fits(compile_latex(latex, tmp_path / "out"))
