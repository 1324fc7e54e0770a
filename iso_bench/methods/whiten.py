"""``whiten``: BERT-whitening (Su et al. 2021, arXiv 2103.15316).

x -> (x - mu) U Lambda^(-1/2), with Sigma = U Lambda U^T the covariance of the fit vectors (ddof=1,
as ``np.cov`` in the authors' code), eigenvalues in decreasing order. ``whiten-256`` keeps the first
256 columns (the dimension reduction of the paper's "whitening-256").
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.linalg import fix_signs, gram, matmul

logger = logging.getLogger(__name__)

_RANK_TOL = 1e-10
"""A kept eigenvalue below ``_RANK_TOL`` times the largest counts as zero (singular covariance)."""


@register
class Whiten(Method):
    """Whitening: the transformed fit vectors have mean 0 and identity covariance.

    Parameters:
        n_components: keep the first k whitened columns (largest variance first); ``None`` keeps all.
        eps: regulariser added to every eigenvalue, ``Lambda + eps``. With ``eps=0`` (default, the
            paper's transform) a singular covariance is refused; see below.

    When is the covariance singular? n centred vectors span at most n - 1 dimensions, so with
    ``n_vectors <= k`` (k = n_components, or dim) some kept eigenvalue is zero and whitening would divide
    by it (that direction, scaled by ~1/0, then dominates every vector and I(W) collapses to 0). With
    ``eps == 0`` :meth:`fit` refuses fewer than k + 1 vectors (:meth:`min_vectors`) with a
    :class:`MethodError` naming the fixes: more fit vectors, ``whiten-k`` with ``k < n_vectors``, or
    ``eps > 0``. When there are enough vectors but some directions have no variance at all (an
    eigenvalue below 1e-10 of the largest: constant or linearly dependent dimensions, as the three dead
    coordinates of all-MiniLM-L6-v2), plain ``whiten`` whitens the subspace that has variance and records
    the number of dropped directions in ``dropped_``; an explicit ``whiten-k`` that would need such a
    direction is refused. With ``eps > 0`` the fit succeeds from two vectors on.

    Learned state: ``mean_`` (d,), ``W_`` (d, k), ``eigenvalues_`` (all d, decreasing),
    ``n_components_`` (k), ``dropped_`` (directions without variance left out), ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(500, 8)) @ np.diag([1, 2, 3, 4, 5, 6, 7, 8])
        >>> Z = Whiten(n_components=4).fit(X).transform(X)
        >>> Z.shape, bool(np.allclose(np.cov(Z, rowvar=False), np.eye(4)))
        ((500, 4), True)
    """

    name = "whiten"
    order = 40
    model_space = False  # principal coordinates (model_coordinates maps them back)
    spec_args = ("n_components",)
    streams, scatter = True, True

    def __init__(self, *, n_components: int | None = None, eps: float = 0.0) -> None:
        self.n_components = n_components
        self.eps = eps

    def output_dim(self, dim: int) -> int:
        return min(dim, self.n_components) if self.n_components is not None else dim

    def _kept(self, dim: int) -> int:
        """k: the whitened columns kept of ``dim``-d vectors (all of them by default)."""
        return dim if self.n_components is None else int(self.n_components)

    def check(self, dim: int | None = None) -> None:
        """n_components must be between 1 and ``dim`` (whitening cannot make more columns than the
        input has); eps must be >= 0."""
        super().check(dim)
        if self.n_components is not None and self.n_components < 1:
            self._refuse(f"n_components must be at least 1 (whitened columns kept), got {self.n_components}")
        if self.eps < 0:
            self._refuse(f"eps must be >= 0 (0 = the paper's transform), got {self.eps}")
        if dim is not None and self._kept(dim) > dim:
            self._refuse(f"n_components must be between 1 and {dim} for {dim}-d vectors, got {self.n_components}")

    def min_vectors(self, dim: int) -> int:
        """k + 1 with ``eps == 0`` (k = n_components, or dim): the covariance of n centred vectors has rank
        at most n - 1, so with n <= k a kept eigenvalue is zero and whitening would divide by it. With
        ``eps > 0`` the regularised eigenvalues are positive whatever the rank, and 2 vectors suffice for
        the covariance (ddof=1)."""
        return 2 if self.eps > 0 else self._kept(dim) + 1

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        if self.eps > 0:
            return "a covariance (ddof=1) needs two vectors", ""
        k = self._kept(dim)
        why = (f"the covariance of {n} centred vectors has rank <= {max(n - 1, 0)}, so whitening to {k} "
               "dimensions would find it singular")
        fewer = f", keep fewer columns (whiten-{n - 1})" if n >= 2 else ""
        return why, f"{fewer} or regularise (whiten-eps=0.001)"

    def fit(self, X: np.ndarray) -> Whiten:
        X = self._check_fit_input(X)
        n, d = X.shape
        mean = X.mean(axis=0)
        Xc = X - mean
        self._whiten(mean, gram(Xc, self.device) / (n - 1))
        return self

    def _from_moments(self, moments: Any) -> None:
        self._whiten(moments.mean.copy(), moments.scatter / (moments.n - 1))

    def _whiten(self, mean: np.ndarray, cov: np.ndarray) -> None:
        """The learned state from the fit vectors' mean and covariance (ddof=1)."""
        d = len(mean)
        k = self._kept(d)
        vals, vecs = np.linalg.eigh(cov)
        # reproducible signs: the largest-magnitude entry of each eigenvector (a column) is positive
        vals, vecs = np.clip(vals[::-1], 0.0, None), fix_signs(vecs[:, ::-1], axis=1)
        tol = _RANK_TOL * max(vals[0], np.finfo(float).tiny)
        rank = int((vals > tol).sum())
        if self.eps == 0 and rank < k:
            if self.n_components is not None:
                self._refuse(
                    f"the covariance of the fit vectors has numerical rank {rank} < {k} (constant or linearly "
                    "dependent dimensions), so whitening would divide by zero; "
                    f"keep fewer columns (whiten-{max(1, rank)}) or regularise (whiten-eps=0.001)"
                )
            # n > d, yet some directions carry no variance at all (a model's dead dimensions, e.g. three
            # constant coordinates of all-MiniLM-L6-v2): they hold no information, so whiten the subspace
            # that has variance (the pseudo-inverse square root) and record what was dropped.
            logger.warning("%s: %d of %d directions have no variance and are dropped", self.who(), d - rank, d)
            k = rank
        kept = vals[:k] + self.eps
        self.dim_ = d
        self.mean_ = mean
        self.eigenvalues_ = vals
        self.W_ = vecs[:, :k] / np.sqrt(kept)
        self.n_components_ = k
        self.dropped_ = d - k if self.n_components is None else 0

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``(X - mean_) @ W_`` as float64, shape ``(n, n_components_)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False)  # X - mean_: its one float64 copy
        return matmul(X - self.mean_, self.W_, self.device)

    def model_coordinates(self, X: np.ndarray) -> np.ndarray:
        """:meth:`transform` mapped back into the input's coordinates, ``(X - mean_) U_k Lambda_k^(-1/2) U_k^T``
        (width d; the same cosines as :meth:`transform`): what a token-level variant hands the model's pooling
        and head, which read the model's coordinates, not principal ones. Where k > d / 2 that is one product with
        the d x d map ``W_ U_k^T``, computed once per fit (fewer multiply-adds than two products of k columns)."""
        self._check_fitted()
        d, k = self.W_.shape
        if 2 * k <= d:
            return matmul(self.transform(X), self._directions().T, self.device)
        back = self._per_fit("_back", self.W_, lambda: matmul(self.W_, self._directions().T, self.device))
        X = self._check_input(X, fitting=False, float64=False)
        return matmul(X - self.mean_, back, self.device)

    def _directions(self) -> np.ndarray:
        """U_k: ``W_ = U_k Lambda_k^-1/2``, its columns made unit length."""
        return self.W_ / np.linalg.norm(self.W_, axis=0)

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(mean_, W_)`` (zca and zipfian-whiten too: their ``W_`` is their map)."""
        self._check_fitted()
        return self.mean_, self.W_
