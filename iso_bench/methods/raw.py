"""``raw``: the identity, the baseline every other method is compared with."""

from __future__ import annotations

import numpy as np

from iso_bench.methods.base import Method, register


@register
class Raw(Method):
    """Return the vectors unchanged (as float64). Nothing to learn, so ``transform`` works unfitted.

    Example:
        >>> Raw().transform(np.ones((2, 3))).shape
        (2, 3)
    """

    name = "raw"
    order = 0
    fitted = False
    keeps_values = True  # a 16-bit model's raw vectors stay 16-bit numbers (2 bytes a dimension as stored)

    def __init__(self) -> None:
        pass

    def fit(self, X: np.ndarray) -> Raw:
        """Record the dimension (so later inputs are checked against it); returns ``self``."""
        X = self._check_fit_input(X)
        self.dim_ = X.shape[1]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """A float64 copy of ``X``, shape ``(n, dim)``."""
        self._check_fitted()
        return self._check_input(X, fitting=False, float64=False).astype(np.float64)  # one copy

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(None, None)``: the identity."""
        return None, None
