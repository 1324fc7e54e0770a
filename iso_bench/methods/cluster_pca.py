"""``cluster-pca``: cluster-based isotropy enhancement (Rajaee & Pilehvar, ACL 2021, arXiv 2106.01183).

Token vectors of a contextual model form clusters with their own dominant directions, so a single
global all-but-the-top misses them. Fit: cluster the vectors (k-means, or a Gaussian mixture), then
per cluster its mean and its top principal directions. Transform: assign each vector to its cluster,
subtract that cluster's mean, and remove the projections on that cluster's directions.

The authors' notebook: bert-base-uncased last layer, token level, 27 clusters, 12 directions per
cluster, clustered by scipy's ``kmeans2(X, 27, minit='points')``: k distinct fit vectors drawn at random
as the initial centroids, then its default 10 Lloyd iterations, a centroid that loses all its vectors
staying where it was. That is the default here (the same call, seeded). ``cluster-pca-10-3`` is 10
clusters, 3 directions; ``cluster-pca-init=kmeanspp`` seeds k-means with k-means++ instead (scikit-learn's
``KMeans``, the same 10 iterations); ``cluster-pca-algorithm=gmm`` uses a Gaussian mixture. scipy and
scikit-learn are imported inside :meth:`fit`. The fitted state is numpy arrays only.
"""

from __future__ import annotations

import logging

import numpy as np

from iso_bench.linalg import fix_signs
from iso_bench.methods.base import Method, register

logger = logging.getLogger(__name__)

ALGORITHMS = ("kmeans", "gmm")
INITS = ("points", "kmeanspp")
"""How k-means picks its first centroids: ``points``, k distinct fit vectors at random (the authors'
``kmeans2(minit='points')``), or ``kmeanspp``, k-means++ seeding (scikit-learn's ``KMeans``)."""
SMALL_SHARE = 0.01
"""The share of the fit vectors that clusters too small for their directions may hold (see ``fit``)."""
_KMEANS_ITER = 10
"""Lloyd iterations, always all of them: the authors' ``kmeans2`` call runs its default of 10 (scikit-learn's
default, up to 300 until converged, ran 74 iterations and took 3.5 times as long on 30,000 384-d vectors).
The k-means++ variant runs one scikit-learn ``KMeans`` of 10 iterations (``n_init=1``, fixed rather than
"auto" so results do not change with the scikit-learn version)."""


def _kmeans_points(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """The centroids that ``scipy.cluster.vq.kmeans2(X, k, minit='points')`` assigns its returned labels
    with, seeded by ``numpy.random.default_rng(seed)``.

    kmeans2 returns the labels of its last assignment step, which come before its last centroid update;
    its first ``_KMEANS_ITER - 1`` iterations (the same seeded initial points) give the centroids of that
    step, so assigning by them (:func:`_nearest`) reproduces kmeans2's labels, at fit time and for the
    same vectors in ``transform``. An empty cluster keeps its previous centroid (``missing='warn'``; the
    warning is left to :meth:`ClusterPCA.fit`, which logs empty clusters)."""
    import inspect
    import warnings

    from scipy.cluster.vq import kmeans2

    # scipy >= 1.15 calls the generator argument "rng" ("seed" then keeps its old meaning for an int);
    # a Generator is consumed the same way by both
    key = "rng" if "rng" in inspect.signature(kmeans2).parameters else "seed"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="One of the clusters is empty")
        centroids, _ = kmeans2(X, k, iter=_KMEANS_ITER - 1, minit="points", missing="warn",
                               **{key: np.random.default_rng(seed)})
    return np.asarray(centroids, dtype=np.float64)


def _nearest(X: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The index of each row's nearest centroid (squared Euclidean distance, the first on a tie), as
    kmeans2 assigns (scipy's ``vq``)."""
    from scipy.cluster.vq import vq

    return np.asarray(vq(X, centroids, check_finite=False)[0], dtype=np.intp)


def _gmm_log_prob(X: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """log(weight_j) + log N(x; mean_j, diag(variances_j)) for every row and component, shape ``(n, c)``:
    what scikit-learn's diagonal ``GaussianMixture.predict`` maximises."""
    precision = 1.0 / variances
    sq = (X * X) @ precision.T - 2.0 * X @ (means * precision).T + ((means * means) * precision).sum(axis=1)
    return np.log(weights) - 0.5 * (np.log(2.0 * np.pi * variances).sum(axis=1) + sq)


def _assign(X: np.ndarray, centroids: np.ndarray, weights: np.ndarray | None,
            variances: np.ndarray | None) -> np.ndarray:
    """The cluster of each row: the nearest centroid (k-means), or the most probable component of the
    mixture with ``weights`` and diagonal ``variances`` (Gaussian mixture)."""
    if weights is None or variances is None:
        return _nearest(X, centroids)
    return np.argmax(_gmm_log_prob(X, weights, centroids, variances), axis=1)


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
        n_directions: principal directions removed per cluster (12 in the paper); between 0 and dim - 1.
        algorithm: ``"kmeans"`` (10 Lloyd iterations, as the authors' ``kmeans2``) or ``"gmm"``
            (scikit-learn's ``GaussianMixture`` with diagonal covariances: full 768 x 768 covariances per
            cluster are too costly on token vectors).
        init: the first centroids of k-means: ``"points"`` (the default and the authors': k distinct fit
            vectors at random, scipy's ``kmeans2(minit='points')``) or ``"kmeanspp"`` (k-means++ seeding,
            one scikit-learn ``KMeans`` run). Only for ``algorithm="kmeans"``.
        seed: seeds the clustering: ``numpy.random.default_rng(seed)`` draws kmeans2's initial points;
            scikit-learn gets ``random_state=seed``.

    Clustering and assignment: the labels of the fit vectors are the clustering's own (kmeans2's returned
    labels, bit for bit), and ``transform`` assigns every vector, new or not, the same way: to the nearest
    of ``centroids_`` for k-means, to the most probable component for the mixture. A fit vector therefore
    keeps its cluster in ``transform``.

    A cluster with m members supports at most m - 1 directions (its centred members span no more), so
    :meth:`fit` needs n_clusters * (n_directions + 1) vectors (:meth:`min_vectors`) and refuses a
    clustering in which non-empty clusters with fewer than n_directions + 1 members hold more than 1% of
    the vectors (fewer: they keep the directions they span, with a warning). A cluster that
    receives no vector keeps its centre as mean and no directions; a cluster whose members repeat
    (fewer distinct directions of variance) gets only the directions with variance, recorded in
    ``n_directions_``.

    Learned state, numpy arrays only: ``centroids_`` (c, d) the centres vectors are assigned by (k-means:
    the centroids of kmeans2's last assignment step, see :func:`_kmeans_points`; k-means++: scikit-learn's
    final centres; mixture: the component means), ``weights_`` (c,) and ``variances_`` (c, d) of the
    mixture (None for k-means), ``means_`` (c, d) the members' means, ``components_`` (c, n_directions, d)
    zero-padded orthonormal rows, ``n_directions_`` (c,) directions actually used, ``cluster_sizes_``
    (c,), ``dim_``.

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
        init: str = "points",
        seed: int = 0,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_directions = n_directions
        self.algorithm = algorithm
        self.init = init
        self.seed = seed

    def _cluster(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Cluster the fit vectors: ``(centroids, weights, variances)`` as in the learned state."""
        c = self.n_clusters
        if self.algorithm == "gmm":
            from sklearn.mixture import GaussianMixture

            gmm = GaussianMixture(n_components=c, covariance_type="diag", random_state=self.seed).fit(X)
            return (np.array(gmm.means_, dtype=np.float64), np.array(gmm.weights_, dtype=np.float64),
                    np.array(gmm.covariances_, dtype=np.float64))
        if self.init == "points":
            return _kmeans_points(X, c, self.seed), None, None
        from sklearn.cluster import KMeans

        # tol=0: always the 10 iterations, as kmeans2 (and no pass over X to scale a tolerance)
        km = KMeans(n_clusters=c, init="k-means++", n_init=1, max_iter=_KMEANS_ITER, tol=0.0,
                    random_state=self.seed).fit(X)
        return np.array(km.cluster_centers_, dtype=np.float64), None, None

    def check(self, dim: int | None = None) -> None:
        """n_clusters must be at least 1, the algorithm one of ``ALGORITHMS``, init one of ``INITS`` (and
        the default unless the algorithm is k-means), and n_directions between 0 and dim - 1 (removing
        every direction of a cluster's centred vectors leaves nothing)."""
        super().check(dim)
        if self.n_clusters < 1:
            self._refuse(f"n_clusters must be at least 1, got {self.n_clusters}")
        if self.algorithm not in ALGORITHMS:
            self._refuse(f"unknown algorithm {self.algorithm!r}; use one of {', '.join(ALGORITHMS)}")
        if self.init not in INITS:
            self._refuse(f"unknown init {self.init!r}; use one of {', '.join(INITS)}")
        if self.algorithm != "kmeans" and self.init != "points":
            self._refuse(f"init={self.init} seeds k-means; algorithm={self.algorithm} has no such choice")
        if self.n_directions < 0:
            self._refuse(f"n_directions must be at least 0 (directions removed per cluster), got {self.n_directions}")
        if dim is not None and self.n_directions >= dim:
            self._refuse(f"n_directions must be between 0 and {dim - 1} for {dim}-d vectors, got {self.n_directions} "
                         "(removing every direction leaves nothing)")

    def min_vectors(self, dim: int) -> int:
        """n_clusters * (n_directions + 1): every cluster estimates a mean and n_directions principal
        directions of its centred members, which span at most (members - 1) directions, so each cluster
        needs n_directions + 1 members (at least one, for its mean). :meth:`fit` checks the clusters it
        finds as well (:meth:`_check_cluster_sizes`)."""
        return self.n_clusters * (self.n_directions + 1)

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        k = self.n_directions
        why = f"{self.n_clusters} clusters of at least n_directions + 1 = {k + 1} vectors, for {k} directions each"
        return why, f" or fewer clusters/directions, e.g. {self._smaller(n)}" if n >= 1 else ""

    def _smaller(self, n: int) -> str:
        """A spec of this method whose clusters ``n`` vectors can fill: fewer clusters, else fewer directions."""
        k = self.n_directions
        clusters = n // (k + 1)
        return self._variant(clusters, k) if clusters >= 1 else self._variant(1, n - 1)

    def _variant(self, n_clusters: int, n_directions: int) -> str:
        """The spec ``cluster-pca-C-K`` with this method's other parameters (for the advice of a refusal)."""
        defaults = self.param_defaults()
        other = [f"{key}={value}" for key, value in self.get_params().items()
                 if key not in self.spec_args and value != defaults[key]]
        return "-".join([self.name, str(n_clusters), str(n_directions), *other])

    def _check_cluster_sizes(self, sizes: np.ndarray) -> None:
        """Refuse a clustering whose non-empty clusters with fewer than n_directions + 1 members (their
        centred members span fewer than n_directions directions) hold more than ``SMALL_SHARE`` of the
        vectors. Below that share, such a cluster is a handful of rare vectors (two word pieces of one
        rare word, on real token vectors): it gets the m - 1 directions its m members span, with a
        warning, recorded in ``n_directions_``. An empty cluster estimates nothing."""
        need = self.n_directions + 1
        small = np.flatnonzero((sizes > 0) & (sizes < need))
        if len(small) == 0:
            return
        j = int(small[np.argmin(sizes[small])])
        m, held, n = int(sizes[j]), int(sizes[small].sum()), int(sizes.sum())
        where = (f"after clustering, {len(small)} of {self.n_clusters} clusters have fewer than the "
                 f"n_directions + 1 = {need} members needed to estimate {self.n_directions} directions "
                 f"(smallest: cluster {j}, {m} members; together {held} of {n} vectors)")
        if held > SMALL_SHARE * n:
            self._refuse(f"{where}; use a larger fit corpus (--fit-corpus) or fewer clusters/directions, e.g. "
                         f"{self._variant(self.n_clusters, m - 1)} (the clustering does not depend on n_directions)")
        logger.warning("method %r: %s; they keep the directions their members span", self.spec, where)

    def fit(self, X: np.ndarray) -> ClusterPCA:
        X = self._check_fit_input(X)
        d = X.shape[1]
        centroids, weights, variances = self._cluster(X)
        labels = _assign(X, centroids, weights, variances)  # the clustering's labels, as transform assigns
        c, k = self.n_clusters, self.n_directions
        means = centroids.copy()
        components = np.zeros((c, k, d))
        used = np.zeros(c, dtype=int)
        sizes = np.bincount(labels, minlength=c)
        if not sizes.all():
            logger.warning("method %r: %d of %d clusters received no vector (fewer distinct vectors than clusters, "
                           "or initial centroids lost all their vectors)", self.spec, int((sizes == 0).sum()), c)
        self._check_cluster_sizes(sizes)
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
        self.centroids_, self.weights_, self.variances_ = centroids, weights, variances
        self.means_ = means
        self.components_ = components
        self.n_directions_ = used
        self.cluster_sizes_ = sizes
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The cluster index of each vector, shape ``(n,)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        return _assign(X, self.centroids_, self.weights_, self.variances_)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The post-processed vectors, float64, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        order, bounds = _group(_assign(X, self.centroids_, self.weights_, self.variances_), self.n_clusters)
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
