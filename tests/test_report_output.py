"""``iso-bench leaderboard`` refuses, in one line and before any work, what it cannot do: an output it cannot
write (an empty path, a folder, a path under a file, ``/proc``, a write that fails), a file given as the results
folder; its help shows percents once; a note tells another model's result from an older iso-bench one."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.cli import main
from iso_bench.report import LeaderboardError, build_leaderboard, read_results, render_markdown, write_leaderboard
from iso_bench.report.units import NOT_ISO_BENCH, WRITTEN_BEFORE
from tests.report_helpers import small_case, sts_units, write_result, write_scored

BAD_OUTPUTS = {  # -o: (the path, what the one line says about it)
    "empty": ("", "the output path is empty (-o ''): give a file to write"),
    "folder": ("{tmp}/out", "{tmp}/out: is a folder, not a file; give a file to write, e.g. -o "
               "{tmp}/out/leaderboard.md"),
    "under a file": ("{tmp}/a-file/board.md", "{tmp}/a-file/board.md: {tmp}/a-file is a file, not a folder"),
    "deeper under a file": ("{tmp}/a-file/x/board.md", "{tmp}/a-file/x/board.md: {tmp}/a-file is a file, not a folder"),
    "/proc": ("/proc/iso-bench-test.md", "/proc/iso-bench-test.md: cannot write the leaderboard there ("),
}


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
def test_an_output_that_cannot_be_written_is_one_line_and_no_traceback(tmp_path: Path, kind: str) -> None:
    results = small_case(tmp_path / "in")
    (tmp_path / "out").mkdir()
    (tmp_path / "a-file").write_text("not a folder\n")
    output, says = (s.format(tmp=tmp_path) for s in BAD_OUTPUTS[kind])
    run = subprocess.run([sys.executable, "-m", "iso_bench", "leaderboard", str(results), "-o", output],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 2 and run.stdout == ""
    assert "Traceback" not in run.stderr and len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith(f"iso-bench: error: {says}"), run.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []  # nothing half written
    assert (tmp_path / "a-file").read_text() == "not a folder\n"


@pytest.mark.parametrize("target", ["iso_bench.report.atomic_write_text", "iso_bench.report.plots.atomic_write_bytes"])
def test_a_write_that_fails_after_the_check_names_the_file(tmp_path: Path, monkeypatch, capsys, target: str) -> None:
    """A read-only file system or a full disk met while writing the markdown or a plot (PNG): one line, exit 2."""
    results = small_case(tmp_path / "in")
    code = errno.EROFS if target.endswith("text") else errno.ENOSPC

    def fail(*args, **kwargs) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(target, fail)
    out = tmp_path / "out" / "board.md"
    with pytest.raises(LeaderboardError, match=f"{out}: cannot write the leaderboard there \\({os.strerror(code)}\\); "
                       "give a file in a folder you can write to"):
        write_leaderboard(results, out)
    assert main(["leaderboard", str(results), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"iso-bench: error: {out}: cannot write the leaderboard there "
                                       f"({os.strerror(code)}); give a file in a folder you can write to\n")


def test_a_file_given_as_the_results_folder_is_called_a_file(tmp_path: Path, capsys) -> None:
    result = write_result(tmp_path, "org/alpha", "raw", "STS12", 0.7)
    assert main(["leaderboard", str(result)]) == 2
    assert capsys.readouterr().err == (
        f"iso-bench: error: {result}: is a file, not a results folder; give the folder that holds "
        "results/<model>/<revision>/<task>.json (the --results folder of iso-bench run)\n")
    assert main(["leaderboard", str(tmp_path / "nowhere")]) == 2
    assert "no such results folder" in capsys.readouterr().err


def test_the_help_shows_a_percent_once(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["leaderboard", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0 and "%%" not in text
    assert "each score with its 95% interval" in text and "--no-ci no 95% intervals" in text


def test_another_models_result_is_not_called_an_older_iso_bench_one(tmp_path: Path) -> None:
    """A result without an iso_bench record (mteb's own model) says so; one of an iso-bench version that recorded
    no interval says that, and the two are told apart in the note."""
    write_scored(tmp_path, "org/alpha", "raw", "STS12", sts_units(300, 0.5))
    write_result(tmp_path, "org/alpha", "abtt", "STS12", 0.6)  # iso-bench, before intervals
    foreign = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.5, digest=False)
    data = json.loads(foreign.read_text())
    del data["scores"]["test"][0]["iso_bench"]
    foreign.write_text(json.dumps(data))
    markdown = render_markdown(build_leaderboard(read_results(tmp_path)))
    assert (f"- Value alone (no interval, and no test of a difference from raw): {WRITTEN_BEFORE}: abtt on all 2 "
            f"columns; {NOT_ISO_BENCH}: whiten on all 2 columns.") in markdown
    assert NOT_ISO_BENCH == "not written by an iso-bench variant (no iso_bench record)"


def test_a_board_without_plots_says_why_and_the_page_captions_only_its_plots(tmp_path: Path) -> None:
    """org/alpha has the isotropy task (a plot), org/beta not (a line saying why); the page's figures each have
    the caption of what they draw, and none describes the isotropy plot beta does not have."""
    small_case(tmp_path / "in")
    for variant, score in (("raw", 0.70), ("whiten", 0.66)):
        for task in ("STS12", "STSBenchmark"):
            write_result(tmp_path / "in", "org/beta", variant, task, score)
    out = tmp_path / "out" / "board.md"
    written = write_leaderboard(tmp_path / "in", out)
    text = out.read_text(encoding="utf-8")
    assert [p.name for p in written[1:]] == ["board-org__alpha.png"] and "](board-org__alpha.png)" in text
    assert ("No plot for org/beta: the plot shows each variant's sentence IsoScore against its mean scores, and its "
            "results have no isotropy diagnostics (run the isotropy suite: iso-bench run --tasks isotropy).") in text
    assert text.count("No plot for") == 1  # not for alpha, nor the comparison of models
    assert "No plot" not in write_leaderboard(tmp_path / "in", tmp_path / "b2.md", plot=False)[0].read_text()
    page = write_leaderboard(tmp_path / "in", fmt="html")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", page)
    assert [c for c in captions if "IsoScore" in c] == [
        "org/alpha: sentence IsoScore on Isotropy-STSB against each mean score."]  # no interval: no bars said
    assert sum("difference from raw on each task" in c for c in captions) == 2  # alpha's and beta's STS tables
    assert page.count("<figure>") == len(captions) == 3
    assert 'width="' not in "".join(re.findall(r"<svg[^>]*>", page))  # sized by the page, not in pt
