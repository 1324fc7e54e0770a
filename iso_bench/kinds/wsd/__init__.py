"""The word-sense-disambiguation kind (Raganato et al. 2017 framework): 1-nearest-neighbour on SemCor sense
centroids, WordNet first sense where no candidate has a centroid, F1 as the official scorer. Readers in
:mod:`.data`, scorer in :mod:`.scoring`.

Vectors are the target words' vectors (sub-token mean of each instance's span), post-processed by the
variant at token level: its method is fitted on the token vectors of the evaluation sentences (the
task's unlabeled texts), then applied to SemCor and test vectors alike. SemCor's vectors are cached
like every other encode. Without a model (``first_sense_scores``) the same code gives the first-sense
baseline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.files import folder_checksum
from iso_bench.kinds.base import Kind, WordEncoder, require
from iso_bench.kinds.wsd.data import WordNetSenses, framework_paths, load_corpus
from iso_bench.kinds.wsd.scoring import SenseCentroids, evaluate, instance_outcomes
from iso_bench.numerics.stats import Units


class WSDKind(Kind):
    """1-NN WSD on a framework evaluation set (``params["test_set"]``) with SemCor centroids; WordNet from
    ``params["wordnet"]`` (a :class:`~iso_bench.data.sources.RawSource`). Main score: F1 on the test set. Units: each
    test instance's outcome (:func:`~iso_bench.kinds.wsd.scoring.instance_outcomes`)."""

    needs_tokens = True
    wordnet_folder: Path | None = None

    def read(self, folder: Path) -> dict[str, Any]:
        self.wordnet_folder = self.card.params["wordnet"].locate(self.data_dir)
        wordnet = WordNetSenses.from_index(self.wordnet_folder)
        test = load_corpus(*framework_paths(folder, self.card.params["test_set"]), wordnet=wordnet)
        # SemCor writes multiword forms with underscores; spaces let the tokenizer see words
        train = load_corpus(*framework_paths(folder, "semcor"), wordnet=wordnet, underscores_as_spaces=True)
        return {"test": test, "train": train, "wordnet": wordnet}

    def source_record(self) -> dict[str, Any]:
        record = super().source_record()
        record["wordnet"] = {"path": self.card.params["wordnet"].path, "sha256": folder_checksum(self.wordnet_folder),
                             "revision": self.card.params["wordnet"].version}
        return record

    def fit_texts(self) -> list[str]:
        self.load_data()
        return list(self.dataset["test"].sentences.values())

    def train_texts(self) -> list[str]:
        """SemCor's sentences, the framework's training corpus (what the held-out setting fits on)."""
        self.load_data()
        return list(self.dataset["train"].sentences.values())

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:
        variant = require(model, WordEncoder, self.metadata.name)
        name = self.metadata.name
        train, test = self.dataset["train"], self.dataset["test"]
        train_X = variant.word_vectors(*_texts_and_spans(train), name, task_metadata=self.metadata)
        keep = np.isfinite(train_X).all(axis=1)  # spans beyond max_length have no vector
        train_keys = [k for k, ok in zip(train.gold_keys(), keep, strict=True) if ok]
        centroids = SenseCentroids.fit(train_X[keep], train_keys)
        test_X = variant.word_vectors(*_texts_and_spans(test), name, task_metadata=self.metadata)
        if not np.isfinite(test_X).all():
            raise ValueError(f"{name}: {int((~np.isfinite(test_X).all(axis=1)).sum())} test instances lie beyond "
                             "the model's max_length; use a model with a longer max_length to score every instance")
        result = evaluate(test, self.dataset["wordnet"], test_X, centroids)
        self.last_units = _units(test.gold, result.predictions.keys, self.metadata.main_score)
        return _scores(result, n_train=int(keep.sum()), n_train_truncated=int((~keep).sum()),
                       n_senses=len(centroids.keys))

    def first_sense_scores(self) -> dict[str, Any]:
        """The WordNet first-sense baseline through the same code, without vectors."""
        self.load_data()
        return _scores(evaluate(self.dataset["test"], self.dataset["wordnet"]))


def _texts_and_spans(corpus: Any) -> tuple[list[str], list[tuple[int, int]]]:
    texts = [corpus.sentences[i.sentence_id] for i in corpus.instances]
    return texts, [(i.start, i.end) for i in corpus.instances]


def _units(gold: Any, predictions: dict[str, str], main: str) -> Units | str:
    """Each test instance's correctness (statistic ``mean``: F1 equals it when every instance is answered),
    or ``[correct, answered]`` with the scorer's F1 (``wsd_f1``) when some instance has no candidate sense."""
    if main != "f1":
        return f"main score {main}: only F1 on every test instance has per-instance units here"
    outcomes = instance_outcomes(gold, predictions)
    return Units(outcomes[:, :1], "mean") if outcomes[:, 1].all() else Units(outcomes, "wsd_f1")


def _scores(result: Any, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dataset, score in result.scores.items():
        suffix = "" if dataset == "ALL" else f"_{dataset}"
        out[f"f1{suffix}"] = score.f1 / 100
        if dataset == "ALL":
            out["precision"], out["recall"] = score.precision / 100, score.recall / 100
    out["first_sense_fallbacks"] = result.predictions.fallbacks
    out["unanswered"] = result.predictions.unanswered
    out.update(extra)
    return out


KIND = WSDKind
