"""Each text is tokenized once per encode, and the vectors of a batch run by iso-bench are the bits the pipeline's
own ``encode`` gives the same batch: a mean-pooled model, a max-pooled model with a Dense layer, a static model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iso_bench.backbones.base import MIN_ROWS, filled, plan_batches
from tests.conftest import MINILM, _missing

TEXTS = ["A man is playing a guitar.", "hello world", "money", "A woman slices a cucumber on a board.",
         "a dog runs", "The cat sat on the mat and looked at the dog for a long time.", "hello there",
         "A man is playing a flute.", "money", "two dogs play in the snow"]


class Counting:
    """A tokenizer backend (``tokenizers.Tokenizer``) that counts the texts it encodes."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def encode_batch(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        self.texts += len(inputs)
        return self.inner.encode_batch(inputs, *args, **kwargs)

    def encode_batch_fast(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        self.texts += len(inputs)
        return self.inner.encode_batch_fast(inputs, *args, **kwargs)

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        self.texts += 1
        return self.inner.encode(*args, **kwargs)


def _backbone(model: str) -> Any:
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.registry import IsoBenchError

    try:
        return load_backbone(model, device="cpu")
    except IsoBenchError as exc:
        _missing(f"{model} ({exc})")


@pytest.fixture(scope="module")
def models(max_dense_dir, static_minilm_dir) -> dict[str, Any]:
    return {"mean": _backbone(MINILM), "max-dense": _backbone(str(max_dense_dir)),
            "static": _backbone(str(static_minilm_dir))}


def _count(backbone: Any, monkeypatch: pytest.MonkeyPatch) -> Counting:
    st = backbone.st
    if type(st[0]).__name__ == "StaticEmbedding":
        counting = Counting(st[0].tokenizer)
        monkeypatch.setattr(st[0], "tokenizer", counting)
    else:
        counting = Counting(st.tokenizer._tokenizer)
        monkeypatch.setattr(st.tokenizer, "_tokenizer", counting)
    return counting


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mean", "max-dense", "static"])
def test_each_text_is_tokenized_once_per_encode(models, name, monkeypatch) -> None:
    backbone = models[name]
    kinds = [("sentence",), ("sentence", "tokens")] if name != "max-dense" else [("sentence",)]
    for asked in kinds:
        counting = _count(backbone, monkeypatch)
        out = backbone.encode(TEXTS, kinds=asked, batch_size=2, progress=False)
        assert counting.texts == len(TEXTS), (asked, counting.texts)
        assert len(out["sentence"]) == len(TEXTS)
        monkeypatch.undo()


@pytest.mark.slow
def test_the_hf_backbone_tokenizes_each_text_once(tiny_backbone, monkeypatch) -> None:
    counting = Counting(tiny_backbone.tokenizer._tokenizer)
    monkeypatch.setattr(tiny_backbone.tokenizer, "_tokenizer", counting)
    out = tiny_backbone.encode(TEXTS, kinds=("sentence", "tokens", "span"), spans=[[(0, 1)]] * len(TEXTS),
                               batch_size=2, progress=False)
    assert counting.texts == len(TEXTS) and len(out["span"]) == len(TEXTS)


def _plan(backbone: Any, batch_size: int) -> list[list[int]]:
    """The forward passes the backbone runs: equal token lengths, a pass of few token rows filled with copies of
    its first text (a static model pads nothing: batches in input order)."""
    st = backbone.st
    if type(st[0]).__name__ == "StaticEmbedding":
        lengths = [MIN_ROWS] * len(TEXTS)
    else:
        lengths = [len(ids) for ids in st.tokenizer(TEXTS, truncation=True, max_length=st.max_seq_length)["input_ids"]]
    return [filled(batch, lengths[batch[0]]) for batch in plan_batches(lengths, batch_size)]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mean", "max-dense", "static"])
def test_raw_vectors_are_the_pipelines_own_encode_of_the_same_batches(models, name) -> None:
    backbone = models[name]
    ours = backbone.encode(TEXTS, kinds=("sentence",), batch_size=3, progress=False)["sentence"]
    passes = _plan(backbone, 3)
    assert any(len(run) > 1 for run in passes)
    for run in passes:
        theirs = backbone.st.encode([TEXTS[i] for i in run], batch_size=len(run), convert_to_numpy=True)
        for row, i in zip(theirs, run, strict=True):  # bit for bit on the CPU
            np.testing.assert_array_equal(ours[i], row)
    if name == "mean":  # token vectors too: the same forward pass's, special tokens dropped
        toks = backbone.encode(TEXTS, kinds=("tokens",), batch_size=3, progress=False)["tokens"]
        for run in passes:
            theirs = backbone.st.encode([TEXTS[i] for i in run], batch_size=len(run), output_value="token_embeddings")
            for rows, i in zip(theirs, run, strict=True):
                np.testing.assert_array_equal(toks[i], rows[1:-1].numpy())


def test_static_features_are_its_own_preprocessing(static_minilm_dir: Path) -> None:
    """A static batch collated from the one tokenization is what the static embedding's preprocess makes."""
    from sentence_transformers import SentenceTransformer

    from iso_bench.backbones.features import static_collate, static_tokens

    st = SentenceTransformer(str(static_minilm_dir), device="cpu")
    tokens = static_tokens(st[0], TEXTS, "query: ")
    ours = static_collate(tokens, [3, 1, 2])
    theirs = st.preprocess([TEXTS[3], TEXTS[1], TEXTS[2]], prompt="query: ")
    for key in ("input_ids", "offsets"):
        assert ours[key].dtype == theirs[key].dtype and ours[key].tolist() == theirs[key].tolist()


def test_what_a_model_is_is_resolved_once(tiny_bert_dir: Path, max_dense_dir: Path) -> None:
    """mteb's model, a sentence-transformers folder, a plain HF folder, and a pooling asked for: each resolved to
    how it is run, with the revision it loads at and the modules read once."""
    from iso_bench.backbones.loader import HF, MTEB, PIPELINE, resolve

    minilm = resolve(MINILM)
    assert (minilm.how, minilm.meta.revision, minilm.modules) == (MTEB, "8b3219a92973c328a8e22fadcfa821b5dc75636a",
                                                                   None)
    pooled = resolve(MINILM, pooling="cls")  # iso-bench's own extraction, at mteb's pinned revision
    if pooled.modules is None:
        _missing(f"{MINILM} in the Hugging Face cache")
    assert (pooled.how, pooled.revision) == (HF, minilm.meta.revision)
    assert [m["type"].rsplit(".", 1)[-1] for m in pooled.modules] == ["Transformer", "Pooling", "Normalize"]
    folder = resolve(str(max_dense_dir))
    assert (folder.how, folder.folder, len(folder.modules)) == (PIPELINE, True, 4)
    assert resolve(str(tiny_bert_dir)).how == HF and resolve(str(max_dense_dir), hidden_states=True).how == HF


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["", "query: "])
def test_the_one_tokenizer_call_is_the_pipelines_own_preprocessing(models, prompt) -> None:
    """Its tokenizer arguments are those sentence-transformers' preprocess passes (prompt, truncation at the max
    length, the prompt's length for pooling), unpadded: same ids, masks and offsets."""
    from iso_bench.backbones.features import pipeline_tokens

    st = models["mean"].st
    texts = [*TEXTS, "word " * 400]  # one text past the max length
    ours = pipeline_tokens(st, texts, prompt, None, True, offsets=True)
    theirs = st.preprocess(texts, prompt=prompt or None, processing_kwargs={
        "text": {"padding": False, "return_offsets_mapping": True, "return_special_tokens_mask": True},
        "common": {"return_tensors": None}})
    assert ours.lengths[-1] == st.max_seq_length == 256
    assert {k: ours.columns[k] for k in ours.columns} == {k: theirs[k] for k in ours.columns}
    assert ours.offsets == theirs["offset_mapping"] and ours.special == theirs["special_tokens_mask"]
    assert ours.shared == {k: v for k, v in theirs.items() if not isinstance(v, list)}
