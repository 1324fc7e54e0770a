"""Engines that carry the grid's jobs: the local process (the default, no Dask imported) and Dask distributed
(a running scheduler, a local cluster of worker processes started for the run, or Slurm jobs through
dask-jobqueue). The interface is Dask's futures: :meth:`Engine.submit` a plain function of plain arguments,
then :meth:`Engine.as_completed` yields ``(job, result, error)`` as they finish. Any other engine (Ray, a
batch system) fits behind the same two methods.

Example:
    >>> engine = LocalEngine()
    >>> engine.submit(len, "abc", label="x")
    >>> [(label, result) for label, result, _ in engine.as_completed()]
    [('x', 3)]
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from iso_bench.files import slug
from iso_bench.registry import IsoBenchError

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
GPU = "GPU"  # the Dask resource a worker holds per GPU, and a job on a GPU asks for


class EngineError(IsoBenchError):
    """An engine that cannot be started or reached; the message says what to give."""


class Engine:
    """Submit jobs, then collect their outcomes as they finish."""

    name = "engine"

    def submit(self, fn: Callable[[Any], Any], arg: Any, *, label: str, gpu: bool = False) -> None:
        raise NotImplementedError

    def as_completed(self) -> Iterator[tuple[str, Any, BaseException | None]]:
        raise NotImplementedError

    def running(self) -> list[str]:
        """Labels of the jobs running now (as far as the engine knows)."""
        return []

    def describe(self) -> str:
        return self.name

    def wait_ready(self, *, gpu: bool = False, say: Callable[[str], None] = print) -> None:
        """Return once the engine can run a job (on a GPU, with ``gpu``); raise :class:`EngineError` when it
        cannot within its limit. The local process is always ready."""

    def close(self) -> None:
        """Release what the engine started (a local cluster, Slurm jobs)."""


class LocalEngine(Engine):
    """Runs each job in this process when its outcome is asked for, in submission order."""

    name = "local"

    def __init__(self) -> None:
        self._jobs: list[tuple[str, Callable[[Any], Any], Any]] = []
        self._now: str | None = None

    def submit(self, fn: Callable[[Any], Any], arg: Any, *, label: str, gpu: bool = False) -> None:
        self._jobs.append((label, fn, arg))

    def as_completed(self) -> Iterator[tuple[str, Any, BaseException | None]]:
        while self._jobs:
            label, fn, arg = self._jobs.pop(0)
            self._now = label
            try:
                result, error = fn(arg), None
            except Exception as exc:  # noqa: BLE001 - reported with the job's label
                result, error = None, exc
            self._now = None
            yield label, result, error

    def running(self) -> list[str]:
        return [self._now] if self._now else []


class DaskEngine(Engine):
    """Jobs as Dask futures on a cluster: ``scheduler`` (``tcp://host:8786``, or ``$DASK_SCHEDULER_ADDRESS``)
    for a running one, else ``cluster`` (e.g. a ``SLURMCluster``), else a local cluster of ``workers``
    processes with one thread each, started here and closed by :meth:`close`. A job on a GPU asks for the
    resource ``GPU=1``: start each worker with ``--resources GPU=1`` (one per GPU)."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, *, workers: int = 2, cluster: Any = None,
                 gpus_per_worker: int = 0, timeout: float = 30, worker_wait: float | None = 600,
                 poll: float = 30) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise EngineError("--engine dask needs Dask distributed: pip install 'iso-bench[dask]'") from None
        scheduler = scheduler or os.environ.get(SCHEDULER_ENV)
        self._owned = None
        try:
            if scheduler:
                self.client = Client(scheduler, timeout=timeout)
            else:
                if cluster is None:
                    resources = {GPU: gpus_per_worker} if gpus_per_worker else None
                    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           resources=resources, dashboard_address=None)
                self._owned = cluster
                self.client = Client(cluster, timeout=timeout)
        except OSError as exc:
            where = scheduler or "a local cluster"
            raise EngineError(f"cannot reach the Dask scheduler at {where} ({exc}); start one (`dask scheduler`) "
                              f"or leave out --scheduler to start a local cluster") from None
        self._futures: dict[Any, str] = {}
        self.address = self.client.scheduler.address
        self.worker_wait, self.poll = worker_wait, poll

    def _workers(self) -> dict[str, Any]:
        """Every worker the scheduler knows, by address, with its ``resources`` (some Dask releases list only
        the first 5 unless asked for all)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # a release without the argument lists them all
            info = self.client.scheduler_info()
        return info.get("workers", {})

    def wait_ready(self, *, gpu: bool = False, say: Callable[[str], None] = print) -> None:
        """Wait until a worker that can take the grid's jobs has joined: any worker, or for jobs on a GPU one
        that holds the resource ``GPU``. Says what it waits for (and again every ``poll`` seconds: Slurm jobs
        may sit in the queue); after ``worker_wait`` seconds (``None``: no limit) it gives up, naming the
        scheduler, the workers it has and what to do."""
        started, said = time.monotonic(), None

        def usable(info: dict[str, Any]) -> bool:
            return not gpu or float((info.get("resources") or {}).get(GPU, 0)) >= 1

        while True:
            workers = self._workers()
            if any(usable(info) for info in workers.values()):
                return
            waited = time.monotonic() - started
            kind = "a worker with the resource GPU=1 (jobs on a GPU)" if gpu else "a worker"
            if self.worker_wait is not None and waited >= self.worker_wait:
                have = (f"{len(workers)} worker(s) joined, none with the resource {GPU}: start each GPU worker with "
                        f"`--resources {GPU}=1`" if workers else "no worker joined: start workers (`dask worker "
                        f"{self.address}`) or check the Slurm queue (`squeue --me`)")
                raise EngineError(f"waited {waited:.0f} s for {kind} at the Dask scheduler {self.address}; {have}; "
                                  "or wait longer (--worker-wait SECONDS, 0 for no limit)")
            if said is None or time.monotonic() - said >= self.poll:
                limit = "no limit" if self.worker_wait is None else f"up to {self.worker_wait:.0f} s"
                say(f"waiting for {kind} to join the Dask scheduler at {self.address} ({len(workers)} now, "
                    f"{waited:.0f} s so far, {limit})")
                said = time.monotonic()
            time.sleep(min(1.0, self.poll))

    def submit(self, fn: Callable[[Any], Any], arg: Any, *, label: str, gpu: bool = False) -> None:
        future = self.client.submit(fn, arg, pure=False, key=f"iso-bench-{slug(label)[:80]}-{len(self._futures)}",
                                    resources={GPU: 1} if gpu else None)
        self._futures[future] = label

    def as_completed(self) -> Iterator[tuple[str, Any, BaseException | None]]:
        from distributed import as_completed

        for future in as_completed(list(self._futures)):
            label = self._futures.pop(future)
            try:
                yield label, future.result(), None
            except Exception as exc:  # noqa: BLE001 - a lost worker (KilledWorker), an error of the job
                yield label, None, exc

    def running(self) -> list[str]:
        try:
            busy = {key for keys in self.client.processing().values() for key in keys}
        except Exception:  # noqa: BLE001 - progress only
            return []
        return [label for future, label in self._futures.items() if future.key in busy]

    def describe(self) -> str:
        workers = len(self._workers())
        return f"dask at {self.address} ({workers} workers now)"

    def close(self) -> None:
        self.client.close()
        if self._owned is not None:
            self._owned.close()


def slurm_cluster(*, jobs: int, partition: str | None = None, account: str | None = None,
                  walltime: str = "04:00:00", memory: str = "32GB", cores: int = 8, gpus: int = 1,
                  scheduler_host: str | None = None, local_directory: str | None = None) -> Any:
    """A dask-jobqueue ``SLURMCluster`` of ``jobs`` Slurm jobs, one worker each, holding ``gpus`` GPUs
    (``--gres=gpu:N``, and the Dask resource ``GPU=N`` so each job of the grid takes one). Options not given
    here come from dask-jobqueue's configuration file (``~/.config/dask/jobqueue.yaml``). The scheduler runs in
    this process, on ``scheduler_host`` (an address the compute nodes reach; default: this machine's)."""
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise EngineError("--engine slurm needs dask-jobqueue: pip install 'iso-bench[dask]'") from None
    extra = [f"--gres=gpu:{gpus}"] if gpus else []
    worker_args = ["--resources", f"{GPU}={gpus}"] if gpus else []
    scheduler = {"dashboard_address": None, **({"host": scheduler_host} if scheduler_host else {})}
    cluster = SLURMCluster(queue=partition, account=account, walltime=walltime, memory=memory, cores=cores,
                           processes=1, job_extra_directives=extra, worker_extra_args=worker_args,
                           local_directory=local_directory, scheduler_options=scheduler)
    cluster.scale(jobs=jobs)
    return cluster
