"""Checks made before any work: the results folder, the device, the thread count and every method spec
against the encoder's output dimension. Each failure is an :class:`InputError` that names the input and
says what to do, raised before a model is loaded or a text encoded.

The output dimension is what :func:`iso_bench.backbones.loader.resolve` says the model is without loading it: its
files (``config.json``, the sentence-transformers Pooling and Dense configs), mteb's ``embed_dim`` only where
they are not at hand. Where neither can be read the check is left to the fit, which refuses the same specs with
the same messages.

Example:
    >>> check_results_dir("/tmp/iso-bench-results")                      # doctest: +SKIP
    >>> check_methods(["abtt-999999"], "sentence-transformers/all-MiniLM-L6-v2")   # doctest: +SKIP
    Traceback (most recent call last):
    iso_bench.methods.base.MethodError: method 'abtt-999999': ...
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from iso_bench.methods import MethodError, make_method
from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)

THREADS_ENV = "ISO_BENCH_THREADS"


class InputError(IsoBenchError, ValueError):
    """An argument that cannot work (a results path that is a file, a device this machine lacks, ...)."""


# ---- results folder ------------------------------------------------------------------------------------
def check_results_dir(path: str | Path, flag: str = "--results") -> Path:
    """Create the results folder if needed and prove it writable (a probe file is written and removed).

    Raises :class:`InputError` when ``path`` is a file, lies under a file, or cannot be written, so that no
    encode is spent on results that could not be saved.
    """
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{flag} {path}: is a file, not a folder; give a folder (it is created if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot write there ({exc.strerror or exc}); "
                         "give a folder you can write to") from None
    return folder


def check_seeds(seeds: Sequence[int], flag: str = "--seed") -> None:
    """Refuse a seed that numpy's generators do not take (a negative one) before any work, naming it."""
    bad = [s for s in seeds if not isinstance(s, int) or isinstance(s, bool) or s < 0]
    if bad:
        raise InputError(f"{flag} {bad[0]}: a seed is a whole number >= 0 (numpy's generators take no negative "
                         "seed); e.g. --seed 0")


# ---- device and threads --------------------------------------------------------------------------------
def check_device(device: str | None) -> str | None:
    """``device`` unchanged when this machine has it (``cpu``, ``cuda``, ``cuda:N``, ``mps``), else
    :class:`InputError` naming what is available. ``None`` (the default: CUDA when available) passes."""
    if device is None:
        return None
    import torch  # lazily: torch takes seconds to import

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise InputError(f"--device {device!r}: not a device name; use cpu, cuda, cuda:N or mps") from None
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise InputError(f"--device {device}: this machine has no CUDA device (torch {torch.__version__} "
                             f"{'without' if torch.version.cuda is None else 'with'} CUDA support); use --device cpu")
        if parsed.index is not None and parsed.index >= count:
            raise InputError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to "
                             f"cuda:{count - 1}")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"--device {device}: MPS is not available on this machine; use --device cpu")
    elif parsed.type not in ("cpu", "cuda", "mps"):
        raise InputError(f"--device {device}: iso-bench runs on cpu, cuda or mps")
    return device


def default_threads() -> int:
    """The CPU threads torch should use: ``$ISO_BENCH_THREADS`` if set, else the CPUs this process may run
    on less those already busy (the 1-minute load average), at least 1.

    torch's own default, one thread per core, slows to a crawl when other processes hold those cores
    (each thread waits for the slowest); counting only idle cores avoids that on a shared machine and
    takes every core on an idle one.
    """
    env = os.environ.get(THREADS_ENV)
    if env:
        return _threads_value(env, THREADS_ENV)
    cpus = _cpus()
    try:
        busy = int(os.getloadavg()[0] + 0.5)
    except OSError:  # no load average on this platform
        busy = 0
    return max(1, cpus - busy)


def cpu_threads() -> int:
    """Threads for iso-bench's own CPU work beside torch (the leaderboard's resampling, also a run's verdict):
    ``$ISO_BENCH_THREADS`` if set, else the CPUs this process may run on (at most 8); ``--threads`` is torch's
    alone. The work is split into independent parts, so the numbers are the same on any count."""
    env = os.environ.get(THREADS_ENV)
    if env:
        return _threads_value(env, THREADS_ENV)
    return min(8, _cpus())


def _cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _threads_value(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{name}={text!r}: not a whole number of threads") from None
    if value < 1:
        raise InputError(f"{name}={value}: use at least 1 thread")
    return value


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op CPU threads (``None``: :func:`default_threads`) and return the number used.
    The count is recorded in the provenance (``environment.torch_threads``) and is no part of a result's
    identity: it changes the speed, not the vectors beyond float rounding."""
    import torch  # lazily: torch takes seconds to import

    n = default_threads() if threads is None else _threads_value(str(threads), "--threads")
    torch.set_num_threads(n)
    logger.info("torch uses %d CPU thread(s)", n)
    return n


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's and scipy's BLAS on one thread inside the block (the methods' fits and transforms).

    Beside torch's own thread pool, a second pool of BLAS threads that spin while waiting makes the small and
    medium products of the methods up to 9 times slower on a 2-core machine (cluster-pca's transform of 37,000
    token vectors: 0.68 s with 2 BLAS threads, 0.075 s with one); large single products lose little."""
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


@functools.lru_cache(maxsize=1)
def _blas_controller() -> Any:
    import scipy.linalg  # noqa: F401 - scipy's own BLAS is loaded before the controller lists the libraries
    from threadpoolctl import ThreadpoolController  # lazily: only where threads are set

    return ThreadpoolController()


# ---- method specs against the encoder's dimension -------------------------------------------------------
def output_dims(model: str, revision: str | None = None, *, trust_remote_code: bool = False,
                pooling: str | None = None, layer: int | None = None) -> dict[str, int]:
    """``{"sentence": d, "token": d}`` as far as they are known without loading the model ({} when not): what
    :func:`iso_bench.backbones.loader.resolve` reads from the model's files (mteb's metadata where they are not
    at hand)."""
    return describe_model(model, revision, pooling=pooling, layer=layer).dims()


def token_vectors_unavailable(model: str, revision: str | None = None, *, pooling: str | None = None,
                              layer: int | None = None) -> str | None:
    """Why ``model`` yields no token vectors, where that is known without loading it (None: it yields them, or
    it is known only once loaded), as :func:`iso_bench.backbones.loader.resolve` decides it."""
    return describe_model(model, revision, pooling=pooling, layer=layer).no_tokens


def describe_model(model: str, revision: str | None = None, *, pooling: str | None = None,
                   layer: int | None = None) -> Any:
    """:func:`iso_bench.backbones.loader.resolve` of ``model``: its width, pooling, precision and token vectors as
    known before loading, decided there once."""
    from iso_bench.backbones.loader import resolve  # lazily: the command line's help and list stay light

    return resolve(model, revision, pooling=pooling, layer=layer)


def check_methods(specs: Sequence[str], dims: dict[str, int], model: str, *,
                  no_tokens: str | None = None) -> list[tuple[Any, str]]:
    """Build every method of ``specs`` and check it against the model's dimensions; the built
    ``(method, level)`` pairs come back. A refusal names the model and its dimension; a token-level method on a
    model without token vectors (``no_tokens``: why, from :func:`token_vectors_unavailable`) is refused too."""
    made = []
    for spec in specs:
        method, level = make_method(spec)
        if level == "token" and no_tokens:
            raise MethodError(f"{spec} is a token-level method and {model} yields no token vectors ({no_tokens}): "
                              "run sentence-level methods on it, or pass --pooling/--layer to read its hidden states")
        dim = dims.get(level)
        if dim is not None:
            try:
                method.check(dim)
            except MethodError as exc:
                given = "" if spec == method.spec else f"{spec}: "  # the spec as typed, then as understood
                raise type(exc)(f"{given}{exc} ({model} gives {dim}-d {level} vectors)") from None
        made.append((method, level))
    return made
