"""Fault injection for the crash tests: ``ISO_BENCH_FAULT=<point>[:<n>]`` kills the process (SIGKILL, no
clean-up, as a power cut or the OOM killer would) the ``n``-th time (default: the first) it reaches ``point``;
with ``ISO_BENCH_FAULT_SIGNAL=TERM`` it sends SIGTERM instead (a scheduler ending a job).

The points, each placed where a crash could leave work half done:

- ``encode``: a chunk of texts has been encoded and not yet written to the raw-vector cache;
- ``shard-write``: a cache shard's vectors are in its temporary file, its checksum is not;
- ``result-write``: half of a result file's bytes are in its temporary file;
- ``between-results``: a result file has been written and the next evaluation has not started;
- ``swap``: an earlier output folder (an export, a submission) has been set aside, the new one not yet renamed in.

Unset (always, outside tests) a point costs one dictionary lookup.

``ISO_BENCH_FULL_DISK=<folder>`` makes the disk under ``folder`` full: every whole-file write there
(:func:`iso_bench.files.replacing`, which every write of a result, a units file, a cache shard or a fit goes
through, and the writes of an export's and a submission's folder) fails with ``ENOSPC``, after
``ISO_BENCH_FULL_DISK_AFTER`` (default 0) such writes succeeded.

Example:
    >>> fault_point("encode")   # nothing happens unless ISO_BENCH_FAULT=encode
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

FAULT_ENV = "ISO_BENCH_FAULT"
FULL_DISK_ENV, FULL_DISK_AFTER_ENV = "ISO_BENCH_FULL_DISK", "ISO_BENCH_FULL_DISK_AFTER"
POINTS = ("encode", "shard-write", "result-write", "between-results", "swap")
_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Kill this process here if ``$ISO_BENCH_FAULT`` names this point and this is its ``n``-th hit."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == int(count or 1):
        term = os.environ.get("ISO_BENCH_FAULT_SIGNAL") == "TERM"
        os.kill(os.getpid(), signal.SIGTERM if term else signal.SIGKILL)


def check_space(path: Path) -> None:
    """Raise ``OSError(ENOSPC)`` for a write to ``path`` when ``$ISO_BENCH_FULL_DISK`` says its disk is full."""
    full = os.environ.get(FULL_DISK_ENV)
    if not full or not Path(path).resolve().is_relative_to(Path(full).resolve()):
        return
    _hits["full-disk"] = _hits.get("full-disk", 0) + 1
    if _hits["full-disk"] > int(os.environ.get(FULL_DISK_AFTER_ENV) or 0):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
