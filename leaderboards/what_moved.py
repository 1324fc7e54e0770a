"""Compare every main score of one results folder with its counterpart in another: what moved from iso-bench v2
to v3, and by how much.

    python leaderboards/what_moved.py leaderboards/v2 leaderboards/v3 [--csv moved.csv] [--between FOLDER]

A result is matched by encoder, variant (its folder's spec), fit setting and seed, and task; a token-level
variant's v3 setup (``..._token_pooling_model``: the model's own pooling) is matched with v2's (a mean of the
text's tokens). Per score entry (split and subset) it prints the difference of the main scores and whether the
per-instance units are the same float64 values. The summary counts, per encoder and variant group, the results
that are equal, that moved by at most 1e-6, by at most 1e-5, and by more, with the largest move, then the causes
of the moves larger than 1e-6 (:func:`cause`); ``--csv`` writes every pair with its cause. Results of one folder
only (v3's bytes axis) are counted apart. ``--between`` names the results of the old code run on the new static
encoder's folder, which split a static row's move into its rows' share and the code's (:func:`split_cause`).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from iso_bench.results.units_file import unpack

TOKEN_SETUP = "__token_pooling_model"
TOKEN_LEVEL = ("cluster-pca", "zipfian-whiten")


def scores(folder: Path) -> dict[tuple[str, str, str, str, str, str], tuple[float, np.ndarray | None, str]]:
    """``(model, spec, setup, task, split, subset) -> (main score, units or None, task type)`` of every result
    under ``folder/results``. A units file that a result records but that is not beside it stops the comparison,
    named (``same_units`` would say False for units that were never looked at): v2's are restored from a tag."""
    out, missing = {}, {}  # missing: result file -> the units file it records
    for path in sorted((folder / "results").glob("*/*/**/*.json")):
        if path.name == "model_meta.json":
            continue
        model, _, spec = path.relative_to(folder / "results").parts[0].partition("+")
        parts = path.relative_to(folder / "results").parts
        setup = parts[3].replace(TOKEN_SETUP, "") if len(parts) > 4 and parts[2] == "experiments" else "-"
        data = json.loads(path.read_text(encoding="utf-8"))
        npz = path.with_name(path.stem + ".instances.npz")
        with np.load(npz) if npz.is_file() else contextlib.nullcontext() as stored:
            for split, entries in data["scores"].items():
                for entry in entries:
                    record = entry.get("iso_bench", {}).get("instances") or {}
                    units = None
                    if stored is None and record.get("file"):
                        missing.setdefault(path, npz)
                    if stored is not None and record.get("file") and record.get("key"):
                        units = unpack(stored, f"{record['key']}/units")
                    kind = (entry.get("iso_bench") or {}).get("task_type") or ""
                    out[(model, spec, setup, data["task_name"], split, entry.get("hf_subset", "default"))] = (
                        float(entry["main_score"]), units, kind)
    if missing:
        (path, npz), more = next(iter(missing.items())), len(missing) - 1
        sys.exit(f"what_moved.py: error: {npz}: the units file that {path} records is missing"
                 f"{f' (and {more} more)' if more else ''}. Put the units files back beside their results (v2's: "
                 "git restore --source=iso-bench-v2 leaderboards/v2/results, leaderboards/README.md)")
    return out


STATIC = "local__static-"  # the static encoders: made by a recipe, their rows those of the host that made them
WHITENED = ("whiten", "zca", "zipfian-whiten")  # I(W) of whitened vectors is set by rounding (docs/results.md)
OUTPUTS = {"Retrieval": "queries' metrics", "Reranking": "queries' metrics", "PairClassification": "pair scores",
           "Classification": "decisions", "WiC": "decisions", "WSD": "senses chosen", "STS": "similarities"}


def cause(model: str, spec: str, task: str, kind: str, diff: float, old: np.ndarray | None,
          new: np.ndarray | None) -> str:
    """Why a main score moved by more than 1e-6 (empty where it did not), by the first rule that applies: a
    static encoder's rows; the model's own pooling (token-level variants); the rounding that sets I(W) of
    whitened vectors; rounding (at most 1e-5); a near-tie that rounding tipped, with how many instances' outputs
    differ; else ``unexplained``, for a reader to look into."""
    if abs(diff) <= 1e-6:
        return ""
    base = spec.split("-level=")[0].split("-precision=")[0]
    if model.startswith(STATIC):
        return "rows: the static encoder's folder"
    if base.split("-seed=")[0] in TOKEN_LEVEL or spec.endswith("-level=token"):
        return "pooling: the model's own"
    if task.startswith("Isotropy") and base.rstrip("0123456789-") in WHITENED:
        return "rounding: I(W) of whitened vectors"
    if abs(diff) <= 1e-5:
        return "rounding"
    if old is not None and new is not None and old.shape == new.shape and old.ndim:
        changed = int(np.any(old != new, axis=tuple(range(1, old.ndim))).sum())
        what = next((v for k, v in OUTPUTS.items() if k.lower() in (kind or task).lower()), "outputs")
        largest = float(np.abs(old - new).max())
        if 0 < largest <= 1e-6:  # the outputs moved by rounding; their order among near-equal ones did not hold
            return (f"near-tie: {changed} of {len(old)} {what} moved by at most {largest:.1g}, "
                    "reordering near-equal ones")
        return f"near-tie: {changed} of {len(old)} {what} differ"
    return "unexplained"


def split_cause(model: str, spec: str, task: str, kind: str, old: tuple, mid: tuple | None, new: tuple) -> str:
    """A static encoder's move split by ``mid``, the old code's result on the new folder's rows (``--between``):
    the rows' share (old to mid) and the code's (mid to new, by :func:`cause` as for a model of fixed weights).
    Without ``mid``, or for another encoder, :func:`cause` alone."""
    diff = new[0] - old[0]
    if not model.startswith(STATIC) or abs(diff) <= 1e-6 or mid is None:
        return cause(model, spec, task, kind, diff, old[1], new[1]) + (
            " (the code's share not measured)" if model.startswith(STATIC) and abs(diff) > 1e-6 else "")
    rows = abs(mid[0] - old[0]) > 1e-6
    code = cause("", spec, task, kind, new[0] - mid[0], mid[1], new[1])
    split = "; ".join(([cause(model, spec, task, kind, diff, None, None)] if rows else []) + ([code] if code else []))
    return split or cause(model, spec, task, kind, diff, None, None)  # each share within 1e-6, together more


def group_of(spec: str) -> str:
    if spec.split("-level=")[0] in TOKEN_LEVEL:
        return f"{spec} (token-level)"
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--csv", type=Path, help="write every matched pair here")
    parser.add_argument("--model", help="only this encoder (its folder name before '+')")
    parser.add_argument("--between", type=Path, help="the old code's results on the new static folder: splits a "
                                                     "static encoder's moves into its rows' and the code's")
    args = parser.parse_args(argv)
    old, new = scores(args.old), scores(args.new)
    between = scores(args.between) if args.between else {}
    if args.model:
        old = {k: v for k, v in old.items() if k[0] == args.model}
        new = {k: v for k, v in new.items() if k[0] == args.model}
    both = sorted(set(old) & set(new))
    rows = []
    for key in both:
        (a, ua, kind), (b, ub, _) = old[key], new[key]
        same_units = ua is not None and ub is not None and ua.shape == ub.shape and ua.tobytes() == ub.tobytes()
        why = split_cause(key[0], key[1], key[3], kind, old[key][:2], between.get(key), new[key][:2]) if (
            args.between) else cause(key[0], key[1], key[3], kind, b - a, ua, ub)
        rows.append((*key, a, b, b - a, same_units, why))
    if args.csv:
        with args.csv.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["model", "spec", "setup", "task", "split", "subset", "old", "new",
                             "difference", "same_units", "cause"])
            writer.writerows(rows)
    # per (encoder, variant): n, same units, moved by at most 1e-6, at most 1e-5, more; the largest move and where
    summary: dict[tuple[str, str], list] = defaultdict(lambda: [0, 0, 0, 0, 0, 0.0, ""])
    causes: dict[tuple[str, str], int] = defaultdict(int)
    for model, spec, setup, task, *_, a, b, diff, same, why in rows:
        if why:
            causes[(model, "; ".join(p.split(":")[0] if p.startswith("near-tie") else p for p in why.split("; ")))] += 1
        s = summary[(model, group_of(spec))]
        s[0] += 1
        s[1] += same
        moved = abs(diff)
        if moved:
            s[2 if moved <= 1e-6 else 3 if moved <= 1e-5 else 4] += 1
        if moved > s[5]:
            s[5], s[6] = moved, f"{task} ({setup}): {a:.6f} to {b:.6f}"
    print("| encoder | variant | scores | same units | moved ≤ 1e-6 | ≤ 1e-5 | more | largest move |")
    print("|---|---|---|---|---|---|---|---|")
    for (model, group), (n, same, small, mid, big, largest, where) in sorted(summary.items()):
        print(f"| {model} | {group} | {n} | {same} | {small} | {mid} | {big} | {largest:.2g} {where} |")
    print("\n| encoder | cause of a move larger than 1e-6 | scores |\n|---|---|---|")
    for (model, why), n in sorted(causes.items()):
        print(f"| {model} | {why} | {n} |")
    only_new = sorted({(k[0], k[1]) for k in set(new) - set(old)})
    only_old = sorted({(k[0], k[1], k[2], k[3]) for k in set(old) - set(new)})
    print(f"\n{len(both)} scores in both; {len(set(new) - set(old))} in {args.new} alone "
          f"({len(only_new)} variants); {len(set(old) - set(new))} in {args.old} alone", file=sys.stderr)
    for item in only_old[:40]:
        print("  only in old:", *item, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
