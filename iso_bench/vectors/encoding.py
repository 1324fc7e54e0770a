"""Encoding what the raw-vector store lacks: chunk by chunk, under the namespace's lock, written as it goes.

:class:`EncodeMissing` is the half of :class:`iso_bench.vectors.store.EmbeddingStore` that computes vectors: a request's
missing texts are looked up again under the namespace's encode lock (another process may have encoded some
meanwhile), then a backbone with ``encode_chunks`` encodes them in one batch plan (up to ``PLAN_TEXTS`` texts per
plan) and hands them over ``flush_every`` at a time, each chunk written as one shard, so that a crash loses at
most one chunk; another backbone encodes ``flush_every`` texts per lock. Every kind the store keeps is computed
in the same forward pass; a text's token vectors that are a run of its pooled rows written in the same chunk are
indexed as that run (:meth:`EncodeMissing._refer`), not written twice. :meth:`EncodeMissing.ensure`
encodes a whole corpus that way without reading anything back.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from iso_bench.faults import fault_point
from iso_bench.vectors.index import text_key
from iso_bench.vectors.shards import as_stored, run_within

Item = tuple[bytes, str, tuple[int, int] | None]  # (key, text, span) of a vector to compute
ENSURE_CHUNK = 50_000  # texts looked up and encoded at a time by EncodeMissing.ensure
PLAN_TEXTS = 65_536  # texts tokenized and planned at once (their token ids held in memory), under one lock


class EncodeMissing:
    """Mixed into :class:`iso_bench.vectors.store.EmbeddingStore` (whose ``_where``, ``_known``, ``_write``,
    ``_encode_lock`` and ``_keeps_tokens`` it uses)."""

    def ensure(self, texts: Sequence[str], desc: str = "encoding", *, task_metadata: Any = None,
               prompt_type: Any = None) -> None:
        """Encode and write what the cache lacks of ``texts``, for every kind of the store (token vectors only
        where they are kept, see :meth:`note_task_size`), reading nothing back: ``ENSURE_CHUNK`` texts at a
        time, so a corpus of millions of texts costs the memory of one chunk."""
        texts = list(texts)
        context, encode_kwargs, task = self._where(task_metadata, prompt_type)
        kinds = [k for k in self.kinds if k != "span"]
        keep = self._keeps_tokens(task, len(texts))
        if not keep:  # token vectors and pooled rows of a large task are not kept
            kinds = [k for k in kinds if k not in ("tokens", "pool")]
        for i in range(0, len(texts), ENSURE_CHUNK):
            chunk = texts[i:i + ENSURE_CHUNK]
            keys = [text_key(t, None, context) for t in chunk]
            label = desc if len(texts) <= ENSURE_CHUNK else f"{desc} ({i:,}-{i + len(chunk):,} of {len(texts):,})"
            for n, kind in enumerate(kinds):  # the first kind's pass makes the others too; then what they lack
                known = self._known(kind, keys)
                items = list({k: (k, t, None) for k, t in zip(keys, chunk, strict=True) if k not in known}.values())
                if n == 0:  # the distinct texts of the chunk the cache holds already
                    self.stats["reused"] += len(set(keys)) - len(items)
                if items:
                    self._compute(kind, items, label, encode_kwargs, task, keep_tokens=keep, collect=False)

    def _still_missing(self, kind: str, items: list[Item]) -> list[Item]:
        """The items whose vector of ``kind`` is still missing: another process may have encoded and
        indexed some since they were looked up (or written a shard and died before indexing it); those count
        as reused. Call it holding the lock."""
        if self.index is None:
            return items
        self.index.sync(kind)  # a shard a killed process wrote without indexing it
        found = self.index.lookup(kind, [key for key, _, _ in items])
        left = [item for item in items if item[0] not in found]
        self.stats["reused"] += len(items) - len(left)
        return left

    def _label(self, desc: str, total: int, remaining: int) -> str:
        """The progress-bar label of the next chunk: which of the ``total`` texts' chunks it is, counting
        the texts other processes have encoded meanwhile as done."""
        n_chunks = -(-total // self.flush_every)
        if n_chunks == 1:
            return desc
        return f"{desc} {(total - remaining) // self.flush_every + 1}/{n_chunks}"

    def _compute(self, kind: str, items: list[Item], desc: str, encode_kwargs: dict[str, Any],
                 task: str | None = None, *, keep_tokens: bool = True, collect: bool = True
                 ) -> dict[bytes, np.ndarray]:
        """Encode the missing ``items`` chunk by chunk, every kind of ``self.kinds`` the backbone can make
        in the same pass; each chunk is encoded and written under the namespace lock, after dropping the
        texts another process has encoded meanwhile. Returns the vectors of ``kind`` computed here (none
        unless ``collect``). Without ``keep_tokens``, token vectors are computed only when ``kind`` is
        tokens, and then returned, not written."""
        able = getattr(self.backbone, "kinds", None)
        extra = [k for k in self.kinds
                 if k != "span" and (able is None or k in able) and (keep_tokens or k not in ("tokens", "pool"))]
        kinds = tuple(dict.fromkeys((kind, *extra)))
        pending, total, fresh = items, len(items), {}
        if hasattr(self.backbone, "encode_chunks"):  # one batch plan per PLAN_TEXTS texts, a shard per chunk
            while pending:
                with self._encode_lock():
                    pending = self._still_missing(kind, pending)
                    block, pending = pending[:PLAN_TEXTS], pending[PLAN_TEXTS:]
                    if not block:
                        break
                    label = desc if len(block) == total else f"{desc} ({total - len(block) - len(pending):,}-" \
                        f"{total - len(pending):,} of {total:,})"
                    chunks = self.backbone.encode_chunks([t for _, t, _ in block], kinds=kinds, spans=None,
                                                         batch_size=self.batch_size, chunk=self.flush_every,
                                                         progress=self.progress, desc=label, **encode_kwargs)
                    for idx, out in chunks:
                        self._keep([block[i] for i in idx], out, kind, task, keep_tokens, collect, fresh)
            return fresh
        while pending:
            with self._encode_lock():
                pending = self._still_missing(kind, pending)
                if not pending:
                    break
                label = self._label(desc, total, len(pending))
                chunk, pending = pending[: self.flush_every], pending[self.flush_every :]
                out = self.backbone.encode([t for _, t, _ in chunk], kinds=kinds, spans=None,
                                           batch_size=self.batch_size, progress=self.progress, desc=label,
                                           **encode_kwargs)
                self._keep(chunk, out, kind, task, keep_tokens, collect, fresh)
        return fresh

    def _keep(self, chunk: list[Item], out: dict[str, list[np.ndarray]], kind: str, task: str | None,
              keep_tokens: bool, collect: bool, fresh: dict[bytes, np.ndarray]) -> None:
        """Write one encoded chunk as a shard per kind (what another pass wrote meanwhile aside), and keep the
        vectors of ``kind`` in ``fresh`` when ``collect``."""
        fault_point("encode")
        keys = [key for key, _, _ in chunk]
        pool = None  # (shard, storage, {key: (first row, its pooled rows)}) of the pooled rows written now
        for k in sorted(out, key=lambda k: k == "tokens"):  # the pooled rows first: token vectors may lie in them
            known = self._known(k, keys) if k != kind else set()
            new = [(key, v) for key, v in zip(keys, out[k], strict=True) if key not in known]
            if keep_tokens or k not in ("tokens", "pool"):
                rest = self._refer(k, new, pool) if k == "tokens" and pool is not None else new
                written = self._write(k, [a for a, _ in rest], [b for _, b in rest], task)
                if k == "pool" and written is not None:
                    name, info = written
                    pool = (name, info.storage, {key: (start, v) for (key, v), start in
                                                 zip(new, info.offsets[:-1].tolist(), strict=True)})
            if k == kind and collect:
                fresh.update(new)
        self.stats["computed"] += len(chunk)

    def _refer(self, kind: str, new: list[tuple[bytes, np.ndarray]], pool: tuple[str, str, dict]
               ) -> list[tuple[bytes, np.ndarray]]:
        """Index each of ``new`` whose rows are a run of the pooled rows just written for its text (a pooling that
        reads every row: the token vectors between the special tokens) as that run of the pool shard, with the
        CRC-32 of its own rows (:meth:`ShardIndex.refer`): kept once on disk, not twice. Returns the others, to be
        written as a shard of their own."""
        name, storage, written = pool
        refs, rest = [], []
        for key, block in new:
            start, rows = written.get(key, (0, None))
            j = None if rows is None else run_within(block, rows)
            if j is None:
                rest.append((key, block))
            else:
                refs.append((key, name, start + j, start + j + len(block), zlib.crc32(as_stored(block, storage))))
        try:
            self.index.refer(kind, refs)
        except sqlite3.Error:  # the index refused them: written as a shard of their own
            return new
        return rest

    def _compute_spans(self, kind: str, items: list[Item], desc: str, encode_kwargs: dict[str, Any],
                       task: str | None = None) -> dict[bytes, np.ndarray]:
        """Encode each distinct text once for all of its missing spans, ``flush_every`` texts per chunk,
        each chunk under the namespace lock as in :meth:`_compute`. Returns the span vectors computed."""
        pending, total, fresh = items, len({text for _, text, _ in items}), {}
        while pending:
            with self._encode_lock():
                pending = self._still_missing("span", pending)
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
                        keys.append(key)
                        rows.append(row)
                self._write("span", keys, rows, task)
                fresh.update(zip(keys, rows, strict=True))
                self.stats["computed"] += len(chunk)
        return fresh
