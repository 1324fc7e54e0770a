"""What ``leaderboard -o TARGET`` replaces: only a regular file or nothing (through a temporary file and a rename);
a symlink is written through to its target, which the command says; a FIFO, a character device or a folder is
refused in one ``iso-bench: error:`` line before any rendering work, and left as it was (a folder where a file is
meant: tests/test_report_output.py). Every whole-file write
(:func:`iso_bench.files.replacing`: results, cache shards, plots) follows the same rule. The FIFO and the device
are made under the test's own folder; nothing under /dev is touched."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from iso_bench import report
from iso_bench.cli import main
from iso_bench.files import NotARegularFile, atomic_write_text
from iso_bench.report import write_leaderboard
from tests.report_helpers import small_case


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _char_device(path: Path) -> Path:
    """A character device node like /dev/null (1, 3), made here; skips where this user may not make one."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD (root)")
    return path


@pytest.fixture
def no_rendering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading results or drawing a plot fails the test: a refused target is refused before either."""
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("rendering work started before the output was checked")

    for name in ("read_results", "write_plots", "render_markdown", "render_html"):
        monkeypatch.setattr(report, name, started)


@pytest.mark.parametrize(("make", "kind"), [(_fifo, "a FIFO (named pipe)"), (_char_device, "a character device")])
@pytest.mark.parametrize("fmt", ["markdown", "csv", "html"])
def test_a_fifo_or_a_device_is_refused_in_one_line_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture, no_rendering: None, make, kind: str, fmt: str) -> None:
    target = make(tmp_path / ("board.html" if fmt == "html" else "board.md"))
    assert main(["leaderboard", str(tmp_path / "results"), "--format", fmt, "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"iso-bench: error: {target}: is {kind}, not a regular file, and is never replaced; "
                                "give the path of a regular file (or of none yet); to print the leaderboard, leave "
                                "-o out (and redirect standard output)"]
    assert not stat.S_ISREG(os.lstat(target).st_mode)  # still what it was
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left


def test_a_symlink_is_written_through_to_its_target_and_says_so(tmp_path: Path, capsys) -> None:
    results = small_case(tmp_path / "in")
    (tmp_path / "site").mkdir()
    real = tmp_path / "site" / "real.md"
    real.write_text("the board of last week\n")
    link = tmp_path / "board.md"
    link.symlink_to(Path("site") / "real.md")
    assert main(["leaderboard", str(results), "-o", str(link), "--no-plot"]) == 0
    assert link.is_symlink() and os.readlink(link) == str(Path("site") / "real.md")  # the link is kept
    assert real.read_text() == write_leaderboard(results)  # its target holds the new board
    assert capsys.readouterr().err == f"wrote {link} (a symlink: written through to {real})\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.md", "in", "site"]


def test_a_symlink_to_a_fifo_is_refused_naming_the_target(tmp_path: Path, capsys, no_rendering: None) -> None:
    fifo = _fifo(tmp_path / "pipe")
    (tmp_path / "board.md").symlink_to(fifo)
    assert main(["leaderboard", str(tmp_path), "-o", str(tmp_path / "board.md")]) == 2
    assert (f"iso-bench: error: {tmp_path / 'board.md'}: is a FIFO (named pipe) (the symlink's target {fifo}), not a "
            "regular file") in capsys.readouterr().err
    assert (tmp_path / "board.md").is_symlink() and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_plot_file_that_is_a_fifo_is_refused_before_any_plot_is_drawn(tmp_path: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    results = small_case(tmp_path / "in")
    fifo = _fifo(tmp_path / "board-org__alpha.png")  # where the plot of org/alpha goes
    monkeypatch.setattr(report, "write_plots", lambda *a, **k: pytest.fail("a plot was drawn"))
    assert main(["leaderboard", str(results), "-o", str(tmp_path / "board.md")]) == 2
    assert f"iso-bench: error: {fifo}: is a FIFO (named pipe)" in capsys.readouterr().err
    assert not (tmp_path / "board.md").exists() and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_every_whole_file_write_follows_the_same_rule(tmp_path: Path) -> None:
    fifo = _fifo(tmp_path / "STS12.json")
    with pytest.raises(NotARegularFile, match="is a FIFO"):  # refused, not blocked on a reader
        atomic_write_text(fifo, "{}")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    atomic_write_text(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"
