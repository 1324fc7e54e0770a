"""Engines that carry the grid's jobs: the local process (the default, no Dask imported) and Dask distributed
(a running scheduler, a local cluster of worker processes started for the run, or Slurm jobs through
dask-jobqueue). An engine is a :class:`concurrent.futures.Executor`, as Dask's ``ClientExecutor`` is: a context
manager whose :meth:`~Engine.submit` takes a plain function of plain arguments and returns a future; the grid
collects them with :meth:`Engine.as_completed`. Any other executor (Ray's, a batch system's) fits behind it.

Example:
    >>> with LocalEngine() as engine:
    ...     futures = [engine.submit(len, "abc"), engine.submit(len, "de")]
    ...     [f.result() for f in engine.as_completed(futures)]
    [3, 2]
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from iso_bench.registry import IsoBenchError

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
GPU = "GPU"  # the Dask resource a worker holds per GPU, and a job on a GPU asks for
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # the protocols of a Dask scheduler's address
SLURM_COMMANDS = ("sbatch", "squeue", "scancel")  # what dask-jobqueue and the user's checks run


class EngineError(IsoBenchError):
    """An engine that cannot be started or reached; the message says what to give."""


def scheduler_address(text: str, given: str = "--scheduler") -> str:
    """``text`` as the address of a Dask scheduler, ``[protocol://]host:port``, checked before anything connects
    (Dask's own parser raises a bare ValueError, and its client waits on what it cannot parse); ``given`` names
    where it came from in the message. An empty address is an error, never a local cluster.

    >>> scheduler_address(" tcp://head:8786 "), scheduler_address("10.0.0.5:8786")
    ('tcp://head:8786', '10.0.0.5:8786')
    >>> scheduler_address("tcp://127.0.0.1:notaport")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    iso_bench.grid.engines.EngineError: scheduler address ... the port 'notaport' is not a number from 1 to 65535; ...
    """
    value = text.strip()
    if not value:
        raise EngineError(f"{given} is empty: give the address of a running Dask scheduler, e.g. tcp://head:8786, "
                          "or leave it out to start a local cluster of --workers processes")
    scheme, sep, location = value.partition("://")
    if not sep:
        scheme, location = "tcp", value
    host, colon, port = location.rpartition(":")
    if scheme not in SCHEMES:
        problem = f"unknown protocol {scheme!r} (one of {', '.join(SCHEMES)})"
    elif not colon:
        problem = f"no port in {location!r}"
    elif not host.strip("[]"):
        problem = "no host before the port"
    elif not (port.isdigit() and 0 < int(port) < 65536):
        problem = f"the port {port!r} is not a number from 1 to 65535"
    else:
        return value
    raise EngineError(f"scheduler address {text!r} ({given}): {problem}; give it as tcp://HOST:PORT, e.g. "
                      "tcp://head:8786 (the address `dask scheduler` prints)")


def env_scheduler() -> str | None:
    """The scheduler ``$DASK_SCHEDULER_ADDRESS`` names, checked (:func:`scheduler_address`); None when it is
    unset or blank (a blank variable is taken as unset, as shells leave it)."""
    value = os.environ.get(SCHEDULER_ENV, "")
    return scheduler_address(value, f"${SCHEDULER_ENV}") if value.strip() else None


class Engine(concurrent.futures.Executor):
    """An executor of the grid's jobs. ``gpu``: every job submitted asks for a GPU (the grid sets it from
    ``--device``)."""

    name = "engine"
    gpu = False

    def as_completed(self, futures: Iterable[concurrent.futures.Future]) -> Iterator[concurrent.futures.Future]:
        """``futures`` as they finish (:func:`concurrent.futures.as_completed`)."""
        return concurrent.futures.as_completed(list(futures))

    def running(self, futures: Iterable[concurrent.futures.Future]) -> list[concurrent.futures.Future]:
        """Those of ``futures`` running now (as far as the engine knows)."""
        return [f for f in futures if f.running()]

    def describe(self) -> str:
        return self.name

    def wait_ready(self, *, gpu: bool | None = None, say: Callable[[str], None] = print) -> None:
        """Return once the engine can run a job (on a GPU, with ``gpu``; default :attr:`gpu`); raise
        :class:`EngineError` when it cannot within its limit. The local process is always ready."""

    def close(self) -> None:
        """Release what the engine started (a local cluster, Slurm jobs): :meth:`shutdown`."""
        self.shutdown()


class _LocalFuture(concurrent.futures.Future):
    """A future of :class:`LocalEngine`: asking for its result runs the queued jobs up to it."""

    def __init__(self, engine: LocalEngine) -> None:
        super().__init__()
        self._engine = engine

    def result(self, timeout: float | None = None) -> Any:
        self._engine._run_until(self)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._engine._run_until(self)
        return super().exception(timeout)


class LocalEngine(Engine):
    """Runs each job in this process, in submission order, when its outcome is asked for
    (:meth:`as_completed`, ``result()``): the plan is printed before the first job starts, and Ctrl-C stops
    the job that runs."""

    name = "local"

    def __init__(self) -> None:
        self._queue: list[tuple[_LocalFuture, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self._now: concurrent.futures.Future | None = None
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        if self._closed:
            raise RuntimeError("cannot submit to a local engine after shutdown")
        future = _LocalFuture(self)
        self._queue.append((future, fn, args, kwargs))
        return future

    def _run_until(self, target: concurrent.futures.Future) -> None:
        while not target.done() and self._queue:
            future, fn, args, kwargs = self._queue.pop(0)
            if not future.set_running_or_notify_cancel():
                continue
            self._now = future
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the future carries it to whoever collects it
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                self._now = None

    def as_completed(self, futures: Iterable[concurrent.futures.Future]) -> Iterator[concurrent.futures.Future]:
        for future in list(futures):
            self._run_until(future)
            yield future

    def running(self, futures: Iterable[concurrent.futures.Future]) -> list[concurrent.futures.Future]:
        return [f for f in futures if f is self._now]

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._closed = True
        if cancel_futures:
            for future, *_ in self._queue:
                future.cancel()
            self._queue.clear()


class DaskEngine(Engine):
    """Jobs as Dask futures on a cluster: ``scheduler`` (``tcp://host:8786``; checked by
    :func:`scheduler_address`, so ``""`` is an error) for a running one, else ``cluster`` (e.g. a
    ``SLURMCluster``), else the scheduler of ``$DASK_SCHEDULER_ADDRESS``, else a local cluster of ``workers``
    processes with one thread each, started here and closed by :meth:`close`. A job on a GPU asks for the
    resource ``GPU=1``: start each worker with ``--resources GPU=1`` (one per GPU)."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, *, workers: int = 2, cluster: Any = None,
                 gpus_per_worker: int = 0, timeout: float = 30, worker_wait: float | None = 600,
                 poll: float = 30) -> None:
        scheduler = (scheduler_address(scheduler) if scheduler is not None
                     else None if cluster is not None else env_scheduler())
        try:
            from distributed import Client, LocalCluster  # lazily: an engine
        except ImportError:
            raise EngineError("--engine dask needs Dask distributed: pip install 'iso-bench[dask]'") from None
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
        self._keys: dict[concurrent.futures.Future, str] = {}
        self._tasks: dict[concurrent.futures.Future, Any] = {}
        self._count = itertools.count()
        self._lock, self._shut = threading.Lock(), False
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

    def wait_ready(self, *, gpu: bool | None = None, say: Callable[[str], None] = print) -> None:
        """Wait until a worker that can take the grid's jobs has joined: any worker, or for jobs on a GPU
        (``gpu``, default :attr:`gpu`) one that holds the resource ``GPU``. Says what it waits for (and again
        every ``poll`` seconds: Slurm jobs may sit in the queue); after ``worker_wait`` seconds (``None``: no
        limit) it gives up, naming the scheduler, the workers it has and what to do."""
        started, said = time.monotonic(), None
        gpu = self.gpu if gpu is None else gpu

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

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        """``fn(*args, **kwargs)`` on a worker (one with the resource ``GPU`` when :attr:`gpu`), as a
        :class:`concurrent.futures.Future` that follows the Dask future."""
        name = getattr(fn, "__name__", "job")
        task = self.client.submit(fn, *args, pure=False, key=f"iso-bench-{name}-{next(self._count)}",
                                  resources={GPU: 1} if self.gpu else None, **kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        self._keys[future] = task.key
        self._tasks[future] = task

        def settle(done: Any) -> None:
            try:
                future.set_result(done.result())
            except BaseException as exc:  # noqa: BLE001 - a lost worker (KilledWorker), an error of the job
                future.set_exception(exc)
            finally:
                self._tasks.pop(future, None)

        task.add_done_callback(settle)
        return future

    def running(self, futures: Iterable[concurrent.futures.Future]) -> list[concurrent.futures.Future]:
        try:
            busy = {key for keys in self.client.processing().values() for key in keys}
        except Exception:  # noqa: BLE001 - progress only
            return []
        return [f for f in futures if not f.done() and self._keys.get(f) in busy]

    def describe(self) -> str:
        workers = len(self._workers())
        return f"dask at {self.address} ({workers} workers now)"

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
        if cancel_futures:
            for task in list(self._tasks.values()):
                task.cancel()
        self.client.close()
        if self._owned is not None:
            self._owned.close()


def slurm_cluster(*, jobs: int, partition: str | None = None, account: str | None = None,
                  walltime: str = "04:00:00", memory: str = "32GB", cores: int = 8, gpus: int = 1,
                  scheduler_host: str | None = None, local_directory: str | None = None) -> Any:
    """A dask-jobqueue ``SLURMCluster`` of ``jobs`` Slurm jobs, one worker each, holding ``gpus`` GPUs
    (``--gres=gpu:N``, and the Dask resource ``GPU=N`` so each job of the grid takes one). Options not given
    here come from dask-jobqueue's configuration file (``~/.config/dask/jobqueue.yaml``). The scheduler runs in
    this process, on ``scheduler_host`` (an address the compute nodes reach; default: this machine's). Slurm's
    commands (:data:`SLURM_COMMANDS`) must be on ``PATH``: without them no worker could ever join, so their
    absence is an :class:`EngineError` before anything starts, not a wait."""
    missing = [name for name in SLURM_COMMANDS if shutil.which(name) is None]
    if missing:
        raise EngineError(f"--engine slurm submits and watches its workers with Slurm's commands, and "
                          f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not on PATH; run iso-bench on "
                          "a Slurm login node (or load Slurm there, e.g. `module load slurm`), or use --engine dask "
                          "--scheduler ADDRESS or --engine local")
    try:
        from dask_jobqueue import SLURMCluster  # lazily: an engine
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


def wait_limit(given: float | None, default: float | None) -> float | None:
    """``--worker-wait``: seconds, 0 for no limit; not given, the engine's default."""
    if given is None:
        return default
    return None if given == 0 else given


def make_engine(name: str, *, scheduler: str | None = None, workers: int = 2, device: str | None = None,
                worker_wait: float | None = None, slurm: dict[str, Any] | None = None) -> Engine:
    """The engine ``--engine`` names: ``local`` (this process), ``dask`` (a running scheduler, or a local
    cluster of ``workers`` processes; its workers share this machine's GPU when ``device`` is a GPU) or
    ``slurm`` (Slurm jobs with the options of :func:`slurm_cluster`). ``worker_wait``: as :func:`wait_limit`.
    What an engine needs is checked before it waits for anything: the scheduler's address (an empty
    ``--scheduler ""`` included), Slurm's commands; each failure is one :class:`EngineError`."""
    if name == "dask":
        on_gpu = str(device or "").startswith("cuda")
        return DaskEngine(scheduler, workers=workers, gpus_per_worker=1 if on_gpu else 0,
                          worker_wait=wait_limit(worker_wait, 600))
    if name == "slurm":
        return DaskEngine(cluster=slurm_cluster(**(slurm or {})), worker_wait=wait_limit(worker_wait, None))
    return LocalEngine()
