"""iso-bench's GPU tolerance, checked on a machine with a CUDA GPU.

    python benchmarks/gpu_check.py --data-dir ../shared/data [--model sentence-transformers/all-MiniLM-L6-v2]

On a GPU the kernels depend on the batch's shape, so equal-length batches do not make a text's vector
independent of its batch as they do on the CPU. iso-bench's GPU promise is a tolerance instead: between batch
sizes and cache states, a main score moves by at most ``TOLERANCE`` (1e-4, a tenth of MTEB's own results check).

The same variants (raw and every default method, iso-bench v2's) on STSBenchmark and STSBenchmark-SentEval (which
share texts) are run on ``--device cuda`` three times: batch size 32 from an empty cache, batch size 7 with the
tasks reversed from another empty cache, and batch size 7 on the first run's (warm) cache. It prints every main
score, then

    largest main-score difference: D
    GPU tolerance 1e-4: met | NOT met

and exits 1 when it is not met. Without CUDA it says so and exits 2. A random-weight copy of a model's
architecture serves timing, not this check: use real weights (a half-precision copy fits in 64 MiB).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

TOLERANCE = 1e-4
TASKS = ["STSBenchmark", "STSBenchmark-SentEval"]


def scores(results: Path) -> dict[tuple[str, str], float]:
    out = {}
    for path in sorted(results.glob("results/*/*/**/*.json")):
        if path.name != "model_meta.json":
            out[(path.relative_to(results).parts[1], path.stem)] = json.loads(path.read_text())["scores"]["test"][0][
                "main_score"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--methods", nargs="+", default=None, help="default: raw and every default method")
    args = parser.parse_args()
    if args.methods is None:
        from iso_bench.results.benchmark import DEFAULT_METHODS

        args.methods = list(dict.fromkeys(["raw", *DEFAULT_METHODS]))
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    from iso_bench.grid.runner import RunConfig, run

    with tempfile.TemporaryDirectory(prefix="iso-bench-gpu-") as tmp:
        root = Path(tmp)
        runs = {}
        plan = (("batch 32, cold", TASKS, 32, "a"), ("batch 7, reversed, cold", TASKS[::-1], 7, "b"),
                ("batch 7, warm", TASKS[::-1], 7, "a"))
        for name, order, batch, cache in plan:
            run(RunConfig(model=args.model, methods=args.methods, tasks=order, results_dir=root / name,
                          cache_dir=root / cache, data_dir=args.data_dir, batch_size=batch, device="cuda",
                          progress=False))
            runs[name] = scores(root / name)
    first = next(iter(runs.values()))
    worst = 0.0
    for key in sorted(first):
        values = [r[key] for r in runs.values()]
        worst = max(worst, max(values) - min(values))
        print(f"{key[0]:60s} {key[1]:24s} " + "  ".join(f"{v:.7f}" for v in values))
    print(f"largest main-score difference: {worst:.3g}")
    met = worst <= TOLERANCE
    print(f"GPU tolerance {TOLERANCE:g}: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
