"""Fault injection for the crash tests: ``ISO_BENCH_FAULT=<point>[:<n>]`` kills the process (SIGKILL, no
clean-up, as a power cut or the OOM killer would) the ``n``-th time (default: the first) it reaches ``point``.

The points, each placed where a crash could leave work half done:

- ``encode``: a chunk of texts has been encoded and not yet written to the raw-vector cache;
- ``shard-write``: a cache shard's vectors are in its temporary file, its checksum is not;
- ``result-write``: half of a result file's bytes are in its temporary file;
- ``between-results``: a result file has been written and the next evaluation has not started.

Unset (always, outside tests) a point costs one dictionary lookup.

Example:
    >>> fault_point("encode")   # nothing happens unless ISO_BENCH_FAULT=encode
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "ISO_BENCH_FAULT"
POINTS = ("encode", "shard-write", "result-write", "between-results")
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
        os.kill(os.getpid(), signal.SIGKILL)
