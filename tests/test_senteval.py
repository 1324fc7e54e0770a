"""The SentEval STS protocol: loaders (strict, file:line errors) and the "all" / "wmean" scores."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import numpy as np
import pytest

from iso_bench.kinds.paper_sts.data import (
    STS_SUBSETS,
    TASK_LOADERS,
    STSFormatError,
    load_sick,
    load_sts_benchmark,
    load_sts_subset,
    load_sts_task,
    load_sts_year,
)
from iso_bench.kinds.paper_sts.scoring import score_sts, spearman100
from tests.conftest import SHARED_DATA, _missing

# ------------------------------------------------------------------------------------- scoring by hand


def test_spearman_by_hand() -> None:
    assert spearman100([1, 2, 3, 4], [0.1, 0.5, 0.7, 9.0]) == pytest.approx(100.0)  # monotone
    assert spearman100([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-100.0)
    # ranks 1,3,2,4 vs 1,2,3,4: sum d^2 = 2, rho = 1 - 6*2 / (4*(16-1)) = 0.8
    assert spearman100([1, 2, 3, 4], [0.4, 0.6, 0.5, 0.7]) == pytest.approx(80.0)


def test_wmean_versus_all_on_two_tiny_subsets() -> None:
    gold = {"A": [1, 2, 3], "B": [1, 2, 3, 4]}
    pred = {"A": [0.1, 0.2, 0.3], "B": [0.4, 0.6, 0.5, 0.7]}
    r = score_sts(gold, pred)
    # per subset: A is monotone (100); B has ranks 1,3,2,4 (80, see above)
    assert r.subsets["A"].spearman == pytest.approx(100.0) and r.subsets["B"].spearman == pytest.approx(80.0)
    # wmean weights by size: (3*100 + 4*80) / 7
    assert r.wmean.spearman == pytest.approx(620 / 7) and r.wmean.n == 7
    # all: gold ranks with ties 1.5 3.5 5.5 1.5 3.5 5.5 7, predicted ranks 1 2 3 4 6 5 7; both mean 4;
    # deviations (-2.5 -.5 1.5 -2.5 -.5 1.5 3) and (-3 -2 -1 0 2 1 3): cov 16.5, sums of squares 26.5 and 28
    assert r.all.spearman == pytest.approx(100 * 16.5 / math.sqrt(26.5 * 28)) and r.all.n == 7
    # Pearson: A is linear (100); B: deviations (-1.5 -.5 .5 1.5), (-.15 .05 -.05 .15): .4 / sqrt(5 * .05) = .8
    assert r.subsets["B"].pearson == pytest.approx(80.0) and r.wmean.pearson == pytest.approx(620 / 7)
    assert r.to_dict()["subsets"]["A"] == {"n": 3, "spearman": pytest.approx(100.0), "pearson": pytest.approx(100.0)}


def test_one_subset_all_equals_wmean() -> None:
    r = score_sts({"test": [1, 2, 3, 4]}, {"test": np.array([0.4, 0.6, 0.5, 0.7])})
    assert r.all.spearman == pytest.approx(r.wmean.spearman) == pytest.approx(80.0)


def test_constant_prediction_is_nan_never_zero() -> None:
    r = score_sts({"A": [1, 2, 3], "B": [1, 2]}, {"A": [0.5, 0.5, 0.5], "B": [0.1, 0.2]})
    assert math.isnan(r.subsets["A"].spearman) and math.isnan(r.wmean.spearman)
    assert r.subsets["B"].spearman == pytest.approx(100.0)


def test_scoring_errors() -> None:
    with pytest.raises(ValueError, match="different subsets"):
        score_sts({"A": [1, 2], "B": [1, 2]}, {"A": [1, 2]})
    with pytest.raises(ValueError, match="same length"):
        score_sts({"A": [1, 2, 3]}, {"A": [1, 2]})
    with pytest.raises(ValueError, match="at least 2 pairs"):
        score_sts({"A": [1]}, {"A": [1]})
    with pytest.raises(ValueError, match="non-finite"):
        spearman100([1, 2], [0.1, float("nan")])


# ------------------------------------------------------------------------------------- loaders on handmade files


def _sts_files(folder: Path, name: str, inputs: str, gold: str) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    i, g = folder / f"STS.input.{name}.txt", folder / f"STS.gs.{name}.txt"
    i.write_text(inputs, encoding="utf-8")
    g.write_text(gold, encoding="utf-8")
    return i, g


def test_blank_gold_lines_are_unscored_pairs(tmp_path: Path) -> None:
    i, g = _sts_files(tmp_path, "toy", "a b\tc d\ne f\tg h\ni j\tk l\n", "4.0\n\n0.5\n")
    sub, unscored = load_sts_subset(i, g)
    assert (sub.name, len(sub), unscored) == ("toy", 2, 1)
    assert sub.sentences1 == ("a b", "i j") and sub.sentences2 == ("c d", "k l")
    assert sub.gold.tolist() == [4.0, 0.5] and sub.lines == (1, 3)


def test_a_year_reads_its_subsets_in_order(tmp_path: Path) -> None:
    folder = tmp_path / "STS" / "STS13-en-test"
    for k, name in enumerate(STS_SUBSETS["STS13"]):
        _sts_files(folder, name, "x\ty\n" * (k + 2), "1\n" + "\n" * k + "2\n")
    _sts_files(folder, "SMT", "", "3\n")  # a gold file with no input, as in the real release: not a subset
    d = load_sts_year(tmp_path, "STS13")
    assert d.sizes == {"FNWN": 2, "headlines": 2, "OnWN": 2} and d.unscored == 0 + 1 + 2 and len(d) == 6
    assert d.sentences() == ["x", "y"]
    (folder / "STS.input.OnWN.txt").unlink()
    with pytest.raises(STSFormatError, match="STS.input.OnWN.txt: file not found"):
        load_sts_year(tmp_path, "STS13")


@pytest.mark.parametrize(
    ("inputs", "gold", "bad", "line", "message"),
    [
        ("a\tb\nc\td\te\n", "1\n2\n", "input", 2, "expected 2 tab-separated sentences, found 3"),
        ("a\tb\nc d\n", "1\n2\n", "input", 2, "found 1 fields"),
        ("a\tb\nc\t \n", "1\n2\n", "input", 2, "sentence 2 is empty"),
        ("a\tb\nc\td\n", "1\nfour\n", "gold", 2, "'four' is not a number"),
        ("a\tb\nc\td\n", "1\n7.5\n", "gold", 2, r"outside \[0, 5\]"),
        ("a\tb\nc\td\n", "nan\n1\n", "gold", 1, "outside"),
        ("a\tb\nc\td\ne\tf\n", "1\n2\n", "gold", 3, "missing score line for input line 3"),
        ("a\tb\n", "1\n2\n", "gold", 2, "score line with no input line"),
    ],
)
def test_malformed_sts_lines_name_file_and_line(
    tmp_path: Path, inputs: str, gold: str, bad: str, line: int, message: str
) -> None:
    i, g = _sts_files(tmp_path, "toy", inputs, gold)
    with pytest.raises(STSFormatError, match=message) as info:
        load_sts_subset(i, g)
    assert str(info.value).startswith(f"{i if bad == 'input' else g}:{line}: ")


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    i, g = _sts_files(tmp_path, "toy", "", "1\n2\n")
    i.write_bytes(b"a\tb\nc\xc3\td\n")
    with pytest.raises(STSFormatError, match=f"{i}:2: not valid UTF-8"):
        load_sts_subset(i, g)


def test_sts_benchmark_tabs_not_csv(tmp_path: Path) -> None:
    folder = tmp_path / "STS" / "STSBenchmark"
    folder.mkdir(parents=True)
    path = folder / "sts-test.csv"
    # an unbalanced quote (a quoting CSV reader would swallow the next line) and extra trailing columns
    path.write_text(
        'main-news\tfile\t2012\t0001\t2.500\tHe said "no.\tHe said no.\n'
        "main-forums\tfile\t2014\t0002\t0\tA b.\tC d.\tsource-a\tsource-b\n",
        encoding="utf-8",
    )
    d = load_sts_benchmark(tmp_path)
    assert (d.name, d.sizes) == ("STSBenchmark", {"test": 2})
    s = d.subsets[0]
    assert s.sentences1 == ('He said "no.', "A b.") and s.sentences2 == ("He said no.", "C d.")
    assert s.gold.tolist() == [2.5, 0.0]
    path.write_text("main-news\tfile\t2012\t0001\t2.500\tHe said no.\n", encoding="utf-8")
    with pytest.raises(STSFormatError, match=f"{path}:1: expected at least 7 tab-separated fields"):
        load_sts_benchmark(tmp_path)


def test_sick_by_header(tmp_path: Path) -> None:
    folder = tmp_path / "SICK"
    folder.mkdir()
    path = folder / "SICK_test_annotated.txt"
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    path.write_text(header + "6\tA man.\tA boy.\t3.3\tNEUTRAL\n9\tX.\tY.\t1\tCONTRADICTION\n", encoding="utf-8")
    d = load_sick(tmp_path)
    assert (d.name, len(d), d.subsets[0].lines) == ("SICK-R", 2, (2, 3))
    assert d.subsets[0].gold.tolist() == [3.3, 1.0] and d.subsets[0].sentences2 == ("A boy.", "Y.")
    path.write_text(header + "6\tA man.\tA boy.\t3.3\n", encoding="utf-8")
    with pytest.raises(STSFormatError, match=f"{path}:2: expected 5 tab-separated fields, found 4"):
        load_sick(tmp_path)
    path.write_text("pair_ID\tsentence_A\tsentence_B\tscore\n", encoding="utf-8")
    with pytest.raises(STSFormatError, match=f"{path}:1: header lacks column.s. relatedness_score"):
        load_sick(tmp_path)


def test_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown STS task 'STS17'"):
        load_sts_task("/nonexistent", "STS17")
    with pytest.raises(ValueError, match="unknown STS year"):
        load_sts_year("/nonexistent", "STSB")


# ------------------------------------------------------------------------------------- the real SentEval copy

REAL_SIZES = {
    "STS12": {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399},
    "STS13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
    "STS14": {"deft-forum": 450, "deft-news": 300, "headlines": 750, "images": 750, "OnWN": 750, "tweet-news": 750},
    "STS15": {"answers-forums": 375, "answers-students": 750, "belief": 375, "headlines": 750, "images": 750},
    "STS16": {"answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209},
    "STSBenchmark": {"test": 1379},
    "SICK-R": {"test": 4927},
}
TOTALS = {
    "STS12": 3108,
    "STS13": 1500,
    "STS14": 3750,
    "STS15": 3000,
    "STS16": 1186,
    "STSBenchmark": 1379,
    "SICK-R": 4927,
}
UNSCORED = {"STS15": 5500, "STS16": 7997}
HUB_NAMES = {
    "STS12": "sts12-sts",
    "STS13": "sts13-sts",
    "STS14": "sts14-sts",
    "STS15": "sts15-sts",
    "STS16": "sts16-sts",
    "STSBenchmark": "stsbenchmark-sts",
    "SICK-R": "sickr-sts",
}


@pytest.fixture(scope="module")
def downstream() -> Path:
    root = SHARED_DATA / "senteval" / "downstream"
    if not (root / "STS" / "STS12-en-test").is_dir() or not (root / "SICK").is_dir():
        _missing(f"the SentEval STS and SICK copies in {root}")
    return root


@pytest.mark.parametrize("name", list(TASK_LOADERS))
def test_real_sizes(downstream: Path, name: str) -> None:
    d = load_sts_task(downstream, name)
    assert d.name == name and d.sizes == REAL_SIZES[name] and len(d) == TOTALS[name]
    assert d.unscored == UNSCORED.get(name, 0)
    for s in d.subsets:
        assert s.gold.min() >= 0 and s.gold.max() <= 5 and len(s.sentences1) == len(s.sentences2) == len(s)


def test_real_first_pairs(downstream: Path) -> None:
    stsb = load_sts_benchmark(downstream).subsets[0]
    assert (stsb.sentences1[0], stsb.sentences2[0], stsb.gold[0]) == (
        "A girl is styling her hair.",
        "A girl is brushing her hair.",
        2.5,
    )
    sick = load_sick(downstream).subsets[0]
    assert (sick.sentences1[0][:20], sick.gold[0], sick.gold[-1]) == ("There is no boy play", 3.3, 1.0)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def test_real_scores_match_the_mteb_copies(downstream: Path, hub_mirror: Path) -> None:
    """mteb's copies are lowercased and re-tokenized, but their gold scores must be the same multiset:
    an independent check that exactly the unscored pairs were dropped. STS-B is the same text."""
    for name, folder in HUB_NAMES.items():
        hub = _jsonl(hub_mirror / "mteb" / folder / "test.jsonl")
        d = load_sts_task(downstream, name)
        ours = collections.Counter(round(float(x), 3) for s in d.subsets for x in s.gold)
        theirs = collections.Counter(round(float(r["score"]), 3) for r in hub)
        if name == "SICK-R":  # mteb's SICK-R is all 9,927 pairs; SentEval's test split is 4,927 of them
            assert not ours - theirs and sum(theirs.values()) == 9927
        else:
            assert ours == theirs, name
    stsb = load_sts_benchmark(downstream).subsets[0]
    hub = _jsonl(hub_mirror / "mteb" / "stsbenchmark-sts" / "test.jsonl")
    assert [(r["sentence1"], r["sentence2"]) for r in hub] == list(zip(stsb.sentences1, stsb.sentences2, strict=True))
