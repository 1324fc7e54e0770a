"""``cluster-pca``: cluster-based isotropy enhancement (Rajaee & Pilehvar, ACL 2021, arXiv 2106.01183).

Token vectors of a contextual model form clusters with their own dominant directions, so a single
global all-but-the-top misses them. Fit: cluster the vectors (k-means, or a Gaussian mixture), then
per cluster its mean and its top principal directions. Transform: assign each vector to its cluster,
subtract that cluster's mean, and remove the projections on that cluster's directions.

The authors' notebook: bert-base-uncased last layer, token level, scipy ``kmeans2`` (one run of its
default 10 Lloyd iterations), 27 clusters, 12 directions per cluster. ``cluster-pca-10-3`` is 10
clusters, 3 directions; ``cluster-pca-algorithm=gmm`` uses a Gaussian mixture. scikit-learn is imported
inside :meth:`fit`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.linalg import fix_signs
from iso_bench.methods.base import Method, MethodError, register

ALGORITHMS = ("kmeans", "gmm")
_KMEANS_N_INIT = 1
"""One k-means run (k-means++ seeding, ``random_state=seed``), as the authors' single ``kmeans2`` run;
fixed rather than "auto" so results do not change with the scikit-learn version."""
_KMEANS_MAX_ITER = 10
"""Lloyd iterations, always all of them: the authors' ``kmeans2`` call runs its default of 10 (scikit-learn's
default, up to 300 until converged, ran 74 iterations and took 3.5 times as long on 30,000 384-d vectors)."""


def _directions(members: np.ndarray, k: int) -> np.ndarray:
    """Top-``k`` principal directions (rows) of centred ``members``, largest entry made positive."""
    d = members.shape[1]
    if len(members) > d:
        # many members: the top eigenvectors of the d x d scatter matrix (O(m d^2), then only k of the
        # d eigenpairs) are the right singular vectors the SVD of the m x d matrix would give
        from scipy.linalg import eigh

        vals, vecs = eigh(members.T @ members, subset_by_index=[d - k, d - 1])
        sv, vt = np.sqrt(np.clip(vals[::-1], 0.0, None)), vecs[:, ::-1].T
    else:
        _, sv, vt = np.linalg.svd(members, full_matrices=False)
    return fix_signs(vt[:k][sv[:k] > 1e-12 * sv[0]])  # drop directions without variance (duplicate members)


def _group(labels: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """``order`` that sorts the rows by cluster, and ``bounds`` such that cluster j is rows
    ``order[bounds[j]:bounds[j + 1]]``: one gather makes every cluster a contiguous slice (a boolean
    mask per cluster would copy the whole matrix once per cluster)."""
    order = np.argsort(labels, kind="stable")
    return order, np.searchsorted(labels[order], np.arange(c + 1))


@register
class ClusterPCA(Method):
    """Per-cluster centring and removal of each cluster's dominant directions.

    Parameters:
        n_clusters: number of clusters (27 in the paper).
        n_directions: principal directions removed per cluster (12 in the paper); must be < dim.
        algorithm: ``"kmeans"`` (scikit-learn ``KMeans``: one run, k-means++ seeding, 10 Lloyd
            iterations as the authors' ``kmeans2``) or ``"gmm"`` (``GaussianMixture``
            with diagonal covariances: full 768 x 768 covariances per cluster are too costly on token
            vectors).
        seed: random state of the clustering.

    A cluster with m members supports at most m - 1 directions (its centred members span no
    more); such a cluster gets as many as it supports, recorded in ``n_directions_``. A cluster that
    receives no vector keeps its centre as mean and no directions.

    Learned state: ``clusterer_`` (the fitted scikit-learn estimator, used to assign vectors),
    ``means_`` (c, d), ``components_`` (c, n_directions, d) zero-padded orthonormal rows,
    ``n_directions_`` (c,) directions actually used, ``cluster_sizes_`` (c,), ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(300, 8))
        >>> ClusterPCA(n_clusters=3, n_directions=2).fit(X).transform(X).shape
        (300, 8)
    """

    name = "cluster-pca"
    order = 50
    spec_args = ("n_clusters", "n_directions")
    default_level = "token"

    def __init__(
        self,
        *,
        n_clusters: int = 27,
        n_directions: int = 12,
        algorithm: str = "kmeans",
        seed: int = 0,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_directions = n_directions
        self.algorithm = algorithm
        self.seed = seed

    def _make_clusterer(self) -> Any:
        if self.algorithm == "kmeans":
            from sklearn.cluster import KMeans

            # tol=0: always the 10 iterations, as kmeans2 (and no pass over X to scale a tolerance)
            return KMeans(n_clusters=self.n_clusters, n_init=_KMEANS_N_INIT, max_iter=_KMEANS_MAX_ITER, tol=0.0,
                          random_state=self.seed)
        from sklearn.mixture import GaussianMixture

        return GaussianMixture(n_components=self.n_clusters, covariance_type="diag", random_state=self.seed)

    def fit(self, X: np.ndarray) -> ClusterPCA:
        X = self._check_input(X, fitting=True, min_rows=1)
        n, d = X.shape
        if self.algorithm not in ALGORITHMS:
            raise MethodError(
                f"method {self.spec!r}: unknown algorithm {self.algorithm!r}; use one of {', '.join(ALGORITHMS)}"
            )
        if self.n_clusters < 1 or self.n_clusters > n:
            raise MethodError(
                f"method {self.spec!r}: cannot make {self.n_clusters} clusters of {n} vectors; "
                f"use at most {n} clusters (cluster-pca-{max(1, min(n, 27))}-...) or a larger fit corpus"
            )
        if not 0 <= self.n_directions < d:
            raise MethodError(
                f"method {self.spec!r}: n_directions={self.n_directions} must be between 0 and dim - 1 = {d - 1} "
                "(removing every direction leaves nothing)"
            )
        clusterer = self._make_clusterer().fit(X)
        labels = np.asarray(clusterer.predict(X))  # the same assignment transform will use
        centres = clusterer.cluster_centers_ if self.algorithm == "kmeans" else clusterer.means_
        c, k = self.n_clusters, self.n_directions
        means = np.array(centres, dtype=np.float64, copy=True)
        components = np.zeros((c, k, d))
        used = np.zeros(c, dtype=int)
        sizes = np.bincount(labels, minlength=c)
        order, bounds = _group(labels, c)
        grouped = X[order]
        for j in range(c):
            members = grouped[bounds[j] : bounds[j + 1]]
            if len(members) == 0:
                continue
            means[j] = members.mean(axis=0)
            if k and len(members) > 1:
                comps = _directions(members - means[j], min(k, len(members) - 1))
                components[j, : len(comps)] = comps
                used[j] = len(comps)
        self.dim_ = d
        self.clusterer_ = clusterer
        self.means_ = means
        self.components_ = components
        self.n_directions_ = used
        self.cluster_sizes_ = sizes
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The cluster index of each vector, shape ``(n,)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        return self._assign(X)

    def _assign(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.clusterer_.predict(X))

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The post-processed vectors, float64, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        order, bounds = _group(self._assign(X), self.n_clusters)
        grouped = X[order]
        for j in range(self.n_clusters):
            Y = grouped[bounds[j] : bounds[j + 1]]
            if len(Y):
                Y -= self.means_[j]
                C = self.components_[j]
                Y -= (Y @ C.T) @ C
        out = np.empty_like(grouped)
        out[order] = grouped
        return out
