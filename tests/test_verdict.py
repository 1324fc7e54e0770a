"""The verdict at the top of every board and at the end of a run: generated from the paired tests of the tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from iso_bench.report import build_leaderboard, read_results, render_markdown
from iso_bench.report.html import render_html
from iso_bench.report.latex import render_latex
from iso_bench.report.matrix import NOTE, verdict_matrices
from iso_bench.report.verdict import verdict_lines
from tests.report_helpers import sts_units, write_scored
from tests.test_latex import assert_fits, compile_latex, needs_pdflatex

BASE = "org/alpha"
N = 400


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return plant(tmp_path_factory.mktemp("verdict"))


def plant(root: Path) -> Path:
    """MTEB STS (STS12): ``sharp`` beats raw clearly, ``blurred`` loses clearly, ``clip`` zeroed no dimension (its
    vectors, units and score are raw's). WiC (a word task, no mean): the variants' per-pair correctness differs from
    raw's on a handful of pairs only, so no test is significant; there clip zeroed a dimension."""
    for variant, noise in (("raw", 1.0), ("sharp", 0.3), ("blurred", 3.0)):
        write_scored(root, BASE, variant, "STS12", sts_units(N, noise, seed=1))
    write_scored(root, BASE, "clip", "STS12", sts_units(N, 1.0, seed=1), fits=[{"learned": {"dims_": []}}])
    rng = np.random.default_rng(7)
    right = (rng.random(N) < 0.6).astype(float)
    for variant, flips in (("raw", 0), ("sharp", 3), ("blurred", 4), ("clip", 2)):
        units = right.copy()
        units[:flips] = 1 - units[:flips]
        fits = [{"learned": {"dims_": [5]}}] if variant == "clip" else None
        write_scored(root, BASE, variant, "WiC", units, "mean", fits=fits)
    return root


@pytest.fixture(scope="module")
def board(folder: Path):
    return build_leaderboard(read_results(folder))


def test_the_verdict_names_the_significant_winner_and_losers_and_says_when_none(board) -> None:
    lines = verdict_lines(board)
    sts = next(line for line in lines if "MTEB STS" in line)
    wic = next(line for line in lines if "WiC" in line)
    table = next(t for s in board.sections for t in s.tables if t.title.startswith("MTEB STS"))
    sharp = next(r for r in table.rows if r.variant == "sharp").cells[-1]  # the mean column
    assert sharp.significant and sharp.delta > 0
    assert sts.startswith(f"{BASE}, MTEB STS (mean), fitted on test texts: sharp beats raw by +{sharp.delta:.2f}")
    assert f"q = {sharp.q:.3f}" in sts and f"{sharp.delta_low:+.2f} to {sharp.delta_high:+.2f}" in sts
    assert sts.endswith("Significantly worse than raw: blurred.")
    assert re.search(r"\(WiC\), fitted on test texts: no variant beats raw significantly\.$", wic), wic
    assert not any("Isotropy" in line for line in lines)


def test_the_markdown_board_and_the_page_open_with_the_verdict(board) -> None:
    lines = verdict_lines(board)
    markdown = render_markdown(board)
    assert markdown.index("## Verdict") < markdown.index(f"## {BASE}")
    assert all(f"- {line}" in markdown for line in lines)
    page = render_html(board)
    assert page.index('id="verdict"') < page.index("<table")
    assert all(line.replace("'", "&#39;") in page for line in lines)


def test_the_end_of_a_run_prints_the_verdict(folder: Path, capsys) -> None:
    from iso_bench.grid.report import print_verdict

    print_verdict(folder, [BASE])
    out = capsys.readouterr().out
    assert "sharp beats raw by +" in out and "no variant beats raw significantly" in out
    assert out.index("verdict (paired bootstrap tests") < out.index("sharp beats raw")
    matrix = out[out.index("fitted on test texts:\n"):]  # the matrix ends the output, after the sentences
    # the note points up to the sentences, which come before the matrix here
    assert out.index("sharp beats raw") < out.index(matrix)
    assert matrix.rstrip().endswith(NOTE.replace("The sentences below", "The sentences above"))
    header, rule, row = matrix.splitlines()[1:4]
    assert header.split() == ["encoder", "MTEB", "STS", "WiC"] and set(rule) == {"-", " "}
    assert re.fullmatch(rf"{BASE} +sharp \+\d+\.\d\d \(1 worse\) +raw", row), row
    print_verdict(folder, [BASE], ["WiC"])  # the run's tasks alone
    out = capsys.readouterr().out
    assert "MTEB STS (mean)" not in out and "sharp" not in out and "(WiC), fitted on test texts" in out


def sharp_mean(board) -> float:
    table = next(t for s in board.sections for t in s.tables if t.title.startswith("MTEB STS"))
    return next(r for r in table.rows if r.variant == "sharp").cells[-1].delta


def test_the_matrix_opens_the_verdict_of_the_markdown_the_page_and_the_latex(board, tmp_path: Path) -> None:
    """Planted: sharp wins the STS mean, blurred loses it, clip equals raw there; no variant wins or loses WiC
    significantly."""
    delta = f"{sharp_mean(board):+.2f}"
    [matrix] = verdict_matrices(board)
    assert (matrix.setting, matrix.units, matrix.models) == ("fitted on test texts", ("MTEB STS", "WiC"), (BASE,))
    assert [c.text for c in matrix.cells[0]] == [f"sharp {delta} (1 worse)", "raw"]
    markdown = render_markdown(board)
    verdict = markdown[markdown.index("## Verdict"):markdown.index(f"## {BASE}")]
    assert re.search(rf"^\| {BASE} +\| sharp \{delta} \(1 worse\) +\| raw +\|$", verdict, re.M), verdict
    assert verdict.index("| encoder") < verdict.index(NOTE) < verdict.index(f"- {BASE}, MTEB STS")
    page = render_html(board)
    cells = re.findall(r'<td data-unit="([^"]+)" style="([^"]+)"><span class="c"><span class="w">([^<]+)</span>'
                       r'(?: <span class="n">([^<]+)</span>)?</span></td>', page)
    assert [(unit, head, tail) for unit, _, head, tail in cells] == [
        ("MTEB STS", f"sharp {delta}", "(1 worse)"), ("WiC", "raw", "")]
    assert cells[0][1].startswith("background:hsl(125,") and cells[1][1] == "background:#f1f1f1"  # green: a gain
    assert page.index('id="verdict"') < page.index('class="matrix"') < page.index('class="board"')
    latex = render_latex(board)
    assert latex.index("Verdict") < latex.index("\\section*{org/alpha}")
    assert f"\\textbf{{sharp}} \\\\ {delta} (1 worse)" in latex and "& raw \\\\ \\addlinespace" in latex


@needs_pdflatex
def test_the_latex_verdict_compiles_within_the_page(board, tmp_path: Path) -> None:
    assert_fits(compile_latex(render_latex(board), tmp_path))


def test_a_variant_whose_vectors_are_raws_on_a_task_says_so_in_its_cells(board) -> None:
    """Planted: clip zeroed no dimension on STS12 (its STS12 and mean cells are ``= raw``, in every format, never
    best), one on WiC (a result like any other)."""
    sts, wic = (next(t for s in board.sections for t in s.tables if t.title.startswith(g)) for g in ("MTEB", "word"))
    raw, clip = (next(r for r in sts.rows if r.variant == v) for v in ("raw", "clip"))
    assert [c.unchanged for c in clip.cells] == [True, True] and not any(c.best for c in clip.cells)
    assert [c.value for c in clip.cells] == [c.value for c in raw.cells] and clip.cells[0].delta == 0
    assert [c.unchanged for c in next(r for r in wic.rows if r.variant == "clip").cells] == [False]
    assert not any(c.unchanged for t in (sts, wic) for r in t.rows if r.variant != "clip" for c in r.cells)
    assert any(n.startswith("= raw: every fit of the row") for n in sts.notes)
    assert not any(n.startswith("= raw") for n in wic.notes)
    markdown = render_markdown(board)
    assert re.search(r"^\| clip +\| += raw \| += raw \|$", markdown, re.M), markdown
    assert re.search(r"^\| clip +\| +\d+\.\d\d \[", markdown[markdown.index("### word level"):], re.M)
    page = render_html(board)
    shown = re.findall(r'<td class="num[^"]*"[^>]*><span class="v">= raw</span></td>', page)
    assert len(shown) == 2 and all("best" not in td.split(">")[0] for td in shown)
    assert "= raw: every fit zeroed no dimension here" in page
    latex = render_latex(board)
    row = next(line for line in latex.splitlines() if line.startswith("clip &") and "= raw" in line)
    assert row.count("= raw") == 2 and "textbf" not in row
