"""A token-level fit that does not stream holds at most TOKEN_FIT_VALUES values: a seeded sample, recorded, where its
token vectors would hold more (an LLM embedder's width), never at the published boards' widths."""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.fitting import TOKEN_FIT_VALUES


def _variant(spec: str, texts: list[str], budget: int, tmp_path, monkeypatch, token_types: bool = True):
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore
    from tests.conftest import KeywordBackbone

    monkeypatch.setenv("ISO_BENCH_FIT_BUDGET", str(budget))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    vocab = sorted({w for t in texts for w in t.split()})
    backbone = KeywordBackbone(vocab)
    if token_types:  # a token's type: its word (one token vector per word)
        backbone.token_ids = lambda batch, **_: [np.array([vocab.index(w) for w in t.split()]) for t in batch]
    store = EmbeddingStore(backbone, None, progress=False)
    return VariantEncoder(store, spec, corpus=str(corpus), seed=3), store


def _texts(n: int, lengths=(5,)) -> list[str]:
    words = "cat dog sat mat bank river money guitar piano".split()
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(words, size=lengths[i % len(lengths)] - 1)) + f" t{i}" for i in range(n)]


def _sampled(variant) -> dict:
    (record,) = [r for k, r in variant.fit_records.items() if "@" in k]
    return record


def test_a_token_fit_over_the_value_bound_fits_a_recorded_sample(tmp_path, monkeypatch) -> None:
    texts = _texts(60)  # 5 token vectors each: 300 in all, within the token budget (100 texts)
    variant, store = _variant("cluster-pca-2-0", texts, 400, tmp_path, monkeypatch)
    dim = store.backbone.dim
    monkeypatch.setattr("iso_bench.fitting.TOKEN_FIT_VALUES", 100 * dim)  # room for 100 token vectors
    variant.fitted_method(None)
    record = _sampled(variant)  # 60 texts x 100 / 300 = 20 texts, 100 vectors
    assert record["sample"] == 20 and record["n_texts"] == 20 and record["n_texts_total"] == 60
    assert record["sample_reason"] == "fit values" and record["sample_seed"] == 3
    assert record["fits"][0] == {**record["fits"][0], "level": "token", "n_vectors": 100}


def test_the_value_bound_samples_the_whole_corpus_below_the_budget_sample(tmp_path, monkeypatch) -> None:
    texts = _texts(60)
    variant, store = _variant("cluster-pca-2-0", texts, 40, tmp_path, monkeypatch)  # 10 texts at token level
    monkeypatch.setattr("iso_bench.fitting.TOKEN_FIT_VALUES", 30 * store.backbone.dim)
    variant.fitted_method(None)
    record = _sampled(variant)  # the budget's 10 texts hold 50 vectors: 6 texts of the corpus hold 30
    assert record["sample"] == 6 and record["n_texts_total"] == 60 and record["sample_reason"] == "fit values"
    assert record["fits"][0]["n_vectors"] == 30


def test_a_streaming_fit_and_a_sentence_fit_are_never_sampled_for_values(tmp_path, monkeypatch) -> None:
    texts = _texts(30)
    for spec in ("zipfian-whiten", "cluster-pca-2-0-level=sentence"):
        variant, store = _variant(spec, texts, 400, tmp_path, monkeypatch)
        monkeypatch.setattr("iso_bench.fitting.TOKEN_FIT_VALUES", store.backbone.dim)
        variant.fitted_method(None)
        record = variant.fit_records[variant.corpus(None).key]
        assert "sample" not in record and record["fits"][0]["n_vectors"] == (150 if "zipf" in spec else 30), spec


def test_texts_of_unequal_length_are_sampled_under_the_bound(tmp_path, monkeypatch) -> None:
    from iso_bench.vectors.fit_rows import within_values

    texts = _texts(90, lengths=(2, 5, 20))  # 900 token vectors
    variant, store = _variant("cluster-pca-2-0", texts, 400, tmp_path, monkeypatch)
    corpus = variant.corpus(None)
    limit = 200 * store.backbone.dim
    sample = within_values(store, corpus, limit, seed=0)
    held = sum(len(t.split()) for t in sample.texts)
    assert 150 <= held <= 200 and sample.record["sample"] == len(sample.texts) < 90
    assert within_values(store, corpus, 900 * store.backbone.dim, seed=0) is corpus  # all of it fits: no sample
    without, store = _variant("cluster-pca-2-0", texts, 400, tmp_path, monkeypatch, token_types=False)
    assert within_values(store, corpus, limit, seed=0) is corpus  # rows cannot be counted: left to the fit


@pytest.mark.parametrize(("n_vectors", "dim"), [(1_568_135, 768), (1_690_029, 384)])
def test_the_published_boards_largest_token_fits_are_under_the_bound(n_vectors, dim) -> None:
    """The v2 board's largest token-level fits that do not stream (cluster-pca on SciFact; all-mpnet-base-v2 at
    768-d, the static model at 384-d, as their result files record them) are whole: their bits do not move."""
    assert n_vectors * dim < TOKEN_FIT_VALUES
    assert TOKEN_FIT_VALUES // 4096 == 327_680  # an LLM embedder's token fit: at most 5 GiB of float32


def test_an_int8_variant_of_a_streaming_method_streams_its_corpus_as_the_method_does(tmp_path, monkeypatch) -> None:
    """Beyond the token budget, whiten's token-level fit (a word task's) streams its corpus whole; so does its int8
    variant's (never a sample): the same fitted state, and ranges from a second pass over the same token batches."""
    texts = _texts(60)  # 300 token vectors; a budget of 40 texts is 10 at token level
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain, _ = _variant("whiten", texts, 40, tmp_path / "a", monkeypatch)
    staged, _ = _variant("whiten-precision=int8", texts, 40, tmp_path / "b", monkeypatch)
    a, b = plain.fitted_method(None, "token"), staged.fitted_method(None, "token")
    for variant in (plain, staged):
        record = variant.fit_records[variant.corpus(None).key]
        assert "sample" not in record and record["fits"][0]["n_vectors"] == 300
    np.testing.assert_array_equal(a.W_, b.W_)
    Z = np.vstack([a.transform(X) for X in plain._fit_batches(plain.corpus(None), "token")])
    assert len(Z) == 300
    np.testing.assert_array_equal(b.ranges_, np.vstack((Z.min(axis=0), Z.max(axis=0))).astype(np.float32))
