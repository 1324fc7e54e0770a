"""The grid: every variant of every model on every task, planned before any work and carried out by an engine.

:func:`plan` resolves the task names (iso-bench suites, tasks, mteb benchmarks), builds one :class:`Job` per
model and task and tells, for each, how many of its results are already in the results folder and whether its
data is at hand, without loading a model or a dataset. :func:`run_grid` prints the plan, submits the jobs that
lack a result (jobs of one model one after another, so that a worker keeps the model it loaded), shows
progress (jobs done, running, failed) and returns a :class:`GridSummary`: per model, the scores as a
:class:`~iso_bench.grid.plan.RunSummary`, the jobs that failed with their reason and log, those that ran
more than once (their worker died and the engine ran them again), those the engine lost (a scheduler that died:
a worker that then completed one is read from the job's attempts, never called failed) and the warnings that
jobs in other processes logged.

Example:
    >>> summary = run_grid(["sentence-transformers/all-MiniLM-L6-v2"], RunConfig(tasks=["STS16"]))  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import model_label
from iso_bench.checks import output_dims
from iso_bench.data.fit_corpus import SETTINGS
from iso_bench.grid.engines import Engine, LocalEngine
from iso_bench.grid.jobs import Job, read_attempts, run_job
from iso_bench.grid.plan import RunConfig, RunSummary, canonical_spec, found, seeded, variant_meta_of
from iso_bench.grid.runner import normalized_model, revision_of
from iso_bench.grid.tasks import TaskRef, build_task, data_at_hand, resolve

# RunConfig fields a job carries (the model and tasks are the job's own)
_JOB_FIELDS = [f.name for f in dataclasses.fields(RunConfig) if f.name not in ("model", "tasks", "task_refs")]


@dataclass
class PlannedJob:
    """A job and what the results folder already holds of it."""

    job: Job
    variants: int  # results the job makes (variants x seeds)
    present: int  # of them already in the results folder
    data: str  # where its data would come from (see data_at_hand)
    revision: str | None

    @property
    def missing(self) -> int:
        return self.variants - self.present


@dataclass
class GridSummary:
    """What a grid did: per model its scores; the failed jobs; the jobs that ran more than once."""

    models: dict[str, RunSummary] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)  # outcome dicts (model, task, reason, log, ...)
    lost: list[dict[str, Any]] = field(default_factory=list)  # jobs the engine lost, unfinished: model, task, reason
    rerun: dict[str, int] = field(default_factory=dict)  # job label -> attempts
    warnings: dict[str, list[str]] = field(default_factory=dict)  # job label -> what a worker logged about it
    jobs_run: int = 0  # jobs with an attempt that started during this grid
    seconds: float = 0.0


def variants_of(cfg: RunConfig) -> list[tuple[RunConfig, str]]:
    """Every (config of the seed, spec) the run evaluates: each method once, or once per seed where a seed
    changes its numbers (as :func:`iso_bench.grid.runner.run` does)."""
    seeds = list(dict.fromkeys(cfg.seeds)) or [cfg.seed]
    out = []
    for spec in cfg.methods:
        for seed in seeds if seeded(spec, cfg) else seeds[:1]:
            out.append((dataclasses.replace(cfg, seed=seed), spec))
    return out


def plan(models: Sequence[str], base: RunConfig, commands: dict[str, str] | None = None) -> list[PlannedJob]:
    """One job per model and task, with what is present; loads no model and no dataset. ``commands``: per
    model, the command line recorded with its results (default: ``base.command``)."""
    from mteb.cache import ResultCache  # lazily: mteb takes seconds to import

    refs = resolve(list(base.tasks)) if not base.task_refs else list(base.task_refs)
    tasks = {ref: build_task(ref) for ref in refs}
    data = {ref: data_at_hand(task, base.data_dir) for ref, task in tasks.items()}
    cache = ResultCache(base.results_dir) if Path(base.results_dir).expanduser().is_dir() else None  # none made
    config = {name: getattr(base, name) for name in _JOB_FIELDS}
    for name in ("results_dir", "cache_dir", "data_dir"):  # a worker's working folder is not the client's
        if config[name] is not None:
            config[name] = str(Path(config[name]).expanduser().resolve())
    if config["fit_corpus"] not in SETTINGS:
        config["fit_corpus"] = str(Path(config["fit_corpus"]).expanduser().resolve())
    config["seeds"], config["methods"] = list(config["seeds"]), list(config["methods"])
    out = []
    for given in models:
        model = normalized_model(given)
        cfg = dataclasses.replace(base, model=model)
        job_config = {**config, "command": (commands or {}).get(given, base.command)}
        revision = revision_of(cfg)
        dims = output_dims(model, cfg.revision, trust_remote_code=cfg.trust_remote_code, pooling=cfg.pooling,
                           layer=cfg.layer) if revision is not None else {}
        run = _Known(revision, dims.get("sentence"))
        variants = variants_of(cfg)
        for ref, task in tasks.items():
            present = 0
            if revision is not None and not cfg.overwrite and cache is not None:
                for vcfg, spec in variants:
                    meta = variant_meta_of(vcfg, run, canonical_spec(spec, vcfg.seed))
                    present += _present(task, meta, cache)
            out.append(PlannedJob(Job(model, ref, job_config), len(variants), present, data[ref], revision))
    return out


def format_plan(planned: list[PlannedJob]) -> str:
    """The plan as a table: model, task (and its benchmark), results present / to make, data."""
    from tabulate import tabulate  # lazily: only the renderers need it

    rows = [[p.job.model, p.job.task.name + (f"  [{p.job.task.benchmark}]" if p.job.task.benchmark else ""),
             f"{p.present}/{p.variants}", "done" if not p.missing else f"{p.missing} to run", p.data]
            for p in planned]
    todo = [p for p in planned if p.missing]
    models = len({p.job.model for p in planned})
    head = (f"plan: {models} model(s) x {len({p.job.task for p in planned})} task(s) = {len(planned)} jobs; "
            f"{len(todo)} to run ({sum(p.missing for p in todo)} results), {len(planned) - len(todo)} complete")
    missing_data = [p for p in todo if p.data.startswith("missing")]
    note = (f"\n{len(missing_data)} job(s) to run have no data at hand (mirror or hub cache): they need the hub"
            if missing_data else "")
    return f"{head}\n{tabulate(rows, headers=['model', 'task', 'results', 'status', 'data'])}{note}"


def run_grid(models: Sequence[str], base: RunConfig, *, engine: Engine | None = None, dry_run: bool = False,
             commands: dict[str, str] | None = None, say: Callable[[str], None] = print) -> GridSummary:
    """Plan, print the plan, run what is missing on ``engine`` (default: this process), collect the outcomes."""
    started, started_wall = time.perf_counter(), time.time()
    planned = plan(models, base, commands)
    say(format_plan(planned))
    summary = GridSummary()
    for p in planned:
        summary.models.setdefault(p.job.model, RunSummary(model_label(p.job.model), p.revision or "unknown", [],
                                                          results_dir=Path(base.results_dir) / "results"))
        summary.models[p.job.model].tasks.append(p.job.task.name)
    todo = [p for p in planned if p.missing]
    if dry_run or not todo:
        return summary
    engine = engine or LocalEngine()
    engine.gpu = str(base.device or "").startswith("cuda")
    engine.wait_ready(say=say)
    order = list(dict.fromkeys(p.job.model for p in planned))
    jobs = {engine.submit(run_job, p.job.to_dict()): p  # a model's jobs together: workers keep its vectors
            for p in sorted(todo, key=lambda p: order.index(p.job.model))}
    say(f"running {len(todo)} jobs on {engine.describe()}")
    failed, lost = 0, []
    bar = _progress(len(todo), base.progress)
    for future in engine.as_completed(jobs):
        p = jobs[future]
        error = future.exception()
        if error is not None:  # the engine lost the job (a scheduler that died, workers that kept dying)
            lost.append((p, error))
        else:
            failed += not _collect(summary, p, future.result())
        if bar is not None:
            bar.update(1)
            running = [jobs[f].job.label for f in engine.running(jobs)]
            bar.set_postfix_str(f"failed {failed}; running {len(running)}: {', '.join(running)[:60]}")
    if bar is not None:
        bar.close()
    for p, error in lost:  # what the job's attempts say of it: a worker may have completed it all the same
        _collect(summary, p, _lost(p, error, _attempts(base, p, started_wall)))
    for p in todo:
        starts = [a for a in _attempts(base, p, started_wall) if a.get("event") == "start"]
        summary.jobs_run += bool(starts)
        if len(starts) > 1:
            summary.rerun[p.job.label] = len(starts)
    summary.seconds = time.perf_counter() - started
    return summary


def _attempts(base: RunConfig, p: PlannedJob, since: float) -> list[dict[str, Any]]:
    """The attempt records of ``p``'s job made during this grid (``since``: when it started), not an earlier run's."""
    return [a for a in read_attempts(base.results_dir, p.job.model, p.job.task.name) if a.get("time", 0) >= since]


def _collect(summary: GridSummary, p: PlannedJob, result: dict[str, Any]) -> bool:
    """Add a job's outcome to ``summary``: its scores, its revision, and, where it failed or was lost, the job
    itself; the warnings of a job run in another process (whose log the user does not see). Whether it is ok."""
    _merge(summary.models[p.job.model], result)
    if result.get("revision"):
        summary.models[p.job.model].revision = result["revision"]
    if result.get("lost"):
        summary.lost.append(result)
    elif not result["ok"]:
        summary.failed.append(result)
    if result.get("warnings") and (result.get("host"), result.get("pid")) != (socket.gethostname(), os.getpid()):
        summary.warnings[p.job.label] = list(result["warnings"])
    return bool(result["ok"])


def _lost(p: PlannedJob, error: BaseException, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The outcome of a job the engine lost, from its ``attempts`` in this grid: the last that ended, as its
    worker reported it (a worker completes a job it is running when the scheduler dies); else lost, while it ran
    (a worker may still finish it) or before it started."""
    base = {"model": p.job.model, "task": p.job.task.name, "ok": False, "scores": {}, "errors": {}, "log": None}
    ended = [a for a in attempts if a.get("event") == "end"]
    if ended:
        end = ended[-1]
        return {**base, **{k: end[k] for k in ("ok", "reason", "revision", "scores", "errors", "warnings", "host",
                                               "pid") if k in end}}
    why = f"{type(error).__name__}: {error}".strip().rstrip(":")
    started = [a for a in attempts if a.get("event") == "start"]
    where = (f"while it ran on {started[-1].get('host')} (pid {started[-1].get('pid')}), which may still finish it"
             if started else "and no attempt of it started")
    return {**base, "lost": True, "reason": f"no outcome came back ({why}) {where}; run the same command again: it "
                                          "computes only what is missing"}


class _Known:
    """What :func:`variant_meta_of` reads of a run: the revision and dimension, as peeked."""

    def __init__(self, revision: str | None, dim: int | None) -> None:
        self.revision, self.dim = revision, dim


def _present(task: Any, meta: Any, cache: Any) -> int:
    """1 when the result is there (in this version's setup folder, or an older version's: :func:`found`)."""
    try:
        return int(found(task, meta, cache) is not None)
    except Exception:  # noqa: BLE001 - unreadable counts as missing, as the job will see it
        return 0


def _merge(summary: RunSummary, outcome: dict[str, Any]) -> None:
    task = outcome["task"]
    summary.other_data.update(outcome.get("other_data") or {})
    for label, score in outcome.get("scores", {}).items():
        summary.scores.setdefault(label, {})[task] = score
    for label, message in outcome.get("errors", {}).items():
        summary.errors.setdefault(label, {})[task] = message


def _progress(total: int, show: bool) -> Any:
    if not show:
        return None
    from tqdm.auto import tqdm  # lazily: only where a bar is shown

    return tqdm(total=total, desc="grid jobs", unit="job", file=sys.stderr)


__all__ = ["GridSummary", "PlannedJob", "TaskRef", "format_plan", "plan", "run_grid", "variants_of"]
