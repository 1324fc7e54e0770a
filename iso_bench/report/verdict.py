"""The verdict: one line per model, fitting setting and task group, generated from the same paired tests as the
tables (never hand-written), so it stays true when the results change.

For a group with a mean (MTEB STS, paper STS) the line judges the mean; for a group without one (the word tasks)
each task. It names the best variant that beats raw significantly (the largest difference from raw whose paired
bootstrap test has q ≤ 5% after the table's Benjamini-Hochberg correction), with its difference, interval and q,
or says that no variant does; then the variants that lose to raw significantly. It judges the variants at the
model's full size: a variant stored smaller (k dimensions, int8 or binary codes) where raw at that size is on the
board answers what bytes cost, and the board per budget judges it against that raw (:mod:`.budget`), in a family of
tests of its own. Diagnostics (isotropy) never enter,
and neither do cells without a paired test (results without per-instance units, a board without intervals); where
raw's score is missing or results are marked † (modified), the line says that there is no verdict, and why.

>>> from iso_bench.report.cells import Cell, Column, Leaderboard, Row, Section, Table
>>> raw, good = Cell(80.0, 0.0), Cell(82.5, 2.5, delta_low=1.1, delta_high=3.9, q=0.004, significant=True)
>>> table = Table("MTEB STS: main score × 100", ("variant",), (Column("mean:sts", "mean", "mean"),),
...               (Row("org/m", "r1", "raw", (raw,)), Row("org/m", "r1", "whiten", (good,))))
>>> [line] = verdict_lines(Leaderboard((Section("org/m", "revision r1", (table,), "m"),)))
>>> line.split(": ")[0]
'org/m, MTEB STS (mean), fitted on test texts'
>>> line.split(": ")[1]
'whiten beats raw by +2.50 points (95% interval +1.10 to +3.90, q = 0.004).'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iso_bench.data.fit_corpus import SETTING_WORDS, TASK
from iso_bench.report.cells import Cell, Leaderboard, Row, Table
from iso_bench.report.sizes import FULL, size_order

COMPARISON = "comparison"  # the key of the section that compares models: judged per model instead


def _setting(setup: str) -> str:
    """A row's fitting setting in words a reader recognises (the words its label carries, :data:`SETTING_WORDS`);
    what else tells its setup apart, in brackets. Rows without a setting in their label are fitted on test texts
    (the default setting) or not fitted at all."""
    parts = [p.strip() for p in setup.strip("[] ").split(",") if p.strip()]
    words = next((p for p in parts if p.startswith("fitted on")), SETTING_WORDS[TASK])
    rest = [p for p in parts if not p.startswith(("fitted on", "seeds", "seed="))]
    return words + (f" ({', '.join(rest)})" if rest else "")


def _judged(table: Table) -> list[tuple[int, str]]:
    """The columns a table is judged on: its mean, else each task; none for a diagnostic table."""
    means = [(i, c.label) for i, c in enumerate(table.columns) if c.kind == "mean"]
    if means:
        return [(means[0][0], "mean")]
    return [(i, c.label) for i, c in enumerate(table.columns) if c.kind == "score"]


def _points(value: float) -> str:
    return f"{value:+.2f}"


def _why_none(rows: Sequence[tuple[Row, Cell]]) -> str | None:
    """Why rows that would be judged get no paired test, where a reader must be told: raw's score is missing or
    not a finite number, or results are marked † (modified: no interval, no test); None otherwise (a board
    without intervals says so itself)."""
    raw = [cell for row, cell in rows if row.variant == "raw"]
    if raw and all(cell.value is None for cell in raw) and len(rows) > len(raw):
        return "raw's result is missing or not a finite number, so no variant is compared with it"
    if any(cell.mark == "modified" for _, cell in rows):
        return "results marked † (modified after their run) enter no paired test"
    return None


@dataclass(frozen=True)
class Judgement:
    """One judged unit of one model in one setting: ``best``, the variant that beats raw significantly by the most
    (its row and cell; None when none does), and ``losses``, the variants significantly worse than raw.
    ``no_verdict`` says why a unit that would be judged has no paired test (then nothing else is judged);
    ``tested``: every variant's row and cell compared with raw there (what the heatmap of :mod:`.heatmap` shows)."""

    model: str
    group: str
    what: str  # "mean", or the task judged
    setting: str
    best: tuple[Row, Cell] | None
    losses: tuple[str, ...]
    no_verdict: str | None = None
    tested: tuple[tuple[Row, Cell], ...] = ()

    @property
    def unit(self) -> str:
        """The judged unit as a matrix column names it: the group where its mean is judged, else the task."""
        return self.group if self.what == "mean" else self.what


def _judge(model: str, group: str, what: str, setting: str, rows: Sequence[tuple[Row, Cell]]) -> Judgement | None:
    tested = [(row, cell) for row, cell in rows if row.variant != "raw" and cell.delta is not None]
    if not any(cell.q is not None for _, cell in tested):
        # no paired test (results without units, or a board rendered without intervals): no verdict, and where a
        # reader must be told why (raw missing, results modified), a judgement that says so
        why = _why_none(rows)
        return None if why is None else Judgement(model, group, what, setting, None, (), why)
    wins = sorted((rc for rc in tested if rc[1].significant and rc[1].delta > 0),
                  key=lambda rc: (-rc[1].delta, rc[0].variant))
    losses = tuple(row.variant for row, cell in tested if cell.significant and cell.delta < 0)
    return Judgement(model, group, what, setting, wins[0] if wins else None, losses, tested=tuple(tested))


def _line(j: Judgement) -> str:
    text = f"{j.model}, {j.group} ({j.what}), {j.setting}: "
    if j.no_verdict is not None:
        return text + f"no verdict: {j.no_verdict}."
    if j.best is not None:
        row, cell = j.best
        interval = ("" if cell.delta_low is None else
                    f"95% interval {_points(cell.delta_low)} to {_points(cell.delta_high)}, ")
        text += f"{row.variant} beats raw by {_points(cell.delta)} points ({interval}q = {cell.q:.3f})."
    else:
        text += "no variant beats raw significantly."
    if j.losses:
        text += f" Significantly worse than raw: {', '.join(j.losses)}."
    return text


def judgements(board: Leaderboard) -> list[Judgement]:
    """Every judged unit of ``board``: per (model, task group or task, setting), in the board's order. The rows
    judged are those of the full size's family (``Row.family``, :func:`.sizes.family`): one stored at another size
    (k dimensions, int8 or binary) beside raw at that size is judged per budget, against that raw (:mod:`.budget`)."""
    found: list[Judgement] = []
    for section in board.sections:
        if section.key == COMPARISON:
            continue
        for table in section.tables:
            group = table.title.split(":")[0]
            for index, what in _judged(table):
                by_setting: dict[str, list[tuple[Row, Cell]]] = {}
                for row in table.rows:
                    if "benchmark=" in row.setup:  # another benchmark definition: shown, never judged
                        continue
                    if row.family != FULL:  # what bytes cost: the board per budget judges it
                        continue
                    by_setting.setdefault(_setting(row.setup), []).append((row, row.cells[index]))
                for setting, rows in by_setting.items():
                    judged = _judge(section.title, group, what, setting, rows)
                    if judged is not None:
                        found.append(judged)
    return found


def judged_apart(board: Leaderboard) -> tuple[str, ...]:
    """The sizes (:func:`.sizes.family`: ``"int8"``, ``"128-d"``, ...) of the rows the verdict leaves to the board per
    budget (raw at that size beside them), largest first; () where it leaves none (v1, v2)."""
    found = {row.family for section in board.sections if section.key != COMPARISON for table in section.tables
             if _judged(table) for row in table.rows if "benchmark=" not in row.setup and row.family != FULL}
    return tuple(sorted(found, key=size_order))


def apart_note(sizes: Sequence[str]) -> str:
    """The sentence that says which sizes the verdict leaves to the board per budget ("" where none)."""
    return (f" Variants stored at another size beside raw at that size ({', '.join(sizes)}) are judged in the "
            "table per budget, against that raw, and are neither winners nor counted worse here."
            if sizes else "")


def verdict_lines(board: Leaderboard) -> list[str]:
    """The verdict of ``board``: a line per (model, task group or task, setting), in the board's order."""
    return [_line(j) for j in judgements(board)]
