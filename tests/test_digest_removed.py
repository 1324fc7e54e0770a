"""A result whose record is of a version that writes a digest, with the digest removed, is a modified file, not an
older one: the leaderboard refuses it in one line, or (``--accept-modified``) marks it † without an interval, and
the verdict does not judge it; a submission says what is wrong. The leaderboard also recomputes each main score
from its per-instance units, which catches an edit behind a recomputed scores-only digest. Hand-built folders
(:mod:`tests.report_helpers`): raw and whiten on STS12, 400 units each, whiten clearly worse."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from iso_bench.cli import main
from iso_bench.report import build_leaderboard, read_results
from iso_bench.report.results import LeaderboardError
from iso_bench.report.verdict import verdict_lines
from iso_bench.results.result_files import DIGEST, MODIFIED, OLDER, SCORES_DIGEST, scores_digest
from tests.report_helpers import sts_units, write_scored

BASE = "org/alpha"
HEAD = f"{BASE}, MTEB STS (mean), fitted on test texts: "


def _folder(root: Path, digest: bool | str = True) -> tuple[Path, Path]:
    raw = write_scored(root, BASE, "raw", "STS12", sts_units(400, 1.0, seed=1), digest=digest)
    whiten = write_scored(root, BASE, "whiten", "STS12", sts_units(400, 3.0, seed=1), digest=digest)
    return raw, whiten


def _edit(path: Path, *, drop: str | None = None, add: float = 0.0, rehash: bool = False) -> None:
    data = json.loads(path.read_text())
    entry = data["scores"]["test"][0]
    if drop:
        del entry["iso_bench"][drop]
    entry["main_score"] += add
    if rehash:  # an editor who recomputes the scores-only digest of iso-bench 0.1
        entry["iso_bench"][SCORES_DIGEST] = scores_digest(entry)
    path.write_text(json.dumps(data))


def _whiten_cell(board):
    table = next(t for s in board.sections for t in s.tables if t.title.startswith("MTEB STS"))
    return next(r for r in table.rows if r.variant == "whiten").cells[-1]


def test_a_removed_digest_with_a_raised_score_is_refused_or_marked_and_never_judged(tmp_path: Path, capsys) -> None:
    raw, whiten = _folder(tmp_path)
    before = verdict_lines(build_leaderboard(read_results(tmp_path)))
    assert before == [HEAD + "no variant beats raw significantly. Significantly worse than raw: whiten."]
    _edit(whiten, drop=DIGEST, add=0.5)
    with pytest.raises(LeaderboardError, match="the digest was removed, so the result was changed after its run"):
        read_results(tmp_path)
    assert main(["leaderboard", str(tmp_path), "--no-plot"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"iso-bench: error: {tmp_path / 'results'}/org__alpha+whiten/"), err
    results = read_results(tmp_path, accept_modified=True)
    assert {r.variant: r.check for r in results} == {"raw": "verified", "whiten": MODIFIED}
    board = build_leaderboard(results, accept_modified=True)
    cell = _whiten_cell(board)
    assert cell.mark == "modified" and cell.low is None and cell.q is None and cell.delta > 0
    assert verdict_lines(board) == [HEAD + "no verdict: results marked † (modified after their run) enter no "
                                    "paired test."]


def test_units_that_do_not_give_the_main_score_are_caught_behind_a_recomputed_older_digest(tmp_path: Path) -> None:
    """An iso-bench 0.1 file (scores-only digest, units beside it): the score raised and the digest recomputed
    checks as older, but its units give the old score: refused, or marked † with accept_modified."""
    _, whiten = _folder(tmp_path, digest="older")
    assert {r.check for r in read_results(tmp_path)} == {OLDER}
    build_leaderboard(read_results(tmp_path))  # as written: the units give each main score
    _edit(whiten, add=0.3, rehash=True)
    results = read_results(tmp_path)
    assert {r.check for r in results} == {OLDER}
    with pytest.raises(LeaderboardError, match=r"STS12.json: its main score .* is not the .* that its per-instance "
                                               r"units \(STS12.instances.npz, group test/default\) give"):
        build_leaderboard(results)
    board = build_leaderboard(results, accept_modified=True)
    assert _whiten_cell(board).mark == "modified" and _whiten_cell(board).q is None


def test_a_nan_raw_result_under_accept_modified_says_there_is_no_verdict(tmp_path: Path) -> None:
    raw, _ = _folder(tmp_path)
    text = raw.read_text()
    data = json.loads(text)
    data["scores"]["test"][0]["main_score"] = math.nan
    raw.write_text(json.dumps(data))
    board = build_leaderboard(read_results(tmp_path, accept_modified=True), accept_modified=True)
    assert verdict_lines(board) == [HEAD + "no verdict: raw's result is missing or not a finite number, so no "
                                    "variant is compared with it."]


def test_a_submission_names_a_removed_digest_as_a_modification(tmp_path: Path) -> None:
    from iso_bench.results.result_files import identity
    from iso_bench.results.submission import SubmissionError, _resign

    _, whiten = _folder(tmp_path)
    _edit(whiten, drop=DIGEST)
    entry = json.loads(whiten.read_text())["scores"]["test"][0]
    ident = identity(f"{BASE}+whiten", whiten.parent.name, {}, "STS12")
    with pytest.raises(SubmissionError, match=r"digest \(iso_bench.result_sha256\) was removed .* \(modified\)"):
        _resign(entry, ident, ident, whiten)
