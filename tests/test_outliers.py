"""Outlier ("tail") dimension statistics and detection on planted and isotropic data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iso_bench.numerics.outliers import OutlierStats, default_min_fraction, detect_outliers, outlier_stats


def planted(n: int = 300, d: int = 64, seed: int = 0) -> np.ndarray:
    """Isotropic noise with dimension 7 strongly negative and dimension 41 strongly positive."""
    X = np.random.default_rng(seed).normal(size=(n, d))
    X[:, 7] -= 6.0
    X[:, 41] += 6.0
    return X


def test_stats_by_hand():
    X = np.array([[0.0, 1.0, -5.0, 0.5], [0.5, 2.0, -4.0, 0.0], [3.0, 2.5, -6.0, 0.0]])
    s = outlier_stats(X)
    assert s.n_vectors == 3 and s.dim == 4
    np.testing.assert_allclose(s.argmin_fraction, [0, 0, 1, 0])
    np.testing.assert_allclose(s.argmax_fraction, [1 / 3, 2 / 3, 0, 0])
    np.testing.assert_allclose(s.fraction, [1 / 3, 2 / 3, 1, 0])
    np.testing.assert_allclose(s.mean, X.mean(axis=0))
    # z of dimension 2: its mean -5 against the other three means (7/6, 11/6, 1/6), ddof=1
    others = np.delete(X.mean(axis=0), 2)
    assert s.mean_z[2] == pytest.approx((-5.0 - others.mean()) / others.std(ddof=1))


def test_mean_z_is_leave_one_out():
    s = outlier_stats(planted())
    means = s.mean
    for j in (0, 7, 41):
        others = np.delete(means, j)
        assert s.mean_z[j] == pytest.approx((means[j] - others.mean()) / others.std(ddof=1), rel=1e-9)


def test_planted_dimensions_are_detected():
    X = planted()
    s = outlier_stats(X)
    assert s.argmin_fraction[7] > 0.9 and s.argmax_fraction[41] > 0.9
    assert s.mean_z[7] < -5 and s.mean_z[41] > 5
    assert detect_outliers(X) == [7, 41]
    assert detect_outliers(s) == [7, 41]  # precomputed statistics give the same answer
    assert s.top(2) == [41, 7] or s.top(2) == [7, 41]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("shape", [(300, 64), (2000, 16), (100, 768)])
def test_no_outliers_in_isotropic_data(seed, shape):
    X = np.random.default_rng(seed).normal(size=shape) * 2.0 + 1.0
    assert detect_outliers(X) == []


def test_both_conditions_are_required():
    rng = np.random.default_rng(3)
    # a high-variance dimension is often the extreme, but its mean sits among the others' (which,
    # as in real models, differ between dimensions by more than their sampling noise: here spread
    # 0.5 against a noise of 20/sqrt(5000) = 0.28 for the loud dimension; 0 of 40 seeds detect it)
    loud = 0.5 * rng.normal(size=32) + rng.normal(size=(5000, 32))
    loud[:, 4] = 20.0 * rng.normal(size=5000)
    s = outlier_stats(loud)
    assert s.fraction[4] > default_min_fraction(32) and abs(s.mean_z[4]) < 3
    assert detect_outliers(loud) == []
    # a shifted mean that is rarely the extreme (the shift is small against the spread of the rest)
    shifted = rng.normal(size=(500, 32)) * 10.0
    shifted[:, 9] = 3.0 + 0.01 * rng.normal(size=500)
    s = outlier_stats(shifted)
    assert abs(s.mean_z[9]) > 3 and s.fraction[9] < 0.05
    assert detect_outliers(shifted) == []


def test_thresholds():
    X = np.random.default_rng(4).normal(size=(300, 64))
    X[:, 7] -= 2.5  # a weak outlier: the minimum of only some vectors
    s = outlier_stats(X)
    assert 0.2 < s.fraction[7] < 0.9
    assert detect_outliers(s) == [7]
    assert detect_outliers(s, min_fraction=s.fraction[7] + 0.01) == []
    assert detect_outliers(s, min_z=abs(s.mean_z[7]) + 0.01) == []
    assert default_min_fraction(768) == 0.05
    assert default_min_fraction(64) == pytest.approx(10 / 64)
    assert default_min_fraction(8) == 0.5
    with pytest.raises(ValueError, match="min_fraction"):
        detect_outliers(X, min_fraction=0.0)


def test_to_dict_is_json_serialisable():
    s = outlier_stats(planted(n=20))
    data = json.loads(json.dumps(s.to_dict()))
    assert data["n_vectors"] == 20 and len(data["mean_z"]) == 64
    assert isinstance(s, OutlierStats)


def test_constant_other_means_give_infinite_z():
    X = np.zeros((4, 5))
    X[:, 2] = 1.0
    s = outlier_stats(X)
    assert s.mean_z[2] == np.inf
    # each other dimension: mean 0 against (0, 0, 0, 1), whose mean is 1/4 and std 1/2
    np.testing.assert_allclose(s.mean_z[[0, 1, 3, 4]], -0.5)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        outlier_stats(np.ones(5))
    with pytest.raises(ValueError, match="dim >= 3"):
        outlier_stats(np.ones((5, 2)))
    with pytest.raises(ValueError, match="at least one"):
        outlier_stats(np.ones((0, 5)))
    with pytest.raises(ValueError, match="NaN"):
        outlier_stats(np.array([[1.0, np.nan, 2.0]]))
