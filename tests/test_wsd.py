"""WSD data loading, WordNet senses, the Scorer.java-equivalent scorer and centroid 1-NN.

Expected values come from tiny handmade files (derived by hand in the comments) and, on the real
Raganato et al. (2017) framework, from the published "WN 1st sense" baseline.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest

from iso_bench.kinds.wsd.data import (
    Instance,
    WordNetSenses,
    WSDDataError,
    framework_paths,
    load_corpus,
    read_keys,
)
from iso_bench.kinds.wsd.scoring import SenseCentroids, dataset_of, evaluate, predict, score, score_by_dataset
from tests.conftest import SHARED_DATA, _missing

# sense_key offset sense_number tag_cnt; deliberately not in sense-number order
INDEX = """\
bank%1:14:00:: 08420278 2 20
bank%1:17:01:: 09213565 1 25
bank%1:06:00:: 02787772 3 0
bank%2:40:00:: 02289295 1 3
deposit%2:40:00:: 02290998 1 12
deposit%1:21:00:: 13413493 1 5
change_ringing%1:04:00:: 00546646 1 0
big%5:00:01:mature:01 01488616 2 8
big%3:00:01:: 01382086 1 40
river%1:17:00:: 09411430 1 20
"""

XML = """\
<?xml version="1.0" encoding="UTF-8" ?>
<corpus lang="en" source="tiny">
<text id="alpha.d000">
<sentence id="alpha.d000.s000">
<wf lemma="the" pos="DET">The</wf>
<instance id="alpha.d000.s000.t000" lemma="bank" pos="NOUN">bank</instance>
<instance id="alpha.d000.s000.t001" lemma="deposit" pos="VERB">deposited</instance>
<wf lemma="&amp;" pos=".">&amp;</wf>
<instance id="alpha.d000.s000.t002" lemma="change_ringing" pos="NOUN">change ringing</instance>
</sentence>
</text>
<text id="beta.d000">
<sentence id="beta.d000.s000">
<instance id="beta.d000.s000.t000" lemma="big" pos="ADJ">Big</instance>
<instance id="beta.d000.s000.t001" lemma="river" pos="NOUN">river_banks</instance>
</sentence>
</text>
</corpus>
"""

GOLD = """\
alpha.d000.s000.t000 bank%1:17:01::
alpha.d000.s000.t001 deposit%2:40:00::
alpha.d000.s000.t002 change_ringing%1:04:00::
beta.d000.s000.t000 big%3:00:01:: big%5:00:01:mature:01
beta.d000.s000.t001 river%1:17:00::
"""


def _write(folder: Path, xml: str = XML, gold: str = GOLD, index: str = INDEX) -> tuple[Path, Path, Path]:
    paths = folder / "tiny.data.xml", folder / "tiny.gold.key.txt", folder / "index.sense"
    for path, text in zip(paths, (xml, gold, index), strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


@pytest.fixture
def tiny(tmp_path: Path):
    xml, gold, index = _write(tmp_path)
    wordnet = WordNetSenses.from_index(index)
    return load_corpus(xml, gold, wordnet=wordnet), wordnet


# --- loading -------------------------------------------------------------------------------------------------


def test_corpus_texts_spans_and_gold(tiny) -> None:
    corpus, _ = tiny
    assert corpus.name == "tiny" and len(corpus) == 5
    assert corpus.sentences == {"alpha.d000.s000": "The bank deposited & change ringing",
                                "beta.d000.s000": "Big river_banks"}
    spans = {i.id.rsplit(".", 1)[1] + i.sentence_id[0]: (i.start, i.end) for i in corpus.instances}
    # "The"=0-3, "bank"=4-8, "deposited"=9-18, "&"=19-20, "change ringing"=21-35; "Big"=0-3, "river_banks"=4-15
    assert spans == {"t000a": (4, 8), "t001a": (9, 18), "t002a": (21, 35), "t000b": (0, 3), "t001b": (4, 15)}
    for inst in corpus.instances:
        assert corpus.sentences[inst.sentence_id][inst.start:inst.end] in {
            "bank", "deposited", "change ringing", "Big", "river_banks"}
    assert corpus.instances[1] == Instance("alpha.d000.s000.t001", "alpha.d000.s000", "deposit", "VERB", 9, 18)
    assert corpus.gold["beta.d000.s000.t000"] == ("big%3:00:01::", "big%5:00:01:mature:01")
    assert corpus.gold_keys()[3] == corpus.gold["beta.d000.s000.t000"]


def test_underscores_as_spaces_keeps_spans(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path)
    corpus = load_corpus(xml, gold, underscores_as_spaces=True)
    assert corpus.sentences["beta.d000.s000"] == "Big river banks"
    assert (corpus.instances[4].start, corpus.instances[4].end) == (4, 15)


def test_wordnet_candidates_by_sense_number(tiny) -> None:
    _, wn = tiny
    assert wn.candidates("bank", "NOUN") == ("bank%1:17:01::", "bank%1:14:00::", "bank%1:06:00::")
    assert wn.candidates("Bank", "VERB") == ("bank%2:40:00::",)
    assert wn.candidates("big", "ADJ") == ("big%3:00:01::", "big%5:00:01:mature:01")  # satellite = ADJ
    assert wn.first_sense("Change Ringing", "NOUN") == "change_ringing%1:04:00::"  # lowercased, '_' joined
    assert wn.first_sense("bank", "ADV") is None and wn.candidates("zzz", "NOUN") == ()
    assert "river%1:17:00::" in wn and "river%1:17:01::" not in wn and len(wn) == 10


# --- malformed input names file and line --------------------------------------------------------------------


def _error_at(path: Path, line: int):
    return pytest.raises(WSDDataError, match=re.escape(f"{path}:{line}:"))


def test_xml_parse_error_names_file_and_line(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path, xml=XML.replace("</sentence>\n</text>\n<text", "</text>\n<text", 1))
    with _error_at(xml, 10):  # the </text> that closes an open <sentence>
        load_corpus(xml, gold)


def test_key_line_without_xml_instance(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path, gold=GOLD + "alpha.d000.s000.t009 bank%1:14:00::\n")
    with _error_at(gold, 6):
        load_corpus(xml, gold)


def test_xml_instance_without_key_line(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path, gold="".join(GOLD.splitlines(keepends=True)[:2] + GOLD.splitlines(True)[3:]))
    with _error_at(xml, 9):  # alpha.d000.s000.t002
        load_corpus(xml, gold)


def test_gold_line_without_key(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path, gold=GOLD.replace("deposit%2:40:00::", ""))
    with _error_at(gold, 2):
        load_corpus(xml, gold)


def test_unknown_sense_key(tmp_path: Path) -> None:
    xml, gold, index = _write(tmp_path, gold=GOLD.replace("river%1:17:00::", "river%1:17:09::"))
    wn = WordNetSenses.from_index(tmp_path)  # the folder holding index.sense
    load_corpus(xml, gold)  # without WordNet, keys are not checked
    with _error_at(gold, 5):
        load_corpus(xml, gold, wordnet=wn)


def test_duplicate_instance_and_bad_pos(tmp_path: Path) -> None:
    xml, gold, _ = _write(tmp_path, xml=XML.replace("s000.t001", "s000.t000", 1))
    with _error_at(xml, 7):
        load_corpus(xml, gold)
    xml, gold, _ = _write(tmp_path, xml=XML.replace('lemma="river" pos="NOUN"', 'lemma="river" pos="X"'))
    with _error_at(xml, 15):
        load_corpus(xml, gold)


def test_malformed_index_sense(tmp_path: Path) -> None:
    _, _, index = _write(tmp_path, index=INDEX.replace("bank%2:40:00:: 02289295 1 3", "bank%2:40:00:: 1 3"))
    with _error_at(index, 4):
        WordNetSenses.from_index(index)
    _, _, index = _write(tmp_path, index=INDEX.replace("river%1:17:00::", "river%7:17:00::"))
    with _error_at(index, 10):
        WordNetSenses.from_index(index)


# --- scorer --------------------------------------------------------------------------------------------------


def test_scorer_on_key_files(tmp_path: Path) -> None:
    """Gold: 5 instances, one with two keys. System: 4 answers, 3 right (one via the second gold key).
    P = 3/4 = 75, R = 3/5 = 60, F1 = 2*.75*.6/1.35 = 66.67. alpha: P 1/2, R 1/3, F1 = 2*(1/6)/(5/6) = 40.
    beta: 2/2 -> 100."""
    (tmp_path / "system.key").write_text("alpha.d000.s000.t000 bank%1:14:00::\n"
                                         "alpha.d000.s000.t001 deposit%2:40:00::\n"
                                         "beta.d000.s000.t000 big%5:00:01:mature:01\n"
                                         "beta.d000.s000.t001 river%1:17:00::\n")
    _, gold_path, _ = _write(tmp_path)
    gold, system = read_keys(gold_path), read_keys(tmp_path / "system.key")
    s = score(gold, system)
    assert (s.correct, s.answered, s.total) == (3, 4, 5)
    assert (s.precision, s.recall) == pytest.approx((75.0, 60.0))
    assert s.f1 == pytest.approx(200 / 3)
    by = score_by_dataset(gold, system)
    assert list(by) == ["alpha", "beta", "ALL"]
    assert (by["alpha"].precision, by["alpha"].recall, by["alpha"].f1) == pytest.approx((50.0, 100 / 3, 40.0))
    assert (by["beta"].precision, by["beta"].recall, by["beta"].f1) == pytest.approx((100.0, 100.0, 100.0))
    assert by["ALL"] == s


def test_scorer_multiple_answers_and_strays_as_scorer_java() -> None:
    gold = {"a": ("k1",), "b": ("k2",)}
    # two answers, one right -> 0.5 correct; an id not in gold is ignored
    s = score(gold, {"a": ("k1", "k9"), "zzz": "k1"})
    assert (s.correct, s.answered, s.precision, s.recall) == (0.5, 1, 50.0, 25.0)
    assert s.f1 == pytest.approx(2 * 50 * 25 / 75)
    none = score(gold, {"a": None})
    assert none.answered == 0 and math.isnan(none.precision) and none.recall == 0.0
    assert dataset_of("senseval2.d000.s000.t000") == "senseval2"


# --- centroids and 1-NN --------------------------------------------------------------------------------------


def test_centroids_average_each_key_including_multi_key_rows() -> None:
    vectors = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [2.0, 2.0], [0.0, 4.0]])
    keys = [["bank%1:17:01::"], ["bank%1:17:01::"], ["bank%1:14:00::"], ["bank%1:14:00::"],
            ["bank%1:14:00::", "river%1:17:00::"]]
    c = SenseCentroids.fit(vectors, keys)
    assert c.keys == ("bank%1:17:01::", "bank%1:14:00::", "river%1:17:00::")
    assert c.counts.tolist() == [2, 3, 1]
    np.testing.assert_allclose(c.vectors, [[2.0, 0.0], [2 / 3, 8 / 3], [0.0, 4.0]])


def test_nearest_centroid_by_cosine_with_fallbacks(tiny) -> None:
    """Centroids: bank%1:17:01:: = (2, 0), bank%1:14:00:: = (2/3, 8/3) ~ (1, 4), big%5.. = (1, 1).
    t000 bank (0.5, 0.4): cos to (1, 0) = .5/.6403 = .781, to (1, 4) = 2.1/(.6403*4.123) = .795 -> 14:00
    (Euclidean would pick 17:01: distance 1.55 vs 2.27). deposit and change_ringing have no centroid: fallback
    to their first sense. big (5, -1): only big%5 has a centroid -> it, whatever the cosine. river: fallback."""
    corpus, wn = tiny
    c = SenseCentroids.fit(np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0], [2.0, 2.0], [0.0, 4.0], [1.0, 1.0]]),
                           [["bank%1:17:01::"], ["bank%1:17:01::"], ["bank%1:14:00::"], ["bank%1:14:00::"],
                            ["bank%1:14:00::"], ["big%5:00:01:mature:01"]])
    x = np.array([[0.5, 0.4], [9.0, 9.0], [9.0, 9.0], [5.0, -1.0], [1.0, 0.0]])
    out = predict(corpus.instances, wn, x, c)
    assert out.keys == {"alpha.d000.s000.t000": "bank%1:14:00::", "alpha.d000.s000.t001": "deposit%2:40:00::",
                        "alpha.d000.s000.t002": "change_ringing%1:04:00::",
                        "beta.d000.s000.t000": "big%5:00:01:mature:01", "beta.d000.s000.t001": "river%1:17:00::"}
    assert (out.fallbacks, out.unanswered) == (3, 0)
    out = predict(corpus.instances[:1], wn, np.array([[3.0, 1.0]]), c)  # cos .949 vs .537 -> 17:01
    assert out.keys == {"alpha.d000.s000.t000": "bank%1:17:01::"} and out.fallbacks == 0


def test_ties_go_to_lower_sense_number_and_unknown_lemmas_are_unanswered(tiny) -> None:
    _, wn = tiny
    c = SenseCentroids.fit(np.array([[1.0, 1.0], [2.0, 2.0]]), [["bank%1:06:00::"], ["bank%1:14:00::"]])
    inst = [Instance("x.t0", "x", "bank", "NOUN", 0, 4), Instance("x.t1", "x", "zzz", "NOUN", 5, 8)]
    out = predict(inst, wn, np.array([[0.0, 1.0], [1.0, 0.0]]), c)
    assert out.keys == {"x.t0": "bank%1:14:00::"}  # sense 2 beats sense 3 at equal cosine
    assert (out.fallbacks, out.unanswered) == (0, 1)


def test_no_vectors_is_the_first_sense_baseline(tiny) -> None:
    corpus, wn = tiny
    out = predict(corpus.instances, wn)
    assert out.keys["alpha.d000.s000.t000"] == "bank%1:17:01::" and out.fallbacks == 5
    # first senses: bank 17:01 right, deposit%2:40 right, change_ringing right, big%3 right (first gold), river right
    result = evaluate(corpus, wn)
    assert result.scores["ALL"].f1 == 100.0 and result.to_dict()["fallbacks"] == 5


def test_vector_shape_and_values_are_checked(tiny) -> None:
    corpus, wn = tiny
    c = SenseCentroids.fit(np.eye(2), [["bank%1:17:01::"], ["bank%1:14:00::"]])
    with pytest.raises(ValueError, match="one row per instance"):
        predict(corpus.instances, wn, np.zeros((4, 2)), c)
    with pytest.raises(ValueError, match="dimension"):
        predict(corpus.instances, wn, np.zeros((5, 3)), c)
    with pytest.raises(ValueError, match="NaN"):
        SenseCentroids.fit(np.array([[np.nan, 0.0]]), [["bank%1:17:01::"]])
    with pytest.raises(ValueError, match="without centroids"):
        predict(corpus.instances, wn, np.zeros((5, 2)))


# --- the real framework --------------------------------------------------------------------------------------

FRAMEWORK = SHARED_DATA / "wsd" / "WSD_Evaluation_Framework"
WORDNET = SHARED_DATA / "nltk_data" / "corpora" / "wordnet"

# "WN 1st sense" F1 of Raganato, Camacho-Collados & Navigli (2017), "Word Sense Disambiguation: A Unified
# Evaluation Framework and Empirical Comparison", EACL, Table 4 (knowledge-based systems); the same row is
# in NLP-progress, english/word_sense_disambiguation.md ("WN 1st sense baseline | 65.2 | 66.8 | 66.2 | 55.2 |
# 63.0 | 67.8").
PUBLISHED_FIRST_SENSE = {"senseval2": 66.8, "senseval3": 66.2, "semeval2007": 55.2, "semeval2013": 63.0,
                         "semeval2015": 67.8, "ALL": 65.2}
SIZES = {"senseval2": 2282, "senseval3": 1850, "semeval2007": 455, "semeval2013": 1644, "semeval2015": 1022,
         "ALL": 7253}


@pytest.fixture(scope="module")
def real_wordnet() -> WordNetSenses:
    if not (WORDNET / "index.sense").is_file() or not FRAMEWORK.is_dir():
        _missing(f"the WSD framework and WordNet under {SHARED_DATA}")
    return WordNetSenses.from_index(WORDNET)


@pytest.mark.slow
def test_first_sense_baseline_matches_raganato_2017(real_wordnet: WordNetSenses) -> None:
    corpus = load_corpus(*framework_paths(FRAMEWORK, "ALL"), wordnet=real_wordnet)
    result = evaluate(corpus, real_wordnet)
    assert {name: s.total for name, s in result.scores.items()} == SIZES
    assert result.predictions.unanswered == 0 and result.predictions.fallbacks == 7253
    assert result.scores["ALL"].f1 == pytest.approx(PUBLISHED_FIRST_SENSE["ALL"], abs=0.05)
    for name, published in PUBLISHED_FIRST_SENSE.items():
        assert result.scores[name].f1 == pytest.approx(published, abs=0.1), name
    # each dataset file on its own scores the same as its slice of ALL
    alone = load_corpus(*framework_paths(FRAMEWORK, "semeval2007"), wordnet=real_wordnet)
    assert evaluate(alone, real_wordnet).scores["ALL"] == result.scores["semeval2007"]


@pytest.mark.slow
def test_semcor_loads_with_documented_counts(real_wordnet: WordNetSenses) -> None:
    xml, gold = framework_paths(FRAMEWORK, "semcor")
    t0 = time.perf_counter()
    corpus = load_corpus(xml, gold, wordnet=real_wordnet)
    print(f"SemCor loaded in {time.perf_counter() - t0:.2f} s")
    with open(gold, encoding="utf-8") as f:
        gold_lines = sum(1 for line in f if line.strip())
    assert len(corpus.sentences) == 37176
    assert len(corpus) == len(corpus.gold) == gold_lines == 224716
    first = corpus.instances[0]
    assert corpus.sentences[first.sentence_id][first.start:first.end] == "Fulton_County_Grand_Jury"
