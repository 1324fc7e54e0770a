"""Outlier ("tail") dimensions of an embedding space.

Luo (2020, arXiv 2011.04393) and Luo, Kulmizev & Mao (ACL 2021) found that a pre-trained masked
language model has a few dimensions whose value is, in almost every token vector, the smallest (or
the largest) of the vector, with a mean far from every other dimension's (BERT-base: 557 in the
paper, 308/381 in Hugging Face reproductions; RoBERTa-base: 588 and 77). They are a property of the
trained weights, so this module *detects* them from data and never hard-codes them.

Two statistics per dimension (after Luo 2020 and Luo, Kulmizev & Mao 2021):

* ``argmin_fraction[j]`` / ``argmax_fraction[j]``: the fraction of vectors in which ``j`` is the
  smallest / largest coordinate. Under isotropy every dimension scores about ``1/d``.
* ``mean_z[j]``: dimension ``j``'s mean value in standard deviations of the *other* dimensions'
  means (leave-one-out, so a huge outlier does not inflate the yardstick it is measured with).

It also holds the neuron-level analysis of Luo, Kulmizev & Mao (ACL 2021) over every layer of a model
(:func:`analyse`): which dimensions of each layer's token vectors are, almost always, the smallest or largest
coordinate, how far their mean lies from the other dimensions', and how their value changes with the token's
position. It streams over batches (every layer of every token is never held at once) and uses the same
detection as the ``clip`` method. :func:`iso_bench.report.write_outlier_reports` writes its reports.

Decoders carry another kind: a few dimensions of huge value at the first position only (BOS, or the first token:
"massive activations", outlier features of LLMs). Over all tokens such a dimension is the extreme of one vector in
a text's length, too rarely to be detected, and its mean is diluted; so each layer is also analysed over the
first-position vectors alone (:attr:`LayerReport.first_outliers`, the same rule), and per dimension
:attr:`LayerReport.first_share` is the share of its extreme values (the vectors in which it is the smallest or
largest coordinate) that lie at the first position: 1.0 for a first-position-only dimension.

Example:
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 64))
    >>> X[:, 7] -= 6.0
    >>> detect_outliers(X)
    [7]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iso_bench.registry import IsoBenchError

DEFAULT_MIN_Z = 3.0
"""Default ``min_z``: "several standard deviations" (Luo et al.). Among d means of isotropic data
``|z| >= 3`` happens by chance in ~0.3% of dimensions, and detection needs the fraction test as well."""


class OutlierError(IsoBenchError, ValueError):
    """The analysis cannot run as asked: a layer the model does not have, a corpus without tokens."""


@dataclass(frozen=True)
class OutlierStats:
    """Per-dimension outlier statistics of a set of vectors (all arrays have shape ``(dim,)``).

    Attributes:
        n_vectors: number of vectors the statistics were computed on.
        argmin_fraction: fraction of vectors in which the dimension is the smallest coordinate.
        argmax_fraction: fraction of vectors in which the dimension is the largest coordinate.
        mean: the dimension's mean value.
        std: the dimension's standard deviation.
        mean_z: ``(mean[j] - mean of the other means) / std of the other means`` (ddof=1).
    """

    n_vectors: int
    argmin_fraction: np.ndarray
    argmax_fraction: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    mean_z: np.ndarray

    @property
    def dim(self) -> int:
        return len(self.mean)

    @property
    def fraction(self) -> np.ndarray:
        """The larger of the argmin and argmax fractions, per dimension."""
        return np.maximum(self.argmin_fraction, self.argmax_fraction)

    def top(self, k: int = 10) -> list[int]:
        """The ``k`` dimensions with the largest :attr:`fraction` (ties broken by ``|mean_z|``)."""
        order = np.lexsort((-np.abs(self.mean_z), -self.fraction))
        return [int(j) for j in order[:k]]

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (lists of floats), for JSON reports."""
        return {
            "n_vectors": self.n_vectors,
            "argmin_fraction": self.argmin_fraction.tolist(),
            "argmax_fraction": self.argmax_fraction.tolist(),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "mean_z": self.mean_z.tolist(),
        }


def _as_matrix(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D array (n_vectors, dim), got shape {X.shape}")
    n, d = X.shape
    if n < 1:
        raise ValueError("outlier statistics need at least one vector, got 0")
    if d < 3:
        raise ValueError(f"outlier statistics need dim >= 3 (a leave-one-out std over the others), got {d}")
    if not np.isfinite(X).all():
        raise ValueError("input contains NaN or infinity")
    return X


def outlier_stats(X: np.ndarray) -> OutlierStats:
    """Compute the per-dimension outlier statistics of ``X`` (shape ``(n_vectors, dim)``).

    Cost O(n d). Ties for the smallest/largest coordinate go to the lowest index (``np.argmin``).

    Example:
        >>> s = outlier_stats(np.array([[0.0, 1.0, -5.0], [0.5, 2.0, -4.0]]))
        >>> s.argmin_fraction.tolist(), s.argmax_fraction.tolist()
        ([0.0, 0.0, 1.0], [0.0, 1.0, 0.0])
    """
    X = _as_matrix(X)
    n, d = X.shape
    return stats_from_moments(n, np.bincount(X.argmin(axis=1), minlength=d), np.bincount(X.argmax(axis=1), minlength=d),
                              X.mean(axis=0), X.std(axis=0))


def stats_from_moments(n: int, argmin_counts: np.ndarray, argmax_counts: np.ndarray, mean: np.ndarray,
                       std: np.ndarray) -> OutlierStats:
    """:class:`OutlierStats` from counts and moments accumulated over batches (for data too large to hold).

    Example:
        >>> s = stats_from_moments(2, np.array([0, 0, 2]), np.array([0, 2, 0]), np.zeros(3), np.ones(3))
        >>> s.argmin_fraction.tolist()
        [0.0, 0.0, 1.0]
    """
    d = len(mean)
    argmin_fraction = np.asarray(argmin_counts, dtype=np.float64) / n
    argmax_fraction = np.asarray(argmax_counts, dtype=np.float64) / n
    mean = np.asarray(mean, dtype=np.float64)
    std = np.asarray(std, dtype=np.float64)
    # leave-one-out mean and (ddof=1) std of the other d-1 means, computed directly per dimension:
    # the O(d) sum-of-squares shortcut cancels catastrophically when one mean dominates (the very
    # case this is for); d <= a few thousand makes the loop cost milliseconds
    mean_z = np.empty(d)
    for j in range(d):
        others = np.delete(mean, j)
        mu, sd = others.mean(), others.std(ddof=1)
        diff = mean[j] - mu
        if sd > 0:
            mean_z[j] = diff / sd
        else:  # all other means equal: a dimension that differs from them is infinitely far away
            mean_z[j] = 0.0 if diff == 0 else np.copysign(np.inf, diff)
    return OutlierStats(n, argmin_fraction, argmax_fraction, mean, std, mean_z)


def default_min_fraction(dim: int) -> float:
    """The default fraction threshold: ``min(0.5, max(10 / dim, 0.05))``.

    Why: under isotropy a dimension is the extreme of a vector with probability ``1/dim``, so ten
    times that is "far above 1/d" (with 300 vectors and dim 64 it is ~20 binomial standard
    deviations above chance). The floor of 5% keeps wide models honest (for dim 4096, 10/d is only
    0.24%); the ceiling of 50% keeps the rule satisfiable for small dims (dim <= 20). The published
    outliers are the extreme in nearly all token vectors, far above any of these thresholds.

    >>> default_min_fraction(768), default_min_fraction(64), default_min_fraction(8)
    (0.05, 0.15625, 0.5)
    """
    return min(0.5, max(10.0 / dim, 0.05))


def detect_outliers(
    X: np.ndarray | OutlierStats,
    min_fraction: float | None = None,
    min_z: float = DEFAULT_MIN_Z,
) -> list[int]:
    """Indices (ascending) of the outlier dimensions of ``X`` (or of precomputed statistics).

    A dimension is an outlier when **both** hold (the two criteria of Luo et al.):

    * it is the smallest or the largest coordinate in at least ``min_fraction`` of the vectors
      (default :func:`default_min_fraction`), and
    * its mean is at least ``min_z`` leave-one-out standard deviations from the other dimensions'
      means (default 3).

    Requiring both rejects a dimension that is merely high-variance (often the extreme, but its
    mean sits among the others') and one with a shifted mean that is rarely the extreme (its shift
    is small against the spread of the vectors).

    Caveat: ``mean_z`` is measured against the spread of the other dimensions' means. In real
    embeddings those differ far more than their sampling noise; in synthetic data whose dimensions
    all share one true mean the spread is sampling noise only, so a high-variance dimension gets a
    large ``|mean_z|`` by chance and only the fraction test protects it.

    Example:
        >>> rng = np.random.default_rng(1)
        >>> detect_outliers(rng.normal(size=(500, 32)))
        []
    """
    stats = X if isinstance(X, OutlierStats) else outlier_stats(X)
    if min_fraction is None:
        min_fraction = default_min_fraction(stats.dim)
    if not 0.0 < min_fraction <= 1.0:
        raise ValueError(f"min_fraction must be in (0, 1], got {min_fraction}")
    if min_z < 0:
        raise ValueError(f"min_z must be >= 0, got {min_z}")
    hit = (stats.fraction >= min_fraction) & (np.abs(stats.mean_z) >= min_z)
    return [int(j) for j in np.flatnonzero(hit)]


# ------------------------------------------------------------------ the per-layer analysis

MAX_POSITION = 64  # positions beyond this are pooled into the last bucket of the position profile


@dataclass
class LayerReport:
    """The analysis of one hidden-state layer (0 = embeddings)."""

    layer: int
    stats: OutlierStats
    outliers: list[int]
    position_mean: np.ndarray  # (MAX_POSITION, dim): mean value per token position (1 = first real token)
    position_count: np.ndarray  # (MAX_POSITION,)
    first: OutlierStats | None = None  # the statistics of the first-position vectors alone
    first_outliers: list[int] = field(default_factory=list)  # the outliers among them (detect_outliers)
    first_share: np.ndarray | None = None  # (dim,): share of the dimension's extreme values at the first position

    def position_correlation(self, dim: int) -> float:
        """Pearson correlation between token position and the dimension's mean value at that position."""
        have = self.position_count > 0
        pos = np.arange(1, MAX_POSITION + 1)[have]
        values = self.position_mean[have, dim]
        if len(pos) < 3 or values.std() == 0:
            return float("nan")
        return float(np.corrcoef(pos, values)[0, 1])

    def share(self, dim: int) -> float | None:
        """:attr:`first_share` of ``dim``; None where it is never the extreme (or none was measured)."""
        value = float("nan") if self.first_share is None else float(self.first_share[dim])
        return _finite_or_none(value)

    def top(self, k: int) -> list[dict[str, Any]]:
        """The ``k`` dimensions most often extreme, then any first-position outlier not among them."""
        rows = []
        for j in [*self.stats.top(k), *(j for j in self.first_outliers if j not in self.stats.top(k))]:
            rows.append({
                "dim": j,
                "argmin_fraction": float(self.stats.argmin_fraction[j]),
                "argmax_fraction": float(self.stats.argmax_fraction[j]),
                "mean": float(self.stats.mean[j]),
                "mean_z": float(self.stats.mean_z[j]),
                "position_correlation": _finite_or_none(self.position_correlation(j)),
                "outlier": j in self.outliers,
                "first_share": self.share(j),
                "first_outlier": j in self.first_outliers,
            })
        return rows


@dataclass
class OutlierReport:
    """The per-layer analysis of one model on one corpus (:func:`analyse`); ``to_dict`` is its JSON form."""

    model: str
    revision: str
    corpus: str
    n_texts: int
    n_tokens: int
    layers: list[LayerReport] = field(default_factory=list)
    tokens: str = "special tokens excluded"  # which token vectors were analysed
    extraction: dict[str, Any] = field(default_factory=dict)  # how the network was run (its dtype, when not float32)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        return {
            "model": self.model, "revision": self.revision, "corpus": self.corpus,
            "n_texts": self.n_texts, "n_tokens": self.n_tokens, "tokens": self.tokens, **self.extraction,
            "detection": "fraction as argmin/argmax >= max(10/d, 0.05) (capped at 0.5) and |mean z| >= 3",
            "layers": [{"layer": r.layer, "outliers": r.outliers, "first_position_outliers": r.first_outliers,
                        "top": r.top(top),
                        "position_profile": {str(j): _rounded(r.position_mean[r.position_count > 0, j])
                                             for j in r.outliers}} for r in self.layers],
        }


def _finite_or_none(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in values]


def analyse(backbone: Any, texts: Sequence[str], layers: Sequence[int] | None = None, *, batch_size: int = 32,
            progress: bool = True, corpus: str = "") -> OutlierReport:
    """Accumulate per-layer statistics of every real token vector of ``texts``; see the module doc.

    ``backbone`` is an :class:`iso_bench.backbones.hf_backbone.Backbone` (or anything with ``model.config``, ``dim``,
    ``model_id``, ``revision`` and ``iter_hidden_states``; ``decoder`` true where its first position and special
    tokens are analysed too, ``describe()`` for the precision it ran in).

    >>> report = analyse(backbone, sentences, layers=None)           # doctest: +SKIP
    >>> report.layers[-1].outliers                                   # doctest: +SKIP
    [308, 381]
    """
    n_states = backbone.model.config.num_hidden_layers + 1
    wanted = list(range(n_states)) if layers is None else [lay % n_states for lay in layers]
    for lay in layers or []:
        if not -n_states <= lay < n_states:
            raise OutlierError(f"layer {lay} does not exist: the model has hidden states 0..{n_states - 1}")
    d = backbone.dim
    acc = {lay: {"all": _Moments(d), "first": _Moments(d), "pos_sum": np.zeros((MAX_POSITION, d)),
                 "pos_n": np.zeros(MAX_POSITION, np.int64)} for lay in wanted}
    for states, real in backbone.iter_hidden_states(texts, batch_size=batch_size, progress=progress,
                                                    desc="outlier analysis"):
        position = np.minimum(np.cumsum(real, axis=1), MAX_POSITION)[real] - 1  # 0-based bucket per real token
        for lay in wanted:
            X = states[lay][real].astype(np.float64)
            a = acc[lay]
            a["all"].add(X)
            a["first"].add(X[position == 0])
            np.add.at(a["pos_sum"], position, X)
            a["pos_n"] += np.bincount(position, minlength=MAX_POSITION)
    tokens = "every token, the first position and special tokens included" if getattr(backbone, "decoder", False) \
        else "special tokens excluded"
    extraction = backbone.describe().get("extraction", {}) if hasattr(backbone, "describe") else {}
    report = OutlierReport(backbone.model_id, str(backbone.revision), corpus, len(texts), acc[wanted[0]]["all"].n,
                           tokens=tokens, extraction={"dtype": extraction["dtype"]} if "dtype" in extraction else {})
    if report.n_tokens == 0:
        raise OutlierError("the corpus has no tokens to analyse")
    for lay in wanted:
        a = acc[lay]
        stats, first = a["all"].stats(), a["first"].stats()
        extremes = a["all"].argmin + a["all"].argmax
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(extremes > 0, (a["first"].argmin + a["first"].argmax) / extremes, np.nan)
        pos_mean = a["pos_sum"] / np.maximum(a["pos_n"], 1)[:, None]
        report.layers.append(LayerReport(lay, stats, detect_outliers(stats), pos_mean, a["pos_n"], first,
                                         detect_outliers(first), share))
    return report


class _Moments:
    """Counts and sums of a stream of vectors, for :func:`stats_from_moments`."""

    def __init__(self, d: int) -> None:
        self.n = 0
        self.argmin, self.argmax = np.zeros(d, np.int64), np.zeros(d, np.int64)
        self.sum, self.sumsq = np.zeros(d), np.zeros(d)

    def add(self, X: np.ndarray) -> None:
        if not len(X):
            return
        d = X.shape[1]
        self.n += len(X)
        self.argmin += np.bincount(X.argmin(axis=1), minlength=d)
        self.argmax += np.bincount(X.argmax(axis=1), minlength=d)
        self.sum += X.sum(0)
        self.sumsq += (X * X).sum(0)

    def stats(self) -> OutlierStats:
        n = max(self.n, 1)
        mean = self.sum / n
        return stats_from_moments(n, self.argmin, self.argmax, mean, np.sqrt(np.maximum(self.sumsq / n - mean * mean,
                                                                                       0.0)))
