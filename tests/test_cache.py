"""The raw-vector store: one encode per text, disk round trips, damaged shards detected."""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.cache import CacheCorruptError, EmbeddingStore, read_shard, text_key, write_shard


class CountingBackbone:
    """A fake backbone: the vector of a text is derived from its length; counts encoded texts."""

    dim = 3
    extraction = type("E", (), {"key": staticmethod(lambda: "fake"), "normalize": False})()

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def describe(self) -> dict:
        return {"model": "test/fake", "revision": "r1", "extraction": {}}

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        self.encoded.extend(texts)
        out = {}
        if "sentence" in kinds:
            out["sentence"] = [np.array([len(t), 1.0, 2.0], np.float32) for t in texts]
        if "tokens" in kinds:
            out["tokens"] = [np.full((len(t.split()), 3), len(t), np.float32) for t in texts]
        if "span" in kinds:
            out["span"] = [np.array([[s, e, 0] for s, e in text_spans], np.float32) for text_spans in spans]
        return out


def test_each_text_is_encoded_once_across_calls_and_kinds() -> None:
    bb = CountingBackbone()
    store = EmbeddingStore(bb, None, kinds=("sentence", "tokens"), progress=False)
    X = store.sentences(["ab", "abc", "ab"])
    assert X.shape == (3, 3) and X[0, 0] == 2 and X[1, 0] == 3
    toks = store.tokens(["ab", "abc"])  # computed in the same pass as the sentence vectors
    assert [t.shape for t in toks] == [(1, 3), (1, 3)]
    store.sentences(["abc", "abcd"])
    assert bb.encoded == ["ab", "abc", "abcd"]
    assert store.stats == {"computed": 3, "reused": 4}


def test_disk_cache_survives_a_new_store(tmp_path) -> None:
    first = CountingBackbone()
    EmbeddingStore(first, tmp_path, progress=False).sentences(["one", "three"])
    second = CountingBackbone()
    X = EmbeddingStore(second, tmp_path, progress=False).sentences(["three", "one"])
    assert second.encoded == []
    np.testing.assert_array_equal(X[:, 0], [5, 3])
    assert not list(tmp_path.rglob(".tmp-*")), "no temporary files left behind"


def test_spans_are_keyed_by_text_and_span(tmp_path) -> None:
    bb = CountingBackbone()
    store = EmbeddingStore(bb, tmp_path, progress=False)
    V = store.spans(["a b", "a b", "c"], [(0, 1), (2, 3), (0, 1)])
    np.testing.assert_array_equal(V[:, :2], [[0, 1], [2, 3], [0, 1]])
    assert bb.encoded == ["a b", "c"]  # a text with two spans is encoded once
    again = EmbeddingStore(CountingBackbone(), tmp_path, progress=False)
    np.testing.assert_array_equal(again.spans(["a b"], [(2, 3)]), V[1:2])
    assert text_key("a b", (0, 1)) != text_key("a b", (2, 3)) != text_key("a b")


def test_damaged_shard_is_detected_set_aside_and_recomputed(tmp_path, caplog) -> None:
    EmbeddingStore(CountingBackbone(), tmp_path, progress=False).sentences(["one", "two"])
    (shard,) = list(tmp_path.rglob("sentence-*.npz"))
    raw = bytearray(shard.read_bytes())
    raw[-200] ^= 0xFF  # flip bits inside the stored data
    shard.write_bytes(bytes(raw))
    with pytest.raises(CacheCorruptError):
        read_shard(shard)
    bb = CountingBackbone()
    X = EmbeddingStore(bb, tmp_path, progress=False).sentences(["one", "two"])
    assert bb.encoded == ["one", "two"]
    np.testing.assert_array_equal(X[:, 0], [3, 3])
    assert "damaged cache shard" in caplog.text
    assert list(tmp_path.rglob("*.npz.bad"))


def test_truncated_shard_is_rejected(tmp_path) -> None:
    path = tmp_path / "sentence-x.npz"
    write_shard(path, [text_key("a")], [np.ones(4, np.float32)])
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CacheCorruptError, match="unreadable"):
        read_shard(path)


def test_variable_length_round_trip(tmp_path) -> None:
    path = tmp_path / "tokens-x.npz"
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 3), np.float32)]
    write_shard(path, [text_key("a"), text_key("b")], arrays)
    back = read_shard(path)
    np.testing.assert_array_equal(back[text_key("a")], arrays[0])
    np.testing.assert_array_equal(back[text_key("b")], arrays[1])


def test_shards_get_the_usual_file_mode(tmp_path) -> None:
    import os

    path = tmp_path / "sentence-x.npz"
    write_shard(path, [text_key("a")], [np.ones(4, np.float32)])
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's private 0o600
