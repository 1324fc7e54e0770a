"""Isotropy measures of a set of vectors ``X`` shaped ``(n_points, dim)``.

* :func:`iw` -- I(W) of Mu & Viswanath (2018): 1 isotropic, near 0 anisotropic (the "Isotropy" column
  of Rajaee & Pilehvar's slides).
* :func:`isoscore` -- IsoScore of Rudman et al. (2022): 1 when the variance is spread evenly over all
  dimensions, 0 when it lies along one direction.
* :func:`average_cosine` -- mean cosine similarity between distinct vectors (Ethayarajh 2019's
  anisotropy baseline): near 0 for isotropic data, near 1 for a narrow cone.
* :func:`pc1_variance_ratio` -- fraction of the variance along the first principal component.

All are computed in float64 and refuse degenerate input (too few points, zero vectors) with a
``ValueError`` instead of returning NaN.

Example:
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 10))
    >>> round(iw(X), 1), round(isoscore(X), 2), round(average_cosine(X), 2)
    (0.9, 1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from iso_bench.linalg import unit_rows


def _as_points(X: np.ndarray, *, min_points: int = 2, min_dim: int = 1, what: str = "measure") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array (n_points, dim), got shape {X.shape}")
    n, d = X.shape
    if n < min_points:
        raise ValueError(f"{what}: needs at least {min_points} points, got {n}")
    if d < min_dim:
        raise ValueError(f"{what}: needs dim >= {min_dim}, got {d}")
    if not np.isfinite(X).all():
        raise ValueError(f"{what}: input contains NaN or infinity")
    return X


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """log(sum(exp(a), axis=0)) without overflow."""
    m = a.max(axis=0)
    return m + np.log(np.exp(a - m).sum(axis=0))


def iw(X: np.ndarray, *, both_signs: bool = True) -> float:
    """I(W) = min_c Z(c) / max_c Z(c), Z(c) = sum_w exp(c . w), c over the eigenvectors of W^T W.

    W^T W is uncentred, as in Mu & Viswanath (2018). Z is computed as a log-sum-exp, so vectors of
    norm ~10-100 (raw BERT) do not overflow; the result is ``exp(min log Z - max log Z)`` and may
    underflow to 0.0 for extremely anisotropic data.

    An eigenvector is defined only up to sign, and Z(c) != Z(-c) in general, so the published code
    (which uses whatever sign LAPACK returns) is not well defined. With ``both_signs=True`` (default)
    both c and -c are used, which makes the measure sign-free and never larger than any single-sign
    choice; ``both_signs=False`` uses the eigenvectors as ``numpy.linalg.eigh`` returns them.

    A finite isotropic sample scores below 1: Z(c) sums the heavy-tailed exp(c . w), and the
    eigenvectors pick the sample's extreme-variance directions. A standard Gaussian sample with
    n=5000, d=10 scores about 0.9; the same points normalised to unit length about 0.98.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(5000, 10))
        >>> iw(X) > 0.85, iw(X + 5.0) < 1e-3
        (True, True)
    """
    W = _as_points(X, min_points=1, what="iw")
    _, vecs = np.linalg.eigh(W.T @ W)
    proj = W @ vecs  # (n, d): c . w for every eigenvector c
    log_z = _logsumexp(proj)
    if both_signs:
        log_z = np.concatenate([log_z, _logsumexp(-proj)])
    return float(np.exp(log_z.min() - log_z.max()))


def isoscore(X: np.ndarray) -> float:
    """IsoScore (Rudman et al. 2022) of points ``X`` shaped ``(n_points, dim)``.

    Steps (Rudman et al. 2022, and their ``isoscore`` package): the PCA variances v (eigenvalues of the
    ddof=1 covariance), scaled to norm sqrt(dim); defect delta = ||v_hat - 1|| / sqrt(2 (dim - sqrt dim));
    score ((dim - delta^2 (dim - sqrt dim))^2 - dim) / (dim (dim - 1)). Written here in numpy so the library
    does not depend on the reference package (which imports torch); the tests compare the two.

    Example:
        >>> X = np.zeros((4, 3)); X[:, 0] = [1.0, -1.0, 2.0, -2.0]
        >>> round(isoscore(X), 12)  # all variance along one axis
        0.0
    """
    X = _as_points(X, min_points=2, min_dim=2, what="isoscore")
    n = X.shape[1]
    cov = np.atleast_2d(np.cov(X, rowvar=False))
    pcs = np.abs(np.linalg.eigvalsh(cov))  # = singular values of a symmetric PSD matrix
    norm = np.linalg.norm(pcs)
    if norm == 0.0:
        raise ValueError("isoscore: all points are identical (zero variance); the score is undefined")
    pcs_norm = pcs * np.sqrt(n) / norm
    defect = np.linalg.norm(pcs_norm - 1.0) / np.sqrt(2.0 * (n - np.sqrt(n)))
    return float(((n - defect**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1)))


def average_cosine(X: np.ndarray) -> float:
    """Exact mean cosine similarity over all ordered pairs i != j, in O(n d) time.

    With unit vectors u_i and s = sum_i u_i, sum_{i != j} u_i . u_j = ||s||^2 - sum_i ||u_i||^2, so the
    mean is (||s||^2 - n) / (n (n - 1)) (the sum of the squared norms is used as computed, not
    rounded to n, for exactness).

    Example:
        >>> round(average_cosine(np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])), 6)  # (0 + 2 x 0.7071) / 3
        0.471405
    """
    X = _as_points(X, min_points=2, what="average_cosine")
    norms = np.linalg.norm(X, axis=1)
    if (norms == 0.0).any():
        raise ValueError(f"average_cosine: {int((norms == 0.0).sum())} zero vectors have no direction; drop them first")
    U = unit_rows(X)
    s = U.sum(axis=0)
    n = len(U)
    return float((s @ s - (U * U).sum()) / (n * (n - 1)))


def pc1_variance_ratio(X: np.ndarray) -> float:
    """Fraction of the total variance explained by the first principal component (of centred X).

    1 means the points lie on a line; 1/dim is the isotropic value.

    Example:
        >>> pc1_variance_ratio(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.5], [0.0, -0.5]]))
        0.8
    """
    X = _as_points(X, min_points=2, what="pc1_variance_ratio")
    Xc = X - X.mean(axis=0)
    # the non-zero eigenvalues of Xc^T Xc and Xc Xc^T agree: use the smaller Gram matrix
    gram = Xc.T @ Xc if Xc.shape[0] >= Xc.shape[1] else Xc @ Xc.T
    eig = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    total = float(eig.sum())
    if total == 0.0:
        raise ValueError("pc1_variance_ratio: all points are identical (zero variance); the ratio is undefined")
    return float(eig[-1] / total)


MEASURES: dict[str, Callable[[np.ndarray], float]] = {
    "iw": iw,
    "isoscore": isoscore,
    "average_cosine": average_cosine,
    "pc1_variance_ratio": pc1_variance_ratio,
}
"""Every measure by name, each taking ``X`` shaped ``(n_points, dim)`` and returning a float."""
