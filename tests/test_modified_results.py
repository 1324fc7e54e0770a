"""A result changed after its run, rendered with ``accept_modified`` (the fourth fault drill): described by what
was changed (a main score its unchanged units do not give is not called a changed units file), and never bold,
never "best", in markdown, CSV and LaTeX."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from iso_bench.report import build_leaderboard, read_results, render_csv, render_markdown
from iso_bench.report.latex import render_latex
from tests.report_helpers import sts_units, write_scored
from tests.test_report_uncertainty import N


@pytest.fixture
def edited(tmp_path: Path) -> Path:
    """raw; whiten (better than raw); center (identical to raw) whose STS12 main score was then edited to 99.99,
    its units file untouched: the edited value would top every column and the comparison."""
    for task, gold in (("STS12", 1), ("STSBenchmark", 2)):
        write_scored(tmp_path, "org/alpha", "raw", task, sts_units(N, 1.0, 0, gold))
        write_scored(tmp_path, "org/alpha", "whiten", task, sts_units(N, 0.5, 1, gold))
        write_scored(tmp_path, "org/alpha", "center", task, sts_units(N, 1.0, 0, gold))
    path = next((tmp_path / "results" / "org__alpha+center").glob("*/STS12.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["scores"]["test"][0]["main_score"] = 0.9999
    path.write_text(json.dumps(data), encoding="utf-8")
    return tmp_path


def test_an_edited_main_score_is_described_as_such_and_never_best(edited: Path) -> None:
    board = build_leaderboard(read_results(edited, accept_modified=True), accept_modified=True)
    markdown = render_markdown(board)
    row = next(line for line in markdown.splitlines() if line.startswith("| center "))
    assert "99.99 (+32.55)†" in row and "**" not in row  # shown, marked, not bold
    assert "main score is not the one its per-instance units give (its units file unchanged)" in markdown
    assert "units file no longer matches the sha256" not in markdown  # its units file was not changed
    assert "A cell marked † is never bold, and its row never best." in markdown
    assert "center (best)" not in markdown and "| whiten (best) |" in markdown  # the comparison's best is whiten
    rows = list(csv.reader(io.StringIO(render_csv(board))))
    tags = {(r[3], r[4]) for r in rows[1:] if r[0].startswith("best variant")}
    assert ("center", "best") not in tags and ("whiten", "best") in tags
    assert not any(r[3] == "center" and r[8] == "1" for r in rows[1:])  # never best in any column
    latex = render_latex(board)
    center = next(line for line in latex.splitlines() if line.startswith("center & "))
    assert r"99.99$^\dagger$" in center and r"\textbf" not in center
    assert "center (best)" not in latex


def test_a_changed_units_file_is_still_described_as_a_changed_units_file(edited: Path) -> None:
    import numpy as np

    path = next((edited / "results" / "org__alpha+whiten").glob("*/STSBenchmark.json"))
    npz = path.with_name("STSBenchmark.instances.npz")
    with np.load(npz) as data:
        arrays = dict(data)
    arrays["test/default/units"][0, 0] += 1.0
    with npz.open("wb") as f:
        np.savez(f, **arrays)
    markdown = render_markdown(build_leaderboard(read_results(edited, accept_modified=True), accept_modified=True))
    notes = [line for line in markdown.splitlines() if line.startswith("- † = modified")]
    assert any("units file no longer matches the sha256" in n and "whiten" in n and "center" not in n for n in notes)
    assert any("main score is not the one" in n and "center" in n and "whiten" not in n for n in notes)


def test_a_missing_units_file_is_refused_naming_it_and_no_ci_renders_the_scores(tmp_path: Path) -> None:
    """A folder copied without one of its units files: the board refuses it, naming the file and how many more are
    missing, never renders that result without interval; ``ci=False`` renders every score without reading any."""
    from iso_bench.report.board import LeaderboardError

    for variant, scale in (("raw", 1.0), ("whiten", 0.5), ("center", 1.0)):
        write_scored(tmp_path, "org/alpha", variant, "STS12", sts_units(N, scale, variant != "raw", 1))
    gone = sorted((tmp_path / "results").glob("org__alpha+[cw]*/*/STS12.instances.npz"))
    assert len(gone) == 2
    for npz in gone:
        npz.unlink()
    with pytest.raises(LeaderboardError, match=rf"^{re.escape(str(gone[0]))}: the units file that .*STS12.json records "
                                               r"is missing \(and those of 1 more result\).*--no-ci"):
        build_leaderboard(read_results(tmp_path))
    board = build_leaderboard(read_results(tmp_path), ci=False)
    assert "| center " in render_markdown(board) and board.n_files == 3
