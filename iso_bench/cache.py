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

Example:
    >>> store = EmbeddingStore(backbone, cache_dir="~/.cache/iso_bench")   # doctest: +SKIP
    >>> X = store.sentences(["a cat", "a dog"])                             # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.files import atomic_write_bytes, atomic_write_text
from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)

DEFAULT_CACHE_ENV = "ISO_BENCH_CACHE"
FLUSH_EVERY = 2048  # texts encoded between two shard writes: a crash loses at most this much work


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
        h.update(np.ascontiguousarray(arr).tobytes())
    return np.frombuffer(h.digest(), dtype=np.uint8)


class CacheCorruptError(IsoBenchError, RuntimeError):
    """A shard failed its checksum or could not be parsed."""


def write_shard(path: Path, keys: list[bytes], arrays: list[np.ndarray]) -> None:
    """Write vectors (each ``(dim,)`` or ``(n_i, dim)``) atomically with a checksum."""
    dim = arrays[0].shape[-1]
    rows = [a.reshape(-1, dim).astype(np.float32) for a in arrays]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    data = np.concatenate(rows, axis=0) if rows else np.zeros((0, dim), np.float32)
    key_arr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), 32)
    ndim = np.array([arrays[0].ndim], dtype=np.int64)
    buffer = io.BytesIO()
    np.savez(buffer, keys=key_arr, offsets=offsets, data=data, ndim=ndim, digest=_digest(key_arr, offsets, data))
    path.parent.mkdir(parents=True, exist_ok=True)
    # a view, not a second copy of a shard that may be 100s of MB
    atomic_write_bytes(path, buffer.getbuffer(), fault="shard-write")


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
    """

    def __init__(
        self,
        backbone: Any,
        cache_dir: str | Path | None = None,
        *,
        kinds: Sequence[str] = ("sentence",),
        batch_size: int = 32,
        progress: bool = True,
    ) -> None:
        self.backbone = backbone
        self.kinds = tuple(dict.fromkeys(kinds))
        self.batch_size = batch_size
        self.progress = progress
        self._mem: dict[str, dict[bytes, np.ndarray]] = {}
        self._loaded: set[str] = set()
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
            self.folder.mkdir(parents=True, exist_ok=True)
            meta = self.folder / "meta.json"
            if not meta.exists():
                atomic_write_text(meta, json.dumps(info, indent=2, sort_keys=True))

    # ---- public API -------------------------------------------------------------------------------
    # ``task_metadata`` and ``prompt_type`` are what mteb hands an encoder: the task being evaluated and
    # PromptType.query / .document (retrieval) or None. A backbone that adds prompts resolves them into the
    # prompt string, which is then part of the key and of the encoding; others ignore them.

    def sentences(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
                  prompt_type: Any = None) -> np.ndarray:
        """Pooled sentence vectors, shape ``(len(texts), dim)``."""
        vecs = self._get("sentence", list(texts), None, desc, self._where(task_metadata, prompt_type))
        return np.stack(vecs) if vecs else np.zeros((0, self.backbone.dim), np.float32)

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

    # ---- internals --------------------------------------------------------------------------------
    def _where(self, task_metadata: Any, prompt_type: Any) -> tuple[str | None, dict[str, Any]]:
        """``(context, encode keyword arguments)``: the backbone's resolved prompt and what its ``encode``
        needs to use it. A backbone without ``prompt_context`` takes no prompt and no such arguments."""
        resolve = getattr(self.backbone, "prompt_context", None)
        if resolve is None:
            return None, {}
        return resolve(task_metadata, prompt_type) or None, {"task_metadata": task_metadata, "prompt_type": prompt_type}

    def _table(self, kind: str) -> dict[bytes, np.ndarray]:
        table = self._mem.setdefault(kind, {})
        if self.folder is not None and kind not in self._loaded:
            self._loaded.add(kind)
            for shard in sorted(self.folder.glob(f"{kind}-*.npz")):
                try:
                    table.update(read_shard(shard))
                except CacheCorruptError as exc:
                    logger.warning("damaged cache shard ignored and set aside, its vectors will be recomputed: %s", exc)
                    shard.replace(shard.with_suffix(".npz.bad"))
        return table

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

    def _compute(self, kind: str, items: list[tuple[bytes, str, tuple[int, int] | None]], desc: str,
                 encode_kwargs: dict[str, Any]) -> None:
        if kind == "span":
            self._compute_spans(items, desc, encode_kwargs)
            return
        able = getattr(self.backbone, "kinds", None)
        extra = [k for k in self.kinds if k != "span" and (able is None or k in able)]
        kinds = tuple(dict.fromkeys((kind, *extra)))
        for start in range(0, len(items), FLUSH_EVERY):
            chunk = items[start : start + FLUSH_EVERY]
            texts = [t for _, t, _ in chunk]
            spans = None
            n_chunks = -(-len(items) // FLUSH_EVERY)
            label = desc if n_chunks == 1 else f"{desc} {start // FLUSH_EVERY + 1}/{n_chunks}"
            out = self.backbone.encode(texts, kinds=kinds, spans=spans, batch_size=self.batch_size,
                                       progress=self.progress, desc=label, **encode_kwargs)
            keys = [key for key, _, _ in chunk]
            for k, values in out.items():
                table = self._table(k)
                fresh = [(key, v) for key, v in zip(keys, values, strict=True) if key not in table]
                for key, v in fresh:
                    table[key] = v
                if self.folder is not None and fresh:
                    shard = self.folder / f"{k}-{uuid.uuid4().hex}.npz"
                    write_shard(shard, [a for a, _ in fresh], [b for _, b in fresh])
            self.stats["computed"] += len(chunk)

    def _compute_spans(self, items: list[tuple[bytes, str, tuple[int, int] | None]], desc: str,
                       encode_kwargs: dict[str, Any]) -> None:
        """Encode each distinct text once for all of its spans, flushing to disk every FLUSH_EVERY texts."""
        by_text: dict[str, list[tuple[bytes, tuple[int, int]]]] = {}
        for key, text, span in items:
            assert span is not None
            by_text.setdefault(text, []).append((key, span))
        texts = list(by_text)
        n_chunks = -(-len(texts) // FLUSH_EVERY)
        table = self._table("span")
        for start in range(0, len(texts), FLUSH_EVERY):
            chunk = texts[start : start + FLUSH_EVERY]
            label = desc if n_chunks == 1 else f"{desc} {start // FLUSH_EVERY + 1}/{n_chunks}"
            out = self.backbone.encode(
                chunk, kinds=("span",), spans=[[s for _, s in by_text[t]] for t in chunk],
                batch_size=self.batch_size, progress=self.progress, desc=label, **encode_kwargs,
            )
            keys, rows = [], []
            for text, matrix in zip(chunk, out["span"], strict=True):
                for (key, _), row in zip(by_text[text], matrix, strict=True):
                    table[key] = row
                    keys.append(key)
                    rows.append(row)
            if self.folder is not None and keys:
                write_shard(self.folder / f"span-{uuid.uuid4().hex}.npz", keys, rows)
            self.stats["computed"] += len(chunk)
