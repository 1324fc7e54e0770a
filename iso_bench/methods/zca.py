"""``zca``: ZCA whitening, the whitening that stays closest to its input (Bell & Sejnowski 1997; Kessy, Lewin &
Strimmer 2018, "Optimal Whitening and Decorrelation"; used for sentence vectors by WhiteningBERT, Huang et al.,
Findings of EMNLP 2021).

x -> (x - mu) U Lambda^(-1/2) U^T, with Sigma = U Lambda U^T the covariance of the fit vectors (ddof=1, as
``whiten``). PCA whitening (``whiten``) stops after ``U Lambda^(-1/2)``; the final rotation back by ``U^T`` keeps
each whitened coordinate aligned with an input coordinate. Among all whitening matrices W (those with
W^T Sigma W = I) ZCA minimises the expected squared distance ``E ||(x - mu) - (x - mu) W||^2`` (Kessy et al.,
section 3.3). As U^T is orthogonal, ZCA and full PCA whitening give the same inner products and norms, so the
same cosine similarities: on every cosine-scored task full ``zca`` and ``whiten`` agree, and they differ only
where coordinates matter (a classifier's regularisation, clustering with a non-rotation-invariant metric,
``zca-k``).

``zca-k`` keeps the top k directions: ``(x - mu) U_k Lambda_k^(-1/2) U_k^T`` (output stays d-dimensional, of
rank k); ``eps`` regularises the eigenvalues as ``whiten-eps`` does.

Reference code: WhiteningBERT (github.com/Jun-jie-Huang/WhiteningBERT, ``whitening_torch_final`` in
``sentence_transformers/pooling_utils.py``) whitens the evaluated pairs' own vectors, both sides together, with
the PCA form ``(x - mu) U S^(-1/2)`` of their scatter matrix (not divided by n: a global scale, which cosine
ignores) and no rotation back, so its numbers are those of ``whiten`` fitted on the task. The ZCA matrix here
follows Kessy et al.'s definition, ``W = Sigma^(-1/2)``; it is fitted on the named fit corpus like every
method, and a singular covariance is handled as ``whiten`` handles it.
"""

from __future__ import annotations

import numpy as np

from iso_bench.methods.base import register
from iso_bench.methods.whiten import Whiten


@register
class Zca(Whiten):
    """ZCA whitening: x -> (x - mu) U Lambda^-1/2 U^T, whitened in the input's own coordinates.

    The transformed fit vectors have mean 0 and identity covariance (over the kept directions).

    Parameters: ``n_components`` (k directions kept; ``None``: all) and ``eps`` as :class:`Whiten`.

    Learned state: that of :class:`Whiten`, with ``W_`` the d x d matrix ``U_k Lambda_k^(-1/2) U_k^T``.

    Example:
        >>> X = np.random.default_rng(0).normal(size=(2000, 3)) @ np.array([[2.0, 1, 0], [0, 1, 0], [0, 0, 3]])
        >>> m = Zca().fit(X)
        >>> Z = m.transform(X)
        >>> bool(np.allclose(np.cov(Z, rowvar=False), np.eye(3))), bool(np.allclose(m.W_, m.W_.T))
        (True, True)
    """

    name = "zca"
    order = 80
    model_space = True  # whitened in the input's own coordinates
    spec_args = ("n_components",)

    def output_dim(self, dim: int) -> int:
        return dim

    def model_coordinates(self, X: np.ndarray) -> np.ndarray:
        """:meth:`transform` itself: ZCA whitens in the input's own coordinates."""
        return self.transform(X)

    def _whiten(self, mean: np.ndarray, cov: np.ndarray) -> None:
        super()._whiten(mean, cov)
        k = self.n_components_
        directions = self.W_ * np.sqrt(self.eigenvalues_[:k] + self.eps)  # U_k: W_ = U_k Lambda_k^-1/2
        self.W_ = self.W_ @ directions.T
