"""The reporter's presentation: groups and columns from the task cards, clip and whiten rows, the run summary
of ``iso-bench run``, and what importing the package loads."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from iso_bench.report import build_leaderboard, format_summary, markdown_table, read_results, render_csv, summary_header
from iso_bench.report.board import place
from tests.report_helpers import set_record, small_case, write_result

# ------------------------------------------------------------------ groups from the task cards


def test_groups_and_column_order_come_from_the_cards(tmp_path: Path) -> None:
    """Groups by their card group's order; columns in card order (STS12, STSBenchmark, SICK-R), not by name."""
    for task in ("SICK-R", "WSD-ALL", "STSBenchmark", "STS12-SentEval", "STS12", "WiC"):
        write_result(tmp_path, "org/alpha", "raw", task, 0.5)
    tables = build_leaderboard(read_results(tmp_path)).sections[0].tables
    assert [t.title.split(":")[0] for t in tables] == ["MTEB STS", "paper STS (SentEval)", "word level"]
    assert [c.label for c in tables[0].columns] == ["STS12", "STSBenchmark", "SICK-R",
                                                    "mean MTEB-STS (3 tasks, cosine Spearman)"]
    assert [c.label for c in tables[2].columns] == ["WiC", "WSD-ALL"]


def test_uncarded_task_goes_to_its_recorded_mteb_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_case(tmp_path)
    for variant, score in (("raw", 0.80), ("whiten", 0.75)):
        set_record(write_result(tmp_path, "org/alpha", variant, "EmotionClassification", score),
                   task_type="Classification")
    monkeypatch.setitem(sys.modules, "mteb", None)  # the recorded type is enough: mteb is never asked
    tables = build_leaderboard(read_results(tmp_path)).sections[0].tables
    assert [t.title for t in tables] == ["MTEB STS: main score × 100 (cosine Spearman)",
                                         "MTEB Classification: main score × 100 (main score)",
                                         "isotropy diagnostics: Isotropy-STSB"]  # the diagnostics last
    assert [c.value for r in tables[1].rows for c in r.cells] == [80.0, None, 75.0]  # raw, abtt (missing), whiten
    assert [c.label for c in tables[1].columns] == ["EmotionClassification"]


def test_uncarded_task_without_a_recorded_type_asks_mteb(monkeypatch: pytest.MonkeyPatch) -> None:
    task = types.SimpleNamespace(metadata=types.SimpleNamespace(type="Retrieval"))
    monkeypatch.setitem(sys.modules, "mteb", types.SimpleNamespace(get_task=lambda name: task))
    assert place("NFCorpus") == (place("NFCorpus")[0], "NFCorpus") and place("NFCorpus")[0].title == "MTEB Retrieval"
    monkeypatch.setitem(sys.modules, "mteb", None)  # no mteb (or no such task): other tasks
    assert place("NFCorpus")[0].title == "other tasks"
    assert place("SciFact")[0].title == "MTEB Retrieval"  # carded: in the same group, without asking mteb


# ------------------------------------------------------------------ presentation: clip, whiten


def test_clip_that_zeroed_nothing_is_not_called_best(tmp_path: Path) -> None:
    small_case(tmp_path)
    nothing = [{"level": "sentence", "n_vectors": 10, "learned": {"dim_": 384, "dims_": []}}]
    write_result(tmp_path, "org/alpha", "clip", "STS12", 0.7237, fits=nothing)
    write_result(tmp_path, "org/alpha", "clip", "STSBenchmark", 0.8203, fits=nothing)
    table = build_leaderboard(read_results(tmp_path)).sections[-1].tables[0]
    assert [(r.variant, r.tag) for r in table.rows] == [("raw", "best"), ("clip", "= raw (no dimension zeroed)")]
    text = markdown_table(table)
    assert "| org/alpha | 0123456789ab | clip = raw (no dimension zeroed) |" in text and "clip (best)" not in text
    assert ("- clip = raw (no dimension zeroed): tied for best only because every one of its fits zeroed no "
            "dimension, so its vectors are raw's; not counted as best.") in text
    assert "dimensions zeroed: none" in dict(table.provenance)["fit"][1]
    # in the CSV the tag, which starts with "=", is text a spreadsheet does not run as a formula
    csv_rows = render_csv(build_leaderboard(read_results(tmp_path))).splitlines()
    assert any(",clip,'= raw (no dimension zeroed)," in line for line in csv_rows)
    assert not any(",=" in line for line in csv_rows)
    # a clip that zeroed a dimension in one fit and still ties raw is a best variant
    write_result(tmp_path, "org/alpha", "clip", "STS12", 0.7237,
                 fits=[{"level": "sentence", "n_vectors": 10, "learned": {"dim_": 384, "dims_": [7]}}])
    table = build_leaderboard(read_results(tmp_path)).sections[-1].tables[0]
    assert [(r.variant, r.tag) for r in table.rows] == [("raw", "best"), ("clip", "best")]
    assert "no dimension zeroed" not in markdown_table(table)


def test_whitened_iw_is_withheld_not_missing(tmp_path: Path) -> None:
    small_case(tmp_path)
    write_result(tmp_path, "org/alpha", "whiten-256", "Isotropy-STSB", 0.9,
                 metrics={"sentence_iw": 0.9, "sentence_isoscore": 1.0, "token_iw": 0.83})
    iso = build_leaderboard(read_results(tmp_path)).sections[0].tables[1]
    assert [c.label for c in iso.columns] == ["sentence I(W)", "sentence IsoScore", "token I(W)"]
    cells = {r.variant: r.cells for r in iso.rows}
    assert [(c.value, c.withheld, c.missing) for c in cells["whiten-256"]] == [
        (None, True, False), (1.0, False, False), (None, True, False)]
    assert [(c.value, c.missing) for c in cells["abtt"]] == [(None, True)] * 3
    assert cells["raw"][0].value == 0.766573 and not cells["raw"][0].withheld
    assert iso.notes[-1] == "Missing (–): abtt on Isotropy-STSB: no result file, or a non-finite score."
    assert iso.notes[1].startswith("I(W) of whitened vectors (whiten, whiten-256) is not shown (–, not a missing "
                                   "result): I(W) takes its directions from the eigenvectors of WᵀW;")
    assert "| whiten-256 |               – |    1.0000 (+0.7228) |            – |" in markdown_table(iso)
    # zipfian-whiten whitens token vectors: its token I(W) is withheld, its (mean-pooled) sentence I(W) is not
    write_result(tmp_path, "org/alpha", "zipfian-whiten", "Isotropy-STSB", 0.95,
                 metrics={"sentence_iw": 0.95, "sentence_isoscore": 0.7, "token_iw": 0.82})
    iso = build_leaderboard(read_results(tmp_path)).sections[0].tables[1]
    cells = {r.variant: r.cells for r in iso.rows}
    assert [(c.value, c.withheld) for c in cells["zipfian-whiten"]] == [(0.95, False), (0.7, False), (None, True)]
    assert "(whiten, whiten-256, zipfian-whiten (token vectors))" in iso.notes[1]


def test_whiten_provenance_says_which_directions_it_kept(tmp_path: Path) -> None:
    def fits(kept: int, dropped: int) -> list:
        return [{"level": "sentence", "n_vectors": 10, "learned": {"n_components_": kept, "dropped_": dropped,
                                                                    "dim_": 384}}]

    write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.65, fits=fits(381, 3))
    write_result(tmp_path, "org/alpha", "whiten-256", "STS12", 0.66, fits=fits(256, 0))
    prov = dict(build_leaderboard(read_results(tmp_path)).sections[0].tables[0].provenance)
    fit = "fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0"
    assert prov["fit"] == (f"whiten (n_components=null): {fit}; 381 of 384 directions kept (3 without variance "
                           "dropped)", f"whiten-256 (n_components=null): {fit}")  # nothing dropped: nothing said


# ------------------------------------------------------------------ the run summary


def run_summary(tasks: list[str]) -> types.SimpleNamespace:
    """A RunSummary's fields that the summary reads: raw has every score, whiten failed on the last task."""
    scores = {"org/alpha+raw": {t: 0.5 + i / 10 for i, t in enumerate(tasks)},
              "org/alpha+whiten": {t: (0.45 + i / 10 if i < len(tasks) - 1 else None) for i, t in enumerate(tasks)}}
    return types.SimpleNamespace(model="org/alpha", revision="r1", tasks=tasks, scores=scores)


def test_run_summary_exact() -> None:
    assert format_summary(run_summary(["STS12", "Isotropy-STSB"])) == """\
| variant   | STS12   | Isotropy-STSB   |
|-----------|---------|-----------------|
| raw       | 50.00   | 60.00           |
| whiten    | 45.00   | –               |"""


def test_run_summary_puts_each_groups_mean_and_its_difference_from_raw_first() -> None:
    """Two MTEB STS tasks ran: their mean (abtt misses STS13: –, never the mean of the rest) and its difference
    from raw first, then each task; the diagnostic has no mean."""
    summary = run_summary(["STS12", "STS13", "Isotropy-STSB"])
    summary.scores["org/alpha+center"] = {"STS12": 0.4912, "STS13": 0.6024, "Isotropy-STSB": 0.6}
    summary.scores["org/alpha+abtt"] = {"STS12": 0.7, "STS13": None, "Isotropy-STSB": 0.6}
    assert format_summary(summary) == """\
| variant   | mean MTEB-STS (2 tasks)   | vs raw   | STS12   | STS13   | Isotropy-STSB   |
|-----------|---------------------------|----------|---------|---------|-----------------|
| raw       | 55.00                     |          | 50.00   | 60.00   | 70.00           |
| whiten    | 50.00                     | −5.00    | 45.00   | 55.00   | –               |
| center    | 54.68                     | −0.32    | 49.12   | 60.24   | 60.00           |
| abtt      | –                         | –        | 70.00   | –       | 60.00           |"""


def test_summary_header_lists_only_what_ran() -> None:
    assert summary_header(run_summary(["STS12", "STSBenchmark", "Isotropy-STSB"])) == (
        "org/alpha @ r1: main score x 100 (MTEB STS: cosine Spearman; isotropy diagnostics: sentence I(W))")
    assert summary_header(run_summary(["WiC", "EmotionClassification", "STS12-SentEval", "NFCorpus"])) == (
        "org/alpha @ r1: main score x 100 (paper STS (SentEval): wmean Spearman; word level: WiC accuracy, WSD-ALL "
        "F1; EmotionClassification, NFCorpus: main score)")
    assert summary_header(run_summary(["SciFact", "Banking77Classification"])) == (
        "org/alpha @ r1: main score x 100 (MTEB Classification: main score; MTEB Retrieval: main score)")


def test_import_loads_neither_torch_nor_mteb() -> None:
    code = ("import sys, iso_bench.report; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'mteb', 'matplotlib'}))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
