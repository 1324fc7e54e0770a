"""Uncertainty in the leaderboard: each cell's 95% interval from the evaluation units beside its result, the paired
test of each difference from raw (Benjamini-Hochberg over a table), runs that differ only in seed merged into one
row of mean ± standard deviation, the check of each units file's SHA-256, and ``ci=False`` (``--no-ci``) ignoring
all of it. Synthetic STS units (:func:`tests.report_helpers.sts_units`), a few hundred pairs each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from iso_bench.cli import main
from iso_bench.numerics import stats
from iso_bench.report import (
    LeaderboardError,
    build_leaderboard,
    plot_data,
    read_results,
    render_csv,
    render_latex,
    render_markdown,
    write_leaderboard,
)
from iso_bench.report.resample import spearman_together
from tests.report_helpers import main_of, set_record, sign, sts_units, write_result, write_scored, write_units

N = 300  # units per task


def pct(x: float) -> float:
    return round(100 * x, 2) + 0.0


def units_of(path: Path) -> np.ndarray:
    """The units stored beside a result file, read back with numpy alone."""
    with np.load(path.with_name(path.stem + ".instances.npz")) as npz:
        return npz["test/default/units"]


def rows_of(board, section: int = 0, table: int = 0) -> dict:
    return {r.label: r.cells for r in board.sections[section].tables[table].rows}


def md_cells(markdown: str, label: str) -> list[str]:
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {label} "))
    return [c.strip() for c in line.strip("|").split("|")]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """raw; whiten, better than raw; center, identical to raw; on STS12 and STSBenchmark (own gold each)."""
    for task, gold in (("STS12", 1), ("STSBenchmark", 2)):
        write_scored(tmp_path, "org/alpha", "raw", task, sts_units(N, 1.0, 0, gold))
        write_scored(tmp_path, "org/alpha", "whiten", task, sts_units(N, 0.5, 1, gold))
        write_scored(tmp_path, "org/alpha", "center", task, sts_units(N, 1.0, 0, gold))
    return tmp_path


def test_a_cell_shows_the_interval_of_its_stored_units(folder: Path) -> None:
    """The interval recorded with a result (here 500 resamples, seed 3), and one computed here where a record has
    none (the defaults of iso_bench.numerics.stats: 1000, seed 0): each equals confidence_interval of the units read
    back from the file, with that count and seed."""
    path = write_scored(folder, "org/alpha", "abtt", "STS12", sts_units(N, 0.8, 4, 1), n_resamples=500, seed=3)
    bare = write_scored(folder, "org/alpha", "abtt", "STSBenchmark", sts_units(N, 0.8, 4, 2), interval=False)
    record = json.loads(bare.read_text())["scores"]["test"][0]["iso_bench"]
    assert "interval" not in record and record["instances"]["n_units"] == N
    rows = rows_of(build_leaderboard(read_results(folder)))
    raw_path = path.parents[2] / "org__alpha+raw" / path.parent.name / "STS12.json"
    raw = stats.confidence_interval(units_of(raw_path), "spearman", n_resamples=1000, seed=0)
    assert (rows["raw"][0].low, rows["raw"][0].high) == (pct(raw.low), pct(raw.high))
    assert rows["raw"][0].low < rows["raw"][0].value < rows["raw"][0].high
    mine = stats.confidence_interval(units_of(path), "spearman", n_resamples=500, seed=3)
    assert (rows["abtt"][0].low, rows["abtt"][0].high) == (pct(mine.low), pct(mine.high))
    other = stats.confidence_interval(units_of(path), "spearman", n_resamples=1000, seed=0)
    assert (pct(other.low), pct(other.high)) != (pct(mine.low), pct(mine.high))  # the recorded design matters
    computed = stats.confidence_interval(units_of(bare), "spearman", n_resamples=1000, seed=0)
    assert (rows["abtt"][1].low, rows["abtt"][1].high) == (pct(computed.low), pct(computed.high))
    # abtt's test on STS12 pairs it with raw on the same 500 resamples, seed 3
    cmp = stats.paired_difference(units_of(path), units_of(raw_path), "spearman", n_resamples=500, seed=3)
    assert rows["abtt"][0].p == cmp.p_value and rows["abtt"][0].delta_low == pct(cmp.low)
    markdown = write_leaderboard(folder)
    low, high = (f"{v:.2f}" for v in (rows["raw"][0].low, rows["raw"][0].high))
    assert md_cells(markdown, "raw")[1] == f"{rows['raw'][0].value:.2f} [{low}, {high}]"
    assert "(500 resamples, seed 3 or 1000 resamples, seed 0)" in markdown


def test_a_planted_difference_is_significant_and_an_identical_variant_is_not(folder: Path) -> None:
    board = build_leaderboard(read_results(folder))
    rows = rows_of(board)
    for cell in rows["whiten"]:
        assert cell.delta > 5 and cell.p < 0.01 and cell.significant and cell.delta_low > 0
    for cell in rows["center"]:  # the same units as raw: every resampled difference is 0
        assert (cell.delta, cell.delta_low, cell.delta_high, cell.p, cell.q, cell.significant) == (
            0.0, 0.0, 0.0, 1.0, 1.0, False)
    markdown = render_markdown(board)
    assert md_cells(markdown, "whiten")[1].endswith(")**\\*")  # bold (best), then the star outside it
    assert "\\*" not in "".join(md_cells(markdown, "center")) and "(±0.00)" in md_cells(markdown, "center")[1]
    assert ("- (+d)* = a significant difference from raw: paired bootstrap over the evaluation units (variant and raw "
            "scored on the same 1000 resamples, seed 0), Benjamini-Hochberg FDR at 5% over the m = 6 comparisons of "
            "this table (q ≤ 0.05: 3 of 6); CSV gives each p and q.") in markdown


def test_the_test_is_stats_paired_difference_on_the_stored_units(folder: Path) -> None:
    rows = rows_of(build_leaderboard(read_results(folder)))
    for j, task in enumerate(("STS12", "STSBenchmark")):
        mine, raw = (units_of(next((folder / "results" / f"org__alpha+{v}").glob(f"*/{task}.json")))
                     for v in ("whiten", "raw"))
        cmp = stats.paired_difference(mine, raw, "spearman", n_resamples=1000, seed=0)
        cell = rows["whiten"][j]
        assert (cell.delta_low, cell.delta_high, cell.p) == (pct(cmp.low), pct(cmp.high), cmp.p_value)
        assert cell.delta == round(pct(cmp.estimate_a) - pct(cmp.estimate_b), 2)  # the shown values' difference


def test_the_mean_column_resamples_each_task_on_its_own(folder: Path) -> None:
    """The interval of a mean: per resample the mean of the tasks' scores (each task drawn with its recorded seed)."""
    rows = rows_of(build_leaderboard(read_results(folder)))
    draws = {}
    for v in ("whiten", "raw"):
        per_task = []
        for task in ("STS12", "STSBenchmark"):
            units = units_of(next((folder / "results" / f"org__alpha+{v}").glob(f"*/{task}.json")))
            per_task.append(stats.spearman(units, stats.bootstrap_indices(N, 1000, 0)))
        draws[v] = np.mean(per_task, axis=0)
    low, high = np.quantile(draws["whiten"], [0.025, 0.975])
    assert (rows["whiten"][2].low, rows["whiten"][2].high) == (pct(low), pct(high))
    d = draws["whiten"] - draws["raw"]
    assert (rows["whiten"][2].delta_low, rows["whiten"][2].delta_high) == tuple(pct(q) for q in
                                                                              np.quantile(d, [0.025, 0.975]))


def test_bh_over_the_cells_of_a_table_matches_scipy(tmp_path: Path) -> None:
    """Five variants from clearly better to identical, two tasks and their mean: 15 p-values, adjusted together."""
    for task, gold in (("STS12", 1), ("STSBenchmark", 2)):
        write_scored(tmp_path, "org/alpha", "raw", task, sts_units(N, 1.0, 0, gold))
        for k, noise in enumerate((0.6, 0.9, 0.97, 1.02, 1.0)):
            write_scored(tmp_path, "org/alpha", f"v{k}", task, sts_units(N, noise, 0 if noise == 1.0 else k + 1, gold))
    table = build_leaderboard(read_results(tmp_path)).sections[0].tables[0]
    cells = [c for col in range(3) for r in table.rows for c in [r.cells[col]] if c.p is not None]
    assert len(cells) == 15 and len({c.p for c in cells}) > 5
    q = false_discovery_control([c.p for c in cells])
    assert np.allclose([c.q for c in cells], q, rtol=0, atol=1e-12)
    assert [c.significant for c in cells] == [bool(x <= 0.05) for x in q]
    assert 0 < sum(c.significant for c in cells) < 15  # some stay significant after the adjustment, some do not
    assert f"over the m = 15 comparisons of this table (q ≤ 0.05: {sum(q <= 0.05)} of 15)" in "".join(table.notes)


def test_seed_rows_merge_into_mean_and_standard_deviation(tmp_path: Path) -> None:
    """flow seeds 0-2 (STS12 70, 72, 74; STSBenchmark 80, 81, 85): one row, mean ± sd (ddof=1) per column and of the
    seeds' means (75, 76.5, 79.5); the best-of-replicates note is gone with the replicate rows."""
    for task, raw in (("STS12", 0.70), ("STSBenchmark", 0.80)):
        write_result(tmp_path, "org/alpha", "raw", task, raw)
    for seed, sts12, stsb in ((0, 0.70, 0.80), (1, 0.72, 0.81), (2, 0.74, 0.85)):
        for task, score in (("STS12", sts12), ("STSBenchmark", stsb)):
            write_result(tmp_path, "org/alpha", "flow", task, score, setup={"fit_corpus": "task", "seed": seed})
    board = build_leaderboard(read_results(tmp_path))
    rows = rows_of(board)
    assert list(rows) == ["raw", "flow [seeds 0-2]"]
    flow = rows["flow [seeds 0-2]"]
    assert [(c.value, c.sd, c.delta) for c in flow] == [(72.0, 2.0, 2.0), (82.0, 2.65, 2.0), (77.0, 2.29, 2.0)]
    markdown = render_markdown(board)
    assert md_cells(markdown, "flow [seeds 0-2]")[1:] == ["**72.00 ± 2.00 (+2.00)**", "**82.00 ± 2.65 (+2.00)**",
                                                         "**77.00 ± 2.29 (+2.00)**"]
    assert "mean ± standard deviation across the seeds (ddof=1)" in markdown
    assert "best of replicates" not in markdown and "flow [seeds 0-2] (best)" in markdown
    assert ",flow [seeds 0-2],,STSBenchmark,82.00,+2.00,1,verified,,,2.65,,,,,\n" in render_csv(board)


def test_a_merged_row_has_the_interval_of_its_seed_mean(tmp_path: Path) -> None:
    """One index matrix for all seeds: per resample each seed's Spearman, then their mean; paired likewise with raw."""
    raw = sts_units(N, 1.0, 0, 1)
    seeds = [sts_units(N, 0.8, 10 + s, 1) for s in range(3)]
    write_scored(tmp_path, "org/alpha", "raw", "STS12", raw)
    for s, units in enumerate(seeds):
        write_scored(tmp_path, "org/alpha", "flow", "STS12", units, setup={"fit_corpus": "task", "seed": s})
    cell = rows_of(build_leaderboard(read_results(tmp_path)))["flow [seeds 0-2]"][0]
    idx = stats.bootstrap_indices(N, 1000, 0)
    mean = np.mean([stats.spearman(u, idx) for u in seeds], axis=0)
    assert (cell.low, cell.high) == tuple(pct(q) for q in np.quantile(mean, [0.025, 0.975]))
    assert cell.value == round(np.mean([100 * main_of(u) for u in seeds]), 2)
    assert cell.sd == round(float(np.std([100 * main_of(u) for u in seeds], ddof=1)), 2)
    d = mean - stats.spearman(raw, idx)
    tail = min(np.count_nonzero(d <= 0), np.count_nonzero(d >= 0))
    assert cell.p == min(1.0, 2 * (1 + tail) / (d.size + 1))
    assert (cell.delta_low, cell.delta_high) == tuple(pct(q) for q in np.quantile(d, [0.025, 0.975]))


def test_no_ci_renders_the_previous_tables_and_reads_no_units(folder: Path, tmp_path_factory) -> None:
    """ci=False: the same bytes as the same results without their units files (and as before, tests/
    test_leaderboard.py); a seed's rows stay apart; the CLI's --no-ci is it."""
    for s in (0, 1):
        write_scored(folder, "org/alpha", "flow", "STS12", sts_units(N, 0.9, 20 + s, 1),
                     setup={"fit_corpus": "task", "seed": s})
    bare = tmp_path_factory.mktemp("bare")
    shutil.copytree(folder / "results", bare / "results")
    for npz in bare.rglob("*.instances.npz"):
        npz.write_bytes(b"not the units")  # never read: not even checked
    for fmt in ("markdown", "csv", "latex"):
        assert write_leaderboard(folder, fmt=fmt, ci=False) == write_leaderboard(bare, fmt=fmt, ci=False)
    text = write_leaderboard(folder, ci=False)
    assert "[" not in md_cells(text, "raw")[1] and "flow [seed=0]" in text and "flow [seed=1]" in text
    assert "interval" not in text and "seeds" not in text
    with pytest.raises(LeaderboardError, match="instances.npz: its bytes no longer match"):
        write_leaderboard(bare)


def test_cli_no_ci(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", str(folder), "--no-ci", "--format", "csv"]) == 0
    assert capsys.readouterr().out == write_leaderboard(folder, fmt="csv", ci=False)
    assert main(["leaderboard", str(folder), "--format", "csv"]) == 0
    assert capsys.readouterr().out == write_leaderboard(folder, fmt="csv")


def test_csv_carries_the_bounds_in_columns_of_their_own(folder: Path) -> None:
    board = build_leaderboard(read_results(folder))
    lines = render_csv(board).splitlines()
    header = lines[0].split(",")
    assert header[-8:] == ["low", "high", "sd_seeds", "delta_low", "delta_high", "p_value", "q_value", "significant"]
    cell = rows_of(board)["whiten"][0]
    row = next(line for line in lines if ",whiten,,STS12," in line).split(",")
    assert row[-8:] == [f"{cell.low:.2f}", f"{cell.high:.2f}", "", f"{cell.delta_low:.2f}", f"{cell.delta_high:.2f}",
                        f"{cell.p:.6g}", f"{cell.q:.6g}", "1"]
    raw = next(line for line in lines if ",raw,,STS12," in line).split(",")
    assert raw[-8:-6] == [f"{rows_of(board)['raw'][0].low:.2f}", f"{rows_of(board)['raw'][0].high:.2f}"]
    assert raw[-6:] == [""] * 6  # raw has no difference to test


def test_a_units_file_with_a_wrong_sha256_is_refused_naming_it(folder: Path, capsys) -> None:
    path = next((folder / "results" / "org__alpha+whiten").glob("*/STS12.json"))
    npz = path.with_name("STS12.instances.npz")
    with np.load(npz) as data:
        arrays = dict(data)
    arrays["test/default/units"][0, 0] += 1.0  # one prediction changed after the run
    with npz.open("wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(LeaderboardError) as info:
        write_leaderboard(folder)
    assert str(info.value).startswith(f"{npz}: its bytes no longer match the sha256 recorded for it in {path}")
    assert "--accept-modified" in str(info.value)
    assert main(["leaderboard", str(folder)]) == 2 and str(npz) in capsys.readouterr().err
    board = build_leaderboard(read_results(folder), accept_modified=True)
    cell = rows_of(board)["whiten"][0]
    assert cell.mark == "modified" and cell.low is None and cell.p is None and cell.value is not None
    assert rows_of(board)["whiten"][1].low is not None and rows_of(board)["whiten"][1].mark == ""  # its other task
    markdown = render_markdown(board)
    assert ("- Value alone (no interval, and no test of a difference from raw): its units file STS12.instances.npz "
            "was changed after its run (†): whiten on STS12, mean MTEB-STS (2 tasks, cosine Spearman).") in markdown
    assert "whose units file no longer matches the sha256 recorded for it" in markdown
    assert write_leaderboard(folder, accept_modified=True) == markdown


def test_misaligned_units_are_not_compared_and_say_why(tmp_path: Path) -> None:
    write_scored(tmp_path, "org/alpha", "raw", "STS12", sts_units(N, 1.0, 0, 1))
    write_scored(tmp_path, "org/alpha", "whiten", "STS12", sts_units(N, 0.5, 1, 7))  # another gold
    table = build_leaderboard(read_results(tmp_path)).sections[0].tables[0]
    cell = table.rows[1].cells[0]
    assert cell.low is not None and cell.delta is not None and cell.p is None and not cell.significant
    note = next(n for n in table.notes if n.startswith("Difference from raw not tested"))
    assert note == (f"Difference from raw not tested (no *) in every cell: units not aligned with raw's: the gold "
                    f"differs at {N} of {N} units.")


def test_results_of_two_versions_of_a_tasks_data_are_never_paired(tmp_path: Path) -> None:
    """raw read the old rows of STS12, whiten the new ones (same repository and revision, other rows SHA-256): the
    units line up by position, yet are other pairs; no paired test (no interval of the difference, no p, no *),
    and a note names both versions."""
    old = {"repo": "mteb/sts12-sts", "revision": "a0d554a64d88156834ff5ae9920b964011b16384", "rows_sha256": "a" * 64}
    raw = write_scored(tmp_path, "org/alpha", "raw", "STS12", sts_units(N, 1.0, 0, 1))
    whiten = write_scored(tmp_path, "org/alpha", "whiten", "STS12", sts_units(N, 0.5, 1, 1))
    set_record(raw, data=old)
    set_record(whiten, data={**old, "rows_sha256": "b" * 64})
    table = build_leaderboard(read_results(tmp_path)).sections[0].tables[0]
    cell = table.rows[1].cells[0]
    assert cell.low is not None and cell.delta is not None
    assert cell.delta_low is None and cell.p is None and not cell.significant
    note = next(n for n in table.notes if n.startswith("Difference from raw not tested"))
    assert note == ("Difference from raw not tested (no *) in every cell: raw's result was computed from other data "
                    "(mteb/sts12-sts @ a0d554a64d88, rows sha256 aaaaaaaaaaaa; this row's: mteb/sts12-sts @ "
                    "a0d554a64d88, rows sha256 bbbbbbbbbbbb), so its units are not paired.")
    set_record(whiten, data=old)  # the same rows: paired as before
    cell = build_leaderboard(read_results(tmp_path)).sections[0].tables[0].rows[1].cells[0]
    assert cell.p is not None and cell.delta_low is not None


def test_a_result_without_units_says_why(folder: Path) -> None:
    path = write_result(folder, "org/alpha", "abtt", "STS12", 0.5)
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["iso_bench"]["instances"] = {"file": None, "reason": "main score ndcg_at_10: no units"}
    path.write_text(json.dumps(data))
    sign(path)  # as the run wrote it
    write_result(folder, "org/alpha", "abtt", "STSBenchmark", 0.6)
    board = build_leaderboard(read_results(folder))
    abtt = rows_of(board)["abtt"]
    assert [c.value for c in abtt] == [50.0, 60.0, 55.0] and [(c.low, c.p) for c in abtt] == [(None, None)] * 3
    markdown = render_markdown(board)
    assert [cell.split(" (")[0] for cell in md_cells(markdown, "abtt")[1:]] == ["50.00", "60.00", "55.00"]
    assert ("- Value alone (no interval, and no test of a difference from raw): no units recorded (main score "
            "ndcg_at_10: no units): abtt on STS12, mean MTEB-STS (2 tasks, cosine Spearman); written before intervals "
            "were recorded: abtt on STSBenchmark.") in markdown


def test_rendering_twice_gives_the_same_bytes(folder: Path, tmp_path_factory) -> None:
    for s in (0, 1, 2):
        write_scored(folder, "org/alpha", "flow", "STS12", sts_units(N, 0.9, 30 + s, 1),
                     setup={"fit_corpus": "task", "seed": s})
    for variant, iso in (("raw", 0.3), ("whiten", 0.9), ("center", 0.3)):
        write_result(folder, "org/alpha", variant, "Isotropy-STSB", iso, metrics={"sentence_isoscore": iso})
    one = build_leaderboard(read_results(folder))
    two = build_leaderboard(list(reversed(read_results(folder))))
    for render in (render_markdown, render_csv, render_latex):
        assert render(one) == render(two)
    out = tmp_path_factory.mktemp("out") / "board.md"
    written = write_leaderboard(folder, out)
    first = [p.read_bytes() for p in written]
    assert write_leaderboard(folder, out) == written and [p.read_bytes() for p in written] == first
    plot = plot_data(one.sections[0])
    assert plot is not None and plot.errors  # error bars: the mean column's intervals
    raw = rows_of(one)["raw"][2]
    assert dict(zip([p[0] for p in plot.series[0][1]], plot.errors[0], strict=True))["raw"] == (raw.low, raw.high)


def test_spearman_together_equals_stats_spearman_alone() -> None:
    """The shared-resample Spearman is the same numbers as iso_bench.numerics.stats.spearman, ties and constants
    included."""
    gold = np.round(np.random.default_rng(0).normal(size=500), 1)  # many ties
    preds = [np.random.default_rng(k).normal(size=500) + gold for k in range(3)]
    preds.append(np.round(preds[0], 0))  # ties in a prediction
    preds.append(np.zeros(500))  # constant: undefined
    idx = stats.bootstrap_indices(500, 300, 5)
    together = spearman_together(preds, gold, idx)
    for k, p in enumerate(preds):
        alone = stats.spearman(np.column_stack([p, gold]), idx)
        assert np.array_equal(together[k], alone, equal_nan=True)
    assert np.isnan(together[-1]).all()


def test_wmean_variants_drawn_together_get_the_bits_of_each_drawn_alone(tmp_path: Path) -> None:
    """Bootstrap.prepare draws the subset-weighted Spearman of a task's variants together (same gold, same subsets):
    the numbers iso_bench.numerics.stats.wmean_spearman gives each alone, ties included."""
    from iso_bench.report.resample import Bootstrap
    from iso_bench.report.units import UnitsStore, design_of

    strata = np.repeat([3, 1, 2], [120, 90, 90])
    for variant, noise in {"raw": 1.0, "center": 0.8, "whiten": 1.3, "abtt": 0.2}.items():
        units = np.round(sts_units(N, noise, seed=len(variant)), 1)  # rounded: ties in both columns
        path = write_result(tmp_path, "org/m", variant, "STS12", main_of(units, "wmean", strata))
        write_units(path, units, "wmean", strata=strata, n_resamples=200, seed=4)
    store = UnitsStore()
    results = store.verify(read_results(tmp_path))
    together, alone = Bootstrap(store), Bootstrap(store)
    together.prepare(results, design_of(results[0]))
    assert len(together._draws) == 4  # all drawn by prepare
    for r in results:
        design = design_of(r)
        assert design.n_resamples == 200 and design.seed == 4
        assert np.array_equal(together.draws(r, design), alone.draws(r, design), equal_nan=True), r.variant
