"""A variant on every mteb task type without a mirror, on tiny data built here, each with a score derived by hand.

Texts are made of keywords (``cat dog fish bird``) and filler words the keyword encoder ignores, so a text's raw
vector is its keyword counts and every answer is visible from the texts. Each data set is put into a real mteb
task object of its type (``task.dataset`` in the layout that type has after ``load_data``), evaluated with
``mteb.evaluate``, and read by :func:`task_text_groups`, which must return exactly what mteb encodes.

``center`` (x - mean of the fit corpus) is the fitted method checked on every type, fitted on the task object
itself, with its fit record checked against the texts listed here. It is a translation: Euclidean geometry (k-means,
k-NN) does not change, and texts with the same raw vector keep the same centered vector, so wherever the answer is
"the text with my very vector" (cosine 1; no other centered vector here is parallel to it) it stays right.
Summarization's centered cosines are worked out where it is tested.
"""

from __future__ import annotations

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")
mteb = pytest.importorskip("mteb")
# mteb's bitext evaluator copies the similarity tensor the encoder returns (its own models' too)
pytestmark = pytest.mark.filterwarnings("ignore:To copy construct from a tensor")

from iso_bench.data.fit_corpus import FitCorpus, FitCorpusError, task_text_groups  # noqa: E402
from iso_bench.files import texts_digest  # noqa: E402

from .conftest import loaded_task  # noqa: E402

VOCAB = ["cat", "dog", "fish", "bird"]


_task = loaded_task


def _split(**columns):
    return datasets.DatasetDict({"test": datasets.Dataset.from_dict(columns)})


def _evaluate(variant, task, *, fit_on: list[str] | None = None) -> dict:
    """The scores of the one split and subset of ``task``. ``fit_on``: a fitted variant fits on this very task
    object, whose fit corpus must be these texts."""
    if fit_on is not None:
        variant.corpus.add_tasks([task])
    (result,) = mteb.evaluate(variant, task, cache=None, show_progress_bar=False).task_results
    if fit_on is not None:
        record = variant.fit_records[task.metadata.name]
        assert (record["n_texts"], record["texts_sha256"]) == (len(fit_on), texts_digest(fit_on))
    (scores,) = result.scores["test"]
    return scores


def _no_train_split(task) -> None:
    with pytest.raises(FitCorpusError, match=task.metadata.name):
        FitCorpus.from_task(task, "train")


# ---- clustering --------------------------------------------------------------------------------------------
# Two clusters whose members share one keyword: identical vectors inside a cluster, orthogonal across, so
# k-means finds them exactly and v-measure (homogeneity and completeness) is 1.0. A vocabulary that only knows
# the word every text shares gives every text the same vector: one cluster found, v-measure 0.0.
CLUSTER_TEXTS = ["cat one", "cat two", "cat three", "dog one", "dog two", "dog three"]
CLUSTER_LABELS = [0, 0, 0, 1, 1, 1]
ALL_SHARE = [f"{t} pet" for t in CLUSTER_TEXTS]


def _fast_clustering(texts=CLUSTER_TEXTS):
    # max_fraction_of_documents_to_embed=None: encode every row (58 of mteb's 80 fast clustering tasks encode a
    # random sample instead). 2 bootstrap samples of 64 draws: each holds both clusters (else p = 2**-63).
    return _task("TwentyNewsgroupsClustering.v2", _split(sentences=texts, labels=CLUSTER_LABELS),
                 max_fraction_of_documents_to_embed=None, max_documents_per_cluster=64, n_clusters=2)


def _legacy_clustering(texts=CLUSTER_TEXTS):
    # legacy: each row is one cluster set (a list of texts and their labels), clustered on its own
    sets = {"sentences": [texts[:3] + texts[3:], texts[1:3] + texts[4:]],
            "labels": [CLUSTER_LABELS, [0, 0, 1, 1]]}
    return _task("TwentyNewsgroupsClustering", _split(**sets))


@pytest.mark.filterwarnings("ignore:The task 'TwentyNewsgroupsClustering' is superseded")
@pytest.mark.parametrize("make", [_fast_clustering, _legacy_clustering], ids=["fast", "legacy"])
def test_clustering(make, keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), make())["main_score"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(VOCAB, "center"), make(), fit_on=CLUSTER_TEXTS)["main_score"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(["pet"]), make(ALL_SHARE))["main_score"] == pytest.approx(0.0)
    task = make()
    # fast: one text per row; legacy: the rows' lists, flattened and deduplicated in first-seen order
    assert task_text_groups(task) == [(None, CLUSTER_TEXTS)]
    assert FitCorpus.from_task(task).texts == tuple(CLUSTER_TEXTS)
    _no_train_split(task)


# ---- pair classification -----------------------------------------------------------------------------------
# Duplicates share their keyword (cosine 1), the other pairs share none (cosine 0): every similarity ranks the
# duplicates first, so average precision is 1.0. With the labels flipped the two positives tie at the bottom
# with the negatives' score, precision at that threshold is 2/4: AP 0.5 for every similarity, so max_ap 0.5.
PAIRS = {"sentence1": ["cat a", "dog a", "cat c", "fish a"], "sentence2": ["cat b", "dog b", "dog c", "bird a"]}
BOTH_SIDES = PAIRS["sentence1"] + PAIRS["sentence2"]  # mteb encodes sentence1, then sentence2


def _pairs(labels=(1, 1, 0, 0), v1_layout: bool = False):
    if v1_layout:  # mteb's v1 layout: one row holding every column as a list (unpacked by the task)
        return _task("SprintDuplicateQuestions", _split(**{k: [v] for k, v in PAIRS.items()}, labels=[list(labels)]))
    return _task("SprintDuplicateQuestions", _split(**PAIRS, labels=list(labels)))


def test_pair_classification(keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), _pairs())["max_ap"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(VOCAB, "center"), _pairs(), fit_on=BOTH_SIDES)["max_ap"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(VOCAB), _pairs(labels=(0, 0, 1, 1)))["max_ap"] == pytest.approx(0.5)
    for task in (_pairs(), _pairs(v1_layout=True)):
        assert task_text_groups(task) == [(None, BOTH_SIDES)]
        _no_train_split(task)


# ---- bitext mining -----------------------------------------------------------------------------------------
# Each sentence's only keyword match on the other side is its translation (row i with row i): every nearest
# neighbour is right, f1 1.0. The other side rotated by one row: every nearest neighbour is wrong, f1 0.0.
SIDE1, SIDE2 = ["cat un", "dog un", "fish un"], ["cat one", "dog one", "fish one"]


def _bitext(side2=SIDE2):
    return _task("BornholmBitextMining", _split(sentence1=SIDE1, sentence2=side2))


def test_bitext_mining(keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), _bitext())["f1"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(VOCAB, "center"), _bitext(), fit_on=SIDE1 + SIDE2)["f1"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(VOCAB), _bitext(SIDE2[1:] + SIDE2[:1]))["f1"] == pytest.approx(0.0)
    task = _bitext()
    assert task_text_groups(task) == [(None, SIDE1 + SIDE2)]
    _no_train_split(task)


def _parallel_bitext():
    # parallel_subsets: one split whose columns are languages, each subset a pair of them; mteb encodes each
    # column that some selected pair names, in the dataset's column order ("spa_Latn" is in no selected pair)
    task = mteb.get_task("NTREXBitextMining", hf_subsets=["eng_Latn-deu_Latn", "eng_Latn-fra_Latn"])
    columns = {"eng_Latn": ["cat en", "dog en"], "deu_Latn": ["cat de", "dog de"], "fra_Latn": ["cat fr", "dog fr"],
               "spa_Latn": ["cat es", "dog es"]}
    task.dataset, task.data_loaded = _split(**columns), True
    return task, ["cat en", "dog en", "cat de", "dog de", "cat fr", "dog fr"]


def _bucc_v1():
    # BUCC (v1)'s dataset_transform leaves each split a plain dict (sentence2 is the larger corpus; gold pairs)
    task = mteb.get_task("BUCC", hf_subsets=["de-en"])
    split = {"sentence1": ["cat de", "dog de"], "sentence2": ["dog en", "cat en", "fish en"], "gold": [(0, 1), (1, 0)]}
    task.dataset, task.data_loaded = {"de-en": {"test": split}}, True
    return task, split["sentence1"] + split["sentence2"]


@pytest.mark.filterwarnings("ignore:The task 'BUCC' is superseded")
@pytest.mark.parametrize("make", [_parallel_bitext, _bucc_v1], ids=["parallel-subsets", "bucc-v1"])
def test_bitext_mining_layouts_of_multilingual_tasks(make, keyword_variant) -> None:
    task, encoded = make()
    variant = keyword_variant(VOCAB)
    result = mteb.evaluate(variant, task, cache=None, show_progress_bar=False).task_results[0]
    # every sentence's only keyword match on the other side is its translation: f1 1.0 in every subset
    assert [s["main_score"] for s in result.scores["test"]] == pytest.approx([1.0] * len(task.hf_subsets))
    assert task_text_groups(task) == [(None, encoded)]


# ---- summarization -----------------------------------------------------------------------------------------
# A machine summary's predicted quality is its highest cosine with the document's human summaries; the score is
# the Spearman correlation of those with the human relevance, averaged over documents.
# Document 0: human "cat dog"; machine "cat dog" (cos 1), "cat" (1/sqrt2), "fish" (0), relevance 3, 1, 2:
#   ranks (3, 2, 1) against (3, 1, 2), d = (0, 1, -1), rho = 1 - 6*2/(3*(9-1)) = 0.5.
# Document 1: human "fish", "bird"; machine "fish bird" (1/sqrt2), "bird" (1), "cat" (0), relevance 4, 5, 1:
#   the same order, rho = 1.0.  Mean: 0.75; with the relevance reversed: -0.75.
# center (mean of the nine summaries, (4, 2, 3, 3)/9) keeps both orders: doc 0 cosines 1, 0.44, -0.56;
# doc 1 0.49, 1, -0.45. The source text is never encoded, so it is not in the fit corpus.
HUMAN = [["cat dog h1"], ["fish h2", "bird h3"]]
MACHINE = [["cat dog m1", "cat m2", "fish m3"], ["fish bird m4", "bird m5", "cat m6"]]
SUMMARIES = [s for row in HUMAN for s in row] + [s for row in MACHINE for s in row]  # all human, then all machine


def _summaries(relevance=((3, 1, 2), (4, 5, 1))):
    return _task("SummEvalSummarization.v2", _split(
        text=["source cat dog fish", "source fish bird"], human_summaries=HUMAN, machine_summaries=MACHINE,
        relevance=[list(map(float, r)) for r in relevance]))


def test_summarization(keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), _summaries())["main_score"] == pytest.approx(0.75)
    center = keyword_variant(VOCAB, "center")
    assert _evaluate(center, _summaries(), fit_on=SUMMARIES)["main_score"] == pytest.approx(0.75)
    reversed_relevance = _summaries(relevance=((2, 1, 3), (1, 0, 5)))
    assert _evaluate(keyword_variant(VOCAB), reversed_relevance)["main_score"] == pytest.approx(-0.75)
    task = _summaries()
    assert task_text_groups(task) == [(None, SUMMARIES)]
    _no_train_split(task)


# ---- retrieval and reranking -------------------------------------------------------------------------------
# Raw cosines: "find cat" -> "cat facts" 1, "cat dog dog notes" 1/sqrt5, the rest 0; "find dog" -> "dog facts" 1,
# "cat dog dog notes" 2/sqrt5, the rest 0. Each query's relevant document is the one with its very vector
# (cosine 1 after any transform that keeps it nonzero; after center no other vector is parallel to it): ranked
# first, nDCG@10 1.0 and MAP 1.0. With "cat dog dog notes" judged relevant to "find cat" instead, that query
# ranks it second: nDCG@10 1/log2(3), AP 1/2, so the means are (1 + 1/log2(3))/2 and 0.75.
# "find fish" has no judgement: mteb neither evaluates nor encodes it. Documents are encoded as
# "title text" (stripped), so a title's keyword counts.
QUERIES = {"q1": "find cat", "q2": "find dog", "q3": "find fish"}
DOCUMENTS = {"d1": ("cat", "facts"), "d2": ("", " dog facts"), "d3": ("cat dog", "dog notes"), "d4": ("", "bird notes")}
ENCODED_QUERIES = ["find cat", "find dog"]
ENCODED_DOCUMENTS = ["cat facts", "dog facts", "cat dog dog notes", "bird notes"]
RIGHT, SECOND = {"q1": {"d1": 1}, "q2": {"d2": 1}}, {"q1": {"d3": 1}, "q2": {"d2": 1}}


def _retrieval(name: str, qrels=RIGHT, top_ranked=None):
    split = {"corpus": datasets.Dataset.from_dict({"id": list(DOCUMENTS), "title": [t for t, _ in DOCUMENTS.values()],
                                                   "text": [x for _, x in DOCUMENTS.values()]}),
             "queries": datasets.Dataset.from_dict({"id": list(QUERIES), "text": list(QUERIES.values())}),
             "relevant_docs": qrels, "top_ranked": top_ranked}
    return _task(name, {"default": {"test": split}})


def _reranking(qrels=RIGHT):
    # each query reranks its own candidates; mteb still encodes the whole corpus ("bird notes" too)
    return _retrieval("AskUbuntuDupQuestions", qrels, {"q1": ["d1", "d3", "d2"], "q2": ["d2", "d3", "d1"],
                                                       "q3": ["d4"]})


@pytest.mark.parametrize(("make", "metric", "second"), [
    (lambda qrels=RIGHT: _retrieval("SciFact", qrels), "ndcg_at_10", (1 + 1 / np.log2(3)) / 2),
    (_reranking, "map_at_1000", 0.75)], ids=["retrieval", "reranking"])
def test_retrieval_and_reranking(make, metric, second, keyword_variant) -> None:
    task = make()
    assert task.metadata.main_score == metric
    assert _evaluate(keyword_variant(VOCAB), task)["main_score"] == pytest.approx(1.0)
    center = keyword_variant(VOCAB, "center")
    assert _evaluate(center, make(), fit_on=ENCODED_QUERIES + ENCODED_DOCUMENTS)["main_score"] == pytest.approx(1.0)
    # mteb rounds retrieval scores to 5 decimals
    assert _evaluate(keyword_variant(VOCAB), make(SECOND))["main_score"] == pytest.approx(second, abs=1e-5)
    assert task_text_groups(make()) == [("query", ENCODED_QUERIES), ("document", ENCODED_DOCUMENTS)]
    assert FitCorpus.from_task(make()).groups == (("query", tuple(ENCODED_QUERIES)),
                                                  ("document", tuple(ENCODED_DOCUMENTS)))
    _no_train_split(make())


def test_a_retrieval_fit_record_names_the_queries_and_documents_it_was_fitted_on(keyword_variant) -> None:
    variant, task = keyword_variant(VOCAB, "center"), _retrieval("SciFact")
    variant.corpus.add_tasks([task])
    mteb.evaluate(variant, task, cache=None, show_progress_bar=False)
    record = variant.fit_records["SciFact"]
    expected = ENCODED_QUERIES + ENCODED_DOCUMENTS
    assert (record["n_texts"], record["texts_sha256"]) == (6, texts_digest(expected))
    assert (record["fit_corpus"], record["task"], record["splits"]) == ("task", "SciFact", ["test"])
    # it subtracts the mean of those six vectors (cat 3, dog 4, fish 0, bird 1 over 6 texts)
    assert variant.vectors(["cat"], "SciFact")[0] == pytest.approx(np.array([1, 0, 0, 0]) - np.array([3, 4, 0, 1]) / 6)


# ---- classification and multilabel classification ----------------------------------------------------------
# Five training texts per label set, all with the same vector ("cat" -> {0}, "dog" -> {1}, "cat dog" -> {0, 1});
# each test text has the vector of one set. mteb's multilabel k-NN (k=5) finds exactly those five at distance 0
# (the next is at distance 1), so every label set is predicted exactly: accuracy (exact match) 1.0; k-NN is
# Euclidean, which center does not change. A vocabulary that knows none of the keywords gives every text the
# (zero) vector, hence the same prediction for three different label sets: accuracy at most 1/3.
LABEL_SETS = {"cat": [0], "dog": [1], "cat dog": [0, 1]}
TRAIN = [(f"{words} n{i}", labels) for words, labels in LABEL_SETS.items() for i in range(5)]
TEST = [(f"{words} test", labels) for words, labels in LABEL_SETS.items()]


def _multilabel():
    data = datasets.DatasetDict({split: datasets.Dataset.from_dict({"text": [t for t, _ in rows],
                                                                     "label": [labels for _, labels in rows]})
                                 for split, rows in (("train", TRAIN), ("test", TEST))})
    # samples_per_label above the train size: every experiment trains on every row
    return _task("SciRepEvalFoSClassification", data, samples_per_label=100, n_experiments=2)


def test_multilabel_classification(keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), _multilabel())["accuracy"] == pytest.approx(1.0)
    center = keyword_variant(VOCAB, "center")
    assert _evaluate(center, _multilabel(), fit_on=[t for t, _ in TEST])["accuracy"] == pytest.approx(1.0)
    assert _evaluate(keyword_variant(["fish"]), _multilabel())["accuracy"] <= 1 / 3
    task = _multilabel()
    assert task_text_groups(task) == [(None, [t for t, _ in TEST])]  # the evaluated split only
    train = FitCorpus.from_task(task, "train")
    assert (train.texts, train.record["splits"]) == (tuple(t for t, _ in TRAIN), ["train"])


# Single-label classification (its real mirror is tested with MiniLM elsewhere): the label names in
# ``label_text`` are never encoded, so they are in neither corpus. Logistic regression on two classes whose
# members share one vector each (e_cat, e_dog) predicts every test text right: accuracy 1.0.
def _classification():
    rows = {"train": [("cat a", 0), ("cat b", 0), ("dog a", 1), ("dog b", 1)],
            "test": [("cat c", 0), ("dog c", 1)]}
    return _task("Banking77Classification.v2", datasets.DatasetDict({split: datasets.Dataset.from_dict(
        {"text": [t for t, _ in r], "label": [y for _, y in r], "label_text": [["feline", "canine"][y] for _, y in r]})
        for split, r in rows.items()}), n_experiments=2)


def test_classification(keyword_variant) -> None:
    assert _evaluate(keyword_variant(VOCAB), _classification())["accuracy"] == pytest.approx(1.0)
    center = keyword_variant(VOCAB, "center")
    assert _evaluate(center, _classification(), fit_on=["cat c", "dog c"])["accuracy"] == pytest.approx(1.0)
    task = _classification()
    assert task_text_groups(task) == [(None, ["cat c", "dog c"])]
    assert FitCorpus.from_task(task, "train").texts == ("cat a", "cat b", "dog a", "dog b")
