"""A job of the grid: one model on one task, every variant and setup of the run. A plain function of plain
arguments (:func:`run_job`), so that any engine can carry it to any process or machine.

An engine may run a job more than once (Dask reruns the jobs of a worker that died): every result file is
written whole and atomically by the runner, and a job that starts again finds the results its earlier
attempt finished and computes only the rest. Each attempt is recorded in the results folder, because the
engine does not tell the client: ``<results>/grid/attempts/<model>/<task>.jsonl`` gets one line when an
attempt starts and one when it ends (host, process, time, outcome), so that the grid can say which jobs ran
more than once; the end line holds the job's outcome (scores, errors), so that a grid whose engine lost the job
(a scheduler that died) can still tell that a worker completed it. A failed attempt's traceback is kept in
``<results>/grid/logs/<model>/<task>.log``. The warnings iso-bench logs while a job runs ("cannot write the raw
vectors cache ...") come back in its outcome: a worker's log is not the user's terminal.

Example:
    >>> job = Job(model="sentence-transformers/all-MiniLM-L6-v2", task=TaskRef("STS16"),
    ...           config={"methods": ["raw"], "results_dir": "results"})
    >>> job.label
    'sentence-transformers/all-MiniLM-L6-v2 on STS16'
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from iso_bench.files import slug
from iso_bench.grid.plan import RunConfig
from iso_bench.grid.runner import run
from iso_bench.grid.tasks import TaskRef

GRID_FOLDER = "grid"  # under the results folder: attempts and logs of the grid's jobs


@dataclass(frozen=True)
class Job:
    """One model on one task; ``config`` holds the other fields of :class:`~iso_bench.grid.plan.RunConfig`."""

    model: str
    task: TaskRef
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.model} on {self.task.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "task": asdict(self.task), "config": dict(self.config)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(data["model"], TaskRef(**data["task"]), dict(data["config"]))


@dataclass
class Outcome:
    """What a job reports back: its scores per variant on the task, or why it failed."""

    model: str
    task: str
    ok: bool
    scores: dict[str, float | None] = field(default_factory=dict)  # variant label -> main score
    errors: dict[str, str] = field(default_factory=dict)  # variant label -> why its result is missing
    reason: str | None = None  # the job failed as a whole: the model did not load, the data is missing, ...
    log: str | None = None  # where the failed attempt's traceback is kept
    revision: str | None = None
    seconds: float = 0.0
    host: str = ""
    pid: int = 0  # the process that ran it: the grid repeats the warnings of another process's jobs
    warnings: list[str] = field(default_factory=list)  # what iso-bench logged at WARNING while the job ran
    other_data: dict[str, Any] = field(default_factory=dict)  # results present of other data (RunSummary's)


def attempts_file(results_dir: str | Path, model: str, task: str) -> Path:
    return Path(results_dir) / GRID_FOLDER / "attempts" / slug(model) / f"{slug(task)}.jsonl"


def log_file(results_dir: str | Path, model: str, task: str) -> Path:
    return Path(results_dir) / GRID_FOLDER / "logs" / slug(model) / f"{slug(task)}.log"


def read_attempts(results_dir: str | Path, model: str, task: str) -> list[dict[str, Any]]:
    """The attempt records of a job (starts and ends), oldest first; a torn last line is skipped."""
    path = attempts_file(results_dir, model, task)
    out = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _record(results_dir: str | Path, model: str, task: str, entry: dict[str, Any]) -> None:
    """Append one line (a single ``write`` of a line with O_APPEND: lines of two attempts never interleave)."""
    path = attempts_file(results_dir, model, task)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**entry, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


class _Warnings(logging.Handler):
    """Each distinct warning that iso-bench logs in the thread that made it (a worker may run several jobs at
    once, one per thread), in order."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread, self.messages = threading.get_ident(), []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.thread == self.thread and message not in self.messages:
            self.messages.append(message)


def run_job(job_data: dict[str, Any]) -> dict[str, Any]:
    """Run one job in this process (a worker's, or the client's for the local engine) and return its
    :class:`Outcome` as a dict. Never raises for a failure of the job itself: the outcome says it."""

    job = Job.from_dict(job_data)
    results_dir = job.config.get("results_dir", "results")
    started = time.perf_counter()
    _record(results_dir, job.model, job.task.name, {"event": "start"})
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    cfg = RunConfig(**{k: v for k, v in job.config.items() if k in fields}, model=job.model,
                    tasks=[job.task.name], task_refs=[job.task])
    outcome = Outcome(job.model, job.task.name, ok=True, host=socket.gethostname(), pid=os.getpid())
    warned, log = _Warnings(), logging.getLogger("iso_bench")
    log.addHandler(warned)
    try:
        summary = run(cfg)
        outcome.revision, outcome.other_data = summary.revision, summary.other_data
        for label, row in summary.scores.items():
            outcome.scores[label] = row.get(job.task.name)
        for label, errors in summary.errors.items():
            for message in errors.values():
                outcome.errors[label] = str(message)
        outcome.ok = not outcome.errors
    except Exception as exc:  # noqa: BLE001 - contained: the grid reports it and goes on
        outcome.ok, outcome.reason = False, f"{type(exc).__name__}: {exc}".strip()
        path = log_file(results_dir, job.model, job.task.name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{job.label}\n\n{traceback.format_exc()}", encoding="utf-8")
            outcome.log = str(path)
        except OSError:
            pass
    finally:
        log.removeHandler(warned)
    outcome.seconds, outcome.warnings = time.perf_counter() - started, warned.messages
    _record(results_dir, job.model, job.task.name,
            {"event": "end", "ok": outcome.ok, "reason": outcome.reason, "seconds": round(outcome.seconds, 3),
             "revision": outcome.revision, "scores": outcome.scores, "errors": outcome.errors,
             "warnings": outcome.warnings})
    return asdict(outcome)
