"""Aggregation: results into the table model of a leaderboard (plain data; :mod:`.tables` and :mod:`.plots`
render it, so the same results always give the same bytes).

A task's group and column label come from its card (:func:`iso_bench.cards.find_card`); a task without a
card (any other MTEB task) goes to the group of its mteb task type. Ranked groups get a column per task and,
where the group names one, a mean that is missing (–) when any of its tasks is missing, never a mean of the
rest; diagnostics (isotropy) get a table per task, never ranked or averaged.

A row is a variant in one setup (:mod:`.setups`): a variant run with two fit corpora, poolings or seeds has
two rows, labelled by what differs (``whiten [fit_corpus=train]``), each with its own means; a variant with
one setup is labelled by its name alone. Differences are taken from the raw row of the same setup.

>>> from iso_bench.report import read_results, render_markdown
>>> board = build_leaderboard(read_results("results"))          # doctest: +SKIP
>>> [t.title for t in board.sections[0].tables]                # doctest: +SKIP
['MTEB STS: main score × 100 (cosine Spearman)', 'isotropy diagnostics: Isotropy-STSB']
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from iso_bench.cards import Group, cards, find_card, group_of_type
from iso_bench.report.provenance import provenance
from iso_bench.report.results import LeaderboardError, Result
from iso_bench.report.setups import SetupKey, raw_reference, replicates, row_label, setup_labels, setup_order

PERCENT_DECIMALS = 2  # scores are shown × 100 with two decimals
ISOTROPY_METRICS: tuple[tuple[str, str], ...] = tuple(
    (f"{level}_{key}", f"{level} {label}") for level in ("sentence", "token")
    for key, label in (("iw", "I(W)"), ("isoscore", "IsoScore"), ("average_cosine", "avg. cosine"),
                       ("pc1_variance_ratio", "PC1 var. ratio")))
BASIS_DEPENDENT = ("sentence_iw", "token_iw")  # not determined by whitened vectors: shown as – for them
BEST = "best"
UNCHANGED = "= raw (no dimension zeroed)"  # a tie with raw that is no gain: the variant changed nothing


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
    like a missing one, and explained in the table's notes, not in its missing note.
    """

    value: float | None = None
    delta: float | None = None
    best: bool = False
    withheld: bool = False

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

    @property
    def label(self) -> str:
        """``whiten``, or ``whiten [fit_corpus=train]`` where the setup tells rows apart."""
        return row_label(self.variant, self.setup)


class Line(NamedTuple):
    """A row's identity: a variant of a model in one setup; ``shown`` is its setup label ("" when one)."""

    base: str
    rev: str
    variant: str
    setup: SetupKey
    shown: str = ""

    @property
    def label(self) -> str:
        return row_label(self.variant, self.shown)


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
    """Per-model sections, then the model comparison; ``n_files`` result files went in."""

    sections: tuple[Section, ...]
    n_files: int = 0


def variant_order(variants: Iterable[str]) -> list[str]:
    """Raw first, then the rest sorted: ``['raw', 'abtt', 'whiten']``."""
    return sorted(set(variants), key=lambda v: (v != "raw", v))


def mean_label(group: Group, n_tasks: int) -> str:
    """The header of a group's mean: ``mean MTEB-STS (7 tasks, cosine Spearman)``."""
    return f"mean {group.mean} ({n_tasks} task{'s' * (n_tasks != 1)}, {group.metric})"


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
        import mteb

        return str(mteb.get_task(task).metadata.type)
    except Exception:  # not an mteb task, or mteb cannot load it: the task goes to "other tasks"
        return None


def build_leaderboard(results: Sequence[Result]) -> Leaderboard:
    """One section per (base model, revision), then the comparison of the models.

    A group's columns are its tasks over the whole folder, so a mean covers the same tasks in every
    table. The output depends on the results' contents only, never on their order.
    """
    if not results:
        raise LeaderboardError("no results to aggregate")
    ix = _Index(results)
    sections = []
    for base, rev in ix.models:
        tables = []
        for group, tasks in ix.groups:
            mine = [t for t in tasks if any(ix.get(line, t) for line in ix.lines[base, rev])]
            if group.ranked:
                tables += [_ranked_table(ix, group, tasks, ix.lines[base, rev])] if mine else []
            else:
                tables += [_diagnostic_table(ix, group, t, ix.lines[base, rev]) for t in mine]
        key = base.replace("/", "__") + (f"-{rev[:12]}" if [b for b, _ in ix.models].count(base) > 1 else "")
        sections.append(Section(base, f"revision {rev}", tuple(tables), key))
    comparison = _comparison(ix)
    if comparison is not None:
        sections.append(Section("Models compared", "", (comparison,), "comparison"))
    return Leaderboard(tuple(sections), len(results))


def _model_lines(results: Sequence[Result]) -> list[Line]:
    """The rows of one model's results: variants raw first, each variant's setups in order, labelled."""
    lines = []
    for variant in variant_order(r.variant for r in results):
        keys = sorted({r.setup_key for r in results if r.variant == variant}, key=setup_order)
        labels = setup_labels(keys)
        lines += [Line(results[0].base, results[0].revision, variant, k, labels[k]) for k in keys]
    return lines


class _Index:
    """Results by row (:class:`Line`) and task; the task groups present; each model's rows and raw references."""

    def __init__(self, results: Sequence[Result]) -> None:
        self.results = sorted(results, key=lambda r: (r.base, r.revision, r.variant, r.setup_key, r.task))
        self.by_key = {(r.base, r.revision, r.variant, r.setup_key, r.task): r for r in results}
        self.models = sorted({(r.base, r.revision) for r in results})
        self.lines = {m: _model_lines([r for r in self.results if (r.base, r.revision) == m]) for m in self.models}
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

    def get(self, line: Line, task: str | None) -> Result | None:
        return self.by_key.get((line.base, line.rev, line.variant, line.setup, task or ""))

    def score(self, line: Line, task: str) -> float | None:
        """The main score × 100, or None when missing."""
        r = self.get(line, task)
        return None if r is None or r.main_score is None else r.main_score * 100

    def mean(self, line: Line | None, tasks: Sequence[str]) -> float | None:
        """The unweighted mean of ``tasks``, or None when any is missing (never a mean of the present ones)."""
        values = [None if line is None else self.score(line, t) for t in tasks]
        return None if any(v is None for v in values) else math.fsum(values) / len(values)  # type: ignore[arg-type]

    def refs(self, values: Sequence[float | None], lines: Sequence[Line]) -> list[float | None]:
        """Each row's raw reference value among ``values`` (one per row of ``lines``); None for raw rows."""
        at = {line: i for i, line in enumerate(lines)}
        return [None if (ref := self.raw.get(line)) is None or ref not in at else values[at[ref]] for line in lines]

    def unchanged(self, line: Line) -> bool:
        """Every fit of the row zeroed no dimension (clip that found no outlier): its vectors are raw's."""
        fits = [f for r in self.results if (r.base, r.revision, r.variant, r.setup_key) == line[:4]
                for f in r.fits or [{}]]
        return bool(fits) and all(isinstance(f.get("learned"), dict) and f["learned"].get("dims_") == []
                                  for f in fits)


def _cells(values: Sequence[float | None], refs: Sequence[float | None], ranked: bool, percent: bool = True
           ) -> list[Cell]:
    """One column: percents rounded as shown; delta = shown value − shown reference; best = max (ties: all)."""
    places = PERCENT_DECIMALS if percent else 6
    shown, refs = ([None if v is None else round(v, places) if percent else v for v in vs] for vs in (values, refs))
    top = max((v for v in shown if v is not None), default=None) if ranked else None
    return [Cell(v, None if v is None or ref is None else round(v - ref, places) + 0.0, top is not None and v == top)
            for v, ref in zip(shown, refs, strict=True)]


def _rows(columns: Sequence[Sequence[Cell]], keys: Sequence[tuple[Line, str]]) -> tuple[Row, ...]:
    return tuple(Row(line.base, line.rev, line.variant, tuple(col[i] for col in columns), tag, line.shown)
                 for i, (line, tag) in enumerate(keys))


def _missing_note(ix: _Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[str]:
    parts = []
    for line in lines:
        gone = [ix.label[t] for t in tasks if ix.score(line, t) is None]
        if gone:
            parts.append(f"{line.label} on " + (f"all {len(tasks)} tasks" if len(gone) == len(tasks) > 1
                                                else ", ".join(gone)))
    return [f"Missing (–): {'; '.join(parts)}: no result file, or a non-finite score."] if parts else []


def _setup_notes(ix: _Index, lines: Sequence[Line]) -> list[str]:
    """What a [setup] label means, and which rows have no raw row to be compared with; [] when no row needs it."""
    notes = []
    if any(line.shown for line in lines):
        notes.append("A variant run in more than one setup has a row per setup, labelled [what differs among its "
                     "setups] (mteb experiment kwargs), never averaged with another; rows that differ only in seed "
                     "are replicates, shown apart. Differences are from the raw row of the same pooling, layer and "
                     "data.")
    alone = [line.label for line in lines if line.variant != "raw" and ix.raw[line] is None
             and any(other.variant == "raw" for other in ix.lines[line.base, line.rev])]
    if alone:
        notes.append(f"No raw row of the same setup for {', '.join(alone)}: no difference shown.")
    return notes


def _ranked_table(ix: _Index, group: Group, tasks: tuple[str, ...], lines: Sequence[Line]) -> Table:
    columns = [Column(t, ix.label[t]) for t in tasks]
    grid = [[ix.score(line, t) for line in lines] for t in tasks]
    notes = [f"Main score × 100 ({group.metric}), two decimals; (+d) / (−d) = difference from raw, computed from the "
             "rounded values; bold = best in its column (ties: all bold)."]
    if group.mean:
        columns.append(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"))
        grid.append([ix.mean(line, tasks) for line in lines])
        notes.append(f"{columns[-1].label} = unweighted mean of {', '.join(ix.label[t] for t in tasks)}; a variant "
                     "missing any of them gets – (never a mean of the present cells).")
    has_raw = any(line.variant == "raw" for line in lines)
    notes += ([] if has_raw else ["No raw variant: no differences shown."]) + _setup_notes(ix, lines)
    notes += _missing_note(ix, lines, tasks)
    picked = [r for line in lines for t in tasks if (r := ix.get(line, t))]
    return Table(f"{group.title}: main score × 100 ({group.metric})", ("variant",), tuple(columns),
                 _rows([_cells(col, ix.refs(col, lines), True) for col in grid], [(line, "") for line in lines]),
                 tuple(notes), provenance(picked))


def _diagnostic_table(ix: _Index, group: Group, task: str, lines: Sequence[Line]) -> Table:
    label = ix.label[task]
    found = [r for line in lines if (r := ix.get(line, task))]
    metrics = [m for m in ISOTROPY_METRICS if any(m[0] in r.scores for r in found)] or [("main_score", "main score")]
    whitened = [line for line in lines if (r := ix.get(line, task)) and r.method.startswith("whiten")]
    columns = []
    for key, _ in metrics:
        values = [_finite(getattr(ix.get(line, task), "scores", {}).get(key)) for line in lines]
        cells = _cells(values, ix.refs(values, lines), False, False)
        if key in BASIS_DEPENDENT:
            cells = [Cell(withheld=True) if line in whitened else c for line, c in zip(lines, cells, strict=True)]
        columns.append(cells)
    notes = [f"Diagnostics of the vectors on {label}, as fractions; (+d) / (−d) = difference from raw. Not ranked "
             "and never averaged: more isotropy is not better by itself. I(W): Mu & Viswanath 2018 (1 = isotropic); "
             "IsoScore: Rudman et al. 2022; avg. cosine: mean cosine of all pairs."]
    if whitened and any(key in BASIS_DEPENDENT for key, _ in metrics):
        names = ", ".join(dict.fromkeys(line.variant for line in whitened))
        notes.append(f"I(W) of whitened vectors ({names}) is not shown (–, not a missing result): "
                     "I(W) takes its directions from the eigenvectors of WᵀW; after whitening those eigenvalues are "
                     "(nearly) equal, any basis qualifies and I(W) moves with rounding noise (a rerun of the same fit "
                     "can move it by more than 0.5). For whitened rows read IsoScore.")
    notes += _setup_notes(ix, lines) + _missing_note(ix, lines, [task])
    return Table(f"{group.title}: {label}", ("variant",),
                 tuple(Column(f"{task}/{key}", name, "diagnostic", "fraction") for key, name in metrics),
                 _rows(columns, [(line, "") for line in lines]), tuple(notes), provenance(found))


def _finite(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _compared(ix: _Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[tuple[Line, str]]:
    """One model's rows in the comparison: its best row(s) by the mean of ``tasks`` (ties: all), after the raw
    row(s) they are compared with (every raw row when no row has the mean); tags as in :func:`_comparison`."""
    means = {line: round(m, PERCENT_DECIMALS) for line in lines if (m := ix.mean(line, tasks)) is not None}
    best = [line for line, m in means.items() if m == max(means.values())]
    raws = [line for line in lines if line.variant == "raw"]
    shown = [r for r in raws if r in best or any(ix.raw[b] == r for b in best)] or raws
    return ([(r, BEST if r in best else "") for r in shown]
            + [(line, UNCHANGED if ix.unchanged(line) else BEST) for line in best if line.variant != "raw"])


def _comparison(ix: _Index) -> Table | None:
    """Each model's raw and best row(s) by the first group mean, across every ranked column.

    A row that ties only because it changed nothing (clip that zeroed no dimension) is tagged
    ``= raw (no dimension zeroed)``, not best.
    """
    ranked = [(g, ts) for g, ts in ix.groups if g.ranked]
    crit = next(((g, ts) for g, ts in ranked if g.mean), None)
    if crit is None:
        return None
    keys = [key for base, rev in ix.models for key in _compared(ix, ix.lines[base, rev], crit[1])]
    columns, cells = [], []
    for group, tasks in ranked:
        for col, picked in ([(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"), tasks)]
                            if group.mean else [(Column(t, ix.label[t]), (t,)) for t in tasks]):
            columns.append(col)
            cells.append(_cells([ix.mean(line, picked) for line, _ in keys],
                                [ix.mean(ix.raw[line], picked) if ix.raw[line] else None for line, _ in keys], True))
    label = mean_label(crit[0], len(crit[1]))
    notes = [f"best = the variant with the highest {label}, among the variants with a result on every one of its "
             "tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it."]
    unchanged = sorted({line.label for line, tag in keys if tag == UNCHANGED})
    if unchanged:
        notes.append(f"{', '.join(unchanged)} {UNCHANGED}: tied for best only because every one of its fits zeroed "
                     "no dimension, so its vectors are raw's; not counted as best.")
    notes.append("Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the "
                 "model's raw; bold = best in the column over all rows; – = missing, never averaged.")
    notes += _setup_notes(ix, [line for line, _ in keys]) + _seed_notes(ix, [line for line, _ in keys], crit[1])
    return Table(f"best variant of each model by {label}", ("model", "revision", "variant"), tuple(columns),
                 _rows(cells, keys), tuple(notes), provenance([r for r in ix.results if ix.group[r.task].ranked]))


def _seed_notes(ix: _Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[str]:
    """Where a best row is one seed of several runs that differ only in seed: the best of replicates overstates
    the setup, so the note gives the others' means."""
    notes = []
    for line in lines:
        siblings = [o for o in ix.lines[line.base, line.rev] if o.variant == line.variant]
        others = [o for o in siblings if o.setup in replicates(line.setup, [o.setup for o in siblings])]
        if others and line.variant != "raw":
            rest = ", ".join(f"{o.label} {'–' if (m := ix.mean(o, tasks)) is None else f'{m:.2f}'}" for o in others)
            notes.append(f"{line.label} is the best of {len(others) + 1} runs that differ only in seed ({rest}); the "
                         "best of replicates overstates its setup: read them together.")
    return notes
