"""``softdecay``: the singular-value transformation SoftDecay (Yan, Gui, Li & He, 2022, arXiv 2208.11790,
"Addressing Token Uniformity in Transformers via Singular Value Transformation").

A matrix X = U S V^T of vectors whose spectrum is dominated by a few singular values (the vectors crowd
into a narrow cone) gets its singular values transformed by the concave soft-exponential function
f(s) = -log(1 - alpha (s + alpha) + 1e-7) / alpha, alpha < 0, then rescaled so that the largest singular value
is unchanged, and X' = U f(S) V^T. Nothing is centred. Large singular values are lifted against the largest;
f is 0 at s = -alpha, not at s = 0, so singular values near or below 1 shrink towards 0 instead.

Which matrix, in the authors' code (github.com/hanqi-qi/tokenUni, read at ``6f42c75``): the fine-tuned model
applies it inside its last layer to each example's token matrix (``src/transformers/models/soft_decay.py``,
``transform_layer.py``; alpha a learned parameter initialised to -0.2); the unsupervised STS evaluation,
which gives the paper's STS numbers, applies it with alpha = -0.6 (``unsupervisedSTS/sentence_transformers/
pooling_utils.py``) to the matrix of pooled sentence vectors of the evaluated sentences, each side of the
pairs separately (``WhiteningEmbeddingSimilarityEvaluator2.py``). Post-hoc, without training, the second is
the method: a corpus-level transform of sentence vectors. It has no fitted state there because it transforms
the evaluated batch itself; iso-bench never transforms whatever batch mteb hands over, so the SVD here is that
of the named fit corpus (by default the evaluated task's texts, both sides together) and every vector x goes
through the linear map that does to X exactly what SoftDecay does, x -> x V diag(f(S) / S) V^T (on the fit
corpus itself, X V diag(f(S) / S) V^T = U f(S) V^T). A direction in which the fit vectors have no component
(a singular value below 1e-10 of the largest) is mapped to 0: the authors' f would give it the negative value
f(0) on an arbitrary left singular vector. Differences from the authors' numbers therefore come from the fit
corpus (both sides at once, rather than each side's sentences) and from nothing else.

The singular values of a corpus grow with its size (sqrt(n) for vectors of a fixed spread), and f is not
scale-free: like the authors' transform, the result depends on the number of fit texts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register
from iso_bench.numerics.linalg import fix_signs, gram, matmul

_RANK_TOL = 1e-10


def soft_decay(s: np.ndarray, alpha: float) -> np.ndarray:
    """The authors' SoftDecay of singular values ``s`` (their ``1e-7`` included), rescaled so that the largest
    value is unchanged.

    >>> soft_decay(np.array([30.0, 3.0]), -0.6).round(4).tolist()  # log(18.64) / 0.6, log(2.44) / 0.6; x 30 / first
    [30.0, 9.1477]
    """
    f = -np.log(1.0 - alpha * (s + alpha) + 1e-7) / alpha
    return f * (s.max() / f.max())


@register
class SoftDecay(Method):
    """SoftDecay's singular values: x -> x V diag(f(S) / S) V^T, with X = U S V^T the fit vectors.

    X is not centred; f is :func:`soft_decay`.

    Parameters:
        alpha: the decay, below 0; the authors' unsupervised STS setting -0.6 by default (closer to 0
            transforms less; -0.2 is their fine-tuning layer's initial value).

    Learned state: ``V_`` (d, r) the right singular vectors with a singular value (signs fixed),
    ``singular_values_`` (r,), ``decayed_`` (r,: f of them), ``dim_``.

    Example:
        >>> X = np.array([[30.0, 0.0], [0.0, 3.0]])
        >>> SoftDecay().fit(X).transform(X).round(4).tolist()  # singular values 30 and 3 become 30 and 9.1477
        [[30.0, 0.0], [0.0, 9.1477]]
    """

    name = "softdecay"
    order = 100
    streams, scatter = True, True  # X^T X = the scatter matrix + n mean mean^T

    def __init__(self, *, alpha: float = -0.6) -> None:
        self.alpha = alpha

    def check(self, dim: int | None = None) -> None:
        """alpha must be below 0 (the soft-exponential's concave branch)."""
        super().check(dim)
        if not self.alpha < 0:
            self._refuse(f"alpha must be below 0 (the authors use -0.6 and -0.2), got {self.alpha}")

    def fit(self, X: np.ndarray) -> SoftDecay:
        X = self._check_fit_input(X)
        mean = X.mean(axis=0)
        Xc = X - mean
        self._decay(gram(Xc, self.device) + len(X) * np.outer(mean, mean))  # X^T X, as accurate as the streamed sum
        return self

    def _from_moments(self, moments: Any) -> None:
        self._decay(moments.scatter + moments.n * np.outer(moments.mean, moments.mean))

    def _decay(self, gram: np.ndarray) -> None:
        vals, vecs = np.linalg.eigh(gram)
        vals, vecs = np.clip(vals[::-1], 0.0, None), fix_signs(vecs[:, ::-1], axis=1)
        s = np.sqrt(vals)
        keep = s > _RANK_TOL * max(float(s[0]), np.finfo(float).tiny)
        if not keep.any():
            self._refuse("every fit vector is zero; there is no singular value to transform")
        self.dim_ = len(gram)
        self.V_, self.singular_values_ = vecs[:, keep], s[keep]
        self.decayed_ = soft_decay(self.singular_values_, self.alpha)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``X @ V_ diag(decayed_ / singular_values_) V_^T`` as float64, shape ``(n, dim)``: one product with that
        d x d map (:meth:`_map`) where the rank r exceeds d / 2, else two products of r columns."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False)
        d, r = self.V_.shape
        if 2 * r <= d:
            return matmul(matmul(X, self.V_, self.device) * (self.decayed_ / self.singular_values_), self.V_.T,
                          self.device)
        return matmul(X, self._map(), self.device)

    def _map(self) -> np.ndarray:
        """The d x d map ``V_ diag(decayed_ / singular_values_) V_^T``, computed once per fit."""
        return self._per_fit("_map_of", self.V_, lambda: matmul(self.V_ * (self.decayed_ / self.singular_values_),
                                                                self.V_.T, self.device))

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(None, V_ diag(decayed_ / singular_values_) V_^T)``: linear, no offset (X is not centred)."""
        self._check_fitted()
        return None, self._map()
