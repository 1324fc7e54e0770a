"""What do the confidence intervals add to a run's wall time, and to the leaderboard's?

1. The interval a run computes when it saves each result: 1,000 seeded resamples of cosine Spearman over
   synthetic pairs of the sizes of the seven MTEB STS test sets (3,108 .. 9,927 pairs), once per result, as a
   run of one variant on the ``mteb-sts`` suite does; printed per task and in total, beside one 10,000-pair
   task.
2. With ``--results DIR`` (a results folder of ``iso-bench run``): the leaderboard built with intervals and
   paired tests against without, side by side in this process, and their ratio.

    OMP_NUM_THREADS=1 python benchmarks/bench_intervals.py [--resamples 1000] [--results leaderboards]

Prints timings and ratios; nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

STS_PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379,
             "SICK-R": 9927}


def _pairs(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` (predicted, gold) pairs with a correlation of about 0.8 and gold rounded to 0.2 (ties, as STS)."""
    gold = np.round(rng.uniform(0, 5, n) * 5) / 5
    return np.column_stack([gold + rng.normal(0, 1.2, n), gold])


def bench_run(resamples: int) -> None:
    from iso_bench.numerics.stats import confidence_interval

    rng = np.random.default_rng(0)
    total = 0.0
    for task, n in {**STS_PAIRS, "10,000 pairs": 10_000}.items():
        units = _pairs(n, rng)
        start = time.perf_counter()
        interval = confidence_interval(units, "spearman", n_resamples=resamples, seed=0)
        seconds = time.perf_counter() - start
        if task in STS_PAIRS:
            total += seconds
        print(f"  {task:<14} {n:>6} pairs  {seconds:6.3f} s  [{interval.low:.4f}, {interval.high:.4f}]")
    print(f"intervals of one variant on the 7 MTEB STS tasks ({resamples} resamples each): {total:.2f} s")


def bench_leaderboard(results: str) -> None:
    from iso_bench.report import write_leaderboard

    timings = {}
    for ci in (False, True):
        start = time.perf_counter()
        write_leaderboard(results, ci=ci)
        timings[ci] = time.perf_counter() - start
    print(f"leaderboard of {results}: without intervals {timings[False]:.2f} s, with intervals and paired tests "
          f"{timings[True]:.2f} s")
    print(f"ratio leaderboard: {timings[True] / timings[False]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--results", help="a results folder: also time its leaderboard with and without intervals")
    args = parser.parse_args()
    print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"load average at start: {os.getloadavg()[0]:.1f}")
    bench_run(args.resamples)
    if args.results:
        bench_leaderboard(args.results)


if __name__ == "__main__":
    main()
