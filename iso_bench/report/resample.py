"""Resampled scores of results: every result's main score on each bootstrap resample of its evaluation units
(:mod:`.units`), the percentile interval of such draws, and the paired difference of two, as
:mod:`iso_bench.numerics.stats` computes them (:func:`~iso_bench.numerics.stats.confidence_interval`,
:func:`~iso_bench.numerics.stats.paired_difference`) but drawn once per result and shared by every cell that needs it.

A resample matrix (:func:`iso_bench.numerics.stats.bootstrap_indices`) is drawn once per size, design and strata, and
the Spearman scores of all the variants of one task (STS, the bulk of a table) are computed together on it
(:func:`~iso_bench.numerics.batch_scores.spearman_together`), the gold's ranks once for all.

>>> boot = Bootstrap(store)                                           # doctest: +SKIP
>>> percentile(boot.draws(result, design_of(result)), 0.95)          # doctest: +SKIP
(0.8121, 0.8284)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from iso_bench.checks import cpu_threads
from iso_bench.numerics import batch_scores, stats
from iso_bench.numerics.batch_scores import spearman_together
from iso_bench.report.units import Design, Sample, UnitsStore, design_of, misaligned
from iso_bench.results.result_files import MODIFIED
from iso_bench.results.setups import same_data, short

if TYPE_CHECKING:
    from iso_bench.report.index import Index, Line
    from iso_bench.report.results import Result

MAX_UNDEFINED = 0.01  # as iso_bench.numerics.stats: more undefined resamples than this and there is no interval
MODIFIED_REASON = "a result it is computed from was changed after its run (†)"
Draws = np.ndarray  # (B,) resampled scores, fractions; NaN where the statistic is undefined
TOGETHER = ("spearman", "wmean")  # the statistics whose variants of one task are drawn together (Bootstrap.prepare)


def _named(statistic: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray] | None:
    named = {"spearman": lambda u, i, s: stats.spearman(u, i), "mean": lambda u, i, s: stats.mean(u, i),
             "wmean": lambda u, i, s: stats.wmean_spearman(u, i, s), "max_ap": lambda u, i, s: stats.max_ap(u, i)}
    if statistic in named:
        return named[statistic]
    score = stats.statistic_of(statistic)  # one it has no batch form for (pair accuracy, WSD F1): a call a resample
    if not callable(score):
        return None
    return lambda u, i, s: np.array([float(score(u[row])) for row in i], dtype=np.float64)


class Bootstrap:
    """Resampled scores of results, each result's drawn once per design; index matrices shared by size and
    design (the last few kept)."""

    def __init__(self, store: UnitsStore, threads: int | None = None) -> None:
        self.store = store
        self.threads = cpu_threads() if threads is None else threads  # for the Spearman scores drawn together
        self._indices: dict[tuple[int, int, int, bytes], np.ndarray] = {}
        self._draws: dict[tuple[str, Design], Draws | str] = {}

    def indices(self, sample: Sample, design: Design) -> np.ndarray:
        """The ``(B, n)`` resample indices of a sample's size (stratified by its strata) under ``design``."""
        key = (sample.n, design.n_resamples, design.seed, b"" if sample.strata is None else sample.strata.tobytes())
        if key not in self._indices:
            while len(self._indices) >= 2:  # one task's matrices at a time: bounded memory
                self._indices.pop(next(iter(self._indices)))
            self._indices[key] = stats.bootstrap_indices(sample.n, design.n_resamples, design.seed, sample.strata)
        return self._indices[key]

    def draws(self, result: Result, design: Design) -> Draws | str:
        """``result``'s main score on each resample of its units (the mean of its subsets'), or why not."""
        key = (result.file, design)
        if key not in self._draws:
            samples = self.store.samples(result)
            if isinstance(samples, str):  # no units, or a units file changed after its run
                self._draws[key] = samples
            elif result.state == MODIFIED:
                self._draws[key] = MODIFIED_REASON
            else:
                self._draws[key] = self._score(samples, design)
        return self._draws[key]

    def _score(self, samples: Sequence[Sample], design: Design) -> Draws | str:
        if any(s.n < stats.MIN_UNITS for s in samples):
            return f"fewer than {stats.MIN_UNITS} units"
        scorers = [_named(s.statistic) for s in samples]
        unknown = next((s.statistic for s, f in zip(samples, scorers, strict=True) if f is None), None)
        if unknown is not None:
            return f"no resampling for its statistic {unknown}"
        return np.mean([f(s.units, self.indices(s, design), s.strata)  # type: ignore[misc]
                        for s, f in zip(samples, scorers, strict=True)], axis=0)

    def prepare(self, results: Sequence[Result], design: Design) -> None:
        """Draw the Spearman scores of ``results`` (one task's; subset-weighted ones per subset) together where they
        share their gold (and subsets): one index matrix for all, read once per block (:func:`spearman_together`:
        the numbers :func:`iso_bench.numerics.stats.spearman` gives each alone, at about a third of the work)."""
        groups: dict[tuple[str, bytes, str, bytes], list[tuple[Result, Sample]]] = {}
        for r in results:
            samples = self.store.samples(r)
            if (r.file, design) in self._draws or r.state == MODIFIED or isinstance(samples, str):
                continue
            if len(samples) == 1 and samples[0].statistic in TOGETHER and samples[0].n >= stats.MIN_UNITS:
                strata = samples[0].strata
                key = (samples[0].statistic, samples[0].units[:, 1].tobytes(),
                       "" if strata is None else strata.dtype.str, b"" if strata is None else strata.tobytes())
                groups.setdefault(key, []).append((r, samples[0]))
        for key, members in groups.items():
            if len(members) > 1:
                (self._spearman_together if key[0] == "spearman" else self._wmean_together)(members, design)

    def _spearman_together(self, members: Sequence[tuple[Result, Sample]], design: Design) -> None:
        idx = self.indices(members[0][1], design)
        out = spearman_together([s.units[:, 0] for _, s in members], members[0][1].units[:, 1], idx, self.threads)
        for (r, _), row in zip(members, out, strict=True):
            self._draws[(r.file, design)] = row

    def _wmean_together(self, members: Sequence[tuple[Result, Sample]], design: Design) -> None:
        """:func:`iso_bench.numerics.stats.wmean_spearman` of each member (same gold, same strata), its subsets'
        Spearman scores drawn together (:func:`spearman_together`) and summed as it sums them: the same numbers.
        Strata the statistic would refuse, or resamples not stratified by them, are left to it (drawn alone)."""
        first = members[0][1]
        if first.strata is None:
            return
        idx = self.indices(first, design)
        total = np.zeros((len(members), idx.shape[0]))
        try:
            for part, drawn in batch_scores.strata_draws(first.strata, first.n, idx):
                total += part.size * spearman_together([m.units[part, 0] for _, m in members], first.units[part, 1],
                                                       drawn, self.threads)
        except stats.StatsError:  # refused before any stratum is scored
            return
        for (r, _), row in zip(members, total / first.n, strict=True):
            self._draws[(r.file, design)] = row

    def line_draws(self, ix: Index, line: Line, tasks: Sequence[str], designs: Sequence[Design] | None = None
                   ) -> tuple[Draws | str, list[Design]]:
        """A row's value on each resample: per task the mean of its seeds (scored on the same resamples), then
        the mean of ``tasks``; with the designs used per task: those given, else the one recorded with the row's
        result on the first task (for every task: a mean needs the same number of resamples from each)."""
        per_task, used = [], []
        own = design_of(ix.found(line, tasks[0])[0]) if not designs else None
        for j, task in enumerate(tasks):
            found = ix.found(line, task)
            design = designs[j] if designs else own
            used.append(design)
            seeds = [self.draws(r, design) for r in found]
            why = next((d for d in seeds if isinstance(d, str)), None) or self._seeds_misaligned(found)
            if why:  # a mean lacks its interval for the reason one of its tasks does
                return why, used
            per_task.append(np.mean(seeds, axis=0))
        return np.mean(per_task, axis=0), used

    def _seeds_misaligned(self, found: Sequence[Result]) -> str | None:
        first = self.store.samples(found[0])
        for r in found[1:]:
            for a, b in zip(first, self.store.samples(r), strict=False):  # type: ignore[arg-type]
                why = misaligned(a, b)  # type: ignore[arg-type]
                if why:
                    return f"its seeds' units are not aligned ({why})"
        return None

    def aligned(self, ix: Index, line: Line, ref: Line, tasks: Sequence[str]) -> str | None:
        """Why a row's units cannot be paired with its raw row's on ``tasks``, else None: among the reasons, results
        computed from two versions of a task's data (their data records' content digests differ,
        :func:`iso_bench.results.setups.same_data`), whose units are other instances even where they line up."""
        for task in tasks:
            a, b = ix.found(line, task)[0], ix.found(ref, task)[0]
            if a.data and b.data and same_data(a.data, b.data) is False:
                return (f"raw's result{'' if len(tasks) == 1 else ' on ' + ix.label[task]} was computed from other "
                        f"data ({short(b.data)}; this row's: {short(a.data)}), so its units are not paired")
            mine, theirs = self.store.samples(a), self.store.samples(b)
            if isinstance(mine, str) or isinstance(theirs, str):
                continue  # said by the draws
            if len(mine) != len(theirs):
                return f"{ix.label[task]}: {len(mine)} and {len(theirs)} subsets"
            for a, b in zip(mine, theirs, strict=True):
                why = misaligned(a, b)
                if why:
                    return f"units not aligned with raw's{'' if len(tasks) == 1 else ' on ' + ix.label[task]}: {why}"
        return None


def percentile(draws: Draws, level: float) -> tuple[float, float] | str:
    """The percentile interval of the defined draws, or why there is none (too many undefined)."""
    ok = draws[np.isfinite(draws)]
    missing = draws.size - ok.size
    if not ok.size or missing > MAX_UNDEFINED * draws.size:
        return f"its statistic is undefined on {missing} of {draws.size} resamples"
    return stats.percentile_bounds(ok, level)


def paired(a: Draws, b: Draws, level: float) -> tuple[float, float, float] | str:
    """``(low, high, p)`` of ``a - b`` over the resamples defined for both, as :func:`iso_bench.numerics.stats.
    paired_difference` computes them, or why there is none."""
    ok = np.isfinite(a) & np.isfinite(b)
    missing = int(a.size - ok.sum())
    if not ok.any() or missing > MAX_UNDEFINED * a.size:
        return f"the statistic is undefined on {missing} of {a.size} resamples"
    d = a[ok] - b[ok]
    return (*stats.percentile_bounds(d, level), stats.paired_p_value(d))
