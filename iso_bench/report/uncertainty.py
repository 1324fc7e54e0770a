"""Uncertainty in the leaderboard: each score cell's 95% interval, the spread of a row across seeds, and the
paired test of each difference from raw, corrected for the many differences of a table.

* Interval: a single result's is the one recorded with it (percentile bootstrap over its evaluation units,
  :mod:`.units`); any other (a mean of tasks, a row of several seeds, a task of several subsets) is computed
  here the same way: every result is scored on resamples of its units, and the cell's value is taken per
  resample (the mean of a row's seeds; of a mean column's tasks, each task resampled on its own); the
  interval is the percentiles of those values.
* Spread: a row merging runs that differ only in seed shows the standard deviation (ddof=1) of its seeds' values.
* Test: a variant and its raw row scored on the *same* resamples of the same units (paired bootstrap, as
  :func:`iso_bench.numerics.stats.paired_difference`: percentile interval of the difference and its two-sided
  p-value); the p-values of a table are adjusted together (Benjamini-Hochberg, :func:`iso_bench.numerics.stats.
  benjamini_hochberg`), and a difference whose q-value is at most 5% is marked ``*``.

Every resample matrix is drawn once per task, size and design and shared by every row scored on it; each
result's resampled scores are computed once per board (:mod:`.resample`).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from iso_bench.numerics import stats
from iso_bench.report.resample import Bootstrap, paired, percentile
from iso_bench.report.sizes import FULL, size_order
from iso_bench.report.units import Design, design_of, recorded_interval
from iso_bench.results.result_files import MODIFIED

if TYPE_CHECKING:
    from iso_bench.report.cells import Cell
    from iso_bench.report.index import Index, Line
    from iso_bench.report.results import Result

ALPHA = 0.05  # false discovery rate of the marked differences


@dataclasses.dataclass
class Status:
    """What became of one cell: the interval's and the test's reasons where there is none, its designs."""

    interval: str = ""
    test: str = ""
    designs: tuple[Design, ...] = ()
    tested: bool = False


def _pct(value: float) -> float:
    return round(value * 100, 2) + 0.0


def annotate_cell(boot: Bootstrap, ix: Index, cell: Cell, line: Line, tasks: Sequence[str]) -> tuple[Cell, Status]:
    """A cell with its spread across seeds, interval and paired test (p; q comes per table), and its status."""
    found = [r for t in tasks for r in ix.found(line, t)]
    spread = ix.spread(line, tasks)
    cell = dataclasses.replace(cell, sd=None if spread is None else round(spread, 2) + 0.0,
                               n=units_count([ix.get(line, t) for t in tasks]))
    status = Status()
    draws, designs = boot.line_draws(ix, line, tasks)
    status.designs = tuple(designs)
    recorded = recorded_interval(found[0]) if len(found) == 1 and found[0].state != MODIFIED else None
    if recorded is not None:
        cell = dataclasses.replace(cell, low=_pct(recorded[0]), high=_pct(recorded[1]))
    elif isinstance(draws, str):
        status.interval = draws
    else:
        bounds = percentile(draws, designs[0].level)
        if isinstance(bounds, str):
            status.interval = bounds
        else:
            cell = dataclasses.replace(cell, low=_pct(bounds[0]), high=_pct(bounds[1]))
    ref = ix.raw.get(line)
    if cell.delta is None or ref is None:
        return cell, status
    why = draws if isinstance(draws, str) else boot.aligned(ix, line, ref, tasks)
    theirs = None if why else boot.line_draws(ix, ref, tasks, designs)[0]
    why = why or (f"raw: {theirs}" if isinstance(theirs, str) else None)
    got = why or paired(draws, theirs, designs[0].level)  # type: ignore[arg-type]
    if isinstance(got, str):
        status.test = got
        return cell, status
    status.tested = True
    return dataclasses.replace(cell, delta_low=_pct(got[0]), delta_high=_pct(got[1]), p=got[2]), status


def units_count(results: Sequence[Result | None]) -> int | None:
    """The evaluation units a cell's value is computed from: each result's ``n_units`` (summed over its subsets),
    summed over the cell's tasks (one seed each: the seeds of a row score the same units); None where a result
    records none."""
    total = 0
    for result in results:
        if result is None:
            return None
        records = [sub.get("instances") for sub in result.subsets] or [result.record.get("instances")]
        counts = [rec.get("n_units") if isinstance(rec, dict) else None for rec in records]
        if not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            return None
        total += sum(counts)  # type: ignore[arg-type]
    return total or None


def adjust(columns: list[list[Cell]], families: Sequence[str] | None = None) -> list[list[Cell]]:
    """The table's p-values adjusted together (Benjamini-Hochberg): each tested cell's q, and ``significant``
    where q <= :data:`ALPHA`. ``families`` (one per row: :func:`iso_bench.report.sizes.family`) adjusts each
    family's rows on their own: a variant stored at another size than the model's (k dimensions, int8 or binary)
    where raw at that size was run is judged per budget, against that raw, and the verdict's family is the rest."""
    rows = len(columns[0]) if columns else 0
    families = list(families) if families is not None else [FULL] * rows
    out = [list(col) for col in columns]
    for group in dict.fromkeys(families):
        at = [(j, i) for j, col in enumerate(columns) for i, c in enumerate(col)
              if c.p is not None and families[i] == group]
        if not at:
            continue
        qs = stats.benjamini_hochberg([columns[j][i].p for j, i in at]).tolist()
        for (j, i), q in zip(at, qs, strict=True):
            out[j][i] = dataclasses.replace(columns[j][i], q=q, significant=q <= ALPHA)
    return out


def _where(entries: Sequence[tuple[str, str]], n_columns: int) -> str:
    """``whiten on STS12, STSB; abtt on all 3 columns`` from (row label, column label) pairs."""
    rows: dict[str, list[str]] = {}
    for row, col in entries:
        rows.setdefault(row, []).append(col)
    return "; ".join(f"{row} on " + (f"all {n_columns} columns" if len(cols) == n_columns > 1 else ", ".join(cols))
                     for row, cols in rows.items())


def _by_reason(entries: Sequence[tuple[str, str, str]], n_cells: int, n_columns: int) -> str:
    """``: reason: cells; reason: cells`` groups, or `` in every cell: reason`` when one reason holds for all
    ``n_cells``."""
    reasons: dict[str, list[tuple[str, str]]] = {}
    for row, col, why in entries:
        reasons.setdefault(why, []).append((row, col))
    if len(reasons) == 1 and len(entries) == n_cells:
        return f" in every cell: {next(iter(reasons))}"
    return ": " + "; ".join(f"{why}: {_where(cells, n_columns)}" for why, cells in reasons.items())


def _counts(designs: Sequence[Design]) -> str:
    runs = sorted({(d.n_resamples, d.seed) for d in designs})
    return " or ".join(f"{b} resamples, seed {s}" for b, s in runs)


def uncertainty_notes(columns: Sequence[Sequence[Cell]], statuses: Sequence[Sequence[Status | None]],
                      row_labels: Sequence[str], col_labels: Sequence[str], merged: bool, means: bool,
                      families: Sequence[str] | None = None) -> list[str]:
    """The notes that explain a table's intervals, spreads and tests, and every cell that lacks one."""
    families = list(families) if families is not None else [FULL] * len(row_labels)
    cells = [(c, s, row_labels[i], col_labels[j], families[i])
             for j, (col, st) in enumerate(zip(columns, statuses, strict=True))
             for i, (c, s) in enumerate(zip(col, st, strict=True)) if s is not None]
    designs = [d for _, s, *_ in cells for d in s.designs]
    levels = " or ".join(sorted({f"{d.level:.0%}" for d in designs})) or "95%"
    notes = []
    if any(c.low is not None for c, *_ in cells):
        notes.append(f"[low, high] after a score = its {levels} interval, × 100 like it: percentile bootstrap over "
                     f"the evaluation units ({_counts(designs)})" + ("; a mean's interval resamples each task on its "
                                                                     "own and averages the tasks per resample"
                                                                     if means else "") + ".")
    if merged:
        notes.append("[seeds …] = one row for the runs that differ only in seed: mean ± standard deviation across "
                     "the seeds (ddof=1); its interval is that of the seed mean (each resample scores every seed on "
                     "the same units, then averages them), and its difference from raw is tested likewise.")
    tested = [(c, s, group) for c, s, _, _, group in cells if s.tested]
    if tested:
        groups = {g: [c for c, _, h in tested if h == g] for g in dict.fromkeys(g for _, _, g in tested)}

        def over(group: list[Cell], what: str = "") -> str:
            m = len(group)
            return (f"the m = {m} comparison{'s' * (m != 1)} of this table{what} "
                    f"(q ≤ {ALPHA}: {sum(c.significant for c in group)} of {m})")

        if list(groups) == [FULL]:
            adjusted = over(groups[FULL])
        else:
            apart = "; ".join(f"{g}: m = {len(groups[g])}, q ≤ {ALPHA}: {sum(c.significant for c in groups[g])}"
                              for g in sorted((g for g in groups if g != FULL), key=size_order))
            adjusted = (f"each other size's comparisons ({apart}), where raw at that size was run: the board per "
                        "budget judges those against it, the verdict the full size")
            if FULL in groups:
                adjusted = over(groups[FULL], " at the model's full size") + ", and apart from them over " + adjusted
        notes.append(f"(+d)* = a significant difference from raw: paired bootstrap over the evaluation units "
                     f"(variant and raw scored on the same {_counts([d for _, s, _ in tested for d in s.designs])}), "
                     f"Benjamini-Hochberg FDR at {ALPHA:.0%} over {adjusted}; CSV gives each p and q.")
    lacking = [(row, col, s.interval) for c, s, row, col, _ in cells if c.low is None and s.interval]
    if lacking:
        notes.append("Value alone (no interval, and no test of a difference from raw)"
                     f"{_by_reason(lacking, len(cells), len(col_labels))}.")
    differences = [s for c, s, *_ in cells if c.low is not None and c.delta is not None]
    untested = [(row, col, s.test) for c, s, row, col, _ in cells if c.low is not None and s.test]
    if untested:
        notes.append(f"Difference from raw not tested (no *){_by_reason(untested, len(differences), len(col_labels))}.")
    return notes


def _prepare(boot: Bootstrap, ix: Index, lines: Sequence[Line], tasks: set[str]) -> None:
    """Draw every result a table needs task by task, each task's together (:meth:`Bootstrap.prepare`): each
    row's results under its own design, its raw row's under that design too."""
    for task in sorted(tasks):
        by_design: dict[Design, list[Result]] = {}
        for line in lines:
            found = ix.found(line, task)
            if found:
                design = design_of(found[0])  # a mean whose tasks record other designs draws the rest alone
                by_design.setdefault(design, []).extend([*found, *ix.found(ix.raw.get(line), task)])
        for design, results in sorted(by_design.items(), key=lambda item: (item[0].n_resamples, item[0].seed)):
            boot.prepare(list({r.file: r for r in results}.values()), design)


def annotate(boot: Bootstrap, ix: Index, columns: Sequence[Sequence[Cell]], lines: Sequence[Line],
             col_tasks: Sequence[Sequence[str]], col_labels: Sequence[str], row_labels: Sequence[str],
             means: bool = False, families: Sequence[str] | None = None) -> tuple[list[list[Cell]], list[str]]:
    """The cells of a table (one list per column; ``col_tasks``: the tasks each column is computed from) with
    their uncertainty, and the notes explaining it (rows named by ``row_labels``, columns by ``col_labels``)."""
    _prepare(boot, ix, lines, {t for tasks in col_tasks for t in tasks})
    out: list[list[Cell]] = []
    statuses: list[list[Status | None]] = []
    for col, tasks in zip(columns, col_tasks, strict=True):
        pairs = [annotate_cell(boot, ix, c, line, tasks) if c.value is not None else (c, None)
                 for c, line in zip(col, lines, strict=True)]
        out.append([c for c, _ in pairs])
        statuses.append([s for _, s in pairs])
    adjusted = adjust(out, families)
    merged = any(line.seeds and any(col[i].value is not None for col in out) for i, line in enumerate(lines))
    return adjusted, uncertainty_notes(adjusted, statuses, row_labels, col_labels, merged, means, families)


def spread_cells(column: Sequence[Cell], seeds: Sequence[Sequence[float | None]]) -> list[Cell]:
    """A column of diagnostics with the standard deviation (ddof=1) of each merged row's seeds (``seeds``, one
    list per row: [] for a row of one setup)."""
    out = []
    for cell, values in zip(column, seeds, strict=True):
        ok = cell.value is not None and len(values) > 1 and all(v is not None and math.isfinite(v) for v in values)
        out.append(dataclasses.replace(cell, sd=statistics.stdev(values)) if ok else cell)  # type: ignore[arg-type]
    return out
