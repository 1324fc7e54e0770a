"""What the Dask engine costs over the local one on one machine, and what several workers gain.

    python benchmarks/bench_grid.py --data-dir ../shared/data [--tasks mteb-sts] [--threads 1] [--workers 2]

The same grid (two models: all-MiniLM-L6-v2 by its hub id and a copy of its files in a local folder, so that
nothing is shared between them; every default method; the tasks given) is run three times from empty caches
and results folders, in this order:

1. the local engine (this process);
2. ``--engine dask`` on a local cluster of one worker process (one job at a time, like the local engine);
3. ``--engine dask`` on a local cluster of ``--workers`` worker processes (jobs side by side).

Every run uses ``--threads`` torch threads per process. It prints each run's seconds, then:

    ratio dask/local: X     (run 2 / run 1: the engine's own overhead; goal at most 1.15)
    speed-up: Y             (run 1 / run 3, with --workers processes at once)

Nothing is asserted; the machine's load moves every run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--tasks", nargs="+", default=["mteb-sts"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process (default: 1)")
    parser.add_argument("--workers", type=int, default=2, help="workers of the third run (default: 2)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.data_dir:
        os.environ["ISO_BENCH_DATA_DIR"] = str(Path(args.data_dir).resolve())

    from huggingface_hub import snapshot_download

    from iso_bench.grid.engines import DaskEngine, LocalEngine
    from iso_bench.grid.grid import run_grid
    from iso_bench.grid.plan import RunConfig

    rows = []
    with tempfile.TemporaryDirectory(prefix="iso-bench-grid-") as tmp:
        root = Path(tmp)
        copy = root / "minilm-copy"
        shutil.copytree(snapshot_download(MINILM, local_files_only=True), copy)
        models = [MINILM, str(copy)]

        def once(label: str, name: str, engine_of) -> None:
            cfg = RunConfig(tasks=args.tasks, data_dir=args.data_dir, results_dir=root / f"results-{name}",
                            cache_dir=root / f"cache-{name}", threads=args.threads, progress=False)
            engine = engine_of()
            started = time.perf_counter()
            try:
                summary = run_grid(models, cfg, engine=engine, say=lambda text: None)
            finally:
                engine.close()
            seconds = time.perf_counter() - started
            rows.append((label, seconds, summary.jobs_run, len(summary.failed)))
            print(f"  done: {label}, {seconds:.1f} s, {summary.jobs_run} jobs, {len(summary.failed)} failed",
                  flush=True)

        print(f"models: {MINILM} and a copy; tasks {' '.join(args.tasks)}; {args.threads} torch thread(s) per process",
              flush=True)
        once("local engine", "local", LocalEngine)
        once("dask, 1 worker", "dask1", lambda: DaskEngine(workers=1))
        once(f"dask, {args.workers} workers", "daskn", lambda: DaskEngine(workers=args.workers))
    print(f"\n{'run':<22}{'seconds':>9}{'jobs':>6}{'failed':>8}")
    for label, seconds, jobs, failed in rows:
        print(f"{label:<22}{seconds:>9.1f}{jobs:>6}{failed:>8}")
    print(f"\nratio dask/local: {rows[1][1] / rows[0][1]:.2f}")
    print(f"speed-up: {rows[0][1] / rows[2][1]:.2f} ({args.workers} workers, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
