"""The published leaderboard is what the reporter renders from the committed result files, byte for byte."""

from __future__ import annotations

from pathlib import Path

from iso_bench.report import write_leaderboard

LEADERBOARDS = Path(__file__).resolve().parents[1] / "leaderboards"


def test_committed_leaderboard_renders_again_byte_for_byte(tmp_path: Path) -> None:
    committed = LEADERBOARDS / "leaderboard.md"
    assert committed.is_file(), "leaderboards/leaderboard.md is missing"
    out = tmp_path / "leaderboard.md"  # the same file name, so the plot links come out the same
    written = write_leaderboard(LEADERBOARDS, out)
    assert out.read_bytes() == committed.read_bytes()
    assert [p.name for p in written[1:]] == sorted(p.name for p in LEADERBOARDS.glob("leaderboard-*.png"))


def test_committed_plots_are_linked_and_present() -> None:
    text = (LEADERBOARDS / "leaderboard.md").read_text(encoding="utf-8")
    links = [line[line.index("](") + 2 : -1] for line in text.splitlines() if line.startswith("![")]
    assert links, "the leaderboard links no plot"
    for link in links:
        assert (LEADERBOARDS / link).is_file(), link
