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

import json
import logging
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench import __version__
from iso_bench.cards import expand_tasks
from iso_bench.mteb_plugin import DEFAULT_METHODS, DEFAULT_MODEL, register_model, variant_meta

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
    fit_corpus: str = "task"
    seed: int = 0
    pooling: str | None = None
    layer: int | None = None
    overwrite: bool = False
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
    seconds: float = 0.0


def _stored_result(path: Path) -> dict[str, Any] | None:
    """A result file's content, or None when it is missing or unreadable (then it is computed again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("scores"), dict) else None
    except (OSError, ValueError):
        return None


def _provenance(data: dict[str, Any]) -> dict[str, Any] | None:
    entries = [e for split in data["scores"].values() if isinstance(split, list) for e in split]
    return entries[0].get("iso_bench") if entries and isinstance(entries[0], dict) else None


def _main_score(data: dict[str, Any]) -> float | None:
    """The main score of a stored result (the mean over its subsets, as mteb), or None."""
    split = "test" if "test" in data["scores"] else sorted(data["scores"])[0]
    values = [e.get("main_score") for e in data["scores"][split]]
    ok = values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return sum(values) / len(values) if ok else None


def _same_setup(stored: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if not stored:
        return False
    keys = ("model", "revision", "extraction", "variant")
    return all(stored.get(k) == wanted.get(k) for k in keys)


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
    from iso_bench.backbone import Backbone, Extraction, default_extraction

    revision = cfg.revision
    if revision is None:
        from mteb.models.model_implementations import MODEL_REGISTRY

        base = MODEL_REGISTRY.get(cfg.model)
        revision = base.revision if base is not None else None
    extraction = default_extraction(cfg.model, revision)
    if cfg.pooling is not None or cfg.layer is not None:
        extraction = Extraction(
            pooling=cfg.pooling or extraction.pooling,
            layer=cfg.layer if cfg.layer is not None else extraction.layer,
            normalize=extraction.normalize if cfg.pooling is None else False,
            max_length=extraction.max_length,
        )
    return Backbone(cfg.model, revision, device=cfg.device, extraction=extraction,
                    trust_remote_code=cfg.trust_remote_code)


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
            return _run(cfg)
    finally:
        mteb_log.removeFilter(superseded)
        for log in method_logs:
            log.removeFilter(once)


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
    from iso_bench.data import mirror_dir, use_source
    from iso_bench.fit_corpus import CorpusProvider, task_texts
    from iso_bench.methods import make_method

    task_names = expand_tasks(cfg.tasks)
    levels = {make_method(m)[1] for m in cfg.methods}  # validates every spec before any work
    mirror_dir(cfg.data_dir)  # validates the mirror folder
    corpus = CorpusProvider(cfg.fit_corpus, data_dir=cfg.data_dir)
    corpus.check()  # a fit corpus file is read before any encoding
    tasks = [_get_task(name) for name in task_names]
    sources = {t.metadata.name: use_source(t, cfg.data_dir) for t in tasks}
    corpus.add_tasks(tasks)

    backbone = build_backbone(cfg)
    # token vectors come from the same forward pass when any variant or task will need them
    needs_tokens = "token" in levels or any(getattr(t, "needs_tokens", False) for t in tasks)
    kinds = ("sentence", "tokens") if needs_tokens else ("sentence",)
    store = EmbeddingStore(backbone, cfg.cache_dir or default_cache_dir(), kinds=kinds,
                           batch_size=cfg.batch_size, progress=cfg.progress)
    # one encode for all: every text of every task, once, before any variant runs
    for task in tasks:
        texts = task_texts(task)
        store.sentences(texts, desc=f"encoding {task.metadata.name}")
        if "tokens" in kinds:
            store.tokens(texts)
    record = {"iso_bench_version": __version__, "model": cfg.model, "revision": backbone.revision,
              "extraction": backbone.describe()["extraction"], "environment": describe_environment(backbone.device),
              "command": cfg.command}
    return _Prepared(tasks, sources, backbone, store, corpus, record)


def _run(cfg: RunConfig) -> RunSummary:
    from mteb.cache import ResultCache

    started = time.perf_counter()
    run = _prepare(cfg)
    cache = ResultCache(cfg.results_dir)
    summary = RunSummary(cfg.model, run.backbone.revision, [t.metadata.name for t in run.tasks],
                         results_dir=Path(cfg.results_dir) / "results")
    for i, spec in enumerate(cfg.methods, 1):
        _run_variant(cfg, run, spec, f"variant {i}/{len(cfg.methods)}", cache, summary)
    summary.encode_stats = dict(run.store.stats)
    summary.seconds = time.perf_counter() - started
    return summary


def _run_variant(cfg: RunConfig, run: _Prepared, spec: str, position: str, cache: Any, summary: RunSummary) -> None:
    """Evaluate one variant on every task, write each result once with its provenance record."""
    import mteb
    from tqdm.auto import tqdm

    from iso_bench.encoder import VariantEncoder

    encoder = VariantEncoder(run.store, spec, corpus=run.corpus, seed=cfg.seed)
    meta = variant_meta(cfg.model, encoder.spec, revision=run.backbone.revision,
                        embed_dim=run.backbone.dim, fit_corpus=cfg.fit_corpus, seed=cfg.seed)
    register_model(cfg.model, [encoder.spec], revision=run.backbone.revision, replace=True,
                   fit_corpus=cfg.fit_corpus, seed=cfg.seed)
    encoder.mteb_model_meta = meta
    base_record = {**run.base_record, "variant": encoder.config()}
    row: dict[str, float | None] = {}
    bar = tqdm(run.tasks, desc=f"{position} {encoder.spec}", unit="task", disable=not cfg.progress, leave=False)
    for task in bar:
        name = task.metadata.name
        bar.set_postfix_str(name)
        path = cache.get_task_result_path(name, meta)
        stored = _stored_result(path)
        if stored is not None and not cfg.overwrite and _same_setup(_provenance(stored), base_record):
            row[name] = _main_score(stored)
            continue
        logger.info("evaluating %s on %s", meta.name, name)
        result = mteb.evaluate(encoder, task, cache=None, encode_kwargs={"batch_size": cfg.batch_size},
                               show_progress_bar=False, raise_error=False)
        for error in result.exceptions or ():
            summary.errors.setdefault(meta.name, {})[error.task_name] = error.exception
        for task_result in result.task_results:
            record = {**base_record, "task_type": task.metadata.type, "data": run.sources.get(name),
                      "fit": encoder.fit_records.get(name)}
            for entries in task_result.scores.values():
                for entry in entries:
                    entry["iso_bench"] = record
            cache.save_to_cache(task_result, meta, encode_kwargs={"batch_size": cfg.batch_size})
            row[name] = task_result.get_score()
        row.setdefault(name, None)
    bar.close()
    summary.scores[meta.name] = row
    summary.fit_seconds[meta.name] = encoder.fit_seconds


def describe_environment(device: str) -> dict[str, Any]:
    """Software versions and hardware of this run, for the provenance under every table."""
    import platform
    from importlib.metadata import version

    import torch

    if device.startswith("cuda"):
        hardware = torch.cuda.get_device_name(torch.device(device))
    else:
        hardware = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU threads"
    return {"device": device, "hardware": hardware, "python": platform.python_version(),
            "torch": torch.__version__, "transformers": version("transformers"), "mteb": version("mteb"),
            "platform": platform.platform(terse=True)}
