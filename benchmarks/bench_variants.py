"""How much do N variants cost over one? Wall time of (raw + every method) against raw alone, both from
a cold raw-vector cache, and of a second (warm) run of every method against the cold one, measured in
one process, side by side. Also the time each method's fits take.

    python benchmarks/bench_variants.py [--tasks mteb-sts] [--data-dir DIR] [--methods ...]

Prints the ratios; nothing is asserted (timings on shared machines are noisy).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from iso_bench.mteb_plugin import DEFAULT_METHODS, DEFAULT_MODEL
from iso_bench.runner import RunConfig, RunSummary, run


def timed(cfg: RunConfig) -> tuple[float, RunSummary]:
    start = time.perf_counter()
    summary = run(cfg)
    return time.perf_counter() - start, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--tasks", nargs="+", default=["mteb-sts"])
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    parser.add_argument("--data-dir")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="iso-bench-bench-") as tmp:
        root = Path(tmp)

        def config(name: str, methods: list[str], cache: str) -> RunConfig:
            return RunConfig(model=args.model, methods=methods, tasks=args.tasks, data_dir=args.data_dir,
                             results_dir=root / f"results-{name}", cache_dir=root / cache,
                             batch_size=args.batch_size, progress=False, overwrite=True)

        t_raw, s_raw = timed(config("raw", ["raw"], "cache-raw"))
        t_all, s_all = timed(config("all", list(args.methods), "cache-all"))
        t_warm, s_warm = timed(config("warm", list(args.methods), "cache-all"))

    print(f"model {args.model}; tasks {' '.join(args.tasks)}; methods {' '.join(args.methods)}")
    print(f"{'run':<34}{'seconds':>9}{'texts encoded':>15}")
    print(f"{'raw alone, cold cache':<34}{t_raw:>9.1f}{s_raw.encode_stats['computed']:>15}")
    print(f"{'raw + every method, cold cache':<34}{t_all:>9.1f}{s_all.encode_stats['computed']:>15}")
    print(f"{'raw + every method, warm cache':<34}{t_warm:>9.1f}{s_warm.encode_stats['computed']:>15}")
    print(f"ratio (raw + every method) / (raw alone), cold: {t_all / t_raw:.2f}")
    print(f"ratio warm / cold (every method):               {t_warm / t_all:.2f}")
    print("seconds in each method's fits (cold run; one fit per task and level):")
    for name, seconds in s_all.fit_seconds.items():
        print(f"  {name.rpartition('+')[2]:<32}{seconds:>9.1f}")
    fits = sum(s_all.fit_seconds.values())
    print(f"ratio (cold run less its fits) / (raw alone):   {(t_all - fits) / t_raw:.2f}")


if __name__ == "__main__":
    main()
