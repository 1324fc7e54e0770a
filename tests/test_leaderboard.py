"""The reporter: aggregation of a hand-written results folder, each renderer's exact output, reading and errors.

The exact outputs (``EXPECTED_*``) are the tables without intervals (``ci=False``, ``--no-ci``), byte for byte
what the reporter rendered before it read evaluation units; with them (the default) a folder without units
gets the same tables plus a note saying why no cell has an interval. Groups from the cards, presentation (clip,
whiten) and the run summary: tests/test_report.py; setups (experiment folders): tests/test_report_setups.py;
intervals, tests and seeds: tests/test_report_uncertainty.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iso_bench.registry import IsoBenchError
from iso_bench.report import (
    FORMATS,
    LeaderboardError,
    build_leaderboard,
    markdown_table,
    plot_data,
    read_results,
    render_csv,
    render_latex,
    render_markdown,
    split_model_name,
    write_leaderboard,
    write_plots,
)
from iso_bench.report.board import place
from iso_bench.report.tables import format_delta
from iso_bench.results.benchmark import NAME, definition_sha256
from tests.report_helpers import CMD_A, CMD_W, REV, small_case, write_result

PROVENANCE_STS = """\
Provenance:

- iso-bench: 0.1.0
- mteb: 2.26.24
- model: org/alpha @ 0123456789abcdef0123456789abcdef01234567
- extraction: layer=-1, max_length=256, normalize=true, pooling=mean
- data:
  - STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5)
  - STSBenchmark: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)
- fit:
  - abtt (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
  - raw: nothing fitted
  - whiten (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
- date: 2026-11-22 to 2026-11-23
- hardware:
  - NVIDIA H100 (cuda)
  - not recorded in 1 of 5 result files
- software:
  - platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0
  - not recorded in 1 of 5 result files
- command:
  - `iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB`
  - `iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB`
  - not recorded in 1 of 5 result files
"""  # noqa: E501

# the line under the title: this iso-bench's benchmark, what the 7 hand-written results record (none), how to cite
BENCHMARK_LINE = (f"Benchmark: {NAME}, definition SHA-256 {definition_sha256()} (its tasks, main scores, fit "
                  "protocol and method defaults: `iso_bench.results.benchmark.definition()`). Result files by the "
                  "benchmark they record: none recorded: 7. Cite as `isobench2026` (CITATION.cff at the repository "
                  "root), with the definition's SHA-256.")

EXPECTED_MARKDOWN = """\
# iso-bench leaderboard

Built from 7 result files. Every table is followed by the provenance of its numbers; – is a missing result, never \
averaged.

""" + BENCHMARK_LINE + """

## org/alpha

revision 0123456789abcdef0123456789abcdef01234567

### MTEB STS: main score × 100 (cosine Spearman)

| variant   |             STS12 |   STSBenchmark |   mean MTEB-STS (2 tasks, cosine Spearman) |
|:----------|------------------:|---------------:|-------------------------------------------:|
| raw       |         **72.37** |      **82.03** |                                  **77.20** |
| abtt      | **72.37 (±0.00)** |              – |                                          – |
| whiten    |     65.47 (−6.90) |  79.93 (−2.10) |                              72.70 (−4.50) |

- Main score × 100 (cosine Spearman), two decimals; (+d) / (−d) = difference from raw, computed from the rounded \
values; bold = best in its column (ties: all bold).
- mean MTEB-STS (2 tasks, cosine Spearman) = unweighted mean of STS12, STSBenchmark; a variant missing any of them \
gets – (never a mean of the present cells).
- Missing (–): abtt on STSBenchmark: no result file, or a non-finite score.

""" + PROVENANCE_STS + """
### isotropy diagnostics: Isotropy-STSB

| variant   |   sentence I(W) |   sentence IsoScore |
|:----------|----------------:|--------------------:|
| raw       |          0.7666 |              0.2772 |
| abtt      |               – |                   – |
| whiten    |               – |    1.0000 (+0.7228) |

- Diagnostics of the vectors on Isotropy-STSB, as fractions; (+d) / (−d) = difference from raw. Not ranked and never \
averaged: more isotropy is not better by itself. I(W): Mu & Viswanath 2018 (1 = isotropic); IsoScore: Rudman et al. \
2022; avg. cosine: mean cosine of all pairs.
- I(W) of whitened vectors (whiten) is not shown (–, not a missing result): I(W) takes its directions from the \
eigenvectors of WᵀW; after whitening those eigenvalues are (nearly) equal, any basis qualifies and I(W) moves with \
rounding noise (a rerun of the same fit can move it by more than 0.5). For whitened rows read IsoScore.
- Missing (–): abtt on Isotropy-STSB: no result file, or a non-finite score.

Provenance:

- iso-bench: 0.1.0
- mteb: 2.26.24
- model: org/alpha @ 0123456789abcdef0123456789abcdef01234567
- extraction: layer=-1, max_length=256, normalize=true, pooling=mean
- data: Isotropy-STSB: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 \
b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)
- fit:
  - raw: nothing fitted
  - whiten (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
- date: 2026-11-22
- hardware: NVIDIA H100 (cuda)
- software: platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0
- command:
  - `iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB`
  - `iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB`

## Models compared

### best variant of each model by mean MTEB-STS (2 tasks, cosine Spearman)

| model     | revision     | variant    |   mean MTEB-STS (2 tasks, cosine Spearman) |
|:----------|:-------------|:-----------|-------------------------------------------:|
| org/alpha | 0123456789ab | raw (best) |                                  **77.20** |

- best = the variant with the highest mean MTEB-STS (2 tasks, cosine Spearman), among the variants with a result on \
every one of its tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.
- Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the model's raw; bold \
= best in the column over all rows; – = missing, never averaged.

""" + PROVENANCE_STS


NO_UNITS_NOTE = ("- Value alone (no interval, and no test of a difference from raw) in every cell: written before "
                 "intervals were recorded.\n")
EXPECTED_MARKDOWN_CI = EXPECTED_MARKDOWN.replace(
    "gets – (never a mean of the present cells).\n", "gets – (never a mean of the present cells).\n" + NO_UNITS_NOTE
).replace("model's raw; bold = best in the column over all rows; – = missing, never averaged.\n",
          "model's raw; bold = best in the column over all rows; – = missing, never averaged.\n" + NO_UNITS_NOTE)


def test_markdown_exact(tmp_path: Path) -> None:
    """Without intervals: the previous rendering, byte for byte."""
    board = build_leaderboard(read_results(small_case(tmp_path)), ci=False)
    assert render_markdown(board) == EXPECTED_MARKDOWN


def test_markdown_exact_with_intervals_but_no_units(tmp_path: Path) -> None:
    """Results written before intervals: the same tables, each ranked one with a note saying why it has none."""
    board = build_leaderboard(read_results(small_case(tmp_path)))
    assert board.ci and not any(c.low is not None for s in board.sections for t in s.tables for r in t.rows
                                for c in r.cells)
    assert render_markdown(board) == EXPECTED_MARKDOWN_CI
    assert EXPECTED_MARKDOWN_CI.count(NO_UNITS_NOTE) == 2  # the STS table and the comparison; not the diagnostics


EXPECTED_CSV = """\
table,model,revision,variant,tag,column,value,delta_vs_raw,best,check
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,STS12,72.37,,1,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,STSBenchmark,82.03,,1,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,"mean MTEB-STS (2 tasks, cosine Spearman)",77.20,,1,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,STS12,72.37,0.00,1,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,STSBenchmark,,,0,
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,"mean MTEB-STS (2 tasks, cosine Spearman)",,,0,
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,STS12,65.47,-6.90,0,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,STSBenchmark,79.93,-2.10,0,verified
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,"mean MTEB-STS (2 tasks, cosine Spearman)",72.70,-4.50,0,verified
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,sentence I(W),0.7666,,0,verified
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,sentence IsoScore,0.2772,,0,verified
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,sentence I(W),,,0,
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,sentence IsoScore,,,0,
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,sentence I(W),,,0,
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,sentence IsoScore,1.0000,+0.7228,0,verified
"best variant of each model by mean MTEB-STS (2 tasks, cosine Spearman)",org/alpha,0123456789abcdef0123456789abcdef01234567,raw,best,"mean MTEB-STS (2 tasks, cosine Spearman)",77.20,,1,verified
"""  # noqa: E501



def test_csv_exact(tmp_path: Path) -> None:
    assert render_csv(build_leaderboard(read_results(small_case(tmp_path)), ci=False)) == EXPECTED_CSV
    with_ci = render_csv(build_leaderboard(read_results(tmp_path))).splitlines()
    ci_columns = ",low,high,sd_seeds,delta_low,delta_high,p_value,q_value,significant"
    assert with_ci == [EXPECTED_CSV.splitlines()[0] + ci_columns] + [line + ",,,,,,,," for line in
                                                                    EXPECTED_CSV.splitlines()[1:]]


def test_same_bytes_whatever_the_order_or_place(tmp_path: Path) -> None:
    """Two renders, files written in the opposite order, another folder: the same bytes in every format."""
    for ci in (True, False):
        one = build_leaderboard(read_results(small_case(tmp_path / f"a{ci}")), ci)
        two = build_leaderboard(read_results(small_case(tmp_path / "somewhere" / f"else{ci}", reverse=True)), ci)
        shuffled = build_leaderboard(list(reversed(read_results(tmp_path / f"a{ci}"))), ci)
        for render in (render_markdown, render_csv, render_latex):
            assert render(one) == render(two) == render(shuffled) == render(one)


def test_missing_cell_never_enters_a_mean(tmp_path: Path) -> None:
    board = build_leaderboard(read_results(small_case(tmp_path)))
    sts = board.sections[0].tables[0]
    abtt = next(r for r in sts.rows if r.variant == "abtt")
    assert [c.value for c in abtt.cells] == [72.37, None, None]  # not 72.37, the mean of the present cell
    assert [c.best for c in sts.rows[0].cells] == [True, True, True] and abtt.cells[0].best  # a tie: both bold


def test_models_compared(tmp_path: Path) -> None:
    """A second model whose center beats its raw; ties on the criterion list every tied variant."""
    small_case(tmp_path)
    for variant, sts12, stsb in (("raw", 0.70, 0.80), ("center", 0.76, 0.83), ("clip", 0.80, 0.79)):
        write_result(tmp_path, "org/beta", variant, "STS12", sts12)
        write_result(tmp_path, "org/beta", variant, "STSBenchmark", stsb)
    write_result(tmp_path, "org/beta", "center", "WiC", 0.61)
    board = build_leaderboard(read_results(tmp_path), ci=False)
    assert [s.title for s in board.sections] == ["org/alpha", "org/beta", "Models compared"]
    table = board.sections[-1].tables[0]
    assert markdown_table(table).split("\n\nProvenance:")[0] == """\
| model     | revision     | variant       |   mean MTEB-STS (2 tasks, cosine Spearman) |       WiC |
|:----------|:-------------|:--------------|-------------------------------------------:|----------:|
| org/alpha | 0123456789ab | raw (best)    |                                      77.20 |         – |
| org/beta  | 0123456789ab | raw           |                                      75.00 |         – |
| org/beta  | 0123456789ab | center (best) |                          **79.50 (+4.50)** | **61.00** |
| org/beta  | 0123456789ab | clip (best)   |                          **79.50 (+4.50)** |         – |

- best = the variant with the highest mean MTEB-STS (2 tasks, cosine Spearman), among the variants with a result on \
every one of its tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.
- Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the model's raw; bold \
= best in the column over all rows; – = missing, never averaged."""


def test_provenance_block(tmp_path: Path) -> None:
    """Versions, model and revision, data revision and checksum (no local path), fits, date, hardware, commands."""
    board = build_leaderboard(read_results(small_case(tmp_path)))
    prov = dict(board.sections[0].tables[0].provenance)
    assert prov["model"] == ("org/alpha @ " + REV,)
    assert prov["data"][0].startswith("STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5")
    assert not any("/home/someone" in line for values in prov.values() for line in values)
    assert prov["fit"][-1] == ("whiten (n_components=null): fit on the evaluated task's own texts (split test; "
                               "transductive), sentence level, seed 0")
    assert prov["date"] == ("2026-11-22 to 2026-11-23",)
    assert prov["command"] == (CMD_A, CMD_W, "not recorded in 1 of 5 result files")
    assert markdown_table(board.sections[0].tables[0]).endswith(PROVENANCE_STS)


def test_old_files_without_records_render(tmp_path: Path) -> None:
    """A plain mteb result (no iso_bench record, no model_meta.json, unknown task, NaN score) renders with –."""
    write_result(tmp_path, "org/alpha", "raw", "Banking77", 0.5, meta=False)
    path = write_result(tmp_path, "org/alpha", "whiten", "Banking77", float("nan"), meta=False)
    data = json.loads(path.read_text())
    del data["scores"]["test"][0]["iso_bench"]
    path.write_text(json.dumps(data))
    board = build_leaderboard(read_results(tmp_path))
    table = board.sections[0].tables[0]
    assert table.title == "other tasks: main score × 100 (main score)"
    assert [c.value for r in table.rows for c in r.cells] == [50.0, None]
    assert dict(table.provenance)["fit"] == ("raw: nothing fitted", "whiten: not recorded")
    assert "whiten on Banking77" in table.notes[-1]


@pytest.mark.parametrize(("content", "why"), [
    ("{not json", "not a readable JSON file"),
    ('{"task_name": "STS12"}', 'no "scores" object'),
    ('{"task_name": "STS12", "scores": {"test": [{"main_score": "high"}]}}', '"main_score" of split \'test\''),
    ('{"scores": {"test": [{"main_score": 0.5}]}}', 'no "task_name"'),
])
def test_malformed_file_names_the_file(tmp_path: Path, content: str, why: str) -> None:
    small_case(tmp_path)
    bad = write_result(tmp_path, "org/alpha", "raw", "STS13", 0.5)
    bad.write_text(content)
    with pytest.raises(LeaderboardError, match=why) as info:
        read_results(tmp_path)
    assert str(bad) in str(info.value)
    with pytest.raises(LeaderboardError, match=why) as info:
        write_leaderboard(tmp_path)
    assert str(bad) in str(info.value) and isinstance(info.value, IsoBenchError)  # the CLI prints it, exit 2


def test_missing_or_empty_folder_or_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(LeaderboardError, match="no such results folder"):
        write_leaderboard(tmp_path / "nowhere")
    (tmp_path / "results").mkdir()
    with pytest.raises(LeaderboardError, match="no result files"):
        write_leaderboard(tmp_path)
    with pytest.raises(LeaderboardError, match="unknown format 'pdf': one of markdown, csv, latex, html"):
        write_leaderboard(tmp_path, fmt="pdf")
    assert FORMATS == ("markdown", "csv", "latex", "html")


def test_write_leaderboard_writes_markdown_and_a_linked_plot(tmp_path: Path) -> None:
    small_case(tmp_path / "in")
    out = tmp_path / "board" / "minilm.md"
    png = out.parent / "minilm-org__alpha.png"
    assert write_leaderboard(tmp_path / "in", out) == [out, png]
    text = out.read_text(encoding="utf-8")
    assert text.startswith(EXPECTED_MARKDOWN_CI.split("## Models compared")[0])
    assert ("![mean STS score × 100 against sentence IsoScore on Isotropy-STSB, org/alpha @ 0123456789ab]"
            "(minilm-org__alpha.png)") in text
    assert png.read_bytes().startswith(b"\x89PNG") and b"Software" not in png.read_bytes()
    first = png.read_bytes()
    assert write_leaderboard(str(tmp_path / "in"), str(out)) == [out, png]
    assert png.read_bytes() == first and out.read_text(encoding="utf-8") == text
    assert write_leaderboard(tmp_path / "in", fmt="csv", plot=False, ci=False) == EXPECTED_CSV
    assert write_leaderboard(tmp_path / "in") == EXPECTED_MARKDOWN_CI  # no file: no plot, no link
    assert write_leaderboard(tmp_path / "in", ci=False) == EXPECTED_MARKDOWN
    assert write_leaderboard(tmp_path / "in", tmp_path / "t.tex", fmt="latex", ci=False) == [tmp_path / "t.tex"]
    assert (tmp_path / "t.tex").read_text(encoding="utf-8") == render_latex(build_leaderboard(
        read_results(tmp_path / "in"), ci=False))  # the exact text: tests/test_latex.py


def test_write_plots_points(tmp_path: Path) -> None:
    board = build_leaderboard(read_results(small_case(tmp_path)))
    plot = plot_data(board.sections[0])
    assert plot is not None and plot.series == (
        ("mean MTEB-STS (2 tasks, cosine Spearman)", (("raw", 0.277153, 77.2), ("whiten", 1.0, 72.7))),)
    assert write_plots(board, tmp_path / "p", "x") == {"org__alpha": "x-org__alpha.png"}


def test_names_and_groups() -> None:
    assert split_model_name("sentence-transformers/all-MiniLM-L6-v2+whiten-256") == (
        "sentence-transformers/all-MiniLM-L6-v2", "whiten-256")
    assert split_model_name("a/b+c+clip-dims=1,2") == ("a/b+c", "clip-dims=1,2")
    assert [place(t)[0].key for t in ("SICK-R", "SICK-R-SentEval", "WiC", "WSD-ALL", "Isotropy-STSB", "X")] == [
        "mteb-sts", "paper-sts", "word", "word", "isotropy", "other"]
    assert (format_delta(-2.1, "percent"), format_delta(1.2, "percent"), format_delta(-0.001, "percent")) == (
        "−2.10", "+1.20", "±0.00")
