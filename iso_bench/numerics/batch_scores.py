"""The statistics of :mod:`iso_bench.numerics.stats`, each scored on a batch of resamples at once: an index matrix
``(B, n)`` of drawn units in, ``B`` scores out, in blocks of bounded memory. Spearman's ranks are computed by
counting, never sorting a resample, and the ranks of a task's gold column are kept for the next variant; a
leaderboard's many variants take one compiled pass over each resample (numba), a run's few array operations.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)

_BLOCK_ELEMENTS = 1 << 18
"""Resamples are scored in blocks of about this many drawn units: bounded memory, and a block's arrays (a few MB)
stay in the CPU's cache and reuse the allocator's pages (blocks of 2**21 units took twice as long)."""
Labels = np.ndarray | list  # one subset label per unit


class StatsError(IsoBenchError, ValueError):
    """Bad input to a statistic: NaN, too few units, misaligned variants, too many undefined resamples."""


def _strata_codes(strata: Labels, n: int) -> np.ndarray:
    """Integer code ``0..S-1`` of each unit's stratum (labels in sorted order), one per unit."""
    labels = np.asarray(strata)
    if labels.shape != (n,):
        raise StatsError(f"strata: need one subset label per unit, shape ({n},); got shape {labels.shape}")
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise StatsError("strata: contains NaN or infinity; give every unit a subset label")
    return np.unique(labels, return_inverse=True)[1].reshape(n)


def _in_blocks(score: Callable[[np.ndarray], np.ndarray], idx: np.ndarray) -> np.ndarray:
    """``score`` applied to blocks of resamples (rows of ``idx``), concatenated."""
    step = max(1, _BLOCK_ELEMENTS // max(1, idx.shape[1]))
    return np.concatenate([score(idx[i:i + step]) for i in range(0, idx.shape[0], step)]).astype(np.float64)


def _group_counts(codes: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``(B, k)`` per-row histogram of the group codes ``(B, m)`` (sums of ``weights`` when given)."""
    flat = (codes + k * np.arange(codes.shape[0])[:, None]).ravel()
    counts = np.bincount(flat, weights=None if weights is None else weights.ravel(), minlength=codes.shape[0] * k)
    return counts.reshape(codes.shape[0], k)


def _ranker(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """How :func:`_centred_ranks` ranks ``values``: their sort order; the start of each run of equal values in
    it (None without ties); per unit, where its count lies (its position in the order, or its run's)."""
    order = np.argsort(values, kind="stable")
    new = np.r_[True, values[order][1:] != values[order][:-1]]
    if new.all():
        return order, None, np.argsort(order)
    codes = np.empty(values.size, dtype=np.intp)
    codes[order] = np.cumsum(new) - 1
    return order, np.flatnonzero(new), codes


def _centred_ranks(weights: np.ndarray, ranker: tuple[np.ndarray, np.ndarray | None, np.ndarray]) -> np.ndarray:
    """2 x (average rank - (n + 1) / 2) of each unit, in every resample of n draws whose unit multiplicities are
    the rows of ``weights`` ``(B, n)``, never sorting a resample: the number drawn below the unit twice, plus the number
    equal to it, minus n, ties getting average ranks as in :func:`scipy.stats.rankdata`. ``ranker``: the sort
    order of the full sample (:func:`_ranker`), which fixes every resample's.

    >>> _centred_ranks(np.array([[1, 2, 0]]), _ranker(np.array([2.0, 0.0, 1.0])))  # ranks 3, 1.5 (2: not drawn)
    array([[ 2, -1,  1]], dtype=int32)
    """
    order, starts, back = ranker
    counts = np.take(weights, order, axis=1)
    ranks = np.cumsum(counts, axis=1, dtype=np.int32)
    if starts is not None:  # per run of equal values: the count up to its end, and its own (integers: exact)
        ranks = np.take(ranks, np.r_[starts[1:], weights.shape[1]] - 1, axis=1)
        counts = np.diff(ranks, axis=1, prepend=np.int32(0))
    ranks *= 2
    ranks -= counts
    ranks -= weights.shape[1]
    return np.take(ranks, back, axis=1)


def spearman(units: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Spearman correlation of columns 0 and 1 of ``units[idx[b]]`` for each resample ``b``; NaN if constant.

    >>> units = np.array([[0.1, 1.0], [0.4, 2.0], [0.3, 3.0], [0.9, 4.0]])
    >>> spearman(units, np.array([[0, 1, 2, 3], [0, 0, 0, 0]]))
    array([0.8, nan])
    """
    return spearman_together([units[:, 0]], units[:, 1], idx)[0]


def spearman_together(predictions: list[np.ndarray], gold: np.ndarray, idx: np.ndarray, threads: int = 1,
                      compiled: bool | None = None) -> np.ndarray:
    """``(len(predictions), B)``: the Spearman correlation of each prediction column with ``gold`` on each
    resample of ``idx`` (NaN where a column is constant): each row the numbers :func:`spearman` gives alone.

    A resample is read as the multiplicity of each unit, so a prediction's ranks take one sort order of the full
    sample and a pass over each resample in that order. The multiplicities and the gold's ranks are computed once
    for a task's variants (:func:`_gold_terms`). The pass is compiled (:func:`_rho_rows_py`, numba; each block's
    resamples split among ``threads`` threads) or made of array operations (:func:`_array_rows`). ``compiled``
    None chooses by the call's size alone: the compiled pass from :data:`COMPILE_AT` drawn units (a leaderboard's
    task of many variants, at about a quarter of the time), the array operations below it (a run's few intervals,
    a test's small tasks: nothing to import or compile), and where numba cannot be imported. Every sum is of
    integers, exact in either (below about 200,000 units), and rounded once to float64: the numbers do not depend
    on the pass, the thread count, how the resamples are blocked, which variants are drawn together, or the CPU.
    """
    if compiled is None:
        compiled = len(predictions) * idx.size >= COMPILE_AT
    rho_rows = _kernel() if compiled else None
    if rho_rows is None:
        return _array_rows(predictions, gold, idx)
    runs = [_runs(np.asarray(p)) for p in predictions]
    out = np.empty((len(predictions), idx.shape[0]))
    for start, (weights, wy, vy) in _gold_terms(gold, idx):
        b = weights.shape[0]
        parts = max(1, min(threads, b, weights.size // _PART_ELEMENTS))
        cuts = [b * t // parts for t in range(parts + 1)]
        for k, (order, ends) in enumerate(runs):
            row = out[k, start:start + b]
            if parts == 1:
                rho_rows(weights, wy, vy, order, ends, row)
                continue
            parts_of = [(weights[i:j], wy[i:j], vy[i:j], order, ends, row[i:j])  # each thread its own rows
                        for i, j in zip(cuts[:-1], cuts[1:], strict=True)]
            list(_pool(parts).map(rho_rows, *zip(*parts_of, strict=True)))
    return out


def _array_rows(predictions: list[np.ndarray], gold: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:func:`spearman_together` in array operations: a prediction's centred ranks in every resample of a block
    (:func:`_centred_ranks`: a gather, a cumulative sum, two more gathers), then two dot products a row, summed in
    float64 (integers below 2**53: exact)."""
    rankers = [_ranker(np.asarray(p)) for p in predictions]
    out = np.empty((len(predictions), idx.shape[0]))
    for start, (weights, wy, vy) in _gold_terms(gold, idx):
        for k, ranker in enumerate(rankers):
            rx = _centred_ranks(weights, ranker).astype(np.float64)
            vx = np.einsum("ij,ij->i", weights * rx, rx)
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = np.einsum("ij,ij->i", wy, rx) / np.sqrt(vx * vy)
            rho[(vx == 0) | (vy == 0)] = np.nan
            out[k, start:start + weights.shape[0]] = np.clip(rho, -1.0, 1.0)
    return out


COMPILE_AT = 1 << 25
"""Drawn units (resamples x units x predictions) from which a call takes the compiled pass: about 0.4 s of array
operations. numba's import and compilation (about 2.6 s, once a process) are repaid by a leaderboard's many such
calls; a run's verdict over real tasks may pay them once, beside minutes of encoding."""
_PART_ELEMENTS = 1 << 14
"""A block of resamples is split among threads only where each gets at least this many drawn units (a few tens of
microseconds of work, several times a thread's hand-off)."""
_POOL: dict[int, ThreadPoolExecutor] = {}


def _pool(threads: int) -> ThreadPoolExecutor:
    """A pool of ``threads`` threads, made once (the compiled pass releases the GIL)."""
    if threads not in _POOL:
        _POOL[threads] = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="iso-bench-spearman")
    return _POOL[threads]


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sort order of ``values`` and the end (exclusive) of each run of equal values in it: a unit's rank in
    any resample is the count drawn below its run plus half its run's count drawn (:func:`_rho_rows_py`)."""
    order = np.argsort(values, kind="stable")
    ends = np.flatnonzero(np.r_[values[order][1:] != values[order][:-1], True]) + 1
    return order.astype(np.int64), ends.astype(np.int64)


def _rho_rows_py(weights: np.ndarray, wy: np.ndarray, vy: np.ndarray, order: np.ndarray, ends: np.ndarray,
                 out: np.ndarray) -> None:
    """Spearman's rho of a prediction with the gold on each resample row of ``weights`` (each unit's multiplicity)
    into ``out``: per run of equal predictions in sort order, its units' centred rank r = 2 x (average rank -
    (n + 1) / 2) = (count drawn below the run) + (count drawn up to its end) - n; then sum(w r r) and
    sum(wy r) (``wy``: multiplicity x the gold's centred rank) in int64, in one pass, and rho = sum(wy r) /
    sqrt(sum(w r r) x ``vy``), NaN where either sum of squares is 0, clipped to [-1, 1]."""
    n = weights.shape[1]
    runs = ends if ends.size < n else ends[:0]  # without ties (one unit a run): the plain loop, 2.7x the runs'
    for i in range(weights.shape[0]):
        w = weights[i]
        y = wy[i]
        below = 0
        vx = 0
        cov = 0
        begin = 0
        if runs.size == 0:
            for j in range(n):
                drawn = np.int64(w[order[j]])
                r = 2 * below + drawn - n
                below += drawn
                vx += drawn * r * r
                cov += np.int64(y[order[j]]) * r
        for end in runs:  # a run's units share r: sum(w r r) = r r sum(w), sum(wy r) = r sum(wy)
            drawn = 0
            gold = 0
            for j in range(begin, end):
                drawn += np.int64(w[order[j]])
                gold += np.int64(y[order[j]])
            r = 2 * below + drawn - n
            below += drawn
            vx += drawn * r * r
            cov += gold * r
            begin = end
        if vx == 0 or vy[i] == 0:
            out[i] = np.nan
        else:
            out[i] = min(max(np.float64(cov) / np.sqrt(np.float64(vx) * vy[i]), -1.0), 1.0)


_COMPILED: list[Callable[..., None] | None] = []


def _kernel() -> Callable[..., None] | None:
    """:func:`_rho_rows_py` compiled by numba (imported on first use, so that runs which score few resamples never
    load it): integer sums and IEEE float64 division and square root, no fast-math. None, said once, where numba
    cannot be imported (a numpy it does not support yet): the array operations give the same numbers, slower."""
    if not _COMPILED:
        try:
            from numba import njit
        except ImportError as exc:
            logger.warning("numba cannot be imported (%s): the leaderboard's resampled Spearman scores take the "
                           "array operations, the same numbers at about 4 times the time", exc)
            _COMPILED.append(None)
        else:
            _COMPILED.append(njit(nogil=True, boundscheck=False)(_rho_rows_py))
    return _COMPILED[0]


_GOLD: list[dict[str, Any]] = []
"""The terms of the last gold columns :func:`spearman_together` ranked, with the resamples they were drawn on,
newest first: the variants of a run share the task's gold scores and resamples, so they are ranked once per
task; two are kept, the full sample's (a score's estimate) and the resamples' (its interval), which alternate."""
_GOLD_KEPT = 2


def _gold_terms(gold: np.ndarray, idx: np.ndarray) -> list[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """Per block of resamples of ``idx`` (its first row, then): each unit's multiplicity ``(b, n)`` int32, the
    gold's centred ranks times it and their sums of squares (float64), kept for the next call with the same gold
    column and resamples (the same ``idx`` object, still held here, or equal contents). The products are kept in
    int32 where they fit (below 46,341 units: at most n^2), 8 bytes a drawn unit with the multiplicities.
    Raises :class:`StatsError` for resamples that are not n draws of the n units."""
    gold = np.ascontiguousarray(gold)
    key = (hashlib.sha256(gold.tobytes()).hexdigest(), gold.dtype.str, idx.shape)
    for i, kept in enumerate(_GOLD):
        if kept["key"] == key and (kept["idx"] is idx or np.array_equal(kept["idx"], idx)):
            _GOLD.insert(0, _GOLD.pop(i))
            return kept["blocks"]
    n = gold.size
    if idx.ndim != 2 or idx.shape[1] != n or (idx.size and (idx.min() < 0 or idx.max() >= n)):
        raise StatsError(f"resamples: need an index matrix (B, {n}) of unit indices 0..{n - 1} (bootstrap_indices); "
                         f"got shape {idx.shape}" + (f", indices {idx.min()}..{idx.max()}" if idx.size else ""))
    by_gold = _ranker(gold)
    exact32 = n * n < 2**31
    step = max(1, _BLOCK_ELEMENTS // max(1, n))
    blocks = []
    for start in range(0, idx.shape[0], step):
        rows = idx[start:start + step]
        b = rows.shape[0]
        weights = np.bincount((rows + n * np.arange(b)[:, None]).ravel(), minlength=b * n).reshape(b, n)
        weights = weights.astype(np.int32)
        ry = _centred_ranks(weights, by_gold)
        wy = weights * (ry if exact32 else ry.astype(np.float64))  # |w ry| <= n^2: exact either way
        blocks.append((start, (weights, wy, np.einsum("ij,ij->i", wy, ry, dtype=np.float64))))
    _GOLD.insert(0, {"key": key, "idx": idx, "blocks": blocks})
    del _GOLD[_GOLD_KEPT:]
    return blocks


def wmean_spearman(units: np.ndarray, idx: np.ndarray, strata: Labels) -> np.ndarray:
    """Size-weighted mean of the per-stratum Spearman correlations of each (stratified) resample.

    >>> units = np.array([[1, 1], [2, 2], [3, 3], [1, 3], [2, 2], [3, 1.0], [1, 2], [2, 1], [3, 3]])
    >>> wmean_spearman(units, np.arange(9)[None], [0, 0, 0, 1, 1, 1, 2, 2, 2])   # (3 - 3 + 1.5) / 9
    array([0.16666667])
    """
    total = np.zeros(idx.shape[0])
    for members, drawn in strata_draws(strata, units.shape[0], idx):
        total += members.size * spearman(units[members], drawn)
    return total / units.shape[0]


def strata_draws(strata: Labels, n: int, idx: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per stratum of ``strata`` (labels in sorted order): its units, and the stratified resamples ``idx`` (B, n)
    drawn within it, numbered 0.. within the stratum (what :func:`wmean_spearman` scores each stratum on).
    Raises :class:`StatsError` at the first step when the labels or the resamples are not stratified."""
    codes = _strata_codes(strata, n)
    if not (codes[idx] == codes[None, :]).all():
        raise StatsError("wmean: the resamples are not stratified; draw them with bootstrap_indices(..., strata=)")
    local = np.empty(codes.size, dtype=np.int64)
    for s in range(int(codes.max()) + 1):
        members = np.flatnonzero(codes == s)
        local[members] = np.arange(members.size)
        yield members, local[idx[:, members]]


def max_ap(units: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Largest average precision over the score columns ``units[:, :-1]`` (label last) of each resample.

    Average precision is the sum over distinct score thresholds t, high to low, of (recall gained at t)
    x (precision at t), as sklearn computes it; NaN for a resample without a positive label.

    >>> units = np.array([[0.9, 0.1, 1], [0.8, 0.2, 0], [0.7, 0.3, 1], [0.1, 0.9, 0]])
    >>> max_ap(units, np.arange(4)[None]).round(4)   # column 0: (1/1 + 2/3) / 2
    array([0.8333])
    """
    columns = [np.unique(-units[:, j], return_inverse=True) for j in range(units.shape[1] - 1)]  # 0: highest

    def block(rows: np.ndarray) -> np.ndarray:
        labels = units[rows, -1]
        best = np.full(rows.shape[0], -np.inf)
        for uniq, codes in columns:
            drawn = codes.reshape(-1)[rows]
            gained = _group_counts(drawn, uniq.size, weights=labels)  # positives at each threshold
            above = np.maximum(np.cumsum(_group_counts(drawn, uniq.size), axis=1), 1)  # is 0 only where gained is
            best = np.maximum(best, np.einsum("ij,ij->i", gained, np.cumsum(gained, axis=1) / above))
        positives = labels.sum(axis=1)
        return np.where(positives > 0, best / np.maximum(positives, 1), np.nan)

    return _in_blocks(block, idx)


def mean(units: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Mean of the per-unit values ``units[idx[b]]`` for each resample ``b``.

    >>> mean(np.array([0.0, 1.0, 1.0]), np.array([[0, 1, 2], [0, 0, 1]])).round(4)
    array([0.6667, 0.3333])
    """
    return _in_blocks(lambda rows: units[rows].mean(axis=1), idx)
