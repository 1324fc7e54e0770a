"""The table model of a leaderboard: plain frozen data that :mod:`.board` builds and the renderers
(:mod:`.tables`, :mod:`.html`, :mod:`.plots`) read. It imports nothing of the report's other modules."""

from __future__ import annotations

from dataclasses import dataclass

from iso_bench.report.setups import row_label

PERCENT_DECIMALS = 2  # scores are shown × 100 with two decimals
COMPARISON = "comparison"  # the key of the section that compares the models
SAME = "= raw"  # how a cell whose row's vectors are raw's on its tasks is shown (Cell.unchanged)


@dataclass(frozen=True)
class Column:
    """A data column: ``kind`` is "score" (a task), "mean" or "diagnostic"; ``fmt`` "percent" or "fraction"."""

    key: str
    label: str
    kind: str = "score"
    fmt: str = "percent"


@dataclass(frozen=True)
class Cell:
    """A number as shown (percent cells are already rounded), its difference from raw, and the best flag.

    ``withheld``: a value that exists but means nothing for this row (I(W) of whitened vectors); shown as –
    like a missing one, and explained in the table's notes, not in its missing note. ``mark``: "modified" or
    "unverified" when a result the cell is computed from is (:mod:`.marks`), else "". ``unchanged``: the row's
    vectors are raw's on every task of the cell (clip that zeroed no dimension there): its value is raw's and no
    result of the method, so it is shown as ``= raw`` and is never best.

    With intervals (:mod:`.uncertainty`), in the cell's unit (× 100 for percents, rounded like the value):
    ``low``/``high``, its interval; ``sd``, the standard deviation across the seeds of a merged row;
    ``delta_low``/``delta_high`` and ``p``, the paired test of ``delta``; ``q``, its p-value adjusted over the
    table, and ``significant`` when q ≤ 5%; ``n``, the evaluation units the value is computed from (summed over
    a mean's tasks). All None (False) where there is none.
    """

    value: float | None = None
    delta: float | None = None
    best: bool = False
    withheld: bool = False
    mark: str = ""
    low: float | None = None
    high: float | None = None
    sd: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    p: float | None = None
    q: float | None = None
    significant: bool = False
    n: int | None = None
    unchanged: bool = False

    @property
    def missing(self) -> bool:
        return self.value is None and not self.withheld


@dataclass(frozen=True)
class Row:
    """One variant of one model in one setup; ``tag`` marks a role such as "best" in the model comparison;
    ``setup`` is the setup's label where the variant has several setups, else ""."""

    model: str
    revision: str
    variant: str
    cells: tuple[Cell, ...]
    tag: str = ""
    setup: str = ""
    family: str = "full"  # its family of tests (iso_bench.report.sizes.family): the verdict judges "full" alone

    @property
    def label(self) -> str:
        """``whiten``, or ``whiten [fitted on held-out texts]`` where the setup tells rows apart."""
        return row_label(self.variant, self.setup)


@dataclass(frozen=True)
class Table:
    """Rows of labelled cells plus the notes and provenance shown under the table."""

    title: str
    labels: tuple[str, ...]  # which row attributes label a row: ("variant",) or ("model", "revision", "variant")
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = ()
    provenance: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Section:
    """A heading (a model, or the comparison) with its tables; ``key`` names its files (plots)."""

    title: str
    subtitle: str
    tables: tuple[Table, ...]
    key: str = ""


@dataclass(frozen=True)
class Leaderboard:
    """Per-model sections, then the model comparison; ``n_files`` result files went in; ``ci``: whether
    its cells carry intervals (the renderers then add their columns)."""

    sections: tuple[Section, ...]
    n_files: int = 0
    ci: bool = False
    benchmarks: tuple[tuple[str, int], ...] = ()  # result files per benchmark they record (:func:`benchmark_counts`)
