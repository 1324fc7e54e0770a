"""Where datasets come from: their Hugging Face dataset repository, or a local mirror.

A mirror is a folder laid out like the hub, ``<dir>/<org>/<name>/`` (for example
``<dir>/mteb/stsbenchmark-sts/test.jsonl``), or holding such a folder as ``<dir>/hub/``. It is given
with ``--data-dir`` or the environment variable ``ISO_BENCH_DATA_DIR`` and is used whenever it holds
the task's repository. The same data directory holds the datasets that are not on the hub in their
release layout (``<dir>/wic/WiC_dataset/``, ...): see :mod:`iso_bench.kinds.base`. The source of
every dataset is recorded with the results: the hub repository and revision, or the mirror folder and
a SHA-256 of its files. A mirror copy is checked row by row before it is loaded
(:mod:`iso_bench.data.mirror_check`), so a malformed file stops the run with a :class:`DataFormatError`
naming file, line and field.

Example:
    >>> source = resolve_source("mteb/stsbenchmark-sts", "b0fddb5", data_dir="/data/hub")  # doctest: +SKIP
    >>> source.kind, source.checksum[:8]                                                    # doctest: +SKIP
    ('mirror', '3c1f...')
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iso_bench.data.mirror_check import DataFormatError, check_mirror, row_spec  # noqa: F401 - DataFormatError named here too
from iso_bench.files import folder_checksum
from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "ISO_BENCH_DATA_DIR"
DOWNLOAD_ENV = "ISO_BENCH_DOWNLOAD_DIR"


class DataNotFoundError(IsoBenchError):
    """A dataset is neither in the local mirror nor reachable on the hub."""


@dataclass(frozen=True)
class DataSource:
    """Where one dataset was read from, and (once read) what: the splits and the SHA-256 of their rows."""

    repo: str
    revision: str | None
    kind: str  # "mirror" or "hub": the route, recorded, never part of a setup
    path: str  # the mirror folder, or the hub repository id
    checksum: str | None = None  # SHA-256 over the mirror's files
    splits: tuple[str, ...] = ()  # the splits read
    rows: str | None = None  # SHA-256 of their rows (:func:`rows_digest`): the same for the same data by any route
    within: str | None = None  # a mirror folder relative to the data directory (``mteb/sts12-sts``): what is recorded

    def to_dict(self) -> dict[str, Any]:
        """The record of the source: a mirror folder by its place in the data directory, never the machine's path.

        >>> DataSource("mteb/x", "r1", "mirror", "/home/me/data/mteb/x", "ab", within="mteb/x").to_dict()["path"]
        'mteb/x'
        """
        out = {"repo": self.repo, "revision": self.revision, "source": self.kind,
               "path": self.within or (self.repo if self.kind == "mirror" else self.path), "sha256": self.checksum}
        return {**out, "splits": list(self.splits), "rows_sha256": self.rows} if self.rows else out


def rows_digest(dataset: Any, splits: tuple[str, ...]) -> str:
    """The SHA-256 of the rows of ``splits`` in ``dataset`` (mteb's ``task.dataset``: splits, or subsets of
    splits; a retrieval split's corpus, queries and judgements), whatever file format or route they came by:
    every row as canonical JSON (keys sorted; a whole float as an int), subsets and columns in sorted order.

    >>> from datasets import Dataset, DatasetDict
    >>> one = DatasetDict({"test": Dataset.from_dict({"a": ["x"], "s": [4.0]}), "train": Dataset.from_dict({"a": []})})
    >>> rows_digest(one, ("test",)) == rows_digest({"test": Dataset.from_dict({"s": [4], "a": ["x"]})}, ("test",))
    True
    """
    digest = hashlib.sha256()

    def value(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
            return int(v)
        if isinstance(v, dict):
            return {str(k): value(x) for k, x in v.items()}
        return [value(x) for x in v] if isinstance(v, (list, tuple)) else v

    def walk(node: Any, top: bool) -> None:
        if hasattr(node, "iter") and hasattr(node, "column_names"):  # a datasets.Dataset: its rows, batch by batch
            columns = sorted(node.column_names)
            for batch in node.select_columns(columns).iter(batch_size=4096):
                for row in zip(*(batch[c] for c in columns), strict=True):
                    digest.update(json.dumps(dict(zip(columns, map(value, row), strict=True)), sort_keys=True,
                                             ensure_ascii=False, default=str).encode("utf-8") + b"\n")
        elif isinstance(node, Mapping):
            keys = sorted(node, key=str)
            if top and any(k in splits for k in keys):
                keys = [k for k in keys if k in splits]  # the splits read, not every split of the folder
            for key in keys:
                digest.update(f"\x00{key}\x00".encode())
                walk(node[key], top and not any(k in splits for k in node))
        elif node is not None:
            digest.update(json.dumps(value(node), sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))

    walk(dataset, True)
    return digest.hexdigest()


def mirror_dir(explicit: str | Path | None = None) -> Path | None:
    """The mirror folder: the explicit argument, else ``$ISO_BENCH_DATA_DIR``, else none."""
    value = explicit if explicit is not None else os.environ.get(DATA_DIR_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_dir():
        raise DataNotFoundError(
            f"data directory {path} does not exist; pass --data-dir (or set {DATA_DIR_ENV}) to a folder "
            "laid out as <dir>/<org>/<name>/"
        )
    return path


def resolve_source(repo: str, revision: str | None, data_dir: str | Path | None = None) -> DataSource:
    """The mirror copy of ``repo`` when the mirror has it, else the hub repository."""
    root = mirror_dir(data_dir)
    for within in (repo, f"hub/{repo}") if root is not None else ():
        if (root / within).is_dir():
            folder = (root / within).resolve()
            return DataSource(repo, revision, "mirror", str(folder), folder_checksum(folder), within=within)
    return DataSource(repo, revision, "hub", repo)


def not_found_message(repo: str, revision: str | None, data_dir: str | Path | None, cause: BaseException) -> str:
    root = os.fspath(data_dir) if data_dir else os.environ.get(DATA_DIR_ENV)
    mirror = f"{Path(root) / repo}" if root else f"a local mirror (none given: --data-dir or {DATA_DIR_ENV})"
    return (
        f"dataset {repo!r} was found neither in {mirror} nor on the Hugging Face hub "
        f"(datasets/{repo}@{revision or 'main'}: {type(cause).__name__}: {cause}). "
        "Point --data-dir at a mirror that holds <dir>/" + repo + "/, or allow hub access."
    )


def use_source(task: Any, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Point a task at its data source and load it; returns the source record for the results.

    mteb's tasks read a hub repository or its mirror copy; iso-bench's own tasks read their release folder
    under the data directory. The record of an mteb task names the splits read and the SHA-256 of their rows
    (:func:`rows_digest`), the same whether the data came from the mirror or the hub. Raises
    :class:`DataNotFoundError` naming every place tried. A mirror copy is checked before it is loaded
    (:func:`iso_bench.data.mirror_check.check_mirror`): a bad row raises :class:`DataFormatError`
    ``file:line: ...`` and nothing is loaded. Should the datasets library still fail on the mirror copy, the
    error names the folder and the library's reason.
    """
    if hasattr(task, "source_record"):  # an iso-bench task
        if not task.data_loaded:
            task.data_dir = data_dir
            task.load_data()
        return task.source_record()
    meta = task.metadata
    repo, revision = meta.dataset["path"], meta.dataset.get("revision")
    source = getattr(task, "_iso_bench_source", None)
    if source is None:
        source = resolve_source(repo, revision, data_dir)
        if source.kind == "mirror":
            dataset = {**meta.dataset, "path": source.path}
            task.metadata = meta.model_copy(update={"dataset": dataset})
        task._iso_bench_source = source
    if not task.data_loaded:
        if source.kind == "mirror":
            check_mirror(Path(source.path), row_spec(task), source.checksum)
        try:
            task.load_data()
        except Exception as exc:  # noqa: BLE001 - datasets raises many kinds of errors, for "not there" and "bad"
            if source.kind == "mirror":
                raise mirror_load_error(repo, source.path, exc) from exc
            raise DataNotFoundError(not_found_message(repo, revision, data_dir, exc)) from exc
    # what was read, by content: the same by any route
    if source.rows is None and getattr(task, "dataset", None) is not None:
        splits = tuple(meta.eval_splits)
        source = replace(source, splits=splits, rows=rows_digest(task.dataset, splits))
        task._iso_bench_source = source
    return source.to_dict()


def error_chain(exc: BaseException, limit: int = 4) -> str:
    """``Type: message`` of ``exc`` and the exceptions that caused it, outermost first.

    The datasets library wraps the real reason ("JSON parse error: ... in row 2") in a generic
    "An error occurred while generating the dataset"; the chain keeps both.
    """
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(parts) < limit:
        seen.add(id(current))
        message = str(current)
        parts.append(f"{type(current).__name__}: {message}" if message else type(current).__name__)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return " <- caused by ".join(parts)


def mirror_load_error(repo: str, folder: str, exc: BaseException) -> IsoBenchError:
    """The error for a mirror copy the datasets library failed to load: :class:`DataNotFoundError` when
    it found no data files there, else :class:`DataFormatError`; both name the folder and the reason."""
    reason = error_chain(exc)
    if isinstance(exc, FileNotFoundError):
        return DataNotFoundError(
            f"{folder}: the datasets library finds no data of {repo!r} in this mirror folder ({reason}); "
            f"put the repository's data files there, or remove the folder to read {repo} from the hub"
        )
    return DataFormatError(
        f"{folder}: the datasets library cannot load this mirror copy of {repo!r} ({reason}); "
        "fix or replace the files in that folder"
    )


def get_task(name: str, data_dir: str | Path | None = None) -> Any:
    """``mteb.get_task(name)``, pointed at the local mirror when it holds the task's data, and loaded.

    Example:
        >>> task = get_task("STSBenchmark", "../shared/data/hub")       # doctest: +SKIP
        >>> mteb.evaluate(mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten-256"), task)  # doctest: +SKIP
    """
    import mteb  # lazily: mteb takes seconds to import

    task = mteb.get_task(name)
    use_source(task, data_dir)
    return task


@dataclass(frozen=True)
class RawSource:
    """A dataset in its public release layout (the data of an iso-bench task card).

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
