"""``clip`` ("cut the tails"): zero the outlier dimensions (Luo 2020; Luo, Kulmizev & Mao, ACL 2021).

The outlier dimensions are detected from the fit corpus with :func:`iso_bench.outliers.detect_outliers`
(never hard-coded: they differ between checkpoints of the "same" model), or given explicitly:
``clip-dims=308,381`` (or positionally, ``clip-308,381``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from iso_bench.methods.base import Method, MethodError, register
from iso_bench.outliers import DEFAULT_MIN_Z, detect_outliers, outlier_stats


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
            :func:`~iso_bench.outliers.detect_outliers` (``None`` = its documented default,
            ``min(0.5, max(10/d, 0.05))``; ``min_z`` 3 leave-one-out standard deviations).

    Learned state: ``dims_`` (sorted tuple, possibly empty: then clip is the identity, and says so
    in ``dims_``), ``stats_`` (the :class:`~iso_bench.outliers.OutlierStats` used for detection,
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

    def fit(self, X: np.ndarray) -> Clip:
        X = self._check_input(X, fitting=True, min_rows=1)
        d = X.shape[1]
        if self.dims is not None:
            bad = [j for j in self.dims if not 0 <= j < d]
            if bad:
                raise MethodError(
                    f"method {self.spec!r}: dimensions {bad} are out of range for {d}-d vectors; "
                    f"give dims between 0 and {d - 1}"
                )
            stats = None
            dims = sorted(set(self.dims))
        else:
            try:
                stats = outlier_stats(X)
                dims = detect_outliers(stats, min_fraction=self.min_fraction, min_z=self.min_z)
            except ValueError as err:
                raise MethodError(
                    f"method {self.spec!r}: cannot detect outlier dimensions ({err}); "
                    "give them explicitly with clip-dims=..."
                ) from None
        self.dim_ = d
        self.stats_ = stats
        self.dims_ = tuple(int(j) for j in dims)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        """A float64 copy of ``X`` with the columns ``dims_`` set to 0, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False).copy()
        X[:, list(self.dims_)] = 0.0
        return X
