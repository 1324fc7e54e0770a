"""Post-processing methods: one contract test over every registered method, then each method's maths."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from iso_bench.methods import METHODS, MethodError, make_method, parse_spec
from iso_bench.methods.abtt import Abtt
from iso_bench.methods.center import Center
from iso_bench.methods.clip import Clip
from iso_bench.methods.cluster_pca import ClusterPCA
from iso_bench.methods.contract import Check, D, N, anisotropic, check_method, method_checks
from iso_bench.methods.flow import Flow
from iso_bench.methods.whiten import Whiten

ALL = sorted(METHODS)


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    return anisotropic()


# ---- the contract (iso_bench.methods.contract), over every registered method ----------------------------
@pytest.mark.parametrize("check", [c for _, c in method_checks()], ids=[n for n, _ in method_checks()])
@pytest.mark.parametrize("name", ALL)
def test_contract(name: str, check: Check, X: np.ndarray) -> None:
    check(METHODS.get(name), X)


def test_check_method_fails_a_method_that_breaks_the_contract(X: np.ndarray) -> None:
    """The contract can fail: a method whose transform changes its input in place, or that is not
    deterministic, is caught, naming the method."""

    class Drifting(Center):
        name = "drifting"

        def transform(self, X: np.ndarray) -> np.ndarray:
            return super().transform(X) + np.random.default_rng().normal(size=X.shape)

    with pytest.raises(AssertionError):
        check_method(Drifting, X)

    class Unnamed(Center):
        def fit(self, X: np.ndarray) -> Unnamed:
            super().fit(X)
            return None  # type: ignore[return-value]

    with pytest.raises(AssertionError, match="center: fit does not return the method"):
        check_method(Unnamed, X)
    check_method(Center, X)  # and passes one that keeps it


def test_the_affine_check_fails_a_map_that_is_not_the_transform(X: np.ndarray) -> None:
    """``affine()`` must be the transform: a map whose offset is off by a little is caught by the contract."""
    from iso_bench.methods.contract import check_affine

    class Shifted(Center):
        name = "shifted"

        def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
            return super().affine()[0] + 1e-6, None

    with pytest.raises(AssertionError, match="shifted: transform is not"):
        check_affine(Shifted, X)
    check_affine(Center, X)


@pytest.mark.parametrize(
    "spec",
    [
        "whiten-4",
        "whiten-eps=0.00001",
        "abtt-3",
        "clip-3,5",
        "clip-7",
        "clip-min_fraction=0.2-min_z=4",
        "cluster-pca-5-2-algorithm=gmm",
        "cluster-pca-n_directions=3",
        "cluster-pca-init=kmeanspp",
        "cluster-pca-5-2-init=kmeanspp-seed=3",
        "flow-steps=5-lr=0.01",
        "flow-levels=2-permutation=invconv",
        "flow-arch=affine-n_blocks=2-hidden=64",
        "center",
    ],
)
def test_spec_round_trip_with_parameters(spec: str) -> None:
    method, _ = make_method(spec)
    assert method.spec == spec
    again, _ = make_method(method.spec)
    assert again.get_params() == method.get_params()


# ---- spec parsing ---------------------------------------------------------------------------------
def test_spec_parsing() -> None:
    method, level = make_method("whiten-256")
    assert isinstance(method, Whiten) and method.n_components == 256 and level == "sentence"
    assert make_method("abtt-7")[0].n_components == 7
    method, level = make_method("cluster-pca-10-3")
    assert (method.n_clusters, method.n_directions, level) == (10, 3, "token")
    assert make_method("cluster-pca-algorithm=gmm")[0].algorithm == "gmm"
    assert make_method("cluster-pca-init=kmeanspp")[0].init == "kmeanspp"
    method, level = make_method("cluster-pca-level=sentence")
    assert isinstance(method, ClusterPCA) and level == "sentence"
    assert make_method("clip-dims=3,5")[0].dims == (3, 5)
    assert make_method("clip-dims=3")[0].dims == (3,)
    cls, params = parse_spec("flow-steps=10-level=token")
    assert cls is Flow and params == {"steps": 10, "level": "token"}
    assert parse_spec("flow-arch=affine-hidden=64")[1] == {"arch": "affine", "hidden": 64}


def test_spec_errors() -> None:
    with pytest.raises(MethodError, match="Did you mean 'whiten'"):
        make_method("whitening")
    with pytest.raises(MethodError, match="Did you mean 'cluster-pca'"):
        make_method("clustr-pca-3")
    with pytest.raises(MethodError, match="has no parameter 'n_clusterz'.*n_clusters"):
        make_method("cluster-pca-n_clusterz=3")
    with pytest.raises(MethodError, match="n_components='abc' is not a valid value"):
        make_method("whiten-abc")
    with pytest.raises(MethodError, match="too many positional"):
        make_method("abtt-3-4")
    with pytest.raises(MethodError, match="level must be"):
        make_method("whiten-level=word")


# ---- raw / center ---------------------------------------------------------------------------------
def test_raw_is_identity_and_center_is_zero_mean(X: np.ndarray) -> None:
    np.testing.assert_array_equal(make_method("raw")[0].transform(X), X)  # no fit needed
    out = make_method("center")[0].fit(X).transform(X)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(out, X - X.mean(axis=0))


# ---- whiten ---------------------------------------------------------------------------------------
def test_whiten_gives_identity_covariance(X: np.ndarray) -> None:
    out = Whiten().fit(X).transform(X)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(D), atol=1e-6)


def test_whiten_k_keeps_the_k_largest_variance_columns(X: np.ndarray) -> None:
    full = Whiten().fit(X)
    part = make_method("whiten-8")[0].fit(X)
    out = part.transform(X)
    assert out.shape == (N, 8) and part.n_components_ == 8
    np.testing.assert_allclose(out, full.transform(X)[:, :8], atol=1e-10)
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(8), atol=1e-6)
    assert np.all(np.diff(full.eigenvalues_) <= 0)


def test_whiten_refuses_a_singular_covariance(X: np.ndarray) -> None:
    few = anisotropic(n=20)  # 20 vectors in 32-d: rank <= 19
    with pytest.raises(MethodError, match=r"'whiten'.*singular.*whiten-19.*eps"):
        Whiten().fit(few)
    out = Whiten(n_components=19).fit(few).transform(few)  # k < n vectors: fine
    np.testing.assert_allclose(np.cov(out, rowvar=False), np.eye(19), atol=1e-6)
    assert np.isfinite(Whiten(eps=1e-3).fit(few).transform(few)).all()  # regularised: fine
    dependent = anisotropic()
    dependent[:, 1] = 2.0 * dependent[:, 0]  # rank 31 although n > d
    with pytest.raises(MethodError, match="numerical rank 31"):
        Whiten(n_components=32).fit(dependent)
    pinv = Whiten().fit(dependent)  # the direction without variance carries nothing: whiten the rest
    assert pinv.n_components_ == 31 and pinv.dropped_ == 1
    np.testing.assert_allclose(np.cov(pinv.transform(dependent), rowvar=False), np.eye(31), atol=1e-6)
    with pytest.raises(MethodError, match="between 1 and 32 for 32-d vectors, got 40"):
        Whiten(n_components=40).fit(X)


# ---- abtt -----------------------------------------------------------------------------------------
def test_abtt_removes_the_top_directions(X: np.ndarray) -> None:
    method = Abtt(n_components=3).fit(X)
    out = method.transform(X)
    assert method.components_.shape == (3, D)
    np.testing.assert_allclose(method.components_ @ method.components_.T, np.eye(3), atol=1e-12)
    assert np.abs(out @ method.components_.T).max() < 1e-8
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-10)
    # the removed directions are the top principal directions of the centred data
    _, _, vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    np.testing.assert_allclose(np.abs(vt[:3] @ method.components_.T), np.eye(3), atol=1e-8)


def test_abtt_default_is_d_over_100() -> None:
    assert Abtt().fit(anisotropic(d=32)).n_components_ == 1
    assert Abtt().fit(anisotropic(n=400, d=250)).n_components_ == 2  # round(2.5) -> 2
    with pytest.raises(MethodError, match="between 1 and 31 for 32-d vectors, got 32"):
        Abtt(n_components=32).fit(anisotropic())


# ---- clip -----------------------------------------------------------------------------------------
def planted(n: int = 300, d: int = 64) -> np.ndarray:
    X = np.random.default_rng(0).normal(size=(n, d))
    X[:, 7] -= 6.0
    X[:, 41] += 6.0
    return X


def test_clip_finds_and_zeroes_planted_dimensions() -> None:
    X = planted()
    method = Clip().fit(X)
    assert method.dims_ == (7, 41)
    assert method.stats_.argmin_fraction[7] > 0.9 and method.stats_.argmax_fraction[41] > 0.9
    out = method.transform(X)
    assert not out[:, [7, 41]].any()
    keep = [j for j in range(64) if j not in (7, 41)]
    np.testing.assert_array_equal(out[:, keep], X[:, keep])


def test_clip_explicit_dims_and_isotropic_data() -> None:
    X = planted()
    method, _ = make_method("clip-dims=3,5")
    out = method.fit(X).transform(X)
    assert method.dims_ == (3, 5) and method.stats_ is None
    zeroed = np.flatnonzero(~out.any(axis=0))
    assert zeroed.tolist() == [3, 5]
    np.testing.assert_array_equal(np.delete(out, [3, 5], axis=1), np.delete(X, [3, 5], axis=1))
    iso = np.random.default_rng(1).normal(size=(300, 64))
    method = Clip().fit(iso)
    assert method.dims_ == () and method.stats_ is not None  # nothing found: identity, recorded
    np.testing.assert_array_equal(method.transform(iso), iso)
    with pytest.raises(MethodError, match="out of range"):
        Clip(dims=(64,)).fit(X)


# ---- cluster-pca ----------------------------------------------------------------------------------
def blobs(sizes: tuple[int, ...] = (120, 100, 80), d: int = 10, seed: int = 0) -> np.ndarray:
    """Well-separated anisotropic clusters, each with its own dominant directions."""
    rng = np.random.default_rng(seed)
    parts = []
    for i, size in enumerate(sizes):
        centre = np.zeros(d)
        centre[i % d] = 50.0
        parts.append(centre + rng.normal(size=(size, d)) @ rng.normal(size=(d, d)))
    return np.vstack(parts)


@pytest.mark.parametrize("algorithm", ["kmeans", "gmm"])
def test_cluster_pca_centres_each_cluster_and_removes_its_directions(algorithm: str) -> None:
    X = blobs()
    method = ClusterPCA(n_clusters=3, n_directions=2, algorithm=algorithm).fit(X)
    assert sorted(method.cluster_sizes_.tolist()) == [80, 100, 120]
    labels = method.predict(X)
    out = method.transform(X)
    for j in range(3):
        members = out[labels == j]
        np.testing.assert_allclose(members.mean(axis=0), 0.0, atol=1e-10)
        assert np.abs(members @ method.components_[j].T).max() < 1e-8
        # the removed directions were the cluster's top principal directions
        raw = X[labels == j]
        _, _, vt = np.linalg.svd(raw - raw.mean(axis=0), full_matrices=False)
        np.testing.assert_allclose(np.abs(vt[:2] @ method.components_[j].T), np.eye(2), atol=1e-8)


def test_cluster_pca_refuses_a_cluster_too_small_for_its_directions() -> None:
    X = blobs(sizes=(120, 100, 3))  # 223 vectors: enough in total (3 * 6 = 18), but one cluster has 3 members
    with pytest.raises(MethodError, match=r"'cluster-pca-3-5': after clustering, 1 of 3 clusters have fewer than "
                       r"the n_directions \+ 1 = 6 members .*\(smallest: cluster \d, 3 members; together 3 of 223 "
                       r"vectors\).*--fit-corpus.*e\.g\. cluster-pca-3-2 "):
        ClusterPCA(n_clusters=3, n_directions=5).fit(X)  # 3 of 223 is 1.3%, over the 1% a rare cluster may hold
    # the suggested spec fits: the clustering does not depend on n_directions, and 3 members span 2 directions
    method = ClusterPCA(n_clusters=3, n_directions=2).fit(X)
    assert sorted(method.cluster_sizes_.tolist()) == [3, 100, 120]
    assert method.n_directions_.tolist() == [2, 2, 2]
    assert np.isfinite(method.transform(X)).all()


def test_cluster_pca_lets_a_rare_small_cluster_keep_the_directions_it_spans(caplog: pytest.LogCaptureFixture) -> None:
    far = np.zeros(10)
    far[2] = 1000.0  # three vectors far from the rest: every seeding gives them a cluster of their own
    rare = far + np.random.default_rng(1).normal(size=(3, 10))
    X = np.vstack([blobs(sizes=(400, 400)), rare])  # 3 of 803 vectors: under 1%, like the pieces of one rare word
    with caplog.at_level("WARNING", logger="iso_bench.methods.cluster_pca"):
        method = ClusterPCA(n_clusters=3, n_directions=5).fit(X)
    small = int(np.argmin(method.cluster_sizes_))
    assert method.cluster_sizes_[small] == 3
    assert method.n_directions_.tolist() == [2 if j == small else 5 for j in range(3)]  # 3 members span 2
    assert "1 of 3 clusters have fewer than the n_directions + 1 = 6 members" in caplog.text
    members = method.predict(X) == small
    np.testing.assert_allclose(method.transform(X)[members], 0.0, atol=1e-9)  # nothing is left of them


def test_cluster_pca_allows_an_empty_cluster() -> None:
    # three distinct points, ten copies each, into four clusters: one cluster gets no vector
    X = np.repeat(np.array([[0.0, 0, 0, 0], [10, 0, 0, 0], [0, 10, 0, 0]]), 10, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # k-means warns that it found fewer distinct points than clusters
        method = ClusterPCA(n_clusters=4, n_directions=1).fit(X)
    assert sorted(method.cluster_sizes_.tolist()) == [0, 10, 10, 10]
    assert method.n_directions_.tolist() == [0, 0, 0, 0]  # copies of one point have no direction of variance
    np.testing.assert_array_equal(method.transform(X), 0.0)  # each vector is its cluster's mean


def test_cluster_pca_errors() -> None:
    X = blobs()
    # 400 clusters of 3 vectors (2 directions + 1) need 1200; 300 fill 300 // 3 = 100 of them
    with pytest.raises(MethodError, match=r"'cluster-pca-400-2': 300 fit vectors are too few: it needs at least "
                       r"1200 10-d vectors.*e\.g\. cluster-pca-100-2$"):
        make_method("cluster-pca-400-2")[0].fit(X)
    with pytest.raises(MethodError, match="n_directions must be between 0 and 9 for 10-d vectors, got 10"):
        ClusterPCA(n_clusters=3, n_directions=10).fit(X)
    with pytest.raises(MethodError, match="unknown algorithm 'dbscan'"):
        ClusterPCA(n_clusters=3, algorithm="dbscan").fit(X)


def test_cluster_pca_works_on_float32_input_without_a_float64_copy() -> None:
    import tracemalloc

    X = anisotropic(n=20_000, d=64).astype(np.float32)
    method = ClusterPCA(n_clusters=8, n_directions=3)
    method.fit(X).transform(X)  # first calls import scipy modules, which tracemalloc would count
    tracemalloc.start()
    try:
        method.fit(X)
        fit_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        out = method.transform(X)
        transform_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # a float64 copy alone is 2 X.nbytes; fit makes one float32 copy (grouped by cluster), transform only
    # its float32 output (the rows of a cluster are gathered a block at a time)
    assert fit_peak < 1.6 * X.nbytes, fit_peak / X.nbytes
    assert transform_peak < 1.4 * X.nbytes, transform_peak / X.nbytes
    assert out.dtype == np.float32
    np.testing.assert_array_equal(X, anisotropic(n=20_000, d=64).astype(np.float32))  # input untouched
    labels = method.predict(X)
    for j in range(8):  # each cluster centred, its directions removed, to float32 precision
        members = out[labels == j].astype(np.float64)
        assert np.abs(members.mean(axis=0)).max() < 1e-5 * np.abs(X).max()
        assert np.abs(members @ method.components_[j].T).max() < 1e-5 * np.abs(X).max()
