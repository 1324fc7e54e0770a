"""The newer methods against values derived by hand: zscore (Timkey & van Schijndel 2021), zca (Kessy et al.
2018), zipfian-whiten (Yokoi et al. 2024) and softdecay (Yan et al. 2022)."""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.methods import MethodError, make_method
from iso_bench.methods.softdecay import soft_decay


def cone(n: int = 800, d: int = 10, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d, d)) + np.diag(np.linspace(0.5, 4.0, d))
    return rng.normal(size=(n, d)) @ mix + 7.0


def cosines(Z: np.ndarray) -> np.ndarray:
    U = Z / np.linalg.norm(Z, axis=1, keepdims=True)
    return U @ U.T


# ---- zscore ---------------------------------------------------------------------------------------


def test_zscored_fit_columns_have_mean_0_and_standard_deviation_1_and_a_constant_column_becomes_0() -> None:
    X = cone()
    X[:, 4] = 3.25  # a dead coordinate
    m = make_method("zscore")[0].fit(X)
    Z = m.transform(X)
    live = [j for j in range(X.shape[1]) if j != 4]
    np.testing.assert_allclose(Z[:, live].mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Z[:, live].std(axis=0), 1.0, rtol=1e-12)  # ddof=0, as the authors' numpy std
    assert not Z[:, 4].any() and m.dropped_ == 1
    probe = cone(5, seed=3)
    np.testing.assert_allclose(m.transform(probe)[:, 0], (probe[:, 0] - X[:, 0].mean()) / X[:, 0].std(), rtol=1e-12)


# ---- zca ------------------------------------------------------------------------------------------


def test_zca_whitened_vectors_have_identity_covariance_in_the_input_coordinates() -> None:
    X = cone()
    m = make_method("zca")[0].fit(X)
    Z = m.transform(X)
    np.testing.assert_allclose(np.cov(Z, rowvar=False), np.eye(10), atol=1e-10)
    np.testing.assert_allclose(m.W_, m.W_.T, atol=1e-12)  # Sigma^-1/2 is symmetric
    cov = np.cov(X, rowvar=False)
    np.testing.assert_allclose(m.W_ @ cov @ m.W_, np.eye(10), atol=1e-10)


def test_zca_is_the_whitening_closest_to_its_input() -> None:
    """Every whitening of X is W R with R orthogonal (W any one whitening); ZCA minimises the mean squared
    distance between x - mu and its whitened vector (Kessy et al. 2018, section 3.3)."""
    X = cone()
    Xc = X - X.mean(axis=0)
    zca = make_method("zca")[0].fit(X)
    pca = make_method("whiten")[0].fit(X)

    def distance(Z: np.ndarray) -> float:
        return float(((Xc - Z) ** 2).sum(axis=1).mean())

    best = distance(zca.transform(X))
    assert best < distance(pca.transform(X)) - 1e-6
    rng = np.random.default_rng(1)
    for _ in range(20):
        q, _ = np.linalg.qr(rng.normal(size=(10, 10)))
        assert best < distance(zca.transform(X) @ q)


def test_full_zca_and_full_pca_whitening_give_the_same_cosines_but_zca_k_does_not_drop_dimensions() -> None:
    X, probe = cone(), cone(40, seed=2)
    np.testing.assert_allclose(cosines(make_method("zca")[0].fit(X).transform(probe)),
                               cosines(make_method("whiten")[0].fit(X).transform(probe)), atol=1e-10)
    m = make_method("zca-4")[0].fit(X)
    Z = m.transform(X)
    assert Z.shape == (800, 10) and m.output_dim(10) == 10
    eig = np.sort(np.linalg.eigvalsh(np.cov(Z, rowvar=False)))[::-1]
    np.testing.assert_allclose(eig[:4], 1.0, atol=1e-10)  # four whitened directions, the rest removed
    np.testing.assert_allclose(eig[4:], 0.0, atol=1e-10)


# ---- zipfian-whiten -------------------------------------------------------------------------------


def typed_tokens(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token vectors of a Zipfian vocabulary: type t occurs about 400 / (t + 1) times, each occurrence its
    type's vector plus context noise."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(30, 8)) * 3 + 5
    types = np.concatenate([np.full(max(2, 400 // (t + 1)), t) for t in range(30)])
    return centres[types] + rng.normal(size=(len(types), 8)), types


def test_zipfian_weights_are_token_level_whiten_and_uniform_weights_are_not() -> None:
    """Occurrences weigh 1/N under Zipfian weights: each type weighs its frequency, which is what a plain
    average over token vectors already does. So weights=zipf is whiten on the same vectors, up to the
    covariance's normaliser (1/N against whiten's 1/(N - 1)); weights=uniform is not."""
    X, types = typed_tokens()
    n = len(X)
    plain = make_method("whiten")[0].fit(X).transform(X)
    zipf = make_method("zipfian-whiten")[0].fit(X, token_types=types).transform(X)
    uniform = make_method("zipfian-whiten-weights=uniform")[0].fit(X, token_types=types).transform(X)
    np.testing.assert_allclose(zipf, plain * np.sqrt(n / (n - 1)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(cosines(zipf[:50]), cosines(plain[:50]), atol=1e-10)
    assert np.abs(cosines(uniform[:50]) - cosines(plain[:50])).max() > 0.05


def test_uniform_weights_give_every_type_the_same_weight() -> None:
    X, types = typed_tokens()
    m = make_method("zipfian-whiten-weights=uniform")[0].fit(X, token_types=types)
    type_means = np.stack([X[types == t].mean(axis=0) for t in range(30)])
    np.testing.assert_allclose(m.mean_, type_means.mean(axis=0), rtol=1e-12)  # mean over types, not tokens
    # the transformed vectors, each type weighing 1/30: weighted mean 0, weighted covariance I
    Z = m.transform(X)
    w = 1.0 / (30 * np.bincount(types)[types])
    np.testing.assert_allclose(w @ Z, 0.0, atol=1e-10)
    np.testing.assert_allclose((Z * w[:, None]).T @ Z, np.eye(8), atol=1e-10)
    assert (m.n_types_, m.n_occurrences_) == (30, n := len(X)) and n > 30


def test_uniform_weights_without_token_types_or_with_too_few_are_refused() -> None:
    X, types = typed_tokens()
    with pytest.raises(MethodError, match="weights=uniform needs the token type of every fit vector"):
        make_method("zipfian-whiten-weights=uniform")[0].fit(X)
    with pytest.raises(MethodError, match=f"{len(X) - 1} token types for {len(X)} fit vectors"):
        make_method("zipfian-whiten")[0].fit(X, token_types=types[1:])
    with pytest.raises(MethodError, match="weights must be one of zipf, uniform"):
        make_method("zipfian-whiten-weights=tf")


def test_a_token_level_fit_counts_the_tokenizer_types_of_the_fit_corpus(tiny_backbone, tmp_path) -> None:
    """Through the encoder: the types are the tokenizer's ids of the fit corpus's tokens, counted there."""
    from iso_bench.data.provider import CorpusProvider
    from iso_bench.encoder import VariantEncoder
    from iso_bench.vectors.store import EmbeddingStore

    texts = ["the cat sat on the mat", "the dog sat", "a cat and a dog", "the the the", "mat"] * 3
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(dict.fromkeys(texts)) + "\n")
    store = EmbeddingStore(tiny_backbone, None, kinds=("sentence", "tokens"), progress=False)
    variant = VariantEncoder(store, "zipfian-whiten-weights=uniform-eps=0.1", corpus=CorpusProvider(str(corpus)))
    method = variant.fitted_method("STS12")
    distinct = list(dict.fromkeys(texts))
    tok = tiny_backbone.tokenizer
    ids = np.concatenate([np.array(tok(t, add_special_tokens=False)["input_ids"]) for t in distinct])
    X = np.concatenate(store.tokens(distinct))
    assert method.n_types_ == len(np.unique(ids)) and method.n_occurrences_ == len(X) == len(ids)
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    w = 1.0 / (len(counts) * counts[inverse])
    np.testing.assert_allclose(method.mean_, w @ X.astype(np.float64), rtol=1e-6)


# ---- softdecay ------------------------------------------------------------------------------------


def test_softdecay_does_to_the_fit_matrix_what_the_authors_do_to_it() -> None:
    """The authors' transform of a matrix X = U S V^T is U f(S) V^T, f rescaled to keep the largest singular
    value (hanqi-qi/tokenUni); the fitted map gives exactly that on its fit matrix, uncentred."""
    X = cone(300, 6) / 4
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    f = -np.log(1 - (-0.6) * (S + (-0.6)) + 1e-7) / (-0.6)  # written out again, not through soft_decay
    expected = U @ np.diag(f * S.max() / f.max()) @ Vt
    m = make_method("softdecay")[0].fit(X)
    np.testing.assert_allclose(m.transform(X), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.linalg.svd(m.transform(X), compute_uv=False), soft_decay(S, -0.6), rtol=1e-9)
    assert m.singular_values_.max() == pytest.approx(S.max(), rel=1e-12)


def test_softdecay_lifts_the_small_singular_values_of_a_large_corpus_and_maps_empty_directions_to_0() -> None:
    X = cone(2000, 6)
    X[:, 5] = 0.0  # the fit vectors have no component there
    m = make_method("softdecay-alpha=-0.2")[0].fit(X)
    s = m.singular_values_
    assert len(s) == 5 and m.decayed_[0] == pytest.approx(s[0], rel=1e-12)  # the largest is kept
    assert (m.decayed_[1:] / m.decayed_[0] > s[1:] / s[0] + 0.1).all()  # every other lifted against it
    probe = np.eye(6)
    assert not m.transform(probe)[5].any()
    with pytest.raises(MethodError, match="alpha must be below 0"):
        make_method("softdecay-alpha=0.5")


# ---- mean-proj (Ren, Sun & Liang: R2) ---------------------------------------------------------------------
def test_mean_proj_equals_r2_of_the_paper() -> None:
    """x - (x . mu_hat) mu_hat, with mu_hat the unit mean of the fit vectors, computed here the paper's way."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 6)) + np.array([3.0, -1.0, 0.5, 2.0, 0.0, 1.0])
    mu = X.mean(axis=0)
    mu_hat = mu / np.sqrt((mu**2).sum())
    expected = np.array([x - np.dot(x, mu_hat) * mu_hat for x in X])
    method, level = make_method("mean-proj")
    assert level == "sentence"
    np.testing.assert_allclose(method.fit(X).transform(X), expected, atol=1e-6)
    assert np.abs(method.transform(X) @ mu_hat).max() < 1e-9  # nothing left along the mean direction
    # by hand: mu = (1, 1); (2, 0) -> (1, -1), (0, 2) -> (-1, 1)
    square = np.array([[2.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(make_method("mean-proj")[0].fit(square).transform(square), [[1, -1], [-1, 1]],
                               atol=1e-12)


def test_mean_proj_renormalises_where_the_models_outputs_are_unit() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 5)) + 2.0
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    Z = make_method("mean-proj")[0].fit(U).transform(U)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, atol=1e-12)
    mu_hat = U.mean(axis=0) / np.linalg.norm(U.mean(axis=0))
    raw = U - np.outer(U @ mu_hat, mu_hat)
    np.testing.assert_allclose(Z, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-12)
    assert not np.allclose(np.linalg.norm(make_method("mean-proj")[0].fit(X).transform(X), axis=1), 1.0)


def test_mean_proj_refuses_vectors_without_a_mean_direction() -> None:
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    with pytest.raises(MethodError, match="mean is zero"):
        make_method("mean-proj")[0].fit(X)
