"""The plan of a run: what it is asked (:class:`RunConfig`), which variant lacks which result before any model
loads (:func:`missing_results`, by mteb's own test of what ``overwrite_strategy="only-missing"`` reruns), the
identity of each variant's results (:func:`variant_meta_of`: its name and setup), and what a run reports
(:class:`RunSummary`), or says when it stops because its results cannot be written (:class:`RunStopped`).

The runner (:mod:`iso_bench.grid.runner`) carries the plan out in this process; nothing here loads a model.

Example:
    >>> cfg = RunConfig(methods=["raw", "whiten"], tasks=["STSBenchmark"])
    >>> seeded("flow", cfg), seeded("whiten", cfg), canonical_spec("whiten-n_components=256", 0)
    (True, False, 'whiten-256')
"""

from __future__ import annotations

import shlex
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import EQUAL_LENGTH
from iso_bench.backbones.loader import run_dtype
from iso_bench.backbones.precision import PrecisionError, checkpoint_dtype, unrecorded_half
from iso_bench.data.fit_corpus import FIT_BUDGET, SETTINGS, fit_budget
from iso_bench.files import DATA_PLACEHOLDER, local_name
from iso_bench.kernels import NATIVE, kernel_mode
from iso_bench.methods import canonical_spec as methods_canonical_spec
from iso_bench.methods import make_method
from iso_bench.mteb_plugin import (
    DEFAULT_MODEL,
    ResultsNotWritten,
    ensure_model_meta,
    set_aside_garbled,
    setup_kwargs,
    variant_meta,
)
from iso_bench.registry import IsoBenchError
from iso_bench.results.benchmark import DEFAULT_METHODS
from iso_bench.results.result_files import nonfinite_main_scores
from iso_bench.results.setups import older_setups, same_data, short


@dataclass
class RunConfig:
    """Everything that determines a run's numbers (and where they go)."""

    model: str = DEFAULT_MODEL
    revision: str | None = None
    methods: Sequence[str] = DEFAULT_METHODS
    tasks: Sequence[str] = ("mteb-sts",)
    task_refs: Sequence[Any] = ()  # resolved tasks (iso_bench.grid.tasks.TaskRef): a grid's job sets them
    results_dir: str | Path = "results"
    data_dir: str | Path | None = None
    cache_dir: str | Path | None = None
    device: str | None = None
    batch_size: int = 32
    fit_corpus: str = "task"  # "task", "train" or a text file
    fit_sample: int | None = None  # fit on a seeded sample of this many texts (huge corpora)
    fit_budget: int | None = None  # texts a fit reads at once (None: $ISO_BENCH_FIT_BUDGET or 100,000)
    token_cache_texts: int | None = None  # largest task whose token vectors are cached (None: env or 100,000)
    seed: int = 0
    seeds: Sequence[int] = ()  # replicates: each seed once, for the variants with randomness (default: (seed,))
    pooling: str | None = None
    layer: int | None = None
    dtype: str | None = None  # --dtype of iso-bench's own extraction (None: auto, the checkpoint's); see variant_dtype
    overwrite: bool = False
    resamples: int = 1000  # bootstrap resamples of each result's 95% interval (recorded with it)
    threads: int | None = None  # torch CPU threads (None: the idle CPUs); recorded, not part of the identity
    kernels: str | None = None  # "avx2" (pinned) or "native" (iso_bench.kernels; None: $ISO_BENCH_KERNELS, avx2)
    progress: bool = True
    trust_remote_code: bool = False
    command: str | None = None  # the command line that reproduces the run, recorded with the results
    # the raw vectors' batching policy (iso_bench.backbones.base.plan_batches); recorded in the extraction, not part
    # of a result's identity: "padded" reproduces the vectors of results written before equal-length batches
    batching: str = EQUAL_LENGTH


class RunStopped(IsoBenchError):
    """The run stopped because its results could not be written (a full or read-only results disk):
    ``summary`` holds the scores of the results that exist (None where none does), ``written`` and
    ``missing`` name every (variant, task) of the run that has, and has not, a result on disk."""

    def __init__(self, cause: Exception, summary: RunSummary, written: list[tuple[str, str]],
                 missing: list[tuple[str, str]]) -> None:
        super().__init__(str(cause))
        self.summary, self.written, self.missing = summary, written, missing


@dataclass
class RunSummary:
    """Main scores per variant and task (``None`` where a task produced no score)."""

    model: str
    revision: str
    tasks: list[str]
    scores: dict[str, dict[str, float | None]] = field(default_factory=dict)
    results_dir: Path = Path("results")
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    encode_stats: dict[str, int] = field(default_factory=dict)
    fit_seconds: dict[str, float] = field(default_factory=dict)  # per variant: time in its methods' fits
    fits_run: dict[str, int] = field(default_factory=dict)  # per variant: fits computed (not from the fit cache)
    fits_loaded: dict[str, int] = field(default_factory=dict)  # per variant: fits read from the fit cache
    seconds: float = 0.0
    # per task, the results present whose data this run could not match with what it read: (other, unknown)
    other_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    # per task, the results present made with other kernels than this run: {"class": ours, "other": {label: theirs}}
    other_kernels: dict[str, dict[str, Any]] = field(default_factory=dict)

    def data_notes(self) -> list[str]:
        """One line per task whose results present were computed from other data than the run read, or whose
        data cannot be compared (an older result read from the hub records no digest of its content)."""
        out = []
        for task, seen in sorted(self.other_data.items()):
            read, other, unknown = seen["read"], seen["other"], seen["unknown"]
            if other:
                recorded = "; ".join(sorted({short(r) for r in other.values()}))
                out.append(f"{task}: {len(other)} result(s) present were computed from other data ({recorded}) than "
                           f"this run read ({short(read)}); kept as they are, not recomputed and not merged with "
                           "this data: to compute them from it, run again with another --results folder")
            if unknown:
                out.append(f"{task}: {len(unknown)} result(s) present record no digest of their data's content "
                           f"(an older iso-bench, read from the hub), so they could not be compared with this run's "
                           f"{short(read)}; taken as the same repository and revision")
        for task, seen in sorted(self.other_kernels.items()):
            theirs = ", ".join(sorted(set(seen["other"].values())))
            out.append(f"{task}: {len(seen['other'])} result(s) present were computed with other kernels ({theirs}) "
                       f"than this run's ({seen['class']}); kept as they are, and the variants computed now are "
                       "compared with them (their numbers may differ by about 1e-4): to keep one kind, run with the "
                       "--kernels that made them on that kind of CPU, or with another --results folder")
        return out


def missing_results(run: Any, cache: Any, variants: list[tuple[RunConfig, str, str, bool]]) -> list[set[str]]:
    """For each variant, the names of the tasks whose result is missing or incomplete (mteb's own test of what
    ``overwrite_strategy="only-missing"`` reruns; all of them under ``--overwrite``). A garbled result file
    is set aside first and counts as missing, as is one whose main score is not a finite number;
    ``model_meta.json`` is (re)written where it is wrong."""
    out = []
    for cfg, spec, _, _ in variants:
        meta = variant_meta_of(cfg, run, canonical_spec(spec, cfg.seed))
        try:
            ensure_model_meta(cache, meta)  # a garbled model_meta.json of an earlier run is rewritten
            set_aside_garbled(cache, meta)  # a garbled result counts as missing and is computed again
        except OSError as exc:
            raise ResultsNotWritten(Path(cache.cache_path), exc) from None
        out.append({t.metadata.name for t in run.tasks if cfg.overwrite or found(t, meta, cache) is None})
    return out


def complete(task: Any, meta: Any, cache: Any) -> bool:
    """Whether the result of ``meta`` on ``task`` exists and covers every split and subset, by mteb's own check,
    with a main score that is a finite number in each (one that is not, as earlier versions wrote, is to be
    computed again: the run sets it aside first, see :func:`missing_results`)."""
    try:
        from mteb.evaluate import OverwriteStrategy, _check_cache  # lazily: mteb takes seconds to import
    except ImportError:  # another mteb: let mteb.evaluate decide, task by task
        return False
    existing, missing = _check_cache(task, meta, cache, OverwriteStrategy.ONLY_MISSING)
    return existing is not None and not missing and not nonfinite_main_scores(existing)


def found(task: Any, meta: Any, cache: Any) -> Any | None:
    """The ModelMeta under which the complete result of ``meta``'s setup on ``task`` lies: ``meta`` itself, or
    the same setup as an older version filed it (``data: mirror``, a file corpus as ``file_<digest>``:
    :func:`iso_bench.results.setups.older_setups`); None when there is none. Reads no data."""
    if complete(task, meta, cache):
        return check_precision(task, meta, cache)
    for older in older_setups(dict(meta.experiment_kwargs or {})):
        other = meta.model_copy(update={"experiment_kwargs": older or None})
        if complete(task, other, cache):
            return check_precision(task, other, cache)
    return None


def check_precision(task: Any, meta: Any, cache: Any) -> Any:
    """``meta``, whose result on ``task`` is present, unless that result is filed under float32 (a setup without
    ``dtype``) but may hold the numbers of a 16-bit forward pass: iso-bench's own extraction of a 16-bit checkpoint,
    written before precision was recorded (:func:`iso_bench.backbones.precision.unrecorded_half`); that is
    refused in one line, never counted as float32's."""
    if "dtype" in (meta.experiment_kwargs or {}):
        return meta
    existing = cache.load_task_result(task.metadata.name, meta)
    entries = [e for entries in (existing.scores or {}).values() for e in entries] if existing is not None else []
    record = next((e["iso_bench"].get("extraction") for e in entries if isinstance(e.get("iso_bench"), dict)), None)
    if not isinstance(record, dict) or record.get("vectors") != "hf":
        return meta
    base = (meta.loader_kwargs or {}).get("base_model")
    recorded = "precision" in record or "dtype" in record
    half = unrecorded_half(record, None, None if recorded or not base else checkpoint_dtype(base, meta.revision))
    if half is None:
        return meta
    raise PrecisionError(f"the result of {meta.name} on {task.metadata.name} present in {cache.cache_path} is filed "
                         f"as float32 but may hold {half} numbers (its checkpoint is {half}, and the result was "
                         "written before iso-bench recorded precision): run again with --overwrite to compute it in "
                         f"float32, or move it aside")


def compare_data(summary: RunSummary, task: str, label: str, existing: Any, read: dict[str, Any] | None) -> None:
    """Compare the data record of a result present (``existing``, an mteb TaskResult) with what this run read
    of ``task`` (:func:`iso_bench.results.setups.same_data`), noting in ``summary`` a result of other data or
    one that cannot be told."""
    entries = [e for entries in (existing.scores or {}).values() for e in entries]
    record = next((e["iso_bench"].get("data") for e in entries if isinstance(e.get("iso_bench"), dict)), None)
    if not isinstance(record, dict) or not read:
        return
    same = same_data(record, read)
    if same is not True:
        seen = summary.other_data.setdefault(task, {"read": read, "other": {}, "unknown": {}})
        seen["other" if same is False else "unknown"][label] = record


OLDER_KERNELS = "each library's own, not recorded"  # a result written before kernel classes were recorded


def compare_kernels(summary: RunSummary, task: str, label: str, existing: Any, klass: str | None) -> None:
    """Note in ``summary`` a result present (``existing``) whose vectors were made with other kernels than this
    run's class ``klass`` (None: this run made no vectors, so nothing is mixed)."""
    if klass is None:
        return
    entries = [e for entries in (existing.scores or {}).values() for e in entries]
    record = next((e["iso_bench"].get("extraction") for e in entries if isinstance(e.get("iso_bench"), dict)), None)
    if not isinstance(record, dict):
        return
    theirs = record.get("kernel_class") or OLDER_KERNELS
    if theirs != klass:
        summary.other_kernels.setdefault(task, {"class": klass, "other": {}})["other"][label] = theirs


def canonical_spec(spec: str, seed: int = 0) -> str:
    """The spec a variant is named by (:func:`iso_bench.methods.canonical_spec`; the seed is part of the
    setup, not of the name)."""
    return methods_canonical_spec(spec)


def seeded(spec: str, cfg: RunConfig) -> bool:
    """Whether a seed changes the variant's numbers: a method with randomness (a ``seed`` parameter the spec
    does not fix), or a fitted method on a sampled fit corpus (``--fit-sample``, or a fit budget other than the
    default for a method that does not stream)."""
    method, _ = make_method(spec)

    random = "seed" in method.param_defaults() and "seed=" not in spec
    budget = fit_budget() if cfg.fit_budget is None else cfg.fit_budget
    sampled = cfg.fit_sample is not None or (budget != FIT_BUDGET and not method.streaming())
    return random or (type(method).fitted and sampled)


def variant_meta_of(cfg: RunConfig, run: Any, spec: str) -> Any:
    """The variant's ModelMeta: its name and, as experiment kwargs, its setup (so setups never share a file)."""
    fit = cfg.fit_corpus if cfg.fit_corpus in SETTINGS else "file"
    path = None if cfg.fit_corpus in SETTINGS else str(Path(cfg.fit_corpus).expanduser().resolve())
    loader = {"fit_corpus": fit, "fit_corpus_path": path, "seed": cfg.seed, "fit_sample": cfg.fit_sample,
              "fit_budget": cfg.fit_budget, "pooling": cfg.pooling, "layer": cfg.layer, "dtype": cfg.dtype,
              "data_dir": None if cfg.data_dir is None else str(Path(cfg.data_dir).resolve())}
    experiment = setup_kwargs(spec, fit_corpus=cfg.fit_corpus, seed=cfg.seed, pooling=cfg.pooling, layer=cfg.layer,
                              fit_sample=cfg.fit_sample, fit_budget=cfg.fit_budget, dtype=variant_dtype(cfg))
    loader = {k: v for k, v in loader.items() if v is not None}
    return variant_meta(cfg.model, spec, revision=run.revision, embed_dim=run.dim,
                        experiment=experiment, **loader)


def variant_dtype(cfg: RunConfig) -> str | None:
    """The precision a run's results are filed under (:func:`iso_bench.backbones.loader.run_dtype`: None for
    float32 and for a model mteb or its pipeline runs), read from the model's files without loading it."""
    return run_dtype(cfg.model, cfg.revision, cfg.dtype, pooling=cfg.pooling, layer=cfg.layer)


def reproduce_command(args: Any, model: str) -> str:
    """The ``iso-bench run`` command line that reproduces the numbers of ``model``, into the same setup folders,
    from the parsed options ``args``: recorded in every result, so it holds no path of the machine. A local model
    folder and a fit corpus file are named ``./<name>`` (:func:`iso_bench.files.local_name`; the result records
    the folder's digest and the file's SHA-256), a data folder ``--data-dir DATA``; the results and cache folders,
    speed and engine flags are left out."""
    shown = local_name(model) if Path(model).expanduser().is_dir() else model
    parts = ["iso-bench", "run", "--model", shown]
    if args.revision:
        parts += ["--revision", args.revision]
    parts += ["--methods", *args.methods, "--tasks", *args.tasks]
    if getattr(args, "data_dir", None):
        parts += ["--data-dir", DATA_PLACEHOLDER]
    defaults = {"--fit-corpus": "task", "--fit-sample": None, "--fit-budget": None, "--seed": 0, "--pooling": None,
                "--layer": None, "--dtype": "auto"}
    corpus = args.fit_corpus if args.fit_corpus in (None, *SETTINGS) else local_name(args.fit_corpus)
    given = {"--fit-corpus": corpus, "--fit-sample": args.fit_sample, "--fit-budget": args.fit_budget,
             "--seed": None if args.seeds else args.seed, "--pooling": args.pooling, "--layer": args.layer,
             "--dtype": getattr(args, "dtype", None)}
    for flag, value in given.items():
        if value is not None and value != defaults[flag]:
            parts += [flag, str(value)]
    if args.seeds:
        parts += ["--seeds", *map(str, args.seeds)]
    if args.resamples != 1000:
        parts += ["--resamples", str(args.resamples)]
    flag = getattr(args, "kernels", None)
    if kernel_mode(flag) == NATIVE or flag is not None:  # other kernels give other bits (flag or environment); a
        parts += ["--kernels", kernel_mode(flag)]      # flag given is kept: it beat $ISO_BENCH_KERNELS in this shell
    return " ".join(map(shell_quote, parts))


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v",
            "\\": "\\\\", "'": "\\'"}


def shell_quote(arg: str) -> str:
    """``arg`` quoted for a shell, on one line. :func:`shlex.quote`, unless ``arg`` holds a control character (a
    newline, a tab, ...) or a line or paragraph separator: shlex keeps those raw inside its quotes, so the
    command would span lines (and a newline read as a space names another folder). Then ANSI-C quoting,
    ``$'...'`` with each such character escaped, which bash, zsh and ksh read (and POSIX sh since 2024).

    >>> print(shell_quote("org/model"), shell_quote("/tmp/my model"), shell_quote("/tmp/a\\nb's"))
    org/model '/tmp/my model' $'/tmp/a\\nb\\'s'
    """
    if not any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in arg):
        return shlex.quote(arg)

    def escaped(c: str) -> str:
        if c in _ESCAPES:
            return _ESCAPES[c]
        if unicodedata.category(c) not in ("Cc", "Zl", "Zp"):
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}"  # \x: a byte; \u: a character

    return "$'" + "".join(map(escaped, arg)) + "'"


def stopped(cause: Exception, run: Any, states: list[Any], cache: Any, summary: RunSummary) -> RunStopped:
    """What a run that cannot write its results says: for every variant and task, whether its result exists
    on disk (mteb's own test, as a rerun sees it) and, where it does, its score."""
    written, missing = [], []
    for state in states:
        row = summary.scores.setdefault(state.label, {})
        for task in run.tasks:
            name = task.metadata.name
            try:
                where = found(task, state.meta, cache)
                whole = where is not None
                existing = cache.load_task_result(name, where) if whole else None
            except Exception:  # noqa: BLE001 - unreadable counts as missing, as a rerun would see it
                whole, existing = False, None
            row[name] = existing.get_score() if existing is not None else None
            (written if whole else missing).append((state.label, name))
    computed = run.store.stats["computed"] if run.store is not None else 0
    summary.encode_stats = {"computed": computed, "reused": getattr(run, "cached", 0)}  # as the runner counts
    return RunStopped(cause, summary, written, missing)
