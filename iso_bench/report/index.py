"""The results of a leaderboard indexed by row and task: which rows a model has, where each task goes, the raw
row each row is compared with, and the numbers a cell is computed from.

A row (:class:`Line`) is a variant in one setup (:mod:`.setups`); with ``merge`` the setups of one variant that
differ only in seed become one row, whose values are the mean over its seeds (never over fewer: a row missing a
task in any seed misses it). Plain data, no rendering; :mod:`.board` builds the tables from it.

Where the results record more than one benchmark definition (:mod:`iso_bench.results.benchmark`: another version, other
method defaults, or none recorded), the benchmark is part of every setup (``benchmark=iso-bench v1 @853d756f7d4b``):
a variant's results of two definitions are two rows, never averaged, and every row of a definition other than
the board's reference (this iso-bench's own where any result records it, else the one most results record) is
labelled with it and never ranked (:meth:`Index.ranked`).

>>> ix = Index(read_results("results"), merge=True)           # doctest: +SKIP
>>> [line.label for line in ix.lines[ix.models[0]]]           # doctest: +SKIP
['raw', 'flow [seeds 0-2]']
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from iso_bench.kinds.cards import Group, cards, find_card, group_of_type
from iso_bench.report.marks import worst
from iso_bench.report.results import Result
from iso_bench.report.setups import (
    SetupKey,
    group_labels,
    merge_replicates,
    raw_reference,
    row_label,
    setup_labels,
    setup_order,
)
from iso_bench.results.benchmark import NAME, definition_sha256


class Line(NamedTuple):
    """A row's identity: a variant of a model in one setup; ``shown`` is its setup label ("" when one).

    ``seeds``: the setups of the runs merged into this row (replicates that differ only in seed), () for a row
    of one setup; ``setup`` is then the first of them.
    """

    base: str
    rev: str
    variant: str
    setup: SetupKey
    shown: str = ""
    seeds: tuple[SetupKey, ...] = ()

    @property
    def label(self) -> str:
        return row_label(self.variant, self.shown)

    @property
    def members(self) -> tuple[SetupKey, ...]:
        """The setups whose results make this row: its seeds, or its one setup."""
        return self.seeds or (self.setup,)


def variant_order(variants: Iterable[str]) -> list[str]:
    """Raw first, then the rest sorted: ``['raw', 'abtt', 'whiten']``."""
    return sorted(set(variants), key=lambda v: (v != "raw", v))


def model_titles(bases: Iterable[str]) -> dict[str, str]:
    """How a board names each model: its name, and where two names differ only in Unicode normalisation (``café``
    written as NFC and as NFD, which look alike) the form each is written in, so their sections and columns are
    told apart; no name is cut.

    >>> [t.partition(" [")[2] or t for t in model_titles(["local/caf\u00e9", "local/cafe\u0301", "org/m"]).values()]
    ['Unicode NFC]', 'Unicode NFD]', 'org/m']
    """
    import unicodedata

    bases = list(dict.fromkeys(bases))
    alike = Counter(unicodedata.normalize("NFC", b) for b in bases)

    def form(name: str) -> str:
        found = next((f for f in ("NFC", "NFD") if unicodedata.is_normalized(f, name)), "mixed")
        return f"{name} [Unicode {found}{' form' * (found == 'mixed')}]"

    return {b: form(b) if alike[unicodedata.normalize("NFC", b)] > 1 else b for b in bases}


def place(task: str, results: Sequence[Result] = ()) -> tuple[Group, str]:
    """``(group, column label)`` of a task: from its card; without one, from its mteb task type.

    The type is read from the results' records (``task_type``); where none records it, from mteb (imported
    only then); failing that the task is one of the "other tasks".
    """
    card = find_card(task)
    if card is not None:
        return card.group, card.column
    types = sorted({str(r.record["task_type"]) for r in results if r.record.get("task_type")})
    return group_of_type(types[0] if types else _mteb_type(task)), task


def _mteb_type(task: str) -> str | None:
    try:
        import mteb  # lazily: mteb takes seconds to import

        return str(mteb.get_task(task).metadata.type)
    except Exception:  # not an mteb task, or mteb cannot load it: the task goes to "other tasks"
        return None


BENCHMARK = "benchmark"  # the setup kwarg a board of mixed benchmark definitions adds (never an mteb kwarg)
NO_BENCHMARK = "none recorded"


def recorded_benchmark(result: Result) -> tuple[str, str] | None:
    """``(name, definition SHA-256)`` of the benchmark a result records, or None where it records none (results of
    iso-bench 0.1, or a record without a definition)."""
    rec = result.record.get(BENCHMARK) if isinstance(result.record, dict) else None
    if not isinstance(rec, dict) or not rec.get("definition_sha256"):
        return None
    return str(rec.get("name")), str(rec["definition_sha256"])


def benchmark_label(result: Result) -> str:
    """The benchmark a result records, as a label shows it: ``iso-bench v1 @853d756f7d4b`` (name and the first
    12 hex digits of its definition's SHA-256), or ``none recorded``."""
    rec = recorded_benchmark(result)
    return NO_BENCHMARK if rec is None else f"{rec[0]} @{rec[1][:12]}"


def tag_benchmarks(results: Sequence[Result]) -> tuple[list[Result], str | None]:
    """``results`` unchanged and None where they record one benchmark definition (or all none); else each with
    its benchmark added to its setup, and the reference: this iso-bench's definition where any result records it,
    else the one most results record (ties: the first by label)."""
    labels = [benchmark_label(r) for r in results]
    counts = Counter(labels)
    if len(counts) < 2:
        return list(results), None

    own = f"{NAME} @{definition_sha256()[:12]}"
    reference = own if own in counts else min(counts, key=lambda label: (-counts[label], label))
    tagged = [dataclasses.replace(r, setup={**r.setup, BENCHMARK: label}) for r, label in zip(results, labels,
                                                                                              strict=True)]
    return tagged, reference


def model_lines(results: Sequence[Result], merge: bool = False, reference: str | None = None) -> list[Line]:
    """The rows of one model's results: variants raw first, each variant's setups in order, labelled; with
    ``merge``, a variant's replicates (setups that differ only in seed) as one row. A row of a benchmark other
    than ``reference`` (:func:`tag_benchmarks`) always says which in its label."""
    lines = []
    for variant in variant_order(r.variant for r in results):
        keys = sorted({r.setup_key for r in results if r.variant == variant}, key=setup_order)
        if merge:
            groups = merge_replicates(keys)
            lines += [Line(results[0].base, results[0].revision, variant, g[0], label, g if len(g) > 1 else ())
                      for g, label in zip(groups, group_labels(groups), strict=True)]
        else:
            labels = setup_labels(keys)
            lines += [Line(results[0].base, results[0].revision, variant, k, labels[k]) for k in keys]
    return [_say_benchmark(line, reference) for line in lines]


def _say_benchmark(line: Line, reference: str | None) -> Line:
    bench = line_benchmark(line)
    if bench is None or bench == reference or f"{BENCHMARK}=" in line.shown:
        return line
    return line._replace(shown=", ".join(part for part in (line.shown, f"{BENCHMARK}={bench}") if part))


def line_benchmark(line: Line) -> str | None:
    """The benchmark of a row's results on a board that mixes them (:func:`tag_benchmarks`), else None."""
    text = dict(line.setup).get(BENCHMARK)
    return None if text is None else str(json.loads(text))


class Index:
    """Results by row (:class:`Line`) and task; the task groups present; each model's rows and raw references."""

    def __init__(self, results: Sequence[Result], merge: bool = False) -> None:
        self.merge = merge
        results, self.reference = tag_benchmarks(results)
        self.results = sorted(results, key=lambda r: (r.base, r.revision, r.variant, r.setup_key, r.task))
        self.by_key = {(r.base, r.revision, r.variant, r.setup_key, r.task): r for r in results}
        self.models = sorted({(r.base, r.revision) for r in results})
        self.lines = {m: model_lines([r for r in self.results if (r.base, r.revision) == m], merge, self.reference)
                      for m in self.models}
        self.raw: dict[Line, Line | None] = {}
        for lines in self.lines.values():
            raws = {line.setup: line for line in lines if line.variant == "raw"}
            for line in lines:
                ref = None if line.variant == "raw" else raw_reference(line.setup, list(raws))
                self.raw[line] = None if ref is None else raws[ref]
        present = sorted({r.task for r in results})
        placed = {t: place(t, [r for r in self.results if r.task == t]) for t in present}
        self.group = {t: g for t, (g, _) in placed.items()}
        self.label = {t: label for t, (_, label) in placed.items()}
        declared = {c.name: i for i, c in enumerate(cards())}
        self.groups: list[tuple[Group, tuple[str, ...]]] = []
        for group in sorted(set(self.group.values()), key=lambda g: (g.order, g.key)):
            mine = [t for t in present if self.group[t] == group]
            self.groups.append((group, tuple(sorted(mine, key=lambda t: (t not in declared, declared.get(t, 0), t)))))

    def ranked(self, line: Line) -> bool:
        """Whether the row may be ranked (bold, best): its results are of the board's reference benchmark, or the
        board records one benchmark only."""
        bench = line_benchmark(line)
        return bench is None or bench == self.reference

    def found(self, line: Line | None, task: str | None) -> list[Result]:
        """The results of every setup of the row on ``task``, seeds in order; [] when any is missing."""
        if line is None:
            return []
        got = [self.by_key.get((line.base, line.rev, line.variant, key, task or "")) for key in line.members]
        return [r for r in got if r is not None] if all(got) else []

    def get(self, line: Line, task: str | None) -> Result | None:
        """The row's result on ``task`` (of its first seed where it merges several), or None."""
        return next(iter(self.found(line, task)), None)

    def score(self, line: Line, task: str) -> float | None:
        """The main score × 100 (the mean over the row's seeds), or None when missing."""
        found = self.found(line, task)
        if not found or any(r.main_score is None for r in found):
            return None
        if len(found) == 1:
            return found[0].main_score * 100  # type: ignore[operator]
        return math.fsum(r.main_score * 100 for r in found) / len(found)  # type: ignore[operator]

    def mean(self, line: Line | None, tasks: Sequence[str]) -> float | None:
        """The unweighted mean of ``tasks``, or None when any is missing (never a mean of the present ones)."""
        values = [None if line is None else self.score(line, t) for t in tasks]
        return None if any(v is None for v in values) else math.fsum(values) / len(values)  # type: ignore[arg-type]

    def spread(self, line: Line, tasks: Sequence[str]) -> float | None:
        """The standard deviation (ddof=1) across the row's seeds of their scores × 100 (of their means over
        ``tasks``); None for a row of one setup or a missing value."""
        if len(line.members) < 2:
            return None
        per_seed = [[r.main_score for r in self.found(line, t)] for t in tasks]
        if any(len(col) != len(line.members) or None in col for col in per_seed):
            return None
        means = [math.fsum(col[i] * 100 for col in per_seed) / len(tasks)  # type: ignore[operator]
                 for i in range(len(line.members))]
        return statistics.stdev(means)

    def refs(self, values: Sequence[float | None], lines: Sequence[Line]) -> list[float | None]:
        """Each row's raw reference value among ``values`` (one per row of ``lines``); None for raw rows."""
        at = {line: i for i, line in enumerate(lines)}
        return [None if (ref := self.raw.get(line)) is None or ref not in at else values[at[ref]] for line in lines]

    def marks(self, lines: Sequence[Line], tasks: Sequence[str]) -> list[tuple[str, str]]:
        """Each row's mark on ``tasks`` ("modified" when any of its results is, else "unverified" when any is,
        else ""), and that of the raw row its differences are taken from."""
        def mark(line: Line | None) -> str:
            return worst(*(r.state for t in tasks for r in self.found(line, t)))
        return [(mark(line), mark(self.raw.get(line))) for line in lines]

    def unchanged(self, line: Line, tasks: Sequence[str] | None = None) -> bool:
        """Every fit of the row (on ``tasks``, every task of the row where None) zeroed no dimension (clip that
        found no outlier): its vectors there are raw's. False where a task has no result of the row."""
        if tasks is None:
            found = [r for r in self.results if (r.base, r.revision, r.variant) == line[:3]
                     and r.setup_key in line.members]
        else:
            per_task = [self.found(line, t) for t in tasks]
            found = [r for rs in per_task for r in rs] if all(per_task) else []
        fits = [f for r in found for f in r.fits or [{}]]
        return bool(fits) and all(isinstance(f.get("learned"), dict) and f["learned"].get("dims_") == []
                                  for f in fits)
