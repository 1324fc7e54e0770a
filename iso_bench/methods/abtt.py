"""``abtt``: all-but-the-top (Mu & Viswanath, ICLR 2018).

Subtract the mean, then remove the projections on the top D principal directions, which carry
common, non-semantic information (frequency, position). The paper's rule of thumb is D ~ d/100.
``abtt-7`` removes 7 directions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.linalg import fix_signs, gram


def _top_directions(Xc: np.ndarray, k: int, device: str | None = None) -> np.ndarray:
    """The top-``k`` principal directions of centred ``Xc`` as rows (k, d), orthonormal.

    Uses the eigenvectors of the d x d scatter matrix when n >= d (cheap for many vectors), else an
    SVD of ``Xc``. Signs are fixed (largest-magnitude entry positive) so results are reproducible.
    """
    n, d = Xc.shape
    if n >= d:
        _, vecs = np.linalg.eigh(gram(Xc, device))
        comps = vecs[:, ::-1][:, :k].T
    else:
        _, _, vt = np.linalg.svd(Xc, full_matrices=False)
        comps = vt[:k]
    return fix_signs(comps)


@register
class Abtt(Method):
    """x -> (x - mu) - sum_i (u_i . (x - mu)) u_i over the top ``n_components`` directions u_i.

    Parameters:
        n_components: number of directions D removed; ``None`` (default) resolves at fit time to
            ``max(1, round(d / 100))`` (the paper's d/100: 8 for 768-d BERT). Between 1 and d - 1.

    Fitting D directions needs D + 1 vectors (:meth:`min_vectors`).

    Learned state: ``mean_`` (d,), ``components_`` (D, d) orthonormal rows, ``n_components_`` (D),
    ``dim_``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(200, 10))
        >>> m = Abtt(n_components=2).fit(X)
        >>> float(np.abs(m.transform(X) @ m.components_.T).max()) < 1e-10
        True
    """

    name = "abtt"
    order = 30
    spec_args = ("n_components",)
    streams, scatter = True, True

    def __init__(self, *, n_components: int | None = None) -> None:
        self.n_components = n_components

    def _resolved(self, dim: int) -> int:
        """The number of directions removed from ``dim``-d vectors (``None`` -> round(d / 100), at least 1)."""
        return max(1, round(dim / 100)) if self.n_components is None else int(self.n_components)

    def check(self, dim: int | None = None) -> None:
        """n_components must be at least 1 and, on ``dim``-d vectors, at most dim - 1: removing all
        ``dim`` directions of centred vectors would leave nothing (so 1-d vectors are refused)."""
        super().check(dim)
        if self.n_components is not None and self.n_components < 1:
            self._refuse(f"n_components must be at least 1 (directions removed), got {self.n_components}")
        if dim is None:
            return
        if dim < 2:
            self._refuse(f"needs vectors of at least 2 dimensions (removing a direction from {dim}-d vectors "
                         "leaves nothing)")
        k = self._resolved(dim)
        if k >= dim:
            self._refuse(f"n_components must be between 1 and {dim - 1} for {dim}-d vectors, got {k} "
                         f"(removing all {dim} directions leaves nothing)")

    def min_vectors(self, dim: int) -> int:
        """D + 1 for D directions: n centred vectors sum to zero, so they span at most n - 1 directions,
        and the top D principal directions exist only from D + 1 vectors on."""
        return self._resolved(dim) + 1

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        k = self._resolved(dim)
        why = f"{n} centred vectors span at most {max(n - 1, 0)} directions, and {k} are removed"
        return why, f" or fewer directions, e.g. abtt-{n - 1}" if n >= 2 else ""

    def fit(self, X: np.ndarray) -> Abtt:
        X = self._check_fit_input(X)
        k = self._resolved(X.shape[1])
        self.dim_ = X.shape[1]
        self.mean_ = X.mean(axis=0)
        self.components_ = _top_directions(X - self.mean_, k, self.device)
        self.n_components_ = k
        return self

    def _from_moments(self, moments: Any) -> None:
        """The top directions from the accumulated scatter matrix (its eigenvectors, as :func:`_top_directions`
        takes them when there are at least as many vectors as dimensions)."""
        d = len(moments.mean)
        k = self._resolved(d)
        _, vecs = np.linalg.eigh(moments.scatter)
        self.dim_, self.mean_, self.n_components_ = d, moments.mean.copy(), k
        self.components_ = fix_signs(vecs[:, ::-1][:, :k].T)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The post-processed vectors, float64, shape ``(n, dim)``."""
        self._check_fitted()
        Xc = self._check_input(X, fitting=False, float64=False) - self.mean_  # one float64 copy
        return Xc - (Xc @ self.components_.T) @ self.components_

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(mean_, I - components_^T components_)``: centring, then the projection off the removed directions."""
        self._check_fitted()
        return self.mean_, np.eye(self.dim_) - self.components_.T @ self.components_
