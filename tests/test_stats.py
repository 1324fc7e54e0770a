"""iso_bench.numerics.stats: bootstrap intervals, paired differences and BH correction, on synthetic data with
known answers."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import average_precision_score

from iso_bench.numerics import stats
from iso_bench.numerics.stats import StatsError
from iso_bench.registry import IsoBenchError


def _population_spearman(rho: float) -> float:
    """Spearman correlation of a bivariate normal with Pearson correlation ``rho``."""
    return 6.0 / math.pi * math.asin(rho / 2.0)


def _sts_units(rng: np.random.Generator, n: int, noise: float, gold: np.ndarray | None = None) -> np.ndarray:
    """(predicted, gold) pairs: predicted = gold + noise * N(0, 1), gold ~ N(0, 1) rounded to ties."""
    gold = np.round(rng.normal(size=n), 1) if gold is None else gold
    return np.column_stack([gold + noise * rng.normal(size=n), gold])


# ------------------------------------------------------------------------------- full-sample estimates


def test_spearman_equals_scipy_with_ties_on_full_sample_and_resamples():
    rng = np.random.default_rng(1)
    units = np.round(_sts_units(rng, 500, 1.0), 1)  # ties in both columns
    full = stats.spearman(units, np.arange(500)[None])[0]
    assert abs(full - sps.spearmanr(units[:, 0], units[:, 1]).statistic) < 1e-12
    idx = stats.bootstrap_indices(500, 20, seed=3)
    expected = [sps.spearmanr(units[row, 0], units[row, 1]).statistic for row in idx]
    np.testing.assert_allclose(stats.spearman(units, idx), expected, rtol=0, atol=1e-12)


def test_gold_ranks_kept_between_calls_are_never_those_of_other_resamples_or_another_gold_column():
    """The ranks of a gold column are kept for the next variants (full sample and resamples alternate, as a
    score's estimate and its interval do); a call with other resamples, or another gold, gets its own."""
    rng = np.random.default_rng(2)
    a, b = np.round(_sts_units(rng, 300, 1.0), 1), np.round(_sts_units(rng, 300, 0.5), 1)
    other_gold = a.copy()
    other_gold[:, 1] = np.round(rng.normal(size=300), 1)
    full = np.arange(300)[None]
    draws = [stats.bootstrap_indices(300, 15, seed=s) for s in (1, 1, 2)]  # seeds 1 twice: equal, not the same
    for units in (a, b, other_gold, a):
        for idx in (full, draws[0], full, draws[1], draws[2]):
            expected = [sps.spearmanr(units[row, 0], units[row, 1]).statistic for row in idx]
            np.testing.assert_allclose(stats.spearman(units, idx), expected, rtol=0, atol=1e-12)


def test_spearman_compiled_and_on_threads_is_the_bits_of_the_array_pass_and_scipys_rho():
    """The compiled pass splits a block's resamples among threads (blocks of 131 resamples of 2,000 units here, so
    3 threads get 43-44 rows each): the same bits as one thread and as the array operations, and scipy's rho on
    ties, a two-valued prediction and a constant one (NaN) alike."""
    from iso_bench.numerics.batch_scores import spearman_together

    rng = np.random.default_rng(23)
    gold = np.round(rng.normal(size=2000), 1)
    preds = [gold + rng.normal(size=2000), np.round(gold + rng.normal(size=2000), 0),
             (gold + rng.normal(size=2000) > 0).astype(float), np.full(2000, 0.5)]
    idx = stats.bootstrap_indices(2000, 150, seed=4)
    one = spearman_together(preds, gold, idx, threads=1, compiled=True)
    assert spearman_together(preds, gold, idx, threads=3, compiled=True).tobytes() == one.tobytes()
    assert spearman_together(preds, gold, idx, compiled=False).tobytes() == one.tobytes()  # the array operations
    for row in (0, 44, 130, 149):
        expected = [sps.spearmanr(p[idx[row]], gold[idx[row]]).statistic for p in preds[:3]]
        np.testing.assert_allclose(one[:3, row], expected, rtol=0, atol=1e-12)
    assert np.isnan(one[3]).all()
    constant_gold = spearman_together(preds[:1], np.ones(2000), idx, threads=2, compiled=True)
    assert np.isnan(constant_gold).all()


def test_spearman_compiled_past_46341_units_keeps_the_gold_terms_in_float64_and_the_bits():
    """From 46,341 units (n^2 >= 2**31) the gold's terms are float64, another compiled specialisation: the same
    bits as the array operations, on 1 and 3 threads (5 resamples a block, split 2, 2, 1)."""
    from iso_bench.numerics.batch_scores import _gold_terms, spearman_together

    rng = np.random.default_rng(5)
    gold = np.round(rng.normal(size=46341), 1)
    preds = [gold + rng.normal(size=46341), np.round(gold + rng.normal(size=46341), 0)]
    idx = stats.bootstrap_indices(46341, 12, seed=6)
    assert _gold_terms(gold, idx)[0][1][1].dtype == np.float64
    array = spearman_together(preds, gold, idx, compiled=False)
    assert spearman_together(preds, gold, idx, threads=1, compiled=True).tobytes() == array.tobytes()
    assert spearman_together(preds, gold, idx, threads=3, compiled=True).tobytes() == array.tobytes()


def test_a_runs_small_intervals_never_import_numba():
    """The compiled pass is chosen by a call's size: a run's interval on a small task (400 pairs, 1,000 resamples)
    takes the array operations, so the process never imports numba, while a task of many variants would."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from iso_bench.numerics import stats, batch_scores as b; "
            "u = np.random.default_rng(0).normal(size=(400, 2)); stats.confidence_interval(u, 'spearman'); "
            "print('numba' in sys.modules, 40 * 1000 * 1379 >= b.COMPILE_AT > 400 * 1000)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
    # where numba cannot be imported, the compiled pass falls back to the array operations' same numbers, said once
    code = ("import sys; sys.modules['numba'] = None; import numpy as np; from iso_bench.numerics import stats; "
            "from iso_bench.numerics.batch_scores import spearman_together as t; "
            "u = np.random.default_rng(0).normal(size=(300, 2)); i = stats.bootstrap_indices(300, 50, 1); "
            "print(t([u[:, 0]], u[:, 1], i, compiled=True).tobytes() == t([u[:, 0]], u[:, 1], i, compiled=False)"
            ".tobytes() == stats.spearman(u, i).tobytes())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True"] and done.stderr.count("numba cannot be imported") == 1


def test_spearman_refuses_resamples_that_are_not_n_draws_of_the_n_units():
    """Resamples are read as unit multiplicities, so an index matrix of another width, or with an index outside
    0..n-1, is refused by name, never scored (it would spill into another resample's counts)."""
    units = np.round(_sts_units(np.random.default_rng(5), 8, 1.0), 1)
    for idx in (np.arange(7)[None], np.array([[0, 1, 2, 3, 4, 5, 6, 8]]), np.array([[0, 1, 2, 3, 4, 5, 6, -1]])):
        with pytest.raises(StatsError, match=r"resamples: need an index matrix \(B, 8\)"):
            stats.spearman(units, idx)


def test_max_ap_equals_sklearn_per_column_and_takes_the_best():
    rng = np.random.default_rng(2)
    labels = (rng.random(400) < 0.4).astype(float)
    scores = np.column_stack([np.round(labels * w + rng.normal(size=400), 1) for w in (0.3, 1.5, 0.8)])
    units = np.column_stack([scores, labels])
    per_column = [average_precision_score(labels, scores[:, j]) for j in range(3)]
    assert abs(stats.max_ap(units[:, [1, 3]], np.arange(400)[None])[0] - per_column[1]) < 1e-12
    assert abs(stats.max_ap(units, np.arange(400)[None])[0] - max(per_column)) < 1e-12
    idx = stats.bootstrap_indices(400, 15, seed=4)
    expected = [max(average_precision_score(labels[row], scores[row, j]) for j in range(3)) for row in idx]
    np.testing.assert_allclose(stats.max_ap(units, idx), expected, rtol=0, atol=1e-12)


def test_interval_estimates_are_the_full_sample_statistic():
    rng = np.random.default_rng(3)
    correct = (rng.random(300) < 0.7).astype(float)
    ci = stats.confidence_interval(correct, "mean", n_resamples=200)
    assert abs(ci.estimate - correct.mean()) < 1e-12 and ci.low < ci.estimate < ci.high
    units = _sts_units(rng, 300, 1.0)
    assert abs(stats.confidence_interval(units, "spearman", n_resamples=200).estimate
               - sps.spearmanr(units[:, 0], units[:, 1]).statistic) < 1e-12


def test_wmean_is_the_size_weighted_mean_of_subset_correlations():
    rng = np.random.default_rng(4)
    sizes = {"news": 40, "forums": 90, "captions": 25}
    strata = np.repeat(list(sizes), list(sizes.values()))
    rng.shuffle(strata)  # subsets interleaved, as after concatenating and reordering
    units = _sts_units(rng, strata.size, 0.8)
    by_hand = sum(sizes[s] * sps.spearmanr(*units[strata == s].T).statistic for s in sizes) / strata.size
    ci = stats.confidence_interval(units, "wmean", n_resamples=300, strata=strata)
    assert abs(ci.estimate - by_hand) < 1e-12
    assert ci.low < by_hand < ci.high
    assert ci.estimate != pytest.approx(sps.spearmanr(units[:, 0], units[:, 1]).statistic, abs=1e-6)


def test_stratified_resamples_keep_subset_sizes():
    strata = np.array(["b", "a", "b", "c", "a", "b", "c", "c", "c"])
    idx = stats.bootstrap_indices(strata.size, 500, seed=5, strata=strata)
    assert idx.shape == (500, 9)
    assert (strata[idx] == strata[None, :]).all()  # every column draws only from its own subset
    assert len(np.unique(idx)) == 9  # and still reaches every unit
    plain = stats.bootstrap_indices(strata.size, 500, seed=5)
    assert not (strata[plain] == strata[None, :]).all()


def test_callable_statistic_matches_the_vectorised_one():
    values = np.random.default_rng(6).random(150)
    looped = stats.confidence_interval(values, np.mean, n_resamples=300, seed=2)
    vectorised = stats.confidence_interval(values, "mean", n_resamples=300, seed=2)
    assert (looped.estimate, looped.low, looped.high) == pytest.approx(
        (vectorised.estimate, vectorised.low, vectorised.high), abs=1e-12)
    median = stats.confidence_interval(values, np.median, n_resamples=300)
    assert median.estimate == np.median(values) and median.low < median.high


# ------------------------------------------------------------------------------------------- coverage


def test_spearman_interval_covers_the_population_value_at_the_nominal_rate():
    rho, n, repetitions = 0.5, 200, 400
    truth = _population_spearman(rho)
    rng = np.random.default_rng(7)
    cov = [[1.0, rho], [rho, 1.0]]
    covered = 0
    for rep in range(repetitions):
        units = rng.multivariate_normal([0.0, 0.0], cov, size=n)
        ci = stats.confidence_interval(units, "spearman", n_resamples=1000, seed=rep)
        covered += ci.low <= truth <= ci.high
    assert 0.91 <= covered / repetitions <= 0.98


# --------------------------------------------------------------------------------- paired differences


def test_identical_variants_differ_by_exactly_zero_with_p_one():
    units = _sts_units(np.random.default_rng(8), 300, 1.0)
    cmp = stats.paired_difference(units, units.copy(), "spearman", n_resamples=500)
    assert (cmp.difference, cmp.low, cmp.high, cmp.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert type(cmp.p_value) is float and type(cmp.low) is float  # plain floats, for JSON
    assert cmp.estimate_a == cmp.estimate_b


def test_a_planted_difference_is_found_and_covered():
    rng = np.random.default_rng(9)
    n = 600
    gold = rng.normal(size=n)
    better, raw = _sts_units(rng, n, 0.5, gold), _sts_units(rng, n, 1.0, gold)
    planted = _population_spearman(1 / math.sqrt(1.25)) - _population_spearman(1 / math.sqrt(2.0))
    cmp = stats.paired_difference(better, raw, "spearman", n_resamples=1000)
    assert cmp.p_value < 0.01
    assert cmp.low <= planted <= cmp.high and cmp.low > 0
    assert cmp.difference == pytest.approx(cmp.estimate_a - cmp.estimate_b)
    reverse = stats.paired_difference(raw, better, "spearman", n_resamples=1000)
    assert reverse.high < 0 and reverse.p_value < 0.01


def test_a_planted_accuracy_difference_is_found():
    rng = np.random.default_rng(10)
    u = rng.random(2000)
    variant, raw = (u < 0.80).astype(float), (u < 0.72).astype(float)  # the variant also fixes 8% of the errors
    cmp = stats.paired_difference(variant, raw, "mean", n_resamples=1000)
    assert cmp.p_value < 0.01 and cmp.low <= 0.08 <= cmp.high


def test_paired_interval_is_much_narrower_than_unpaired_for_correlated_variants():
    rng = np.random.default_rng(11)
    n, shared = 500, rng.normal(size=500)
    gold = np.round(rng.normal(size=n), 1)
    a = np.column_stack([gold + shared + 0.2 * rng.normal(size=n), gold])
    b = np.column_stack([gold + shared + 0.2 * rng.normal(size=n), gold])
    paired = stats.paired_difference(a, b, "spearman", n_resamples=1000, seed=1)
    unpaired = (stats.spearman(a, stats.bootstrap_indices(n, 1000, seed=1))
                - stats.spearman(b, stats.bootstrap_indices(n, 1000, seed=2)))
    low, high = np.quantile(unpaired, [0.025, 0.975])
    assert paired.high - paired.low < 0.5 * (high - low)
    assert paired.low <= paired.difference <= paired.high


# ------------------------------------------------------------------------------------ multiple testing


def test_benjamini_hochberg_matches_scipy():
    rng = np.random.default_rng(12)
    for size in (1, 7, 200):
        p = np.concatenate([rng.random(size) ** 3, [0.0, 1.0, 0.5, 0.5]])
        np.testing.assert_allclose(stats.benjamini_hochberg(p), sps.false_discovery_control(p, method="bh"),
                                   rtol=0, atol=1e-15)
    p = rng.random(50) ** 4
    q = sps.false_discovery_control(p, method="bh")
    np.testing.assert_array_equal(stats.significant(p), q <= 0.05)
    assert 0 < stats.significant(p).sum() < (p <= 0.05).sum()  # BH keeps fewer than the raw threshold
    with pytest.raises(StatsError, match="p_values"):
        stats.benjamini_hochberg([0.1, np.nan])


# ------------------------------------------------------------------------------------ seeds and errors


def test_same_seed_same_interval_other_seed_other_bounds():
    units = _sts_units(np.random.default_rng(13), 200, 1.0)
    first = stats.confidence_interval(units, "spearman", n_resamples=300, seed=5)
    assert first == stats.confidence_interval(units, "spearman", n_resamples=300, seed=5)
    other = stats.confidence_interval(units, "spearman", n_resamples=300, seed=6)
    assert other.estimate == first.estimate and (other.low, other.high) != (first.low, first.high)
    assert (first.seed, first.n_resamples, first.level, first.method) == (5, 300, 0.95, "percentile")


def test_bad_input_is_refused_with_a_clear_error():
    units = _sts_units(np.random.default_rng(14), 50, 1.0)
    nan_units = units.copy()
    nan_units[7, 0] = np.nan
    with pytest.raises(StatsError, match=r"units: 1 unit\(s\) hold NaN.*row 7"):
        stats.confidence_interval(nan_units, "spearman")
    with pytest.raises(StatsError, match="at least 3 units"):
        stats.confidence_interval(units[:2], "spearman")
    with pytest.raises(StatsError, match=r"shaped \(n, 2\)"):
        stats.confidence_interval(units[:, :1], "spearman")
    with pytest.raises(StatsError, match="Did you mean 'spearman'"):
        stats.confidence_interval(units, "spearmann")
    with pytest.raises(StatsError, match="strata="):
        stats.confidence_interval(units, "wmean")
    with pytest.raises(StatsError, match="0/1 label"):
        stats.confidence_interval(units, "max_ap")
    constant = units.copy()
    constant[:, 0] = 1.0
    with pytest.raises(StatsError, match="undefined on the full sample"):
        stats.confidence_interval(constant, "spearman")
    assert issubclass(StatsError, IsoBenchError)


def test_misaligned_variants_are_refused():
    rng = np.random.default_rng(15)
    a = _sts_units(rng, 60, 1.0)
    with pytest.raises(StatsError, match=r"not aligned: shapes \(60, 2\) and \(59, 2\)"):
        stats.paired_difference(a, a[1:], "spearman")
    shuffled = a[rng.permutation(60)]
    with pytest.raises(StatsError, match="gold column differs"):
        stats.paired_difference(a, shuffled, "spearman")
    with pytest.raises(StatsError, match="not aligned"):
        stats.paired_difference(np.ones(10), np.ones(11), "mean")


def test_undefined_resamples_are_counted_or_refused():
    tiny = np.array([[0.1, 1.0], [0.2, 2.0], [0.3, 3.0]])  # 3 of 27 resamples draw a single unit
    with pytest.raises(StatsError, match=r"undefined \(a constant column\) on \d+ of 1000 resamples"):
        stats.confidence_interval(tiny, "spearman")
    rng = np.random.default_rng(16)
    labels = np.zeros(60)
    labels[[5, 40]] = 1.0  # about (58/60)^60 = 13% of resamples draw no positive
    units = np.column_stack([rng.normal(size=60) + labels, labels])
    with pytest.raises(StatsError, match="no positive label"):
        stats.confidence_interval(units, "max_ap")
    ci = stats.confidence_interval(units, "max_ap", max_undefined=0.3)
    assert 60 < ci.n_undefined < 250 and np.isfinite([ci.low, ci.high]).all() and ci.low <= ci.high


def test_thousand_resamples_of_ten_thousand_pairs_take_well_under_a_second():
    units = _sts_units(np.random.default_rng(17), 10_000, 1.0)
    stats.confidence_interval(units[:100], "spearman", n_resamples=10)  # warm up
    start = time.process_time()
    ci = stats.confidence_interval(units, "spearman", n_resamples=1000)
    elapsed = time.process_time() - start  # CPU time: the machine may be shared
    assert ci.low < ci.estimate < ci.high
    assert elapsed < 1.5, f"{elapsed:.2f} s of CPU time"
