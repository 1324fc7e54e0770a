"""Are the numbers the same from every path, and what does the equal-length batching policy cost?

    python benchmarks/bench_reproducible.py --data-dir ../shared/data [--tasks mteb-sts] [--methods raw whiten]

1. The suite is run three times under the equal-length policy, each into its own results folder:
   tasks in order, batch size 32, empty cache; tasks reversed, batch size 7, another empty cache; tasks reversed,
   batch size 7, the first run's (warm) cache. A result counts as identical when its main score, its per-unit
   values (the ``.instances.npz`` beside it) and its recorded interval are the same bits in all three runs:

       identical: N/N

   The first two runs are repeated under the old padded policy (``padded identical: M/N``: what it gave).
2. Every text of the suite is encoded with 1 and with 2 torch threads under the equal-length policy:

       threads identical: K/T texts

3. Every text of the suite is encoded by the same loaded model under each policy, twice each, alternating, at
   ``--threads``; the fastest of each:

       policy ratio: R      (equal-length seconds / padded seconds; below 1 is a gain)

Nothing is asserted; the machine's load moves the timings (say what else ran).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def outcome(results: Path) -> dict[tuple[str, str], tuple]:
    """Per (variant folder, task): main score, interval record and the bytes of the units."""
    import numpy as np

    out = {}
    for path in sorted(results.glob("results/*/*/**/*.json")):
        if path.name == "model_meta.json":
            continue
        entry = json.loads(path.read_text())["scores"]["test"][0]
        npz = path.with_name(path.stem + ".instances.npz")
        units = b""
        if npz.is_file():
            with np.load(npz) as arrays:
                units = b"".join(arrays[k].tobytes() for k in sorted(arrays.files) if k.endswith("/units"))
        interval = json.dumps((entry.get("iso_bench") or {}).get("interval"), sort_keys=True)
        out[(path.relative_to(results).parts[1], path.stem)] = (entry["main_score"], interval, units)
    return out


def suite_texts(tasks: list[str], data_dir: str | None) -> list[str]:
    from iso_bench.data.fit_corpus import task_texts
    from iso_bench.data.sources import use_source
    from iso_bench.grid.tasks import build_task, resolve

    texts: dict[str, None] = {}
    for ref in resolve(tasks):
        task = build_task(ref)
        use_source(task, data_dir)
        task.load_data()
        texts.update(dict.fromkeys(task_texts(task)))
    return list(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--tasks", nargs="+", default=["mteb-sts"])
    parser.add_argument("--methods", nargs="+", default=["raw", "whiten"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the runs and timings (default 1)")
    parser.add_argument("--skip-runs", action="store_true", help="only the thread check and the timing")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import numpy as np
    import torch

    from iso_bench.backbones.base import EQUAL_LENGTH, PADDED
    from iso_bench.backbones.loader import load_backbone
    from iso_bench.grid.runner import RunConfig, run
    from iso_bench.grid.tasks import resolve

    tasks = [ref.name for ref in resolve(args.tasks)]
    with tempfile.TemporaryDirectory(prefix="iso-bench-repro-") as tmp:
        root = Path(tmp)

        def once(name: str, order: list[str], batch: int, cache: str, policy: str) -> dict:
            cfg = RunConfig(model=MINILM, methods=args.methods, tasks=order, results_dir=root / name,
                            cache_dir=root / cache, data_dir=args.data_dir, batch_size=batch, progress=False,
                            threads=args.threads, batching=policy)
            started = time.perf_counter()
            run(cfg)
            print(f"  {name}: {policy}, {'reversed' if order != tasks else 'in order'}, batch {batch}, "
                  f"cache {cache}: {time.perf_counter() - started:.1f} s", flush=True)
            return outcome(root / name)

        if not args.skip_runs:
            print(f"runs of {', '.join(args.methods)} on {len(tasks)} tasks:", flush=True)
            runs = [once("a", tasks, 32, "cache-a", EQUAL_LENGTH), once("b", tasks[::-1], 7, "cache-b", EQUAL_LENGTH),
                    once("c", tasks[::-1], 7, "cache-a", EQUAL_LENGTH)]
            same = sum(all(r.get(key) == value for r in runs[1:]) for key, value in runs[0].items())
            print(f"identical: {same}/{len(runs[0])}")
            padded = [once("p", tasks, 32, "cache-p", PADDED), once("q", tasks[::-1], 7, "cache-q", PADDED)]
            same = sum(padded[1].get(key) == value for key, value in padded[0].items())
            print(f"padded identical: {same}/{len(padded[0])}")

        texts = suite_texts(args.tasks, args.data_dir)
        equal = load_backbone(MINILM, batching=EQUAL_LENGTH)
        by_threads = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            by_threads.append(np.stack(equal.encode(texts, progress=False)["sentence"]))
        same = int((by_threads[0] == by_threads[1]).all(axis=1).sum())
        print(f"threads identical: {same}/{len(texts)} texts (max |difference| "
              f"{float(np.abs(by_threads[0] - by_threads[1]).max()):.3g})")

        torch.set_num_threads(args.threads)
        padded_bb = load_backbone(MINILM, batching=PADDED)
        seconds: dict[str, list[float]] = {EQUAL_LENGTH: [], PADDED: []}
        for _ in range(2):
            for policy, backbone in ((PADDED, padded_bb), (EQUAL_LENGTH, equal)):
                started = time.perf_counter()
                backbone.encode(texts, progress=False)
                seconds[policy].append(time.perf_counter() - started)
        best = {policy: min(times) for policy, times in seconds.items()}
        print(f"encode {len(texts)} texts at {args.threads} thread(s): padded {best[PADDED]:.1f} s, "
              f"equal-length {best[EQUAL_LENGTH]:.1f} s")
        print(f"policy ratio: {best[EQUAL_LENGTH] / best[PADDED]:.2f}")


if __name__ == "__main__":
    main()
