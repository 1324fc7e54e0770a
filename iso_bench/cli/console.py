"""The console of the ``iso-bench`` command line: log lines through tqdm, so that a warning never splits a
progress bar, and SIGTERM ending a command as Ctrl-C does."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def console(network: bool, progress: bool) -> Iterator[None]:
    """Log lines go through tqdm, so a warning never splits a progress bar. For a command that loads a
    model (``network``), the loggers of transformers and datasets (which have handlers of their own) are
    redirected as well, and ``progress=False`` also silences their download and loading bars."""
    from tqdm.contrib.logging import logging_redirect_tqdm  # lazily: only where a bar is shown

    loggers = [logging.getLogger()]
    if network:
        import datasets  # lazily: datasets loads pyarrow
        from datasets.utils import logging as datasets_logging  # lazily: datasets loads pyarrow
        from transformers.utils import logging as transformers_logging  # lazily: transformers loads torch

        loggers += [transformers_logging.get_logger("transformers"), datasets_logging.get_logger("datasets")]
        if not progress:
            transformers_logging.disable_progress_bar()  # also huggingface_hub's download bars
            datasets.disable_progress_bars()
    with logging_redirect_tqdm(loggers=loggers):
        yield


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so that a run ends as it does on Ctrl-C: temporary files
    removed, finished results and cached vectors kept, one line said."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in this (main) thread while the command runs; elsewhere, nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
