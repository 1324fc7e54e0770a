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
    (2, '2d5ba4a4de8e')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.files import texts_digest
from iso_bench.registry import IsoBenchError

TASK = "task"


class FitCorpusError(IsoBenchError, ValueError):
    """The fit corpus of a fitted method cannot be read or is unusable; the message names it."""


@dataclass(frozen=True)
class FitCorpus:
    """Texts a method is fitted on. ``key`` is the corpus's identity (``task:<name>``, ``file:<path>``)."""

    key: str
    texts: tuple[str, ...]
    record: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "texts", tuple(dict.fromkeys(self.texts)))

    def to_record(self) -> dict[str, Any]:
        """The provenance written with every result: the record plus ``n_texts`` and ``texts_sha256``."""
        return {**self.record, "n_texts": len(self.texts), "texts_sha256": texts_digest(self.texts)}

    @classmethod
    def from_task(cls, task: Any) -> FitCorpus:
        """The unlabeled texts of a loaded mteb (or iso-bench) task's evaluation splits."""
        name = task.metadata.name
        record = {"fit_corpus": TASK, "task": name, "splits": list(task.metadata.eval_splits)}
        return cls(f"{TASK}:{name}", tuple(task_texts(task)), record)

    @classmethod
    def from_file(cls, path: str | Path) -> FitCorpus:
        """One text per non-empty line of a UTF-8 file."""
        resolved = Path(path).expanduser().resolve()
        return cls(f"file:{resolved}", tuple(read_text_file(path)), {"fit_corpus": "file", "path": str(resolved)})


def read_text_file(path: str | Path) -> list[str]:
    """One text per non-empty line of a UTF-8 file (stripped); an error naming the file when there is none."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FitCorpusError(
            f"fit corpus file {p} does not exist; pass --fit-corpus task or a text file, one text per line"
        )
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise FitCorpusError(f"fit corpus file {p} is not UTF-8 text: {exc}") from exc
    texts = [line.strip() for line in lines if line.strip()]
    if not texts:
        raise FitCorpusError(f"fit corpus file {p} has no non-empty lines")
    return texts


def task_texts(task: Any) -> list[str]:
    """The unlabeled texts of a loaded task's evaluation splits, both sides of every pair, deduplicated in
    first-seen order. An iso-bench task's kind says what they are (``fit_texts()``)."""
    if hasattr(task, "fit_texts"):
        return list(dict.fromkeys(task.fit_texts()))
    columns = getattr(task, "column_names", None)
    dataset = task.dataset
    texts: list[str] = []
    for subset in task.hf_subsets or ["default"]:
        for split in task.metadata.eval_splits:
            data = dataset[split] if (subset == "default" and subset not in dataset) else dataset[subset][split]
            cols = [c for c in (columns or data.column_names) if isinstance(c, str)]
            for col in cols:
                values = _column(data, col)
                if values and isinstance(values[0], str):
                    texts.extend(values)
    return list(dict.fromkeys(texts))


def _column(data: Any, col: str) -> list[Any]:
    """One column as a list; read from a ``datasets.Dataset``'s Arrow table in one call (indexing the
    Dataset would format it row by row, which costs seconds per task and variant)."""
    table = getattr(data, "data", None)
    if hasattr(table, "column") and getattr(data, "_indices", None) is None:
        return table.column(col).to_pylist()
    return list(data[col])


class CorpusProvider:
    """Turns the task being evaluated into the fit corpus of one setting.

    ``setting`` is ``"task"`` (the evaluated task's own texts) or the path of a text file. ``tasks`` are
    loaded tasks by name (the runner's); a task not among them is loaded here, from ``data_dir``.

    Example:
        >>> provider = CorpusProvider("task", {"T": loaded_task})          # doctest: +SKIP
        >>> provider("T").key                                               # doctest: +SKIP
        'task:T'
    """

    def __init__(self, setting: str = TASK, tasks: Mapping[str, Any] | None = None,
                 data_dir: str | Path | None = None) -> None:
        self.setting = setting
        self.data_dir = data_dir
        self._tasks: dict[str, Any] = dict(tasks or {})
        self._corpora: dict[str, FitCorpus] = {}

    def add_tasks(self, tasks: Iterable[Any]) -> None:
        """Make loaded tasks known, so that their corpora are read from them (not loaded again)."""
        for task in tasks:
            self._tasks.setdefault(task.metadata.name, task)

    def check(self) -> None:
        """Read a file setting now, so that a bad file fails before any work."""
        if self.setting != TASK:
            self(None)

    def __call__(self, task_name: str | None) -> FitCorpus:
        key = f"{TASK}:{task_name}" if self.setting == TASK else f"file:{self.setting}"
        if key not in self._corpora:
            self._corpora[key] = self._build(task_name)
        return self._corpora[key]

    def _build(self, task_name: str | None) -> FitCorpus:
        if self.setting != TASK:
            return FitCorpus.from_file(self.setting)
        if task_name is None:
            raise FitCorpusError("fit corpus 'task' needs the task being evaluated; pass a task or a fit corpus file")
        task = self._tasks.get(task_name)
        if task is None:
            from iso_bench.data import get_task

            task = self._tasks[task_name] = get_task(task_name, self.data_dir)
        return FitCorpus.from_task(task)


def texts_of(corpora: Sequence[FitCorpus]) -> list[str]:
    """Every text of several corpora, once, in order."""
    return list(dict.fromkeys(t for c in corpora for t in c.texts))
