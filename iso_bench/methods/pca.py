"""``pca``: centre, then project on the top k principal directions of the fit vectors (no rescaling: whitening's
``whiten-k`` divides by each direction's standard deviation, PCA does not)."""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.linalg import fix_signs, gram, matmul


@register
class PCA(Method):
    """x -> (x - mu) U_k, with U_k the k eigenvectors of the fit vectors' covariance of largest eigenvalue.

    Parameters:
        n_components: the principal directions kept (``pca-128``); ``None`` keeps all (a rotation of the centred
            vectors: cosine changes only by the centring).

    Needs two fit vectors (:meth:`min_vectors`, a covariance with ddof=1). Directions without variance are kept
    as they come (the projection on them is constant), nothing is divided by an eigenvalue. The sign of each
    direction is fixed (its largest-magnitude entry positive), so a fit is reproducible. Streams (partial_fit).

    Learned state: ``mean_`` (d,), ``components_`` (d, k), ``explained_variance_`` (k,), ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [3.0, 1.0, 0.1]
        >>> m = PCA(n_components=1).fit(X)
        >>> m.transform(X).shape, bool(abs(m.components_[0, 0]) > 0.99)
        ((200, 1), True)
    """

    name = "pca"
    order = 120
    model_space = False  # principal coordinates
    spec_args = ("n_components",)
    streams, scatter = True, True

    def __init__(self, *, n_components: int | None = None) -> None:
        self.n_components = n_components

    def output_dim(self, dim: int) -> int:
        return dim if self.n_components is None else min(dim, int(self.n_components))

    def check(self, dim: int | None = None) -> None:
        """n_components must be between 1 and ``dim`` (no more principal directions than dimensions)."""
        super().check(dim)
        if self.n_components is not None and self.n_components < 1:
            self._refuse(f"n_components must be at least 1 (principal directions kept), got {self.n_components}")
        if dim is not None and self.n_components is not None and self.n_components > dim:
            self._refuse(f"n_components must be between 1 and {dim} for {dim}-d vectors, got {self.n_components}")

    def min_vectors(self, dim: int) -> int:
        """Two: the covariance (ddof=1) of one vector does not exist."""
        return 2

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        return "a covariance (ddof=1) needs two vectors", ""

    def fit(self, X: np.ndarray) -> PCA:
        X = self._check_fit_input(X)
        mean = X.mean(axis=0)
        self._project(mean, gram(X - mean, self.device) / (len(X) - 1))
        return self

    def _from_moments(self, moments: Any) -> None:
        self._project(moments.mean.copy(), moments.scatter / (moments.n - 1))

    def _project(self, mean: np.ndarray, cov: np.ndarray) -> None:
        vals, vecs = np.linalg.eigh(cov)
        k = self.output_dim(len(mean))
        vals, vecs = np.clip(vals[::-1], 0.0, None), fix_signs(vecs[:, ::-1], axis=1)
        self.dim_, self.mean_ = len(mean), mean
        self.components_, self.explained_variance_ = vecs[:, :k], vals[:k]

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``(X - mean_) @ components_`` as float64, shape ``(n, k)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False)
        return matmul(X - self.mean_, self.components_, self.device)

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(mean_, components_)``."""
        self._check_fitted()
        return self.mean_, self.components_
