"""How far this code's scores lie from a reference results folder: every variant of the main job run again
(seed 0, into a fresh results folder) and each main score compared with the reference's for the same variant,
setup and task.

    python benchmarks/score_moves.py --data-dir ../shared/data [--reference leaderboards/v2] [--cache-dir DIR]

Prints one row per variant (largest move over the tasks, in points, i.e. main score x 100) and the largest move
overall. Pass a warm ``--cache-dir`` to skip the encode; fits are then taken from it too if it holds them (a
fit cache entry is keyed by the methods' source code, so fits of other code are never reused).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from iso_bench.grid.runner import RunConfig, run
from iso_bench.mteb_plugin import DEFAULT_MODEL
from iso_bench.results.benchmark import DEFAULT_METHODS


def main_scores(folder: Path, model: str) -> dict[tuple[str, str, str], float]:
    """``(variant, setup folder, task) -> main score`` of every result of ``model``'s variants under ``folder``."""
    prefix = model.replace("/", "__") + "+"
    out = {}
    for path in folder.rglob("*.json"):
        parts = path.relative_to(folder).parts
        variant = next((p for p in parts if p.startswith(prefix)), None)
        if variant is None or path.name == "model_meta.json":
            continue
        data = json.loads(path.read_text())
        if "scores" not in data:
            continue
        setup = parts[-2] if "experiments" in parts else ""
        entries = [e for split in data["scores"].values() for e in split]
        out[(variant[len(prefix):], setup, data["task_name"])] = float(entries[0]["main_score"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--reference", default=str(Path(__file__).resolve().parents[1] / "leaderboards" / "v2"))
    parser.add_argument("--data-dir", default=os.environ.get("ISO_BENCH_DATA_DIR"))
    parser.add_argument("--cache-dir")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="iso-bench-moves-") as tmp:
        run(RunConfig(model=args.model, methods=list(DEFAULT_METHODS), data_dir=args.data_dir, results_dir=tmp,
                      cache_dir=args.cache_dir or Path(tmp) / "cache", threads=args.threads, progress=False))
        new = main_scores(Path(tmp) / "results", args.model)
    reference = main_scores(Path(args.reference), args.model)
    shared = sorted(set(new) & set(reference))
    if not shared:
        raise SystemExit(f"no result of {args.model} in {args.reference} matches a new one (variant, setup, task)")
    print(f"{'variant':<14}{'setup':<40}{'results':>8}{'largest move':>14}  task")
    largest = (0.0, "")
    for variant in dict.fromkeys(v for v, _, _ in shared):
        rows = [(abs(new[k] - reference[k]) * 100, k) for k in shared if k[0] == variant]
        move, (_, setup, task) = max(rows)
        print(f"{variant:<14}{setup:<40}{len(rows):>8}{move:>14.4f}  {task}")
        largest = max(largest, (move, f"{variant} on {task}"))
    print(f"largest move: {largest[0]:.4f} points ({largest[1]}); {len(shared)} results compared")


if __name__ == "__main__":
    main()
