"""Run every variant of one encoder on a set of mteb tasks, encoding each text once for all.

The runner loads the backbone once, shares one raw-vector store between the variants, evaluates each
variant with ``mteb.evaluate`` (so its numbers are mteb's), and writes iso-bench's provenance (model
revision, extraction, method, fit corpus, data source) into every score entry of the result files
under the key ``"iso_bench"``.

Example:
    >>> from iso_bench.grid.runner import RunConfig, run                      # doctest: +SKIP
    >>> summary = run(RunConfig(methods=["raw", "whiten"], tasks=["STSBenchmark"]))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import model_label
from iso_bench.backbones.loader import extraction_dtype, load_backbone, peek_revision
from iso_bench.backbones.precision import check_dtype_device
from iso_bench.checks import (
    InputError,
    check_device,
    check_methods,
    check_results_dir,
    check_seeds,
    describe_model,
    set_threads,
)
from iso_bench.data.fit_corpus import HELD_OUT, TRAIN, task_text_groups
from iso_bench.data.provider import CorpusProvider
from iso_bench.data.sources import mirror_dir, use_source
from iso_bench.grid.plan import RunConfig, RunStopped, RunSummary  # noqa: F401 - the runner's public names
from iso_bench.grid.plan import canonical_spec as _canonical
from iso_bench.grid.plan import compare_data as _compare_data
from iso_bench.grid.plan import compare_kernels as _compare_kernels
from iso_bench.grid.plan import complete as _complete  # noqa: F401 - named here for tests and callers
from iso_bench.grid.plan import found as _found
from iso_bench.grid.plan import missing_results as _missing
from iso_bench.grid.plan import seeded as _seeded
from iso_bench.grid.plan import stopped as _stopped
from iso_bench.grid.plan import variant_meta_of as _variant_meta
from iso_bench.grid.tasks import build_task, get_task, resolve  # noqa: F401 - get_task: named here for callers
from iso_bench.kernels import check_kernels, pin_kernels
from iso_bench.kinds.cards import held_out_sources
from iso_bench.methods import METHODS, make_method
from iso_bench.mteb_plugin import ResultsNotWritten, install_result_hook, variant_name
from iso_bench.results.failures import clear_failure, record_failure
from iso_bench.vectors.store import EmbeddingStore, default_cache_dir, default_token_cache_texts

logger = logging.getLogger(__name__)


class _DropSuperseded(logging.Filter):
    """mteb warns, per variant and task, that e.g. STSBenchmark has a newer version; the user chose the
    task by name (MTEB's published scores use it), so the run says nothing about it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "is superseded by" not in record.getMessage()


class _Once(logging.Filter):
    """Lets each distinct message through once: a method fitted once per task says the same thing (e.g.
    whiten's "3 of 384 directions have no variance") for every task. The first says which fit corpus it is
    about (``(fit on STS12)``, :meth:`iso_bench.methods.Method.who`); the others are named once, at the end of
    the run (:meth:`also`); the result files record every fit."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[str]] = {}  # message without its fit corpus -> the fit corpora after the first

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        plain, where = _FIT_ON.sub("", message), _FIT_ON.search(message)
        if plain in self.seen:
            if where and where.group(1) not in self.seen[plain]:
                self.seen[plain].append(where.group(1))
            return False
        self.seen[plain] = []
        return True

    def also(self) -> list[str]:
        """A line for each message said once that held on other fit corpora too."""
        return [f"the same on {', '.join(places)}: {plain}" for plain, places in self.seen.items() if places]


_FIT_ON = re.compile(r" \(fit on ([^)]*)\)")


def run(cfg: RunConfig) -> RunSummary:
    """Evaluate every method of ``cfg.methods`` on every task of ``cfg.tasks``; see :class:`RunConfig`."""
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
        for line in once.also():
            logger.warning(line)


def normalized_model(model: str) -> str:
    """A local model folder is named by its absolute path (a relative one would not name the same folder
    for mteb, the cache and the results); a hub id is itself."""
    folder = Path(model).expanduser()
    return str(folder.resolve()) if folder.is_dir() else model


def _normalized(cfg: RunConfig) -> RunConfig:
    """The model named as :func:`normalized_model` says; the variant names are checked before any work."""
    check_seeds([cfg.seed, *cfg.seeds], "--seeds" if cfg.seeds else "--seed")
    cfg = dataclasses.replace(cfg, model=normalized_model(cfg.model))
    for spec in cfg.methods:
        variant_name(cfg.model, spec)
    return cfg


@dataclass
class _Prepared:
    """What every variant of a run shares: the loaded tasks, their data sources, the fit corpora, the model's
    revision and dimension, and (once some result has to be computed) the backbone and raw-vector store."""

    tasks: list[Any]
    sources: dict[str, Any]
    corpus: Any
    revision: str | None
    dim: int | None
    backbone: Any = None
    store: Any = None
    base_record: dict[str, Any] = field(default_factory=dict)
    cached: int = 0  # texts of the run the raw-vector cache already held (not each variant's lookups of them)
    unwritable: Exception | None = None  # why the results folder cannot be written: said only if a result is missing


def _prepare(cfg: RunConfig) -> _Prepared:
    """Check every input before any work and load the tasks; the model is not loaded here (see :func:`_load`)."""
    pin_kernels(cfg.kernels)  # before torch runs anything (a Dask worker's first job: the job's mode)
    refs = list(cfg.task_refs) or resolve(list(cfg.tasks))  # suites, tasks, mteb benchmarks
    unwritable = _results_dir(cfg.results_dir)
    check_device(cfg.device)
    set_threads(cfg.threads)
    check_kernels(cfg.device or "cpu")  # the mode's kernels are those in force, else one clear error
    model = describe_model(cfg.model, cfg.revision, pooling=cfg.pooling, layer=cfg.layer)  # what it is, read once
    check_dtype_device(extraction_dtype(model, cfg.dtype), cfg.device)  # refused on mteb's and the pipeline's routes
    dims = model.dims()
    if model.disagreement():  # mteb's embed_dim is not the width (gte-Qwen2's 8,960): said, not refused
        logger.warning(model.disagreement())
    made = check_methods(cfg.methods, dims, cfg.model, no_tokens=model.no_tokens)  # every spec, before any work
    mirror_dir(cfg.data_dir)  # validates the mirror folder
    corpus = CorpusProvider(cfg.fit_corpus, data_dir=cfg.data_dir, sample=cfg.fit_sample, seed=cfg.seed,
                            budget=cfg.fit_budget, held_out_sources=held_out_sources())
    corpus.check()  # a fit corpus file is read before any encoding
    tasks = [build_task(ref) for ref in refs]
    sources = {t.metadata.name: use_source(t, cfg.data_dir) for t in tasks}
    corpus.add_tasks(tasks)
    corpus.check(tasks if any(type(m).fitted for m, _ in made) else ())  # e.g. "train" of a task without one
    return _Prepared(tasks, sources, corpus, revision_of(cfg), dims.get("sentence"), unwritable=unwritable)


def _results_dir(folder: str | Path) -> Exception | None:
    """:func:`iso_bench.checks.check_results_dir`'s refusal of an existing folder that cannot be written (a
    read-only disk holding every result is read, and refused only when a result is missing); any other raised."""
    try:
        check_results_dir(folder)
    except InputError as exc:
        if not Path(folder).expanduser().is_dir():
            raise
        return exc
    return None


def revision_of(cfg: RunConfig) -> str | None:
    """The revision the run's backbone will record, where it is known without loading the model
    (:func:`iso_bench.backbones.loader.peek_revision`)."""
    return peek_revision(cfg.model, cfg.revision, pooling=cfg.pooling, layer=cfg.layer,
                         trust_remote_code=cfg.trust_remote_code)


_LOADED: dict[tuple[Any, ...], Any] = {}
"""The last backbone loaded in this process, by its settings: runs one after another (a benchmark, a notebook)
load a model once."""


def build_backbone(cfg: RunConfig) -> Any:
    """The backbone of a run: mteb's own implementation of a model mteb knows, else iso-bench's (see
    :func:`iso_bench.backbones.loader.load_backbone`); the one loaded last in this process when the settings match."""
    key = (cfg.model, cfg.revision, cfg.device, cfg.pooling, cfg.layer, cfg.trust_remote_code, cfg.batch_size,
           cfg.batching, cfg.dtype)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load_backbone(cfg.model, cfg.revision, device=cfg.device, pooling=cfg.pooling,
                                     layer=cfg.layer, trust_remote_code=cfg.trust_remote_code,
                                     batch_size=cfg.batch_size, batching=cfg.batching, dtype=cfg.dtype)
    return _LOADED[key]


_STORES: dict[tuple[Any, ...], Any] = {}
"""The last raw-vector store of this process, with the vectors it has read: the next run on the same backbone
and cache folder (a benchmark, a notebook) does not read the folder again while its shards are all there."""


def _load(cfg: RunConfig, run: _Prepared, tasks: list[Any]) -> None:
    """Load the backbone (once) and encode every text of ``tasks`` that the raw-vector cache lacks."""
    from iso_bench.encoder import base_record  # lazily: the encoder imports mteb
    if run.store is None:
        run.backbone = build_backbone(cfg)
        read, (run.revision, run.dim) = run.dim, (run.backbone.revision, run.backbone.dim)  # the width, measured
        if read is not None and read != run.dim:  # the specs were checked against what the files said
            logger.warning("note: %s gives %d-d sentence vectors once loaded; before loading %d-d were read",
                           cfg.model, run.dim, read)
        run.base_record = base_record(run.backbone, cfg.command)
        # token vectors come from the same forward pass when any variant or task will need them
        levels = {make_method(spec)[1] for spec in cfg.methods}
        needs_tokens = "token" in levels or any(getattr(t, "needs_tokens", False) for t in run.tasks)
        kinds = ("sentence", "tokens", *(("pool",) if "token" in levels else ())) if needs_tokens else ("sentence",)
        folder = Path(cfg.cache_dir or default_cache_dir()).expanduser().resolve()
        key = (id(run.backbone), str(folder), kinds, cfg.batch_size)
        store = _STORES.get(key)
        if store is None or not store.intact():
            _STORES.clear()
            store = _STORES[key] = EmbeddingStore(run.backbone, folder, kinds=kinds, batch_size=cfg.batch_size,
                                                  progress=cfg.progress)
        store.progress, store.stats = cfg.progress, {"computed": 0, "reused": 0}
        store.token_cache_texts = cfg.token_cache_texts or default_token_cache_texts()
        run.store = store
    before = run.store.stats["reused"]
    _encode_all(run.store, tasks, run.corpus)
    run.cached += run.store.stats["reused"] - before  # the encode pass sees each text of the run once


def encode_stats(run: Any) -> dict[str, int]:
    """What the summary says of the raw vectors: the texts encoded by this run, and the texts of the run the
    cache already held (counted once, by the encode pass; the variants' own lookups are not counted)."""
    computed = run.store.stats["computed"] if run.store is not None else 0
    return {"computed": computed, "reused": getattr(run, "cached", 0)}


def _encode_all(store: Any, tasks: list[Any], corpus: Any) -> None:
    """One encode for all, before any variant runs: every text of every task (and of its fit corpus), each
    with its prompt type, chunk by chunk and nothing read back (a corpus of millions of texts costs the
    memory of one chunk). The store learns each task's size: a large task's token vectors are not kept."""
    for task in tasks:
        name = task.metadata.name
        groups = [(f"encoding {name}", p, texts) for p, texts in task_text_groups(task)]
        if corpus.setting in (TRAIN, HELD_OUT):  # fitted on, but not among the evaluated texts
            fit = corpus(name)  # its bar names the corpus: SemCor's 37,017 texts are not STS12's
            groups += [(f"encoding {name}'s fit corpus: {fit.label}", p, texts) for p, texts in fit.groups]
        store.note_task_size(name, sum(len(texts) for _, _, texts in groups))
        for desc, prompt_type, texts in groups:
            store.ensure(texts, desc=desc, task_metadata=task.metadata, prompt_type=prompt_type)


def _run(cfg: RunConfig) -> RunSummary:
    """Plan the run (which results are missing), then load the model and encode only for those."""
    from mteb.cache import ResultCache  # lazily: mteb takes seconds to import

    install_result_hook()
    started = time.perf_counter()
    run = _prepare(cfg)
    cache = ResultCache(cfg.results_dir)
    seeds = list(dict.fromkeys(cfg.seeds)) or [cfg.seed]
    variants = []  # (cfg of the seed, spec, position, replicate)
    for i, spec in enumerate(cfg.methods, 1):
        replicated = seeds if _seeded(spec, cfg) else seeds[:1]
        for seed in replicated:
            position = f"variant {i}/{len(cfg.methods)}" + (f" seed {seed}" if len(replicated) > 1 else "")
            variants.append((dataclasses.replace(cfg, seed=seed), spec, position, len(replicated) > 1))
    if run.revision is None:  # the results' folders are named by the revision: load the model to learn it
        _load(cfg, run, [])
    todo = _missing(run, cache, variants)
    needed = {name for names in todo for name in names}
    if needed and run.unwritable is not None:  # before the model loads: no encode is spent on unsaved results
        raise run.unwritable
    if needed:
        revision = run.revision
        _load(cfg, run, [t for t in run.tasks if t.metadata.name in needed])
        if run.revision != revision:  # the loaded model names another revision than was peeked
            todo = _missing(run, cache, variants)
            _load(cfg, run, run.tasks)
    summary = RunSummary(model_label(cfg.model), run.revision or "unknown", [t.metadata.name for t in run.tasks],
                         results_dir=Path(cfg.results_dir) / "results")
    states = [_start_variant(variant_cfg, run, spec, position, replicate=replicate, todo=names)
              for (variant_cfg, spec, position, replicate), names in zip(variants, todo, strict=True)]
    try:
        _evaluate(cfg, run, states, cache, summary)
    except ResultsNotWritten as exc:
        raise _stopped(exc, run, states, cache, summary) from None
    for state in states:
        _finish_variant(state, run, cache, summary)
    summary.encode_stats = encode_stats(run)
    summary.seconds = time.perf_counter() - started
    return summary


def _corpus(cfg: RunConfig, run: _Prepared) -> Any:
    """The fit corpus provider of a seed: the run's own, or (a sampled corpus under another seed) a new one."""
    if cfg.fit_sample is None or cfg.seed == run.corpus.seed:
        return run.corpus

    corpus = CorpusProvider(cfg.fit_corpus, data_dir=cfg.data_dir, sample=cfg.fit_sample, seed=cfg.seed,
                            budget=cfg.fit_budget, held_out_sources=held_out_sources())
    corpus.add_tasks(run.tasks)
    return corpus


def _reset_sampling(task: Any) -> None:
    """Every variant is scored on the same samples: mteb's tasks that subsample (clustering, multilabel
    classification) draw from random states that one evaluation advances; they restart from the task's seed."""
    from mteb._set_seed import _set_seed  # lazily: mteb takes seconds to import

    if hasattr(task, "rng_state"):
        task.rng_state, task.np_rng = _set_seed(task.seed)


@dataclass
class _VariantRun:
    """One variant of a run: its setup, its ModelMeta, the tasks it still has to be evaluated on, its encoder."""

    cfg: RunConfig
    meta: Any
    label: str
    position: str
    todo: set[str]
    encoder: Any = None
    row: dict[str, float | None] = field(default_factory=dict)


def _start_variant(cfg: RunConfig, run: _Prepared, spec: str, position: str, *, replicate: bool = False,
                   todo: set[str] | None = None) -> _VariantRun:
    """The variant's ModelMeta and (when ``todo`` names a task; default: every task) its encoder.
    ``replicate``: one of several seeds (named in the summary)."""
    from iso_bench.encoder import VariantEncoder  # lazily: the encoder imports mteb

    todo = {t.metadata.name for t in run.tasks} if todo is None else todo
    meta = _variant_meta(cfg, run, _canonical(spec, cfg.seed))
    state = _VariantRun(cfg, meta, f"{meta.name} [seed={cfg.seed}]" if replicate else meta.name, position, todo)
    if todo:
        state.encoder = VariantEncoder(run.store, spec, corpus=_corpus(cfg, run), seed=cfg.seed,
                                   n_resamples=cfg.resamples)
        state.encoder.base_record, state.encoder.data_sources = run.base_record, run.sources
        state.encoder.mteb_model_meta = meta
        state.encoder.write_errors = []  # a result that cannot be written is reported here (see _evaluate)
        state.encoder.refused = {}  # task -> NonFiniteScore: a result not written, its score not finite
    return state


def _evaluate(cfg: RunConfig, run: _Prepared, states: list[_VariantRun], cache: Any, summary: RunSummary) -> None:
    """Evaluate, task by task, every variant that lacks its result on the task; mteb writes each result (with
    its provenance) into the variant's setup folder. Task by task, so that what the variants share on a task
    (its data, its raw vectors, its bootstrap resamples and gold ranks) is at hand once."""
    import mteb  # lazily: mteb takes seconds to import
    from tqdm.auto import tqdm  # lazily: only where a bar is shown

    pairs = [(task, state) for task in run.tasks for state in states if task.metadata.name in state.todo]
    bar = tqdm(pairs, desc="evaluating", unit="result", disable=not cfg.progress or not pairs, leave=False)
    for task, state in bar:
        name = task.metadata.name
        bar.set_postfix_str(f"{state.position} {state.meta.name.rpartition('+')[2]} on {name}")
        logger.info("evaluating %s on %s", state.meta.name, name)
        _reset_sampling(task)
        result = mteb.evaluate(state.encoder, task, cache=cache, encode_kwargs={"batch_size": cfg.batch_size},
                               overwrite_strategy="always" if state.cfg.overwrite else "only-missing",
                               show_progress_bar=False, raise_error=False)
        if state.encoder.write_errors:  # the results disk is full or read-only: stop, say what exists
            bar.close()
            raise state.encoder.write_errors[0]
        where = cache.get_task_result_path(name, state.meta, state.meta.revision,
                                           experiment_name=state.meta.experiment_name)
        for error in result.exceptions or ():
            summary.errors.setdefault(state.label, {})[error.task_name] = error.exception
            record_failure(where, state.meta.name, name, error.exception,  # the board shows – and why
                           state.meta.experiment_kwargs, state.encoder.provenance(name)["benchmark"])
        refusal = state.encoder.refused.pop(name, None)
        if refusal is not None:  # a score that is not finite: no result written, the cell fails
            summary.errors.setdefault(state.label, {})[name] = refusal.reason
            continue
        for task_result in result.task_results:
            state.row[name] = task_result.get_score()
            clear_failure(where)
    bar.close()


def _finish_variant(state: _VariantRun, run: _Prepared, cache: Any, summary: RunSummary) -> None:
    """The variant's row of the summary: the scores it computed, and those of the results it already had (in
    this version's setup folder or an older version's, :func:`iso_bench.grid.plan.found`), each of whose data is
    compared with the data this run read (:func:`iso_bench.grid.plan.compare_data`)."""
    row = {}
    for task in run.tasks:
        name = task.metadata.name
        if name in state.todo:
            row[name] = state.row.get(name)
        else:
            where = _found(task, state.meta, cache)
            existing = cache.load_task_result(name, where) if where is not None else None
            row[name] = existing.get_score() if existing is not None else None
            if existing is not None:
                _compare_data(summary, name, state.label, existing, run.sources.get(name))
                _compare_kernels(summary, name, state.label, existing,
                                 (run.base_record.get("extraction") or {}).get("kernel_class"))
    summary.scores[state.label] = row
    encoder = state.encoder
    summary.fit_seconds[state.label] = encoder.fit_seconds if encoder else 0.0
    summary.fits_run[state.label] = encoder.fits_run if encoder else 0
    summary.fits_loaded[state.label] = encoder.fits_loaded if encoder else 0
