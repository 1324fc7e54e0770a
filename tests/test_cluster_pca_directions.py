"""cluster-pca's directions of a cluster with fewer members than dimensions come from the members' Gram matrix.

The top-k eigenvectors u of G = M M^T (m x m) give the directions v = M^T u / ||M^T u||: the SVD's, exactly in
exact arithmetic. The tolerance stated and tested here, against the float64 SVD the code used before: the sine of
the largest principal angle between the two subspaces under 1e-8, every entry within 1e-8 (the same signs), rows
orthonormal to 1e-10. Where the Gram matrix cannot resolve a direction's variance (repeated members), the SVD
decides, as before, to the last bit. And the copies fit makes at 4,096-d: none of a cluster's members in float64,
float64 copies of rows that tie in float32 a block at a time, one float64 copy for scikit-learn's k-means++, and
the mixture's probabilities as before to the last bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.methods.cluster_pca import _GRAM_FLOOR, ClusterPCA, _directions, _gram_directions
from iso_bench.numerics.linalg import fix_signs

TOLERANCE = 1e-8


def svd_directions(members: np.ndarray, k: int) -> np.ndarray:
    """The route of m <= d members before the Gram matrix: a float64 SVD of all of them."""
    _, sv, vt = np.linalg.svd(members.astype(np.float64), full_matrices=False)
    return fix_signs(vt[:k][sv[:k] > 1e-12 * sv[0]])


def sine(a: np.ndarray, b: np.ndarray) -> float:
    """The sine of the largest principal angle between the row spaces of orthonormal ``a`` and ``b``."""
    return float(np.linalg.norm(a.T - b.T @ (b @ a.T), ord=2))


def anisotropic(m: int, d: int, seed: int = 0) -> np.ndarray:
    """Centred m x d members with a decaying spectrum in random directions, off the origin before centring."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, min(m, d))))[0].T
    M = 3.0 + rng.normal(size=(m, len(basis))) * np.exp(-np.arange(len(basis)) / 20.0) @ basis
    return M - M.mean(axis=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("m", "d", "k"), [(300, 1100, 12), (64, 64, 12), (40, 700, 39), (2, 30, 1)])
def test_gram_directions_are_the_svds_to_rounding(dtype: type, m: int, d: int, k: int) -> None:
    M = anisotropic(m, d).astype(dtype)  # float32: 1,100 columns cast in blocks of 512, 512 and 76
    assert _gram_directions(M, k) is not None  # the Gram route, not the fallback
    new, old = _directions(M, k), svd_directions(M, k)
    assert new.shape == old.shape == (k, d)
    assert sine(new, old) < TOLERANCE
    np.testing.assert_allclose(new, old, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(new @ new.T, np.eye(k), rtol=0, atol=1e-10)


def test_repeated_members_leave_the_directions_to_the_svd() -> None:
    rng = np.random.default_rng(1)
    points = rng.normal(size=(5, 50)) + 2.0
    M = points[np.arange(30) % 5]  # 30 members, 5 distinct: their centred span has 4 directions
    M = M - M.mean(axis=0)
    assert _gram_directions(M, 8) is None  # the 5th to 8th variances are rounding: under the floor
    new = _directions(M, 8)
    np.testing.assert_array_equal(new, svd_directions(M, 8))  # the SVD's own arithmetic
    assert len(new) == 4
    same = np.zeros((30, 50))  # copies of one vector: no direction at all
    assert _directions(same, 3).shape == (0, 50)


def test_repeated_members_spanning_enough_directions_take_the_gram_route() -> None:
    rng = np.random.default_rng(2)
    M = np.repeat(rng.normal(size=(15, 200)) * np.exp(-np.arange(200) / 30.0), 3, axis=0)  # 45 members, rank 15
    M = (M - M.mean(axis=0)).astype(np.float32)
    found = _gram_directions(M, 8)
    assert found is not None and found[0][-1] > np.sqrt(_GRAM_FLOOR) * found[0][0]
    new, old = _directions(M, 8), svd_directions(M, 8)
    assert new.shape == old.shape == (8, 200)
    assert sine(new, old) < TOLERANCE
    np.testing.assert_allclose(new, old, rtol=0, atol=TOLERANCE)


def test_a_fit_on_clusters_with_fewer_members_than_dimensions_removes_their_svd_directions() -> None:
    d = 600
    parts = []
    for i, size in enumerate((150, 230, 90)):  # every cluster has fewer members than dimensions
        centre = np.zeros(d)
        centre[i] = 100.0
        parts.append(centre + anisotropic(size, d, seed=i))
    X = np.vstack(parts).astype(np.float32)
    method = ClusterPCA(n_clusters=3, n_directions=5, seed=1).fit(X)
    assert sorted(method.cluster_sizes_.tolist()) == [90, 150, 230]
    labels = method.predict(X)
    for j in range(3):
        members = X[labels == j] - method.means_[j].astype(np.float32)
        assert sine(method.components_[j], svd_directions(members, 5)) < TOLERANCE
    out = method.transform(X)
    for j in range(3):
        assert np.abs(out[labels == j] @ method.components_[j].T).max() < 1e-5 * np.abs(X).max()


def test_fit_on_wide_float32_clusters_makes_no_float64_copy_of_their_members() -> None:
    import tracemalloc

    rng = np.random.default_rng(4)
    d = 2048
    X = np.vstack([10.0 * anisotropic(400, d, seed=i) + rng.normal(size=d) for i in range(3)]).astype(np.float32)
    method = ClusterPCA(n_clusters=3, n_directions=4)
    method.fit(X)  # first calls import scipy modules, which tracemalloc would count
    tracemalloc.start()
    try:
        method.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # the one float32 copy grouped by cluster, then per cluster a 400 x 400 float64 Gram matrix and 400 x 512
    # float64 columns at a time: 1.5 X.nbytes (the SVD route: 2.5, its float64 copy of a cluster's members
    # and its 400 x 2,048 right singular vectors 2/3 X.nbytes each)
    assert peak < 1.7 * X.nbytes, peak / X.nbytes
    assert sorted(method.cluster_sizes_.tolist()) == [400, 400, 400]


def test_kmeanspp_on_float32_input_is_scikit_learns_kmeans_on_its_float64_values() -> None:
    from sklearn.cluster import KMeans

    X32 = np.vstack([anisotropic(200, 12, seed=i) + 4.0 * i for i in range(4)]).astype(np.float32)
    kept = X32.copy()
    method = ClusterPCA(n_clusters=4, n_directions=2, init="kmeanspp", seed=5).fit(X32)
    km = KMeans(n_clusters=4, init="k-means++", n_init=1, max_iter=10, tol=0.0, random_state=5).fit(
        X32.astype(np.float64))
    np.testing.assert_array_equal(method.centroids_, km.cluster_centers_)  # its own float64 copy, centred in place
    np.testing.assert_array_equal(method.predict(X32), km.labels_)
    np.testing.assert_array_equal(X32, kept)  # the input untouched


def test_rows_that_tie_in_float32_go_to_vq_a_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from scipy.cluster import vq as scipy_vq

    from iso_bench.methods.cluster_pca import _BLOCK, _nearest

    rng = np.random.default_rng(6)
    centroids = 1000.0 + rng.normal(size=(4, 64))  # far from the origin, close to each other: float32 ties
    X = (centroids[rng.integers(0, 4, 3000)] + rng.normal(size=(3000, 64))).astype(np.float32)
    expected = scipy_vq.vq(X.astype(np.float64), centroids)[0]
    calls = []

    def counted(obs: np.ndarray, *args: object, **kwargs: object) -> tuple[np.ndarray, np.ndarray]:
        calls.append(len(obs))
        return expected_vq(obs, *args, **kwargs)

    expected_vq = scipy_vq.vq
    monkeypatch.setattr(scipy_vq, "vq", counted)
    np.testing.assert_array_equal(_nearest(X, centroids), expected)
    assert len(calls) > 2 and max(calls) <= _BLOCK  # float64 copies of at most _BLOCK rows at a time


def test_the_mixtures_log_probability_doubles_the_means_not_the_vectors() -> None:
    from iso_bench.methods.cluster_pca import _gmm_log_prob

    rng = np.random.default_rng(7)
    X, means, variances = rng.normal(size=(500, 30)), rng.normal(size=(5, 30)), rng.uniform(0.5, 2.0, size=(5, 30))
    weights = np.full(5, 0.2)
    precision = 1.0 / variances
    sq = (X * X) @ precision.T - 2.0 * X @ (means * precision).T + ((means * means) * precision).sum(axis=1)
    before = np.log(weights) - 0.5 * (np.log(2.0 * np.pi * variances).sum(axis=1) + sq)
    np.testing.assert_array_equal(_gmm_log_prob(X, weights, means, variances), before)  # to the last bit
