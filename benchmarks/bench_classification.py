"""What does reading a classification task's labels at once save? mteb's classification looks up each training
label by index to undersample (``_undersample_data``, once per experiment) and hands the evaluated labels to
seven scikit-learn metrics (``_calculate_scores``); with ``datasets`` 4 a column asked for by name is a
``Column`` that formats its rows one by one. iso-bench gives mteb the splits with plain columns read at once
(:func:`iso_bench.results.instances.listed_columns`). This script times both steps on Banking77's real splits
(10,003 training texts, 3,080 evaluated), as mteb runs them for one result (10 experiments), with the splits as
``datasets`` returns them and listed, side by side in one process, and prints the ratio; it checks that both
select the same rows and give the same scores.

    OMP_NUM_THREADS=1 python benchmarks/bench_classification.py --data-dir ../shared/data

Prints timings and ratios; nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from iso_bench.data.sources import get_task
from iso_bench.results.instances import listed_columns


def one_result(task, splits) -> tuple[float, list, list]:
    """The two steps of one Banking77 result on ``splits``: seconds, the rows each experiment selects, the
    scores of a fixed prediction per experiment."""
    start = time.perf_counter()
    rows, scores, previous = [], [], None
    for experiment in range(task.n_experiments):
        _, previous, selected = task._undersample_data(splits["train"], experiment, previous)
        rows.append(selected)
    labels = splits["test"]["label"]
    rng = np.random.default_rng(0)
    for _ in range(task.n_experiments):
        predicted = np.where(rng.random(len(labels)) < 0.8, np.asarray(labels), rng.integers(0, 77, len(labels)))
        scores.append(task._calculate_scores(splits["test"]["label"], predicted))
    return time.perf_counter() - start, rows, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    args = parser.parse_args()
    task = get_task("Banking77Classification", args.data_dir)
    task.load_data()
    plain = task.dataset["default"] if "default" in task.dataset else task.dataset
    listed = listed_columns(plain)
    plain_s, plain_rows, plain_scores = one_result(task, plain)
    listed_s, listed_rows, listed_scores = one_result(task, listed)
    same = plain_rows == listed_rows and plain_scores == listed_scores
    print(f"Banking77Classification, {task.n_experiments} experiments: undersampling and scoring of one result")
    print(f"  as datasets returns the splits: {plain_s:7.2f} s")
    print(f"  listed (iso-bench):             {listed_s:7.2f} s   ratio {plain_s / listed_s:.1f}x")
    print(f"  same rows selected and same scores: {same}")


if __name__ == "__main__":
    main()
