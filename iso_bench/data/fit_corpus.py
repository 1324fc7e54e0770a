"""What a fitted method is fitted on, and its record.

A :class:`FitCorpus` is a named list of texts (deduplicated in first-seen order) with the provenance that a
result cites: which setting made it, from what, how many texts, and their SHA-256. It is built

- from a loaded task (:meth:`FitCorpus.from_task`): the unlabeled texts of its evaluation split(s), both
  sides of every pair (the papers' transductive "target" setting), or what the task's kind says they are;
- from a text file, one text per line (:meth:`FitCorpus.from_file`).

A variant does not look tasks up: it is handed a :class:`CorpusProvider`, which turns the task being
evaluated (by name, as mteb hands ``task_metadata`` to ``encode``) into its fit corpus. The runner gives the
provider the tasks it has loaded; on mteb's own path the provider loads the task itself.

Example:
    >>> corpus = FitCorpus("file:demo", ("a cat", "a dog"), {"fit_corpus": "file", "path": "demo"})
    >>> corpus.to_record()["n_texts"], corpus.to_record()["texts_sha256"][:12]
    (2, 'c3f20e3f4ebf')
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.files import file_sha256, read_lines, texts_digest
from iso_bench.registry import IsoBenchError

TASK = "task"
TRAIN = "train"
HELD_OUT = "held-out"  # the training split where the task has one, else a named held-out corpus
SETTINGS = (TASK, TRAIN, HELD_OUT)  # besides a text file
SETTING_WORDS = {TASK: "fitted on test texts", HELD_OUT: "fitted on held-out texts",
                 TRAIN: "fitted on the training split"}
"""Each setting as a board labels it: a reader never ranks the two settings together without these words."""


class FitCorpusError(IsoBenchError, ValueError):
    """The fit corpus of a fitted method cannot be read or is unusable; the message names it."""


class NoTrainingSplit(FitCorpusError):
    """The task's dataset has no training split (the held-out setting then fits on a named corpus)."""


FIT_BUDGET_ENV = "ISO_BENCH_FIT_BUDGET"
FIT_BUDGET = 100_000
"""Texts a fit reads at once (a quarter of it for a fit on token vectors). A larger fit corpus is read batch by
batch by a method that streams (center, abtt, whiten, clip, zscore, zca, softdecay, zipfian-whiten with its
default weights: the same fit up to rounding) and sampled, seeded and recorded, for the others (cluster-pca,
flow, zipfian-whiten-weights=uniform). Every STS, WiC and WSD task's corpus is far below it: their
fits read their whole corpus. A budget other than this default is part of the setup of the methods it samples
for (:func:`iso_bench.mteb_plugin.setup_kwargs`)."""


def fit_budget() -> int:
    """``$ISO_BENCH_FIT_BUDGET`` (``--fit-budget``), else :data:`FIT_BUDGET`."""
    text = os.environ.get(FIT_BUDGET_ENV)
    return int(text) if text else FIT_BUDGET


@dataclass(frozen=True)
class FitCorpus:
    """Texts a method is fitted on. ``key`` is the corpus's identity (``task:<name>``, ``train:<name>``,
    ``file:<path>``, with ``@<n>`` for a sample). ``groups`` pairs each prompt type (``None``, ``"query"``,
    ``"document"``) with its texts, so that each text is encoded with its own prompt; ``task_metadata`` is the
    task's mteb metadata, which resolves those prompts (``None`` for a file)."""

    key: str
    texts: tuple[str, ...]
    record: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[tuple[str | None, tuple[str, ...]], ...] = ()
    task_metadata: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "texts", tuple(dict.fromkeys(self.texts)))
        if not self.groups:
            object.__setattr__(self, "groups", ((None, self.texts),))

    def to_record(self) -> dict[str, Any]:
        """The provenance written with every result: the record plus ``n_texts`` and ``texts_sha256``."""
        return {**self.record, "n_texts": len(self.texts), "texts_sha256": texts_digest(self.texts)}

    @classmethod
    def from_task(cls, task: Any, which: str = TASK, *, sample: int | None = None, seed: int = 0) -> FitCorpus:
        """The unlabeled texts of a loaded task: its evaluation splits (``"task"``) or training split
        (``"train"``); ``sample``: a seeded sample of that many texts where there are more."""
        name = task.metadata.name
        splits = list(task.metadata.eval_splits) if which == TASK else [getattr(task, "train_split", "train")]
        record: dict[str, Any] = {"fit_corpus": which, "task": name, "splits": splits}
        groups = task_text_groups(task, which)
        if not any(texts for _, texts in groups):
            raise FitCorpusError(f"task {name!r} has no {which} texts to fit on")
        key = f"{which}:{name}"
        if sample is not None:
            groups, record = _sample(groups, sample, seed, record)
            key += f"@{sample}"
        texts = tuple(t for _, ts in groups for t in ts)
        return cls(key, texts, record, tuple((p, tuple(ts)) for p, ts in groups), task.metadata)

    @classmethod
    def from_file(cls, path: str | Path) -> FitCorpus:
        """One text per non-empty line of a UTF-8 file (lines end at ``\\n`` only); repeated lines are one
        text, and the record keeps the file's count of non-empty lines (``n_lines``) beside ``n_texts``. The
        record names the file by its name (``path``) and the SHA-256 of its bytes (``sha256``), never by the
        machine's path."""
        resolved = Path(path).expanduser().resolve()
        lines = read_text_file(path)
        return cls(f"file:{resolved}", tuple(lines), {"fit_corpus": "file", "path": resolved.name,
                                                       "sha256": file_sha256(resolved), "n_lines": len(lines)})

    def sample(self, size: int, seed: int, reason: str | None = None) -> FitCorpus:
        """A seeded sample of ``size`` texts (in their order), recorded (``sample``, ``sample_seed``,
        ``n_texts_total`` and, when given, ``sample_reason``); the corpus itself when it has no more."""
        if len(self.texts) <= size:
            return self
        groups, record = _sample([(p, list(ts)) for p, ts in self.groups], size, seed, dict(self.record))
        if reason:
            record["sample_reason"] = reason
        return FitCorpus(f"{self.key}@{size}", tuple(t for _, ts in groups for t in ts), record,
                         tuple((p, tuple(ts)) for p, ts in groups), self.task_metadata)

    @property
    def label(self) -> str:
        """What the corpus is, as a warning names it: ``STS12``, ``the training split of STS12``, ``file
        wiki.txt``; ``, a sample of 1000 texts`` after it for a sample.

        >>> record = {"fit_corpus": "file", "path": "/d/wiki.txt", "sample": 2}
        >>> FitCorpus("file:/d/wiki.txt@2", ("a", "b"), record).label
        'file wiki.txt, a sample of 2 texts'
        """
        which, task = self.record.get("fit_corpus"), self.record.get("task")
        if which == HELD_OUT:
            which, task = self.record.get("source"), self.record.get("source_task") or task
        text = {TASK: f"{task}", TRAIN: f"the training split of {task}"}.get(str(which)) if task else None
        text = text or f"file {Path(str(self.record.get('path') or self.key)).name}"
        if self.record.get("corpus"):  # a named corpus: semcor (the training split of WSD-ALL)
            text = f"{self.record['corpus']} ({text})"
        return text + (f", a sample of {len(self.texts)} texts" if self.record.get("sample") is not None else "")

    def describe(self) -> str:
        """``"450 texts"``, or for a file with repeated lines ``"200000 lines, 1 distinct texts"``."""
        n_lines = self.record.get("n_lines")
        if isinstance(n_lines, int) and n_lines != len(self.texts):
            return f"{n_lines} lines, {len(self.texts)} distinct texts"
        return f"{len(self.texts)} texts"


def _sample(groups: list[tuple[str | None, list[str]]], size: int, seed: int, record: dict[str, Any]
            ) -> tuple[list[tuple[str | None, list[str]]], dict[str, Any]]:
    """A seeded sample of ``size`` (prompt type, text) items, in their original order; recorded."""
    import numpy as np  # lazily: numpy stays out of light commands

    items = [(p, t) for p, texts in groups for t in texts]
    record = {**record, "sample": size, "sample_seed": seed, "n_texts_total": len(items)}
    if len(items) <= size:
        return groups, record
    keep = np.sort(np.random.default_rng(seed).choice(len(items), size=size, replace=False))
    out: dict[str | None, list[str]] = {}
    for i in keep:
        out.setdefault(items[i][0], []).append(items[i][1])
    return list(out.items()), record


def read_text_file(path: str | Path) -> list[str]:
    """One text per non-empty line of a UTF-8 file (stripped), split on ``\\n`` (and ``\\r\\n``) only, as every
    reader of a user's text file (:func:`iso_bench.files.read_lines`): U+2028, form feeds and the other
    characters ``str.splitlines`` breaks at stay inside their text. An error naming the file (and the line of
    a bad byte) when it cannot be read or holds no text."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise FitCorpusError(f"fit corpus {p} is a folder, not a file; pass --fit-corpus task, train or a text "
                             "file, one text per line")
    if not p.is_file():
        raise FitCorpusError(
            f"fit corpus file {p} does not exist; pass --fit-corpus task, train or a text file, one text per line"
        )
    try:
        lines = read_lines(p, FitCorpusError)
    except OSError as exc:
        raise FitCorpusError(f"fit corpus file {p}: cannot be read ({exc.strerror or exc})") from None
    except FitCorpusError as exc:
        raise FitCorpusError(f"fit corpus file {exc}; save it as UTF-8 text, one text per line") from None
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise FitCorpusError(f"fit corpus file {p} has no non-empty lines")
    return texts


def task_texts(task: Any, which: str = TASK) -> list[str]:
    """The unlabeled texts of a loaded task, deduplicated in first-seen order (every prompt type together).

    ``which="task"``: the texts its evaluation split(s) encode; ``"train"``: its training split's texts. See
    :func:`task_text_groups` for what that means for each task type.
    """
    return list(dict.fromkeys(t for _, texts in task_text_groups(task, which) for t in texts))


def task_text_groups(task: Any, which: str = TASK) -> list[tuple[str | None, list[str]]]:
    """``[(prompt type, texts), ...]`` of a loaded task: each text with the prompt type mteb encodes it with.

    - ``which="task"`` (the papers' transductive "target" setting): the texts the evaluation split(s) encode.
      Pairs (STS, pair classification, bitext): both sides. Retrieval and reranking: the queries (those with
      relevant documents, as mteb evaluates them) as ``"query"`` and every corpus document (title and text, as
      mteb joins them) as ``"document"``. Classification, multilabel classification, clustering: the evaluated
      split's texts, not the train split that mteb also encodes. Summarization: the summaries (mteb never
      encodes the source text). An iso-bench task says what they are (``fit_texts()``).
    - ``which="train"`` (the inductive setting): the training split's texts, for task types that have one
      (classification, multilabel classification); an error naming the task otherwise.
    """
    if not getattr(task, "data_loaded", True):
        task.load_data()
    name = task.metadata.name
    if hasattr(task, "fit_texts"):  # an iso-bench task
        if which == TASK:
            return [(None, list(task.fit_texts()))]
        train = task.train_texts() if hasattr(task, "train_texts") else None
        if not train:
            raise NoTrainingSplit(f"task {name!r} has no training split to fit on; use --fit-corpus task, "
                                  "held-out or a file")
        return [(None, list(train))]
    reader = _reader(task, which)
    if reader is None:
        what = "training split" if which != TASK else "texts iso-bench knows how to read"
        error = NoTrainingSplit if which != TASK else FitCorpusError
        raise error(f"task {name!r} ({task.metadata.type}) has no {what}; use --fit-corpus task, held-out or a "
                    "text file with one text per line")
    groups: dict[str | None, list[str]] = {}
    # a parallel bitext task keeps one table per split, a column per language, for all its subsets
    subsets = ["default"] if getattr(task, "parallel_subsets", False) else (task.hf_subsets or ["default"])
    for subset in subsets:
        data = task.dataset if (subset == "default" and subset not in task.dataset) else task.dataset[subset]
        for prompt_type, texts in reader(task, data):
            groups.setdefault(prompt_type, []).extend(texts)
    return [(p, list(dict.fromkeys(t))) for p, t in groups.items()]


def _reader(task: Any, which: str) -> Any:
    """The text reader for the task's mteb type (a table over mteb's abstract task classes, most specific first)."""
    from mteb.abstasks.classification import AbsTaskClassification  # lazily: mteb takes seconds to import
    from mteb.abstasks.clustering import AbsTaskClustering  # lazily: mteb takes seconds to import
    from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy  # lazily: mteb takes seconds to import
    from mteb.abstasks.pair_classification import AbsTaskPairClassification  # lazily: mteb takes seconds to import
    from mteb.abstasks.retrieval import AbsTaskRetrieval  # lazily: mteb takes seconds to import
    from mteb.abstasks.sts import AbsTaskSTS  # lazily: mteb takes seconds to import
    from mteb.abstasks.text.bitext_mining import AbsTaskBitextMining  # lazily: mteb takes seconds to import
    from mteb.abstasks.text.summarization import AbsTaskSummarization  # lazily: mteb takes seconds to import

    if which != TASK:
        if isinstance(task, AbsTaskClassification):
            return _train_texts
        return _pair_train_texts if isinstance(task, (AbsTaskSTS, AbsTaskPairClassification)) else None
    table = ((AbsTaskRetrieval, _retrieval_texts), (AbsTaskClassification, _classification_texts),
             (AbsTaskSTS, _pair_texts), (AbsTaskPairClassification, _pair_texts),
             (AbsTaskBitextMining, _bitext_texts), (AbsTaskSummarization, _summary_texts),
             (AbsTaskClustering, _column_texts), (AbsTaskClusteringLegacy, _column_texts))
    return next((reader for cls, reader in table if isinstance(task, cls)), None)


def _strings(values: Iterable[Any]) -> list[str]:
    """The strings of a column; list-valued cells (legacy clustering, summaries) are flattened."""
    out: list[str] = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_strings(v))
    return out


def _columns(names: Any) -> list[str]:
    return [names] if isinstance(names, str) else list(names)


def _column(data: Any, col: str) -> list[Any]:
    """One column as a list; read from a ``datasets.Dataset``'s Arrow table in one call (indexing the
    Dataset would format it row by row, which costs seconds per task and variant)."""
    table = getattr(data, "data", None)
    if hasattr(table, "column") and getattr(data, "_indices", None) is None:
        return table.column(col).to_pylist()
    return list(data[col])  # a Dataset behind an index mapping, or a plain dict of lists (BUCC)


def _retrieval_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    from mteb._create_dataloaders import _retrieval_texts as as_encoded  # lazily: mteb takes seconds to import
    from mteb.abstasks.retrieval import _filter_queries_without_positives  # lazily: mteb takes seconds to import
    from mteb.types import PromptType  # lazily: mteb takes seconds to import

    task.convert_v1_dataset_format_to_v2(num_proc=None)
    queries, documents = [], []
    for split in task.metadata.eval_splits:
        part = data[split]
        _, kept = _filter_queries_without_positives(part["relevant_docs"], part["queries"])
        queries += as_encoded(kept, PromptType.query)
        documents += as_encoded(part["corpus"], PromptType.document)
    return [(PromptType.query.value, queries), (PromptType.document.value, documents)]


def _classification_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    return [(None, [t for split in task.metadata.eval_splits for c in _columns(task.input_column_name)
                    for t in _strings(_column(data[split], c))])]


def _train_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    return [(None, [t for c in _columns(task.input_column_name) for t in _strings(_column(data[task.train_split], c))])]


def _pair_train_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    """Both sides of the pairs of a pair task's training split. mteb loads the evaluation splits only, so the
    train split is read from the same source (the mirror folder the task points at, or the hub at the pinned
    revision); an error names the task where the dataset has none."""
    import datasets  # lazily: datasets loads pyarrow

    if TRAIN in data:
        part = data[TRAIN]
    else:
        path, revision = task.metadata.dataset["path"], task.metadata.dataset.get("revision")
        local = Path(str(path)).is_dir()
        if local and not _has_split_file(Path(str(path)), TRAIN):
            raise NoTrainingSplit(f"task {task.metadata.name!r} has no training split in {path}; use --fit-corpus "
                                  "task, held-out or a text file with one text per line")
        try:
            part = datasets.load_dataset(str(path), revision=None if local else revision, split=TRAIN)
        except ValueError as exc:  # datasets' "Unknown split"
            raise NoTrainingSplit(f"task {task.metadata.name!r} has no training split in {path} ({exc}); use "
                                  "--fit-corpus task, held-out or a text file with one text per line") from None
        except Exception as exc:  # noqa: BLE001 - a hub or file error: the split may exist but cannot be read
            raise FitCorpusError(f"task {task.metadata.name!r}: its training split in {path} cannot be read ({exc}); "
                                 "check the data folder or the hub cache") from None
    columns = [c for c in ("sentence1", "sentence2") if c in part.column_names]
    if not columns:
        raise FitCorpusError(f"task {task.metadata.name!r}: its training split has no sentence1/sentence2 columns")
    return [(None, [t for c in columns for t in _strings(_column(part, c))])]


def _has_split_file(folder: Path, split: str) -> bool:
    """Whether a dataset folder (a hub mirror) holds a file of ``split``: ``train.jsonl.gz``,
    ``data/train-00000-of-00001.parquet`` and the like."""
    return any(p.name.split(".")[0].split("-")[0] == split for p in folder.rglob(f"{split}*") if p.is_file())


def _pair_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    from mteb.abstasks.sts import AbsTaskSTS  # lazily: mteb takes seconds to import

    if isinstance(task, AbsTaskSTS):
        sides = list(zip(_columns(task.column_names), (task.input1_prompt_type, task.input2_prompt_type), strict=False))
    else:
        sides = [(task.input1_column_name, task.input1_prompt_type), (task.input2_column_name, task.input2_prompt_type)]
    return [(prompt.value if prompt else None, _strings(_column(data[split], column)))
            for split in task.metadata.eval_splits for column, prompt in sides]


def _bitext_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    """Every column that one of the task's language pairs names (``sentence1``/``sentence2``, or a column per
    language for parallel tasks), in the table's column order, as mteb encodes them."""
    wanted = {column for pair in task._get_pairs(getattr(task, "parallel_subsets", False)) for column in pair}
    out = []
    for split in task.metadata.eval_splits:
        part = data[split] if split in data else data
        names = part.column_names if hasattr(part, "column_names") else list(part)
        out += [(None, _strings(_column(part, c))) for c in names if c in wanted]
    return out


def _summary_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    return [(None, _strings(_column(data[split], c))) for split in task.metadata.eval_splits
            for c in (task.human_summaries_column_name, task.machine_summaries_column_name)]


def _column_texts(task: Any, data: Any) -> list[tuple[str | None, list[str]]]:
    return [(None, _strings(_column(data[split], task.input_column_name))) for split in task.metadata.eval_splits]
