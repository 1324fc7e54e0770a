"""Fits that stream: center, abtt, whiten, clip, zscore, zca, softdecay and zipfian-whiten (Zipfian weights)
accumulate float64 moments batch by
batch (``partial_fit``) and
learn what ``fit`` on all the vectors at once learns, within 1e-10 relative; a fit corpus above the fit
budget is read batch by batch by those, and sampled (seeded, recorded) for the others."""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.methods import MethodError, make_method

STREAMING = ["center", "abtt", "abtt-3", "whiten", "whiten-5", "clip", "zscore", "zca", "zca-5", "softdecay",
             "zipfian-whiten", "pca-5"]


def test_every_method_that_streams_is_checked_here() -> None:
    from iso_bench.methods import METHODS

    assert {name for name in METHODS if METHODS.get(name).streams} == {make_method(s)[0].name for s in STREAMING}


def anisotropic(n: int, d: int = 12, seed: int = 0) -> np.ndarray:
    """Vectors in a narrow cone far from the origin, with two outlier dimensions (what encoders give)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ np.diag(np.linspace(0.2, 3.0, d)) + 40.0
    X[:, 2] += 300.0
    X[:, 7] -= 120.0
    return X


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("spec", STREAMING)
def test_partial_fit_learns_what_fit_learns(spec: str) -> None:
    X, probe = anisotropic(5000), anisotropic(50, seed=1)
    whole = make_method(spec)[0].fit(X)
    streamed = make_method(spec)[0]
    for a, b in [(0, 1), (1, 700), (700, 701), (701, 3333), (3333, 5000)]:  # uneven batches, one of one vector
        streamed.partial_fit(X[a:b])
    assert _relative(streamed.transform(probe), whole.transform(probe)) < 1e-10
    if spec == "clip":  # the outlier statistics it detects from (counts, means, deviations)
        assert streamed.dims_ == whole.dims_ and 2 in whole.dims_
        for name in ("argmin_fraction", "argmax_fraction", "mean", "std", "mean_z"):
            assert _relative(getattr(streamed.stats_, name), getattr(whole.stats_, name)) < 1e-10, name
        return
    if hasattr(whole, "mean_"):
        assert _relative(streamed.mean_, whole.mean_) < 1e-10
    if hasattr(whole, "std_"):
        assert _relative(streamed.std_, whole.std_) < 1e-10
    if hasattr(whole, "singular_values_"):
        assert _relative(streamed.singular_values_, whole.singular_values_) < 1e-10
    if hasattr(whole, "eigenvalues_"):
        assert _relative(streamed.eigenvalues_, whole.eigenvalues_) < 1e-10


def test_fit_starts_over_and_partial_fit_goes_on() -> None:
    X, Y = anisotropic(300), anisotropic(300, seed=5)
    method = make_method("whiten")[0].partial_fit(Y)
    method.fit(X)
    fresh = make_method("whiten")[0].fit(X)
    np.testing.assert_array_equal(method.W_, fresh.W_)  # fit dropped what partial_fit had seen
    both = make_method("whiten")[0].partial_fit(X).partial_fit(Y)
    assert _relative(both.transform(X), make_method("whiten")[0].fit(np.vstack([X, Y])).transform(X)) < 1e-10


def test_too_few_streamed_vectors_are_refused_as_fit_refuses_them() -> None:
    method = make_method("whiten")[0].partial_fit(anisotropic(5))
    with pytest.raises(MethodError, match="5 fit vectors are too few: it needs at least 13"):
        method.transform(anisotropic(2))


@pytest.mark.parametrize("spec", ["cluster-pca", "flow", "zipfian-whiten-weights=uniform"])
def test_a_method_that_needs_all_its_vectors_refuses_to_stream(spec: str) -> None:
    assert not make_method(spec)[0].streaming()
    with pytest.raises(MethodError, match="not batch by batch"):
        make_method(spec)[0].partial_fit(anisotropic(100))


def _variant(spec: str, texts: list[str], budget: int, tmp_path, monkeypatch):
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore
    from tests.conftest import KeywordBackbone

    monkeypatch.setenv("ISO_BENCH_FIT_BUDGET", str(budget))
    monkeypatch.setattr("iso_bench.fitting.FIT_BATCH", 7)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    vocab = sorted({w for t in texts for w in t.split()})
    store = EmbeddingStore(KeywordBackbone(vocab), None, progress=False)
    return VariantEncoder(store, spec, corpus=str(corpus), seed=3), store


def _texts(n: int) -> list[str]:
    words = "cat dog sat mat bank river money guitar piano".split()
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(words, size=4)) + f" t{i % 50}" for i in range(n)]


def test_a_corpus_over_the_budget_streams_into_the_same_fit(tmp_path, monkeypatch) -> None:
    texts = _texts(60)
    streamed, store = _variant("whiten-eps=0.1", texts, 20, tmp_path, monkeypatch)
    method = streamed.fitted_method(None)
    record = streamed.fit_records[streamed.corpus(None).key]
    assert record["fits"][0]["n_vectors"] == 60 and "sample" not in record  # every text, batch by batch
    whole = make_method("whiten-eps=0.1")[0].fit(store.sentences(texts))
    probe = store.sentences(texts[:5])
    assert _relative(method.transform(probe), whole.transform(probe)) < 1e-10


def test_a_corpus_over_the_budget_is_sampled_for_a_method_that_does_not_stream(tmp_path, monkeypatch) -> None:
    texts = _texts(60)
    variant, _ = _variant("cluster-pca-2-0", texts, 40, tmp_path, monkeypatch)
    variant.fitted_method(None)
    # a token-level fit reads a quarter of the budget's texts: 10 of 40, each of 5 words, so 50 token vectors
    (record,) = [r for k, r in variant.fit_records.items() if k.endswith("@10")]
    assert record["sample"] == 10 and record["sample_seed"] == 3 and record["n_texts_total"] == 60
    assert record["sample_reason"] == "fit budget" and record["n_texts"] == 10
    assert record["fits"][0]["level"] == "token" and record["fits"][0]["n_vectors"] == 50
    sentence, _ = _variant("cluster-pca-2-0-level=sentence", texts, 40, tmp_path, monkeypatch)  # 40 texts
    sentence.fitted_method(None)
    (record,) = [r for k, r in sentence.fit_records.items() if k.endswith("@40")]
    assert record["sample"] == 40 and record["fits"][0]["n_vectors"] == 40


def test_a_token_level_fit_over_its_budget_streams_every_text_or_samples(tmp_path, monkeypatch) -> None:
    """A token-level fit reads a quarter of the budget's texts at once: over that, a method that streams reads
    every text batch by batch (the same fit as all token vectors at once), one that does not is sampled."""
    from iso_bench.encoder import VariantEncoder

    texts = _texts(30)  # 5 token vectors each; budget 40 texts, so 10 at token level
    for spec in ("zipfian-whiten", "whiten-eps=0.1-level=token"):
        variant, store = _variant(spec, texts, 40, tmp_path, monkeypatch)
        with monkeypatch.context() as m:  # never every token vector of the corpus at once
            m.setattr(VariantEncoder, "_fit_matrix", lambda *a: pytest.fail("a fit over its budget stacked it"))
            method = variant.fitted_method(None)
        record = variant.fit_records[variant.corpus(None).key]
        assert "sample" not in record and record["fits"][0]["n_vectors"] == 150, spec
        whole = make_method(spec)[0].fit(np.concatenate(store.tokens(texts)))
        probe = np.concatenate(store.tokens(texts[:5]))
        a, b = method.transform(probe), whole.transform(probe)  # keyword vectors: equal eigenvalues, so the
        assert _relative(a @ a.T, b @ b.T) < 1e-10, spec        # whitening is unique up to a rotation
    uniform, store = _variant("zipfian-whiten-weights=uniform-eps=0.1", texts, 40, tmp_path, monkeypatch)
    vocab = sorted({w for t in texts for w in t.split()})  # a token's type: its word
    store.backbone.token_ids = lambda batch, **_: [np.array([vocab.index(w) for w in t.split()]) for t in batch]
    uniform.fitted_method(None)
    (record,) = [r for k, r in uniform.fit_records.items() if k.endswith("@10")]
    assert record["sample"] == 10 and record["fits"][0]["n_vectors"] == 50


def _recording(function, seen: list, what, many: bool = False):
    """``function``, noting ``what(args)`` of each call in ``seen`` (each item of it with ``many``)."""
    def recorded(*args, **kwargs):
        (seen.extend if many else seen.append)(what(args))
        return function(*args, **kwargs)
    return recorded


def test_a_corpus_within_its_text_budget_but_over_the_value_bound_streams(tmp_path, monkeypatch) -> None:
    """Texts are a proxy for vectors: SciFact's 5,483 texts are within the token budget, but give 1.6 million
    768-d token vectors, whose float64 copies in one fit outgrew 23 GB. A streaming method whose fit corpus has
    more than FIT_VALUES raw values streams, fitting the same; under the bound it fits the whole matrix at once.
    Either way each text's token vectors are read once: the ones read to count them are the ones fitted."""
    texts = _texts(30)  # 150 token vectors; the budget of 400 texts (100 at token level) holds every text
    for bound, streams in ((10 ** 9, False), (40, True)):
        variant, store = _variant("zipfian-whiten", texts, 400, tmp_path, monkeypatch)
        monkeypatch.setattr("iso_bench.fitting.FIT_VALUES", bound)
        prototype = type(make_method("zipfian-whiten")[0])
        calls, read = {"fit": [], "partial_fit": []}, []
        with monkeypatch.context() as m:
            for name, seen in calls.items():
                m.setattr(prototype, name, _recording(getattr(prototype, name), seen, lambda args: len(args[1])))
            m.setattr(store, "tokens", _recording(store.tokens, read, lambda args: args[0], many=True))
            method = variant.fitted_method(None)
        assert sorted(read) == sorted(texts), bound  # every text once
        if streams:
            assert calls["fit"] == [] and sum(calls["partial_fit"]) == 150
        else:
            assert calls == {"fit": [150], "partial_fit": []}
        record = variant.fit_records[variant.corpus(None).key]
        assert "sample" not in record and record["fits"][0]["n_vectors"] == 150
        whole = make_method("zipfian-whiten")[0].fit(np.concatenate(store.tokens(texts)))
        probe = np.concatenate(store.tokens(texts[:5]))
        a, b = method.transform(probe), whole.transform(probe)
        if streams:
            assert _relative(a @ a.T, b @ b.T) < 1e-10
        else:
            assert a.tobytes() == b.tobytes()  # the one fit of the whole matrix, as before


def test_a_fit_corpus_over_the_budget_is_not_kept_between_fits(tmp_path, monkeypatch) -> None:
    from iso_bench.data.provider import CorpusProvider

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_texts(60)) + "\n", encoding="utf-8")
    monkeypatch.setenv("ISO_BENCH_FIT_BUDGET", "40")
    provider = CorpusProvider(str(corpus))
    first, second = provider(None), provider(None)
    assert first is not second and first == second  # built again: the same texts, not held in between
    monkeypatch.setenv("ISO_BENCH_FIT_BUDGET", "60")
    assert provider(None) is provider(None)  # within the budget: built once, kept


@pytest.mark.parametrize("first", ["sentence", "token"])
def test_a_variant_fitting_at_both_levels_samples_each_level_to_its_own_budget(first, tmp_path, monkeypatch) -> None:
    """Sentence vectors: a sample of the budget (40 texts); token vectors: of a quarter of it (10), whichever
    level fits first."""
    texts = _texts(60)
    variant, _ = _variant("cluster-pca-2-0-level=sentence", texts, 40, tmp_path, monkeypatch)
    levels = ["sentence", "token"] if first == "sentence" else ["token", "sentence"]
    for level in levels:
        variant.fitted_method(None, level)
    records = {r["fits"][0]["level"]: r for k, r in variant.fit_records.items() if "@" in k}
    assert records["sentence"]["sample"] == 40 and records["sentence"]["fits"][0]["n_vectors"] == 40
    assert records["token"]["sample"] == 10 and records["token"]["fits"][0]["n_vectors"] == 50
