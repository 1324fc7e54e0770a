"""What ``--tasks`` names: iso-bench's suites, single tasks (iso-bench's or mteb's), and mteb's own benchmarks.

A name that is neither a suite nor a known task is asked of mteb (``mteb.get_benchmark``), so a benchmark mteb
adds (``"MTEB(eng, v2)"``, ``"MTEB(Multilingual, v2)"``, ...) works without a change here. A benchmark's task
objects can be narrower than the task of the same name (``STS17`` with its English subsets only): a task that
comes from a benchmark is looked up in that benchmark again wherever it is built (:func:`build_task`), so a job
on another machine evaluates the very same task.

:func:`data_at_hand` tells, without loading anything, where a task's data would come from: the mirror
(``--data-dir``), the Hugging Face hub cache, or nowhere here (the hub must then be reachable).

Example:
    >>> [ref.name for ref in resolve(["mteb-sts"])][:2]                     # doctest: +SKIP
    ['STS12', 'STS13']
    >>> resolve(["MTEB(eng, v2)"])[0]                                      # doctest: +SKIP
    TaskRef(name='ArguAna', benchmark='MTEB(eng, v2)')
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iso_bench.kinds.cards import find_card, suites, unknown_task_message
from iso_bench.registry import UnknownNameError


@dataclass(frozen=True)
class TaskRef:
    """A task by name, and the mteb benchmark it was named through (None: by its own name or a suite)."""

    name: str
    benchmark: str | None = None


def resolve(names: list[str] | tuple[str, ...]) -> list[TaskRef]:
    """The tasks ``names`` stand for, in order, each once (first occurrence wins)."""
    groups, out = suites(), []
    for name in names:
        if name in groups:
            out += [TaskRef(t) for t in groups[name]]
        elif find_card(name) is not None or _mteb_task(name):
            out.append(TaskRef(name))
        else:
            out += [TaskRef(t.metadata.name, name) for t in _benchmark(name).tasks]
    seen: dict[str, TaskRef] = {}
    for ref in out:
        seen.setdefault(ref.name, ref)
    return list(seen.values())


def kept_tasks(names: list[str] | tuple[str, ...], skipped: list[str] | tuple[str, ...]) -> list[TaskRef]:
    """The tasks ``names`` stand for (:func:`resolve`) without those named in ``skipped`` (``--skip-tasks``: each
    must be one of them, by its task name; some task must be left).

    >>> [ref.name for ref in kept_tasks(["mteb-sts"], ["SICK-R", "STS12"])][:2]  # doctest: +SKIP
    ['STS13', 'STS14']
    """
    refs = resolve(names)
    known = [ref.name for ref in refs]
    for name in skipped:
        if name not in known:
            raise UnknownNameError(f"--skip-tasks {name!r}: not a task of --tasks {' '.join(names)} "
                                   f"({', '.join(known)}); give the name of one of them")
    kept = [ref for ref in refs if ref.name not in skipped]
    if not kept:
        raise UnknownNameError(f"--skip-tasks leaves none of the tasks of --tasks {' '.join(names)} to run; skip "
                               f"fewer, or run without --skip-tasks")
    return kept


def build_task(ref: TaskRef) -> Any:
    """The mteb task object of ``ref`` (no data loaded): the benchmark's own where it came from one."""
    if ref.benchmark is not None:
        for task in _benchmark(ref.benchmark).tasks:
            if task.metadata.name == ref.name:
                return task
        raise UnknownNameError(f"task {ref.name!r} is not in mteb's benchmark {ref.benchmark!r}")
    return get_task(ref.name)


def get_task(name: str) -> Any:
    """``mteb.get_task``, with an error that suggests close task, suite and benchmark names."""
    import mteb  # lazily: mteb takes seconds to import

    try:
        return mteb.get_task(name)
    except KeyError:
        return _benchmark(name)  # not a benchmark either: its error names the close ones


def data_at_hand(task: Any, data_dir: str | Path | None = None) -> str:
    """Where the data of ``task`` would be read from, without reading it: ``"mirror"`` (under the data
    directory), ``"hub cache"`` (the Hugging Face hub cache, or the datasets library's cache of an earlier hub
    read, holds the dataset), ``"iso-bench data"`` (an iso-bench task whose release folder is at hand) or
    ``"missing"`` (the hub, or the release archive, must be reachable).
    A task built on another mteb task (the isotropy task on STS-B) is told by its dataset's path."""
    root = data_dir if data_dir is not None else os.environ.get("ISO_BENCH_DATA_DIR")
    root = Path(root).expanduser() if root else None
    source = getattr(getattr(task, "card", None), "source", None)
    if hasattr(source, "locate"):  # an iso-bench task: its card names its release folder
        if (root is not None and (root / source.path).is_dir()) or (source.download_root() / source.path).is_dir():
            return "iso-bench data"
        return "missing (downloaded on first use)"
    corpus = getattr(getattr(task, "card", None), "params", {}).get("corpus_task")
    if corpus:  # a task read from another mteb task's data (the isotropy task: STS-B's test sentences)
        import mteb  # lazily: mteb takes seconds to import

        return data_at_hand(mteb.get_task(corpus), data_dir)
    repo = str(task.metadata.dataset.get("path", ""))
    if root is not None and any((base / repo).is_dir() for base in (root, root / "hub")):
        return "mirror"
    if Path(repo).is_dir():
        return "mirror"
    from huggingface_hub import constants  # lazily: only a hub download needs it

    if (Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}").is_dir():
        return "hub cache"
    if "/" in repo and _prepared(repo):
        return "hub cache"
    return "missing"


def _prepared(repo: str) -> bool:
    """Whether the datasets library's cache holds ``repo`` as an earlier hub read prepared it (what it reads
    offline): ``$HF_DATASETS_CACHE/<org>___<name>/``."""
    from datasets import config  # lazily: datasets loads pyarrow
    from datasets.naming import camelcase_to_snakecase  # lazily: datasets loads pyarrow

    org, _, name = repo.partition("/")
    return (Path(config.HF_DATASETS_CACHE) / f"{org}___{camelcase_to_snakecase(name)}").is_dir()


EXAMPLE_BENCHMARKS = ("MTEB(eng, v2)", "MTEB(Multilingual, v2)", "iso-bench v3", "iso-bench v2", "iso-bench v1")


def describe_benchmarks(every: bool = False) -> str:
    """What ``iso-bench list`` says of mteb's benchmarks, which ``--tasks`` takes by name (resolved by
    ``mteb.get_benchmark``): a few examples, without importing mteb; ``every``: each benchmark mteb knows, with
    its number of tasks (imports mteb)."""
    head = "mteb benchmarks (--tasks takes their names too, quoted; a benchmark's own task objects are run):"
    if not every:
        names = ", ".join(f'"{n}"' for n in EXAMPLE_BENCHMARKS)
        return f"{head}\n  e.g. {names}; every one mteb knows: iso-bench list --benchmarks"
    import mteb  # lazily: mteb takes seconds to import (iso-bench's hook adds its versions to its benchmarks)

    rows = sorted((b.name, len(b.tasks)) for b in mteb.get_benchmarks())
    return "\n".join([head, *(f'  "{name}"  ({n} tasks)' for name, n in rows)])


def _mteb_task(name: str) -> bool:
    import mteb  # lazily: mteb takes seconds to import

    try:
        mteb.get_task(name)
    except KeyError:
        return False
    return True


def _benchmark(name: str) -> Any:
    import mteb  # lazily: mteb takes seconds to import

    try:
        return mteb.get_benchmark(name)
    except (KeyError, ValueError):

        known = [*sys.modules["mteb.get_tasks"]._TASKS_REGISTRY, *(b.name for b in mteb.get_benchmarks())]
        raise UnknownNameError(unknown_task_message(name, known).replace("task or suite", "task, suite or mteb "
                                                                          "benchmark")) from None
