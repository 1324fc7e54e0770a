"""What the grid says when a job's outcome comes from elsewhere: the warnings a worker logged about the run reach
the user's terminal in the summary, and a job the engine lost (a scheduler that died) is judged by its attempts:
one a worker completed is not called failed and its scores are shown; the jobs run are those that started.

The runner inside each job is stubbed (it returns a score and logs a warning, as a run with a full cache disk
does); the engine runs the real :func:`iso_bench.grid.jobs.run_job` here and hands its outcome back as a worker in
another process, or a lost scheduler, would."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iso_bench.grid import jobs
from iso_bench.grid.engines import Engine
from iso_bench.grid.grid import run_grid
from iso_bench.grid.plan import RunConfig, RunSummary
from iso_bench.grid.report import print_grid
from tests.conftest import small_mirror

CACHE_WARNING = "cannot write the raw vectors cache at /scratch/cache (no space left on the device): the run goes on"


class Elsewhere(Engine):
    """Runs each job here (unless ``skip`` says it never ran), then lets ``settle(future, outcome, label)`` hand
    its outcome back."""

    name = "elsewhere"

    def __init__(self, settle: Callable[[concurrent.futures.Future, Any, str], None],
                 skip: Callable[[str], bool] = lambda label: False) -> None:
        self.settle, self.skip = settle, skip

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        label = f"{args[0]['model']} on {args[0]['task']['name']}"
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.settle(future, None if self.skip(label) else fn(*args, **kwargs), label)
        return future


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_mirror(tmp_path_factory.mktemp("mirror"), ["sts12-sts", "sts13-sts"], 10)


@pytest.fixture
def stub_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cfg: RunConfig) -> RunSummary:
        logging.getLogger("iso_bench.files").warning(CACHE_WARNING)
        task = cfg.tasks[0]
        return RunSummary(cfg.model, "rev", [task], scores={f"{cfg.model}+raw": {task: 0.5}})

    monkeypatch.setattr(jobs, "run", run)


def _grid(tiny_bert_dir: Path, mirror: Path, tmp_path: Path, engine: Engine) -> Any:
    cfg = RunConfig(methods=["raw"], tasks=["STS12", "STS13"], results_dir=tmp_path / "res", data_dir=mirror,
                    progress=False)
    return run_grid([str(tiny_bert_dir)], cfg, engine=engine, say=lambda _: None)


def test_a_workers_warnings_reach_the_summary(tiny_bert_dir: Path, mirror: Path, tmp_path: Path, stub_runner: None,
                                              capsys: pytest.CaptureFixture) -> None:
    def another_process(future: concurrent.futures.Future, outcome: Any, label: str) -> None:
        future.set_result({**outcome, "pid": outcome["pid"] + 1})  # as a worker's outcome comes back

    grid = _grid(tiny_bert_dir, mirror, tmp_path, Elsewhere(another_process))
    assert grid.warnings == {f"{tiny_bert_dir} on STS12": [CACHE_WARNING], f"{tiny_bert_dir} on STS13": [CACHE_WARNING]}
    capsys.readouterr()
    assert print_grid(grid) == 0
    assert f"warning: {tiny_bert_dir} on STS12: {CACHE_WARNING}" in capsys.readouterr().err.splitlines()


def test_the_warnings_of_a_job_run_in_this_process_are_not_said_twice(tiny_bert_dir: Path, mirror: Path,
                                                                      tmp_path: Path, stub_runner: None) -> None:
    grid = _grid(tiny_bert_dir, mirror, tmp_path, Elsewhere(lambda f, outcome, _: f.set_result(outcome)))
    assert grid.warnings == {}  # the user saw them as they were logged
    (end,) = [a for a in jobs.read_attempts(tmp_path / "res", str(tiny_bert_dir), "STS12") if a["event"] == "end"]
    assert end["warnings"] == [CACHE_WARNING] and end["scores"] == {f"{tiny_bert_dir}+raw": 0.5}


def test_after_a_scheduler_loss_a_job_a_worker_completed_is_not_failed(tiny_bert_dir: Path, mirror: Path,
                                                                        tmp_path: Path, stub_runner: None,
                                                                        capsys: pytest.CaptureFixture) -> None:
    """STS12 ran to its end on a worker, but its future came back lost; STS13 was lost before it started."""
    def scheduler_lost(future: concurrent.futures.Future, outcome: Any, label: str) -> None:
        future.set_exception(concurrent.futures.CancelledError("scheduler connection lost"))

    engine = Elsewhere(scheduler_lost, skip=lambda label: label.endswith("STS13"))
    grid = _grid(tiny_bert_dir, mirror, tmp_path, engine)
    assert grid.failed == [] and grid.jobs_run == 1
    assert [(lost["task"], lost["reason"]) for lost in grid.lost] == [
        ("STS13", "no outcome came back (CancelledError: scheduler connection lost) and no attempt of it started; "
                  "run the same command again: it computes only what is missing")]
    assert grid.models[str(tiny_bert_dir)].scores == {f"{tiny_bert_dir}+raw": {"STS12": 0.5}}
    capsys.readouterr()
    assert print_grid(grid) == 1
    out, err = capsys.readouterr()
    assert "\n1 jobs run in " in out and "failed" not in err
    assert err.startswith(f"lost: {tiny_bert_dir} on STS13: no outcome came back")


def test_a_job_lost_while_it_ran_may_still_finish(tiny_bert_dir: Path, mirror: Path, tmp_path: Path) -> None:
    def started_then_lost(future: concurrent.futures.Future, outcome: Any, label: str) -> None:
        model, _, task = label.rpartition(" on ")
        jobs._record(tmp_path / "res", model, task, {"event": "start"})  # the worker started it, then no word
        future.set_exception(OSError("Timed out trying to connect to tcp://head:8786"))

    grid = _grid(tiny_bert_dir, mirror, tmp_path, Elsewhere(started_then_lost, skip=lambda label: True))
    assert grid.failed == [] and grid.jobs_run == 2 and len(grid.lost) == 2
    assert "while it ran on " in grid.lost[0]["reason"] and "which may still finish it" in grid.lost[0]["reason"]
