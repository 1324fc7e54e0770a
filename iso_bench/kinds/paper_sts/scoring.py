"""Scoring of the papers' STS protocol: Spearman (and Pearson) correlation x 100 between predicted similarities
(cosines) and gold, per subset, and aggregated as

- ``all``: one correlation over the concatenation of a task's subsets (SimCSE, SBERT, MTEB's STS12-16);
- ``wmean``: one correlation per subset, averaged with weights = subset sizes (BERT-flow, BERT-whitening).

Example:
    >>> r = score_sts({"a": [1, 2, 3], "b": [1, 2]}, {"a": [0.1, 0.2, 0.3], "b": [0.9, 0.1]})
    >>> [round(c.spearman, 6) for c in (r.subsets["a"], r.subsets["b"], r.wmean)]   # (3*100 + 2*-100) / 5
    [100.0, -100.0, 20.0]
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Correlation:
    """Spearman and Pearson correlation x 100 over ``n`` pairs (NaN where undefined, e.g. constant input)."""

    n: int
    spearman: float
    pearson: float

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "spearman": self.spearman, "pearson": self.pearson}


@dataclass(frozen=True)
class STSScores:
    """Per-subset correlations, ``all`` (concatenated subsets) and ``wmean`` (size-weighted mean)."""

    subsets: dict[str, Correlation]
    all: Correlation
    wmean: Correlation

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts, for JSON."""
        return {
            "all": self.all.to_dict(),
            "wmean": self.wmean.to_dict(),
            "subsets": {k: v.to_dict() for k, v in self.subsets.items()},
        }


def _pair(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"{what}: need two 1-D arrays of the same length, got {a.shape} and {b.shape}")
    if a.size < 2:
        raise ValueError(f"{what}: a correlation needs at least 2 pairs, got {a.size}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError(f"{what}: non-finite values")
    return a, b


def _correlate(gold: Sequence[float] | np.ndarray, pred: Sequence[float] | np.ndarray, what: str) -> Correlation:
    from scipy import stats  # imported here: scipy.stats takes a few hundred ms to import

    g, p = _pair(gold, pred, what)
    with warnings.catch_warnings():  # constant input: the correlation is undefined, reported as NaN
        warnings.simplefilter("ignore")
        rho = float(stats.spearmanr(g, p).statistic)
        r = float(stats.pearsonr(g, p).statistic)
    return Correlation(n=int(g.size), spearman=100.0 * rho, pearson=100.0 * r)


def spearman100(gold: Sequence[float] | np.ndarray, pred: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation x 100 (ties get average ranks; NaN for constant input).

    Example:
        >>> spearman100([1, 2, 3], [0.5, 0.6, 0.9])
        100.0
    """
    return _correlate(gold, pred, "spearman100").spearman


def score_sts(
    gold: Mapping[str, Sequence[float] | np.ndarray], predicted: Mapping[str, Sequence[float] | np.ndarray]
) -> STSScores:
    """Correlations per subset, over all subsets concatenated (``all``) and size-weighted (``wmean``).

    ``gold`` maps subset name to gold scores (:attr:`STSDataset.gold`), ``predicted`` the same names to
    predicted similarities aligned with them. The two must cover exactly the same subsets: a missing
    subset is an error, never a silent omission. A NaN subset correlation makes ``wmean`` NaN.

    Example:
        >>> r = score_sts({"x": [1, 2, 3]}, {"x": [3, 2, 1]})
        >>> r.all.spearman, r.wmean.spearman
        (-100.0, -100.0)
    """
    if set(gold) != set(predicted):
        raise ValueError(f"gold and predicted cover different subsets: {sorted(gold)} vs {sorted(predicted)}")
    if not gold:
        raise ValueError("no subsets to score")
    per = {name: _correlate(gold[name], predicted[name], f"subset {name!r}") for name in gold}
    names = list(gold)
    whole = _correlate(
        np.concatenate([np.asarray(gold[k], dtype=np.float64) for k in names]),
        np.concatenate([np.asarray(predicted[k], dtype=np.float64) for k in names]),
        "all subsets",
    )
    n = np.array([per[k].n for k in names], dtype=np.float64)
    wmean = Correlation(
        n=int(n.sum()),
        spearman=float(np.dot(n, [per[k].spearman for k in names]) / n.sum()),
        pearson=float(np.dot(n, [per[k].pearson for k in names]) / n.sum()),
    )
    return STSScores(subsets=per, all=whole, wmean=wmean)
