"""Which texts a fitted method fits on, per evaluated task: the :class:`CorpusProvider`, and the held-out rule.

A setting names the corpus of every task at once:

- ``task``: the evaluated task's own texts (the papers' transductive "target" setting);
- ``train``: the task's training split (an error where the dataset has none);
- ``held-out`` (the deployment setting): the task's training split where its card says the dataset has one
  (STSBenchmark, Banking77Classification, WiC, WSD-ALL, whose training corpus is SemCor), else the named held-out
  corpus :data:`HELD_OUT_CORPUS`; a task without a card takes its training split where one can be read;
- a text file, one text per line (a corpus a user names: Wikipedia sentences, NLI premises).

Every corpus other than the task's own texts is held out: texts equal to an evaluated text under
:data:`HELD_OUT_RULE` are removed before the fit, and the count is recorded (:func:`held_out`).

Example:
    >>> normalised("A man is playing a guitar .") == normalised("a man is playing a GUITAR.")
    True
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from iso_bench.data.fit_corpus import (
    HELD_OUT,
    SETTINGS,
    TASK,
    TRAIN,
    FitCorpus,
    FitCorpusError,
    NoTrainingSplit,
    _sample,
    fit_budget,
    task_texts,
)
from iso_bench.data.sources import get_task

HELD_OUT_CORPUS = "semcor"
"""The held-out corpus of a task without a training split: SemCor's 37,176 sentences (Brown-corpus prose of
every genre, the training split of WSD-ALL, whose vectors the WSD task encodes anyway). General English from
other sources than every STS, WiC and retrieval test set, sense-annotated but used here as plain text."""
NAMED_CORPORA = {HELD_OUT_CORPUS: ("WSD-ALL", TRAIN)}
"""A named corpus: (task, setting) whose texts it is."""


class CorpusProvider:
    """Turns the task being evaluated into the fit corpus of one setting.

    ``setting`` is ``"task"`` (the evaluated task's own texts), ``"train"`` (its training split) or the path
    of a text file; ``sample`` fits on a seeded sample of that many texts (huge corpora), ``seed`` seeds it.
    ``tasks`` are loaded tasks by name (the runner's); a task not among them is loaded here, from ``data_dir``.
    ``budget``: the fit budget; a corpus of more texts is built again each time it is asked for (see
    :meth:`__call__`).

    Example:
        >>> provider = CorpusProvider("task", {"T": loaded_task})          # doctest: +SKIP
        >>> provider("T").key                                               # doctest: +SKIP
        'task:T'
    """

    def __init__(self, setting: str = TASK, tasks: Mapping[str, Any] | None = None,
                 data_dir: str | Path | None = None, *, sample: int | None = None, seed: int = 0,
                 budget: int | None = None, held_out_sources: Mapping[str, str] | None = None) -> None:
        if sample is not None and sample < 2:
            raise FitCorpusError(f"a fit corpus sample needs at least 2 texts, got {sample}")
        self.setting = setting
        self.data_dir = data_dir
        self.sample = sample
        self.seed = seed
        self._tasks: dict[str, Any] = dict(tasks or {})
        self._corpora: dict[str, FitCorpus] = {}
        self.budget = budget  # the fit budget (--fit-budget); None: $ISO_BENCH_FIT_BUDGET or the default
        # the held-out setting's source per carded task: "train" or a named corpus (kinds.cards.held_out_sources)
        self.held_out_sources = dict(held_out_sources or {})

    @property
    def is_file(self) -> bool:
        return self.setting not in SETTINGS

    def add_tasks(self, tasks: Iterable[Any]) -> None:
        """Make loaded tasks known, so that their corpora are read from them (not loaded again)."""
        for task in tasks:
            self._tasks.setdefault(task.metadata.name, task)

    def check(self, tasks: Iterable[Any] = ()) -> None:
        """Build the corpora of ``tasks`` (or read the file) now, so that a bad input fails before any work."""
        if self.is_file:
            self(None)
        for task in tasks:
            self(task.metadata.name)

    def __call__(self, task_name: str | None) -> FitCorpus:
        """The fit corpus for ``task_name``. One of at most the fit budget's texts (every STS, WiC and WSD
        task's) is built once and kept; a larger one (a retrieval corpus of millions of documents) is built
        again each time it is asked for, once per variant, rather than holding its texts as Python strings
        through the whole run."""
        key = f"file:{self.setting}:{task_name}" if self.is_file else f"{self.setting}:{task_name}"
        corpus = self._corpora.get(key)
        if corpus is None:
            corpus = self._build(task_name)
            if len(corpus.texts) <= (fit_budget() if self.budget is None else self.budget):
                self._corpora[key] = corpus
        return corpus

    def _build(self, task_name: str | None) -> FitCorpus:
        if self.is_file:
            corpus = FitCorpus.from_file(self.setting)
            if task_name is not None:
                corpus = held_out(corpus, self._task(task_name))
            if self.sample is None:
                return corpus
            groups, record = _sample([(None, list(corpus.texts))], self.sample, self.seed, dict(corpus.record))
            return FitCorpus(f"{corpus.key}@{self.sample}", tuple(groups[0][1]), record)
        if task_name is None:
            raise FitCorpusError(f"fit corpus {self.setting!r} needs the task being evaluated; pass a task or a "
                                 "fit corpus file")
        task = self._task(task_name)
        if self.setting == HELD_OUT:
            return held_out(self._held_out_source(task), task, setting=HELD_OUT)
        corpus = FitCorpus.from_task(task, self.setting, sample=self.sample, seed=self.seed)
        return corpus if self.setting == TASK else held_out(corpus, task)

    def _held_out_source(self, task: Any) -> FitCorpus:
        """The corpus the held-out setting fits ``task`` on, before the held-out rule: its training split where
        its card declares one (a task without a card: where one can be read), else the named corpus."""
        name = task.metadata.name
        source = self.held_out_sources.get(name)
        if source in (None, TRAIN):
            try:
                return FitCorpus.from_task(task, TRAIN, sample=self.sample, seed=self.seed)
            except NoTrainingSplit:
                if source == TRAIN:
                    raise
        named = source if source not in (None, TRAIN) else HELD_OUT_CORPUS
        if named not in NAMED_CORPORA:
            raise FitCorpusError(f"task {name!r}: unknown held-out corpus {named!r}; expected one of "
                                 f"{', '.join(NAMED_CORPORA)}")
        owner, which = NAMED_CORPORA[named]
        corpus = FitCorpus.from_task(self._task(owner), which, sample=self.sample, seed=self.seed)
        record = {**corpus.record, "corpus": named}
        return FitCorpus(named, corpus.texts, record, corpus.groups, task.metadata)

    def _task(self, task_name: str) -> Any:
        task = self._tasks.get(task_name)
        if task is None:
            task = self._tasks[task_name] = get_task(task_name, self.data_dir)
        return task


HELD_OUT_RULE = "NFKC, case-folded, letters and digits only (whitespace, punctuation and tokenisation ignored)"


def normalised(text: str) -> str:
    """A text as the held-out check compares it (:data:`HELD_OUT_RULE`).

    >>> normalised("A man is playing a guitar .") == normalised("a man is playing a GUITAR.")
    True
    """
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def held_out(corpus: FitCorpus, task: Any, setting: str | None = None) -> FitCorpus:
    """``corpus`` without the texts that equal a text ``task`` evaluates (under :data:`HELD_OUT_RULE`): a corpus
    other than the task's own texts is held out, whatever it is; how many were removed is recorded. With
    ``setting`` (``held-out``), the record names that setting and keeps the source's own as ``source``."""
    evaluated = {normalised(t) for t in task_texts(task)}
    groups = [(p, tuple(t for t in ts if normalised(t) not in evaluated)) for p, ts in corpus.groups]
    kept = tuple(dict.fromkeys(t for _, ts in groups for t in ts))
    if not kept:
        raise FitCorpusError(f"fit corpus {corpus.key}: every text is also a text of {task.metadata.name}, which "
                             "it must be held out from; fit on other texts")
    record = {**corpus.record, "held_out_from": task.metadata.name, "held_out_removed": len(corpus.texts) - len(kept),
              "held_out_rule": HELD_OUT_RULE}
    key = f"{corpus.key}-held-out:{task.metadata.name}"
    if setting is not None:
        source = dict(corpus.record)
        record = {"fit_corpus": setting, "task": task.metadata.name, "source": source.pop("fit_corpus", None),
                  "source_task": source.pop("task", None), **source, **{k: v for k, v in record.items()
                                                                        if k.startswith("held_out")}}
        key = f"{setting}:{task.metadata.name}"
    return FitCorpus(key, kept, record, tuple(groups), corpus.task_metadata)
