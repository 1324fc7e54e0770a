"""The task kinds wired end to end on tiny data files and a hand-checkable keyword encoder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import iso_bench  # noqa: F401 - registers the tasks with mteb
from iso_bench.data.sources import DataNotFoundError
from iso_bench.kinds.cards import card_of
from iso_bench.mteb_plugin import task_class


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def wic_folder(root: Path) -> None:
    """Train: same word -> T, different word -> F, so the threshold lies between cos 0 and cos 1."""
    rows = {
        "train": [("bank", "N", "1-1", "a bank here", "a bank there", "T"),
                  ("bank", "N", "1-1", "a bank here", "a shore there", "F"),
                  ("play", "V", "0-0", "play music", "play games", "T"),
                  ("play", "V", "0-0", "play music", "act games", "F")],
        "dev": [("bank", "N", "1-1", "the bank", "the bank", "T"), ("bank", "N", "1-1", "the bank", "the shore", "T")],
        "test": [("play", "V", "0-0", "play it", "play it", "F"), ("play", "V", "0-0", "play it", "act it", "F"),
                 ("bank", "N", "1-1", "a bank", "a shore", "F")],
    }
    for split, items in rows.items():
        folder = root / "wic" / "WiC_dataset" / split
        write(folder / f"{split}.data.txt", "".join("\t".join(r[:5]) + "\n" for r in items))
        write(folder / f"{split}.gold.txt", "".join(r[5] + "\n" for r in items))


def test_wic_threshold_on_train_accuracy_on_dev_and_test(tmp_path: Path, keyword_variant) -> None:
    wic_folder(tmp_path)
    task = task_class(card_of("WiC"))(data_dir=tmp_path)
    task.load_data()
    model = keyword_variant(["bank", "shore", "play", "act"])
    scores = task.evaluate(model, "test")["default"]
    # raw keyword vectors: cos = 1 for the same word, 0 otherwise; train is separable, so the threshold
    # is the smallest that separates it (0.5); dev: 1 of 2 right; test: 2 of 3 right
    assert scores["threshold"] == pytest.approx(0.5)
    assert scores["accuracy_train"] == 1.0
    assert scores["accuracy_dev"] == pytest.approx(0.5)
    assert scores["accuracy"] == pytest.approx(2 / 3) and scores["main_score"] == scores["accuracy"]
    assert sorted(task.fit_texts()) == sorted(["the bank", "the bank", "the bank", "the shore", "play it", "play it",
                                               "play it", "act it", "a bank", "a shore"])


def test_word_tasks_refuse_plain_mteb_encoders(tmp_path: Path) -> None:
    wic_folder(tmp_path)
    task = task_class(card_of("WiC"))(data_dir=tmp_path)
    with pytest.raises(TypeError, match="only iso-bench variants"):
        task.evaluate(object(), "test")


def test_missing_data_names_every_place(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ISO_BENCH_DOWNLOAD_DIR", str(tmp_path / "downloads"))
    task = task_class(card_of("WiC"))(data_dir=tmp_path)
    source = type(task.card.source)(path="wic/WiC_dataset", url=(tmp_path / "nowhere.zip").as_uri(), version="1.0")
    task.card = dataclasses.replace(task.card, source=source)
    with pytest.raises(DataNotFoundError) as err:
        task.load_data()
    message = str(err.value)
    assert str(tmp_path / "wic" / "WiC_dataset") in message and "downloads" in message and "nowhere.zip" in message


def test_download_from_the_public_source(tmp_path: Path, monkeypatch) -> None:
    """The real loading path: the archive is fetched from its URL (here a file:// URL) and unpacked."""
    import zipfile

    wic_folder(tmp_path / "src")
    archive = tmp_path / "WiC_dataset.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in (tmp_path / "src" / "wic" / "WiC_dataset").rglob("*.txt"):
            z.write(f, f.relative_to(tmp_path / "src" / "wic" / "WiC_dataset"))
    monkeypatch.setenv("ISO_BENCH_DOWNLOAD_DIR", str(tmp_path / "downloads"))
    task = task_class(card_of("WiC"))(data_dir=None)
    source = type(task.card.source)(path="wic/WiC_dataset", archive_dir="wic/WiC_dataset",
                                    url=archive.as_uri(), version="1.0")
    task.card = dataclasses.replace(task.card, source=source)
    monkeypatch.delenv("ISO_BENCH_DATA_DIR", raising=False)
    task.load_data()
    assert len(task.dataset["test"]) == 3 and task.folder == (tmp_path / "downloads" / "wic" / "WiC_dataset")


def test_paper_sts_wmean_and_all(tmp_path: Path, keyword_variant) -> None:
    sts = tmp_path / "senteval" / "downstream" / "STS" / "STS13-en-test"
    pairs = {"FNWN": [("a b", "a b", 5), ("a b", "a c", 3), ("a b", "c d", 0)],
             "headlines": [("a b", "a b", 1), ("a b", "c d", 4)], "OnWN": [("c d", "c d", 2), ("c d", "a b", 1)]}
    for name, items in pairs.items():
        write(sts / f"STS.input.{name}.txt", "".join(f"{x}\t{y}\n" for x, y, _ in items))
        write(sts / f"STS.gs.{name}.txt", "".join(f"{g}\n" for *_, g in items))
    task = task_class(card_of("STS13-SentEval"))(data_dir=tmp_path)
    task.load_data()
    scores = task.evaluate(keyword_variant(["a", "b", "c", "d"]), "test")["default"]
    # per subset, cosines rank the pairs: FNWN 1 > 0.5 > 0 matches the gold order (rho 1); headlines
    # and OnWN have two pairs each: (cos 1, 0) against gold (1, 4) -> rho -1, (2, 1) -> rho 1
    assert scores["spearman_FNWN"] == pytest.approx(1.0)
    assert scores["spearman_headlines"] == pytest.approx(-1.0) and scores["spearman_OnWN"] == pytest.approx(1.0)
    assert scores["wmean_spearman"] == pytest.approx((3 * 1 - 2 + 2) / 7)
    assert scores["main_score"] == scores["wmean_spearman"]
    all_cos = [1, 0.5, 0, 1, 0, 1, 0]
    all_gold = [5, 3, 0, 1, 4, 2, 1]
    from scipy.stats import spearmanr

    assert scores["all_spearman"] == pytest.approx(spearmanr(all_gold, all_cos)[0])


def test_isotropy_task_on_a_keyword_encoder(keyword_variant, monkeypatch) -> None:
    task = task_class(card_of("Isotropy-STSB"))()
    texts = ["a b", "c d", "a c", "b d"]
    task.dataset, task.data_loaded = {"test": texts}, True
    model = keyword_variant(["a", "b", "c", "d"], "center")
    model.corpus.add_tasks([task])  # the fit corpus "task" is this task's texts (as the runner hands them over)
    scores = task.evaluate(model, "test")["default"]
    X = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]], float)
    from iso_bench.numerics.isotropy import average_cosine, iw

    Xc = X - X.mean(0)
    assert scores["sentence_iw"] == pytest.approx(iw(Xc)) and scores["main_score"] == scores["sentence_iw"]
    assert scores["sentence_average_cosine"] == pytest.approx(average_cosine(Xc))
    assert scores["n_sentences"] == 4 and scores["n_tokens"] == 8


@pytest.mark.parametrize("method", ["raw", "center", "zscore", "whiten", "whiten-precision=int8"])
def test_isoscore_stars_c0_is_the_models_tokens_under_the_variants_sentence_map(keyword_variant, method) -> None:
    from iso_bench.numerics.isotropy import isoscore_star

    task = task_class(card_of("Isotropy-STSB"))()
    texts = ["a b c", "c d", "a c d", "b d", "a d"]
    task.dataset, task.data_loaded = {"test": texts}, True
    model = keyword_variant(["a", "b", "c", "d"], method)
    model.corpus.add_tasks([task])
    scores = task.evaluate(model, "test")["default"]
    tokens = np.concatenate([t for t in model.store.tokens(texts) if len(t)]).astype(np.float64)
    mapped = model.fitted_method("Isotropy-STSB").transform(tokens)  # the sentence fit's (int8: its sentence ranges)
    sentences = np.asarray(model.vectors(texts, "Isotropy-STSB"), np.float64)
    expected = isoscore_star(sentences, np.cov(mapped, rowvar=False), 0.75)
    assert scores["sentence_isoscore_star"] == pytest.approx(expected, abs=1e-6)  # mteb keeps 6 decimals
    assert scores["isoscore_star_c0_tokens_mapped"] == 1
    if method in ("raw", "center"):  # a shift leaves the covariance of the model's tokens as it is
        assert np.cov(mapped, rowvar=False) == pytest.approx(np.cov(tokens, rowvar=False))
