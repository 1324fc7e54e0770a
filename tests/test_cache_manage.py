"""``iso-bench cache``: what a cache folder holds, and pruning it by model, by age and down to a size, under
each namespace's encode lock; what is pruned is encoded again when asked for."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from iso_bench import cache
from iso_bench.cache import LOCK_NAME, EmbeddingStore
from iso_bench.cli import main
from iso_bench.vectors.index import ShardIndex
from iso_bench.vectors.manage import CacheError, namespaces, parse_size, prune


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
