"""Setups (mteb experiment folders) in the leaderboard: a variant run with two fit corpora, poolings or seeds has a
row per setup, each with its own scores and means, labelled by what differs; never an average across setups. Seeds
are rows of their own without intervals (``ci=False``); with them, one row (tests/test_report_uncertainty.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iso_bench.report import (
    LeaderboardError,
    build_leaderboard,
    markdown_table,
    plot_data,
    read_results,
    render_csv,
    render_latex,
    render_markdown,
)
from iso_bench.report.setups import raw_reference, setup_key, setup_labels
from tests.report_helpers import REV, experiment_name, small_case, write_result
from tests.test_leaderboard import EXPECTED_CSV, EXPECTED_MARKDOWN

FILE_SHA = "aaaaaaaaaaaa" + "0" * 52
FILE_FIT = {"fit_corpus": "file", "path": "/home/someone/wiki.txt", "n_texts": 1000, "texts_sha256": FILE_SHA}
SETUP_NOTE = ("- A variant run in more than one setup has a row per setup, labelled [what differs among its setups] "
              "(mteb experiment kwargs), never averaged with another; rows that differ only in seed are replicates, "
              "shown apart. Differences are from the raw row of the same pooling and layer.")


def sts(root: Path, variant: str, sts12: float, stsb: float, **kwargs: object) -> None:
    write_result(root, "org/alpha", variant, "STS12", sts12, **kwargs)
    write_result(root, "org/alpha", variant, "STSBenchmark", stsb, **kwargs)


def table_head(root: Path, section: int = 0) -> str:
    """The first table of a section (without intervals), up to its provenance."""
    board = build_leaderboard(read_results(root), ci=False)
    return markdown_table(board.sections[section].tables[0]).split("\n\nProvenance")[0]


def test_one_setup_per_variant_renders_exactly_as_without_setups(tmp_path: Path) -> None:
    """Every result in an experiment folder, one setup per variant: the same bytes as plain folders, every format."""
    setups = {"raw": {"data": "mirror"}, "whiten": {"data": "mirror", "fit_corpus": "task"},
              "abtt": {"data": "mirror", "fit_corpus": "task"}}
    results = read_results(small_case(tmp_path, setups=setups))
    assert {(r.variant, r.experiment) for r in results} == {
        ("raw", "data_mirror"), ("whiten", "data_mirror__fit_corpus_task"), ("abtt", "data_mirror__fit_corpus_task")}
    assert all(r.file.startswith(f"org__alpha+{r.variant}/{REV}/experiments/{r.experiment}/") for r in results)
    board = build_leaderboard(results, ci=False)
    assert render_markdown(board) == EXPECTED_MARKDOWN
    plain = build_leaderboard(read_results(small_case(tmp_path / "plain")), ci=False)
    assert render_csv(board) == EXPECTED_CSV and render_latex(board) == render_latex(plain)


def test_two_fit_corpora_are_two_rows_never_averaged(tmp_path: Path) -> None:
    """whiten fitted on the task and on a file: two experiment folders, both read, two rows with their own means;
    the file (in an older version's folder, fit_corpus_file_<digest>) labelled by its name."""
    sts(tmp_path, "raw", 0.70, 0.80)
    sts(tmp_path, "whiten", 0.66, 0.78, setup={"fit_corpus": "task"})
    sts(tmp_path, "whiten", 0.68, 0.79, setup={"fit_corpus": "file_aaaaaaaaaaaa"}, fit=FILE_FIT)
    results = read_results(tmp_path)
    assert sorted(r.file.split(f"{REV}/experiments/")[1] for r in results if r.variant == "whiten") == [
        "fit_corpus_file_aaaaaaaaaaaa/STS12.json", "fit_corpus_file_aaaaaaaaaaaa/STSBenchmark.json",
        "fit_corpus_task/STS12.json", "fit_corpus_task/STSBenchmark.json"]
    board = build_leaderboard(results)
    assert board.n_files == 6
    assert table_head(tmp_path) == """\
| variant                       |         STS12 |   STSBenchmark |   mean MTEB-STS (2 tasks, cosine Spearman) |
|:------------------------------|--------------:|---------------:|-------------------------------------------:|
| raw                           |     **70.00** |      **80.00** |                                  **75.00** |
| whiten [fitted on test texts] | 66.00 (−4.00) |  78.00 (−2.00) |                              72.00 (−3.00) |
| whiten [fitted on wiki.txt]   | 68.00 (−2.00) |  79.00 (−1.00) |                              73.50 (−1.50) |

- Main score × 100 (cosine Spearman), two decimals; (+d) / (−d) = difference from raw, computed from the rounded \
values; bold = best in its column (ties: all bold).
- mean MTEB-STS (2 tasks, cosine Spearman) = unweighted mean of STS12, STSBenchmark; a variant missing any of them \
gets – (never a mean of the present cells).
""" + SETUP_NOTE
    # each row's fit corpus is cited under the table: the file's size and SHA-256
    assert dict(board.sections[0].tables[0].provenance)["fit"] == (
        "raw: nothing fitted",
        f"whiten (n_components=null): fit on file wiki.txt (1000 texts, sha256 {FILE_SHA}), sentence level, seed 0",
        "whiten (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, "
        "seed 0")
    assert "/home/someone" not in render_markdown(board)
    repeated = {**FILE_FIT, "n_lines": 1500}  # a file whose 1,500 lines hold 1,000 distinct texts
    sts(tmp_path, "whiten", 0.68, 0.79, setup={"fit_corpus": "file_bbbbbbbbbbbb"}, fit=repeated)
    fits = dict(build_leaderboard(read_results(tmp_path)).sections[0].tables[0].provenance)["fit"]
    assert f"whiten (n_components=null): fit on file wiki.txt (1500 lines, 1000 distinct texts, sha256 {FILE_SHA}), " \
        "sentence level, seed 0" in fits


def test_a_plain_folder_is_its_own_setup(tmp_path: Path) -> None:
    """A result written before setups were recorded ({}) is not merged with a recorded setup of the same variant:
    its own row, "no setup recorded"; raw, in a plain folder only, keeps its bare label."""
    sts(tmp_path, "raw", 0.70, 0.80)
    sts(tmp_path, "whiten", 0.66, 0.78)
    sts(tmp_path, "whiten", 0.67, 0.78, setup={"fit_corpus": "task"})
    assert {(r.variant, r.experiment, json.dumps(r.setup)) for r in read_results(tmp_path)} == {
        ("raw", "", "{}"), ("whiten", "", "{}"), ("whiten", "fit_corpus_task", '{"fit_corpus": "task"}')}
    assert table_head(tmp_path).splitlines()[2:5] == [
        "| raw                           |     **70.00** |      **80.00** |" + " " * 34 + "**75.00** |",
        "| whiten [no setup recorded]    | 66.00 (−4.00) |  78.00 (−2.00) |" + " " * 30 + "72.00 (−3.00) |",
        "| whiten [fitted on test texts] | 67.00 (−3.00) |  78.00 (−2.00) |" + " " * 30 + "72.50 (−2.50) |"]


def test_seeds_are_rows_of_their_own(tmp_path: Path) -> None:
    """Without intervals, replicates that differ only in seed: a row each, labelled by seed (in numeric order), never
    averaged; the model comparison names the best row with its seed."""
    sts(tmp_path, "raw", 0.70, 0.80)
    for seed, sts12, stsb in ((10, 0.71, 0.80), (0, 0.72, 0.81), (1, 0.74, 0.82)):
        sts(tmp_path, "flow", sts12, stsb, setup={"fit_corpus": "task", "seed": seed})
    board = build_leaderboard(read_results(tmp_path), ci=False)
    rows = board.sections[0].tables[0].rows
    assert [(r.label, [c.value for c in r.cells]) for r in rows] == [
        ("raw", [70.0, 80.0, 75.0]), ("flow [seed=0]", [72.0, 81.0, 76.5]), ("flow [seed=1]", [74.0, 82.0, 78.0]),
        ("flow [seed=10]", [71.0, 80.0, 75.5])]
    assert [c.delta for c in rows[3].cells] == [1.0, 0.0, 0.5]
    comparison = board.sections[-1].tables[0]
    assert [(r.label, r.tag, r.cells[0].value) for r in comparison.rows] == [("raw", "", 75.0),
                                                                             ("flow [seed=1]", "best", 78.0)]
    text = markdown_table(comparison)
    assert "| org/alpha | 0123456789ab | flow [seed=1] (best) |                          **78.00 (+3.00)** |" in text
    assert SETUP_NOTE in text
    assert ("- flow [seed=1] is the best of 3 runs that differ only in seed (flow [seed=0] 76.50, flow [seed=10] "
            "75.50); the best of replicates overstates its setup: read them together.") in text


def test_raw_reference_matches_pooling_layer_and_data(tmp_path: Path) -> None:
    """Two raw rows (default layer, layer 6): each whiten row is compared with the raw row of its own layer."""
    sts(tmp_path, "raw", 0.70, 0.80)
    sts(tmp_path, "raw", 0.60, 0.70, setup={"layer": 6})
    sts(tmp_path, "whiten", 0.72, 0.82, setup={"fit_corpus": "task"})
    sts(tmp_path, "whiten", 0.65, 0.71, setup={"fit_corpus": "task", "layer": 6})
    rows = build_leaderboard(read_results(tmp_path)).sections[0].tables[0].rows
    assert [(r.label, [(c.value, c.delta) for c in r.cells]) for r in rows] == [
        ("raw [layer=default]", [(70.0, None), (80.0, None), (75.0, None)]),
        ("raw [layer=6]", [(60.0, None), (70.0, None), (65.0, None)]),
        ("whiten [layer=default]", [(72.0, 2.0), (82.0, 2.0), (77.0, 2.0)]),
        ("whiten [layer=6]", [(65.0, 5.0), (71.0, 1.0), (68.0, 3.0)])]
    comparison = build_leaderboard(read_results(tmp_path)).sections[-1].tables[0]
    assert [(r.label, r.tag) for r in comparison.rows] == [("raw [layer=default]", ""), ("whiten [layer=default]",
                                                                                         "best")]


def test_no_raw_row_of_the_same_setup_shows_no_difference(tmp_path: Path) -> None:
    sts(tmp_path, "raw", 0.60, 0.70, setup={"layer": 6})
    sts(tmp_path, "raw", 0.62, 0.72, setup={"layer": 8})
    sts(tmp_path, "whiten", 0.72, 0.82, setup={"fit_corpus": "task", "pooling": "cls"})
    table = build_leaderboard(read_results(tmp_path)).sections[0].tables[0]
    assert [c.delta for c in table.rows[-1].cells] == [None, None, None]
    assert "No raw row of the same setup for whiten: no difference shown." in table.notes


def test_csv_and_plot_carry_the_row_labels(tmp_path: Path) -> None:
    sts(tmp_path, "raw", 0.70, 0.80, metrics={})
    sts(tmp_path, "whiten", 0.66, 0.78, setup={"fit_corpus": "task"})
    sts(tmp_path, "whiten", 0.68, 0.79, setup={"fit_corpus": "train"})
    for variant, setup, iso in (("raw", None, 0.3), ("whiten", {"fit_corpus": "task"}, 0.9),
                                ("whiten", {"fit_corpus": "train"}, 0.8)):
        write_result(tmp_path, "org/alpha", variant, "Isotropy-STSB", iso, metrics={"sentence_isoscore": iso},
                     setup=setup)
    board = build_leaderboard(read_results(tmp_path))
    assert ",whiten [fitted on the training split],,STS12,68.00,-2.00,0" in render_csv(board)
    plot = plot_data(board.sections[0])
    assert plot is not None and plot.series[0][1] == (
        ("raw", 0.3, 75.0), ("whiten [fitted on test texts]", 0.9, 72.0),
        ("whiten [fitted on the training split]", 0.8, 73.5))


def test_train_corpus_and_sample_are_cited(tmp_path: Path) -> None:
    fit = {"fit_corpus": "train", "splits": ["train"], "n_texts": 500, "texts_sha256": "bb" * 32, "sample": 500,
           "sample_seed": 0, "n_texts_total": 8000}
    sts(tmp_path, "whiten", 0.66, 0.78, setup={"fit_corpus": "train", "fit_sample": 500}, fit=fit)
    prov = dict(build_leaderboard(read_results(tmp_path)).sections[0].tables[0].provenance)
    assert prov["fit"] == tuple(
        f"whiten (n_components=null): fit on {task}'s training texts (split train; 500 texts, sha256 {'bb' * 32}), "
        "a sample of at most 500 texts (seed 0), sentence level, seed 0" for task in ("STS12", "STSBenchmark"))


def test_same_setup_twice_is_an_error_naming_both_files(tmp_path: Path) -> None:
    first = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.66, setup={"fit_corpus": "task"})
    second = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.67, setup={"fit_corpus": "task"},
                          folder_name="exp_0123456789abcdef")
    with pytest.raises(LeaderboardError, match="a second result for STS12 of org/alpha\\+whiten") as info:
        read_results(tmp_path)
    assert str(first) in str(info.value)  # read second: the folders are read in name order
    assert second.relative_to(tmp_path / "results").as_posix() in str(info.value)


@pytest.mark.parametrize(("meta", "why"), [
    (None, "missing; an experiment folder's setup is read from it"),
    ({"name": "org/alpha+whiten"}, 'no "experiment_kwargs"'),
    ({"experiment_kwargs": {"seed": 0}}, 'no "name" string'),
])
def test_experiment_folder_without_a_setup_names_it(tmp_path: Path, meta: dict | None, why: str) -> None:
    path = write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.66, setup={"seed": 0})
    if meta is None:
        (path.parent / "model_meta.json").unlink()
    else:
        (path.parent / "model_meta.json").write_text(json.dumps(meta))
    with pytest.raises(LeaderboardError, match=why) as info:
        read_results(tmp_path)
    assert str(path.parent / "model_meta.json") in str(info.value)


def test_labels_and_raw_reference() -> None:
    task, train, seed1 = (setup_key(s) for s in ({"fit_corpus": "task", "seed": 0}, {"fit_corpus": "train", "seed": 0},
                                                 {"fit_corpus": "task", "seed": 1}))
    assert setup_labels([task]) == {task: ""}
    assert setup_labels([task, train, seed1]) == {task: "fitted on test texts, seed=0",
                                                  train: "fitted on the training split, seed=0",
                                                  seed1: "fitted on test texts, seed=1"}
    assert setup_labels([(), task]) == {(): "no setup recorded", task: "fitted on test texts, seed=0"}
    layer = setup_key({"layer": 6})
    assert setup_labels([(), layer]) == {(): "layer=default", layer: "layer=6"}
    assert raw_reference(train, [(), layer]) == ()
    assert raw_reference(setup_key({"layer": 6, "fit_corpus": "task"}), [(), layer]) == layer
    assert raw_reference(train, [layer]) == layer  # the only raw row
    assert raw_reference(train, [setup_key({"pooling": "cls"}), layer]) is None
    # a file fit corpus is told by its name; by its digest only where two files share a name
    named = [setup_key({"fit_corpus": n, "fit_corpus_sha256": d}) for n, d in (("a.txt", "1"), ("b.txt", "2"))]
    assert list(setup_labels([setup_key({"fit_corpus": "task"}), *named]).values()) == [
        "fitted on test texts", "fitted on a.txt", "fitted on b.txt"]
    same = [setup_key({"fit_corpus": "a.txt", "fit_corpus_sha256": d}) for d in ("1", "2")]
    assert list(setup_labels(same).values()) == ["fitted on a.txt, fit_corpus_sha256=1",
                                                 "fitted on a.txt, fit_corpus_sha256=2"]


def test_a_setup_that_records_no_dtype_is_labelled_float32(tmp_path: Path) -> None:
    """The runner records ``dtype`` only when it is not float32: a setup without it ran in float32, and says so
    (never ``dtype=none``, never "no setup recorded") in the labels, the rows and the CSV."""
    half, full = setup_key({"dtype": "bfloat16"}), setup_key({})
    assert setup_labels([full, half]) == {full: "dtype=float32", half: "dtype=bfloat16"}
    fitted = [setup_key({"fit_corpus": "held-out", **d}) for d in ({}, {"dtype": "float16"})]
    assert list(setup_labels(fitted).values()) == ["dtype=float32, fitted on held-out texts",
                                                   "dtype=float16, fitted on held-out texts"]
    sts(tmp_path, "raw", 0.70, 0.80)
    sts(tmp_path, "raw", 0.69, 0.79, setup={"dtype": "bfloat16"})
    csv = render_csv(build_leaderboard(read_results(tmp_path), ci=False))
    assert "raw [dtype=float32]" in csv and "raw [dtype=bfloat16]" in csv and "none" not in csv


def readme_snippet() -> str:
    """The README's Python example of reading setups apart with mteb."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python\nimport mteb\n\nresults = mteb.ResultCache(") + len("```python\n")
    return readme[start:readme.index("```", start)]


def test_mteb_writes_and_reads_the_folders_we_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Results saved by mteb's own ResultCache under experiment ModelMetas: the reporter reads them as rows, and
    the README's snippet reads them back apart with mteb (load_experiments="match_name")."""
    mteb = pytest.importorskip("mteb")
    from mteb.models.model_meta import ModelMeta, ScoringFunction
    from mteb.results import TaskResult

    cache = mteb.ResultCache(tmp_path / "results")  # as `iso-bench run --results results` in tmp_path
    task = mteb.get_task("STSBenchmark")
    runs = (("org/alpha+raw", None, 0.80), ("org/alpha+flow", {"fit_corpus": "task", "seed": 0}, 0.75),
            ("org/alpha+flow", {"fit_corpus": "task", "seed": 1}, 0.77))
    for name, setup, score in runs:
        meta = ModelMeta.create_empty({"name": name, "revision": REV, "embed_dim": 8, "experiment_kwargs": setup,
                                       "similarity_fn_name": ScoringFunction.COSINE})
        assert meta.experiment_name == (experiment_name(setup) if setup else None)
        result = TaskResult.from_task_results(task, {"test": {"default": {"main_score": score}}}, evaluation_time=1)
        cache.save_to_cache(result, meta)
    rows = build_leaderboard(read_results(tmp_path / "results"), ci=False).sections[0].tables[0].rows
    assert [(r.label, r.cells[0].value) for r in rows] == [("raw", 80.0), ("flow [seed=0]", 75.0),
                                                           ("flow [seed=1]", 77.0)]
    rows = build_leaderboard(read_results(tmp_path / "results")).sections[0].tables[0].rows  # seeds merged
    assert [(r.label, r.cells[0].value, r.cells[0].sd) for r in rows] == [("raw", 80.0, None),
                                                                          ("flow [seeds 0, 1]", 76.0, 1.41)]
    monkeypatch.chdir(tmp_path)
    exec(readme_snippet(), {})
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "org/alpha+flow fit_corpus_task__seed_0 {'fit_corpus': 'task', 'seed': 0} STSBenchmark 0.75",
        "org/alpha+flow fit_corpus_task__seed_1 {'fit_corpus': 'task', 'seed': 1} STSBenchmark 0.77",
        "org/alpha+raw None None STSBenchmark 0.8"]
    assert [m.model_name for m in cache.load_results(include_remote=False).model_results] == ["org/alpha+raw"]
    assert cache.load_results(load_experiments="match_name", include_remote=False).to_dataframe()[
        "org/alpha+flow"].tolist() == [pytest.approx(0.76)]  # mteb's table: the mean of both seeds
