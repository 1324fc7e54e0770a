"""The ``iso-bench`` command line: all of its argparse, and a thin layer that parses, calls and prints.

Each sub-command is a parser plus one ``cmd_*`` function (``set_defaults(func=...)``), here or, for ``outliers``
and ``submission``, in :mod:`iso_bench.cli.outliers` and :mod:`iso_bench.cli.submission`; the work is done by
:mod:`iso_bench.grid.runner`, :mod:`iso_bench.export`, the report writers and the registries. The argument types
live in :mod:`.arguments`, the console (log lines through progress bars, SIGTERM) in :mod:`.console`. ``iso-bench
--help``, ``<command> --help`` and ``iso-bench list`` import neither torch nor mteb: the defaults they show come from
light modules.

Errors: an :class:`~iso_bench.registry.IsoBenchError` (bad input: a name, a file, a parameter) is printed as
``iso-bench: error: <message>`` with exit status 2, and so is an error of the machine (a full disk, a
read-only folder); anything else is a bug and keeps its traceback. SIGTERM ends a command as Ctrl-C does.

Example:
    >>> main(["list"])                                    # doctest: +SKIP
    >>> main(["run", "--methods", "raw", "whiten", "--tasks", "STSBenchmark"])   # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from iso_bench._version import __version__
from iso_bench.backbones.hf_backbone import POOLINGS
from iso_bench.backbones.precision import DTYPES
from iso_bench.checks import check_seeds, set_threads
from iso_bench.cli.arguments import device_name, expand_methods, method_spec, positive_int, seconds  # noqa: F401
from iso_bench.cli.console import Terminated, console, terminate_as_interrupt
from iso_bench.cli.outliers import DTYPE_HELP, add_outliers, cmd_outliers, outlier_corpus  # noqa: F401 - named here too
from iso_bench.cli.submission import add_submission
from iso_bench.export import ExportError, export
from iso_bench.files import MANIFEST, remove_empty_folders, verify_manifest, written_to
from iso_bench.grid.engines import make_engine
from iso_bench.grid.grid import run_grid
from iso_bench.grid.plan import reproduce_command
from iso_bench.grid.report import print_grid, print_run, print_stopped
from iso_bench.grid.runner import RunConfig, RunStopped, run
from iso_bench.grid.tasks import describe_benchmarks, kept_tasks
from iso_bench.kernels import MODE_ENV, MODES, kernel_mode, pin_kernels
from iso_bench.kinds.cards import describe_tasks
from iso_bench.methods.listing import describe_methods
from iso_bench.mteb_plugin import DEFAULT_MODEL
from iso_bench.registry import IsoBenchError
from iso_bench.report import FORMATS, write_leaderboard
from iso_bench.results.benchmark import DEFAULT_METHODS, STORAGE_METHODS
from iso_bench.vectors.manage import describe, parse_size, prune
from iso_bench.vectors.store import default_cache_dir

EPILOG = """examples:
  iso-bench run                                   # all-MiniLM-L6-v2, every method, the 7 MTEB STS tasks
  iso-bench run --model google-bert/bert-base-uncased --methods raw whiten-256 cluster-pca --tasks STSBenchmark
  iso-bench run --data-dir ../shared/data         # read datasets from a local copy of the data (see README)
  iso-bench list                                  # methods, suites and tasks
  iso-bench leaderboard results -o leaderboard.md # tables, plots and provenance from a results folder
  iso-bench outliers --model google-bert/bert-base-uncased  # outlier dimensions of every layer
  iso-bench run --model ./my-decoder --pooling last-token --dtype bfloat16 --methods raw whiten --tasks STS16
  iso-bench cache list                            # what the raw-vector cache holds; `cache prune --max-size 20G`
  iso-bench export sentence-transformers/all-MiniLM-L6-v2+whiten --fit-corpus task:STSBenchmark -o minilm-whiten

environment: ISO_BENCH_DATA_DIR (data directory), ISO_BENCH_CACHE (raw-vector cache),
HF_HUB_OFFLINE=1 with HF_HUB_CACHE (models from a local Hugging Face cache)"""


# ---- parsers ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The ``iso-bench`` parser with its sub-commands; each sets ``func`` (what runs) and ``network``
    (whether it loads a model, so that its progress bars and library log lines need managing)."""
    parser = argparse.ArgumentParser(
        prog="iso-bench",
        description="Compare isotropy post-processing methods of an encoder on MTEB tasks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"iso-bench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens (INFO level)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    listing = sub.add_parser("list", help="list methods, suites, tasks and mteb benchmarks")
    listing.set_defaults(func=cmd_list, network=False)
    listing.add_argument("--benchmarks", action="store_true", help="name every benchmark mteb knows (imports mteb)")
    _add_leaderboard(sub)
    add_outliers(sub)
    _add_cache(sub)
    _add_export(sub)
    add_submission(sub)
    return parser


def _add_export(sub: argparse._SubParsersAction) -> None:
    exp = sub.add_parser("export", help="fit a variant and write it as a sentence-transformers model folder",
                         description="Fit MODEL+SPEC as `iso-bench run` fits it and write a sentence-transformers "
                         "folder: the base model's modules, then the fitted method (sentence-level affine methods as "
                         "Dense modules, others as an iso-bench module), and iso_bench_transform.npz/.json (the "
                         "transform as plain arrays and its fit record). Load it with SentenceTransformer(DIR).")
    exp.set_defaults(func=cmd_export, network=True)
    exp.add_argument("variant", metavar="MODEL+SPEC", nargs="?", help="the base model (hub id or local folder), "
                     "'+', a method spec, e.g. sentence-transformers/all-MiniLM-L6-v2+whiten")
    exp.add_argument("--fit-corpus", metavar="FILE|task:NAME",
                     help="a text file (one text per line), task:NAME (the task's texts, as `iso-bench run` fits on "
                     "them) or train:NAME (its training split); required with MODEL+SPEC")
    exp.add_argument("-o", "--output", metavar="DIR", help="the folder to write (new or empty; a symlink to a "
                     "folder is followed: the folder it points to is written, the link kept); required with MODEL+SPEC")
    exp.add_argument("--overwrite", action="store_true", help="replace DIR when it holds an earlier export and "
                     "nothing else (the files its iso_bench_manifest.json lists, unchanged)")
    exp.add_argument("--verify", metavar="DIR", help="check an exported folder instead: the SHA-256 of every file "
                     "its iso_bench_manifest.json lists (iso-bench also checks them whenever it loads the folder)")
    exp.add_argument("--revision", help="model revision (default: the one mteb pins, else the latest)")
    exp.add_argument("--data-dir", help="data directory for task:NAME (env ISO_BENCH_DATA_DIR)")
    exp.add_argument("--cache-dir", help="raw-vector cache (env ISO_BENCH_CACHE, default ~/.cache/iso_bench)")
    exp.add_argument("--device", type=device_name, help="cpu, cuda, ... (default: cuda when available)")
    exp.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default: 32)")
    exp.add_argument("--seed", type=int, default=0, help="seed of the fitted method, >= 0 (default: 0)")
    exp.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads for torch (env ISO_BENCH_THREADS)")
    exp.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code (off by default)")
    exp.add_argument("--no-progress", action="store_true", help="hide progress bars (model loading's too)")


def _add_cache(sub: argparse._SubParsersAction) -> None:
    cache = sub.add_parser("cache", help="what the raw-vector and fit caches hold, and pruning them",
                           description="list: per model, revision, extraction and kind, the texts, shards and "
                           "bytes the cache holds (and its fits). prune: remove shards and fits by model, by age, "
                           "or the oldest first down to a size; a namespace is pruned under its encode lock, so a "
                           "run writing there is never disturbed, and what is removed is encoded again when asked for.")
    cache.set_defaults(func=cmd_cache, network=False)
    cache.add_argument("action", choices=["list", "prune"], nargs="?", default="list", help="(default: list)")
    cache.add_argument("--cache-dir", help="the cache folder (env ISO_BENCH_CACHE, default ~/.cache/iso_bench)")
    cache.add_argument("--model", help="prune: this model's vectors and fits (hub id)")
    cache.add_argument("--older-than", type=float, metavar="DAYS", help="prune: what was last written DAYS ago or more")
    cache.add_argument("--max-size", metavar="SIZE", help="prune: the oldest first until the folder holds at most "
                       "SIZE (e.g. 20G, 500M)")
    cache.add_argument("--dry-run", action="store_true", help="prune: list what would be removed, remove nothing")


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="evaluate the variants of a model", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.set_defaults(func=cmd_run, network=True)
    run.add_argument("--model", nargs="+", default=[DEFAULT_MODEL], metavar="MODEL",
                     help=f"hub ids or local folders; several make a grid (default: {DEFAULT_MODEL})")
    run.add_argument("--revision", help="model revision (default: the one mteb pins, else the latest)")
    run.add_argument("--methods", nargs="+", type=method_spec, default=list(DEFAULT_METHODS), metavar="SPEC",
                     help="method specs, e.g. raw whiten-256 abtt-7 cluster-pca-27-12, or groups: default (the "
                     "default methods), storage (the benchmark's bytes axis: int8, binary and dimension cuts); "
                     "`default storage` is iso-bench v3's every method (default: %(default)s)")
    run.add_argument("--tasks", nargs="+", default=["mteb-sts"], metavar="NAME",
                     help="task, suite or mteb benchmark names, e.g. STS16 mteb-sts 'MTEB(eng, v2)' (default: "
                     "mteb-sts); see `iso-bench list`")
    run.add_argument("--skip-tasks", nargs="+", default=[], metavar="NAME",
                     help="tasks of --tasks to leave out of this run (e.g. the slowest, for a later run); the command "
                          "recorded with the results is the whole run's, without it, which a later run completes")
    run.add_argument("--results", default="results",
                     help="results folder, readable by mteb.ResultCache (default: ./results)")
    run.add_argument("--data-dir", help="data directory: a hub mirror <dir>/<org>/<name>/ and the datasets' "
                     "release folders (env ISO_BENCH_DATA_DIR; default: download); the command recorded with "
                     "the results names it DATA, a local model folder or fit corpus file ./NAME")
    run.add_argument("--cache-dir", help="raw-vector cache (env ISO_BENCH_CACHE, default ~/.cache/iso_bench)")
    run.add_argument("--device", type=device_name, help="cpu, cuda, cuda:1, ... (default: cuda when available)")
    run.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default: 32)")
    run.add_argument("--threads", type=positive_int, metavar="N",
                     help="CPU threads for torch (env ISO_BENCH_THREADS; default: the CPUs not already busy, from "
                     "the load average); recorded with the results, does not change them")
    run.add_argument("--kernels", choices=MODES, help="avx2: torch's, MKL's, oneDNN's and OpenBLAS's kernels at the "
                     "AVX2 level, the same bits on any x86-64 CPU of the last decade; native: each library's own "
                     f"(env {MODE_ENV}; default: avx2); recorded, and a key of the caches")
    run.add_argument("--fit-corpus", default="task", metavar="task|held-out|train|FILE",
                     help="what fitted methods fit on: 'task' (the evaluated split's unlabeled texts, the papers' "
                     "transductive setting; default), 'held-out' (the deployment setting: the task's training split "
                     "where the dataset has one, else SemCor's sentences; `iso-bench list` says which), 'train' (the "
                     "task's training split, an error where it has none), or a text file, one text per line. Every "
                     "corpus but 'task' is held out: texts equal to an evaluated text are removed, and counted")
    run.add_argument("--fit-sample", type=positive_int, metavar="N",
                     help="fit on a seeded sample of N texts of the fit corpus (huge corpora); recorded")
    run.add_argument("--fit-budget", type=positive_int, metavar="N",
                     help="texts a fit reads at once, a quarter of it for token vectors (env ISO_BENCH_FIT_BUDGET; "
                     "default: 100000): a larger fit corpus is read batch by batch by the methods that stream "
                     "(center, abtt, whiten, clip, zscore, zca, softdecay, zipfian-whiten: the same fit) and "
                     "sampled, seeded and recorded, for the others (cluster-pca, flow, "
                     "zipfian-whiten-weights=uniform; a budget other than the default is part of their setup)")
    run.add_argument("--token-cache-texts", type=positive_int, metavar="N",
                     help="keep token vectors in the cache for tasks of at most N texts (env "
                     "ISO_BENCH_TOKEN_CACHE_TEXTS; default: 100000): a larger task's token vectors are computed "
                     "when a token-level variant needs them and not kept; scores do not change")
    run.add_argument("--seed", type=int, default=0, help="seed of the fitted methods, >= 0 (default: 0)")
    run.add_argument("--seeds", type=int, nargs="+", metavar="S",
                     help="replicates: run each variant with randomness (flow, cluster-pca, a sampled fit corpus) once "
                     "per seed; the leaderboard shows mean ± standard deviation across them (overrides --seed)")
    run.add_argument("--resamples", type=positive_int, default=1000, metavar="N",
                     help="bootstrap resamples of each score's 95%% interval (default: 1000); recorded")
    run.add_argument("--pooling", choices=POOLINGS,
                     help="sentence pooling (default: the model's own, e.g. mean for sentence-transformers)")
    run.add_argument("--layer", type=int, help="hidden-state layer, 0 = embeddings, -1 = last (default: -1)")
    run.add_argument("--dtype", choices=DTYPES, help=f"iso-bench's own extraction: {DTYPE_HELP} and of the results' "
                     "setup; refused for a model mteb or its sentence-transformers pipeline runs")
    run.add_argument("--overwrite", action="store_true", help="recompute results that already exist")
    run.add_argument("--trust-remote-code", action="store_true", help="allow the model's own code (off by default)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars (model loading's too)")
    grid = run.add_argument_group("the grid (models x tasks) and where it runs")
    grid.add_argument("--dry-run", action="store_true",
                      help="print the plan (jobs, results present and missing, where each task's data is) and stop")
    grid.add_argument("--engine", choices=["local", "dask", "slurm"], default="local",
                      help="local: this process (default); dask: a Dask cluster (--scheduler, else a local one of "
                      "--workers processes); slurm: Dask workers as Slurm jobs (dask-jobqueue)")
    grid.add_argument("--scheduler", metavar="ADDR", help="dask: a running scheduler, e.g. tcp://host:8786 (env "
                      "DASK_SCHEDULER_ADDRESS)")
    grid.add_argument("--workers", type=positive_int, default=2, help="dask: worker processes of the local cluster "
                      "started when no scheduler is given (default: 2)")
    grid.add_argument("--worker-wait", type=seconds, metavar="SECONDS",
                      help="dask, slurm: how long to wait for the first worker (for jobs on a GPU, one with the "
                      "resource GPU=1) before giving up with a message; 0 for no limit (default: 600 for dask, no "
                      "limit for slurm, whose jobs may wait in the queue); the wait is said every 30 s")
    grid.add_argument("--slurm-jobs", type=positive_int, default=4, metavar="N",
                      help="slurm: Slurm jobs, one Dask worker each (default: 4)")
    grid.add_argument("--slurm-partition", metavar="P", help="slurm: partition (queue)")
    grid.add_argument("--slurm-account", metavar="A", help="slurm: account to charge")
    grid.add_argument("--slurm-walltime", default="04:00:00", metavar="HH:MM:SS", help="slurm: per job (default: "
                      "04:00:00)")
    grid.add_argument("--slurm-memory", default="32GB", metavar="M", help="slurm: per job (default: 32GB)")
    grid.add_argument("--slurm-cores", type=positive_int, default=8, metavar="N", help="slurm: CPU cores per job "
                      "(default: 8)")
    grid.add_argument("--scheduler-host", metavar="HOST", help="slurm: the address the compute nodes reach this "
                      "machine's scheduler at (default: this machine's)")
    grid.add_argument("--gpus-per-job", type=int, default=1, metavar="N",
                      help="slurm: GPUs per Slurm job (--gres=gpu:N; 0 for CPU jobs; default: 1)")


def _add_leaderboard(sub: argparse._SubParsersAction) -> None:
    board = sub.add_parser("leaderboard", help="tables and plots (markdown, csv, latex, html) from a results folder",
                           description="Tables per model (a row per variant, a column per task, means named by "
                           "their tasks and aggregation, differences from raw, best in bold, missing as –), a "
                           "model comparison, and the provenance that makes each number citable; each score with "
                           "its 95% interval and each difference from raw with its paired test (* = significant "
                           "after Benjamini-Hochberg over the table), runs that differ only in seed as one row.")
    board.set_defaults(func=cmd_leaderboard, network=False)
    board.add_argument("results_dir", metavar="RESULTS_DIR",
                       help="results folder of `iso-bench run` (holds results/<model>/<revision>/<task>.json)")
    board.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output); html: a "
                       "folder, which gets index.html (one self-contained page, to open or serve as it is)")
    board.add_argument("--format", choices=FORMATS, default="markdown",
                       help="output format (default: markdown; html: a sortable, filterable web page)")
    board.add_argument("--fragment", action="store_true", help="latex: the tables and their provenance alone, to "
                       "\\input into a paper (default: a complete document that pdflatex compiles)")
    board.add_argument("--no-plot", action="store_true",
                       help="no isotropy-vs-STS plots (plots are written beside -o FILE, for markdown only)")
    board.add_argument("--accept-modified", action="store_true",
                       help="render result files whose scores no longer match the digest written with them "
                       "(changed after their run) or whose digest was removed, or whose units file no longer matches "
                       "its recorded sha256 or gives another main score, each such cell marked † (no interval, no "
                       "verdict), instead of refusing them")
    board.add_argument("--no-ci", action="store_true",
                       help="no 95%% intervals, paired tests against raw or merging of seed replicates: the tables "
                       "as they are without the evaluation units (which are then not read)")


# ---- commands -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    """Methods (from the method registry), suites and tasks (from the task cards), mteb's benchmarks (their
    names only with ``--benchmarks``, which imports mteb)."""
    methods = describe_methods(DEFAULT_METHODS, STORAGE_METHODS)
    print(f"{methods}\n\n{describe_tasks()}\n\n{describe_benchmarks(args.benchmarks)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Evaluate every variant of every model on every task; print the table of main scores. 1 when some cell
    (or, in a grid, some job) failed."""
    cfg = RunConfig(
        model=args.model[0], revision=args.revision, methods=expand_methods(args.methods), tasks=args.tasks,
        results_dir=args.results, data_dir=args.data_dir, cache_dir=args.cache_dir, device=args.device,
        batch_size=args.batch_size, fit_corpus=args.fit_corpus, fit_sample=args.fit_sample, seed=args.seed,
        fit_budget=args.fit_budget, token_cache_texts=args.token_cache_texts, seeds=args.seeds or (),
        resamples=args.resamples, pooling=args.pooling, layer=args.layer, dtype=args.dtype, overwrite=args.overwrite,
        threads=args.threads, progress=not args.no_progress, trust_remote_code=args.trust_remote_code,
        command=reproduce_command(args, args.model[0]), kernels=kernel_mode(args.kernels),
    )
    check_seeds([args.seed, *(args.seeds or ())], "--seeds" if args.seeds else "--seed")
    if args.skip_tasks:
        cfg = dataclasses.replace(cfg, task_refs=kept_tasks(args.tasks, args.skip_tasks))
    results, existed = Path(args.results).expanduser(), Path(args.results).expanduser().exists()
    try:
        if len(args.model) > 1 or args.engine != "local" or args.dry_run:
            return _run_grid(args, cfg)
        summary = run(cfg)
    except RunStopped as stop:  # the results disk is full or read-only: what exists, what does not
        print_stopped(stop)
        raise
    except BaseException:
        if not existed:  # a run that failed before writing anything leaves no empty results folder behind
            remove_empty_folders(results)
        raise
    return print_run(summary)


def _run_grid(args: argparse.Namespace, cfg: RunConfig) -> int:
    """Several models, another engine or ``--dry-run``: the grid (:mod:`iso_bench.grid.grid`) on its engine."""
    engine = None if args.dry_run else make_engine(
        args.engine, scheduler=args.scheduler, workers=args.workers, device=args.device, worker_wait=args.worker_wait,
        slurm={"jobs": args.slurm_jobs, "partition": args.slurm_partition, "account": args.slurm_account,
               "walltime": args.slurm_walltime, "memory": args.slurm_memory, "cores": args.slurm_cores,
               "gpus": args.gpus_per_job, "scheduler_host": args.scheduler_host})
    commands = {m: reproduce_command(args, m) for m in args.model}
    with engine or contextlib.nullcontext():
        grid = run_grid(args.model, cfg, engine=engine, dry_run=args.dry_run, commands=commands)
    return 0 if args.dry_run else print_grid(grid)


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Write the leaderboard of a results folder (to standard output without ``-o``)."""
    written = write_leaderboard(args.results_dir, args.output, args.format, plot=not args.no_plot,
                                accept_modified=args.accept_modified, ci=not args.no_ci, fragment=args.fragment)
    if isinstance(written, str):
        sys.stdout.write(written)
    else:
        print("wrote " + ", ".join(map(written_to, written)), file=sys.stderr)  # a symlink: through to its target
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    """List or prune the cache folder."""
    root = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_dir()
    if args.action == "list":
        print(describe(root))
        return 0
    gone = prune(root, model=args.model, older_than_days=args.older_than,
                 max_bytes=None if args.max_size is None else parse_size(args.max_size), dry_run=args.dry_run)
    for path in gone:
        print(("would remove " if args.dry_run else "removed ") + str(path))
    print(f"{len(gone)} files {'would be ' if args.dry_run else ''}removed; now:\n{describe(root)}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Fit one variant and write it as a sentence-transformers model folder; say how to load it. With
    ``--verify DIR``: check an exported folder's files against its manifest instead."""
    if args.verify:
        if args.variant or args.output:
            raise ExportError("--verify DIR checks an exported folder: give it alone, without MODEL+SPEC or -o")
        extra = verify_manifest(Path(args.verify))
        also = f"; not listed, so not checked: {', '.join(extra[:8])}{', ...' * (len(extra) > 8)}" if extra else ""
        print(f"{args.verify}: every file its {MANIFEST} lists has its recorded SHA-256{also}")
        return 0
    missing = [flag for flag, value in (("MODEL+SPEC", args.variant), ("--fit-corpus", args.fit_corpus),
                                        ("-o", args.output)) if not value]
    if missing:
        raise ExportError(f"export needs {', '.join(missing)}: e.g. iso-bench export "
                          f"{DEFAULT_MODEL}+whiten --fit-corpus task:STSBenchmark -o minilm-whiten (or --verify DIR)")
    set_threads(args.threads)
    record = export(args.variant, args.fit_corpus, args.output, data_dir=args.data_dir, cache_dir=args.cache_dir,
                    device=args.device, seed=args.seed, batch_size=args.batch_size, revision=args.revision,
                    trust_remote_code=args.trust_remote_code, overwrite=args.overwrite, progress=not args.no_progress)
    how = record["export"]
    trust = ", trust_remote_code=True" if how["needs_iso_bench"] else ""
    print(f"wrote {args.output}: {record['variant']} ({', '.join(how['modules']) or 'no module'} after the base "
          f"model's, {how['output_dim']}-d vectors); load it with SentenceTransformer({str(args.output)!r}{trust})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``iso-bench`` with ``argv`` (default: the process arguments); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help()
        return 2
    if argv is None and getattr(args, "kernels", None) not in (None, os.environ.get(MODE_ENV)):
        # the libraries read their kernel settings when loaded (numpy's OpenBLAS already is): start again with them
        pin_kernels(args.kernels)
        os.execv(sys.executable, [sys.executable, "-m", "iso_bench.cli", *sys.argv[1:]])
    try:
        with console(args.network, not getattr(args, "no_progress", False)), terminate_as_interrupt():
            return args.func(args)
    except IsoBenchError as exc:
        print(f"iso-bench: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno not in _MACHINE_ERRORS:  # e.g. a file of iso-bench's own that is missing: a bug
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        fix = ("a name longer than the file system allows (not a matter of space): choose a shorter name or path"
               if exc.errno == errno.ENAMETOOLONG else "free space there or choose another place")
        print(f"iso-bench: error: {where}{exc.strerror or exc}; {fix}, then run the same command again",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"iso-bench: {how}; finished results and cached vectors are kept", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130


_MACHINE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG,
                   errno.ENAMETOOLONG}
"""The errors of the machine, not of iso-bench: a full disk, a quota, a read-only or failing file system."""
