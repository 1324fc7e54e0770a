"""The board per budget: the best variant at each size of vector beside raw at that size, judged by the verdict's
paired tests, in a table (at the end of a run and beside the leaderboard) and a picture of score against bytes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iso_bench.report import read_results, write_leaderboard
from iso_bench.report.budget import Size, budget_html, budget_latex, budget_markdown, budgets, size_of
from tests.report_helpers import main_of, set_record, sts_units, write_scored

BASE, N = "org/alpha", 400
# variant -> (noise of its predictions, bytes of its vector as stored for a 384-d model)
VARIANTS = {"raw": (1.0, 1536), "whiten": (0.3, 1536), "truncate-128": (1.2, 512), "pca-128": (0.6, 512),
            "raw-precision=binary": (1.5, 48), "whiten-precision=binary": (0.5, 48),
            "center-precision=binary": (1.45, 48), "pca-64": (0.8, 256)}


def _score(variant: str) -> float:
    return round(100 * main_of(sts_units(N, VARIANTS[variant][0], seed=1)), 2)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("budget")
    for variant, (noise, nbytes) in VARIANTS.items():
        path = write_scored(root, BASE, variant, "STSBenchmark", sts_units(N, noise, seed=1))
        set_record(path, storage={"precision": "float32", "dim": 384, "bytes": nbytes})
    return root


def test_a_size_is_read_from_the_spec_and_raw_at_it_is_raw_cut_and_stored_alike() -> None:
    assert size_of("raw") == Size(None) and size_of("whiten-256") == Size(256)
    assert size_of("whiten-256-precision=int8") == Size(256, "int8")
    assert Size(128, "binary").reference == "truncate-128-precision=binary" and Size(None).reference == "raw"
    assert size_of("cluster-pca-level=sentence-precision=binary") == Size(None, "binary")
    assert size_of("no-such-method") is None


def test_each_size_names_its_best_variant_against_raw_at_that_size(folder: Path) -> None:
    lines = budgets(read_results(folder))
    assert [(b.size.label, b.bytes) for b in lines] == [("full", 1536), ("128-d", 512), ("64-d", 256),
                                                         ("binary", 48)]
    full, cut, alone, binary = lines
    assert (full.best, full.score, full.reference_score) == ("whiten", _score("whiten"), _score("raw"))
    assert cut.best == "pca-128" and cut.reference_score == _score("truncate-128")
    assert cut.delta == pytest.approx(_score("pca-128") - _score("truncate-128"), abs=0.011)
    # binary: judged against raw's binary vectors, not raw's float32; center's small gain is no win
    assert binary.best == "whiten-precision=binary" and binary.reference_score == _score("raw-precision=binary")
    assert binary.delta == pytest.approx(_score("whiten-precision=binary") - _score("raw-precision=binary"), abs=0.011)
    assert binary.q is not None and binary.q <= 0.05 and binary.low < binary.delta < binary.high
    assert dict(binary.points) == {v: _score(v) for v in ("raw-precision=binary", "whiten-precision=binary",
                                                          "center-precision=binary")}
    # 64 dimensions: no raw cut to 64 was run, so nothing is tested and the table says so
    assert alone.best is None and alone.reference_score is None and alone.points == (("pca-64", _score("pca-64")),)
    table = budget_markdown(lines)
    pca64 = _score("pca-64")
    assert f"| 64-d | 256 | pca-64 (untested) | {pca64:.2f} | truncate-64 | – | no raw at this size |" in table
    assert f"| binary | 48 | whiten-precision=binary | {_score('whiten-precision=binary'):.2f} | " in table


def test_a_held_out_size_is_judged_and_shown_beside_the_unfitted_raw_at_that_size(folder: Path, tmp_path: Path) -> None:
    """raw, a cut of it and its signs are not fitted: the same results are raw at that size for every setting, so a
    held-out line names their score, as its paired test used them, and its picture's panel draws them."""
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    for variant, noise, nbytes in (("whiten", 0.3, 1536), ("whiten-precision=binary", 0.5, 48)):
        path = write_scored(tmp_path, BASE, variant, "STSBenchmark", sts_units(N, noise, seed=2),
                            setup={"fit_corpus": "held-out"})
        set_record(path, storage={"precision": "float32", "dim": 384, "bytes": nbytes})
    held = {b.size.label: b for b in budgets(read_results(tmp_path)) if "held-out" in b.setting}
    assert set(held) == {"full", "binary"}
    assert held["full"].best == "whiten" and held["full"].reference_score == _score("raw")
    binary = held["binary"]
    assert binary.best == "whiten-precision=binary" and binary.reference_score == _score("raw-precision=binary")
    assert binary.delta == pytest.approx(binary.score - binary.reference_score, abs=0.011)
    assert ("raw-precision=binary", _score("raw-precision=binary")) in binary.points


def test_one_size_alone_has_no_budget_table(folder: Path) -> None:
    results = [r for r in read_results(folder) if size_of(r.variant) == Size(None)]
    assert budgets(results) == [] and budget_markdown([]) == budget_html([]) == budget_latex([]) == ""


def test_the_leaderboard_writes_the_budget_table_and_its_picture(folder: Path, tmp_path: Path) -> None:
    written = write_leaderboard(folder, tmp_path / "board.md")
    names = sorted(p.name for p in written)
    assert "board-budget.md" in names and "board-budget-org__alpha.png" in names
    text = (tmp_path / "board-budget.md").read_text()
    assert text.startswith("# Per budget") and "| org/alpha | MTEB STS | fitted on test texts | full | 1536 |" in text
    assert (tmp_path / "board-budget-org__alpha.png").read_bytes()[:4] == b"\x89PNG"


def test_the_budget_picture_draws_every_point_raw_at_each_size_in_black(folder: Path, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each size's points at its bytes: raw at that size as black squares, every other variant in orange."""
    from matplotlib.figure import Figure

    from iso_bench.report.budget import write_budget_plots

    drawn: list[tuple[str, float, float]] = []

    def record(fig: Figure, *args, **kwargs) -> None:
        for ax in fig.axes:
            for collection in ax.collections:
                colour = "black" if tuple(collection.get_facecolor()[0][:3]) == (0.0, 0.0, 0.0) else "other"
                drawn.extend((colour, x, y) for x, y in collection.get_offsets().tolist())

    monkeypatch.setattr(Figure, "savefig", record)
    lines = budgets(read_results(folder))
    write_budget_plots(lines, tmp_path, "board")
    expected = [("black" if v == b.size.reference else "other", float(b.bytes), s) for b in lines for v, s in b.points]
    assert sorted(drawn) == sorted(expected) and len(expected) == 8
    assert ("black", 512.0, _score("truncate-128")) in drawn and ("other", 256.0, _score("pca-64")) in drawn


def test_the_html_and_latex_boards_carry_the_same_table_beside_them(folder: Path, tmp_path: Path) -> None:
    """The table per budget beside the web page and the LaTeX document, with the markdown table's values: the
    binary size's best variant, its score and raw's at that size; none beside a board of one size."""
    binary, raw = _score("whiten-precision=binary"), _score("raw-precision=binary")
    page, budget = write_leaderboard(folder, tmp_path / "site", "html")
    html = budget.read_text(encoding="utf-8")
    assert (page.name, budget.name) == ("index.html", "index-budget.html") and html.startswith("<!DOCTYPE html>")
    assert (f'<td>binary</td><td class="num">48</td><td>whiten-precision=binary</td><td class="num">{binary:.2f}'
            f'</td><td>raw-precision=binary</td><td class="num">{raw:.2f}</td>') in html
    assert "<td>pca-64 (untested)</td>" in html and "Benjamini-Hochberg q ≤ 0.05" in html
    tex, beside = write_leaderboard(folder, tmp_path / "board.tex", "latex")
    latex = beside.read_text(encoding="utf-8")
    assert beside.name == "board-budget.tex" and latex.startswith("\\documentclass") and latex.isascii()
    assert f"binary & 48 & whiten-precision=binary & {binary:.2f} & raw-precision=binary & {raw:.2f} & " in latex
    assert "\\begin{tabular}{llllrlrlrl}" in latex and latex.rstrip().endswith("\\end{document}")
    if shutil.which("pdflatex"):  # it compiles as written
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", beside.name], cwd=tmp_path,
                              capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout[-2000:]
    [fragment] = [p for p in write_leaderboard(folder, tmp_path / "part.tex", "latex", fragment=True) if "budget" in
                  p.name]
    assert "\\documentclass" not in fragment.read_text() and "\\isobenchfit{" in fragment.read_text()
    one = tmp_path / "one"
    for variant in ("raw", "whiten"):
        write_scored(one, BASE, variant, "STSBenchmark", sts_units(N, VARIANTS[variant][0], seed=1))
    assert [p.name for p in write_leaderboard(one, tmp_path / "one-site", "html")] == ["index.html"]
    assert [p.name for p in write_leaderboard(one, tmp_path / "one.tex", "latex")] == ["one.tex"]


def test_a_computed_board_writes_every_format_as_write_leaderboard_does_reading_once(
        folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compute_leaderboard + write_computed: the files of write_leaderboard, byte for byte, in each format, from one
    read of the folder and one computation of its per-budget lines (reusing the board's draws, the same lines)."""
    import iso_bench.report as report

    formats = {"markdown": "board.md", "html": "site", "latex": "board.tex"}
    computed = report.compute_leaderboard(folder)
    calls: list[int] = []
    monkeypatch.setattr(report, "budgets", lambda *a, **k: calls.append(1) or budgets(*a, **k))
    monkeypatch.setattr(report, "read_results", lambda *a, **k: pytest.fail("the folder was read again"))
    mine = {fmt: report.write_computed(computed, tmp_path / "once" / name, fmt) for fmt, name in formats.items()}
    assert len(calls) == 1 and len(mine["markdown"]) == 4  # the board, its plot, the budget table and its picture
    monkeypatch.undo()
    # the boards per size reuse the board's draws (computed.boot): the lines of boards drawn afresh
    assert computed.budget_lines == budgets(read_results(folder)) and len(computed.budget_lines) > 3
    for fmt, name in formats.items():
        theirs = write_leaderboard(folder, tmp_path / "direct" / name, fmt)
        assert [p.relative_to(tmp_path / "once") for p in mine[fmt]] == [
            p.relative_to(tmp_path / "direct") for p in theirs], fmt
        assert [p.read_bytes() for p in mine[fmt]] == [p.read_bytes() for p in theirs], fmt


def test_the_verdict_judges_the_full_size_and_each_size_with_its_raw_is_a_family_of_its_own(folder: Path) -> None:
    from iso_bench.numerics.stats import benjamini_hochberg
    from iso_bench.report import build_leaderboard
    from iso_bench.report.cells import Cell
    from iso_bench.report.uncertainty import adjust
    from iso_bench.report.verdict import judgements

    board = build_leaderboard(read_results(folder))
    [table] = [t for s in board.sections for t in s.tables if t.title.startswith("MTEB STS")]
    groups = {row.variant: row.family for row in table.rows}
    # truncate-128 is raw at 128-d, so pca-128 is judged there; no truncate-64 was run, so pca-64 stays in the verdict
    assert groups == {"raw": "full", "whiten": "full", "pca-64": "full", "truncate-128": "128-d", "pca-128": "128-d",
                      "raw-precision=binary": "binary", "whiten-precision=binary": "binary",
                      "center-precision=binary": "binary"}
    cells = [(row.variant, cell) for row in table.rows for cell in row.cells if cell.p is not None]
    for group in ("full", "128-d", "binary"):  # each family's q values: Benjamini-Hochberg over its own p values
        mine = [cell for variant, cell in cells if groups[variant] == group]
        assert mine and [c.q for c in mine] == pytest.approx(benjamini_hochberg([c.p for c in mine]).tolist())
    assert {row.variant for j in judgements(board) for row, _ in j.tested} == {"whiten", "pca-64"}
    assert any("at the model's full size" in note and "128-d: m = " in note for note in table.notes)
    from iso_bench.report.heatmap import heatmaps
    from iso_bench.report.matrix import matrix_note, verdict_matrices

    said = "at another size beside raw at that size (128-d, binary) are judged in the table per budget"
    assert said in matrix_note(verdict_matrices(board)) and all(said in h.caption for h in heatmaps(board))
    # one column, p values by hand: two families, 0.01, 0.04, 0.03 (BH: 0.03, 0.04, 0.04) and 0.02, 0.2 (0.04, 0.2)
    column = [Cell(1.0, 0.0, p=p) for p in (0.01, 0.04, 0.03, 0.02, 0.2)]
    [got] = adjust([column], ["full", "full", "full", "int8", "int8"])
    assert [c.q for c in got] == pytest.approx([0.03, 0.04, 0.04, 0.04, 0.2], abs=1e-12)
    [one] = adjust([column])  # one family of five: 0.01 -> 0.05, 0.04 -> 0.05 and 0.2 stays
    assert [c.q for c in one] == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.2], abs=1e-12)


def test_raw_at_a_size_is_looked_for_beside_the_same_raw_and_the_note_names_only_what_the_verdict_left(
        tmp_path: Path) -> None:
    """Model a has truncate-128 beside its pca-128, model b has none: b's pca-128 stays in the verdict, a's is
    judged per budget. A table whose full size has no tested row says so without a clause of m = 0."""
    from iso_bench.report import build_leaderboard
    from iso_bench.report.matrix import matrix_note, verdict_matrices
    from iso_bench.report.verdict import judged_apart, judgements

    noise = {"raw": 1.0, "truncate-128": 1.2, "pca-128": 0.6}
    for base, variants in (("org/a", ("raw", "truncate-128", "pca-128")), ("org/b", ("raw", "pca-128"))):
        for variant in variants:
            write_scored(tmp_path, base, variant, "STSBenchmark", sts_units(N, noise[variant], seed=1))
    board = build_leaderboard(read_results(tmp_path))
    judged = {(j.model, row.variant) for j in judgements(board) for row, _ in j.tested}
    assert judged == {("org/b", "pca-128")}
    assert judged_apart(board) == ("128-d",) and "(128-d) are judged" in matrix_note(verdict_matrices(board))
    [a] = [t for s in board.sections if s.title == "org/a" for t in s.tables if t.title.startswith("MTEB STS")]
    note = next(n for n in a.notes if n.startswith("(+d)*"))
    assert "at the model's full size" not in note and "over each other size's comparisons (128-d: m = 4, " in note
