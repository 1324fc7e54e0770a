"""Where datasets come from: their Hugging Face dataset repository, or a local mirror.

A mirror is a folder laid out like the hub, ``<dir>/<org>/<name>/`` (for example
``<dir>/mteb/stsbenchmark-sts/test.jsonl``), or holding such a folder as ``<dir>/hub/``. It is given
with ``--data-dir`` or the environment variable ``ISO_BENCH_DATA_DIR`` and is used whenever it holds
the task's repository. The same data directory holds the datasets that are not on the hub in their
release layout (``<dir>/wic/WiC_dataset/``, ...): see :mod:`iso_bench.kinds.base`. The source of
every dataset is recorded with the results: the hub repository and revision, or the mirror folder and
a SHA-256 of its files.

Example:
    >>> source = resolve_source("mteb/stsbenchmark-sts", "b0fddb5", data_dir="/data/hub")  # doctest: +SKIP
    >>> source.kind, source.checksum[:8]                                                    # doctest: +SKIP
    ('mirror', '3c1f...')
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA_DIR_ENV = "ISO_BENCH_DATA_DIR"


class DataNotFoundError(FileNotFoundError):
    """A dataset is neither in the local mirror nor reachable on the hub."""


class FitCorpusError(ValueError):
    """The fit corpus of a fitted method cannot be read or is unusable."""


@dataclass(frozen=True)
class DataSource:
    """Where one dataset was read from."""

    repo: str
    revision: str | None
    kind: str  # "mirror" or "hub"
    path: str  # the mirror folder, or the hub repository id
    checksum: str | None = None  # SHA-256 over the mirror's files

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "revision": self.revision,
            "source": self.kind,
            "path": self.path,
            "sha256": self.checksum,
        }


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


@lru_cache(maxsize=256)
def folder_checksum(folder: Path) -> str:
    """SHA-256 over the relative paths and contents of every file in ``folder``."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\x00")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def resolve_source(repo: str, revision: str | None, data_dir: str | Path | None = None) -> DataSource:
    """The mirror copy of ``repo`` when the mirror has it, else the hub repository."""
    root = mirror_dir(data_dir)
    for folder in (root / repo, root / "hub" / repo) if root is not None else ():
        if folder.is_dir():
            folder = folder.resolve()
            return DataSource(repo, revision, "mirror", str(folder), folder_checksum(folder))
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

    mteb's tasks read a hub repository or its mirror copy; iso-bench's own tasks read their release
    folder under the data directory. Raises :class:`DataNotFoundError` naming every place tried.
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
        try:
            task.load_data()
        except Exception as exc:  # noqa: BLE001 - datasets raises many kinds of errors for "not there"
            if source.kind == "mirror":
                raise DataNotFoundError(f"cannot read the mirror copy of {repo!r} at {source.path}: {exc}") from exc
            raise DataNotFoundError(not_found_message(repo, revision, data_dir, exc)) from exc
    return source.to_dict()


def get_task(name: str, data_dir: str | Path | None = None) -> Any:
    """``mteb.get_task(name)``, pointed at the local mirror when it holds the task's data, and loaded.

    Example:
        >>> task = get_task("STSBenchmark", "../shared/data/hub")       # doctest: +SKIP
        >>> mteb.evaluate(mteb.get_model("sentence-transformers/all-MiniLM-L6-v2+whiten-256"), task)  # doctest: +SKIP
    """
    import mteb

    task = mteb.get_task(name)
    use_source(task, data_dir)
    return task
