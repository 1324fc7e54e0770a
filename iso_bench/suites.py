"""Named groups of tasks ("suites") that ``--tasks`` accepts next to single task names."""

from __future__ import annotations

from collections.abc import Iterable

from iso_bench.registry import Registry

SUITES: Registry[tuple[str, ...]] = Registry("suite")
SUITES.add("mteb-sts", ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R"))


def expand_tasks(names: Iterable[str]) -> list[str]:
    """Replace suite names by their tasks, keep task names, drop repeats (first occurrence wins)."""
    out: list[str] = []
    for name in names:
        out.extend(SUITES.get(name) if name in SUITES else (name,))
    return list(dict.fromkeys(out))
