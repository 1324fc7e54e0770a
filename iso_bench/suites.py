"""Named groups of tasks ("suites") that ``--tasks`` accepts next to single task names.

``mteb-sts`` is MTEB's own seven English STS tasks. iso-bench's tasks name their suite where they are
defined (the ``suite`` attribute of a task class under ``tasks/``); ``all`` is every suite.
"""

from __future__ import annotations

from collections.abc import Iterable

MTEB_STS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")


def suites() -> dict[str, tuple[str, ...]]:
    """Every suite name with its tasks, in definition order."""
    from iso_bench.kinds import TASKS, load_all

    load_all()
    out: dict[str, list[str]] = {"mteb-sts": list(MTEB_STS)}
    for name in TASKS:
        out.setdefault(TASKS.get(name).suite, []).append(name)
    out["all"] = [t for group in out.values() for t in group]
    return {k: tuple(v) for k, v in out.items()}


def expand_tasks(names: Iterable[str]) -> list[str]:
    """Replace suite names by their tasks, keep task names, drop repeats (first occurrence wins)."""
    names = list(names)
    groups = suites() if any(not _looks_like_task(n) for n in names) else {}
    out: list[str] = []
    for name in names:
        out.extend(groups.get(name, (name,)))
    return list(dict.fromkeys(out))


def _looks_like_task(name: str) -> bool:
    """Suite names are lower-case words; task names are not (STS12, WiC, SICK-R...)."""
    return name != name.lower()
