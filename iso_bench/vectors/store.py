"""The raw-vector cache: every text is encoded once per (model, revision, extraction, prompt) and reused
by every variant and every task, in memory within a run and on disk across runs.

The prompt is the string mteb's implementation of a model puts before a text for a task and prompt type
(e5's ``"query: "``, ``"passage: "``): the backbone resolves it (``backbone.prompt_context``) and it becomes
part of the text's key, so a query and a passage with the same text are two entries; a text encoded with
no prompt keeps the plain key ``sha256(text)``.

On disk a namespace folder ``<root>/<model>/<revision>/<extraction>[-<kernel class>]/`` holds ``meta.json``, shard files
``<kind>-<id>.npz`` (:mod:`iso_bench.vectors.shards`: written atomically, a SHA-256 of their content) and
``index.sqlite`` (:mod:`iso_bench.vectors.index`): from each text's key to the shard and rows that hold its
vector. A request reads only its own rows, in place, each checked against the CRC-32 recorded when it was
written: its memory and time follow the request, never the size of the cache. A shard that cannot be read
or fails a check is reported, moved aside and its vectors recomputed: a damaged cache is never trusted. No
pickle is involved. Temporary files (their names begin with a dot) left by a process killed while writing
are never read as shards, and the next store of the namespace removes those whose writer is gone; a shard
written but not yet indexed when its writer died is verified whole and indexed by the next store.

Several processes may share a namespace at the same time: each chunk of missing texts is encoded and
written while the process holds an exclusive lock on the namespace's ``encode.lock`` file, and after
taking the lock a store first looks the chunk up again in the index, which other processes update as they
write, so that a text is encoded once however many runs ask for it (see :meth:`EmbeddingStore._encode_lock`).

A model whose forward pass ran in 16-bit precision (its extraction's ``dtype``: ``float16``, ``bfloat16``) has its
vectors kept in that precision, half the bytes of float32 and the very same numbers
(:func:`iso_bench.vectors.shards.narrow`: a shard whose values are not all 16-bit numbers, such as span vectors
averaged in float32, stays float32); what the store hands out is float32 always. A float32 model's shards are
written as they always were.

Vectors of another kernel class (:func:`iso_bench.kernels.kernel_class`: ``cpu-avx2``, ``cuda-sm90``) are other
bits: each class has its namespace (the folder name ends in ``-<class>``, except for
:data:`iso_bench.kernels.FIRST_CLASS`, whose folders are those written before classes were named), so a store never
serves vectors of one class to a run of another, and a cluster of unlike nodes never combines them: each encodes
its own.

Example:
    >>> store = EmbeddingStore(backbone, cache_dir="~/.cache/iso_bench")   # doctest: +SKIP
    >>> X = store.sentences(["a cat", "a dog"])                             # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.backbones.hf_backbone import NoTokens
from iso_bench.backbones.mteb_backbone import TokenVectorsUnavailable
from iso_bench.files import atomic_write_text, cache_not_written, remove_stale_temporaries, slug
from iso_bench.kernels import kernel_class, namespace_suffix
from iso_bench.vectors.encoding import EncodeMissing
from iso_bench.vectors.index import ShardIndex, group_by_shard, set_aside, text_key
from iso_bench.vectors.shards import (  # noqa: F401 - the shard format, named here too
    FLOAT32,
    STORAGES,
    CacheCorruptError,
    read_rows,
    read_shard,
    read_vectors,
    write_shard,
)
from iso_bench.vectors.unrecorded import set_aside_unrecorded

try:
    import fcntl
except ImportError:  # Windows: no advisory file locks, see EmbeddingStore._encode_lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_ENV = "ISO_BENCH_CACHE"
FLUSH_EVERY = 2048  # texts between two shard writes (fewer long ones: CHUNK_ROWS_PER_TEXT): a crash loses at most this
RECENT = 4  # sentence matrices kept for the next variant (a task's two columns, queries and documents)
RECENT_BYTES = 1 << 26  # and at most this many bytes of them (64 MiB): a large corpus is read per request
LOCK_NAME = "encode.lock"  # in each namespace folder: held while a chunk is encoded and its shards written
ROW_KINDS = ("tokens", "pool")  # kinds with many rows per text: kept on disk for tasks up to TOKEN_CACHE_TEXTS
TOKEN_CACHE_ENV = "ISO_BENCH_TOKEN_CACHE_TEXTS"
TOKEN_CACHE_TEXTS = 100_000
"""Token vectors are kept on disk for tasks of at most this many texts (every STS, WiC and WSD task, SciFact):
a warm rerun of a token-level variant on them encodes nothing. A larger task's token vectors (20 to 200 times
its sentence vectors' bytes: about 1.9 TB for MS MARCO's 8.8M passages at 768-d) are computed for the request
that needs them and dropped: each token-level variant of such a task pays the forward passes again, and its
sentence vectors alone are kept."""


def default_token_cache_texts() -> int:
    """``$ISO_BENCH_TOKEN_CACHE_TEXTS`` (``--token-cache-texts``), else :data:`TOKEN_CACHE_TEXTS`."""
    text = os.environ.get(TOKEN_CACHE_ENV)
    return int(text) if text else TOKEN_CACHE_TEXTS


def forward_precision(backbone: Any) -> str | None:
    """The precision of the backbone's forward pass as its extraction records it (``dtype``: ``"float16"``,
    ``"bfloat16"``; absent or None for float32): what the store keeps its vectors in (:data:`STORAGES`), where
    every value of a shard survives it exactly (:func:`iso_bench.vectors.shards.narrow`)."""
    dtype = getattr(getattr(backbone, "extraction", None), "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else None
    return name if name in STORAGES and name != FLOAT32 else None


def default_cache_dir() -> Path:
    """``$ISO_BENCH_CACHE``, else ``~/.cache/iso_bench``."""
    env = os.environ.get(DEFAULT_CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "iso_bench"


class EmbeddingStore(EncodeMissing):
    """Raw vectors of one backbone, computed once per text and kept on disk (in memory for a store without a
    cache folder, and for vectors whose shard could not be written).

    Args:
        backbone: the :class:`~iso_bench.backbones.hf_backbone.Backbone` that computes missing vectors.
        cache_dir: root of the disk cache; ``None`` keeps vectors in memory only.
        kinds: the vector kinds computed together on every forward pass. A run that has token-level
            variants asks for ``("sentence", "tokens")`` so that one pass serves both. Kinds the backbone
            cannot make (``backbone.kinds``: a model without hidden states has only ``sentence``) are
            computed only when asked for, and then the backbone's error says why it cannot.
        batch_size: texts per forward pass.
        progress: show progress bars.
        flush_every: texts encoded between two shard writes (and between two turns of the namespace
            lock when several processes share the cache); long texts close one sooner (``CHUNK_ROWS_PER_TEXT``).
        token_cache_texts: the largest task (in texts) whose token vectors are kept on disk
            (:data:`TOKEN_CACHE_TEXTS`); see :meth:`note_task_size`.
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
        token_cache_texts: int | None = None,
    ) -> None:
        self.backbone = backbone
        self.kinds = tuple(dict.fromkeys(kinds))
        self.batch_size = batch_size
        self.progress = progress
        self.flush_every = max(1, int(flush_every))
        self.token_cache_texts = default_token_cache_texts() if token_cache_texts is None else int(token_cache_texts)
        self._large_tasks: set[str] = set()  # tasks over token_cache_texts: their token vectors are not kept
        self._mem: dict[str, dict[bytes, np.ndarray]] = {}  # vectors not on disk (no folder, or a failed write)
        self._synced: set[str] = set()  # kinds whose shards on disk this store has checked against the index
        self._shard_meta: dict[str, tuple[int, int, int, int, str]] = {}  # name -> (offset, rows, dim, ndim, storage)
        self.index: ShardIndex | None = None
        self._recent: dict[tuple[int, bytes], np.ndarray] = {}  # the last sentence matrices (see sentences)
        self.stats = {"computed": 0, "reused": 0}
        self.folder: Path | None = None
        self.kernel_class = kernel_class(getattr(backbone, "device", "cpu"))
        self.storage = forward_precision(backbone)  # 16-bit shards for a 16-bit forward pass, where lossless
        if cache_dir is not None:
            info = {**backbone.describe(), "kernel_class": self.kernel_class}
            extraction = backbone.extraction.key() if hasattr(backbone, "extraction") else "default"
            self.folder = (
                Path(cache_dir).expanduser()
                / slug(info["model"])
                / slug(str(info["revision"]))
                / slug(extraction + namespace_suffix(self.kernel_class))
            )
            meta = self.folder / "meta.json"
            kept = set_aside_unrecorded(self.folder, self.storage, getattr(backbone, "checkpoint_dtype", None))
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                remove_stale_temporaries(self.folder)  # what a writer killed mid-write left
                if not meta.exists():
                    atomic_write_text(meta, json.dumps(info, indent=2, sort_keys=True))
            except OSError as exc:
                cache_not_written(meta, exc)
            if self.folder.is_dir() and kept:  # never a namespace whose vectors may be 16-bit for float32
                self.index = ShardIndex(self.folder)
                try:
                    self.index.db  # noqa: B018 - opened (or rebuilt) now, so that a failure is said once, here
                except (OSError, sqlite3.Error) as exc:
                    cache_not_written(self.index.path, OSError(str(exc)))
                    self.index = None
            if self.index is None:  # nothing to read or write: vectors live in memory only
                self.folder = None

    # ---- public API -------------------------------------------------------------------------------
    # ``task_metadata`` and ``prompt_type`` are what mteb hands an encoder: the task being evaluated and
    # PromptType.query / .document (retrieval) or None. A backbone that adds prompts resolves them into the
    # prompt string, which is then part of the key and of the encoding; others ignore them.

    def sentences(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
                  prompt_type: Any = None, remember: bool = True) -> np.ndarray:
        """Pooled sentence vectors, shape ``(len(texts), dim)``, read-only.

        The variants of a run ask for the same texts one after another (each of a task's columns, once per
        variant): the last few matrices are kept, found again by one digest of the texts instead of a key per
        text, and shared (hence read-only: a method never writes into its input). ``remember=False`` keeps
        nothing of this request (the batches of a streaming fit: too many to be asked for again from memory)."""
        texts = list(texts)
        where = self._where(task_metadata, prompt_type)
        h = hashlib.sha256(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)).tobytes())
        h.update("".join([where[0] or "", "\x00", *texts]).encode("utf-8"))  # the lengths tell the texts apart
        memo = (len(texts), h.digest())
        if memo in self._recent:
            self.stats["reused"] += len(texts)
            self._recent[memo] = self._recent.pop(memo)  # the most recent last
            return self._recent[memo]
        X = self._get("sentence", texts, None, desc, where)
        X.flags.writeable = False
        if not remember:
            return X
        self._recent[memo] = X
        while len(self._recent) > RECENT or sum(m.nbytes for m in self._recent.values()) > RECENT_BYTES:
            del self._recent[next(iter(self._recent))]  # the oldest (X itself, alone and over the bytes)
        return X

    def tokens(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
               prompt_type: Any = None) -> list[np.ndarray]:
        """Token vectors without special (or prompt) tokens, one ``(n_tokens, dim)`` array per text."""
        return self._get("tokens", list(texts), None, desc, self._where(task_metadata, prompt_type))

    def pool_rows(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
                  prompt_type: Any = None) -> list[np.ndarray]:
        """The token vectors the model's pooling reads (special and prompt tokens too where it reads them; one
        row for cls and last-token pooling), one ``(rows, token dim)`` array per text: what a token-level variant
        transforms before the model's own pooling (``backbone.pool``). Kept and dropped as token vectors are."""
        return self._get("pool", list(texts), None, desc, self._where(task_metadata, prompt_type))

    def token_ids(self, texts: Sequence[str], *, task_metadata: Any = None, prompt_type: Any = None
                  ) -> list[np.ndarray]:
        """The token type (tokenizer id) of each row of :meth:`tokens`, one int64 array per text; computed by
        the backbone's tokenizer (cheap), never cached."""
        ids = getattr(self.backbone, "token_ids", None)
        if ids is None:
            raise TokenVectorsUnavailable(f"{type(self.backbone).__name__} gives no token types")
        return ids(list(texts), task_metadata=task_metadata, prompt_type=prompt_type)

    def spans(self, texts: Sequence[str], spans: Sequence[tuple[int, int]], desc: str = "encoding", *,
              task_metadata: Any = None, prompt_type: Any = None) -> np.ndarray:
        """The mean sub-token vector of each character span, shape ``(len(texts), dim)``.

        ``texts[i]`` is the text that holds ``spans[i]``; a text that holds several spans is encoded once.
        """
        where = self._where(task_metadata, prompt_type)
        return self._get("span", list(texts), [tuple(s) for s in spans], desc, where)

    def note_task_size(self, task: str, n_texts: int) -> None:
        """Say how many texts a task has: the token vectors of a task of more than ``token_cache_texts``
        texts are computed when asked for and not kept (see :data:`TOKEN_CACHE_TEXTS`)."""
        if n_texts > self.token_cache_texts:
            self._large_tasks.add(task)
        else:
            self._large_tasks.discard(task)

    def _keeps_tokens(self, task: str | None, n_texts: int) -> bool:
        """Whether token vectors computed for a request of ``n_texts`` texts of ``task`` are written."""
        return task not in self._large_tasks and n_texts <= self.token_cache_texts

    def prompt(self, task_metadata: Any = None, prompt_type: Any = None) -> str | None:
        """The prompt string the backbone puts before texts of this task and prompt type (None: none)."""
        return self._where(task_metadata, prompt_type)[0]

    def intact(self) -> bool:
        """Whether the cache folder and its index are still there (a store kept between runs of a process is
        reused only then: a cache folder cleared meanwhile is opened, and filled, anew)."""
        if self.folder is None:
            return True
        return self.folder.is_dir() and self.index is not None and self.index.exists()

    # ---- internals --------------------------------------------------------------------------------
    def _where(self, task_metadata: Any, prompt_type: Any) -> tuple[str | None, dict[str, Any], str | None]:
        """``(context, encode keyword arguments, task name)``: the backbone's resolved prompt and what its
        ``encode`` needs to use it (a backbone without ``prompt_context`` takes no prompt and no such
        arguments), and the task the texts are of (recorded with the shards they are written to)."""
        task = getattr(task_metadata, "name", None)
        resolve = getattr(self.backbone, "prompt_context", None)
        if resolve is None:
            return None, {}, task
        kwargs = {"task_metadata": task_metadata, "prompt_type": prompt_type}
        return resolve(task_metadata, prompt_type) or None, kwargs, task

    def _get(self, kind: str, texts: list[str], spans: list[tuple[int, int]] | None, desc: str,
             where: tuple[str | None, dict[str, Any], str | None]) -> Any:
        """The vectors of ``texts`` (and ``spans``): a ``(n, dim)`` matrix for single-vector kinds (sentence,
        span), a list of ``(n_tokens, dim)`` arrays for tokens. What the cache holds is read in place; the
        rest is encoded (and written) first."""
        context, encode_kwargs, task = where
        keys = [text_key(t, spans[i] if spans else None, context) for i, t in enumerate(texts)]
        matrix = kind not in ROW_KINDS
        out: Any = np.zeros((len(keys), self._width(kind)), np.float32) if matrix else [None] * len(keys)
        filled = np.zeros(len(keys), dtype=bool)
        self._fill(kind, keys, out, filled)
        missing: dict[bytes, int] = {}
        for i in np.flatnonzero(~filled).tolist():
            missing.setdefault(keys[i], i)
        self.stats["reused"] += len(keys) - len(missing)
        if missing:
            items = [(k, texts[i], spans[i] if spans else None) for k, i in missing.items()]
            try:
                if kind == "span":
                    fresh = self._compute_spans(kind, items, desc, encode_kwargs, task)
                else:
                    fresh = self._compute(kind, items, desc, encode_kwargs, task, keep_tokens=self._keeps_tokens(
                        task, len(texts)))
            except NoTokens as exc:  # a task's own text cannot be left out: the task and where its text is
                if task is None:
                    raise
                raise NoTokens(f"task {task}: its text {texts.index(exc.text)} of {len(texts)} in this request "
                               f"({exc.text!r}) has no tokens: the tokenizer of {self.backbone.model_id!r} adds no "
                               "special tokens (no BOS), so the network has nothing to read and the task cannot be "
                               "evaluated with this model's extraction; use a tokenizer that adds a BOS token",
                               exc.text) from None
            for i in np.flatnonzero(~filled).tolist():
                vec = fresh.get(keys[i])
                if vec is not None:
                    out[i], filled[i] = vec, True
            if not filled.all():
                self._fill(kind, keys, out, filled)  # what other processes encoded meanwhile
        return out

    def _width(self, kind: str) -> int:
        """The width of a single-vector kind: a sentence vector's, or a span's (the token width, which a head
        after the pooling may change: ``backbone.token_dim`` where the backbone knows it)."""
        return int(getattr(self.backbone, "token_dim", None) or self.backbone.dim) if kind == "span" \
            else self.backbone.dim

    def _fill(self, kind: str, keys: list[bytes], out: Any, filled: np.ndarray) -> None:
        """Put into ``out`` (and mark ``filled``) the vectors of ``keys`` the store holds: in memory, or in
        the shards the index names, read in place and checked. A shard found damaged is set aside and
        forgotten; its keys stay unfilled (to be encoded again)."""
        mem = self._mem.get(kind)
        if mem:
            for i in np.flatnonzero(~filled).tolist():
                vec = mem.get(keys[i])
                if vec is not None:
                    out[i], filled[i] = vec, True
        if self.index is None:
            return
        self._sync(kind)
        todo = np.flatnonzero(~filled)
        if not len(todo):
            return
        wanted = [keys[i] for i in todo.tolist()]
        found = self.index.lookup(kind, list(dict.fromkeys(wanted)))
        for name, positions, starts, stops, crcs in group_by_shard(found, wanted):
            path, where = self.folder / name, todo[positions]
            try:
                offset, rows, dim, ndim, storage = self._meta_of(name)
                at = (offset, rows, dim, storage)
                if ndim == 1:
                    out[where] = read_vectors(path, at, starts, crcs)
                else:
                    for i, block in zip(where.tolist(), read_rows(path, at, starts, stops, crcs), strict=True):
                        out[i] = block
                filled[where] = True
            except CacheCorruptError as exc:
                if path.exists():
                    set_aside(path, exc)
                self.index.drop([name])
                self._shard_meta.pop(name, None)

    def _meta_of(self, name: str) -> tuple[int, int, int, int, str]:
        """``(data_offset, rows, dim, ndim, storage)`` of an indexed shard (asked of the index once per process)."""
        if name not in self._shard_meta:
            found = self.index.shard(name) if self.index is not None else None
            if found is None:
                raise CacheCorruptError(f"{self.folder / name}: no longer indexed")
            self._shard_meta[name] = tuple(found)
        return self._shard_meta[name]

    def _sync(self, kind: str) -> None:
        """Once per process and kind: index the shards of ``kind`` on disk that the index lacks (see
        :meth:`iso_bench.vectors.index.ShardIndex.sync`)."""
        if self.index is not None and kind not in self._synced:
            self._synced.add(kind)
            self.index.sync(kind)

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

    def _write(self, kind: str, keys: list[bytes], arrays: list[np.ndarray], task: str | None = None) -> Any:
        """Write one new shard of ``kind`` and index it (a memory-only store keeps the vectors in memory); returns
        ``(name, ShardInfo)``, or None where nothing was written. A shard that cannot be written or indexed (a full
        disk) is a warning, said once: its vectors stay in memory for this process and the run goes on."""
        if not keys:
            return None
        if self.folder is None or self.index is None:
            self._mem.setdefault(kind, {}).update(zip(keys, arrays, strict=True))
            return None
        name = f"{kind}-{uuid.uuid4().hex}.npz"
        try:
            info = write_shard(self.folder / name, keys, arrays, self.storage)
            self.index.add(kind, name, info, task=task)
            return name, info
        except (OSError, sqlite3.Error) as exc:  # a full disk: the vectors stay in memory for this run
            cache_not_written(self.folder / name, exc if isinstance(exc, OSError) else OSError(str(exc)))
            self._mem.setdefault(kind, {}).update(zip(keys, arrays, strict=True))
            return None

    def holds(self, kind: str, keys: Sequence[bytes]) -> set[bytes]:
        """Which of ``keys`` (:func:`text_key`) the store holds vectors of ``kind`` for (in memory or indexed).

        >>> store.holds("sentence", [text_key("a cat", context="query: ")])          # doctest: +SKIP
        """
        return self._known(kind, list(keys))

    def held(self, kind: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The vectors of ``kind`` the store holds for ``keys`` (:func:`text_key`), by key; encodes nothing."""
        keys = list(keys)
        out: Any = np.zeros((len(keys), self._width(kind)), np.float32) if kind not in ROW_KINDS else [None] * len(keys)
        filled = np.zeros(len(keys), dtype=bool)
        self._fill(kind, keys, out, filled)
        return {keys[i]: out[i] for i in np.flatnonzero(filled).tolist()}

    def _known(self, kind: str, keys: list[bytes]) -> set[bytes]:
        """Which of ``keys`` the store already holds for ``kind`` (in memory or indexed)."""
        mem = self._mem.get(kind, {})
        known = {k for k in keys if k in mem}
        if self.index is not None:
            self._sync(kind)
            known |= set(self.index.lookup(kind, [k for k in keys if k not in known]))
        return known
