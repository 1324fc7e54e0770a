"""The raw-vector cache: every text is encoded once per (model, revision, extraction, prompt) and reused
by every variant and every task, in memory within a run and on disk across runs.

The prompt is the string mteb's implementation of a model puts before a text for a task and prompt type
(e5's ``"query: "``, ``"passage: "``): the backbone resolves it (``backbone.prompt_context``) and it becomes
part of the text's key, so a query and a passage with the same text are two entries; a text encoded with
no prompt keeps the plain key ``sha256(text)``.

On disk a namespace folder ``<root>/<model>/<revision>/<extraction>/`` holds ``meta.json`` and shard
files ``<kind>-<id>.npz``, written atomically (temporary file, then rename) and carrying a SHA-256 of
their content. A shard that cannot be read or whose checksum fails is reported, moved aside and its
vectors recomputed: a damaged cache is never trusted. No pickle is involved (``allow_pickle=False``).
Temporary files (their names begin with a dot) left by a process killed while writing are never read
as shards.

Several processes may share a namespace at the same time: each chunk of missing texts is encoded and
written while the process holds an exclusive lock on the namespace's ``encode.lock`` file, and after
taking the lock a store first reads the shards other processes have written since it last looked, so
that a text is encoded once however many runs ask for it (see :meth:`EmbeddingStore._encode_lock`).

Example:
    >>> store = EmbeddingStore(backbone, cache_dir="~/.cache/iso_bench")   # doctest: +SKIP
    >>> X = store.sentences(["a cat", "a dog"])                             # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.faults import fault_point
from iso_bench.files import atomic_write_text, cache_not_written, remove_stale_temporaries, replacing
from iso_bench.registry import IsoBenchError

try:
    import fcntl
except ImportError:  # Windows: no advisory file locks, see EmbeddingStore._encode_lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_ENV = "ISO_BENCH_CACHE"
FLUSH_EVERY = 2048  # texts encoded between two shard writes: a crash loses at most this much work
RECENT = 4  # sentence matrices kept for the next variant (a task's two columns, queries and documents)
RECENT_BYTES = 1 << 28  # and at most this many bytes of them: a large corpus's matrix is stacked per request
LOCK_NAME = "encode.lock"  # in each namespace folder: held while a chunk is encoded and its shards written

Item = tuple[bytes, str, tuple[int, int] | None]  # (key, text, span) of a vector to compute


def default_cache_dir() -> Path:
    """``$ISO_BENCH_CACHE``, else ``~/.cache/iso_bench``."""
    env = os.environ.get(DEFAULT_CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "iso_bench"


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


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "__", text).strip("_") or "model"


def _digest(keys: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> np.ndarray:
    h = hashlib.sha256()
    for arr in (keys, offsets, data):
        h.update(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))  # the bytes in place, not a copy
    return np.frombuffer(h.digest(), dtype=np.uint8)


class CacheCorruptError(IsoBenchError, RuntimeError):
    """A shard failed its checksum or could not be parsed."""


def write_shard(path: Path, keys: list[bytes], arrays: list[np.ndarray]) -> None:
    """Write vectors (each ``(dim,)`` or ``(n_i, dim)``) atomically with a checksum.

    The file is what ``np.savez`` writes (an uncompressed zip of ``.npy`` members), streamed into its
    temporary file member by member: no second copy of a shard that may be 100s of MB is made in memory."""
    dim = arrays[0].shape[-1]
    rows = [np.asarray(a, dtype=np.float32).reshape(-1, dim) for a in arrays]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    data = np.concatenate(rows, axis=0) if rows else np.zeros((0, dim), np.float32)
    key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
    members = {"keys": key_arr, "offsets": offsets, "data": data, "ndim": np.array([arrays[0].ndim], dtype=np.int64),
               "digest": _digest(key_arr, offsets, data)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)
            if name == "data":  # the vectors are in the temporary file, its checksum and directory are not
                archive.fp.flush()
                fault_point("shard-write")


def read_shard(path: Path) -> dict[bytes, np.ndarray]:
    """Read and verify a shard; raises :class:`CacheCorruptError` when it is damaged."""
    try:
        with np.load(path, allow_pickle=False) as z:
            keys, offsets, data, ndim, digest = (z[k] for k in ("keys", "offsets", "data", "ndim", "digest"))
    except Exception as exc:  # noqa: BLE001 - any parse failure means a damaged file
        raise CacheCorruptError(f"{path}: unreadable ({exc})") from exc
    if not np.array_equal(_digest(keys, offsets, data), digest):
        raise CacheCorruptError(f"{path}: checksum mismatch")
    if len(offsets) != len(keys) + 1 or offsets[-1] != len(data):
        raise CacheCorruptError(f"{path}: inconsistent offsets")
    one = int(ndim[0]) == 1
    out = {}
    for i in range(len(keys)):
        block = data[offsets[i] : offsets[i + 1]]
        out[keys[i].tobytes()] = block[0] if one else block
    return out


class EmbeddingStore:
    """Raw vectors of one backbone, computed once per text and kept in memory and on disk.

    Args:
        backbone: the :class:`~iso_bench.backbone.Backbone` that computes missing vectors.
        cache_dir: root of the disk cache; ``None`` keeps vectors in memory only.
        kinds: the vector kinds computed together on every forward pass. A run that has token-level
            variants asks for ``("sentence", "tokens")`` so that one pass serves both. Kinds the backbone
            cannot make (``backbone.kinds``: a model without hidden states has only ``sentence``) are
            computed only when asked for, and then the backbone's error says why it cannot.
        batch_size: texts per forward pass.
        progress: show progress bars.
        flush_every: texts encoded between two shard writes (and between two turns of the namespace
            lock when several processes share the cache).
    """

    def __init__(
        self,
        backbone: Any,
        cache_dir: str | Path | None = None,
        *,
        kinds: Sequence[str] = ("sentence",),
        batch_size: int = 32,
        progress: bool = True,
        flush_every: int = FLUSH_EVERY,
    ) -> None:
        self.backbone = backbone
        self.kinds = tuple(dict.fromkeys(kinds))
        self.batch_size = batch_size
        self.progress = progress
        self.flush_every = max(1, int(flush_every))
        self._mem: dict[str, dict[bytes, np.ndarray]] = {}
        self._loaded: set[str] = set()
        self._seen: set[str] = set()  # names of the shard files already read (or written) by this store
        self._recent: dict[tuple[int, bytes], np.ndarray] = {}  # the last sentence matrices (see sentences)
        self.stats = {"computed": 0, "reused": 0}
        self.folder: Path | None = None
        if cache_dir is not None:
            info = backbone.describe()
            self.folder = (
                Path(cache_dir).expanduser()
                / _slug(info["model"])
                / _slug(str(info["revision"]))
                / _slug(backbone.extraction.key() if hasattr(backbone, "extraction") else "default")
            )
            meta = self.folder / "meta.json"
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                remove_stale_temporaries(self.folder)  # what a writer killed mid-write left
                if not meta.exists():
                    atomic_write_text(meta, json.dumps(info, indent=2, sort_keys=True))
            except OSError as exc:
                cache_not_written(meta, exc)
                if not self.folder.is_dir():  # nothing to read either: vectors live in memory only
                    self.folder = None

    # ---- public API -------------------------------------------------------------------------------
    # ``task_metadata`` and ``prompt_type`` are what mteb hands an encoder: the task being evaluated and
    # PromptType.query / .document (retrieval) or None. A backbone that adds prompts resolves them into the
    # prompt string, which is then part of the key and of the encoding; others ignore them.

    def sentences(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
                  prompt_type: Any = None) -> np.ndarray:
        """Pooled sentence vectors, shape ``(len(texts), dim)``, read-only.

        The variants of a run ask for the same texts one after another (each of a task's columns, once per
        variant): the last few matrices are kept, found again by one digest of the texts instead of a key per
        text, and shared (hence read-only: a method never writes into its input)."""
        texts = list(texts)
        where = self._where(task_metadata, prompt_type)
        h = hashlib.sha256(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)).tobytes())
        h.update("".join([where[0] or "", "\x00", *texts]).encode("utf-8"))  # the lengths tell the texts apart
        memo = (len(texts), h.digest())
        if memo in self._recent:
            self.stats["reused"] += len(texts)
            self._recent[memo] = self._recent.pop(memo)  # the most recent last
            return self._recent[memo]
        vecs = self._get("sentence", texts, None, desc, where)
        X = np.stack(vecs) if vecs else np.zeros((0, self.backbone.dim), np.float32)
        X.flags.writeable = False
        self._recent[memo] = X
        while len(self._recent) > RECENT or sum(m.nbytes for m in self._recent.values()) > RECENT_BYTES:
            del self._recent[next(iter(self._recent))]  # the oldest (X itself, alone and over the bytes)
        return X

    def tokens(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
               prompt_type: Any = None) -> list[np.ndarray]:
        """Token vectors without special (or prompt) tokens, one ``(n_tokens, dim)`` array per text."""
        return self._get("tokens", list(texts), None, desc, self._where(task_metadata, prompt_type))

    def spans(self, texts: Sequence[str], spans: Sequence[tuple[int, int]], desc: str = "encoding", *,
              task_metadata: Any = None, prompt_type: Any = None) -> np.ndarray:
        """The mean sub-token vector of each character span, shape ``(len(texts), dim)``.

        ``texts[i]`` is the text that holds ``spans[i]``; a text that holds several spans is encoded once.
        """
        where = self._where(task_metadata, prompt_type)
        vecs = self._get("span", list(texts), [tuple(s) for s in spans], desc, where)
        return np.stack(vecs) if vecs else np.zeros((0, self.backbone.dim), np.float32)

    def prompt(self, task_metadata: Any = None, prompt_type: Any = None) -> str | None:
        """The prompt string the backbone puts before texts of this task and prompt type (None: none)."""
        return self._where(task_metadata, prompt_type)[0]

    def intact(self) -> bool:
        """Whether every shard this store has read or written is still on disk (a store kept in memory
        between runs is reused only then: a cache folder cleared meanwhile is read, and filled, anew)."""
        if self.folder is None:
            return True
        return self.folder.is_dir() and all((self.folder / name).is_file() for name in self._seen)

    # ---- internals --------------------------------------------------------------------------------
    def _where(self, task_metadata: Any, prompt_type: Any) -> tuple[str | None, dict[str, Any]]:
        """``(context, encode keyword arguments)``: the backbone's resolved prompt and what its ``encode``
        needs to use it. A backbone without ``prompt_context`` takes no prompt and no such arguments."""
        resolve = getattr(self.backbone, "prompt_context", None)
        if resolve is None:
            return None, {}
        return resolve(task_metadata, prompt_type) or None, {"task_metadata": task_metadata, "prompt_type": prompt_type}

    def _table(self, kind: str) -> dict[bytes, np.ndarray]:
        """The in-memory vectors of ``kind``; the first call reads every shard of that kind on disk."""
        table = self._mem.setdefault(kind, {})
        if self.folder is not None and kind not in self._loaded:
            self._loaded.add(kind)
            self._refresh(kind)
        return table

    def _refresh(self, kind: str) -> None:
        """Read the shards of ``kind`` that this store has not read yet (those other processes wrote since
        it last looked). A damaged shard is reported and set aside as ``.npz.bad``; its vectors are then
        missing and will be recomputed. Temporary files (a write in progress, or one a killed process left
        behind) have names that begin with a dot: they are never read."""
        assert self.folder is not None
        table = self._mem.setdefault(kind, {})
        for shard in sorted(self.folder.glob(f"{kind}-*.npz")):
            if shard.name in self._seen or shard.name.startswith("."):
                continue
            self._seen.add(shard.name)
            try:
                table.update(read_shard(shard))
            except CacheCorruptError as exc:
                if not shard.exists():  # set aside by another process in the meantime
                    continue
                logger.warning("damaged cache shard ignored and set aside, its vectors will be recomputed: %s", exc)
                try:
                    shard.replace(shard.with_suffix(".npz.bad"))
                except FileNotFoundError:
                    pass

    @contextmanager
    def _encode_lock(self) -> Iterator[None]:
        """Hold the namespace's exclusive lock (``<namespace>/encode.lock``, all kinds) for one chunk.

        The lock is an advisory ``fcntl.flock``: processes of iso-bench that share the cache take turns
        chunk by chunk, and the kernel releases it when its holder dies, so a killed run never blocks the
        next. A memory-only store takes no lock. Where ``fcntl`` does not exist (Windows) stores run
        without it: the cache stays correct (shards are written atomically and read back verified), but
        two runs started together may then encode the same texts twice. Network file systems that do not
        honour ``flock`` behave the same way.
        """
        if self.folder is None or fcntl is None:
            yield
            return
        try:
            handle = open(self.folder / LOCK_NAME, "ab")  # noqa: SIM115 - closed below
        except OSError as exc:  # a full or read-only disk: encode without the lock, write nothing
            cache_not_written(self.folder / LOCK_NAME, exc)
            yield
            return
        with handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _still_missing(self, kinds: Sequence[str], items: list[Item]) -> list[Item]:
        """The items whose vector of ``kinds[0]`` is still missing after reading the shards of ``kinds``
        written by other processes; those found there count as reused. Call it holding the lock."""
        if self.folder is None:
            return items
        for k in kinds:
            self._table(k)
            self._refresh(k)
        table = self._table(kinds[0])
        left = [item for item in items if item[0] not in table]
        self.stats["reused"] += len(items) - len(left)
        return left

    def _label(self, desc: str, total: int, remaining: int) -> str:
        """The progress-bar label of the next chunk: which of the ``total`` texts' chunks it is, counting
        the texts other processes have encoded meanwhile as done."""
        n_chunks = -(-total // self.flush_every)
        if n_chunks == 1:
            return desc
        return f"{desc} {(total - remaining) // self.flush_every + 1}/{n_chunks}"

    def _write(self, kind: str, keys: list[bytes], arrays: list[np.ndarray]) -> None:
        """Write one new shard of ``kind`` (nothing for a memory-only store or no vectors). A shard that cannot
        be written (a full disk) is a warning, said once: its vectors stay in memory and the run goes on."""
        if self.folder is None or not keys:
            return
        shard = self.folder / f"{kind}-{uuid.uuid4().hex}.npz"
        try:
            write_shard(shard, keys, arrays)
        except OSError as exc:  # a full disk: the vectors stay in memory for this run, said once
            cache_not_written(shard, exc)
            return
        self._seen.add(shard.name)

    def _get(self, kind: str, texts: list[str], spans: list[tuple[int, int]] | None, desc: str,
             where: tuple[str | None, dict[str, Any]]) -> list[np.ndarray]:
        context, encode_kwargs = where
        table = self._table(kind)
        keys = [text_key(t, spans[i] if spans else None, context) for i, t in enumerate(texts)]
        missing: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            if k not in table and k not in missing:
                missing[k] = i
        self.stats["reused"] += len(keys) - len(missing)
        if missing:
            items = [(k, texts[i], spans[i] if spans else None) for k, i in missing.items()]
            self._compute(kind, items, desc, encode_kwargs)
        return [table[k] for k in keys]

    def _compute(self, kind: str, items: list[Item], desc: str, encode_kwargs: dict[str, Any]) -> None:
        """Encode the missing ``items`` chunk by chunk, every kind of ``self.kinds`` the backbone can make
        in the same pass; each chunk is encoded and written under the namespace lock, after dropping the
        texts another process has encoded meanwhile."""
        if kind == "span":
            self._compute_spans(items, desc, encode_kwargs)
            return
        able = getattr(self.backbone, "kinds", None)
        extra = [k for k in self.kinds if k != "span" and (able is None or k in able)]
        kinds = tuple(dict.fromkeys((kind, *extra)))
        pending, total = items, len(items)
        while pending:
            with self._encode_lock():
                pending = self._still_missing(kinds, pending)
                if not pending:
                    break
                label = self._label(desc, total, len(pending))
                chunk, pending = pending[: self.flush_every], pending[self.flush_every :]
                out = self.backbone.encode([t for _, t, _ in chunk], kinds=kinds, spans=None,
                                           batch_size=self.batch_size, progress=self.progress, desc=label,
                                           **encode_kwargs)
                fault_point("encode")
                keys = [key for key, _, _ in chunk]
                for k, values in out.items():
                    table = self._table(k)
                    fresh = [(key, v) for key, v in zip(keys, values, strict=True) if key not in table]
                    table.update(fresh)
                    self._write(k, [a for a, _ in fresh], [b for _, b in fresh])
                self.stats["computed"] += len(chunk)

    def _compute_spans(self, items: list[Item], desc: str, encode_kwargs: dict[str, Any]) -> None:
        """Encode each distinct text once for all of its missing spans, ``flush_every`` texts per chunk,
        each chunk under the namespace lock as in :meth:`_compute`."""
        pending, total = items, len({text for _, text, _ in items})
        table = self._table("span")
        while pending:
            with self._encode_lock():
                pending = self._still_missing(("span",), pending)
                if not pending:
                    break
                by_text: dict[str, list[tuple[bytes, tuple[int, int]]]] = {}
                for key, text, span in pending:
                    assert span is not None
                    by_text.setdefault(text, []).append((key, span))
                label = self._label(desc, total, len(by_text))
                chunk = list(by_text)[: self.flush_every]
                taken = set(chunk)
                pending = [item for item in pending if item[1] not in taken]
                out = self.backbone.encode(
                    chunk, kinds=("span",), spans=[[s for _, s in by_text[t]] for t in chunk],
                    batch_size=self.batch_size, progress=self.progress, desc=label, **encode_kwargs,
                )
                fault_point("encode")
                keys, rows = [], []
                for text, matrix in zip(chunk, out["span"], strict=True):
                    for (key, _), row in zip(by_text[text], matrix, strict=True):
                        table[key] = row
                        keys.append(key)
                        rows.append(row)
                self._write("span", keys, rows)
                self.stats["computed"] += len(chunk)
