"""``zscore``: standardise every dimension (Timkey & van Schijndel, EMNLP 2021, "All Bark and No Bite: Rogue
Dimensions in Transformer Language Models Obscure Representational Quality").

x -> (x - mu) / sigma, per dimension, with mu and sigma the mean and standard deviation of the fit vectors.
The paper's answer to the "rogue" dimensions that ``clip`` removes by hand: after standardisation no dimension
dominates a cosine similarity by its scale alone.

Reference code: github.com/wtimkey/rogue-dimensions, ``replication.ipynb`` (``get_model_mean_std_pcs`` and
``similarity(..., std_cosine=True)``): per layer, ``(x - mean) / std`` with numpy's mean and ``std`` (ddof=0)
over a sample of token vectors from a Wikipedia corpus, then cosine similarity. The same formula here.
Here the statistics come from the named fit corpus (by default the evaluated task's texts, like every fitted
method), in float64, batch by batch where the corpus is larger than the fit budget (the same numbers up to
rounding). Where the two differ: the paper standardises token vectors of a fixed Wikipedia sample and reports
correlations with human judgements of word similarity; iso-bench applies it to the variant's vectors (sentence
vectors by default; ``zscore-level=token`` standardises token vectors before the model's pooling) on the fit
corpus the result names. A dimension without variance on the fit corpus (a model's dead coordinates) cannot be
standardised: it is set to 0, and the count is recorded in ``dropped_``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from iso_bench.methods.base import Method, register

logger = logging.getLogger(__name__)

_DEAD_TOL = 1e-10
"""A standard deviation below ``_DEAD_TOL`` times the largest counts as zero (a constant dimension)."""


@register
class ZScore(Method):
    """Per-dimension standardisation: x -> (x - mu) / sigma, sigma of the fit vectors (ddof=0).

    The transformed fit vectors have mean 0 and standard deviation 1 in every dimension that varies.

    Needs two fit vectors (:meth:`min_vectors`): a standard deviation of one vector is 0.

    Learned state: ``mean_`` (d,), ``scale_`` (d,: 1 / sigma, 0 for a constant dimension), ``std_`` (d,),
    ``dropped_`` (constant dimensions set to 0), ``dim_``.

    Example:
        >>> X = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 10.0]])
        >>> Z = ZScore().fit(X).transform(X)
        >>> Z[:, 0].round(4).tolist(), Z[:, 1].tolist()
        ([-1.2247, 0.0, 1.2247], [0.0, 0.0, 0.0])
    """

    name = "zscore"
    order = 70
    streams = True  # a mean and a per-dimension sum of squares accumulate batch by batch

    def __init__(self) -> None:
        pass

    def min_vectors(self, dim: int) -> int:
        """2: the standard deviation of one vector is 0 in every dimension."""
        return 2

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        return "a standard deviation needs two vectors", ""

    def fit(self, X: np.ndarray) -> ZScore:
        X = self._check_fit_input(X)
        self._standardise(X.mean(axis=0), X.std(axis=0))
        return self

    def _from_moments(self, moments: Any) -> None:
        self._standardise(moments.mean.copy(), moments.std)

    def _standardise(self, mean: np.ndarray, std: np.ndarray) -> None:
        dead = std <= _DEAD_TOL * max(float(std.max()), np.finfo(float).tiny)
        if dead.any():
            logger.warning("%s: %d of %d dimensions have no variance on the fit corpus and are set to 0",
                           self.who(), int(dead.sum()), len(std))
        self.dim_ = len(mean)
        self.mean_, self.std_ = mean, std
        self.scale_ = np.where(dead, 0.0, 1.0 / np.where(dead, 1.0, std))
        self.dropped_ = int(dead.sum())

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``(X - mean_) * scale_`` as float64, shape ``(n, dim)``."""
        self._check_fitted()
        X = self._check_input(X, fitting=False, float64=False)
        return (X - self.mean_) * self.scale_  # one float64 copy

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``(mean_, diag(scale_))``."""
        self._check_fitted()
        return self.mean_, np.diag(self.scale_)
