"""The deployment setting: a method fitted on texts other than the evaluated ones (a task's training split, a
file) fits on held-out texts only: texts equal to an evaluated text are removed first, counted and recorded."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from iso_bench.data.fit_corpus import CorpusProvider, FitCorpusError, normalised
from tests.conftest import SHARED_DATA


class _Task:
    """A loaded task whose evaluated texts are ``texts`` (iso-bench's ``fit_texts`` protocol)."""

    data_loaded = True

    def __init__(self, name: str, texts: list[str]) -> None:
        self.metadata = types.SimpleNamespace(name=name, type="STS")
        self._texts = texts

    def fit_texts(self) -> list[str]:
        return list(self._texts)


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
def test_stsbenchmark_fits_on_its_training_split_held_out(tmp_path: Path, hub_mirror, minilm_backbone) -> None:
    from iso_bench.cli import main

    results = tmp_path / "results"
    assert main(["run", "--methods", "raw", "whiten", "--tasks", "STSBenchmark", "--fit-corpus", "train",
                 "--data-dir", str(SHARED_DATA), "--results", str(results), "--cache-dir", str(tmp_path / "cache"),
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
