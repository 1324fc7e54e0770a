"""``iso-bench cache``: what a cache folder holds, and pruning it by model, by age and down to a size, under
each namespace's encode lock; what is pruned is encoded again when asked for."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from iso_bench.cli import main
from iso_bench.vectors import encoding
from iso_bench.vectors import store as cache
from iso_bench.vectors.index import ShardIndex
from iso_bench.vectors.manage import CacheError, namespaces, parse_size, prune
from iso_bench.vectors.store import LOCK_NAME, EmbeddingStore


class Backbone:
    dim = 8
    kinds = ("sentence", "tokens")
    extraction = type("E", (), {"key": staticmethod(lambda: "mean"), "normalize": False})()

    def __init__(self, model: str) -> None:
        self.model, self.encoded = model, []

    def describe(self) -> dict:
        return {"model": self.model, "revision": "r1", "extraction": {}}

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        self.encoded += texts
        out = {"sentence": [np.full(8, len(t), np.float32) for t in texts]}
        if "tokens" in kinds:
            out["tokens"] = [np.ones((len(t.split()), 8), np.float32) for t in texts]
        return out


def _fill(root: Path, model: str, texts: list[str], kinds=("sentence",)) -> EmbeddingStore:
    store = EmbeddingStore(Backbone(model), root, kinds=kinds, flush_every=2, progress=False)
    store.sentences(texts)
    return store


@pytest.fixture
def two_models(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    a = _fill(root, "org/a", ["one two", "three", "four five six", "seven"], kinds=("sentence", "tokens"))
    _fill(root, "org/b", ["x", "y y"])
    (a.folder / "fits").mkdir()
    (a.folder / "fits" / "f.npz").write_bytes(b"\0" * 1000)
    return root


def test_list_says_what_each_namespace_holds(two_models: Path, capsys) -> None:
    found = {ns.model: ns for ns in namespaces(two_models)}
    assert set(found) == {"org__a", "org__b"}
    assert found["org__a"].kinds["sentence"][:2] == (2, 4)  # 2 shards of 2 texts (flush_every=2), 4 texts
    assert found["org__a"].kinds["tokens"][1] == 4 and found["org__a"].fits == (1, 1000)
    assert found["org__b"].kinds == {"sentence": found["org__b"].kinds["sentence"]}
    assert found["org__b"].kinds["sentence"][1] == 2
    assert main(["cache", "list", "--cache-dir", str(two_models)]) == 0
    out = capsys.readouterr().out
    assert "org__a" in out and "tokens" in out and "fits" in out and f"in {two_models}" in out


def test_prune_by_model_removes_only_its_files_and_they_are_encoded_again(two_models: Path) -> None:
    removed = prune(two_models, model="org/a")
    assert removed and all("org__a" in str(p) for p in removed)
    assert not list((two_models / "org__a").rglob("*.npz"))
    assert {ns.model: ns.bytes > 0 for ns in namespaces(two_models)} == {"org__a": False, "org__b": True}
    again = EmbeddingStore(Backbone("org/a"), two_models, progress=False)
    again.sentences(["three"])
    assert again.backbone.encoded == ["three"]
    untouched = EmbeddingStore(Backbone("org/b"), two_models, progress=False)
    untouched.sentences(["x"])
    assert untouched.backbone.encoded == []


def test_prune_by_age_and_down_to_a_size_takes_the_oldest_first(two_models: Path) -> None:
    (folder,) = [ns.folder for ns in namespaces(two_models) if ns.model == "org__b"]
    index = ShardIndex(folder)
    (old,) = [name for name, *_ in index.shards()]
    with index.db:
        index.db.execute("UPDATE shards SET written = written - 10 * 86400 WHERE name = ?", (old,))
    index.close()
    assert [p.name for p in prune(two_models, older_than_days=5, dry_run=True)] == [old]
    assert (folder / old).exists()  # a dry run removes nothing
    assert [p.name for p in prune(two_models, older_than_days=5)] == [old]
    total = sum(ns.bytes for ns in namespaces(two_models))
    newest = max((p for p in two_models.rglob("*.npz")), key=lambda p: p.stat().st_mtime)
    prune(two_models, max_bytes=total // 2)
    assert sum(ns.bytes for ns in namespaces(two_models)) <= total // 2 and newest.exists()


@pytest.mark.skipif(cache.fcntl is None, reason="no fcntl.flock on this platform")
def test_prune_waits_for_a_writer_of_the_namespace(two_models: Path) -> None:
    (folder,) = [ns.folder for ns in namespaces(two_models) if ns.model == "org__b"]
    with open(folder / LOCK_NAME, "ab") as handle:
        cache.fcntl.flock(handle.fileno(), cache.fcntl.LOCK_EX)  # a run is encoding there
        done = threading.Thread(target=prune, args=(two_models,), kwargs={"model": "org/b"})
        done.start()
        time.sleep(0.3)
        assert list(folder.glob("sentence-*.npz")), "nothing removed while the writer holds the lock"
        cache.fcntl.flock(handle.fileno(), cache.fcntl.LOCK_UN)
    done.join(timeout=30)
    assert not list(folder.glob("sentence-*.npz"))


def test_bad_prune_requests_are_one_line(two_models: Path, capsys) -> None:
    assert main(["cache", "prune", "--cache-dir", str(two_models)]) == 2
    assert "say what to prune" in capsys.readouterr().err
    with pytest.raises(CacheError, match="--model org/c: not in the cache .models there: org/a, org/b"):
        prune(two_models, model="org/c")
    assert parse_size("1.5G") == int(1.5 * (1 << 30)) and parse_size("800000") == 800000
    with pytest.raises(CacheError, match="not a size"):
        parse_size("lots")
    assert main(["cache", "list", "--cache-dir", str(two_models / "nowhere")]) == 2


def _task(name: str):
    return type("Meta", (), {"name": name})()


def test_list_counts_texts_per_task_and_a_shard_indexed_from_disk_says_so(tmp_path: Path, capsys) -> None:
    root = tmp_path / "cache"
    store = EmbeddingStore(Backbone("org/a"), root, flush_every=10, progress=False)
    store.sentences(["a", "b", "c"], task_metadata=_task("STS12"))
    store.sentences(["c", "d"], task_metadata=_task("SICK-R"))  # "c" is STS12's: SICK-R adds one text
    store.sentences(["e"])
    (ns,) = namespaces(root)
    assert {task: texts for (kind, task), (_, texts, _) in ns.tasks.items()} == {
        "STS12": 3, "SICK-R": 1, "(task not recorded)": 1}
    assert ns.kinds["sentence"][:2] == (3, 5)
    assert main(["cache", "list", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "STS12" in out and "SICK-R" in out


def test_an_index_written_before_tasks_were_recorded_gains_the_column(tmp_path: Path) -> None:
    import sqlite3

    store = _fill(tmp_path, "org/a", ["a", "b"])
    store.index.close()
    db = sqlite3.connect(store.folder / "index.sqlite")
    db.execute("ALTER TABLE shards DROP COLUMN task")
    db.commit()
    db.close()
    again = EmbeddingStore(Backbone("org/a"), tmp_path, progress=False)
    assert again.held("sentence", [cache.text_key("a")])  # read through the migrated index
    again.sentences(["z"], task_metadata=_task("STS16"))
    assert ("sentence", "STS16") in namespaces(tmp_path)[0].tasks


def test_ensure_encodes_what_is_missing_chunk_by_chunk_and_reads_nothing_back(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(encoding, "ENSURE_CHUNK", 2)
    store = _fill(tmp_path, "org/a", ["b"])
    store.kinds = ("sentence", "tokens")
    store.backbone.encoded = []
    reads = []
    monkeypatch.setattr(store, "_fill", lambda *a: reads.append(a))
    assert store.ensure(["a b", "b", "c", "d e f", "a b"]) is None
    # "b" has a sentence vector but no token vectors: it is encoded once more, for its tokens alone
    assert sorted(store.backbone.encoded) == ["a b", "b", "c", "d e f"] and reads == []
    monkeypatch.undo()
    texts = ["a b", "b", "c", "d e f"]
    assert len(store.holds("sentence", [cache.text_key(t) for t in texts])) == 4
    assert len(store.holds("tokens", [cache.text_key(t) for t in texts])) == 4


def test_token_vectors_of_a_task_over_the_budget_are_computed_and_not_kept(tmp_path: Path) -> None:
    store = EmbeddingStore(Backbone("org/a"), tmp_path, kinds=("sentence", "tokens"), progress=False,
                           token_cache_texts=3)
    big, small = _task("MSMARCO"), _task("STS16")
    store.note_task_size("MSMARCO", 4)
    store.note_task_size("STS16", 3)
    store.ensure(["w x", "y", "z z", "v"], task_metadata=big)
    store.ensure(["s t", "u"], task_metadata=small)
    keys = [cache.text_key(t) for t in ["w x", "y", "z z", "v"]]
    assert len(store.holds("sentence", keys)) == 4 and not store.holds("tokens", keys)
    assert len(store.holds("tokens", [cache.text_key(t) for t in ["s t", "u"]])) == 2
    store.backbone.encoded = []
    toks = store.tokens(["w x", "y"], task_metadata=big)  # a token-level variant's request: computed, dropped
    assert [t.shape for t in toks] == [(2, 8), (1, 8)] and store.backbone.encoded == ["w x", "y"]
    assert not store.holds("tokens", keys)
    store.tokens(["w x"], task_metadata=big)
    assert store.backbone.encoded == ["w x", "y", "w x"]  # the price: encoded again
    store.tokens(["s t", "u"], task_metadata=small)
    assert store.backbone.encoded == ["w x", "y", "w x"]  # a small task's are read from the cache
    too_many = EmbeddingStore(Backbone("org/b"), tmp_path, kinds=("sentence", "tokens"), progress=False,
                              token_cache_texts=1)
    too_many.tokens(["p", "q"])  # a request over the budget, of a task nobody sized
    assert not too_many.holds("tokens", [cache.text_key("p")])
