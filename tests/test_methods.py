"""Post-processing methods: one contract test over every registered method, then each method's maths."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from iso_bench.methods import METHODS, Method, MethodError, NotFittedError, make_method, parse_spec
from iso_bench.methods.abtt import Abtt
from iso_bench.methods.clip import Clip
from iso_bench.methods.cluster_pca import ClusterPCA
from iso_bench.methods.flow import Flow
from iso_bench.methods.whiten import Whiten

N, D = 1000, 32
"""Enough vectors for every method's defaults: cluster-pca's 27 clusters need 13 members each (12 directions
plus one), and the smallest of the 27 k-means clusters of ``anisotropic()`` has 23 at this size."""


def anisotropic(n: int = N, d: int = D, seed: int = 0) -> np.ndarray:
    """Correlated, offset vectors with one outlier dimension: something for every method to do."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) * 0.3 + rng.normal(size=d)
    X[:, 5] -= 8.0
    return X


@pytest.fixture(scope="module")
def X() -> np.ndarray:
    return anisotropic()


# ---- the contract, over every registered method ------------------------------------------------
ALL = sorted(METHODS)


@pytest.mark.parametrize("name", ALL)
def test_contract(name: str, X: np.ndarray) -> None:
    cls = METHODS.get(name)
    method = cls()
    assert isinstance(method, Method) and method.name == name and method.spec == name
    if cls.fitted:
        assert not method.is_fitted()
        with pytest.raises(NotFittedError, match=name):
            method.transform(X)
    assert method.fit(X) is method
    assert method.is_fitted() and method.dim_ == D
    first = method.transform(X)
    assert first.dtype == np.float64 and first.ndim == 2 and first.shape[0] == N
    assert np.isfinite(first).all()
    # new vectors of the fitted dimension keep the output width; a wrong dimension is refused
    other = method.transform(anisotropic(n=7, seed=1))
    assert other.shape == (7, first.shape[1])
    with pytest.raises(MethodError, match="fitted on 32-d"):
        method.transform(X[:, :-1])
    # fitting again on the same data is idempotent; a fresh instance (same seed) agrees exactly
    np.testing.assert_array_equal(method.fit(X).transform(X), first)
    np.testing.assert_array_equal(cls().fit(X).transform(X), first)
    # the input is not modified in place
    np.testing.assert_array_equal(X, anisotropic())
    # a fitted method pickles (the cache may store it) and transforms identically afterwards
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(method)).transform(X), first)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_contract_transform_means_pools_the_transform_segment_by_segment(name: str, dtype: type, X: np.ndarray) -> None:
    method = METHODS.get(name)().fit(X)
    Xd = X.astype(dtype)
    starts = np.array([0, 3, 4, 50, 51, N - 1])  # segments of 3, 1, 46, 1, N - 52 and 1 rows
    Z = method.transform(Xd)
    bounds = [*starts, N]
    expected = np.stack([Z[a:b].mean(axis=0) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    pooled = method.transform_means(Xd, starts)
    assert pooled.dtype == Z.dtype
    np.testing.assert_array_equal(pooled, expected)  # the same arithmetic, not only close


@pytest.mark.parametrize("name", ALL)
def test_contract_nan_input(name: str, X: np.ndarray) -> None:
    bad = X.copy()
    bad[3, 4] = np.nan
    with pytest.raises(MethodError, match="NaN"):
        METHODS.get(name)().fit(bad)
    with pytest.raises(MethodError, match="NaN"):
        METHODS.get(name)().fit(X).transform(bad)


@pytest.mark.parametrize("name", ALL)
def test_contract_spec_round_trip(name: str) -> None:
    method = METHODS.get(name)()
    again, level = make_method(method.spec)
    assert type(again) is type(method) and again.get_params() == method.get_params()
    assert level == method.default_level


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


# ---- flow -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gaussian() -> np.ndarray:
    """2000 draws of an 8-d Gaussian with a random covariance and offset."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(2000, 8)) @ rng.normal(size=(8, 8)) + 3.0 * rng.normal(size=8)


@pytest.fixture(scope="module", params=["glow", "affine"])
def trained(gaussian: np.ndarray, request: pytest.FixtureRequest) -> Flow:
    # both architectures; 300 steps of large batches (less gradient noise, about 38 epochs) for the
    # capability checks below; the default (one epoch of 64-vector batches, as BERT-flow trains) is
    # tested on its own
    return Flow(arch=request.param, batch_size=256, steps=300).fit(gaussian)


def test_flow_training_raises_the_likelihood(gaussian: np.ndarray, trained: Flow) -> None:
    before = Flow(arch=trained.arch, steps=0).fit(gaussian).log_likelihood(gaussian)  # data-dependent init only
    after = trained.log_likelihood(gaussian)
    # the Gaussian MLE bounds what a linear map can reach; the flow should get there (within 0.1 nat;
    # observed: about 0.1 nat above it, both architectures, fitting the sample's own departures)
    Xc = gaussian - gaussian.mean(axis=0)
    _, logdet = np.linalg.slogdet(Xc.T @ Xc / len(Xc))
    gauss_mle = -0.5 * 8 * (1 + np.log(2 * np.pi)) - 0.5 * logdet
    assert after > before + 1.0
    assert after > gauss_mle - 0.1
    assert trained.history_[-20:].mean() < trained.history_[:20].mean()


def test_flow_inverts(gaussian: np.ndarray, trained: Flow) -> None:
    assert np.abs(trained.inverse(trained.transform(gaussian)) - gaussian).max() < 1e-4
    z = np.random.default_rng(5).normal(size=(10, 8))
    assert np.abs(trained.transform(trained.inverse(z)) - z).max() < 1e-4


def test_flow_maps_gaussian_data_to_a_standard_normal(gaussian: np.ndarray, trained: Flow) -> None:
    z = trained.transform(gaussian)
    # observed: |mean| <= 0.015, |cov - I| <= 0.035 (untrained init: |cov - I| about 0.8); the bounds
    # leave room for platform differences, not for a flow that fails to decorrelate
    assert np.abs(z.mean(axis=0)).max() < 0.05
    assert np.abs(np.cov(z, rowvar=False) - np.eye(8)).max() < 0.08
    untrained = Flow(arch=trained.arch, steps=0).fit(gaussian).transform(gaussian)
    assert np.abs(np.cov(untrained, rowvar=False) - np.eye(8)).max() > 0.5


def test_flow_trains_one_epoch_by_default_at_most_max_steps(gaussian: np.ndarray) -> None:
    # 2,000 vectors in batches of 64: ceil(2000 / 64) = 32 steps, one epoch
    flow = Flow().fit(gaussian)
    assert flow.n_steps_ == 32 and len(flow.history_) == 32
    assert Flow(max_steps=10).fit(gaussian).n_steps_ == 10
    assert Flow(steps=7, max_steps=3).fit(gaussian).n_steps_ == 7  # an explicit count is not capped
    assert flow.log_likelihood(gaussian) > Flow(steps=0).fit(gaussian).log_likelihood(gaussian)


def test_flow_leaves_the_global_torch_rng_alone(gaussian: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    state = torch.get_rng_state()
    Flow(steps=3).fit(gaussian)
    assert torch.equal(state, torch.get_rng_state())
    assert not np.array_equal(
        Flow(steps=3, seed=1).fit(gaussian).transform(gaussian), Flow(steps=3, seed=2).fit(gaussian).transform(gaussian)
    )


@pytest.mark.parametrize("arch", ["glow", "affine"])
def test_flow_trains_on_one_thread_and_restores_the_callers_count(
    gaussian: np.ndarray, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    import iso_bench.methods.flow as flow_module

    seen = []

    def spy(torch, *args):
        seen.append(torch.get_num_threads())
        if len(seen) == 2:
            raise RuntimeError("training failed")
        return train(torch, *args)

    train = flow_module._train
    monkeypatch.setattr(flow_module, "_train", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        Flow(arch=arch, steps=2).fit(gaussian)
        assert torch.get_num_threads() == 3
        with pytest.raises(RuntimeError, match="training failed"):
            Flow(arch=arch, steps=2).fit(gaussian)
        assert torch.get_num_threads() == 3 and seen == [1, 1]
    finally:
        torch.set_num_threads(before)


def test_flow_device_is_no_parameter(gaussian: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    default = Flow(steps=5).fit(gaussian).transform(gaussian)
    method = Flow(steps=5)
    method.device = "cpu"
    assert method.spec == "flow-steps=5" and "device" not in method.get_params()
    np.testing.assert_array_equal(method.fit(gaussian).transform(gaussian), default)
    method.device = "cuda"  # where there is no GPU, training runs on the CPU
    Z = method.fit(gaussian).transform(gaussian)
    if torch.cuda.is_available():  # the same training, rounded differently
        np.testing.assert_allclose(Z, default, atol=1e-3)
        assert np.abs(method.inverse(Z) - gaussian).max() < 1e-8
    else:
        np.testing.assert_array_equal(Z, default)


def test_flow_errors(gaussian: np.ndarray) -> None:
    with pytest.raises(MethodError, match=r"'flow'.*more vectors than dimensions"):
        Flow().fit(gaussian[:8])
    with pytest.raises(MethodError, match=r"needs dim >= 5 \(3 levels halve"):
        Flow().fit(gaussian[:, :4])
    with pytest.raises(MethodError, match=r"needs dim >= 2 \(the coupling splits the coordinates in two\)"):
        Flow(arch="affine").fit(gaussian[:, :1])
    one_varies = np.ones_like(gaussian)
    one_varies[:, 0] = gaussian[:, 0]
    for arch, need in (("glow", 5), ("affine", 2)):
        with pytest.raises(MethodError, match=f"only 1 of 8 dimensions vary in the fit corpus; .* at least {need} "):
            Flow(arch=arch).fit(one_varies)


def test_flow_models_the_varying_dimensions_and_zeroes_constant_ones(gaussian: np.ndarray) -> None:
    constant = gaussian.copy()
    constant[:, 2] = 1.0  # a dead coordinate, as all-MiniLM-L6-v2 has
    flow = Flow(steps=30).fit(constant)
    Z = flow.transform(constant)
    assert flow.constant_dims_ == (2,) and np.all(Z[:, 2] == 0)
    assert np.abs(flow.inverse(Z) - constant).max() < 1e-8
    rest = Flow(steps=30).fit(np.delete(constant, 2, axis=1)).transform(np.delete(constant, 2, axis=1))
    np.testing.assert_allclose(np.delete(Z, 2, axis=1), rest, atol=1e-10)
