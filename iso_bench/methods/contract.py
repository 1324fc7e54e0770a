"""The method contract as a library function, as scikit-learn's ``check_estimator`` is for estimators: every
registered method passes :func:`check_method`, and a plugin author calls it on a new method before
registering it. The tests parametrize :func:`method_checks` over every method, so each check is a test of its own.

Example:
    >>> from iso_bench.methods import METHODS
    >>> check_method(METHODS.get("center"))
    >>> [name for name, _ in method_checks()][:2]
    ['fit_and_transform', 'transform_means']
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import numpy as np

from iso_bench.methods.base import Method, MethodError, NotFittedError, make_method

N, D = 1000, 32
"""Enough vectors for every method's defaults: cluster-pca's 27 clusters need 13 members each (12 directions
plus one), and the smallest of the 27 k-means clusters of :func:`anisotropic` has 23 at this size."""

Check = Callable[[type[Method], np.ndarray], None]


def anisotropic(n: int = N, d: int = D, seed: int = 0) -> np.ndarray:
    """Correlated, offset vectors with one outlier dimension: something for every method to do."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) * 0.3 + rng.normal(size=d)
    X[:, 5] -= 8.0
    return X


def _raises(error: type[BaseException], text: str, call: Callable[[], object], what: str) -> None:
    try:
        call()
    except error as exc:
        assert text in str(exc), f"{what}: the {error.__name__} does not say {text!r}: {exc}"
        return
    raise AssertionError(f"{what}: no {error.__name__} raised")


def check_fit_and_transform(cls: type[Method], X: np.ndarray) -> None:
    """Defaults construct; an unfitted method refuses to transform, naming itself; ``fit`` returns the method;
    the output is finite float64 with a row per input row; a wrong input width is refused; fitting again and a
    fresh instance give the same numbers exactly; the input is left as it was; a fitted method pickles."""
    name, n, d = cls.name, len(X), X.shape[1]
    kept = X.copy()
    method = cls()
    assert isinstance(method, Method) and method.name == name and method.spec == name, f"{name}: name or spec"
    if cls.fitted:
        assert not method.is_fitted(), f"{name}: fitted before fit"
        _raises(NotFittedError, name, lambda: method.transform(X), f"{name}: transform before fit")
    assert method.fit(X) is method, f"{name}: fit does not return the method"
    assert method.is_fitted() and method.dim_ == d, f"{name}: not fitted, or dim_ != {d}"
    first = method.transform(X)
    assert first.dtype == np.float64 and first.ndim == 2 and first.shape[0] == n, f"{name}: output {first.shape}"
    assert np.isfinite(first).all(), f"{name}: a non-finite output"
    # new vectors of the fitted dimension keep the output width; a wrong dimension is refused
    other = method.transform(anisotropic(n=7, d=d, seed=1))
    assert other.shape == (7, first.shape[1]), f"{name}: other rows give {other.shape}"
    _raises(MethodError, f"fitted on {d}-d", lambda: method.transform(X[:, :-1]), f"{name}: a narrower input")
    # fitting again on the same data is idempotent; a fresh instance (same seed) agrees exactly
    np.testing.assert_array_equal(method.fit(X).transform(X), first)
    np.testing.assert_array_equal(cls().fit(X).transform(X), first)
    np.testing.assert_array_equal(X, kept)  # the input is not modified in place
    # a fitted method pickles (the cache may store it) and transforms identically afterwards
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(method)).transform(X), first)


def check_transform_means(cls: type[Method], X: np.ndarray) -> None:
    """``transform_means`` pools the transform segment by segment with the same arithmetic, for float64 and
    float32 input."""
    method = cls().fit(X)
    n = len(X)
    for dtype in (np.float64, np.float32):
        Xd = X.astype(dtype)
        starts = np.array([0, 3, 4, 50, 51, n - 1])  # segments of 3, 1, 46, 1, n - 52 and 1 rows
        Z = method.transform(Xd)
        bounds = [*starts, n]
        expected = np.stack([Z[a:b].mean(axis=0) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
        pooled = method.transform_means(Xd, starts)
        assert pooled.dtype == Z.dtype, f"{cls.name}: pooled {pooled.dtype}, transform {Z.dtype}"
        np.testing.assert_array_equal(pooled, expected)  # the same arithmetic, not only close


def check_nan_input(cls: type[Method], X: np.ndarray) -> None:
    """A NaN in the fit input or the transform input is refused, saying NaN."""
    bad = X.copy()
    bad[3, 4] = np.nan
    _raises(MethodError, "NaN", lambda: cls().fit(bad), f"{cls.name}: fit on a NaN")
    _raises(MethodError, "NaN", lambda: cls().fit(X).transform(bad), f"{cls.name}: transform of a NaN")


def check_spec_round_trip(cls: type[Method], X: np.ndarray) -> None:
    """The default spec makes the same method with the same parameters at the method's default level."""
    method = cls()
    again, level = make_method(method.spec)
    assert type(again) is type(method) and again.get_params() == method.get_params(), f"{cls.name}: spec round trip"
    assert level == method.default_level, f"{cls.name}: level {level}, default {method.default_level}"


def check_affine(cls: type[Method], X: np.ndarray) -> None:
    """A method whose :meth:`~iso_bench.methods.base.Method.affine` gives ``(offset, matrix)`` transforms every
    vector, fitted on or not, as ``(x - offset) @ matrix`` (what ``iso-bench export`` writes as ``Dense``
    modules), to float64 rounding; an unfitted fitted method refuses to give its map."""
    method = cls()
    if cls.fitted and method.affine.__func__ is not Method.affine:  # type: ignore[attr-defined]
        _raises(NotFittedError, cls.name, method.affine, f"{cls.name}: affine before fit")
    form = method.fit(X).affine()
    if form is None:
        return
    offset, matrix = form
    for Y in (X, anisotropic(n=7, d=X.shape[1], seed=1)):
        Z = method.transform(Y)
        mapped = Y - (0.0 if offset is None else offset)
        mapped = mapped if matrix is None else mapped @ matrix
        assert mapped.shape == Z.shape, f"{cls.name}: the affine map gives {mapped.shape}, transform {Z.shape}"
        np.testing.assert_allclose(mapped, Z, rtol=0, atol=1e-9 * max(1.0, float(np.abs(Z).max())),
                                   err_msg=f"{cls.name}: transform is not (x - offset) @ matrix")


CHECKS: tuple[tuple[str, Check], ...] = (
    ("fit_and_transform", check_fit_and_transform),
    ("transform_means", check_transform_means),
    ("nan_input", check_nan_input),
    ("spec_round_trip", check_spec_round_trip),
    ("affine", check_affine),
)


def method_checks() -> Iterator[tuple[str, Check]]:
    """Each check of the contract by name: ``check(cls, X)`` raises AssertionError (or the method's own error)
    when ``cls`` breaks it."""
    yield from CHECKS


def check_method(cls: type[Method], X: np.ndarray | None = None) -> None:
    """Run every check of the contract on the method class ``cls`` (default data: :func:`anisotropic`); the
    first broken one raises, naming the method and the rule."""
    data = anisotropic() if X is None else np.asarray(X, dtype=np.float64)
    for _, check in method_checks():
        check(cls, data)
