"""What every task kind shares, and the small protocols a kind asks of a model.

A kind is the evaluator of a family of tasks: it reads a task's data (as its card says), names the
unlabeled texts a fitted method may fit on (:meth:`Kind.fit_texts`), and scores a model. It imports
neither torch nor mteb: :mod:`iso_bench.mteb_plugin` mixes it into an mteb task class per card, and that is
where mteb comes in. A kind module exposes its class as ``KIND``.

Word-level kinds need more than sentence vectors: the vectors of target words (:class:`WordEncoder`) or of
every token (:class:`TokenEncoder`). Any model that has those methods qualifies; iso-bench's variants do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from iso_bench.files import folder_checksum
from iso_bench.kinds.cards import TaskCard
from iso_bench.registry import IsoBenchError


class ModelCapabilityError(IsoBenchError, TypeError):
    """A task needs vectors the model cannot give (e.g. word vectors from a model without token states)."""


@runtime_checkable
class WordEncoder(Protocol):
    def word_vectors(self, texts: list[str], spans: list[tuple[int, int]], task_name: str | None, *,
                     task_metadata: Any = None) -> np.ndarray:
        """Post-processed vectors of the words at character ``spans`` of ``texts`` (NaN rows: out of reach)."""


@runtime_checkable
class TokenEncoder(Protocol):
    def token_vectors(self, texts: list[str], task_name: str | None, *, task_metadata: Any = None) -> np.ndarray:
        """Post-processed vectors of every (non-special) token of ``texts``, stacked."""


@runtime_checkable
class SentenceEncoder(Protocol):
    def vectors(self, texts: list[str], task_name: str | None, *, task_metadata: Any = None) -> np.ndarray:
        """Post-processed sentence vectors of ``texts``."""


def require(model: Any, protocol: type, task: str) -> Any:
    """``model`` when it provides ``protocol``, else a clear error naming the task and what it needs."""
    if not isinstance(model, protocol):
        what = {WordEncoder: "target-word vectors", TokenEncoder: "token vectors"}.get(protocol, protocol.__name__)
        raise ModelCapabilityError(
            f"{task} needs {what}, which only iso-bench variants ('<model id>+<method>' of a model with hidden "
            f"states) provide; got {type(model).__name__}"
        )
    return model


class Kind:
    """Base of the task kinds. The mteb task class built from a card provides ``card``, ``metadata``,
    ``data_dir`` and ``dataset``; a kind implements :meth:`read`, :meth:`fit_texts` and :meth:`score`, which
    also sets :attr:`last_units`."""

    card: ClassVar[TaskCard]
    needs_tokens: ClassVar[bool] = False  # fits or measures token vectors (word-level and isotropy kinds)
    data_dir: str | Path | None = None
    dataset: Any = None
    data_loaded: bool = False
    folder: Path | None = None
    # What the last ``score`` call leaves for a bootstrap of the main score: an
    # :class:`iso_bench.numerics.stats.Units` (the per-instance values and the statistic that turns them into the
    # main score), or a string saying why there are none; read by the mteb adapter, never by the scores.
    last_units: Any = None

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        """Read the data once (mteb calls this before evaluating)."""
        if not self.data_loaded:
            self.dataset = self.load()
            self.data_loaded = True

    def load(self) -> Any:
        """Locate the card's data (data directory, download folder or its public archive) and read it."""
        self.folder = self.card.source.locate(self.data_dir)
        return self.read(self.folder)

    def read(self, folder: Path) -> Any:  # pragma: no cover - abstract
        """Parse the dataset from its folder; raise a :class:`~iso_bench.data.mirror_check.DataFormatError` naming
        file and line."""
        raise NotImplementedError

    def source_record(self) -> dict[str, Any]:
        """Where the data came from, for the result record: the release folder by its place in the data directory
        (the card's ``path``), never the machine's path, and the SHA-256 of its files."""
        assert self.folder is not None, "source_record before the data was loaded"
        source = self.card.source
        return {"repo": source.url, "revision": source.version, "source": "local", "path": source.path,
                "sha256": folder_checksum(self.folder)}

    def fit_texts(self) -> list[str]:  # pragma: no cover - abstract
        """The unlabeled texts of the evaluation data (what the fit corpus ``task`` fits on)."""
        raise NotImplementedError

    def train_texts(self) -> list[str] | None:
        """The unlabeled texts of the training split (what the fit corpus ``train`` fits on), or None where the
        task has none (the held-out setting then fits on a named corpus)."""
        return None

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError


def sentence_vectors(model: Any, texts: list[str], task: Any, encode_kwargs: dict[str, Any]) -> np.ndarray:
    """Sentence vectors of ``texts`` in float64: a variant's own, or any mteb encoder's through mteb's loader."""
    if isinstance(model, SentenceEncoder):
        return np.asarray(model.vectors(texts, task.metadata.name, task_metadata=task.metadata), np.float64)
    from datasets import Dataset  # lazily: datasets loads pyarrow
    from mteb._create_dataloaders import create_dataloader  # lazily: mteb takes seconds to import

    loader = create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=task.metadata,
                               batch_size=encode_kwargs.get("batch_size", 32))
    out = model.encode(loader, task_metadata=task.metadata, hf_split="test", hf_subset="default")
    return np.asarray(out, dtype=np.float64)
