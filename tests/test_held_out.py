"""The deployment setting: a method fitted on texts other than the evaluated ones (a task's training split, a
file) fits on held-out texts only: texts equal to an evaluated text are removed first, counted and recorded."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from iso_bench.data.fit_corpus import FitCorpusError
from iso_bench.data.provider import CorpusProvider, normalised
from tests.conftest import SHARED_DATA


class _Task:
    """A loaded task whose evaluated texts are ``texts`` (iso-bench's ``fit_texts`` protocol)."""

    data_loaded = True

    def __init__(self, name: str, texts: list[str]) -> None:
        self.metadata = types.SimpleNamespace(name=name, type="STS")
        self._texts = texts

    def fit_texts(self) -> list[str]:
        return list(self._texts)


class _TrainedTask(_Task):
    """A task with a training split (iso-bench's ``train_texts`` protocol)."""

    def __init__(self, name: str, texts: list[str], train: list[str]) -> None:
        super().__init__(name, texts)
        self._train = train

    def train_texts(self) -> list[str]:
        return list(self._train)


def test_the_held_out_setting_fits_on_the_training_split_else_on_semcor_held_out_either_way() -> None:
    """``held-out``: a task its card says has a training split fits on it; one without fits on the named corpus
    (SemCor: WSD-ALL's training split). Both lose the texts the evaluated task holds (planted overlaps), and the
    record names the setting, the source and the count."""
    semcor = _TrainedTask("WSD-ALL", ["x"], ["The jury said .", "a man is playing a guitar", "It rained ."])
    sts = _Task("STS12", ["A man is playing a guitar!", "unrelated"])
    stsb = _TrainedTask("STSBenchmark", ["a cat sits"], ["A cat sits .", "a dog runs"])
    tasks = {"WSD-ALL": semcor, "STS12": sts, "STSBenchmark": stsb}
    provider = CorpusProvider("held-out", tasks, held_out_sources={"STS12": "semcor", "STSBenchmark": "train",
                                                                   "WSD-ALL": "train"})
    on_semcor = provider("STS12")
    assert on_semcor.texts == ("The jury said .", "It rained .")
    assert on_semcor.record["fit_corpus"] == "held-out" and on_semcor.record["source"] == "train"
    assert on_semcor.record["source_task"] == "WSD-ALL" and on_semcor.record["corpus"] == "semcor"
    assert on_semcor.record["held_out_from"] == "STS12" and on_semcor.record["held_out_removed"] == 1
    assert on_semcor.label == "semcor (the training split of WSD-ALL)"
    on_train = provider("STSBenchmark")
    assert on_train.texts == ("a dog runs",) and on_train.record["source_task"] == "STSBenchmark"
    assert on_train.record["held_out_removed"] == 1 and on_train.key == "held-out:STSBenchmark"
    undeclared = CorpusProvider("held-out", tasks)("STS12")  # no card: no training split found, so SemCor
    assert undeclared.texts == on_semcor.texts
    with pytest.raises(FitCorpusError, match="no training split"):  # a card that declares one it lacks
        CorpusProvider("held-out", tasks, held_out_sources={"STS12": "train"})("STS12")
    with pytest.raises(FitCorpusError, match="no training split"):  # and the train setting never falls back
        CorpusProvider("train", tasks)("STS12")


def test_the_encode_pass_names_a_fit_corpus_by_itself_not_by_its_task() -> None:
    """A held-out fit corpus is encoded under its own name: the bar of SemCor's sentences does not say STS12."""
    from iso_bench.grid.runner import _encode_all

    semcor = _TrainedTask("WSD-ALL", ["x"], ["The jury said .", "It rained ."])
    sts = _Task("STS12", ["a man is playing a guitar"])
    provider = CorpusProvider("held-out", {"WSD-ALL": semcor, "STS12": sts}, held_out_sources={"STS12": "semcor"})
    seen: list[tuple[str, list[str]]] = []
    store = types.SimpleNamespace(note_task_size=lambda name, n: seen.append((name, n)),
                                  ensure=lambda texts, desc, **_: seen.append((desc, list(texts))))
    _encode_all(store, [sts], provider)
    assert seen == [("STS12", 3), ("encoding STS12", ["a man is playing a guitar"]),
                    ("encoding STS12's fit corpus: semcor (the training split of WSD-ALL)",
                     ["The jury said .", "It rained ."])]


def test_a_file_corpus_loses_the_texts_the_task_evaluates(tmp_path: Path) -> None:
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("A man is playing a guitar .\nthe sky is blue\nA dog runs!\nthe sky is blue\nnew text\n")
    task = _Task("T", ["a man is playing a GUITAR.", "A   dog runs", "unrelated"])
    corpus = CorpusProvider(str(corpus_file), {"T": task})("T")
    assert corpus.texts == ("the sky is blue", "new text")
    assert corpus.record["held_out_from"] == "T" and corpus.record["held_out_removed"] == 2
    assert "case-folded" in corpus.record["held_out_rule"]
    whole = CorpusProvider(str(corpus_file))(None)  # no task: the file as it is (checked before any work)
    assert len(whole.texts) == 4


def test_a_corpus_that_is_all_test_texts_is_refused(tmp_path: Path) -> None:
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("one\nTwo .\n")
    with pytest.raises(FitCorpusError, match="every text is also a text of T"):
        CorpusProvider(str(corpus_file), {"T": _Task("T", ["ONE", "two"])})("T")


def test_normalisation_ignores_case_whitespace_and_punctuation_but_not_words() -> None:
    assert normalised("Hello,  World !") == normalised("hello world") != normalised("hello word")


@pytest.mark.slow
def test_stsbenchmark_fits_on_its_training_split_held_out(tmp_path: Path, hub_mirror, minilm_backbone,
                                                          vector_cache: Path) -> None:
    from iso_bench.cli import main

    results = tmp_path / "results"
    assert main(["run", "--methods", "raw", "whiten", "--tasks", "STSBenchmark", "--fit-corpus", "train",
                 "--data-dir", str(SHARED_DATA), "--results", str(results), "--cache-dir", str(vector_cache),
                 "--no-progress"]) == 0
    (path,) = results.glob("results/*+whiten/*/**/STSBenchmark.json")
    fit = json.loads(path.read_text())["scores"]["test"][0]["iso_bench"]["fit"]
    train = [json.loads(line) for line in (hub_mirror / "mteb" / "stsbenchmark-sts" / "train.jsonl").open()]
    test = [json.loads(line) for line in (hub_mirror / "mteb" / "stsbenchmark-sts" / "test.jsonl").open()]
    assert len(train) == 5749
    texts = dict.fromkeys(t for row in train for t in (row["sentence1"], row["sentence2"]))
    evaluated = {normalised(t) for row in test for t in (row["sentence1"], row["sentence2"])}
    overlap = sum(normalised(t) in evaluated for t in texts)
    assert fit["fit_corpus"] == "train" and fit["splits"] == ["train"]
    assert fit["held_out_removed"] == overlap > 200 and fit["n_texts"] == len(texts) - overlap
