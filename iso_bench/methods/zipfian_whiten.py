"""``zipfian-whiten``: Zipfian whitening (Yokoi, Bao, Kurita & Shimodaira, NeurIPS 2024, "Zipfian Whitening"),
at token level, then pooled as the model pools.

The paper's point: the mean and covariance that centring and whitening use are expectations over words, and
the empirical distribution of words is Zipfian, not uniform. Zipfian whitening weights each token type w by
its frequency p(w): mu = sum_w p(w) v_w, Sigma = sum_w p(w) (v_w - mu)(v_w - mu)^T, then PCA whitening
x -> (x - mu) U Lambda^(-1/2) (their ``ZipfianWhitening``: an SVD of ``sqrt(p) (W - mu)``, no regulariser, every
dimension kept). Uniform whitening weights every type alike, p(w) = 1/|V|.

Contextual token vectors have one vector per occurrence, not per type. A plain average over occurrences gives
each type the weight of its count, n_w / N = p(w): it is already Zipfian, and weighting the occurrences by p(w)
again would count frequency twice. So here, with frequencies counted in the fit corpus itself:

* ``weights=zipf`` (default): every occurrence weighs 1/N, so each type weighs p(w) = n_w / N. This is
  token-level ``whiten`` (``whiten-level=token``) up to the covariance's normaliser: the paper's weights sum to
  1 (ddof=0), ``whiten`` divides by N - 1 (ddof=1), so the vectors differ by the factor sqrt(N / (N - 1)) and
  every cosine similarity is the same (tested).
* ``weights=uniform``: an occurrence of type w weighs 1 / (|V| n_w), so each type weighs 1/|V| (|V| the
  types seen in the fit corpus). This is the authors' "pseudo-uniform" whitening of contextual models.

Both keep each type's whole occurrence distribution (its within-type spread counts in Sigma), as the authors'
contextual-model code does; the paper's static-embedding setting has one vector per type and no such spread.

Reference code: github.com/cl-tohoku/zipfian-whitening (read in an author's fork at ``fa44d29``):
``src/zipfian_whitening.py`` (the weighted mean, the SVD of the sqrt(p)-scaled centred matrix, the transform
``(x - mu) V S^-1``) and ``SimCSE/evaluation.py`` (contextual models: token vectors of ``hidden_states[1]`` and
``[-1]`` averaged, CLS and SEP included, fitted on the evaluated task's texts; uniform whitening over occurrences,
and "pseudo-uniform" per-occurrence weights ``1 / (count(type) |V|)``). Where iso-bench differs: p(w) comes from
the fit corpus, never from the enwiki frequency list their static-embedding experiments use; the token vectors
are the variant's (the model's own token extraction, special tokens excluded) and the pooled vector is their
mean, as the model pools; the transform is ``whiten``'s (eigenvectors with fixed signs; a covariance with
directions of no variance is whitened on the rest, as ``whiten`` does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iso_bench.methods.base import register
from iso_bench.methods.whiten import Whiten
from iso_bench.numerics.linalg import gram

WEIGHTS = ("zipf", "uniform")
_BLOCK = 65_536  # fit vectors whose weighted sum is taken at a time (a float64 copy of a block, not of all)


@register
class ZipfianWhiten(Whiten):
    """Whitening with a mean and covariance of token vectors weighted by token type (Zipfian or uniform).

    Parameters:
        weights: ``zipf`` (each token type weighs its frequency in the fit corpus; default) or ``uniform``
            (each type weighs 1/|V|). ``uniform`` needs the type of every fit vector, which iso-bench's encoder
            gives a token-level fit (``fit(X, token_types=ids)``).
        n_components, eps: as :class:`Whiten` (the paper keeps every dimension and does not regularise).

    Learned state: that of :class:`Whiten`, plus ``n_types_`` (token types in the fit corpus; None when the
    types were not given) and ``n_occurrences_``.

    Example:
        >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
        >>> types = np.array([7, 8, 8, 8, 9, 9])
        >>> ZipfianWhiten(weights="uniform").fit(X, token_types=types).mean_.tolist()  # type means, averaged
        [0.6666666666666666, 0.6666666666666666]
        >>> ZipfianWhiten().fit(X).mean_.tolist()  # occurrences, averaged
        [1.0, 0.6666666666666666]
    """

    name = "zipfian-whiten"
    order = 90
    default_level = "token"
    streams, scatter = True, True  # weights=zipf: the occurrences' mean and scatter (see streaming)

    def __init__(self, *, weights: str = "zipf", n_components: int | None = None, eps: float = 0.0) -> None:
        super().__init__(n_components=n_components, eps=eps)
        self.weights = weights

    def check(self, dim: int | None = None) -> None:
        """weights must be ``zipf`` or ``uniform``; n_components and eps as :class:`Whiten`."""
        super().check(dim)
        if self.weights not in WEIGHTS:
            self._refuse(f"weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")

    def needs_token_types(self) -> bool:
        """Uniform weights need each fit vector's token type; Zipfian weights are those of the occurrences."""
        return self.weights == "uniform"

    def streaming(self) -> bool:
        """``weights=zipf`` fits batch by batch: every occurrence weighs 1/N, so its statistics are the
        occurrences' mean and scatter, which accumulate as ``whiten``'s do. ``weights=uniform`` weighs an
        occurrence by its type's count in the whole fit corpus, so it fits on all of its vectors at once (a
        fit corpus over the budget is sampled)."""
        return self.weights == "zipf"

    def _from_moments(self, moments: Any) -> None:
        self._whiten(moments.mean.copy(), moments.scatter / moments.n)  # weights 1/N: ddof=0, as fit
        self.n_types_ = None
        self.n_occurrences_ = int(moments.n)

    def fit(self, X: np.ndarray, token_types: np.ndarray | None = None) -> ZipfianWhiten:
        """The weighted mean and covariance of the fit vectors, then :class:`Whiten`'s map. The covariance is one
        symmetric product (``Y^T Y`` with ``Y = sqrt(w) (X - mean)``, half the multiply-adds of a general one) of
        the one float64 copy of ``X`` (float32 input stays float32 until it is centred)."""
        X = self._check_fit_input(X, float64=False)
        n = len(X)
        if token_types is not None:
            token_types = np.asarray(token_types).reshape(-1)
            if len(token_types) != n:
                self._refuse(f"{len(token_types)} token types for {n} fit vectors; give one type per vector")
        if self.weights == "uniform" and token_types is None:
            self._refuse("weights=uniform needs the token type of every fit vector (a token-level fit gives "
                         "them); fit it at token level, or use weights=zipf")
        if self.weights == "zipf":  # every occurrence weighs 1/n
            mean = X.mean(axis=0, dtype=np.float64)
            Xc = X - mean
            scatter = gram(Xc, self.device) / n
        else:
            _, inverse, counts = np.unique(token_types, return_inverse=True, return_counts=True)
            w = 1.0 / (len(counts) * counts[inverse.reshape(-1)])
            mean = sum(w[i:i + _BLOCK] @ X[i:i + _BLOCK].astype(np.float64) for i in range(0, n, _BLOCK))
            Xc = X - mean
            Xc *= np.sqrt(w)[:, None]
            scatter = gram(Xc, self.device)
        del Xc
        self._whiten(mean, scatter)
        self.n_types_ = None if token_types is None else int(len(np.unique(token_types)))
        self.n_occurrences_ = int(n)
        return self
