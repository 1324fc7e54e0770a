"""The verdict at a glance: one matrix per fit setting, a row per encoder and a column per judged unit (a task
group's mean, else each task), built from :func:`iso_bench.report.verdict.judgements`, the same paired tests as the
verdict's sentences (which stay below it as the detail).

A cell names the variant that beats raw significantly by the most, with its difference (``zscore +3.24``), or
``raw`` when none does, then how many variants are significantly worse than raw (``(6 worse)``); ``–`` where the
encoder has no judged result in that unit.

>>> from iso_bench.report.cells import Cell, Column, Leaderboard, Row, Section, Table
>>> raw, good = Cell(80.0, 0.0), Cell(82.5, 2.5, q=0.004, significant=True)
>>> bad = Cell(79.0, -1.0, q=0.01, significant=True)
>>> table = Table("MTEB STS: main score × 100", ("variant",), (Column("mean:sts", "mean", "mean"),),
...               (Row("org/m", "r1", "raw", (raw,)), Row("org/m", "r1", "whiten", (good,)),
...                Row("org/m", "r1", "clip", (bad,))))
>>> [matrix] = verdict_matrices(Leaderboard((Section("org/m", "revision r1", (table,), "m"),)))
>>> matrix.setting, matrix.units, matrix.models, matrix.cells[0][0].text
('fitted on test texts', ('MTEB STS',), ('org/m',), 'whiten +2.50 (1 worse)')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iso_bench.report.cells import Leaderboard
from iso_bench.report.verdict import apart_note, judged_apart, judgements

MISSING = "–"
NOTE = ("Each cell: the variant that beats raw by the most where the paired bootstrap test of its difference stays "
        "significant (Benjamini-Hochberg q ≤ 0.05 over its table's comparisons), with that difference in points "
        "(main score × 100), or raw where no variant does; (n worse) = the number of variants significantly worse "
        "than raw. A task group with a mean (MTEB STS, paper STS) is judged on its mean, other groups task by task; "
        f"{MISSING} = no judged result. The sentences below give each difference's interval and q.")


@dataclass(frozen=True)
class MatrixCell:
    """One encoder on one judged unit: the winning ``variant`` and its ``delta`` (None: raw stays best), how many
    variants are significantly ``worse``; ``judged`` false where there is no judgement (shown as –)."""

    variant: str | None = None
    delta: float | None = None
    worse: int = 0
    judged: bool = False

    @property
    def head(self) -> str:
        """The winner and its difference (``zscore +3.24``), ``raw``, or –."""
        if not self.judged:
            return MISSING
        return "raw" if self.variant is None else f"{self.variant} {self.delta:+.2f}"

    @property
    def tail(self) -> str:
        """``(6 worse)``, or "" when no variant is significantly worse (or nothing is judged)."""
        return f"({self.worse} worse)" if self.judged and self.worse else ""

    @property
    def text(self) -> str:
        return f"{self.head} {self.tail}".strip()


@dataclass(frozen=True)
class Matrix:
    """The verdict of one fit setting: ``cells[i][j]`` is ``models[i]`` on ``units[j]``."""

    setting: str
    units: tuple[str, ...]
    models: tuple[str, ...]
    cells: tuple[tuple[MatrixCell, ...], ...]
    apart: tuple[str, ...] = ()  # the sizes judged per budget instead (verdict.judged_apart)


def matrix_note(matrices: Sequence[Matrix]) -> str:
    """:data:`NOTE`, and which sizes the board per budget judges instead, where the board has any."""
    return NOTE + apart_note(next((m.apart for m in matrices if m.apart), ()))


def verdict_matrices(board: Leaderboard) -> list[Matrix]:
    """One :class:`Matrix` per fit setting of ``board``'s verdict, settings, encoders and units in the board's
    order (fitted on test texts first where the board has it)."""
    found, apart = judgements(board), judged_apart(board)
    settings = list(dict.fromkeys(j.setting for j in found))
    settings.sort(key=lambda s: not s.startswith("fitted on test texts"))  # stable: the board's order otherwise
    out = []
    for setting in settings:
        mine = [j for j in found if j.setting == setting]
        units = tuple(dict.fromkeys(j.unit for j in mine))
        models = tuple(dict.fromkeys(j.model for j in mine))
        by = {(j.model, j.unit): j for j in mine}
        cells = []
        for model in models:
            row = []
            for unit in units:
                j = by.get((model, unit))
                if j is None or j.no_verdict is not None:  # nothing judged: – (the sentence below says why)
                    row.append(MatrixCell())
                else:
                    best = j.best
                    row.append(MatrixCell(None if best is None else best[0].variant,
                                          None if best is None else best[1].delta, len(j.losses), True))
            cells.append(tuple(row))
        out.append(Matrix(setting, units, models, tuple(cells), apart))
    return out


def matrix_text(matrices: list[Matrix]) -> str:
    """The matrices as plain text (the end of ``iso-bench run``): a small table per setting, then the note."""
    from tabulate import tabulate  # lazily: `iso-bench --help` and `list` do not need it

    out = []
    for m in matrices:
        rows = [[model, *(c.text for c in cells)] for model, cells in zip(m.models, m.cells, strict=True)]
        out += [f"{m.setting}:", tabulate(rows, headers=["encoder", *m.units], tablefmt="simple",
                                           disable_numparse=True), ""]
    # in the run's output the sentences come before the matrix, which ends it
    return "\n".join(out + [matrix_note(matrices).replace("The sentences below", "The sentences above")]) if out else ""
