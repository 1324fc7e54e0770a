"""What a cache folder holds, and pruning it: ``iso-bench cache list`` and ``iso-bench cache prune``.

A cache folder holds one namespace per model, revision and extraction (``<model>/<revision>/<extraction>/``,
see :mod:`iso_bench.vectors.store`): shards of raw vectors by kind (sentence, tokens, span), their index, and the fits
(``fits/``). :func:`namespaces` lists them with their sizes; :func:`prune` removes shards (by model, by age,
or the oldest first down to a size) and fits, each namespace under its encode lock, so that no shard another
process is writing or indexing is touched; the index forgets what was removed, and those texts are encoded
again when a run asks for them.

Example:
    >>> [ns.model for ns in namespaces("~/.cache/iso_bench")]                  # doctest: +SKIP
    ['sentence-transformers__all-MiniLM-L6-v2']
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from iso_bench.registry import IsoBenchError
from iso_bench.vectors.index import ShardIndex
from iso_bench.vectors.store import LOCK_NAME, fcntl

KINDS = ("sentence", "tokens", "span", "pool")
UNKNOWN_TASK = "(task not recorded)"  # a shard indexed from disk, written by a process killed before indexing it


class CacheError(IsoBenchError, ValueError):
    """A cache folder or a prune request that cannot be used; the message says what to give."""


@dataclass
class Namespace:
    """One namespace of a cache folder: what it holds, per kind ``{kind: (shards, texts, bytes)}``."""

    folder: Path
    model: str
    revision: str
    extraction: str
    kinds: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    tasks: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)  # (kind, task) -> the same
    fits: tuple[int, int] = (0, 0)  # (files, bytes)
    newest: float = 0.0  # the last write, seconds since the epoch

    @property
    def bytes(self) -> int:
        return sum(b for _, _, b in self.kinds.values()) + self.fits[1]


def namespaces(root: str | Path) -> list[Namespace]:
    """Every namespace under the cache folder ``root``, with what it holds (indexing shards it finds
    unindexed, as a run would)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise CacheError(f"{root}: no such cache folder (give --cache-dir, or set ISO_BENCH_CACHE)")
    out = []
    for meta in sorted(root.glob("*/*/*/meta.json")):
        folder = meta.parent
        ns = Namespace(folder, folder.parents[1].name, folder.parent.name, folder.name)
        index = ShardIndex(folder)
        try:
            for kind in KINDS:
                if any(folder.glob(f"{kind}-*.npz")) or index.exists():
                    index.sync(kind)
            for kind, task, shards, entries, size, newest in index.summary():
                ns.tasks[kind, task or UNKNOWN_TASK] = (shards, entries or 0, size or 0)
                before = ns.kinds.get(kind, (0, 0, 0))
                ns.kinds[kind] = (before[0] + shards, before[1] + (entries or 0), before[2] + (size or 0))
                ns.newest = max(ns.newest, newest or 0.0)
        finally:
            index.close()
        fits = [p for p in (folder / "fits").glob("*.npz")]
        ns.fits = (len(fits), sum(p.stat().st_size for p in fits))
        ns.newest = max([ns.newest, *(p.stat().st_mtime for p in fits)])
        out.append(ns)
    return out


def describe(root: str | Path) -> str:
    """The table ``iso-bench cache list`` prints: per namespace, kind and task, texts, shards and bytes. A
    text two tasks share is counted under the task that encoded it first."""
    from tabulate import tabulate  # lazily: only the renderers need it

    rows = []
    every = namespaces(root)
    for ns in every:
        for (kind, task), (shards, texts, size) in sorted(ns.tasks.items()):
            where = _size(size) if shards else "in pool shards"  # token vectors kept as runs of the pooled rows
            rows.append([ns.model, ns.revision[:12], ns.extraction, kind, task, f"{texts:,}", shards, where])
        if ns.fits[0]:
            rows.append([ns.model, ns.revision[:12], ns.extraction, "fits", "", f"{ns.fits[0]:,} files", "",
                         _size(ns.fits[1])])
    if not rows:
        return f"{Path(root).expanduser()}: empty"
    total = sum(ns.bytes for ns in every)
    table = tabulate(rows, headers=["model", "revision", "extraction", "kind", "task", "texts", "shards", "size"])
    return f"{table}\n\n{_size(total)} in {Path(root).expanduser()}"


def prune(root: str | Path, *, model: str | None = None, older_than_days: float | None = None,
          max_bytes: int | None = None, dry_run: bool = False) -> list[Path]:
    """Remove shards and fits: those of ``model`` (its hub id or folder name), those last written more than
    ``older_than_days`` ago, then the oldest first until the folder holds at most ``max_bytes``. Each
    namespace is pruned under its encode lock. Returns what was (``dry_run``: would be) removed."""
    if model is None and older_than_days is None and max_bytes is None:
        raise CacheError("say what to prune: --model, --older-than DAYS and/or --max-size SIZE")
    every = namespaces(root)
    want = None if model is None else model.replace("/", "__")
    if want is not None and not any(ns.model == want for ns in every):
        known = ", ".join(sorted({ns.model.replace("__", "/") for ns in every})) or "none"
        raise CacheError(f"--model {model}: not in the cache (models there: {known})")
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    files = []  # (written, bytes, namespace, path, kind or "fit")
    for ns in every:
        index = ShardIndex(ns.folder)
        try:
            files += [(written, size, ns, ns.folder / name, kind) for name, kind, size, written in index.shards()]
        finally:
            index.close()
        files += [(p.stat().st_mtime, p.stat().st_size, ns, p, "fit") for p in (ns.folder / "fits").glob("*.npz")]
    files.sort(key=lambda f: (f[0], str(f[3])))
    doomed = [f for f in files if (want is not None and f[2].model == want) or (cutoff is not None and f[0] < cutoff)]
    if max_bytes is not None:
        left = sum(f[1] for f in files) - sum(f[1] for f in doomed)
        for f in files:
            if left <= max_bytes:
                break
            if f not in doomed:
                doomed.append(f)
                left -= f[1]
    if dry_run:
        return [f[3] for f in doomed]
    removed = []
    for ns in {id(f[2]): f[2] for f in doomed}.values():
        mine = [f for f in doomed if f[2] is ns]
        with _locked(ns.folder):
            index = ShardIndex(ns.folder)
            try:
                shards = [f[3] for f in mine if f[4] != "fit"]
                index.drop([p.name for p in shards])
                for f in mine:
                    f[3].unlink(missing_ok=True)
                    removed.append(f[3])
            finally:
                index.close()
    return removed


def parse_size(text: str) -> int:
    """``"20G"``, ``"500M"``, ``"1.5T"``, ``"800000"`` (bytes) as bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise CacheError(f"--max-size {text!r}: not a size; give bytes or a number with K, M, G or T") from None


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The namespace's encode lock (see :meth:`iso_bench.vectors.store.EmbeddingStore._encode_lock`)."""
    if fcntl is None:
        yield
        return
    with open(folder / LOCK_NAME, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
