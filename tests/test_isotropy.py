"""Isotropy measures against hand-derived values, naive O(n^2) definitions and the reference package."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from iso_bench.numerics.isotropy import (
    MEASURES,
    average_cosine,
    effective_rank,
    isoscore,
    isoscore_star,
    iw,
    pc1_variance_ratio,
)


@pytest.fixture(scope="module")
def gauss() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(5000, 10))


def _iw_naive(W: np.ndarray, both_signs: bool) -> float:
    """The definition with plain exponentials (fine for small-norm data)."""
    _, vecs = np.linalg.eigh(W.T @ W)
    cs = [vecs[:, i] for i in range(vecs.shape[1])]
    if both_signs:
        cs += [-c for c in cs]
    z = [np.exp(W @ c).sum() for c in cs]
    return min(z) / max(z)


# ---- I(W) ----------------------------------------------------------------------------------------
def test_iw_isotropic_gaussian_is_near_one(gauss):
    # a finite sample scores below 1 (heavy-tailed exp(c.w), extreme-variance eigenvectors):
    # about 0.90 for n=5000, d=10 with either sign convention; unit-normalised points about 0.98
    assert 0.85 < iw(gauss) <= 1.0
    assert 0.85 < iw(gauss, both_signs=False) <= 1.0
    unit = gauss / np.linalg.norm(gauss, axis=1, keepdims=True)
    assert iw(unit) > 0.95


def test_iw_anisotropic_is_near_zero(gauss):
    assert iw(gauss + 5.0) < 1e-3  # offset cone: Z along the mean direction dominates
    rank_deficient = gauss.copy()
    rank_deficient[:, 5:] = 10.0 * rank_deficient[:, :5]  # rank 5 of 10, no offset
    # Z = n in the null space, about n exp(101 / 2) along the occupied directions
    assert iw(rank_deficient) < 1e-3


def test_iw_matches_naive_definition():
    W = np.random.default_rng(1).normal(size=(300, 6)) @ np.diag([1.0, 0.5, 0.3, 0.2, 0.2, 0.1]) + 0.3
    for both in (True, False):
        assert iw(W, both_signs=both) == pytest.approx(_iw_naive(W, both), rel=1e-10)


def test_iw_does_not_overflow_in_log_space(gauss):
    big = 1000.0 * (gauss + 1.0)
    _, vecs = np.linalg.eigh(big.T @ big)
    assert np.abs(big @ vecs).max() > np.log(np.finfo(np.float64).max)  # plain exp(c . w) overflows
    value = iw(big)
    assert np.isfinite(value) and 0.0 <= value < 1e-6


# ---- IsoScore ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(200, 10), (50, 30), (1000, 3), (100, 2)])
def test_isoscore_matches_reference_package(shape):
    reference = pytest.importorskip("IsoScore.IsoScore")  # package "isoscore" (imports torch)
    rng = np.random.default_rng(shape[1])
    X = rng.normal(size=shape) @ rng.normal(size=(shape[1], shape[1]))
    # IsoScore 2.x takes (n_points, dim): it reads the dimension from points.shape[1] and calls
    # torch.cov(points.T); the "(dim, n_points)" of older write-ups is the 1.x numpy version's convention.
    expected = float(reference.IsoScore(X))
    assert isoscore(X) == pytest.approx(expected, abs=1e-6)


def test_isoscore_extremes():
    rng = np.random.default_rng(0)
    line = np.outer(rng.normal(size=50), rng.normal(size=4))  # all variance along one direction
    assert isoscore(line) == pytest.approx(0.0, abs=1e-9)
    # exactly equal variances: a regular simplex-like set with identity covariance
    cube = np.array(list(itertools.product([-1.0, 1.0], repeat=3)))
    assert isoscore(cube) == pytest.approx(1.0, abs=1e-12)


# ---- IsoScore* ------------------------------------------------------------------------------------
@pytest.mark.parametrize("zeta", [0.0, 0.2, 0.75, 1.0])
def test_isoscore_star_matches_reference_package(zeta):
    """The reference's IsoScore_star(points, C0, zeta) of the isoscore package (2.x, the authors')."""
    reference = pytest.importorskip("IsoScore.IsoScore")
    rng = np.random.default_rng(7)
    mix = rng.normal(size=(12, 12))
    X = rng.normal(size=(40, 12)) @ mix  # few points per dimension: where the shrinkage matters
    larger = rng.normal(size=(5000, 12)) @ mix
    C0 = np.cov(larger, rowvar=False)
    expected = float(reference.IsoScore_star(X, C0, zeta))
    assert isoscore_star(X, C0, zeta) == pytest.approx(expected, abs=1e-6)


def test_isoscore_star_without_shrinkage_is_isoscore_and_with_full_shrinkage_scores_c0():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 6)) * np.arange(1, 7)
    assert isoscore_star(X, np.eye(6), zeta=0.0) == pytest.approx(isoscore(X), abs=1e-12)
    assert isoscore_star(X) == pytest.approx(isoscore(X), abs=1e-12)  # C0 = the points' own covariance
    assert isoscore_star(X, np.eye(6), zeta=1.0) == pytest.approx(1.0, abs=1e-12)  # C0 = I is isotropic
    with pytest.raises(ValueError, match="C0 must be 6 x 6"):
        isoscore_star(X, np.eye(5))
    with pytest.raises(ValueError, match="zeta must be between 0 and 1"):
        isoscore_star(X, np.eye(6), zeta=1.5)


# ---- effective rank ------------------------------------------------------------------------------
def test_effective_rank_is_the_entropy_of_the_singular_values_as_scipy_computes_it():
    from scipy.linalg import svdvals
    from scipy.stats import entropy

    rng = np.random.default_rng(4)
    for shape in [(300, 20), (15, 40)]:  # more points than dimensions, and fewer
        X = rng.normal(size=shape) @ np.diag(np.linspace(0.1, 5, shape[1])) + 3.0
        expected = float(np.exp(entropy(svdvals(X - X.mean(axis=0)))))  # entropy normalises, in nats
        assert effective_rank(X) == pytest.approx(expected, rel=1e-6)


def test_effective_rank_by_hand():
    # singular values (2, 2, 1) of the centred points: p = (0.4, 0.4, 0.2), exp(H) = 1 / (0.4^0.8 0.2^0.2)
    X = np.vstack([np.diag([2.0, 2.0, 1.0]) / np.sqrt(2), -np.diag([2.0, 2.0, 1.0]) / np.sqrt(2)])
    assert effective_rank(X) == pytest.approx(1.0 / (0.4**0.8 * 0.2**0.2), rel=1e-12)
    line = np.outer(np.arange(5.0), [1.0, 2.0, 3.0])
    assert effective_rank(line) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="all points are identical"):
        effective_rank(np.ones((4, 3)))


# ---- average cosine ------------------------------------------------------------------------------
def test_average_cosine_equals_pairwise_definition():
    X = np.random.default_rng(2).normal(size=(60, 7)) + 0.7
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    pairs = [U[i] @ U[j] for i in range(len(U)) for j in range(len(U)) if i != j]
    assert average_cosine(X) == pytest.approx(np.mean(pairs), abs=1e-12)


def test_average_cosine_by_hand():
    # cos(e1, 2 e2) = 0, cos(e1, (3,3)) = cos(e2, (3,3)) = 1/sqrt(2); mean of the three pairs
    assert average_cosine(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])) == pytest.approx(np.sqrt(2) / 3)
    assert average_cosine(np.array([[1.0, 1.0], [2.0, 2.0]])) == pytest.approx(1.0)


# ---- PC1 variance ratio --------------------------------------------------------------------------
def test_pc1_variance_ratio_by_hand():
    # centred already; sums of squares 2 along x (values +-1) and 0.5 along y (values +-0.5): 2 / 2.5
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.5], [0.0, -0.5]])
    assert pc1_variance_ratio(X) == pytest.approx(0.8)
    assert pc1_variance_ratio(X + 10.0) == pytest.approx(0.8)  # centred internally
    wide = np.random.default_rng(0).normal(size=(5, 40))  # n < d takes the other Gram matrix
    s = np.linalg.svd(wide - wide.mean(axis=0), compute_uv=False)
    assert pc1_variance_ratio(wide) == pytest.approx(s[0] ** 2 / (s**2).sum())


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(set(MEASURES) - {"iw"}))
def test_measures_refuse_a_single_point(name):
    with pytest.raises(ValueError, match="at least 2 points"):
        MEASURES[name](np.ones((1, 4)))


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_measures_refuse_bad_input(name):
    with pytest.raises(ValueError, match="2-D"):
        MEASURES[name](np.ones(4))
    bad = np.ones((3, 4))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        MEASURES[name](bad)


def test_degenerate_inputs_raise_instead_of_nan():
    with pytest.raises(ValueError, match="zero vectors"):
        average_cosine(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="identical"):
        isoscore(np.ones((5, 3)))
    with pytest.raises(ValueError, match="identical"):
        pc1_variance_ratio(np.ones((5, 3)))
    with pytest.raises(ValueError, match="dim >= 2"):
        isoscore(np.ones((5, 1)))
