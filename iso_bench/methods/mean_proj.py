"""``mean-proj``: remove each vector's projection onto the mean direction (Ren, Sun & Liang, "Correcting Mean Bias
in Text Embeddings", 2025: their R2).

Every embedding is nearly e = ẽ + μ with μ the same for all texts. ``center`` (their R1) subtracts μ; ``mean-proj``
removes the component along μ̂ = μ/‖μ‖ instead, x -> x − (x·μ̂) μ̂, so an error in estimating μ's length does not
enter, and the vectors keep their spread orthogonal to μ. It equals ``abtt`` of depth 1 where the top principal
direction of the uncentred vectors is the mean direction, except that abtt also centres; the paper finds the two
within 0.18 points of each other. Where the model's outputs are unit vectors (every fit vector has norm 1), the
result is renormalised to unit length, as the model's own outputs are.
"""

from __future__ import annotations

import numpy as np

from iso_bench.methods.base import Method, MethodError, register
from iso_bench.methods.center import FitsAMean

UNIT_TOLERANCE = 1e-3  # a fit corpus whose norms all lie within this of 1 is a model's normalised output


@register
class MeanProj(FitsAMean, Method):
    """x -> x − (x·μ̂) μ̂ with μ̂ the unit mean direction of the fit vectors; renormalised where they are unit.

    Needs one fit vector whose mean is not zero.

    Learned state: ``direction_`` (dim,) μ̂, ``norm_`` ‖μ‖, ``unit_`` (whether the fit vectors are unit), ``dim_``.

    Example (by hand: μ = (1, 1), μ̂ = (1, 1)/√2, (2, 0) − √2 μ̂ = (1, −1)):
        >>> X = np.array([[2.0, 0.0], [0.0, 2.0]])
        >>> MeanProj().fit(X).transform(X).round(12).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """

    name = "mean-proj"
    order = 15
    streams = False  # the unit test reads every fit vector's norm; a huge corpus is fitted on a recorded sample

    def __init__(self) -> None:
        pass

    def fit(self, X: np.ndarray) -> MeanProj:
        X = self._check_fit_input(X)
        norms = np.linalg.norm(X, axis=1)
        self._set(X.mean(axis=0), bool(np.all(np.abs(norms - 1.0) <= UNIT_TOLERANCE)))
        return self

    def _set(self, mean: np.ndarray, unit: bool) -> None:
        norm = float(np.linalg.norm(mean))
        if not np.isfinite(norm) or norm == 0.0:
            raise MethodError(f"method {self.spec!r}: the fit vectors' mean is zero, so it has no direction; "
                              "fit on other texts (mean-proj needs vectors with a common offset)")
        self.dim_, self.direction_, self.norm_, self.unit_ = len(mean), mean / norm, norm, unit

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``X − (X μ̂) μ̂ᵀ`` as float64, shape ``(n, dim)``, unit rows where the fit vectors were unit."""
        self._check_fitted()
        X = self._check_input(X, fitting=False)
        Z = X - np.outer(X @ self.direction_, self.direction_)
        if self.unit_:
            Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
        return Z
