"""How long does a leaderboard's resampling take, and what does the compiled Spearman pass save?

The board's intervals and paired tests draw 1,000 resamples of each result's units; on STS tasks every resample
is scored by Spearman's rho (:func:`iso_bench.numerics.batch_scores.spearman_together`). This script times,
in one process:

1. ``spearman_together`` on synthetic STS-like tasks (the seven MTEB STS test sizes, gold rounded to 0.2 as STS's,
   10 variants a task): its array operations (``compiled=False``: a gather, a cumulative sum and two more gathers
   per resample, in numpy) against its compiled pass at 1 thread and at ``--threads``; each checked to give the
   same bits.
2. With ``--results DIR``: the board built from that folder (every interval and paired test) with the compiled
   pass at 1 thread and at ``--threads``, and with the array operations.

    python benchmarks/bench_board.py [--threads 2] [--results leaderboards/v3/results]

Prints timings (wall seconds) and ratios; nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager

import numpy as np

from iso_bench.numerics import batch_scores

STS_PAIRS = {"STS12": 3108, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186, "STSBenchmark": 1379,
             "SICK-R": 9927}


def _together(compiled: bool):
    """``spearman_together`` with its pass chosen (the board's calls pass their thread count positionally)."""
    def call(predictions, gold, idx, threads=1):
        return batch_scores.spearman_together(predictions, gold, idx, threads, compiled=compiled)
    return call


@contextmanager
def _threads(n: int):
    """The board's threads (``$ISO_BENCH_THREADS``, which :func:`iso_bench.checks.cpu_threads` reads)."""
    old = os.environ.get("ISO_BENCH_THREADS")
    os.environ["ISO_BENCH_THREADS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["ISO_BENCH_THREADS"]
        else:
            os.environ["ISO_BENCH_THREADS"] = old


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def bench_synthetic(threads: int, resamples: int) -> None:
    rng = np.random.default_rng(0)
    _together(True)([rng.normal(size=5)], np.arange(5.0), np.zeros((1, 5), dtype=np.intp))  # compile
    totals = {"array formula": 0.0, "compiled, 1 thread": 0.0, f"compiled, {threads} threads": 0.0}
    for task, n in STS_PAIRS.items():
        gold = np.round(rng.uniform(0, 5, n) * 5) / 5
        predictions = [gold + rng.normal(0, 1.2, n) for _ in range(10)]
        idx = rng.integers(0, n, (resamples, n))
        batch_scores._gold_terms(gold, idx)  # the gold's terms, shared by all three, computed before the clocks
        seconds, reference = _timed(_together(False), predictions, gold, idx)
        line = [f"{seconds:6.2f}"]
        totals["array formula"] += seconds
        for label, count in (("compiled, 1 thread", 1), (f"compiled, {threads} threads", threads)):
            seconds, out = _timed(_together(True), predictions, gold, idx, count)
            if out.tobytes() != reference.tobytes():
                raise SystemExit(f"{task}: {label} differs from the array formula")
            totals[label] += seconds
            line.append(f"{seconds:6.2f}")
        print(f"  {task:<13} {n:>5} pairs x 10 variants: " + "  ".join(line) + " s (array, 1 thread, threads)")
    base = totals["array formula"]
    print("spearman_together, 7 MTEB STS sizes x 10 variants x "
          f"{resamples} resamples: " + ", ".join(f"{k} {v:.2f} s" for k, v in totals.items()))
    for label, seconds in list(totals.items())[1:]:
        print(f"ratio {label} / array formula: {seconds / base:.3f}")


def bench_board(results: str, threads: int) -> None:
    from iso_bench.report import build_leaderboard, read_results

    def build() -> str:
        batch_scores._GOLD.clear()
        return repr(build_leaderboard(read_results(results)))

    timings = {}
    threshold = batch_scores.COMPILE_AT
    try:
        batch_scores.COMPILE_AT = 0  # every call compiled
        for label, count in (("1 thread", 1), (f"{threads} threads", threads)):
            with _threads(count):
                timings[label], board = _timed(build)
        batch_scores.COMPILE_AT = 1 << 62  # every call in array operations
        timings["array formula"], reference = _timed(build)
    finally:
        batch_scores.COMPILE_AT = threshold
    print(f"board of {results}: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
          + f"; the same board: {board == reference}")
    for label in list(timings)[:2]:
        print(f"ratio board {label} / array formula: {timings[label] / timings['array formula']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--results", help="a results folder: also time its board at 1 and --threads threads")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}; CPUs: {len(os.sched_getaffinity(0))}")
    bench_synthetic(args.threads, args.resamples)
    if args.results:
        bench_board(args.results, args.threads)


if __name__ == "__main__":
    main()
