"""Runs that share a raw-vector cache: the namespace lock makes every text encoded once, shards written by
other processes are picked up, and crashes or stray temporary files never corrupt what is read back.

This file is also the worker that the multi-process tests start (``python test_cache_lock.py ...``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from iso_bench.vectors import store as cache
from iso_bench.vectors.store import LOCK_NAME, EmbeddingStore, read_shard, text_key, write_shard

TEXTS = [f"text number {i}" for i in range(200)]
FLUSH = 20  # 10 chunks for the 200 texts
posix_only = pytest.mark.skipif(cache.fcntl is None, reason="no fcntl.flock (and no SIGKILL) on this platform")


class SlowBackbone:
    """A fake deterministic backbone that takes its time: a text's vector is drawn from its SHA-256, a span's
    vector is ``[start, end, len(text), 0]``; it remembers the texts it encoded."""

    dim = 4
    extraction = type("E", (), {"key": staticmethod(lambda: "slow"), "normalize": False})()

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.encoded: list[str] = []

    def describe(self) -> dict:
        return {"model": "test/slow", "revision": "r1", "extraction": {}}

    @staticmethod
    def vector(text: str) -> np.ndarray:
        return np.frombuffer(hashlib.sha256(text.encode()).digest()[:16], np.uint32).astype(np.float32)

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        time.sleep(self.delay * len(texts))
        self.encoded.extend(texts)
        out = {}
        if "sentence" in kinds:
            out["sentence"] = [self.vector(t) for t in texts]
        if "span" in kinds:
            out["span"] = [np.array([[s, e, len(t), 0] for s, e in ss], np.float32)
                           for t, ss in zip(texts, spans, strict=True)]
        return out


def _spans(texts: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """Two spans of every text: its first word and its last."""
    out_texts, out_spans = [], []
    for t in texts:
        out_texts += [t, t]
        out_spans += [(0, t.index(" ")), (t.rindex(" ") + 1, len(t))]
    return out_texts, out_spans


def _worker(args: list[str]) -> None:
    """Wait until every worker is ready, encode TEXTS through a shared cache, save the vectors, print stats."""
    cache_dir, kind, flush, barrier, n_workers, out = args
    store = EmbeddingStore(SlowBackbone(delay=0.002), cache_dir, flush_every=int(flush), progress=False)
    Path(barrier, f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 60
    while len(list(Path(barrier).glob("ready-*"))) < int(n_workers) and time.monotonic() < deadline:
        time.sleep(0.005)
    vectors = store.spans(*_spans(TEXTS)) if kind == "span" else store.sentences(TEXTS)
    np.save(out, vectors)
    print(json.dumps({"stats": store.stats, "encoded": store.backbone.encoded}))


def _start(tmp_path: Path, name: str, kind: str = "sentence", n_workers: int = 1, fault: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != "ISO_BENCH_FAULT"}
    if fault:
        env["ISO_BENCH_FAULT"] = fault
    barrier = tmp_path / "barrier"
    barrier.mkdir(exist_ok=True)
    args = [str(tmp_path / "cache"), kind, str(FLUSH), str(barrier), str(n_workers), str(tmp_path / f"{name}.npy")]
    return subprocess.Popen([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> dict:
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, stdout
    return json.loads(stdout.strip().splitlines()[-1])


@posix_only
@pytest.mark.parametrize("kind", ["sentence", "span"])
def test_two_processes_on_one_cache_encode_each_text_once(tmp_path, kind) -> None:
    procs = [_start(tmp_path, name, kind, n_workers=2) for name in ("a", "b")]
    a, b = (_finish(p) for p in procs)
    assert a["stats"]["computed"] + b["stats"]["computed"] == len(TEXTS)
    assert not set(a["encoded"]) & set(b["encoded"]), "no text encoded by both"
    assert sorted(a["encoded"] + b["encoded"]) == sorted(TEXTS)
    va, vb = np.load(tmp_path / "a.npy"), np.load(tmp_path / "b.npy")
    np.testing.assert_array_equal(va, vb)
    if kind == "sentence":
        np.testing.assert_array_equal(va, np.stack([SlowBackbone.vector(t) for t in TEXTS]))
    else:
        texts, spans = _spans(TEXTS)
        np.testing.assert_array_equal(va, [[s, e, len(t), 0] for t, (s, e) in zip(texts, spans, strict=True)])
    folder = next((tmp_path / "cache").rglob(LOCK_NAME)).parent
    assert len(list(folder.glob(f"{kind}-*.npz"))) == len(TEXTS) // FLUSH, "one shard per chunk, none twice"


def test_a_shard_written_by_another_store_is_picked_up_on_the_next_miss(tmp_path) -> None:
    mine, other = SlowBackbone(), SlowBackbone()
    store = EmbeddingStore(mine, tmp_path, progress=False)
    store.sentences(["a"])  # the store has now read the folder
    EmbeddingStore(other, tmp_path, progress=False).sentences(["b", "c"])
    X = store.sentences(["a", "b", "c", "d"])  # "d" is missing: the shard with "b" and "c" is read then
    assert mine.encoded == ["a", "d"] and other.encoded == ["b", "c"]
    assert store.stats == {"computed": 2, "reused": 3}  # "a" from memory, "b" and "c" from the other's shard
    np.testing.assert_array_equal(X, np.stack([SlowBackbone.vector(t) for t in "abcd"]))


@posix_only
def test_the_lock_is_waited_for_and_the_shards_written_meanwhile_are_read(tmp_path) -> None:
    bb = SlowBackbone()
    store = EmbeddingStore(bb, tmp_path, flush_every=2, progress=False)
    lock = store.folder / LOCK_NAME
    with open(lock, "ab") as handle:
        cache.fcntl.flock(handle.fileno(), cache.fcntl.LOCK_EX)  # another process is encoding
        result = {}
        thread = threading.Thread(target=lambda: result.update(X=store.sentences(["a", "b", "c"])))
        thread.start()
        time.sleep(0.3)
        assert bb.encoded == [], "nothing is encoded while another process holds the lock"
        write_shard(store.folder / "sentence-other.npz", [text_key("b")], [SlowBackbone.vector("b")])
        cache.fcntl.flock(handle.fileno(), cache.fcntl.LOCK_UN)
    thread.join(timeout=30)
    assert bb.encoded == ["a", "c"] and store.stats == {"computed": 2, "reused": 1}
    np.testing.assert_array_equal(result["X"], np.stack([SlowBackbone.vector(t) for t in "abc"]))


def test_a_damaged_shard_found_on_refresh_is_set_aside_and_recomputed(tmp_path, caplog) -> None:
    mine = SlowBackbone()
    store = EmbeddingStore(mine, tmp_path, progress=False)
    store.sentences(["a"])
    EmbeddingStore(SlowBackbone(), tmp_path, progress=False).sentences(["b"])
    (shard,) = [p for p in store.folder.glob("sentence-*.npz") if text_key("b") in read_shard(p)]
    shard.write_bytes(shard.read_bytes()[:100])
    X = store.sentences(["b"])
    assert mine.encoded == ["a", "b"] and "damaged cache shard" in caplog.text
    assert shard.with_suffix(".npz.bad").exists()
    np.testing.assert_array_equal(X[0], SlowBackbone.vector("b"))


def test_stray_temporary_files_are_never_read_as_shards(tmp_path, caplog) -> None:
    folder = EmbeddingStore(SlowBackbone(), tmp_path, progress=False).folder
    # what a process killed while writing leaves, under any temporary name a write has used: complete
    # shards with a wrong vector, and half of one
    stray = [".tmp-k1j2h3.npz", ".sentence-0a1b.npz-k1j2h3.tmp", ".sentence-0a1b.npz"]
    for name in stray:
        write_shard(folder / name, [text_key("a")], [np.zeros(4, np.float32)])
    (folder / ".tmp-sentence-x.npz").write_bytes(b"PK\x03\x04 half a shard")
    bb = SlowBackbone()
    X = EmbeddingStore(bb, tmp_path, progress=False).sentences(["a"])
    assert bb.encoded == ["a"] and "damaged" not in caplog.text
    np.testing.assert_array_equal(X[0], SlowBackbone.vector("a"))
    assert all((folder / name).exists() for name in [*stray, ".tmp-sentence-x.npz"]), "none set aside either"


@posix_only
@pytest.mark.parametrize("fault", ["encode:2", "shard-write:2"])
def test_a_run_killed_mid_chunk_loses_only_that_chunk(tmp_path, fault, caplog) -> None:
    proc = _start(tmp_path, "killed", fault=fault)
    proc.communicate(timeout=120)
    assert proc.returncode == -9, "the fault point killed the worker"
    folder = next((tmp_path / "cache").rglob(LOCK_NAME)).parent
    shards = list(folder.glob("sentence-*.npz"))
    assert len(shards) == 1 and len(read_shard(shards[0])) == FLUSH, "the first chunk was kept"
    leftovers = [p for p in folder.iterdir() if p.name.startswith(".")]  # a half-written temporary file
    assert bool(leftovers) == fault.startswith("shard-write")
    bb = SlowBackbone()
    X = EmbeddingStore(bb, tmp_path / "cache", flush_every=FLUSH, progress=False).sentences(TEXTS)
    assert bb.encoded == TEXTS[FLUSH:] and "damaged" not in caplog.text
    np.testing.assert_array_equal(X, np.stack([SlowBackbone.vector(t) for t in TEXTS]))


def test_without_fcntl_a_store_runs_unlocked(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(cache, "fcntl", None)
    bb = SlowBackbone()
    store = EmbeddingStore(bb, tmp_path, progress=False)
    np.testing.assert_array_equal(store.sentences(["a"])[0], SlowBackbone.vector("a"))
    assert not (store.folder / LOCK_NAME).exists() and bb.encoded == ["a"]


def test_a_memory_only_store_takes_no_lock(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = EmbeddingStore(SlowBackbone(), None, flush_every=1, progress=False)
    assert store.sentences(["a", "b"]).shape == (2, 4) and store.stats["computed"] == 2
    assert not list(tmp_path.rglob(LOCK_NAME))


if __name__ == "__main__":
    _worker(sys.argv[1:])
