"""Isotropy measures of a set of vectors ``X`` shaped ``(n_points, dim)``.

* :func:`iw` -- I(W) of Mu & Viswanath (2018): 1 isotropic, near 0 anisotropic (the "Isotropy" column
  of Rajaee & Pilehvar's slides).
* :func:`isoscore` -- IsoScore of Rudman et al. (2022): 1 when the variance is spread evenly over all
  dimensions, 0 when it lies along one direction.
* :func:`average_cosine` -- mean cosine similarity between distinct vectors (Ethayarajh 2019's
  anisotropy baseline): near 0 for isotropic data, near 1 for a narrow cone.
* :func:`pc1_variance_ratio` -- fraction of the variance along the first principal component.
* :func:`isoscore_star` -- IsoScore* of Rudman & Eickhoff (ICLR 2024): IsoScore of a covariance shrunk
  towards that of a larger sample of points (stable where there are few points per dimension).
* :func:`effective_rank` -- Roy & Vetterli (2007)'s effective rank of the centred points: exp of the entropy
  of their normalised singular values, between 1 and the rank.

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

from iso_bench.numerics.linalg import unit_rows


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
    return _isoscore_of(np.atleast_2d(np.cov(X, rowvar=False)), "isoscore")


def _isoscore_of(cov: np.ndarray, what: str) -> float:
    """IsoScore's steps from a covariance matrix (its eigenvalues are the PCA variances)."""
    n = cov.shape[0]
    pcs = np.abs(np.linalg.eigvalsh(cov))  # = singular values of a symmetric PSD matrix
    norm = np.linalg.norm(pcs)
    if norm == 0.0:
        raise ValueError(f"{what}: all points are identical (zero variance); the score is undefined")
    pcs_norm = pcs * np.sqrt(n) / norm
    defect = np.linalg.norm(pcs_norm - 1.0) / np.sqrt(2.0 * (n - np.sqrt(n)))
    return float(((n - defect**2 * (n - np.sqrt(n))) ** 2 - n) / (n * (n - 1)))


ISOSCORE_STAR_ZETA = 0.75
"""The shrinkage its authors evaluate with (``I-STAR/analysis.py`` of bcbi-edu/p_eickhoff_isoscore)."""


def isoscore_star(X: np.ndarray, C0: np.ndarray | None = None, zeta: float = ISOSCORE_STAR_ZETA) -> float:
    """IsoScore* (Rudman & Eickhoff, "Stable Anisotropic Regularization", ICLR 2024) of points ``X``.

    IsoScore of the shrunk covariance ``(1 - zeta) Sigma_X + zeta C0`` (Sigma_X ddof=1), with ``C0`` the
    covariance of a larger sample of points from the same space. The settings are the authors' for evaluation:
    in ``I-STAR/analysis.py`` they score a layer's sentence vectors with ``zeta = 0.75`` and ``C0`` the
    covariance of about 250,000 token vectors of the model (``get_ci`` in ``I-STAR/training_utils.py``); the
    ``isoscore`` package (2.x, ``IsoScore_star``) is the reference the tests compare with. ``zeta = 0``, or
    ``C0`` the covariance of ``X`` itself (the default), gives IsoScore; ``zeta = 1`` scores ``C0`` alone.
    Unlike IsoScore, the score depends on the points' scale relative to ``C0``'s.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(300, 4)) * [1.0, 1.0, 1.0, 0.1]
        >>> isoscore_star(X) == isoscore(X), round(isoscore_star(X, np.eye(4)), 2), round(isoscore(X), 2)
        (True, 0.98, 0.67)
    """
    X = _as_points(X, min_points=2, min_dim=2, what="isoscore_star")
    if not 0.0 <= zeta <= 1.0:
        raise ValueError(f"isoscore_star: zeta must be between 0 and 1, got {zeta}")
    cov = np.atleast_2d(np.cov(X, rowvar=False))
    if C0 is None:
        return _isoscore_of(cov, "isoscore_star")
    C0 = np.asarray(C0, dtype=np.float64)
    if C0.shape != cov.shape:
        raise ValueError(f"isoscore_star: C0 must be {cov.shape[0]} x {cov.shape[0]} like the points' covariance, "
                         f"got shape {C0.shape}")
    return _isoscore_of((1.0 - zeta) * cov + zeta * C0, "isoscore_star")


def effective_rank(X: np.ndarray) -> float:
    """Effective rank (Roy & Vetterli, EUSIPCO 2007) of the centred points: ``exp(H(p))`` with
    ``p_k = sigma_k / sum sigma`` the normalised singular values (not their squares) of ``X - mean`` and ``H`` the
    Shannon entropy in nats. Between 1 (one direction) and the rank (all singular values equal); the same
    as RankMe (Garrido et al. 2023) without its epsilon.

    Example:
        >>> X = np.vstack([np.eye(3), -np.eye(3)])  # centred, three equal singular values
        >>> round(effective_rank(X), 12)
        3.0
    """
    X = _as_points(X, min_points=2, what="effective_rank")
    Xc = X - X.mean(axis=0)
    gram = Xc.T @ Xc if Xc.shape[0] >= Xc.shape[1] else Xc @ Xc.T  # the same non-zero eigenvalues
    sigma = np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None))
    if sigma.sum() == 0.0:
        raise ValueError("effective_rank: all points are identical (zero variance); the rank is undefined")
    p = sigma / sigma.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


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
    "effective_rank": effective_rank,
}
"""Every measure by name, each taking ``X`` shaped ``(n_points, dim)`` and returning a float."""
