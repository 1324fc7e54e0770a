"""``clip`` ("cut the tails"): zero the outlier dimensions (Luo 2020; Luo, Kulmizev & Mao, ACL 2021).

The outlier dimensions are detected from the fit corpus with :func:`iso_bench.numerics.outliers.detect_outliers`
(never hard-coded: they differ between checkpoints of the "same" model), or given explicitly:
``clip-dims=308,381`` (or positionally, ``clip-308,381``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.outliers import (
    DEFAULT_MIN_Z,
    default_min_fraction,
    detect_outliers,
    outlier_stats,
    stats_from_moments,
)


def _normalise_dims(dims: int | Iterable[int] | None) -> tuple[int, ...] | None:
    if dims is None:
        return None
    if isinstance(dims, (int, np.integer)):
        return (int(dims),)
    return tuple(int(d) for d in dims)


@register
class Clip(Method):
    """Set the outlier coordinates to 0.

    Parameters:
        dims: explicit dimensions to zero; ``None`` (default) detects them on the fit data. An int
            or any iterable of ints is accepted and stored as a tuple (so a spec round-trips).
        min_fraction, min_z: detection thresholds passed to
            :func:`~iso_bench.numerics.outliers.detect_outliers` (``None`` = its documented default,
            ``min(0.5, max(10/d, 0.05))``; ``min_z`` 3 leave-one-out standard deviations).

    Detection needs enough fit vectors that a single vector cannot make a dimension an outlier
    (:meth:`min_vectors`: 21 for 384-d vectors); explicit dims need one.

    Learned state: ``dims_`` (sorted tuple, possibly empty: then clip is the identity, and says so
    in ``dims_``), ``stats_`` (the :class:`~iso_bench.numerics.outliers.OutlierStats` used for detection,
    ``None`` when ``dims`` was explicit), ``dim_``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(300, 16)); X[:, 3] += 8.0
        >>> Clip().fit(X).dims_
        (3,)
        >>> bool(Clip(dims=(0, 1)).fit(X).transform(X)[:, :2].any())
        False
    """

    name = "clip"
    order = 20
    streams = True  # detection reads per-dimension counts, means and deviations: they accumulate batch by batch
    extremes = True
    spec_args = ("dims",)

    def __init__(
        self,
        *,
        dims: tuple[int, ...] | None = None,
        min_fraction: float | None = None,
        min_z: float = DEFAULT_MIN_Z,
    ) -> None:
        self.dims = _normalise_dims(dims)
        self.min_fraction = min_fraction
        self.min_z = min_z

    def _min_fraction(self, dim: int) -> float:
        return default_min_fraction(dim) if self.min_fraction is None else float(self.min_fraction)

    def check(self, dim: int | None = None) -> None:
        """Explicit dims must be coordinates of the input, 0 .. dim - 1; detection needs dim >= 3 (each
        dimension's mean is measured against the spread of the others' means), 0 < min_fraction <= 1
        and min_z >= 0."""
        super().check(dim)
        if self.dims is not None:
            negative = [j for j in self.dims if j < 0]
            if negative:
                self._refuse(f"dimensions {negative} are negative; dims are coordinate indices, counted from 0")
            bad = [j for j in self.dims if dim is not None and j >= dim]
            if bad:
                self._refuse(f"dimensions {bad} are out of range for {dim}-d vectors: dims run 0..{dim - 1}")
            return
        if self.min_fraction is not None and not 0.0 < self.min_fraction <= 1.0:
            self._refuse(f"min_fraction must be in (0, 1], got {self.min_fraction}")
        if self.min_z < 0:
            self._refuse(f"min_z must be >= 0, got {self.min_z}")
        if dim is not None and dim < 3:
            self._refuse(f"detecting outlier dimensions needs vectors of at least 3 dimensions, got {dim}-d; "
                         "give the dimensions explicitly with clip-dims=...")

    def min_vectors(self, dim: int) -> int:
        """With explicit dims, 1 (nothing is estimated). When detecting, the fewest n for which one vector
        cannot pass the fraction test alone: a dimension is an outlier only if it is the extreme
        coordinate in at least min_fraction f of the vectors, and with 1/n >= f the extreme coordinate of
        any single vector reaches that share, so the test would reject nothing. The answer is the
        smallest n with 1/n < f: 21 for 384-d vectors (f = 0.05), 7 for 64-d (f = 0.15625), 3 up to 20-d
        (f = 0.5)."""
        if self.dims is not None:
            return 1
        f = self._min_fraction(dim)
        n = max(1, int(1.0 / f) - 1)
        while 1.0 / n >= f:  # the float comparison detect_outliers makes (count / n >= f)
            n += 1
        return n

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        if self.dims is not None:
            return "the dimension is read from a vector", ""
        why = (f"a dimension counts as an outlier when it is the extreme coordinate in at least min_fraction = "
               f"{self._min_fraction(dim):g} of the vectors, and among {n} a single vector is 1/{max(n, 1)} of them")
        return why, ", or give the dimensions explicitly with clip-dims=..."

    def fit(self, X: np.ndarray) -> Clip:
        X = self._check_fit_input(X)
        d = X.shape[1]
        if self.dims is not None:
            stats = None
            dims = sorted(set(self.dims))
        else:
            stats = outlier_stats(X)
            dims = detect_outliers(stats, min_fraction=self.min_fraction, min_z=self.min_z)
        self.dim_ = d
        self.stats_ = stats
        self.dims_ = tuple(int(j) for j in dims)
        return self

    def _from_moments(self, moments: Any) -> None:
        """The detection of :meth:`fit` from statistics accumulated batch by batch (:meth:`partial_fit`)."""
        stats = None
        if self.dims is not None:
            dims = sorted(set(self.dims))
        else:
            stats = stats_from_moments(moments.n, moments.argmin_counts, moments.argmax_counts, moments.mean,
                                       moments.std)
            dims = detect_outliers(stats, min_fraction=self.min_fraction, min_z=self.min_z)
        self.dim_, self.stats_, self.dims_ = len(moments.mean), stats, tuple(int(j) for j in dims)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """A float64 copy of ``X`` with the columns ``dims_`` set to 0, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False).astype(np.float64)  # one copy
        X[:, list(self.dims_)] = 0.0
        return X

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(None, diag(1 except 0 at dims_))``; ``(None, None)`` (the identity) when no dimension is clipped."""
        self._check_fitted()
        if not self.dims_:
            return None, None
        keep = np.ones(self.dim_)
        keep[list(self.dims_)] = 0.0
        return None, np.diag(keep)
