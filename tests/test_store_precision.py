"""Raw vectors of a 16-bit forward pass are kept in 16 bits: half the bytes, the same numbers read back in float32."""

from __future__ import annotations

import hashlib
import sqlite3
import zipfile

import numpy as np
import pytest

from iso_bench.vectors.shards import FLOAT32, locate, narrow, read_shard, widen, write_shard
from iso_bench.vectors.store import CacheCorruptError, EmbeddingStore, forward_precision, text_key

DIM = 256


class Extraction:
    """What a backbone's extraction says of its forward pass (``dtype``: None for float32)."""

    def __init__(self, dtype: str | None) -> None:
        self.dtype = dtype
        self.normalize = False

    def key(self) -> str:
        return "fake" if self.dtype is None else f"fake-{self.dtype}"


class HalfBackbone:
    """Vectors from a real torch forward pass (an embedding and a linear layer, seeded) run in ``dtype``: each word
    of a text is a token vector, their first row the sentence vector; spans are averaged in float32, as the
    backbones average sub-token vectors. Counts the texts it encodes."""

    dim = DIM

    def __init__(self, dtype: str | None) -> None:
        import torch

        torch.manual_seed(0)
        self.extraction = Extraction(dtype)
        self.net = torch.nn.Sequential(torch.nn.Embedding(97, DIM), torch.nn.Linear(DIM, DIM))
        self.net.to(getattr(torch, dtype or "float32"))
        self.encoded: list[str] = []

    def describe(self) -> dict:
        return {"model": "test/half", "revision": "r1", "extraction": {}}

    def forward(self, text: str) -> np.ndarray:
        import torch

        ids = torch.tensor([sum(map(ord, w)) % 97 for w in text.split()])
        with torch.no_grad():
            return self.net(ids).float().numpy()  # what a backbone hands the store: float32

    def encode(self, texts, *, kinds, spans=None, batch_size=32, progress=True, desc=""):
        self.encoded.extend(texts)
        rows = [self.forward(t) for t in texts]
        out = {}
        if "sentence" in kinds:
            out["sentence"] = [r[0] for r in rows]
        if "tokens" in kinds:
            out["tokens"] = rows
        if "span" in kinds:
            out["span"] = [np.stack([r[:2].mean(axis=0) for _ in s]) for r, s in zip(rows, spans, strict=True)]
        return out


TEXTS = [" ".join(f"w{(i * 7 + j) % 31}" for j in range(3 + i % 5)) for i in range(40)]


def shard_bytes(store: EmbeddingStore, kind: str) -> int:
    return sum(p.stat().st_size for p in store.folder.glob(f"{kind}-*.npz"))


def data_dtype(store: EmbeddingStore, kind: str) -> set[str]:
    out = set()
    for path in store.folder.glob(f"{kind}-*.npz"):
        with np.load(path) as z:
            out.add(str(z["data"].dtype))
    return out


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_16_bit_extraction_keeps_half_the_bytes_and_reads_back_the_forward_values(tmp_path, dtype) -> None:
    half, full = HalfBackbone(dtype), HalfBackbone(None)
    wide = HalfBackbone(dtype)
    wide.extraction = Extraction(None)  # the same 16-bit values, kept as a float32 extraction keeps them
    stores = {}
    for name, bb in {"half": half, "wide": wide, "full": full}.items():
        stores[name] = store = EmbeddingStore(bb, tmp_path / name, kinds=("sentence", "tokens"), progress=False)
        store.sentences(TEXTS)
    assert forward_precision(half) == dtype and forward_precision(full) is None
    assert data_dtype(stores["half"], "tokens") == {"uint16" if dtype == "bfloat16" else "float16"}
    assert data_dtype(stores["wide"], "tokens") == data_dtype(stores["full"], "tokens") == {"float32"}
    for kind in ("sentence", "tokens"):  # the data is exactly half; the keys, offsets and zip around it are not
        ratio = shard_bytes(stores["half"], kind) / shard_bytes(stores["wide"], kind)
        assert 0.5 < ratio < (0.56 if kind == "tokens" else 0.6), (kind, ratio)
    # a new store reads them back from disk as float32, bit for bit the forward pass's values
    again = HalfBackbone(dtype)
    fresh = EmbeddingStore(again, tmp_path / "half", kinds=("sentence", "tokens"), progress=False)
    X, toks = fresh.sentences(TEXTS), fresh.tokens(TEXTS)
    assert again.encoded == [] and X.dtype == np.float32 and toks[0].dtype == np.float32
    expected = [half.forward(t) for t in TEXTS]
    np.testing.assert_array_equal(X.view(np.uint32), np.stack([e[0] for e in expected]).view(np.uint32))
    for got, want in zip(toks, expected, strict=True):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # and the full-precision model's vectors are not 16-bit numbers: they stay float32
    assert narrow(full.forward(TEXTS[0]), dtype)[1] == FLOAT32


def test_span_vectors_averaged_in_float32_stay_float32(tmp_path) -> None:
    bb = HalfBackbone("bfloat16")
    store = EmbeddingStore(bb, tmp_path, progress=False)
    V = store.spans(TEXTS[:4], [(0, 2)] * 4)
    assert data_dtype(store, "span") == {"float32"}  # a mean of two bfloat16 rows is rarely a bfloat16
    db = sqlite3.connect(store.folder / "index.sqlite")
    assert db.execute("SELECT storage FROM shards WHERE kind = 'span'").fetchall() == [(None,)]
    back = EmbeddingStore(HalfBackbone("bfloat16"), tmp_path, progress=False).spans(TEXTS[:4], [(0, 2)] * 4)
    np.testing.assert_array_equal(back, V)


def test_narrow_is_exact_or_declines() -> None:
    values = np.array([[1.0, -2.5, 0.0, -0.0, np.inf, np.nan, 2.0**127, 2.0**-130]], np.float32)
    stored, kept = narrow(values, "bfloat16")  # all of these are bfloat16 numbers (the upper 16 bits only)
    assert kept == "bfloat16" and stored.dtype == np.uint16
    assert stored[0, :4].tolist() == [0x3F80, 0xC020, 0x0000, 0x8000]  # by hand: 1.0 is 0x3F800000
    np.testing.assert_array_equal(widen(stored).view(np.uint32), values.view(np.uint32))
    assert narrow(values, "float16")[1] == FLOAT32  # 2^127 is beyond float16's range
    small = np.array([[1.0, -2.5, 65504.0, 2.0**-24]], np.float32)
    stored, kept = narrow(small, "float16")
    assert kept == "float16" and stored.tolist() == [[1.0, -2.5, 65504.0, 2.0**-24]]
    assert narrow(np.array([[0.1]], np.float32), "float16")[1] == FLOAT32
    assert narrow(np.array([[1.0 + 2.0**-10]], np.float32), "bfloat16")[1] == FLOAT32
    assert narrow(values, None)[1] == FLOAT32 and narrow(values, None)[0] is values


def test_a_float32_shard_is_written_as_before(tmp_path) -> None:
    keys, arrays = [text_key("a"), text_key("b")], [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 3))]
    info = write_shard(tmp_path / "tokens-x.npz", keys, arrays, None)
    with np.load(tmp_path / "tokens-x.npz") as z:
        data, digest = z["data"], z["digest"]
        assert sorted(z.files) == ["data", "digest", "keys", "ndim", "offsets"]
    h = hashlib.sha256(b"".join(keys) + np.array([0, 2, 3], np.int64).tobytes()
                       + np.concatenate([arrays[0], np.ones((1, 3), np.float32)]).tobytes())
    assert data.dtype == np.float32 and bytes(digest) == h.digest() and info.storage == FLOAT32
    assert locate(tmp_path / "tokens-x.npz")[1:] == ((3, 3), FLOAT32)


@pytest.mark.parametrize("storage", [None, "bfloat16", "float16"])
def test_a_shard_streamed_entry_by_entry_holds_what_np_save_writes_for_its_rows_stacked(tmp_path, storage) -> None:
    """The rows are written entry by entry, never stacked: the data member is byte for byte np.save's file of the
    stacked rows as stored (header included), and each entry's CRC is that of its slice of them; entries that are
    views (a column slice, a reversed block) or empty included."""
    import io
    import zlib

    block = np.random.default_rng(3).normal(size=(9, 8)).astype(np.float32)
    if storage:  # values that keep their float32 bits in 16 bits
        block = widen(narrow(block.astype(np.float16).astype(np.float32) if storage == "float16"
                             else (block.view(np.uint32) & 0xFFFF0000).view(np.float32), storage)[0])
    arrays = [block[:3], block[3:3], block[::-1][:4], np.asfortranarray(block[4:9])]
    info = write_shard(tmp_path / "pool-x.npz", [bytes([i]) * 32 for i in range(4)], arrays, storage)
    stacked = narrow(np.concatenate([np.ascontiguousarray(a) for a in arrays]), storage)[0]
    expected = io.BytesIO()
    np.lib.format.write_array(expected, stacked, allow_pickle=False)
    with zipfile.ZipFile(tmp_path / "pool-x.npz") as z:
        assert z.read("data.npy") == expected.getvalue()
    assert info.storage == (storage or FLOAT32) and info.offsets.tolist() == [0, 3, 3, 7, 12]
    assert info.crcs == [zlib.crc32(stacked[a:b].tobytes()) for a, b in ((0, 3), (3, 3), (3, 7), (7, 12))]


def test_a_16_bit_shard_is_checked_indexed_from_disk_and_set_aside_when_damaged(tmp_path, caplog) -> None:
    store = EmbeddingStore(HalfBackbone("bfloat16"), tmp_path, kinds=("sentence", "tokens"), progress=False)
    X = store.sentences(TEXTS[:8])
    (shard,) = list(store.folder.glob("sentence-*.npz"))
    offset, shape, storage = locate(shard)
    assert storage == "bfloat16" and shape == (8, DIM)
    assert set(read_shard(shard)) == {text_key(t) for t in TEXTS[:8]}
    np.testing.assert_array_equal(read_shard(shard)[text_key(TEXTS[3])], X[3])
    # an index lost: the shard is verified whole and indexed again with its storage, and read right
    (store.folder / "index.sqlite").unlink()
    again = EmbeddingStore(HalfBackbone("bfloat16"), tmp_path, progress=False)
    np.testing.assert_array_equal(again.sentences(TEXTS[:8]), X)
    assert again.backbone.encoded == [] and again.index.shard(shard.name)[4] == "bfloat16"
    raw = bytearray(shard.read_bytes())
    raw[offset + 2 * DIM * 5 + 1] ^= 0xFF  # a bit of the sixth vector's first 16-bit value
    shard.write_bytes(bytes(raw))
    with pytest.raises(CacheCorruptError):
        read_shard(shard)
    third = EmbeddingStore(HalfBackbone("bfloat16"), tmp_path, progress=False)
    np.testing.assert_array_equal(third.sentences(TEXTS[:8]), X)  # set aside and encoded again
    assert third.backbone.encoded == TEXTS[:8] and "damaged cache shard" in caplog.text


def test_an_index_written_before_16_bit_shards_is_read(tmp_path) -> None:
    store = EmbeddingStore(HalfBackbone(None), tmp_path, progress=False)
    X = store.sentences(TEXTS[:3])
    store.index.close()
    db = sqlite3.connect(store.folder / "index.sqlite")
    db.execute("ALTER TABLE shards DROP COLUMN storage")  # as an older iso-bench wrote it
    db.commit()
    db.close()
    again = EmbeddingStore(HalfBackbone(None), tmp_path, progress=False)
    np.testing.assert_array_equal(again.sentences(TEXTS[:3]), X)
    assert again.backbone.encoded == []
    with zipfile.ZipFile(next(store.folder.glob("sentence-*.npz"))) as archive:
        assert archive.getinfo("data.npy").compress_type == zipfile.ZIP_STORED


def test_a_pipeline_run_in_bfloat16_gives_vectors_the_store_keeps_in_16_bits(tiny_bert_dir, tmp_path) -> None:
    """A real sentence-transformers pipeline saved in bfloat16 (loaded and run in it, as transformers loads a
    checkpoint in its own dtype): its sentence and token vectors are bfloat16 numbers, so a bfloat16 extraction's
    shards hold every one of them in 16 bits."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertModel

    from iso_bench.backbones.loader import load_backbone

    BertModel.from_pretrained(tiny_bert_dir).to(torch.bfloat16).save_pretrained(tmp_path / "hf")
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(tmp_path / "hf")
    st = SentenceTransformer(modules=[Transformer(str(tmp_path / "hf")), Pooling(16, "mean"), Normalize()],
                             device="cpu")
    st.save(str(tmp_path / "st"))
    backbone = load_backbone(str(tmp_path / "st"), device="cpu")
    assert next(backbone.model.model.parameters()).dtype == torch.bfloat16
    out = backbone.encode(["the cat sat", "a dog ran on the mat"], kinds=("sentence", "tokens"), progress=False)
    for kind in ("sentence", "tokens"):
        for vectors in out[kind]:
            block = np.asarray(vectors, np.float32).reshape(-1, 16)
            stored, kept = narrow(np.ascontiguousarray(block), "bfloat16")
            assert kept == "bfloat16" and np.array_equal(widen(stored), block), kind
