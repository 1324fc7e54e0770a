"""A text's token vectors are kept once on disk: where they are a run of the rows its pooling reads (the rows
between the special tokens), the index points into the pool shard instead of writing them again."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from iso_bench.vectors.index import ShardIndex
from iso_bench.vectors.manage import namespaces
from iso_bench.vectors.shards import as_stored, run_within
from iso_bench.vectors.store import EmbeddingStore, text_key

DIM = 6


class Extraction:
    def __init__(self, dtype: str | None) -> None:
        self.dtype, self.normalize = dtype, False

    def key(self) -> str:
        return "fake" if self.dtype is None else f"fake-{self.dtype}"


class PoolingBackbone:
    """A text's rows are a start row, a row per word and an end row (a mean pooling's input); its token vectors
    are the word rows. A text starting with "odd" gives its token vectors in reverse order: not a run of its
    pooled rows. ``bits16`` rounds every value to bfloat16 first (a model run in bfloat16)."""

    dim = DIM
    kinds = ("sentence", "tokens", "pool")

    def __init__(self, dtype: str | None = None) -> None:
        self.extraction = Extraction(dtype)
        self.encoded: list[str] = []

    def describe(self) -> dict:
        return {"model": "test/pooling", "revision": "r1", "extraction": {}}

    def rows(self, text: str) -> np.ndarray:
        seed = sum(map(ord, text))
        rows = np.random.default_rng(seed).standard_normal((len(text.split()) + 2, DIM)).astype(np.float32)
        if self.extraction.dtype == "bfloat16":
            rows = (rows.view(np.uint32) & 0xFFFF0000).view(np.float32)
        return rows

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        self.encoded.extend(texts)
        pooled = [self.rows(t) for t in texts]
        out = {}
        if "sentence" in kinds:
            out["sentence"] = [r.mean(axis=0) for r in pooled]
        if "tokens" in kinds:
            out["tokens"] = [r[1:-1][::-1].copy() if t.startswith("odd") else r[1:-1].copy()
                             for t, r in zip(texts, pooled, strict=True)]
        if "pool" in kinds:
            out["pool"] = pooled
        return out


TEXTS = ["a cat sat", "the dog ran far away", "odd one out here", "x", "a cat sat on the mat"]


def expected_tokens(bb: PoolingBackbone, text: str) -> np.ndarray:
    r = bb.rows(text)[1:-1]
    return r[::-1] if text.startswith("odd") else r


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_token_vectors_that_are_a_run_of_the_pooled_rows_are_not_written_twice(tmp_path, dtype) -> None:
    bb = PoolingBackbone(dtype)
    store = EmbeddingStore(bb, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False)
    store.sentences(TEXTS)
    (token_shard,) = store.folder.glob("tokens-*.npz")  # only the text whose tokens are out of order
    with np.load(token_shard) as z:
        assert len(z["keys"]) == 1 and z["keys"][0].tobytes() == text_key("odd one out here")
    (pool_shard,) = store.folder.glob("pool-*.npz")
    found = ShardIndex(store.folder).lookup("tokens", [text_key(t) for t in TEXTS])
    assert {found[text_key(t)][0] for t in TEXTS if not t.startswith("odd")} == {pool_shard.name}
    with np.load(pool_shard) as z:  # each reference is its text's rows 1 to n - 1 of the pool shard, with its CRC
        data, offsets = z["data"], z["offsets"]
        assert str(data.dtype) == ("uint16" if dtype else "float32")
        for i, key in enumerate(z["keys"]):
            name, start, stop, crc = found[key.tobytes()]
            if name == pool_shard.name:
                assert (start, stop) == (offsets[i] + 1, offsets[i + 1] - 1)
                assert crc == zlib.crc32(data[start:stop])
    again = PoolingBackbone(dtype)
    fresh = EmbeddingStore(again, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False)
    for text, got in zip(TEXTS, fresh.tokens(TEXTS), strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected_tokens(bb, text))
    for text, got in zip(TEXTS, fresh.pool_rows(TEXTS), strict=True):
        np.testing.assert_array_equal(got, bb.rows(text))
    assert again.encoded == []
    summary = {ns.model: ns for ns in namespaces(tmp_path)}["test__pooling"]
    assert summary.kinds["tokens"][:2] == (1, len(TEXTS))  # one shard of its own, every text counted


def test_a_damaged_or_missing_pool_shard_takes_its_token_references_with_it(tmp_path, caplog) -> None:
    bb = PoolingBackbone()
    EmbeddingStore(bb, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False).sentences(TEXTS)
    folder = next(tmp_path.glob("*/*/*"))
    (pool_shard,) = folder.glob("pool-*.npz")
    found = ShardIndex(folder).lookup("tokens", [text_key("the dog ran far away")])
    _, start, _, _ = found[text_key("the dog ran far away")]
    with np.load(pool_shard) as z:
        first = z["offsets"][0]
    raw = bytearray(pool_shard.read_bytes())  # one byte of that text's first token vector, inside the data member
    from iso_bench.vectors.shards import locate

    at = locate(pool_shard)[0] + (start - first) * DIM * 4
    raw[at] ^= 0xFF
    pool_shard.write_bytes(bytes(raw))
    again = PoolingBackbone()
    store = EmbeddingStore(again, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False)
    got = store.tokens(["the dog ran far away"])[0]
    np.testing.assert_array_equal(got, expected_tokens(bb, "the dog ran far away"))
    assert again.encoded == ["the dog ran far away"] and "checksum mismatch" in caplog.text
    assert list(folder.glob("pool-*.npz.bad"))
    (pool_shard,) = folder.glob("pool-*.npz")  # the shard written again: removed, its references with it
    pool_shard.unlink()
    third = PoolingBackbone()
    store = EmbeddingStore(third, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False)
    got = store.tokens(["the dog ran far away", "a cat sat"])
    np.testing.assert_array_equal(got[0], expected_tokens(bb, "the dog ran far away"))
    np.testing.assert_array_equal(got[1], expected_tokens(bb, "a cat sat"))
    assert third.encoded == ["the dog ran far away", "a cat sat"]  # both shards that held them are gone


def test_run_within_finds_only_byte_identical_runs() -> None:
    block = np.arange(12, dtype=np.float32).reshape(6, 2)
    assert run_within(block[1:5].copy(), block) == 1
    assert run_within(block[3:6].copy(), block) == 3
    assert run_within(block[:0].copy(), block) is None  # nothing to refer to
    assert run_within(block, block[:3]) is None
    zeros = np.zeros((3, 2), np.float32)
    negative = zeros.copy()
    negative[1, 0] = -0.0
    assert run_within(negative[1:2], zeros) is None  # -0.0 equals 0.0, but is another value on disk
    assert as_stored(np.array([[1.0, -2.5]], np.float32), "float16").dtype == np.float16


def test_cache_list_says_where_token_vectors_kept_in_pool_shards_are(tmp_path) -> None:
    from iso_bench.vectors.manage import describe

    texts = [t for t in TEXTS if not t.startswith("odd")]
    EmbeddingStore(PoolingBackbone(), tmp_path, kinds=("sentence", "tokens", "pool"), progress=False).sentences(texts)
    (ns,) = namespaces(tmp_path)
    assert ns.kinds["tokens"] == (0, len(texts), 0) and ns.kinds["pool"][:2] == (1, len(texts))
    row = next(line for line in describe(tmp_path).splitlines() if " tokens " in line)
    assert row.split()[-5:] == [str(len(texts)), "0", "in", "pool", "shards"], row


def test_pruning_a_pool_shard_takes_its_token_references_with_it(tmp_path) -> None:
    from iso_bench.vectors.manage import prune

    bb = PoolingBackbone()
    texts = [t for t in TEXTS if not t.startswith("odd")]
    EmbeddingStore(bb, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False).sentences(texts)
    folder = next(tmp_path.glob("*/*/*"))
    assert len(ShardIndex(folder).lookup("tokens", [text_key(t) for t in texts])) == len(texts)
    removed = prune(tmp_path, model="test/pooling")
    assert {p.name.split("-")[0] for p in removed} == {"sentence", "pool"}
    assert ShardIndex(folder).lookup("tokens", [text_key(t) for t in texts]) == {}
    again = PoolingBackbone()
    got = EmbeddingStore(again, tmp_path, kinds=("sentence", "tokens", "pool"), progress=False).tokens(texts[:1])
    np.testing.assert_array_equal(got[0], expected_tokens(bb, texts[0]))
    assert again.encoded == texts[:1]
