"""The raw-vector store: one encode per text, disk round trips, damaged shards detected."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import iso_bench.vectors.store as cache_mod
from iso_bench.vectors.shards import locate
from iso_bench.vectors.store import CacheCorruptError, EmbeddingStore, read_shard, text_key, write_shard


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
    raw[locate(shard)[0] + 5] ^= 0xFF  # flip bits inside the stored vectors
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


class PromptedBackbone(CountingBackbone):
    """A fake prompt-aware backbone (like mteb's implementation of e5): queries get the prompt ``"q: "``, other
    texts none; a vector's second coordinate is the length of the prompt it was encoded with. It makes
    sentence vectors only, like a model without hidden states."""

    kinds = ("sentence",)

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def prompt_context(self, task_metadata=None, prompt_type=None):
        return "q: " if prompt_type == "query" else None

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc="", task_metadata=None,
               prompt_type=None):
        self.calls.append((tuple(kinds), task_metadata, prompt_type, list(texts)))
        prompt = self.prompt_context(task_metadata, prompt_type) or ""
        return {"sentence": [np.array([len(t), len(prompt), 0], np.float32) for t in texts]}


def test_a_text_without_prompt_keeps_its_plain_key() -> None:
    assert text_key("a cat") == hashlib.sha256(b"a cat").digest() == text_key("a cat", context="")
    assert text_key("a cat", context="query: ") == hashlib.sha256(b"query: \x00a cat").digest()
    assert text_key("a cat", (2, 5), "query: ") != text_key("a cat", (2, 5)) != text_key("a cat")


def test_the_prompt_is_part_of_the_key_and_reaches_the_backbone(tmp_path) -> None:
    bb = PromptedBackbone()
    store = EmbeddingStore(bb, tmp_path, kinds=("sentence", "tokens"), progress=False)
    plain = store.sentences(["ab", "cd"], task_metadata="sts")
    query = store.sentences(["ab", "cd"], task_metadata="retrieval", prompt_type="query")
    assert plain[:, 1].tolist() == [0, 0] and query[:, 1].tolist() == [3, 3]
    # the task and prompt type reach the backbone; tokens are not asked of a backbone that cannot make them
    assert bb.calls == [(("sentence",), "sts", None, ["ab", "cd"]), (("sentence",), "retrieval", "query", ["ab", "cd"])]
    store.sentences(["cd"], prompt_type="query")
    store.sentences(["ab"], task_metadata="other task, same prompt")
    assert len(bb.calls) == 2 and store.stats == {"computed": 4, "reused": 2}
    assert store.prompt(prompt_type="query") == "q: " and store.prompt() is None
    again = PromptedBackbone()
    from_disk = EmbeddingStore(again, tmp_path, progress=False).sentences(["ab"], prompt_type="query")
    np.testing.assert_array_equal(from_disk, query[:1])
    assert again.calls == []
    on_disk = {key for shard in tmp_path.rglob("sentence-*.npz") for key in read_shard(shard)}
    assert on_disk == {text_key("ab"), text_key("cd"), text_key("ab", context="q: "), text_key("cd", context="q: ")}


def test_a_backbone_without_prompts_ignores_task_and_prompt_type() -> None:
    bb = CountingBackbone()  # no prompt_context: encode is called as before, and keys stay the plain ones
    store = EmbeddingStore(bb, None, progress=False)
    X = store.sentences(["ab"], task_metadata="a task", prompt_type="query")
    np.testing.assert_array_equal(store.sentences(["ab"]), X)
    assert bb.encoded == ["ab"] and list(store._mem["sentence"]) == [text_key("ab")]


def test_a_repeated_request_is_served_whole_read_only_and_tells_texts_apart() -> None:
    bb = CountingBackbone()
    store = EmbeddingStore(bb, None, progress=False)
    first = store.sentences(["a b", "c"])
    assert store.sentences(["a b", "c"]) is first and not first.flags.writeable  # shared, so never written to
    with pytest.raises(ValueError):
        first[0, 0] = 1.0
    # the same characters split otherwise, or in another order, are other requests
    np.testing.assert_array_equal(store.sentences(["a", "b c"])[:, 0], [1, 3])
    np.testing.assert_array_equal(store.sentences(["c", "a b"])[:, 0], [1, 3])
    assert bb.encoded == ["a b", "c", "a", "b c"] and store.stats["reused"] == 4


def test_the_kept_matrices_stay_under_their_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    store = EmbeddingStore(CountingBackbone(), None, progress=False)
    one_row = store.sentences(["a"]).nbytes
    monkeypatch.setattr(cache_mod, "RECENT_BYTES", 2 * one_row)
    store.sentences(["b"])
    store.sentences(["c", "d"])  # two rows: over the budget with the others, so they go, oldest first
    assert list(store._recent.values())[0].shape[0] == 2 and len(store._recent) == 1
    third = store.sentences(["e", "f", "g"])  # alone over the budget: not kept at all
    assert not store._recent
    again = store.sentences(["e", "f", "g"])  # stacked again from the per-text vectors, not served whole
    assert again is not third
    np.testing.assert_array_equal(again, third)


def test_a_request_not_to_remember_leaves_the_kept_matrices_as_they_were() -> None:
    store = EmbeddingStore(CountingBackbone(), None, progress=False)
    kept = store.sentences(["a b", "c"])
    batch = store.sentences(["d", "e"], remember=False)  # a streaming fit's batch
    assert list(store._recent.values()) == [kept] and not batch.flags.writeable
    assert store.sentences(["d", "e"], remember=False) is not batch  # read again, not served from memory


def test_the_index_asks_sqlite_for_a_key_once_and_forgets_a_dropped_shards_entries(tmp_path) -> None:
    from iso_bench.vectors.index import ShardIndex

    keys = [text_key(t) for t in ("a", "b", "c")]
    for name, key in (("sentence-a.npz", keys[0]), ("sentence-b.npz", keys[1])):
        ShardIndex(tmp_path).add("sentence", name, write_shard(tmp_path / name, [key], [np.ones(3, np.float32)]))
    index = ShardIndex(tmp_path)  # a process that did not write them: it learns them from SQLite
    asked: list[str] = []
    index.db.set_trace_callback(asked.append)
    first = index.lookup("sentence", keys)
    assert sorted(v[0] for v in first.values()) == ["sentence-a.npz", "sentence-b.npz"]
    assert any(q.startswith("SELECT e.key") for q in asked)
    asked.clear()
    assert index.lookup("sentence", keys[:2]) == first  # both known: SQLite is not asked
    assert not any(q.startswith("SELECT") for q in asked)
    index.drop(["sentence-a.npz"])
    assert set(index.lookup("sentence", keys)) == {keys[1]}


def test_a_shard_damaged_after_this_store_read_it_is_still_caught_and_recomputed(tmp_path, caplog) -> None:
    bb = CountingBackbone()
    store = EmbeddingStore(bb, tmp_path, kinds=("tokens",), progress=False)
    assert [t.tolist() for t in store.tokens(["a b"])] == [[[3.0] * 3] * 2]
    (shard,) = list(tmp_path.rglob("tokens-*.npz"))
    raw = bytearray(shard.read_bytes())
    raw[locate(shard)[0] + 5] ^= 0xFF
    shard.write_bytes(bytes(raw))
    assert [t.tolist() for t in store.tokens(["a b"])] == [[[3.0] * 3] * 2]  # the entry it knew failed its CRC
    assert bb.encoded == ["a b", "a b"] and "damaged cache shard" in caplog.text
