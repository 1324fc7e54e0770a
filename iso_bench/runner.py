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
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench import __version__
from iso_bench.mteb_plugin import DEFAULT_METHODS, register_model, variant_meta
from iso_bench.suites import expand_tasks
from iso_bench.textio import default_file_mode

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


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


def _atomic_write_json(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _stored_provenance(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
        entries = [e for split in data["scores"].values() for e in split]
        return entries[0].get("iso_bench") if entries else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _same_setup(stored: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if not stored:
        return False
    keys = ("model", "revision", "extraction", "variant")
    return all(stored.get(k) == wanted.get(k) for k in keys)


def _get_task(name: str) -> Any:
    """``mteb.get_task``, with an error that suggests close task and suite names."""
    import difflib
    import sys

    import mteb

    from iso_bench.registry import UnknownNameError
    from iso_bench.suites import suites

    try:
        return mteb.get_task(name)
    except KeyError:
        known = [*sys.modules["mteb.get_tasks"]._TASKS_REGISTRY, *suites()]
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownNameError(f"unknown task or suite {name!r}.{hint} `iso-bench list` shows them.") from None


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


def _run(cfg: RunConfig) -> RunSummary:
    import mteb
    from mteb.cache import ResultCache

    from iso_bench.cache import EmbeddingStore, default_cache_dir
    from iso_bench.data import mirror_dir, use_source
    from iso_bench.encoder import VariantEncoder, task_texts
    from iso_bench.methods import make_method

    started = time.perf_counter()
    task_names = expand_tasks(cfg.tasks)
    levels = {make_method(m)[1] for m in cfg.methods}  # validates every spec before any work
    mirror_dir(cfg.data_dir)  # validates the mirror folder
    if cfg.fit_corpus != "task":
        from iso_bench.encoder import read_text_file

        read_text_file(cfg.fit_corpus)  # validates the fit corpus before any encoding
    tasks = [_get_task(name) for name in task_names]
    sources = {t.metadata.name: use_source(t, cfg.data_dir) for t in tasks}

    backbone = build_backbone(cfg)
    # token vectors come from the same forward pass when any variant or task will need them
    needs_tokens = "token" in levels or any(getattr(t, "needs_tokens", False) for t in tasks)
    kinds = ("sentence", "tokens") if needs_tokens else ("sentence",)
    store = EmbeddingStore(backbone, cfg.cache_dir or default_cache_dir(), kinds=kinds,
                           batch_size=cfg.batch_size, progress=cfg.progress)
    cache = ResultCache(cfg.results_dir)
    results_root = Path(cfg.results_dir) / "results"
    summary = RunSummary(cfg.model, backbone.revision, task_names, results_dir=results_root)
    loaded = {t.metadata.name: t for t in tasks}
    info = backbone.describe()
    environment = describe_environment(backbone.device)
    # one encode for all: every text of every task, once, before any variant runs
    for task in tasks:
        texts = task_texts(task)
        store.sentences(texts, desc=f"encoding {task.metadata.name}")
        if "tokens" in kinds:
            store.tokens(texts)

    for spec in cfg.methods:
        encoder = VariantEncoder(store, spec, fit_corpus=cfg.fit_corpus, seed=cfg.seed,
                                 data_dir=cfg.data_dir, tasks=loaded)
        meta = variant_meta(cfg.model, encoder.spec, revision=backbone.revision,
                            embed_dim=backbone.dim, fit_corpus=cfg.fit_corpus, seed=cfg.seed)
        register_model(cfg.model, [encoder.spec], revision=backbone.revision, replace=True,
                       fit_corpus=cfg.fit_corpus, seed=cfg.seed)
        encoder.mteb_model_meta = meta
        base_record = {"iso_bench_version": __version__, "model": cfg.model, "revision": backbone.revision,
                       "extraction": info["extraction"], "variant": encoder.config(), "environment": environment,
                       "command": cfg.command}
        for task in tasks:
            path = cache.get_task_result_path(task.metadata.name, meta)
            if path.exists() and (cfg.overwrite or not _same_setup(_stored_provenance(path), base_record)):
                path.unlink()
        logger.info("evaluating %s", meta.name)
        result = mteb.evaluate(encoder, tasks, cache=cache, encode_kwargs={"batch_size": cfg.batch_size},
                               show_progress_bar=cfg.progress, overwrite_strategy="only-missing",
                               raise_error=False)
        for error in result.exceptions:
            summary.errors.setdefault(meta.name, {})[error.task_name] = error.exception
        row: dict[str, float | None] = {}
        for task_result in result.task_results:
            name = task_result.task_name
            row[name] = task_result.get_score()
            path = cache.get_task_result_path(name, meta)
            record = {**base_record, "data": sources.get(name), "fit": encoder.fit_records.get(name)}
            _annotate(path, record)
        for name in task_names:
            row.setdefault(name, None)
        summary.scores[meta.name] = row
        summary.fit_seconds[meta.name] = encoder.fit_seconds
    summary.encode_stats = dict(store.stats)
    summary.seconds = time.perf_counter() - started
    return summary


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


def _annotate(path: Path, record: dict[str, Any]) -> None:
    """Add the provenance record to every score entry of a result file (kept if already there)."""
    if not path.exists():
        return
    data = json.loads(path.read_text())
    changed = False
    for entries in data.get("scores", {}).values():
        for entry in entries:
            if "iso_bench" not in entry:
                entry["iso_bench"] = record
                changed = True
    if changed:
        _atomic_write_json(path, data)


def format_summary(summary: RunSummary) -> str:
    """A small plain table of main scores x 100, variants as rows."""
    from tabulate import tabulate

    short = {name: name.rpartition("+")[2] for name in summary.scores}
    headers = ["variant", *summary.tasks]
    rows = []
    for name, row in summary.scores.items():
        rows.append([short[name], *[("–" if row.get(t) is None else f"{100 * row[t]:.2f}") for t in summary.tasks]])
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
