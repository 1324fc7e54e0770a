"""``cluster-pca``: cluster-based isotropy enhancement (Rajaee & Pilehvar, ACL 2021, arXiv 2106.01183).

Token vectors of a contextual model form clusters with their own dominant directions, so a single
global all-but-the-top misses them. Fit: cluster the vectors (k-means, or a Gaussian mixture), then
per cluster its mean and its top principal directions. Transform: assign each vector to its cluster,
subtract that cluster's mean, and remove the projections on that cluster's directions.

The authors' notebook: bert-base-uncased last layer, token level, 27 clusters, 12 directions per
cluster, clustered by scipy's ``kmeans2(X, 27, minit='points')``: k distinct fit vectors drawn at random
as the initial centroids, then its default 10 Lloyd iterations, a centroid that loses all its vectors
staying where it was. That is the default here: :func:`_kmeans_points` is that call, seeded (the same
initial points, iterations and labels), computed faster. ``cluster-pca-10-3`` is 10 clusters, 3
directions; ``cluster-pca-init=kmeanspp`` seeds k-means with k-means++ instead (scikit-learn's ``KMeans``,
the same 10 iterations); ``cluster-pca-algorithm=gmm`` uses a Gaussian mixture. scipy and scikit-learn
are imported where they are used. The fitted state is numpy arrays only.

Speed: a task's token vectors are many (75,000 x 384 on an STS task). float32 input stays float32 (no
230 MB float64 copy); each assignment is one matrix product in the input's precision, rows too close to
a tie for it decided by scipy's own ``vq`` in float64 (:func:`_closest`); the rows are gathered by
cluster once, and scatter matrices and their eigenvectors are in the input's precision (a cluster with fewer
members than dimensions: the eigenvectors of its members' float64 Gram matrix, :func:`_gram_directions`).
"""

from __future__ import annotations

import logging

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.linalg import fix_signs

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
_BLOCK = 512
"""Rows ``transform`` processes at a time: 768 KB of 384-d float32 rows stay in the CPU's cache (a third
faster than gathering all rows, updating them and scattering them back)."""
_COLUMNS = 512
"""Columns of float32 members cast to float64 at a time for their Gram matrix (12 MB for 3,000 members)."""
_GRAM_FLOOR = 1e-8
"""The smallest k-th variance, relative to the largest, left to a cluster's Gram matrix (its eigenvalues err
by about m u times the largest: under 1e-12 of it for m <= 4,096); below, the SVD (:func:`_gram_directions`)."""


def _rounding(dtype: np.dtype | type, d: int) -> float:
    """``2 (d + 4) u`` (u: the unit roundoff of ``dtype``); times ``(||x|| + max ||c||)**2``, twice a bound on
    the rounding error of ``||c||^2 - 2 x.c`` (or of vq's squared distance, ``||x||^2`` added) for d-d
    vectors in ``dtype`` and float64 centroids: the dot product errs by at most ``1.01 d u ||x|| ||c||`` in
    any summation order (BLAS blocking, FMA; ``d u < 0.01``), rounding the centroid and the sum add
    ``4u ||x|| ||c||``, the squared norms ``2u ||c||^2`` (``1.01 d u ||x||^2``): below
    ``(1.01 d + 2) u (||x|| + ||c||)**2``. The factor 2 covers the float64 arithmetic of gap and bound."""
    return (d + 4) * float(np.finfo(dtype).eps)  # eps = 2u


def _norms(X: np.ndarray) -> np.ndarray:
    """Norms of the rows, computed in X's dtype (the error is within :func:`_rounding`), as float64."""
    return np.sqrt(np.einsum("ij,ij->i", X, X).astype(np.float64))


def _closest(X: np.ndarray, centroids: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """The index of the nearest of the float64 ``centroids`` to each row of ``X`` (``norms``: the rows'
    norms), as scipy's ``vq``, kmeans2's assignment step, gives it on the rows' float64 values.

    vq computes in float64 (a float64 copy of all rows per call); here one matrix product in X's dtype
    gives ``D = ||c||^2 - 2 x.c`` (``||x||^2`` is the same for all centroids of a row) to within half of
    ``e = _rounding(X.dtype) * (||x|| + max ||c||)**2``. Where the second smallest D of a row exceeds its
    smallest by more than ``e`` and vq's own error bound, both pick the exact nearest centroid; the other
    rows, within rounding of a tie (0.3-0.7% of token vectors in float32), are decided by vq itself, on
    their float64 values: kmeans2's own arithmetic, the first centroid on a tie included."""
    d = X.shape[1]
    sq = np.einsum("ij,ij->i", centroids, centroids)
    D = X @ (-2.0 * centroids).astype(X.dtype).T  # -2 scales exactly
    D += sq.astype(X.dtype)
    rows = np.arange(len(X))
    labels = D.argmin(axis=1)
    first = D[rows, labels].astype(np.float64)
    D[rows, labels] = np.inf
    with np.errstate(invalid="ignore"):  # one centroid: inf - inf; overflow: NaN, decided by vq
        gap = D.min(axis=1).astype(np.float64) - first
        tied = np.flatnonzero(~(gap > (_rounding(X.dtype, d) + _rounding(np.float64, d))
                                * (norms + np.sqrt(sq.max())) ** 2))
    if len(tied):
        from scipy.cluster.vq import vq  # lazily: scipy is slow to import

        for start in range(0, len(tied), _BLOCK):  # bounded float64 copies, however many rows tie
            rows = tied[start : start + _BLOCK]
            labels[rows] = vq(X[rows].astype(np.float64), centroids, check_finite=False)[0]
    return labels


def _nearest(X: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The index of each row's nearest centroid (squared Euclidean distance, the first on a tie), as
    kmeans2 assigns (scipy's ``vq`` on float64 values; see :func:`_closest`)."""
    return _closest(X, centroids, _norms(X))


def _move(sums: np.ndarray, X: np.ndarray, rows: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
    """Move the float64 sums of ``X[rows]`` in ``sums`` from clusters ``old`` (-1: none) to ``new``: for
    each side the rows grouped by cluster, then per cluster one gather of its rows and one float64 sum (a
    cluster's rows at a time, never a copy of every row that moved: all of them in the first pass)."""
    for labels, sign in ((old, -1.0), (new, 1.0)):
        order, bounds = _group(labels[labels >= 0], len(sums))
        grouped = rows[labels >= 0][order]
        for j in np.flatnonzero(np.diff(bounds)):
            sums[j] += sign * X[grouped[bounds[j] : bounds[j + 1]]].sum(axis=0, dtype=np.float64)


def _kmeans_points(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``scipy.cluster.vq.kmeans2(X, k, minit='points')`` seeded by ``numpy.random.default_rng(seed)``:
    ``(centroids, labels)``, kmeans2's returned labels and the centroids they were assigned by.

    kmeans2 draws its initial points as scipy's ``_kpoints`` does, ``rng.choice(n, k, replace=False)``
    (the same draw here), then ``_KMEANS_ITER`` times assigns every row to its nearest centroid
    (:func:`_closest`) and moves each centroid to the float64 mean of its rows, one without rows staying
    where it was. It returns the last labels and the centroids updated after them (their rows' means,
    ``means_``); the centroids returned here are those of its last assignment, by which :func:`_nearest`
    gives the same labels in ``transform``. The float64 sums of the clusters are updated by the rows that
    change cluster (all in the first pass, a tenth to a quarter later): they may differ from kmeans2's
    sequential sums in the last bits, and so may a label whose two nearest centroids tie to within that.
    """
    n, d = X.shape
    centroids = X[np.random.default_rng(seed).choice(n, size=k, replace=False)].astype(np.float64)
    norms = _norms(X)
    labels = np.full(n, -1, dtype=np.intp)
    sums = np.zeros((k, d))
    for _ in range(_KMEANS_ITER - 1):
        new = _closest(X, centroids, norms)
        changed = np.flatnonzero(new != labels)
        _move(sums, X, changed, labels[changed], new[changed])
        labels = new
        counts = np.bincount(labels, minlength=k)
        centroids = np.where((counts > 0)[:, None], sums / np.maximum(counts, 1)[:, None], centroids)
    return centroids, _closest(X, centroids, norms)


def _gmm_log_prob(X: np.ndarray, weights: np.ndarray, means: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """log(weight_j) + log N(x; mean_j, diag(variances_j)) for every row and component, shape ``(n, c)``:
    what scikit-learn's diagonal ``GaussianMixture.predict`` maximises."""
    X = X.astype(np.float64, copy=False)
    precision = 1.0 / variances
    # X @ (2 A): (2 X) @ A to the last bit (2 scales exactly), without an n x d temporary
    sq = (X * X) @ precision.T - X @ (2.0 * (means * precision)).T + ((means * means) * precision).sum(axis=1)
    return np.log(weights) - 0.5 * (np.log(2.0 * np.pi * variances).sum(axis=1) + sq)


def _assign(X: np.ndarray, centroids: np.ndarray, weights: np.ndarray | None,
            variances: np.ndarray | None) -> np.ndarray:
    """The cluster of each row: the nearest centroid (k-means), or the most probable component of the
    mixture with ``weights`` and diagonal ``variances`` (Gaussian mixture)."""
    if weights is None or variances is None:
        return _nearest(X, centroids)
    return np.argmax(_gmm_log_prob(X, weights, centroids, variances), axis=1)


def _directions(members: np.ndarray, k: int) -> np.ndarray:
    """Top-``k`` principal directions (rows, float64) of centred ``members``, largest entry made positive.

    More members than dimensions: the top eigenvectors of the d x d scatter matrix (O(m d^2), then only k
    of the d eigenpairs), computed in the members' dtype: float32 halves the time of both, and the
    subspaces agree with float64 ones to within 5e-6 on MiniLM token vectors (sine of the largest principal
    angle; benchmarks/bench_cluster_pca.py prints it). Otherwise the smaller m x m float64 Gram matrix
    (:func:`_gram_directions`), or the float64 SVD of the members where that cannot resolve them."""
    m, d = members.shape
    if m > d:
        from scipy.linalg import eigh  # lazily: scipy is slow to import

        vals, vecs = eigh(members.T @ members, subset_by_index=[d - k, d - 1], overwrite_a=True, check_finite=False)
        sv, vt = np.sqrt(np.clip(vals[::-1], 0.0, None)), vecs[:, ::-1].T.astype(np.float64)
    elif (found := _gram_directions(members, k)) is not None:
        sv, vt = found
    else:
        _, sv, vt = np.linalg.svd(members.astype(np.float64), full_matrices=False)
    return fix_signs(vt[:k][sv[:k] > 1e-12 * sv[0]])  # drop directions without variance (duplicate members)


def _gram_directions(members: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(singular values, directions)``: the top ``k`` of m <= d centred ``members`` from their float64
    Gram matrix ``G = M M^T = U S^2 U^T`` (k of its m eigenpairs), ``v = M^T u / ||M^T u||``: the SVD's
    directions, to rounding, in a tenth of its time at 2,500 x 4,096. float32 members are cast ``_COLUMNS``
    columns at a time. None where the k-th variance is under ``_GRAM_FLOOR`` of the largest: G, which
    squares the spread of the singular values, cannot tell a small variance from none (repeated members)."""
    from scipy.linalg import eigh  # lazily: scipy is slow to import
    from scipy.linalg.blas import get_blas_funcs

    m, d = members.shape
    step = d if members.dtype == np.float64 else _COLUMNS
    G = np.zeros((m, m), order="F")
    syrk = get_blas_funcs("syrk", (G,))
    for start in range(0, d, step):  # G += B B^T; BLAS sees the C-ordered B as B^T, Fortran-ordered
        B = members[:, start : start + step].astype(np.float64, copy=False)
        G = syrk(1.0, B.T, beta=1.0, c=G, trans=1, lower=1, overwrite_c=1)
    vals, U = eigh(G, lower=True, subset_by_index=[m - k, m - 1], overwrite_a=True, check_finite=False)
    if not vals[0] > _GRAM_FLOOR * vals[-1]:
        return None
    vt = np.empty((k, d))
    for start in range(0, d, step):
        vt[:, start : start + step] = U[:, ::-1].T @ members[:, start : start + step].astype(np.float64, copy=False)
    return np.sqrt(vals[::-1]), vt / np.linalg.norm(vt, axis=1, keepdims=True)


def _group(labels: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """``order`` that sorts the rows by cluster, and ``bounds`` such that cluster j is rows
    ``order[bounds[j]:bounds[j + 1]]``: one gather makes every cluster a contiguous slice (a boolean
    mask per cluster would copy the whole matrix once per cluster). Labels below 256 sort as bytes (a
    radix sort, ten times faster than on 64-bit integers)."""
    order = np.argsort(labels.astype(np.min_scalar_type(max(c - 1, 0))), kind="stable")
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
    labels), and ``transform`` assigns every vector, new or not, the same way: to the nearest of
    ``centroids_`` for k-means, to the most probable component for the mixture. A fit vector therefore
    keeps its cluster in ``transform``.

    Precision: float32 input (the encoder's raw vectors) is processed as float32, never copied to float64,
    with float64 centroids, sums and means (see :func:`_directions`); other input as float64. Assignment
    is exact either way (:func:`_closest`).

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

    def _cluster(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]:
        """Cluster the fit vectors: ``(centroids, weights, variances)`` as in the learned state, and the
        labels of the fit vectors (as :func:`_assign` gives them). scikit-learn gets float64 vectors, so
        that its clusterings do not depend on the input's precision."""
        c = self.n_clusters
        if self.algorithm == "kmeans" and self.init == "points":
            centroids, labels = _kmeans_points(X, c, self.seed)
            return centroids, None, None, labels
        X64 = X.astype(np.float64, copy=False)
        if self.algorithm == "gmm":
            from sklearn.mixture import GaussianMixture  # lazily: scikit-learn is slow to import

            gmm = GaussianMixture(n_components=c, covariance_type="diag", random_state=self.seed).fit(X64)
            weights, variances = np.array(gmm.weights_, dtype=np.float64), np.array(gmm.covariances_, dtype=np.float64)
            centroids = np.array(gmm.means_, dtype=np.float64)
            return centroids, weights, variances, _assign(X64, centroids, weights, variances)
        from sklearn.cluster import KMeans  # lazily: scikit-learn is slow to import

        # tol=0: always the 10 iterations, as kmeans2 (and no pass over X to scale a tolerance); our own
        # float64 copy may be centred in place (copy_x=False: the same arithmetic, without a second copy)
        km = KMeans(n_clusters=c, init="k-means++", n_init=1, max_iter=_KMEANS_ITER, tol=0.0,
                    random_state=self.seed, copy_x=X64 is X).fit(X64)
        centroids = np.array(km.cluster_centers_, dtype=np.float64)
        return centroids, None, None, _nearest(X, centroids)

    def _check_input(self, X: np.ndarray, *, fitting: bool, float64: bool = False) -> np.ndarray:
        """:meth:`Method._check_input` with ``float64=False`` always (for fit and transform alike): float32 input
        stays float32 (a float64 copy of a task's token vectors is 230 MB), float64 stays float64."""
        return super()._check_input(X, fitting=fitting, float64=False)

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
        logger.warning("%s: %s; they keep the directions their members span", self.who(), where)

    def fit(self, X: np.ndarray) -> ClusterPCA:
        X = self._check_fit_input(X)
        d = X.shape[1]
        centroids, weights, variances, labels = self._cluster(X)  # the labels as transform assigns
        c, k = self.n_clusters, self.n_directions
        means = centroids.copy()
        components = np.zeros((c, k, d))
        used = np.zeros(c, dtype=int)
        sizes = np.bincount(labels, minlength=c)
        if not sizes.all():
            logger.warning("%s: %d of %d clusters received no vector (fewer distinct vectors than clusters, "
                           "or initial centroids lost all their vectors)", self.who(), int((sizes == 0).sum()), c)
        self._check_cluster_sizes(sizes)
        order, bounds = _group(labels, c)
        grouped = X[order]  # the one copy of the fit vectors: by cluster, then centred in place
        for j in range(c):
            members = grouped[bounds[j] : bounds[j + 1]]
            if len(members) == 0:
                continue
            means[j] = members.sum(axis=0, dtype=np.float64) / len(members)  # kmeans2's sums, in its order
            if k and len(members) > 1:
                members -= means[j].astype(members.dtype)
                comps = _directions(members, min(k, len(members) - 1))
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
        """The post-processed vectors, shape ``(n, dim)``, in the input's precision: float32 for float32
        input (the encoder casts to float32 after pooling anyway; float32 arithmetic moves an entry by up to
        about 1e-6 of the vector's norm), float64 otherwise. Each cluster's rows are gathered ``_BLOCK`` at a
        time, centred, projected and written to their places in the output while in the CPU's cache."""
        from scipy.linalg.blas import get_blas_funcs  # lazily: scipy is slow to import

        self._check_fitted()
        X = self._check_input(X, fitting=False)
        order, bounds = _group(_assign(X, self.centroids_, self.weights_, self.variances_), self.n_clusters)
        out = np.empty_like(X)
        gemm = get_blas_funcs("gemm", (X,))
        for j in range(self.n_clusters):
            # Y - m - ((Y - m) C^T) C = Y - [Y C^T, 1] [C; m - (m C^T) C]: one product, no centred copy
            C, mean = self.components_[j, : self.n_directions_[j]], self.means_[j]
            B = np.vstack([C, mean - (mean @ C.T) @ C]).astype(X.dtype)
            for start in range(bounds[j], bounds[j + 1], _BLOCK):
                rows = order[start : min(start + _BLOCK, bounds[j + 1])]
                Y = X[rows]
                T = np.ones((len(Y), len(B)), dtype=X.dtype)
                np.matmul(Y, B[:-1].T, out=T[:, :-1])
                # BLAS sees C-ordered Y as its Fortran-ordered transpose: updated in place (beta = 1)
                Yt = gemm(-1.0, B.T, T.T, beta=1.0, c=Y.T, overwrite_c=True)
                out[rows] = Yt.T
        return out
