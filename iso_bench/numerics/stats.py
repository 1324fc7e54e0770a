"""Bootstrap confidence intervals for main scores, and paired variant-vs-raw differences with p-values.

Every task type is measured the same way: its per-instance outputs form a table of *units* (rows) and
its main score is a function of that table. Resampling units with replacement (percentile bootstrap)
gives a 95% interval for the score; scoring a variant and the raw encoder on the *same* resampled units
gives a paired interval and p-value for their difference, far narrower than two separate intervals.

Statistics by name, each vectorised over a batch of resamples (an index matrix ``(B, n)``):

* ``"spearman"`` -- units ``(n, 2)``: predicted similarity, gold. Ties get average ranks, as in
  :func:`scipy.stats.spearmanr` (STS).
* ``"wmean"`` -- the same units and ``strata`` (each unit's subset): per-subset Spearman averaged with
  subset sizes as weights; resampling is stratified, so the sizes stay fixed.
* ``"mean"`` -- units ``(n,)``: accuracy from 0/1 correctness, WSD F1 as mean correctness when every
  instance is answered, a retrieval metric as the mean per-query metric.
* ``"max_ap"`` -- units ``(n, k + 1)``: ``k`` similarity columns (higher = more similar: negate a
  distance), a 0/1 label last; the largest :func:`sklearn.metrics.average_precision_score` over the
  columns (pair classification).

Any python callable ``score(units) -> float`` works too, called once per resample. Scores are
fractions (0.8, not 80). NaN or infinite units are refused. A resample on which the statistic is
undefined (a constant column for Spearman, no positive label for average precision, a non-finite value
from a callable) is left out and counted in ``n_undefined``; more than ``max_undefined`` (1%) is an error.

Example:
    >>> rng = np.random.default_rng(0)
    >>> gold = rng.normal(size=300)
    >>> raw = np.column_stack([gold + rng.normal(size=300), gold])
    >>> better = np.column_stack([gold + 0.5 * rng.normal(size=300), gold])
    >>> ci = confidence_interval(raw, "spearman", n_resamples=500)
    >>> cmp = paired_difference(better, raw, "spearman", n_resamples=500)
    >>> bool(ci.low < ci.estimate < ci.high), bool(cmp.low > 0 and cmp.p_value < 0.01)
    (True, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from iso_bench.numerics.batch_scores import (  # noqa: F401 - the statistics and their error are part of this module's API
    _BLOCK_ELEMENTS,
    Labels,
    StatsError,
    _in_blocks,
    _strata_codes,
    max_ap,
    mean,
    spearman,
    wmean_spearman,
)
from iso_bench.registry import did_you_mean

MIN_UNITS = 3
Score = str | Callable[[np.ndarray], float]  # a statistic's name, or a python score(units) -> float


@dataclass(frozen=True)
class Interval:
    """Percentile-bootstrap interval: ``estimate`` on the full sample, ``[low, high]`` at ``level``.

    ``n_undefined`` resamples, where the statistic was undefined, were left out.
    """

    estimate: float
    low: float
    high: float
    n_resamples: int
    seed: int
    level: float
    method: str = "percentile"
    n_undefined: int = 0


@dataclass(frozen=True)
class Comparison:
    """Paired bootstrap of ``difference = estimate_a - estimate_b``: percentile interval, two-sided p-value."""

    difference: float
    low: float
    high: float
    p_value: float
    estimate_a: float
    estimate_b: float
    n_resamples: int
    seed: int
    level: float
    method: str = "percentile"
    n_undefined: int = 0


def _whole(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise StatsError(f"{what}: need an integer >= {minimum}, got {value!r}")
    return int(value)


def bootstrap_indices(n: int, n_resamples: int, seed: int, strata: Labels | None = None) -> np.ndarray:
    """``(n_resamples, n)`` unit indices drawn with replacement from ``np.random.default_rng(seed)``.

    With ``strata`` (one label per unit), column ``j`` draws only units of unit ``j``'s stratum, so every
    resample keeps the subset sizes; strata are drawn in sorted label order, so the draw is reproducible.

    >>> idx = bootstrap_indices(5, 2, seed=0, strata=["a", "a", "b", "b", "b"])
    >>> idx.shape, bool((idx[:, :2] < 2).all() and (idx[:, 2:] >= 2).all())
    ((2, 5), True)
    """
    n, n_resamples = _whole(n, "n", 1), _whole(n_resamples, "n_resamples", 1)
    codes = None if strata is None else _strata_codes(strata, n)
    key = (n, n_resamples, seed, None if codes is None else hashlib.sha256(codes.tobytes()).hexdigest())
    if _LAST_DRAW.get("key") != key:
        _LAST_DRAW.clear()
        idx = _draw(n, n_resamples, seed, codes)
        idx.flags.writeable = False  # shared by the callers that ask for the same draw
        _LAST_DRAW.update(key=key, idx=idx)
    return _LAST_DRAW["idx"]


_LAST_DRAW: dict[str, Any] = {}
"""The last draw of :func:`bootstrap_indices`: the variants of a run score one task after another on the same
resamples, so each task's matrix is drawn once."""


def _draw(n: int, n_resamples: int, seed: int, codes: np.ndarray | None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = np.int32 if n < 2**31 else np.int64  # half the memory traffic of int64
    if codes is None:
        return rng.integers(0, n, size=(n_resamples, n), dtype=dtype)
    idx = np.empty((n_resamples, n), dtype=dtype)
    for s in range(int(codes.max()) + 1):
        members = np.flatnonzero(codes == s).astype(dtype)
        idx[:, members] = members[rng.integers(0, members.size, size=(n_resamples, members.size), dtype=dtype)]
    return idx


@dataclass(frozen=True)
class _Stat:
    """How a statistic reads its units: the batch scorer, the shape, the column aligned variants share."""

    name: str
    batch: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]
    shape: str = ""  # "(n, 2)", "(n,)", "(n, k + 1)" or "" (any)
    gold_column: int | None = None
    undefined_when: str = "it returned a non-finite value"


_STATS = {
    "spearman": _Stat("spearman", lambda u, i, s: spearman(u, i), "(n, 2)", 1, "a constant column"),
    "wmean": _Stat("wmean", wmean_spearman, "(n, 2)", 1, "a constant column within a subset"),
    "mean": _Stat("mean", lambda u, i, s: mean(u, i), "(n,)"),
    "max_ap": _Stat("max_ap", lambda u, i, s: max_ap(u, i), "(n, k + 1)", -1, "no positive label"),
}
STATISTICS = tuple(_STATS)


def _resolve(statistic: Score) -> _Stat:
    if isinstance(statistic, str) and statistic in _STATS:
        return _STATS[statistic]
    if callable(statistic):
        def loop(units: np.ndarray, idx: np.ndarray, strata: np.ndarray | None) -> np.ndarray:
            out = np.array([float(statistic(units[row])) for row in idx], dtype=np.float64)
            return np.where(np.isfinite(out), out, np.nan)

        return _Stat(getattr(statistic, "__name__", "callable"), loop)
    hint = did_you_mean(statistic, _STATS) if isinstance(statistic, str) else ""
    raise StatsError(f"unknown statistic {statistic!r}.{hint} Known: {', '.join(STATISTICS)}, "
                     "or pass a callable score(units) -> float.")


def _prepare(units: np.ndarray, stat: _Stat, what: str) -> np.ndarray:
    """``units`` as a finite float64 array of at least :data:`MIN_UNITS` rows, shaped as ``stat`` reads it."""
    try:
        u = np.asarray(units, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise StatsError(f"{what}: need a numeric table of units ({e})") from None
    if stat.shape == "(n,)" and u.ndim == 2 and u.shape[1] == 1:
        u = u[:, 0]
    ok = {"(n, 2)": u.ndim == 2 and u.shape[1] == 2, "(n,)": u.ndim == 1,
          "(n, k + 1)": u.ndim == 2 and u.shape[1] >= 2}.get(stat.shape, u.ndim >= 1)
    if not ok:
        raise StatsError(f"{what}: {stat.name} needs units shaped {stat.shape} (see iso_bench.numerics.stats); "
                         f"got {u.shape}")
    if u.shape[0] < MIN_UNITS:
        raise StatsError(f"{what}: a bootstrap needs at least {MIN_UNITS} units, got {u.shape[0]}")
    bad = np.flatnonzero(~np.isfinite(u.reshape(u.shape[0], -1)).all(axis=1))
    if bad.size:
        raise StatsError(f"{what}: {bad.size} unit(s) hold NaN or infinity (first: row {bad[0]}); "
                         "drop or fix them, in every variant alike, before scoring")
    if stat.shape == "(n, k + 1)" and not np.isin(u[:, -1], (0.0, 1.0)).all():
        raise StatsError(f"{what}: the last column of {stat.name} units must be a 0/1 label")
    return u


def _strata_for(stat: _Stat, strata: Labels | None, n: int) -> np.ndarray | None:
    if strata is None:
        if stat.name == "wmean":
            raise StatsError("wmean: pass strata=, the subset label of every unit")
        return None
    codes = _strata_codes(strata, n)
    if stat.name == "wmean" and np.bincount(codes).min() < MIN_UNITS:
        raise StatsError(f"strata: each subset needs at least {MIN_UNITS} units for wmean; "
                         f"the smallest has {np.bincount(codes).min()}")
    return codes


def _full(u: np.ndarray, stat: _Stat, codes: np.ndarray | None, what: str) -> float:
    value = float(stat.batch(u, np.arange(u.shape[0])[None, :], codes)[0])
    if not np.isfinite(value):
        raise StatsError(f"{what}: {stat.name} is undefined on the full sample ({stat.undefined_when}); "
                         "there is no score to put an interval around")
    return value


def _check_aligned(a: np.ndarray, b: np.ndarray, stat: _Stat) -> None:
    fix = "pass both variants' units for the same instances in the same order"
    if a.shape != b.shape:
        raise StatsError(f"units_a and units_b are not aligned: shapes {a.shape} and {b.shape}; {fix}")
    if stat.gold_column is not None:
        differ = np.flatnonzero(a[:, stat.gold_column] != b[:, stat.gold_column])
        if differ.size:
            raise StatsError(f"units_a and units_b are not aligned: the gold column differs at {differ.size} of "
                             f"{a.shape[0]} units (first: row {differ[0]}); {fix}")


def _bootstrap(tables: dict[str, np.ndarray], statistic: Score, n_resamples: int, seed: int, level: float,
               strata: Labels | None, max_undefined: float) -> tuple[list[float], np.ndarray, int]:
    """Full-sample estimates, and the finite resampled values ``(B', tables)`` on shared resample indices.

    A resample on which any table's statistic is undefined is left out; its count comes back last.
    """
    _whole(seed, "seed", 0)
    if not 0.0 < level < 1.0:
        raise StatsError(f"level: need a confidence level strictly between 0 and 1 (e.g. 0.95), got {level!r}")
    if not 0.0 <= max_undefined < 1.0:
        raise StatsError(f"max_undefined: need a fraction in [0, 1), got {max_undefined!r}")
    stat = _resolve(statistic)
    units = {what: _prepare(u, stat, what) for what, u in tables.items()}
    if len(units) == 2:
        _check_aligned(*units.values(), stat)
    n = next(iter(units.values())).shape[0]
    codes = _strata_for(stat, strata, n)
    estimates = [_full(u, stat, codes, what) for what, u in units.items()]
    idx = bootstrap_indices(n, n_resamples, seed, codes)
    values = np.column_stack([stat.batch(u, idx, codes) for u in units.values()])
    ok = np.isfinite(values).all(axis=1)
    missing = int(n_resamples - ok.sum())
    if missing > max_undefined * n_resamples or not ok.any():
        raise StatsError(f"{' or '.join(units)}: {stat.name} is undefined ({stat.undefined_when}) on {missing} of "
                         f"{n_resamples} resamples, more than the {max_undefined:.0%} allowed; give more units (or "
                         "fewer ties) or raise max_undefined")
    return estimates, values[ok], missing


def percentile_bounds(values: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval ``(low, high)`` of resampled values at confidence ``level``."""
    low, high = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)


def paired_p_value(differences: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "no difference" from resampled differences (see :func:`paired_difference`)."""
    tail = int(min(np.count_nonzero(differences <= 0), np.count_nonzero(differences >= 0)))
    return min(1.0, 2.0 * (1 + tail) / (differences.size + 1))


def confidence_interval(units: np.ndarray, statistic: Score, n_resamples: int = 1000, seed: int = 0,
                        level: float = 0.95, strata: Labels | None = None, max_undefined: float = 0.01) -> Interval:
    """Percentile-bootstrap interval of a main score: ``estimate`` on the full sample and ``[low, high]``.

    ``strata`` (one label per unit) makes the resampling stratified; ``"wmean"`` requires it.

    >>> ci = confidence_interval(np.arange(100.0) % 2, "mean", n_resamples=200, seed=1)
    >>> ci.estimate, bool(0.35 < ci.low < 0.5 < ci.high < 0.65)
    (0.5, True)
    """
    (value,), values, missing = _bootstrap({"units": units}, statistic, n_resamples, seed, level, strata,
                                           max_undefined)
    return Interval(value, *percentile_bounds(values[:, 0], level), int(n_resamples), int(seed), float(level),
                    n_undefined=missing)


def paired_difference(units_a: np.ndarray, units_b: np.ndarray, statistic: Score, n_resamples: int = 1000,
                      seed: int = 0, level: float = 0.95, strata: Labels | None = None,
                      max_undefined: float = 0.01) -> Comparison:
    """Paired bootstrap of ``score(units_a) - score(units_b)`` (a variant minus the raw encoder).

    Both variants are scored on the same resampled unit indices, so their units must be aligned: the
    same instances in the same order (same shape, same gold column); anything else is refused. A
    resample undefined for either variant is left out for both.

    The two-sided p-value of "no difference" is ``min(1, 2 * (1 + t) / (m + 1))`` with ``t`` the smaller
    of ``#{d* <= 0}`` and ``#{d* >= 0}`` over the ``m`` defined resampled differences ``d*``: twice the
    smaller bootstrap tail beyond zero, about the smallest ``1 - level`` at which the percentile interval
    would exclude 0. The +1 keeps it above 0 (the least is ``2 / (m + 1)``); zeros count in both tails,
    so two identical variants get 1.

    >>> a = np.array([1.0, 1, 0, 1, 1, 0, 1, 1])
    >>> cmp = paired_difference(a, a, "mean", n_resamples=100)
    >>> cmp.difference, cmp.low, cmp.high, cmp.p_value
    (0.0, 0.0, 0.0, 1.0)
    """
    (est_a, est_b), values, missing = _bootstrap({"units_a": units_a, "units_b": units_b}, statistic, n_resamples,
                                                 seed, level, strata, max_undefined)
    d = values[:, 0] - values[:, 1]
    return Comparison(est_a - est_b, *percentile_bounds(d, level), paired_p_value(d), est_a, est_b,
                      int(n_resamples), int(seed), float(level), n_undefined=missing)


def benjamini_hochberg(p_values: np.ndarray | list) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), as ``scipy.stats.false_discovery_control(p)``.

    ``q_(i) = min over j >= i of p_(j) * m / j`` over the ascending p-values, capped at 1, in input order.

    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.5])
    array([0.04      , 0.05333333, 0.05333333, 0.5       ])
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise StatsError(f"p_values: need a 1-D list of p-values, got shape {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all()):
        raise StatsError("p_values: every p-value must be a number in [0, 1] (no NaN); fix the failed comparisons")
    order = np.argsort(p, kind="stable")
    scaled = p[order] * p.size / np.arange(1, p.size + 1)
    q = np.empty_like(p)
    q[order] = np.minimum(np.minimum.accumulate(scaled[::-1])[::-1], 1.0)
    return q


def significant(p_values: np.ndarray | list, alpha: float = 0.05) -> np.ndarray:
    """Which comparisons stay significant at false discovery rate ``alpha`` (BH q-value <= ``alpha``).

    >>> significant([0.01, 0.04, 0.03, 0.5]).tolist()
    [True, False, False, False]
    """
    if not 0.0 < alpha < 1.0:
        raise StatsError(f"alpha: need a false discovery rate strictly between 0 and 1, got {alpha!r}")
    return benjamini_hochberg(p_values) <= alpha


# ---- the units of one score entry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Units:
    """The units of one score entry: ``units`` (n rows) and the ``statistic`` whose value on all of them is
    the main score (rounded to ``decimals`` where mteb rounds it); ``strata`` (one code per unit, named by
    ``strata_names``) when resampling keeps subsets apart."""

    units: np.ndarray
    statistic: str
    strata: np.ndarray | None = None
    strata_names: tuple[str, ...] = ()
    decimals: int | None = None

    def __post_init__(self) -> None:
        u = np.asarray(self.units, dtype=np.float64)
        object.__setattr__(self, "units", u.reshape(len(u), -1))
        if self.strata is not None:
            object.__setattr__(self, "strata", np.asarray(self.strata, dtype=np.int64))

    def main_value(self) -> float:
        """The statistic on every unit (rounded as mteb rounds): what the main score must equal."""
        u, idx = self.units, np.arange(len(self.units))[None, :]
        batch = {"spearman": spearman, "max_ap": max_ap, "mean": lambda v, i: mean(v[:, 0], i),
                 "wmean": lambda v, i: wmean_spearman(v, i, self.strata)}.get(self.statistic)
        value = float(batch(u, idx)[0]) if batch else float(CUSTOM[self.statistic](u))
        return value if self.decimals is None else round(value, self.decimals)


# ---- statistics without a batch implementation above -----------------------------------------------------------


def max_accuracy(units: np.ndarray) -> float:
    """Best-threshold accuracy over the score columns ``units[:, :-1]`` (label last), as mteb's pair
    classification finds it: thresholds lie between distinct adjacent scores only (never splitting ties),
    pairs above one are predicted similar, and the best accuracy starts at 0.

    >>> max_accuracy(np.array([[0.9, 1], [0.8, 0], [0.7, 1], [0.1, 0]]))   # cut below 0.7: 3 of 4 right
    0.75
    """
    labels = units[:, -1]
    n, negatives, best = len(labels), float(len(labels) - labels.sum()), 0.0
    for column in units[:, :-1].T:
        order = np.argsort(-column, kind="stable")
        s, y = column[order], labels[order]
        cuts = np.flatnonzero(s[:-1] != s[1:])
        if cuts.size:
            above = np.cumsum(y)[cuts]
            best = max(best, float(((above + negatives - (cuts + 1 - above)) / n).max()))
    return best


def wsd_f1(units: np.ndarray) -> float:
    """F1 of the WSD scorer from per-instance ``[correct, answered]``: P = C/A, R = C/N, F1 = 2PR/(P+R)
    (0 when P + R is 0; NaN when nothing is answered), as ``Scorer.java`` computes it.

    >>> wsd_f1(np.array([[1.0, 1], [0, 1], [0, 0]]))   # P 1/2, R 1/3
    0.4
    """
    correct, answered = float(units[:, 0].sum()), float(units[:, 1].sum())
    p, r = (correct / answered if answered else float("nan")), correct / len(units)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


CUSTOM = {"max_accuracy": max_accuracy, "wsd_f1": wsd_f1}


def statistic_of(name: str) -> Score:
    """What :func:`confidence_interval` takes for a recorded statistic name: the name itself
    for its named statistics, the python function for :data:`CUSTOM` ones."""
    return CUSTOM.get(name, name)
