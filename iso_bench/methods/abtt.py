"""``abtt``: all-but-the-top (Mu & Viswanath, ICLR 2018).

Subtract the mean, then remove the projections on the top D principal directions, which carry
common, non-semantic information (frequency, position). The paper's rule of thumb is D ~ d/100.
``abtt-7`` removes 7 directions.
"""

from __future__ import annotations

import numpy as np

from iso_bench.linalg import fix_signs
from iso_bench.methods.base import Method, MethodError, register


def _top_directions(Xc: np.ndarray, k: int) -> np.ndarray:
    """The top-``k`` principal directions of centred ``Xc`` as rows (k, d), orthonormal.

    Uses the eigenvectors of the d x d scatter matrix when n >= d (cheap for many vectors), else an
    SVD of ``Xc``. Signs are fixed (largest-magnitude entry positive) so results are reproducible.
    """
    n, d = Xc.shape
    if n >= d:
        _, vecs = np.linalg.eigh(Xc.T @ Xc)
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
            ``max(1, round(d / 100))`` (the paper's d/100: 8 for 768-d BERT).

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

    def __init__(self, *, n_components: int | None = None) -> None:
        self.n_components = n_components

    def fit(self, X: np.ndarray) -> Abtt:
        X = self._check_input(X, fitting=True, min_rows=2)
        n, d = X.shape
        k = max(1, round(d / 100)) if self.n_components is None else int(self.n_components)
        if k < 1 or k >= d or k > n - 1:
            raise MethodError(
                f"method {self.spec!r}: cannot remove {k} directions from {n} centred {d}-d vectors "
                f"(need 1 <= n_components < dim and n_components <= n_vectors - 1 = {n - 1}); "
                "use a smaller n_components or a larger fit corpus"
            )
        self.dim_ = d
        self.mean_ = X.mean(axis=0)
        self.components_ = _top_directions(X - self.mean_, k)
        self.n_components_ = k
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The post-processed vectors, float64, shape ``(n, dim)``."""
        self._check_fitted()
        Xc = self._check_input(X, fitting=False) - self.mean_
        return Xc - (Xc @ self.components_.T) @ self.components_
