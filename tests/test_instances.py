"""Per-instance units kept beside each result of an iso-bench variant, on both paths (``mteb.evaluate`` here).

The real all-MiniLM-L6-v2 (``+raw``) runs through ``mteb.evaluate`` with a ``ResultCache`` on small slices of
the mirrored data, put into mteb's task objects in memory (so no datasets cache can serve the full data): STS12
(60 pairs), a pair classification task made of STS12 pairs (gold >= 3 is a duplicate), five Banking77 intents, a
SciFact slice (8 queries, their relevant abstracts and 60 others); and the papers' STS13 on a copy of its first
20 lines per subset. For each, the units file must be the one the record names (SHA-256), the main score
recomputed from the stored units by an independent formula (scipy, sklearn, numpy) must equal mteb's to 1e-9,
and the recorded interval must be what ``iso_bench.numerics.stats`` gives on those units with the recorded resample
count and seed: exactly in memory, and as mteb rounds it (6 decimals) in the file.

A keyword encoder (tracked as a variant here) covers the cases without a model: ``max_accuracy``, a main score
with no interval, a task type without units, a recomputation that disagrees, WiC and WSD units.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")
mteb = pytest.importorskip("mteb")

import iso_bench  # noqa: E402, F401 - registers the variants and the result hook
from iso_bench.numerics.stats import confidence_interval  # noqa: E402
from iso_bench.results import instances  # noqa: E402
from iso_bench.results.instances import InstancesError, load_units  # noqa: E402
from tests.conftest import MINILM, SHARED_DATA, _missing, loaded_task  # noqa: E402

HUB = SHARED_DATA / "hub" / "mteb"
STS12 = HUB / "sts12-sts" / "test.jsonl"


def _rows(path: Path, n: int, skip: int = 0) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()[skip:skip + n]
    return [json.loads(line) for line in lines]


_task = loaded_task


def _run(model, task, folder: Path):
    """mteb's in-memory result (unrounded) and the entry of its result file, for the one split and subset."""
    (result,) = mteb.evaluate(model, task, cache=mteb.ResultCache(folder), show_progress_bar=False).task_results
    (path,) = folder.rglob(f"{task.metadata.name}.json")
    (entry,) = result.scores["test"]
    (on_disk,) = json.loads(path.read_text())["scores"]["test"]
    return path, entry, on_disk


def _check(path: Path, entry: dict, on_disk: dict, recompute) -> np.ndarray:
    """The file is the recorded one, its units give mteb's main score and the recorded interval; the units."""
    info, interval = entry["iso_bench"]["instances"], entry["iso_bench"]["interval"]
    assert on_disk["iso_bench"]["instances"] == info and info["file"] == path.name.replace(".json", ".instances.npz")
    data = (path.parent / info["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == info["sha256"]
    units, statistic, strata = load_units(path, on_disk["iso_bench"])
    assert units.dtype == np.float64 and units.shape[0] == info["n_units"] and info["key"] == "test/default"
    assert abs(recompute(units, strata) - entry["main_score"]) <= 1e-9
    ci = confidence_interval(units, statistic, n_resamples=interval["n_resamples"], seed=interval["seed"],
                             level=interval["level"], strata=strata)
    assert (interval["n_resamples"], interval["seed"], interval["level"]) == (1000, 0, 0.95)
    assert (ci.low, ci.high, ci.estimate, ci.n_undefined) == tuple(interval[k] for k in (
        "low", "high", "estimate", "n_undefined"))
    assert (round(ci.low, 6), round(ci.high, 6)) == (on_disk["iso_bench"]["interval"]["low"],
                                                     on_disk["iso_bench"]["interval"]["high"])
    assert ci.low <= entry["main_score"] + 1e-5 and entry["main_score"] - 1e-5 <= ci.high
    return units


@pytest.fixture(scope="module")
def minilm(tmp_path_factory, minilm_backbone):
    """``<MiniLM>+raw`` as ``mteb.get_model`` loads it, with a vector cache of its own."""
    for needed in (STS12, HUB / "banking77", HUB / "scifact", SHARED_DATA / "senteval"):
        if not needed.exists():
            _missing(f"the data mirror {needed}")
    return mteb.get_model(f"{MINILM}+raw", cache_dir=str(tmp_path_factory.mktemp("vectors")))


def _spearman(units, strata) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(units[:, 1], units[:, 0])[0])


def test_sts_keeps_mtebs_cosines_and_normalised_gold(minilm, tmp_path) -> None:
    rows = _rows(STS12, 60)
    task = _task("STS12", datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}))
    path, entry, on_disk = _run(minilm, task, tmp_path)
    units = _check(path, entry, on_disk, _spearman)
    assert units.shape == (60, 2) and on_disk["iso_bench"]["instances"]["statistic"] == "spearman"
    assert np.array_equal(units[:, 1], [r["score"] / 5 for r in rows])  # mteb's (score - 0) / (5 - 0)
    vectors = [minilm.vectors([r[k] for r in rows], "STS12") for k in ("sentence1", "sentence2")]
    cosines = np.einsum("ij,ij->i", *[v / np.linalg.norm(v, axis=1, keepdims=True) for v in vectors])
    assert np.allclose(units[:, 0], cosines, atol=1e-6)
    with np.load(path.parent / on_disk["iso_bench"]["instances"]["file"], allow_pickle=False) as stored:
        assert float(stored["test/default/main_score"]) == pytest.approx(entry["main_score"], abs=1e-9)


def test_the_reader_refuses_a_changed_or_missing_file(minilm, tmp_path) -> None:
    task = _task("STS12", datasets.DatasetDict({"test": datasets.Dataset.from_list(_rows(STS12, 30))}))
    path, _, on_disk = _run(minilm, task, tmp_path)
    npz = path.parent / on_disk["iso_bench"]["instances"]["file"]
    npz.write_bytes(npz.read_bytes() + b"\0")
    with pytest.raises(InstancesError, match=re.escape(str(npz)) + ".*SHA-256"):
        load_units(path, on_disk["iso_bench"])
    npz.unlink()
    with pytest.raises(InstancesError, match="missing"):
        load_units(path, on_disk["iso_bench"])


def test_pair_classification_keeps_five_signed_scores_and_the_label(minilm, tmp_path) -> None:
    from sklearn.metrics import average_precision_score

    rows = _rows(STS12, 80, skip=60)
    labels = [int(r["score"] >= 3) for r in rows]
    data = {"sentence1": [r["sentence1"] for r in rows], "sentence2": [r["sentence2"] for r in rows]}
    task = _task("SprintDuplicateQuestions", datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {**data, "labels": labels})}))
    path, entry, on_disk = _run(minilm, task, tmp_path)

    def best_ap(units, strata) -> float:
        return max(average_precision_score(units[:, -1], units[:, j]) for j in range(units.shape[1] - 1))

    units = _check(path, entry, on_disk, best_ap)
    assert units.shape == (80, 6) and np.array_equal(units[:, -1], labels)
    # higher = more similar in every column: cosine (1) rises, Euclidean distance (3, negated) too
    assert np.corrcoef(units[:, 1], units[:, 3])[0, 1] > 0.9 and (units[:, 3] <= 0).all()


def test_classification_keeps_each_examples_mean_correctness(minilm, tmp_path) -> None:
    import pyarrow.parquet as pq

    frames = {split: pq.read_table(HUB / "banking77" / "data" / f"{split}.parquet").to_pylist()
              for split in ("train", "test")}
    keep = sorted({r["label"] for r in frames["test"]})[:5]
    picked = {split: [r for label in keep for r in [x for x in rows if x["label"] == label][:n]]
              for (split, rows), n in zip(frames.items(), (20, 10), strict=True)}
    task = _task("Banking77Classification.v2", datasets.DatasetDict(
        {split: datasets.Dataset.from_list(rows) for split, rows in picked.items()}))
    path, entry, on_disk = _run(minilm, task, tmp_path)
    units = _check(path, entry, on_disk, lambda u, s: float(np.mean(u)))
    assert units.shape == (50, 1) and np.allclose(units * 10, np.round(units * 10))  # 10 experiments
    per_experiment = [e["accuracy"] for e in entry["scores_per_experiment"]]
    assert float(np.mean(units)) == pytest.approx(np.mean(per_experiment), abs=1e-12)


def test_retrieval_keeps_each_querys_ndcg(minilm, tmp_path) -> None:
    import pyarrow.parquet as pq

    read = {name: pq.read_table(HUB / "scifact" / "data" / f"{name}.parquet").to_pylist()
            for name in ("corpus", "queries", "qrels_test")}
    qrels: dict[str, dict[str, int]] = {}
    for row in read["qrels_test"]:
        if len(qrels) < 8 or str(row["query-id"]) in qrels:
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row["score"])
    relevant = {d for docs in qrels.values() for d in docs}
    corpus = [r for r in read["corpus"] if str(r["_id"]) in relevant] + [
        r for r in read["corpus"] if str(r["_id"]) not in relevant][:60]
    queries = [r for r in read["queries"] if str(r["_id"]) in qrels]
    split = {"corpus": datasets.Dataset.from_dict({"id": [str(r["_id"]) for r in corpus],
                                                   "title": [r["title"] for r in corpus],
                                                   "text": [r["text"] for r in corpus]}),
             "queries": datasets.Dataset.from_dict({"id": [str(r["_id"]) for r in queries],
                                                    "text": [r["text"] for r in queries]}),
             "relevant_docs": qrels, "top_ranked": None}
    task = _task("SciFact", {"default": {"test": split}})
    path, entry, on_disk = _run(minilm, task, tmp_path)
    units = _check(path, entry, on_disk, lambda u, s: round(float(np.mean(u)), 5))
    assert units.shape == (8, 1) and ((0 <= units) & (units <= 1)).all()
    assert on_disk["iso_bench"]["instances"]["decimals"] == 5 and entry["main_score"] == entry["ndcg_at_10"]


def _paper_sts_folder(root: Path, n: int = 20) -> None:
    source = SHARED_DATA / "senteval" / "downstream" / "STS" / "STS13-en-test"
    target = root / "senteval" / "downstream" / "STS" / "STS13-en-test"
    target.mkdir(parents=True)
    for name in ("FNWN", "headlines", "OnWN"):
        for kind in ("input", "gs"):
            lines = (source / f"STS.{kind}.{name}.txt").read_text(encoding="utf-8").splitlines(keepends=True)
            (target / f"STS.{kind}.{name}.txt").write_text("".join(lines[:n]), encoding="utf-8")


def test_paper_sts_keeps_pairs_stratified_by_subset(minilm, tmp_path) -> None:
    from scipy.stats import spearmanr

    from iso_bench.kinds.cards import card_of
    from iso_bench.mteb_plugin import task_class

    _paper_sts_folder(tmp_path / "data")
    task = task_class(card_of("STS13-SentEval"))(data_dir=tmp_path / "data")
    task.load_data()

    def wmean(units, strata) -> float:
        parts = [units[strata == s] for s in np.unique(strata)]
        return sum(len(p) * spearmanr(p[:, 1], p[:, 0])[0] for p in parts) / len(units)

    path, entry, on_disk = _run(minilm, task, tmp_path / "results")
    units = _check(path, entry, on_disk, wmean)
    names = [s.name for s in task.dataset.subsets]
    with np.load(path.parent / on_disk["iso_bench"]["instances"]["file"], allow_pickle=False) as stored:
        assert stored["test/default/strata_names"].tolist() == names == ["FNWN", "headlines", "OnWN"]
        assert np.bincount(stored["test/default/strata"]).tolist() == [len(s.gold) for s in task.dataset.subsets]
    assert units.shape == (sum(len(s.gold) for s in task.dataset.subsets), 2)
    assert on_disk["iso_bench"]["instances"]["statistic"] == "wmean"


# ---- a keyword encoder tracked as a variant: the cases that need no model ---------------------------------
# A text's raw vector counts the keywords in it, so cosines tie a lot (0, 1/2, 1): mteb's threshold search must
# never split ties, and the units must see the same ties.
VOCAB = ["cat", "dog", "fish", "bird"]
WORDS = ["cat", "dog", "fish", "bird", "cat dog", "fish bird"]


@pytest.fixture
def tracked(keyword_variant):
    """``tracked(vocab)``: a keyword variant with a ``ModelMeta``, so that its results carry iso-bench's records."""
    from iso_bench.mteb_plugin import variant_meta

    def make(vocab=VOCAB):
        encoder = keyword_variant(vocab)
        encoder.mteb_model_meta = variant_meta("test-org/keywords", "raw")
        return encoder

    return make


def _pairs_task(main: str):
    rng = np.random.default_rng(3)
    first, second = rng.choice(WORDS, 40), rng.choice(WORDS, 40)
    labels = [int(a == b or rng.random() < 0.3) for a, b in zip(first, second, strict=True)]
    task = _task("SprintDuplicateQuestions", datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"sentence1": [f"{w} one" for w in first], "sentence2": [f"{w} two" for w in second], "labels": labels})}))
    task.metadata = task.metadata.model_copy(update={"main_score": main})
    return task


def test_max_accuracy_goes_through_the_named_function(tracked, tmp_path) -> None:
    task = _pairs_task("max_accuracy")

    def best_accuracy(units, strata) -> float:  # mteb's own search, column by column
        return max(task._compute_metrics_values(units[:, j].tolist(), units[:, -1].astype(np.int64), True)["accuracy"]
                   for j in range(units.shape[1] - 1))

    path, entry, on_disk = _run(tracked(), task, tmp_path)
    units = _check(path, entry, on_disk, best_accuracy)
    assert on_disk["iso_bench"]["instances"]["statistic"] == "max_accuracy" and units.shape == (40, 6)
    assert len(np.unique(units[:, 1])) <= 4 and 0.5 < entry["main_score"] < 1  # ties, and an imperfect split


def test_other_models_keep_nothing_and_get_the_same_scores(tracked, tmp_path) -> None:
    from iso_bench.results.instances import _ENCODERS

    _, kept, _ = _run(tracked(), _pairs_task("max_ap"), tmp_path / "tracked")
    plain = tracked()
    del _ENCODERS[id(plain.mteb_model_meta)]  # an encoder iso-bench does not know: mteb's own code writes it
    path, entry, on_disk = _run(plain, _pairs_task("max_ap"), tmp_path / "plain")
    assert "iso_bench" not in entry and "iso_bench" not in on_disk and not list(path.parent.glob("*.npz"))
    assert {k: v for k, v in kept.items() if k != "iso_bench"} == entry  # capturing changed no number


def test_a_main_score_without_units_and_a_type_without_units_say_why(tracked, tmp_path) -> None:
    rows = {"train": [(f"{w} {i}", y) for y, w in enumerate(("cat", "dog")) for i in range(6)],
            "test": [("cat x", 0), ("dog x", 1), ("cat y", 0), ("dog y", 1)]}
    task = _task("Banking77Classification.v2", datasets.DatasetDict({split: datasets.Dataset.from_dict(
        {"text": [t for t, _ in r], "label": [y for _, y in r]}) for split, r in rows.items()}), n_experiments=2)
    task.metadata = task.metadata.model_copy(update={"main_score": "f1"})
    path, _, on_disk = _run(tracked(), task, tmp_path / "f1")
    assert on_disk["iso_bench"]["interval"] is None and on_disk["iso_bench"]["instances"]["file"] is None
    assert "main score f1" in on_disk["iso_bench"]["instances"]["reason"]
    assert not list(path.parent.glob("*.npz"))
    clusters = _task("TwentyNewsgroupsClustering.v2", datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"sentences": ["cat a", "cat b", "dog a", "dog b"], "labels": [0, 0, 1, 1]})}),
        max_fraction_of_documents_to_embed=None, max_documents_per_cluster=64, n_clusters=2)
    _, _, on_disk = _run(tracked(), clusters, tmp_path / "clusters")
    assert on_disk["iso_bench"]["instances"] == {"file": None,
                                                 "reason": "no per-instance units for task type Clustering"}


def test_units_that_do_not_give_the_main_score_are_not_kept(tracked, tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(instances.Units, "main_value", lambda self: 0.5)
    with caplog.at_level(logging.WARNING, logger="iso_bench.results.instances"):
        path, entry, on_disk = _run(tracked(), _pairs_task("max_ap"), tmp_path)
    reason = on_disk["iso_bench"]["instances"]["reason"]
    assert "differs from the result's" in reason and repr(entry["main_score"]) in reason and "differs" in caplog.text
    assert on_disk["iso_bench"]["interval"] is None and not list(path.parent.glob("*.npz"))


def test_an_mrr_main_score_keeps_each_querys_reciprocal_rank(tracked, tmp_path) -> None:
    # query i looks for WORDS[i]; its judged document is the one with both its keywords ("cat dog" for "cat"):
    # cosine 1/sqrt2, behind the one-word document of the same keyword (cosine 1): reciprocal rank 1/2
    docs = {f"d{i}": w for i, w in enumerate(WORDS)}
    qrels = {"q0": {"d4": 1}, "q1": {"d1": 1}, "q2": {"d5": 1}, "q3": {"d3": 1}}
    split = {"corpus": datasets.Dataset.from_dict({"id": list(docs), "title": [""] * len(docs),
                                                   "text": list(docs.values())}),
             "queries": datasets.Dataset.from_dict({"id": list(qrels), "text": WORDS[:4]}),
             "relevant_docs": qrels, "top_ranked": None}
    task = _task("SciFact", {"default": {"test": split}})
    task.metadata = task.metadata.model_copy(update={"main_score": "mrr_at_10"})
    path, entry, on_disk = _run(tracked(), task, tmp_path)
    units = _check(path, entry, on_disk, lambda u, s: float(np.mean(u)))
    assert units[:, 0].tolist() == [0.5, 1.0, 0.5, 1.0] and "decimals" not in on_disk["iso_bench"]["instances"]


def _sts17(subsets: list[str]):
    rng = np.random.default_rng(5)
    data = {s: datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"sentence1": [f"{w} a" for w in rng.choice(WORDS, 30)], "sentence2": [f"{w} b" for w in rng.choice(WORDS, 30)],
         "score": rng.integers(0, 6, 30).astype(float).tolist()})}) for s in ("en-en", "es-es")}
    return _task("STS17", data, hf_subsets=subsets)


def test_a_result_completed_later_carries_the_earlier_subsets_units(tracked, tmp_path) -> None:
    model = tracked()
    _run_all = lambda subsets: mteb.evaluate(model, _sts17(subsets), cache=mteb.ResultCache(tmp_path),  # noqa: E731
                                             show_progress_bar=False).task_results[0]
    _run_all(["en-en"])
    (path,) = tmp_path.rglob("STS17.json")
    first = json.loads(path.read_text())["scores"]["test"][0]["iso_bench"]
    result = _run_all(["en-en", "es-es"])  # en-en comes from the file, es-es is evaluated
    on_disk = {e["hf_subset"]: e["iso_bench"] for e in json.loads(path.read_text())["scores"]["test"]}
    assert set(on_disk) == {"en-en", "es-es"}
    assert on_disk["en-en"]["instances"]["sha256"] != first["instances"]["sha256"]
    assert on_disk["en-en"]["instances"]["sha256"] == on_disk["es-es"]["instances"]["sha256"]
    assert on_disk["en-en"]["interval"] == first["interval"]  # kept as the first run recorded it
    assert all(record["interval"]["low"] is not None for record in on_disk.values())
    scores = {e["hf_subset"]: e["main_score"] for e in result.scores["test"]}
    for subset, record in on_disk.items():
        units, statistic, _ = load_units(path, record)
        assert statistic == "spearman" and units.shape == (30, 2)
        assert _spearman(units, None) == pytest.approx(scores[subset], abs=1e-6)  # en-en: as rounded in the file


def test_wic_units_are_each_test_pairs_correctness(tmp_path, keyword_variant) -> None:
    from iso_bench.kinds.cards import card_of
    from iso_bench.mteb_plugin import task_class
    from tests.test_kinds import wic_folder

    wic_folder(tmp_path)
    task = task_class(card_of("WiC"))(data_dir=tmp_path)
    task.load_data()
    scores = task.score(keyword_variant(["bank", "shore", "play", "act"]), "test", {})
    # threshold 0.5 from train; test cosines 1, 0, 0 against labels F, F, F: wrong, right, right
    assert task.last_units.statistic == "mean" and task.last_units.units[:, 0].tolist() == [0.0, 1.0, 1.0]
    assert task.last_units.main_value() == scores["accuracy"]


def test_wsd_units_give_the_scorers_f1_with_and_without_unanswered_instances() -> None:
    from iso_bench.kinds.wsd import _units
    from iso_bench.kinds.wsd.scoring import instance_outcomes, score

    gold = {"a": ["k1"], "b": ["k2", "k3"], "c": ["k4"], "d": ["k5"], "e": ["k6"]}
    answered = {"a": "k1", "b": "k3", "c": "k9", "d": "k5", "e": "k0"}
    partly = {**answered, "e": None, "x": "k1"}  # e unanswered; x is not a gold instance (ignored, as the scorer)
    for predictions, statistic in ((answered, "mean"), (partly, "wsd_f1")):
        units = _units(gold, predictions, "f1")
        assert units.statistic == statistic
        assert units.main_value() == pytest.approx(score(gold, predictions).f1 / 100, abs=1e-12)
    assert instance_outcomes(gold, partly).tolist() == [[1, 1], [1, 1], [0, 1], [1, 1], [0, 0]]
    assert score(gold, partly).f1 / 100 == pytest.approx(2 * 3 / (5 + 4))  # F1 = 2C / (N + A)
    assert isinstance(_units(gold, answered, "precision"), str)


def test_listed_columns_give_the_rows_values_at_once_and_nothing_else_changes() -> None:
    from datasets import Dataset, Sequence, Value

    ds = Dataset.from_dict({"score": [0.5, 4.0, 2.25, 1.0], "sentence1": ["a", "b", "c", "d"],
                            "ids": [[1], [2, 3], [], [4]]})
    ds = ds.cast_column("ids", Sequence(Value("int64")))
    picked = ds.select([3, 1, 2])  # an indices mapping: the rows in the selected order
    listed = instances.listed_columns(picked)
    assert listed["score"] == [1.0, 4.0, 2.25] == list(picked["score"])
    assert listed["sentence1"] == ["d", "b", "c"] and isinstance(listed["sentence1"], list)
    assert list(listed["ids"]) == [[4], [2, 3], []]  # not a plain value: datasets' own Column
    assert listed[0] == picked[0] and len(listed) == 3
    assert listed.with_format("arrow")["score"].to_pylist() == [1.0, 4.0, 2.25]  # other formats: datasets' own
    assert type(instances.listed_columns(picked.with_format("numpy"))) is Dataset
    assert instances.listed_columns({"score": [1]}) == {"score": [1]}


def test_a_classification_tasks_splits_are_each_listed_and_mtebs_undersampling_picks_the_same_rows() -> None:
    """A DatasetDict (a classification task's training and evaluated splits) comes back with each split listed:
    labels read at once, the same values, and mteb's undersampling of the training split selects the same rows
    from it as from the plain split."""
    import mteb
    from datasets import Dataset, DatasetDict

    train = Dataset.from_dict({"text": [f"t{i}" for i in range(40)], "label": [i % 3 for i in range(40)]})
    test = Dataset.from_dict({"text": ["x", "y"], "label": [2, 0]})
    listed = instances.listed_columns(DatasetDict({"train": train, "test": test}))
    assert type(listed) is DatasetDict and list(listed) == ["train", "test"]
    assert listed["test"]["label"] == [2, 0] and isinstance(listed["train"]["label"], list)
    assert listed["train"]["label"] == list(train["label"]) and len(listed["train"]) == 40
    task = mteb.get_task("Banking77Classification")
    task.samples_per_label = 4
    for experiment in range(3):
        _, _, plain = task._undersample_data(train, experiment)
        _, _, fast = task._undersample_data(listed["train"], experiment)
        assert fast == plain and len(plain) == 12  # 4 of each of the 3 labels
