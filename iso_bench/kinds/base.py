"""What every iso-bench task shares: an mteb task whose data is a folder of files in its public release
layout, found under the data directory or downloaded from its public source, and whose evaluator reads
vectors from an iso-bench variant.

A task of a known kind is one small file under ``tasks/``: a subclass of the kind with a ``source`` and
a ``metadata`` card. Defining the subclass registers it (:data:`TASKS`); ``import iso_bench`` adds every
task to mteb's task registry once mteb is imported.
"""

from __future__ import annotations

import logging
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mteb.abstasks.abstask import AbsTask
from mteb.abstasks.task_metadata import TaskMetadata

from iso_bench.data import DATA_DIR_ENV, DataNotFoundError, folder_checksum, mirror_dir
from iso_bench.registry import Registry

logger = logging.getLogger(__name__)

TASKS: Registry[type[IsoTask]] = Registry("task")
DOWNLOAD_ENV = "ISO_BENCH_DOWNLOAD_DIR"


class DataFormatError(ValueError):
    """A data file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class RawSource:
    """A dataset in its public release layout.

    ``path`` is the folder relative to the data directory (``--data-dir`` / ``$ISO_BENCH_DATA_DIR``);
    ``url`` the public archive that, unpacked, holds ``path`` relative to the download folder;
    ``version`` names the release (it becomes the result files' ``dataset_revision``); the archive is
    unpacked into ``<download folder>/<archive_dir>`` and must then hold ``path``.
    """

    path: str
    url: str
    version: str
    archive_dir: str = ""  # where, under the download folder, the archive is unpacked

    def download_root(self) -> Path:
        env = os.environ.get(DOWNLOAD_ENV)
        return Path(env).expanduser() if env else Path.home() / ".cache" / "iso_bench" / "data"

    def locate(self, data_dir: str | Path | None) -> Path:
        """The local folder of this dataset: under the data directory, else in the download folder,
        else downloaded from ``url``. Raises one error that names every place tried."""
        root = mirror_dir(data_dir)
        if root is not None and (root / self.path).is_dir():
            return (root / self.path).resolve()
        cached = self.download_root() / self.path
        if cached.is_dir():
            return cached.resolve()
        try:
            fetch_archive(self.url, self.download_root() / self.archive_dir)
        except Exception as exc:  # noqa: BLE001 - every failure means "not there"
            where = f"{root / self.path}" if root else f"a data directory (none given: --data-dir or {DATA_DIR_ENV})"
            raise DataNotFoundError(
                f"dataset {self.path!r} was found neither in {where} nor in {cached}, and downloading {self.url} "
                f"failed ({type(exc).__name__}: {exc}); point --data-dir at a folder that holds {self.path}/"
            ) from exc
        if not cached.is_dir():
            raise DataNotFoundError(f"the archive {self.url} does not contain {self.path}/")
        return cached.resolve()


def fetch_archive(url: str, dest: Path) -> None:
    """Download a .zip or .tar(.gz) archive and unpack it into ``dest`` (atomically, via a temp folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        archive = Path(tmp) / "archive"
        logger.info("downloading %s", url)
        with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as f:  # noqa: S310
            shutil.copyfileobj(response, f)
        unpacked = Path(tmp) / "unpacked"
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as z:
                z.extractall(unpacked)
        else:
            with tarfile.open(archive) as t:
                t.extractall(unpacked, filter="data")
        for child in unpacked.iterdir():
            target = dest / child.name
            if not target.exists():
                child.replace(target)


def card(*, name: str, description: str, reference: str, type: str, main_score: str, citation: str,
         version: str, eval_splits: tuple[str, ...] = ("test",), domains: tuple[str, ...] = (),
         license: str = "not specified", date: tuple[str, str] | None = None,
         annotations: str = "expert-annotated") -> TaskMetadata:
    """mteb metadata for an iso-bench task, with the fields every such task shares filled in."""
    return TaskMetadata(
        name=name,
        description=description,
        reference=reference,
        dataset={"path": f"iso-bench/{name}", "revision": version},
        type=type,
        category="t2t",
        modalities=["text"],
        eval_splits=list(eval_splits),
        eval_langs=["eng-Latn"],
        main_score=main_score,
        date=date,
        domains=list(domains) or None,
        license=license,
        annotations_creators=annotations,
        dialect=[],
        sample_creation="found",
        bibtex_citation=citation,
    )


class IsoTask(AbsTask):
    """Base of iso-bench's tasks. Subclasses (the kinds) implement :meth:`read` and :meth:`score`."""

    source: ClassVar[RawSource]
    kind: ClassVar[str] = ""
    suite: ClassVar[str] = ""  # the suite the task belongs to (see iso_bench.suites)
    needs_tokens: ClassVar[bool] = False  # fits or measures token vectors (word-level and isotropy tasks)
    size_note: ClassVar[str] = ""  # what ``iso-bench list`` says about the size, e.g. "1,400 test pairs"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "metadata" in cls.__dict__:  # a concrete task, not a kind
            TASKS.add(cls.metadata.name, cls)

    def __init__(self, data_dir: str | Path | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_dir = data_dir
        self.folder: Path | None = None

    # ---- data -------------------------------------------------------------------------------------
    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        self.folder = self.source.locate(self.data_dir)
        self.dataset = self.read(self.folder)
        self.data_loaded = True

    def read(self, folder: Path) -> Any:  # pragma: no cover - abstract
        """Parse the dataset from its folder; raise :class:`DataFormatError` naming file and line."""
        raise NotImplementedError

    def source_record(self) -> dict[str, Any]:
        """Where the data came from, for the result record."""
        assert self.folder is not None
        return {"repo": self.source.url, "revision": self.source.version, "source": "local",
                "path": str(self.folder), "sha256": folder_checksum(self.folder)}

    def fit_texts(self) -> list[str]:
        """The unlabeled texts of the evaluation data (what the fit corpus ``task`` fits on)."""
        raise NotImplementedError

    # ---- evaluation -------------------------------------------------------------------------------
    def evaluate(self, model: Any, split: str = "test", subsets_to_run: list[str] | None = None, *,
                 encode_kwargs: Any = None, **kwargs: Any) -> dict[str, dict[str, Any]]:
        self.load_data()
        known = getattr(model, "tasks", None)  # an iso-bench variant fits "task" corpora on this very task
        if isinstance(known, dict):
            known.setdefault(self.metadata.name, self)
        scores = self.score(model, split, encode_kwargs or {})
        self._add_main_score(scores)
        return {"default": scores}

    def score(self, model: Any, split: str, encode_kwargs: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _evaluate_subset(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - evaluate is overridden
        raise NotImplementedError

    def _calculate_descriptive_statistics_from_split(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError(f"{self.metadata.name} has no descriptive statistics")


def require_variant(model: Any, task: str) -> Any:
    """Word-level tasks need iso-bench's own encoder (vectors of character spans)."""
    from iso_bench.encoder import VariantEncoder

    if not isinstance(model, VariantEncoder):
        raise TypeError(
            f"{task} needs target-word vectors, which only iso-bench variants provide; "
            f"evaluate a model named '<model id>+<method>' (got {type(model).__name__})"
        )
    return model


def sentence_vectors(model: Any, texts: list[str], task: IsoTask, encode_kwargs: dict[str, Any]) -> Any:
    """Post-processed sentence vectors from an iso-bench variant, or from any mteb encoder."""
    import numpy as np

    from iso_bench.encoder import VariantEncoder

    if isinstance(model, VariantEncoder):
        return model.vectors(texts, task.metadata.name)
    from datasets import Dataset
    from mteb._create_dataloaders import create_dataloader

    loader = create_dataloader(Dataset.from_dict({"text": texts}), task_metadata=task.metadata,
                               batch_size=encode_kwargs.get("batch_size", 32))
    out = model.encode(loader, task_metadata=task.metadata, hf_split="test", hf_subset="default")
    return np.asarray(out, dtype=np.float64)
