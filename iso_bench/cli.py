"""The ``iso-bench`` command line: a thin layer over :mod:`iso_bench.runner` and friends."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from iso_bench import __version__

EPILOG = """examples:
  iso-bench run                                   # all-MiniLM-L6-v2, every method, the 7 MTEB STS tasks
  iso-bench run --model bert-base-uncased --methods raw whiten-256 cluster-pca --tasks STSBenchmark
  iso-bench run --data-dir ../shared/data/hub     # read datasets from a local mirror
  iso-bench list                                  # methods, suites and tasks
  iso-bench leaderboard results -o leaderboard.md # tables, plots and provenance from a results folder
  iso-bench outliers --model google-bert/bert-base-uncased  # outlier dimensions of every layer

environment: ISO_BENCH_DATA_DIR (mirror folder), ISO_BENCH_CACHE (raw-vector cache),
HF_HUB_OFFLINE=1 with HF_HUB_CACHE (models from a local Hugging Face cache)"""


def build_parser() -> argparse.ArgumentParser:
    from iso_bench.mteb_plugin import DEFAULT_METHODS
    from iso_bench.runner import DEFAULT_MODEL

    parser = argparse.ArgumentParser(
        prog="iso-bench",
        description="Compare isotropy post-processing methods of an encoder on MTEB tasks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"iso-bench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens (INFO level)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="evaluate the variants of a model", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--model", default=DEFAULT_MODEL, help=f"hub id or local folder (default: {DEFAULT_MODEL})")
    run.add_argument("--revision", help="model revision (default: the one mteb pins, else the latest)")
    run.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), metavar="SPEC",
                     help="method specs, e.g. raw whiten-256 abtt-7 cluster-pca-27-12 (default: %(default)s)")
    run.add_argument("--tasks", nargs="+", default=["mteb-sts"], metavar="NAME",
                     help="task or suite names (default: mteb-sts); see `iso-bench list`")
    run.add_argument("--results", default="results",
                     help="results folder, readable by mteb.ResultCache (default: ./results)")
    run.add_argument("--data-dir", help="local dataset mirror laid out as <dir>/<org>/<name>/ (env ISO_BENCH_DATA_DIR)")
    run.add_argument("--cache-dir", help="raw-vector cache (env ISO_BENCH_CACHE, default ~/.cache/iso_bench)")
    run.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda when available)")
    run.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    run.add_argument("--fit-corpus", default="task",
                     help="'task' (the evaluated task's unlabeled texts; default) or a text file, one text per line")
    run.add_argument("--seed", type=int, default=0, help="seed of the fitted methods (default: 0)")
    run.add_argument("--pooling", choices=["mean", "cls", "first-last-avg"],
                     help="sentence pooling (default: the model's own, e.g. mean for sentence-transformers)")
    run.add_argument("--layer", type=int, help="hidden-state layer, 0 = embeddings, -1 = last (default: -1)")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code (off by default)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")

    sub.add_parser("list", help="list methods, suites and tasks with their sizes")

    from iso_bench.leaderboard import add_leaderboard_arguments

    board = sub.add_parser("leaderboard", help="markdown (or csv, latex) tables and plots from a results folder",
                           description="Tables per model (a row per variant, a column per task, means named by "
                           "their tasks and aggregation, differences from raw, best in bold, missing as –), a "
                           "model comparison, and the provenance that makes each number citable.")
    add_leaderboard_arguments(board)

    out = sub.add_parser("outliers", help="neuron-level outlier analysis of every layer (Luo et al. 2021)",
                         description="For each layer: the dimensions that most often hold a token vector's smallest "
                         "or largest value, how often, their mean in standard deviations, and how their value "
                         "varies with token position. Writes <model>-outliers.{md,json,png}.")
    out.add_argument("--model", default=DEFAULT_MODEL, help=f"hub id or local folder (default: {DEFAULT_MODEL})")
    out.add_argument("--revision", help="model revision (default: the one mteb pins, else the latest)")
    out.add_argument("--layers", nargs="+", type=int, metavar="L",
                     help="hidden-state layers, 0 = embeddings, -1 = last (default: all)")
    out.add_argument("--corpus", default="STSBenchmark",
                     help="an mteb task whose test sentences form the corpus, or a text file (default: STSBenchmark)")
    out.add_argument("--output", default="outliers", help="folder for the reports (default: ./outliers)")
    out.add_argument("--top", type=int, default=5, help="dimensions listed per layer (default: 5)")
    out.add_argument("--data-dir", help="data directory (env ISO_BENCH_DATA_DIR)")
    out.add_argument("--device", help="cpu, cuda, ... (default: cuda when available)")
    out.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    out.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def cmd_list() -> int:
    from iso_bench.methods import METHODS
    from iso_bench.suites import suites

    print("methods (spec: name[-positional...][-key=value...]):")
    for name in METHODS:
        cls = METHODS.get(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        params = ", ".join(f"{k}={v}" for k, v in cls.param_defaults().items()) or "no parameters"
        positional = f" positional: {', '.join(cls.spec_args)};" if cls.spec_args else ""
        print(f"  {name:<12} {doc}\n  {'':<12} level={cls.default_level};{positional} {params}")
    print("\nsuites (--tasks takes suite or task names):")
    groups = suites()
    for name, members in groups.items():
        if name != "all":
            print(f"  {name:<12} {' '.join(members)}")
    print(f"  {'all':<12} every task above")
    print("\ntasks:")
    for name in groups["all"]:
        kind, size = _task_summary(name)
        print(f"  {name:<22} {kind:<16} {size}")
    return 0


def _task_summary(name: str) -> tuple[str, str]:
    """(kind, size) of a task for ``iso-bench list``, read from metadata without loading data."""
    import mteb

    task = mteb.get_task(name)
    note = getattr(task, "size_note", "")
    if note:
        return getattr(task, "kind", task.metadata.type), note
    stats = task.metadata.descriptive_stats or {}
    sizes = [f"{stats[s]['num_samples']:,} {s} pairs" for s in task.metadata.eval_splits if s in stats]
    return f"mteb {task.metadata.type}", ", ".join(sizes)


def cmd_outliers(args: argparse.Namespace) -> int:
    from pathlib import Path

    from iso_bench.outlier_analysis import analyse, write_reports
    from iso_bench.runner import RunConfig, build_backbone

    if Path(args.corpus).is_file():
        from iso_bench.encoder import read_text_file

        texts, corpus = read_text_file(args.corpus), f"file {Path(args.corpus).name}"
    else:
        from iso_bench.data import get_task
        from iso_bench.encoder import task_texts

        texts, corpus = task_texts(get_task(args.corpus, args.data_dir)), f"{args.corpus} test sentences"
    backbone = build_backbone(RunConfig(model=args.model, revision=args.revision, device=args.device))
    report = analyse(backbone, texts, args.layers, batch_size=args.batch_size, progress=not args.no_progress,
                     corpus=corpus)
    paths = write_reports(report, Path(args.output), args.top)
    for layer in report.layers:
        print(f"layer {layer.layer:>2}: outliers {', '.join(map(str, layer.outliers)) or 'none'}")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from iso_bench.runner import RunConfig, format_summary, run

    cfg = RunConfig(
        model=args.model, revision=args.revision, methods=args.methods, tasks=args.tasks,
        results_dir=args.results, data_dir=args.data_dir, cache_dir=args.cache_dir, device=args.device,
        batch_size=args.batch_size, fit_corpus=args.fit_corpus, seed=args.seed, pooling=args.pooling,
        layer=args.layer, overwrite=args.overwrite, progress=not args.no_progress,
        trust_remote_code=args.trust_remote_code, command=_reproduce_command(args),
    )
    summary = run(cfg)
    print(f"\n{summary.model} @ {summary.revision}: main score x 100 "
          "(STS: Spearman; WiC: accuracy; WSD: F1; isotropy: I(W))")
    print(format_summary(summary))
    stats = summary.encode_stats
    print(f"\nraw vectors: {stats.get('computed', 0)} texts encoded, {stats.get('reused', 0)} reused from the cache;"
          f" {summary.seconds:.1f} s; results in {summary.results_dir}")
    if summary.errors:
        print("\nfailed (shown as – above, never averaged):", file=sys.stderr)
        for variant, errors in summary.errors.items():
            for task, message in errors.items():
                print(f"  {variant} on {task}: {message}", file=sys.stderr)
        return 1
    return 0


def _reproduce_command(args: argparse.Namespace) -> str:
    """The ``iso-bench run`` command line that reproduces these numbers (paths and speed flags left out)."""
    import shlex

    parts = ["iso-bench", "run", "--model", args.model]
    if args.revision:
        parts += ["--revision", args.revision]
    parts += ["--methods", *args.methods, "--tasks", *args.tasks]
    defaults = {"--fit-corpus": "task", "--seed": 0, "--pooling": None, "--layer": None}
    given = {"--fit-corpus": args.fit_corpus, "--seed": args.seed, "--pooling": args.pooling, "--layer": args.layer}
    for flag, value in given.items():
        if value != defaults[flag]:
            parts += [flag, str(value)]
    return shlex.join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help()
        return 2
    from iso_bench.errors import USER_ERRORS

    try:
        from iso_bench.leaderboard import run_leaderboard

        commands = {"list": lambda: cmd_list(), "run": lambda: cmd_run(args), "outliers": lambda: cmd_outliers(args),
                    "leaderboard": lambda: run_leaderboard(args)}
        return commands[args.command]()
    except USER_ERRORS as exc:
        print(f"iso-bench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("iso-bench: interrupted; finished results and cached vectors are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
