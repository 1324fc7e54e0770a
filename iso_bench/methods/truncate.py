"""``truncate``: the first k coordinates, what a Matryoshka model is trained for and what sentence-transformers'
``truncate_dim`` does."""

from __future__ import annotations

import numpy as np

from iso_bench.methods.base import Method, register


@register
class Truncate(Method):
    """Keep the first ``truncate_dim`` coordinates (all of them by default). Nothing to learn.

    Parameters:
        truncate_dim: the coordinates kept, from the first (``truncate-128``); ``None`` keeps all.

    Learned state: ``dim_`` (recorded by ``fit``). A cut keeps the values it keeps (``keeps_values``): a 16-bit
    model's truncated raw vectors are stored in 16 bits.

    Example:
        >>> Truncate(truncate_dim=2).transform(np.array([[1.0, 2.0, 3.0]])).tolist()
        [[1.0, 2.0]]
    """

    name = "truncate"
    order = 110
    spec_args = ("truncate_dim",)
    fitted = False
    keeps_values = True

    def __init__(self, *, truncate_dim: int | None = None) -> None:
        self.truncate_dim = truncate_dim

    def output_dim(self, dim: int) -> int:
        return dim if self.truncate_dim is None else min(dim, int(self.truncate_dim))

    def check(self, dim: int | None = None) -> None:
        """truncate_dim must be between 1 and ``dim``."""
        super().check(dim)
        if self.truncate_dim is not None and self.truncate_dim < 1:
            self._refuse(f"truncate_dim must be at least 1 (coordinates kept), got {self.truncate_dim}")
        if dim is not None and self.truncate_dim is not None and self.truncate_dim > dim:
            self._refuse(f"truncate_dim must be between 1 and {dim} for {dim}-d vectors, got {self.truncate_dim}")

    def fit(self, X: np.ndarray) -> Truncate:
        """Record the dimension (so later inputs are checked against it); returns ``self``."""
        X = self._check_fit_input(X)
        self.dim_ = X.shape[1]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The first ``truncate_dim`` columns of ``X``, a float64 copy."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        self.check(X.shape[1])
        return X[:, : self.output_dim(X.shape[1])].copy()

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(None, I[:, :k])``: the cut as a matrix (d, k); ``(None, None)`` for no cut."""
        dim = getattr(self, "dim_", None)
        if self.truncate_dim is None or dim is None:
            return None, None
        return None, np.eye(dim)[:, : self.output_dim(dim)]
