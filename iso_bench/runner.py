"""Run every variant of one encoder on a set of mteb tasks, encoding each text once for all.

The runner loads the backbone once, shares one raw-vector store between the variants, evaluates each
variant with ``mteb.evaluate`` (so its numbers are mteb's), and writes iso-bench's provenance (model
revision, extraction, method, fit corpus, data source) into every score entry of the result files
under the key ``"iso_bench"``.

Example:
    >>> from iso_bench.runner import RunConfig, run                      # doctest: +SKIP
    >>> summary = run(RunConfig(methods=["raw", "whiten"], tasks=["STSBenchmark"]))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.cards import expand_tasks
from iso_bench.mteb_plugin import DEFAULT_METHODS, DEFAULT_MODEL, variant_meta

logger = logging.getLogger(__name__)



@dataclass
class RunConfig:
    """Everything that determines a run's numbers (and where they go)."""

    model: str = DEFAULT_MODEL
    revision: str | None = None
    methods: Sequence[str] = DEFAULT_METHODS
    tasks: Sequence[str] = ("mteb-sts",)
    results_dir: str | Path = "results"
    data_dir: str | Path | None = None
    cache_dir: str | Path | None = None
    device: str | None = None
    batch_size: int = 32
    fit_corpus: str = "task"  # "task", "train" or a text file
    fit_sample: int | None = None  # fit on a seeded sample of this many texts (huge corpora)
    seed: int = 0
    seeds: Sequence[int] = ()  # replicates: each seed once, for the variants with randomness (default: (seed,))
    pooling: str | None = None
    layer: int | None = None
    overwrite: bool = False
    resamples: int = 1000  # bootstrap resamples of each result's 95% interval (recorded with it)
    threads: int | None = None  # torch CPU threads (None: the idle CPUs); recorded, not part of the identity
    progress: bool = True
    trust_remote_code: bool = False
    command: str | None = None  # the command line that reproduces the run, recorded with the results


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


def _get_task(name: str) -> Any:
    """``mteb.get_task``, with an error that suggests close task and suite names."""
    import sys

    import mteb

    from iso_bench.cards import unknown_task_message
    from iso_bench.registry import UnknownNameError

    try:
        return mteb.get_task(name)
    except KeyError:
        known = sys.modules["mteb.get_tasks"]._TASKS_REGISTRY
        raise UnknownNameError(unknown_task_message(name, known)) from None


def build_backbone(cfg: RunConfig) -> Any:
    """The backbone of a run: mteb's own implementation of a model mteb knows, else iso-bench's (see
    :func:`iso_bench.backbone.load_backbone`)."""
    from iso_bench.backbone import load_backbone

    return load_backbone(cfg.model, cfg.revision, device=cfg.device, pooling=cfg.pooling, layer=cfg.layer,
                         trust_remote_code=cfg.trust_remote_code, batch_size=cfg.batch_size)


class _DropSuperseded(logging.Filter):
    """mteb warns, per variant and task, that e.g. STSBenchmark has a newer version; the user chose the
    task by name (MTEB's published scores use it), so the run says nothing about it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "is superseded by" not in record.getMessage()


class _Once(logging.Filter):
    """Lets each distinct message through once: a method fitted once per task says the same thing (e.g.
    whiten's "3 of 384 directions have no variance") for every task; the result files record it per fit."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message in self.seen:
            return False
        self.seen.add(message)
        return True


def run(cfg: RunConfig) -> RunSummary:
    """Evaluate every method of ``cfg.methods`` on every task of ``cfg.tasks``; see :class:`RunConfig`."""
    from iso_bench.methods import METHODS

    mteb_log = logging.getLogger("mteb.abstasks.abstask")
    method_logs = [logging.getLogger(m) for m in sorted({METHODS.get(name).__module__ for name in METHODS})]
    superseded, once = _DropSuperseded(), _Once()
    mteb_log.addFilter(superseded)
    for log in method_logs:
        log.addFilter(once)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is superseded by.*")
            return _run(_normalized(cfg))
    finally:
        mteb_log.removeFilter(superseded)
        for log in method_logs:
            log.removeFilter(once)


def _normalized(cfg: RunConfig) -> RunConfig:
    """A local model folder is named by its absolute path (a relative one would not name the same folder
    for mteb, the cache and the results); the variant names are checked before any work."""
    from iso_bench.mteb_plugin import variant_name

    folder = Path(cfg.model).expanduser()
    if folder.is_dir():
        cfg = dataclasses.replace(cfg, model=str(folder.resolve()))
    for spec in cfg.methods:
        variant_name(cfg.model, spec)
    return cfg


@dataclass
class _Prepared:
    """What every variant of a run shares: the loaded tasks, their data sources, the raw-vector store."""

    tasks: list[Any]
    sources: dict[str, Any]
    backbone: Any
    store: Any
    corpus: Any
    base_record: dict[str, Any]


def _prepare(cfg: RunConfig) -> _Prepared:
    """Check every input before any work, load the tasks, and encode every text of every task once."""
    from iso_bench.cache import EmbeddingStore, default_cache_dir
    from iso_bench.checks import check_device, check_methods, check_results_dir, output_dims, set_threads
    from iso_bench.data import mirror_dir, use_source
    from iso_bench.encoder import base_record
    from iso_bench.fit_corpus import CorpusProvider

    task_names = expand_tasks(cfg.tasks)
    check_results_dir(cfg.results_dir)
    check_device(cfg.device)
    set_threads(cfg.threads)
    dims = output_dims(cfg.model, cfg.revision, trust_remote_code=cfg.trust_remote_code, pooling=cfg.pooling,
                       layer=cfg.layer)
    made = check_methods(cfg.methods, dims, cfg.model)  # every spec against the encoder's dimension
    levels = {level for _, level in made}
    mirror_dir(cfg.data_dir)  # validates the mirror folder
    corpus = CorpusProvider(cfg.fit_corpus, data_dir=cfg.data_dir, sample=cfg.fit_sample, seed=cfg.seed)
    corpus.check()  # a fit corpus file is read before any encoding
    tasks = [_get_task(name) for name in task_names]
    sources = {t.metadata.name: use_source(t, cfg.data_dir) for t in tasks}
    corpus.add_tasks(tasks)
    corpus.check(tasks if any(type(m).fitted for m, _ in made) else ())  # e.g. "train" of a task without one

    backbone = build_backbone(cfg)
    # token vectors come from the same forward pass when any variant or task will need them
    needs_tokens = "token" in levels or any(getattr(t, "needs_tokens", False) for t in tasks)
    kinds = ("sentence", "tokens") if needs_tokens else ("sentence",)
    store = EmbeddingStore(backbone, cfg.cache_dir or default_cache_dir(), kinds=kinds,
                           batch_size=cfg.batch_size, progress=cfg.progress)
    _encode_all(store, tasks, corpus, kinds)
    return _Prepared(tasks, sources, backbone, store, corpus, base_record(backbone, cfg.command))


def _encode_all(store: Any, tasks: list[Any], corpus: Any, kinds: tuple[str, ...]) -> None:
    """One encode for all, before any variant runs: every text of every task (and of its fit corpus), each
    with its prompt type."""
    from iso_bench.fit_corpus import TRAIN, task_text_groups

    for task in tasks:
        groups = task_text_groups(task)
        if corpus.setting == TRAIN:  # the training split is fitted on, but not among the evaluated texts
            groups += list(corpus(task.metadata.name).groups)
        for prompt_type, texts in groups:
            where = {"task_metadata": task.metadata, "prompt_type": prompt_type}
            store.sentences(list(texts), desc=f"encoding {task.metadata.name}", **where)
            if "tokens" in kinds:
                store.tokens(list(texts), **where)


def _run(cfg: RunConfig) -> RunSummary:
    from mteb.cache import ResultCache

    from iso_bench import instances
    from iso_bench.mteb_plugin import install_result_hook

    install_result_hook()
    instances.N_RESAMPLES = cfg.resamples
    started = time.perf_counter()
    run = _prepare(cfg)
    cache = ResultCache(cfg.results_dir)
    summary = RunSummary(cfg.model, run.backbone.revision, [t.metadata.name for t in run.tasks],
                         results_dir=Path(cfg.results_dir) / "results")
    seeds = list(dict.fromkeys(cfg.seeds)) or [cfg.seed]
    for i, spec in enumerate(cfg.methods, 1):
        replicated = seeds if _seeded(spec, cfg) else seeds[:1]
        for seed in replicated:
            position = f"variant {i}/{len(cfg.methods)}" + (f" seed {seed}" if len(replicated) > 1 else "")
            _run_variant(dataclasses.replace(cfg, seed=seed), run, spec, position, cache, summary,
                         replicate=len(replicated) > 1)
    summary.encode_stats = dict(run.store.stats)
    summary.seconds = time.perf_counter() - started
    return summary


def _seeded(spec: str, cfg: RunConfig) -> bool:
    """Whether a seed changes the variant's numbers: a method with randomness (a ``seed`` parameter the spec
    does not fix), or a fitted method on a sampled fit corpus."""
    from iso_bench.methods import make_method

    method, _ = make_method(spec)
    random = "seed" in method.param_defaults() and "seed=" not in spec
    return random or (type(method).fitted and cfg.fit_sample is not None)


def _corpus(cfg: RunConfig, run: _Prepared) -> Any:
    """The fit corpus provider of a seed: the run's own, or (a sampled corpus under another seed) a new one."""
    if cfg.fit_sample is None or cfg.seed == run.corpus.seed:
        return run.corpus
    from iso_bench.fit_corpus import CorpusProvider

    corpus = CorpusProvider(cfg.fit_corpus, data_dir=cfg.data_dir, sample=cfg.fit_sample, seed=cfg.seed)
    corpus.add_tasks(run.tasks)
    return corpus


def _variant_meta(cfg: RunConfig, run: _Prepared, spec: str) -> Any:
    """The variant's ModelMeta: its name and, as experiment kwargs, its setup (so setups never share a file)."""
    from iso_bench.fit_corpus import SETTINGS
    from iso_bench.mteb_plugin import setup_kwargs

    fit = cfg.fit_corpus if cfg.fit_corpus in SETTINGS else "file"
    path = None if cfg.fit_corpus in SETTINGS else str(Path(cfg.fit_corpus).expanduser().resolve())
    loader = {"fit_corpus": fit, "fit_corpus_path": path, "seed": cfg.seed, "fit_sample": cfg.fit_sample,
              "pooling": cfg.pooling, "layer": cfg.layer,
              "data_dir": None if cfg.data_dir is None else str(Path(cfg.data_dir).resolve())}
    experiment = setup_kwargs(spec, fit_corpus=cfg.fit_corpus, seed=cfg.seed, pooling=cfg.pooling, layer=cfg.layer,
                              data_dir=cfg.data_dir, fit_sample=cfg.fit_sample)
    loader = {k: v for k, v in loader.items() if v is not None}
    return variant_meta(cfg.model, spec, revision=run.backbone.revision, embed_dim=run.backbone.dim,
                        experiment=experiment, **loader)


def _reset_sampling(task: Any) -> None:
    """Every variant is scored on the same samples: mteb's tasks that subsample (clustering, multilabel
    classification) draw from random states that one evaluation advances; they restart from the task's seed."""
    from mteb._set_seed import _set_seed

    if hasattr(task, "rng_state"):
        task.rng_state, task.np_rng = _set_seed(task.seed)


def _run_variant(cfg: RunConfig, run: _Prepared, spec: str, position: str, cache: Any, summary: RunSummary, *,
                 replicate: bool = False) -> None:
    """Evaluate one variant on every task; mteb writes each result (with its provenance) into its setup's folder
    and skips the results that already exist. ``replicate``: one of several seeds (named in the summary)."""
    import mteb
    from tqdm.auto import tqdm

    from iso_bench.encoder import VariantEncoder
    from iso_bench.mteb_plugin import ensure_model_meta, set_aside_garbled

    encoder = VariantEncoder(run.store, spec, corpus=_corpus(cfg, run), seed=cfg.seed)
    encoder.base_record, encoder.data_sources = run.base_record, run.sources
    meta = _variant_meta(cfg, run, encoder.spec)
    encoder.mteb_model_meta = meta
    ensure_model_meta(cache, meta)  # a garbled model_meta.json of an earlier run is rewritten
    set_aside_garbled(cache, meta)  # a garbled result counts as missing and is computed again
    label = f"{meta.name} [seed={cfg.seed}]" if replicate else meta.name
    row: dict[str, float | None] = {}
    bar = tqdm(run.tasks, desc=f"{position} {encoder.spec}", unit="task", disable=not cfg.progress, leave=False)
    for task in bar:
        name = task.metadata.name
        bar.set_postfix_str(name)
        logger.info("evaluating %s on %s", meta.name, name)
        _reset_sampling(task)
        result = mteb.evaluate(encoder, task, cache=cache, encode_kwargs={"batch_size": cfg.batch_size},
                               overwrite_strategy="always" if cfg.overwrite else "only-missing",
                               show_progress_bar=False, raise_error=False)
        for error in result.exceptions or ():
            summary.errors.setdefault(label, {})[error.task_name] = error.exception
        for task_result in result.task_results:
            row[name] = task_result.get_score()
        row.setdefault(name, None)
    bar.close()
    summary.scores[label] = row
    summary.fit_seconds[label] = encoder.fit_seconds
    summary.fits_run[label] = encoder.fits_run
    summary.fits_loaded[label] = encoder.fits_loaded
