"""``center``: subtract the mean of the fit corpus (Mu & Viswanath 2018, step 1 of all-but-the-top)."""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register


class FitsAMean:
    """What a method whose fit is the mean of its fit vectors (center, mean-proj) says when it has too few: it
    needs one (Method's own :meth:`~Method.min_vectors`), since the mean of one vector is that vector."""

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        return "a mean needs one vector", ""


@register
class Center(FitsAMean, Method):
    """x -> x - mu, with mu the mean of the fit vectors.

    Needs one fit vector (:meth:`min_vectors`): the mean of one vector is that vector.

    Learned state: ``mean_`` (dim,), ``dim_``.

    Example:
        >>> X = np.array([[1.0, 2.0], [3.0, 6.0]])
        >>> Center().fit(X).transform(X).tolist()
        [[-1.0, -2.0], [1.0, 2.0]]
    """

    name = "center"
    order = 10
    streams = True

    def __init__(self) -> None:
        pass

    def fit(self, X: np.ndarray) -> Center:
        X = self._check_fit_input(X)
        self.dim_ = X.shape[1]
        self.mean_ = X.mean(axis=0)
        return self

    def _from_moments(self, moments: Any) -> None:
        self.dim_, self.mean_ = len(moments.mean), moments.mean.copy()

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``X - mean_`` as float64, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False)
        return X - self.mean_  # one float64 copy

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(mean_, None)``: x -> x - mean_."""
        self._check_fitted()
        return self.mean_, None
