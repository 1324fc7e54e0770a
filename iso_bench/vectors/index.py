"""The index of a raw-vector namespace: from a text's 32-byte key to the shard and rows that hold its vector,
in ``<namespace>/index.sqlite`` (the standard library's SQLite: transactional, shared by processes).

A shard is written whole first, then indexed in one transaction: a process killed between the two leaves a
shard the index does not know, which :meth:`ShardIndex.sync` finds on the next run, verifies whole (its
SHA-256) and indexes; so does a cache written before the index existed. An entry whose shard is gone is
dropped; a damaged shard is set aside and its entries dropped (:meth:`ShardIndex.drop`), so its texts are
encoded again. An unreadable index file is set aside and rebuilt from the shards. Nothing is trusted
without a check: every entry carries the CRC-32 of its rows, checked when they are read.

An entry may lie in a shard of another kind (:meth:`ShardIndex.refer`): a text's token vectors, where they are a
run of the rows its pooling reads (a mean pooling reads them all, the special tokens' rows around them), are that
run of the pool shard, with their own CRC-32, so the store writes them once. They are read, checked and dropped
with that shard; a pool shard indexed from disk brings back its own entries only, and the token vectors of its
texts are encoded again when asked for.

Example:
    >>> import tempfile, pathlib
    >>> from iso_bench.vectors.shards import write_shard
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> index = ShardIndex(folder)
    >>> info = write_shard(folder / "sentence-a.npz", [b"k" * 32], [np.ones(4, np.float32)])
    >>> index.add("sentence", "sentence-a.npz", info)
    >>> index.lookup("sentence", [b"k" * 32, b"x" * 32])[b"k" * 32][:3]
    ('sentence-a.npz', 0, 1)
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.vectors.shards import FLOAT32, CacheCorruptError, ShardInfo, index_shard

logger = logging.getLogger(__name__)

INDEX_NAME = "index.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS shards (name TEXT PRIMARY KEY, kind TEXT NOT NULL, data_offset INTEGER NOT NULL,
                                   rows INTEGER NOT NULL, dim INTEGER NOT NULL, ndim INTEGER NOT NULL,
                                   bytes INTEGER NOT NULL, entries INTEGER NOT NULL, written REAL NOT NULL,
                                   task TEXT, storage TEXT);
CREATE TABLE IF NOT EXISTS entries (kind TEXT NOT NULL, key BLOB NOT NULL, shard TEXT NOT NULL,
                                    start INTEGER NOT NULL, stop INTEGER NOT NULL, crc INTEGER NOT NULL,
                                    PRIMARY KEY (kind, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_by_shard ON entries (shard);
"""
_BATCH = 50_000  # keys looked up per query
_KNOWN_LIMIT = 1_000_000  # entries this process remembers (about 200 bytes each); beyond it, it forgets them all

def text_key(text: str, span: tuple[int, int] | None = None, context: str | None = None) -> bytes:
    """The 32-byte cache key of a text (and a character span within it), encoded under ``context`` (the
    prompt string the backbone resolved; none or empty: the text alone).

    >>> text_key("a cat", context="query: ") == hashlib.sha256(b"query: \\x00a cat").digest()
    True
    """
    h = hashlib.sha256((f"{context}\x00{text}" if context else text).encode("utf-8"))
    if span is not None:
        h.update(f"\x00{span[0]}:{span[1]}".encode())
    return h.digest()


class ShardIndex:
    """The index of one namespace folder (see the module). Opened lazily per process; every method is safe
    to call from several processes at once (SQLite's own locks; the store's writes also hold the namespace's
    encode lock)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / INDEX_NAME
        self._local = threading.local()
        self._seen: dict[str, set[str]] = {}  # per kind: names of shards this process knows are indexed
        # per kind: the entries this process has indexed or looked up, key -> (shard, start, stop, crc): an entry
        # never changes while its shard is indexed, so the variants of a run ask SQLite for each key once
        self._known: dict[str, dict[bytes, tuple[str, int, int, int]]] = {}
        self._known_lock = threading.Lock()

    # ---- the connection ----------------------------------------------------------------------------
    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection (SQLite's are not shared between threads, nor across a fork)."""
        held = getattr(self._local, "db", None)
        if held is None or held[0] != os.getpid():
            self._local.db = held = (os.getpid(), self._open())
        return held[1]

    def _open(self) -> sqlite3.Connection:
        for attempt in (1, 2):
            db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
            try:
                db.executescript(_SCHEMA)
                db.execute("SELECT count(*) FROM shards").fetchone()
                columns = {row[1] for row in db.execute("PRAGMA table_info(shards)")}
                if "task" not in columns:
                    db.execute("ALTER TABLE shards ADD COLUMN task TEXT")  # an index of iso-bench 0.2.0.dev
                if "storage" not in columns:  # an index written before 16-bit shards: every shard is float32
                    db.execute("ALTER TABLE shards ADD COLUMN storage TEXT")
                return db
            except sqlite3.DatabaseError as exc:
                db.close()
                if attempt == 2:
                    raise
                bad = self.path.with_name(INDEX_NAME + ".bad")
                logger.warning("unreadable cache index %s (%s): set aside as %s and rebuilt from the shards",
                               self.path, exc, bad.name)
                self.path.replace(bad)
        raise AssertionError("unreachable")

    def close(self) -> None:
        held = getattr(self._local, "db", None)
        if held is not None and held[0] == os.getpid():
            held[1].close()
        self._local.db = None

    def exists(self) -> bool:
        return self.path.is_file()

    # ---- writing -----------------------------------------------------------------------------------
    def add(self, kind: str, name: str, info: ShardInfo, written: float | None = None,
            task: str | None = None) -> None:
        """Index a shard written whole (one transaction): its entries, each key once (a key already indexed
        in another shard keeps that one); ``task``: the task whose texts it holds, where known. A shard's storage
        (:data:`iso_bench.vectors.shards.STORAGES`) is recorded, NULL for float32."""
        size = (self.folder / name).stat().st_size if (self.folder / name).exists() else 0
        starts, stops = info.offsets[:-1].tolist(), info.offsets[1:].tolist()
        self._seen.setdefault(kind, set()).add(name)
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO shards (name, kind, data_offset, rows, dim, ndim, bytes, entries, "
                       "written, task, storage) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (name, kind, info.data_offset, info.rows, info.dim, info.ndim, size, len(info.keys),
                        time.time() if written is None else written, task,
                        None if info.storage == FLOAT32 else info.storage))
            db.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                           zip([kind] * len(info.keys), info.keys, [name] * len(info.keys), starts, stops,
                               info.crcs, strict=True))
        self._remember(kind, zip(info.keys, zip([name] * len(info.keys), starts, stops, info.crcs, strict=True),
                                 strict=True))

    def refer(self, kind: str, entries: Sequence[tuple[bytes, str, int, int, int]]) -> None:
        """Index entries of ``kind`` whose rows lie in an indexed shard of another kind (one transaction): ``(key,
        shard, start, stop, crc)``, each key once as :meth:`add` does. A text's token vectors are such a run of the
        rows its pooling reads: kept once on disk, read in place from that shard and checked against their own
        CRC-32, and dropped with it (:meth:`drop` forgets every entry of a shard, whatever its kind)."""
        if not entries:
            return
        with self._transaction() as db:
            db.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?)",
                           ((kind, key, shard, start, stop, crc) for key, shard, start, stop, crc in entries))
        self._remember(kind, ((key, (shard, start, stop, crc)) for key, shard, start, stop, crc in entries))

    def drop(self, names: Sequence[str]) -> None:
        """Forget shards (gone, damaged or pruned) and their entries."""
        for seen in self._seen.values():
            seen.difference_update(names)
        gone = set(names)
        with self._known_lock:
            for kind, known in self._known.items():
                self._known[kind] = {k: v for k, v in known.items() if v[0] not in gone}
        with self._transaction() as db:
            for name in names:
                db.execute("DELETE FROM entries WHERE shard = ?", (name,))
                db.execute("DELETE FROM shards WHERE name = ?", (name,))

    def sync(self, kind: str) -> list[Path]:
        """Make the index agree with the shard files of ``kind`` on disk: a shard it does not know (written by a
        process killed before indexing it, or by an older iso-bench) is verified whole and indexed; a damaged
        one is set aside as ``.npz.bad``; the entries of a shard that is gone are dropped. Returns the shards
        set aside. Cost: a listing of the folder; the index is asked only about names this process has not
        seen indexed, and each new shard is read once."""
        on_disk = {p.name for p in self.folder.glob(f"{kind}-*.npz")}
        seen = self._seen.setdefault(kind, set())
        if not seen:  # the first look of this process: what the index holds, and what of it is gone
            seen |= {name for (name,) in self.db.execute("SELECT name FROM shards WHERE kind = ?", (kind,))}
            if seen - on_disk:
                self.drop(sorted(seen - on_disk))
                seen &= on_disk
        new = sorted(on_disk - seen)
        if new:  # indexed by another process meanwhile, or never indexed
            marks = ",".join("?" * len(new))
            seen |= {name for (name,) in self.db.execute(f"SELECT name FROM shards WHERE name IN ({marks})", new)}
        bad = []
        for name in sorted(on_disk - seen):
            path = self.folder / name
            try:
                info = index_shard(path)
            except CacheCorruptError as exc:
                if path.exists():
                    bad.append(set_aside(path, exc))
                continue
            self.add(kind, name, info, written=path.stat().st_mtime)
        return [p for p in bad if p is not None]

    # ---- reading -----------------------------------------------------------------------------------
    def lookup(self, kind: str, keys: Sequence[bytes]) -> dict[bytes, tuple[str, int, int, int]]:
        """``{key: (shard, start, stop, crc)}`` of the ``keys`` the index holds (the others are left out)."""
        known = self._known.get(kind, {})
        out: dict[bytes, tuple[str, int, int, int]] = {}
        asked = []
        for key in keys:
            hit = known.get(key)
            if hit is None:
                asked.append(key)
            else:
                out[key] = hit
        found: dict[bytes, tuple[str, int, int, int]] = {}
        for i in range(0, len(asked), _BATCH):
            batch = asked[i:i + _BATCH]
            with self._transaction(immediate=False) as db:  # a temporary table: no lock on the index
                db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (key BLOB PRIMARY KEY) WITHOUT ROWID")
                db.execute("DELETE FROM wanted")
                db.executemany("INSERT OR IGNORE INTO wanted VALUES (?)", ((k,) for k in batch))
                rows = db.execute("SELECT e.key, e.shard, e.start, e.stop, e.crc FROM wanted w JOIN entries e "
                                  "ON e.kind = ? AND e.key = w.key", (kind,)).fetchall()
            found.update((key, (shard, start, stop, crc)) for key, shard, start, stop, crc in rows)
        self._remember(kind, found.items())
        out.update(found)
        return out

    def _remember(self, kind: str, entries: Any) -> None:
        """Keep ``(key, (shard, start, stop, crc))`` entries of ``kind`` for :meth:`lookup` (a key known already
        keeps the entry it has); all are forgotten past :data:`_KNOWN_LIMIT`."""
        with self._known_lock:
            known = self._known.setdefault(kind, {})
            for key, entry in entries:
                known.setdefault(key, entry)
            if sum(map(len, self._known.values())) > _KNOWN_LIMIT:
                self._known.clear()

    def shard(self, name: str) -> tuple[int, int, int, int, str] | None:
        """``(data_offset, rows, dim, ndim, storage)`` of an indexed shard; None when it is not indexed."""
        found = self.db.execute("SELECT data_offset, rows, dim, ndim, storage FROM shards WHERE name = ?",
                                (name,)).fetchone()
        return None if found is None else (*found[:4], found[4] or FLOAT32)

    def summary(self) -> list[tuple[str, str | None, int, int, int, float]]:
        """Per kind and task: ``(kind, task, shards, entries, bytes, newest write time)``; the task is None for
        shards indexed from disk (written by a process killed before indexing them). Entries kept in a shard of
        another kind (:meth:`refer`) count under their own kind, with no shards and no bytes of their own."""
        return self.db.execute(
            "SELECT kind, task, sum(shards), sum(entries), sum(bytes), max(written) FROM ("
            "SELECT kind, task, 1 AS shards, entries, bytes, written FROM shards UNION ALL "
            "SELECT e.kind, s.task, 0, 1, 0, s.written FROM entries e JOIN shards s ON s.name = e.shard "
            "WHERE e.kind != s.kind) GROUP BY kind, task ORDER BY kind, task").fetchall()

    def shards(self) -> list[tuple[str, str, int, float]]:
        """Every indexed shard: ``(name, kind, bytes, written)``, oldest first."""
        return self.db.execute("SELECT name, kind, bytes, written FROM shards ORDER BY written, name").fetchall()

    # ---- internals ---------------------------------------------------------------------------------
    def _transaction(self, immediate: bool = True) -> _Transaction:
        return _Transaction(self.db, immediate)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error): one writer at a time, all or nothing;
    ``immediate=False``: a plain ``BEGIN``, for work on this connection's temporary tables."""

    def __init__(self, db: sqlite3.Connection, immediate: bool = True) -> None:
        self.db, self.immediate = db, immediate

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE" if self.immediate else "BEGIN")
        return self.db

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


def set_aside(path: Path, problem: Exception) -> Path | None:
    """Report a damaged shard and rename it ``<name>.npz.bad``; None when another process already did."""
    logger.warning("damaged cache shard ignored and set aside, its vectors will be recomputed: %s", problem)
    target = path.with_suffix(".npz.bad")
    try:
        path.replace(target)
    except FileNotFoundError:
        return None
    return target


def group_by_shard(found: dict[bytes, tuple[str, int, int, int]], keys: Sequence[bytes]
                   ) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray, list[int]]]:
    """For each shard among ``found``: ``(shard, positions in keys, starts, stops, crcs)`` of the ``keys``
    it holds (a key asked for twice appears at both of its positions)."""
    by_shard: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        hit = found.get(key)
        if hit is not None:
            by_shard.setdefault(hit[0], []).append(i)
    for name, positions in by_shard.items():
        hits = [found[keys[i]] for i in positions]
        yield (name, np.array(positions, dtype=np.int64), np.array([h[1] for h in hits], dtype=np.int64),
               np.array([h[2] for h in hits], dtype=np.int64), [h[3] for h in hits])
