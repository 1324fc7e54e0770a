"""Aggregation: results into the table model of a leaderboard (plain data; :mod:`.tables` and :mod:`.plots`
render it, so the same results always give the same bytes).

A task's group and column label come from its card (:func:`iso_bench.kinds.cards.find_card`); a task without a
card (any other MTEB task) goes to the group of its mteb task type. Ranked groups get a column per task and,
where the group names one, a mean that is missing (–) when any of its tasks is missing, never a mean of the
rest; diagnostics (isotropy) get a table per task, never ranked or averaged.

A row is a variant in one setup (:mod:`.setups`, :mod:`.index`): a variant run with two fit corpora, poolings
or seeds has two rows, labelled by what differs (``whiten [fitted on held-out texts]``), each with its own means; a
variant with one setup is labelled by its name alone. Differences are taken from the raw row of the same setup.

With ``ci`` (the default) every score cell also gets its 95% interval and every difference from raw its paired
test, corrected per table (:mod:`.uncertainty`), and runs that differ only in seed become one row: their mean
± standard deviation (``flow [seeds 0-2]``). Without it the tables are those of results without units.

A cell computed from a result whose scores no longer match their digest is marked †, one from a result
without a digest ° (:mod:`.marks`), each explained by a note under its table.

>>> from iso_bench.report import read_results, render_markdown
>>> board = build_leaderboard(read_results("results"))          # doctest: +SKIP
>>> [t.title for t in board.sections[0].tables]                # doctest: +SKIP
['MTEB STS: main score × 100 (cosine Spearman)', 'isotropy diagnostics: Isotropy-STSB']
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from iso_bench.kinds.cards import Group
from iso_bench.report.cells import COMPARISON, PERCENT_DECIMALS, SAME, Cell, Column, Leaderboard, Row, Section, Table  # noqa: F401 - named here too
from iso_bench.report.index import (
    NO_BENCHMARK,
    Index,
    Line,
    model_titles,
    place,
    recorded_benchmark,
    variant_order,
)
from iso_bench.report.marks import mark_notes, worst
from iso_bench.report.provenance import provenance
from iso_bench.report.results import LeaderboardError, Result
from iso_bench.report.setups import replicates
from iso_bench.report.sizes import FULL, family
from iso_bench.report.uncertainty import Bootstrap, annotate, spread_cells
from iso_bench.report.units import UnitsStore
from iso_bench.results.result_files import MODIFIED

ISOTROPY_METRICS: tuple[tuple[str, str], ...] = tuple(
    (f"{level}_{key}", f"{level} {label}") for level in ("sentence", "token")
    for key, label in (("iw", "I(W)"), ("isoscore", "IsoScore"), ("isoscore_star", "IsoScore*"),
                       ("average_cosine", "avg. cosine"), ("pc1_variance_ratio", "PC1 var. ratio"),
                       ("effective_rank", "eff. rank")))
BASIS_DEPENDENT = ("sentence_iw", "token_iw")  # not determined by whitened vectors: shown as – for them
# the methods whose vectors at each level are whitened (identity covariance): zipfian-whiten whitens token
# vectors, and their mean-pooled sentence vectors are not whitened, so its sentence I(W) is shown
WHITENED = {"sentence_iw": ("whiten", "zca"), "token_iw": ("whiten", "zca", "zipfian-whiten")}
BEST = "best"
UNCHANGED = "= raw (no dimension zeroed)"  # a tie with raw that is no gain: the variant changed nothing


def mean_label(group: Group, n_tasks: int) -> str:
    """The header of a group's mean: ``mean MTEB-STS (7 tasks, cosine Spearman)``."""
    return f"mean {group.mean} ({n_tasks} task{'s' * (n_tasks != 1)}, {group.metric})"


def build_leaderboard(results: Sequence[Result], ci: bool = True, accept_modified: bool = False,
                      boot: Bootstrap | None = None) -> Leaderboard:
    """One section per (base model, revision), then the comparison of the models.

    A group's columns are its tasks over the whole folder, so a mean covers the same tasks in every
    table. The output depends on the results' contents only, never on their order. With ``ci``, the units
    files beside the results are read and checked against their recorded SHA-256 first: a changed one raises
    :class:`LeaderboardError` naming it, unless ``accept_modified`` (its cells are then marked †, without
    interval); without ``ci`` no units file is read, and replicates stay rows of their own. ``boot``: the
    :class:`Bootstrap` to draw with, shared by boards of the same results (a result's draws depend on its units and
    design alone, so each is drawn once); a fresh one by default.
    """
    if not results:
        raise LeaderboardError("no results to aggregate")
    if not ci:
        boot = None
    else:
        boot = boot if boot is not None else Bootstrap(UnitsStore())
        results = boot.store.verify(results, accept_modified)
    ix = Index(results, merge=ci)
    sections, titles = [], model_titles(base for base, _ in ix.models)
    for base, rev in ix.models:
        tables = []
        for group, tasks in ix.groups:
            mine = [t for t in tasks if any(ix.get(line, t) for line in ix.lines[base, rev])]
            if group.ranked:
                tables += [_ranked_table(ix, group, tasks, ix.lines[base, rev], boot)] if mine else []
            else:
                tables += [_diagnostic_table(ix, group, t, ix.lines[base, rev]) for t in mine]
        key = base.replace("/", "__") + (f"-{rev[:12]}" if [b for b, _ in ix.models].count(base) > 1 else "")
        if titles[base] != base:  # a look-alike name: a key of its own too (its plot's file, its anchor)
            key += "-" + titles[base].rsplit(" ", 2)[-2].lower()
        sections.append(Section(titles[base], f"revision {rev}", tuple(tables), key))
    comparison = _comparison(ix, boot)
    if comparison is not None:
        sections.append(Section("Models compared", "", (comparison,), COMPARISON))
    return Leaderboard(tuple(sections), len(results), ci, benchmark_counts(results))


def benchmark_counts(results: Sequence[Result]) -> tuple[tuple[str, int], ...]:
    """How many results record each benchmark (``iso-bench v1, definition <12 hex>``; results of iso-bench 0.1
    record none: :func:`~iso_bench.report.index.recorded_benchmark`), sorted by label."""
    counts: dict[str, int] = {}
    for r in results:
        rec = recorded_benchmark(r)
        label = NO_BENCHMARK if rec is None else f"{rec[0]}, definition {rec[1][:12]}"
        counts[label] = counts.get(label, 0) + 1
    return tuple(sorted(counts.items()))


def _cells(values: Sequence[float | None], refs: Sequence[float | None], ranked: bool, percent: bool = True,
           marks: Sequence[tuple[str, str]] = (), eligible: Sequence[bool] = ()) -> list[Cell]:
    """One column: percents rounded as shown; delta = shown value − shown reference; best = max (ties: all) over
    the ``eligible`` rows (all by default: :meth:`Index.ranked`); mark = the row's own, or its reference's where a
    difference is shown (``marks``: :meth:`Index.marks`)."""
    places = PERCENT_DECIMALS if percent else 6
    shown, refs = ([None if v is None else round(v, places) if percent else v for v in vs] for vs in (values, refs))
    marks = list(marks) or [("", "")] * len(shown)
    eligible = [ok and own != MODIFIED for ok, (own, _) in  # a modified result is never best
                zip(list(eligible) or [True] * len(shown), marks, strict=True)]
    candidates = [v for v, ok in zip(shown, eligible, strict=True) if v is not None and ok]
    top = max(candidates, default=None) if ranked else None
    cells = []
    for v, ref, (own, of_ref), ok in zip(shown, refs, marks, eligible, strict=True):
        delta = None if v is None or ref is None else round(v - ref, places) + 0.0
        mark = "" if v is None else worst(own, of_ref if delta is not None else "")
        cells.append(Cell(v, delta, ok and top is not None and v == top, mark=mark))
    return cells


def _rows(columns: Sequence[Sequence[Cell]], keys: Sequence[tuple[Line, str]],
          families: Sequence[str] | None = None) -> tuple[Row, ...]:
    families = families or [FULL] * len(keys)
    return tuple(Row(line.base, line.rev, line.variant, tuple(col[i] for col in columns), tag, line.shown, group)
                 for i, ((line, tag), group) in enumerate(zip(keys, families, strict=True)))


def families_of(ix: Index, lines: Sequence[Line]) -> list[str]:
    """Each row's family of tests (:func:`iso_bench.report.sizes.family`), raw at another size looked for among the
    rows compared with the same raw row, of the same benchmark definition."""
    def key(line: Line) -> tuple[Line | None, object]:
        return ix.raw.get(line), dict(line.setup).get("benchmark")

    present: dict[tuple[Line | None, object], set[str]] = {}
    for line in lines:
        present.setdefault(key(line), set()).add(line.variant)
    return [family(line.variant, present[key(line)]) for line in lines]


def _missing_note(ix: Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[str]:
    parts, seeds, failed = [], False, []
    for line in lines:
        why = {t: r.record["failed"] for t in tasks for r in ix.found(line, t) if r.record.get("failed")}
        failed += [f"{line.label} on {ix.label[t]}: its evaluation failed ({reason})" for t, reason in why.items()]
        gone = [ix.label[t] for t in tasks if ix.score(line, t) is None and t not in why]
        if gone:
            seeds = seeds or bool(line.seeds)
            parts.append(f"{line.label} on " + (f"all {len(tasks)} tasks" if len(gone) == len(tasks) > 1
                                                else ", ".join(gone)))
    why = "no result file, or a non-finite score" + (" (of a [seeds …] row: in any of its seeds)" if seeds else "")
    return ([f"Missing (–): {'; '.join(parts)}: {why}."] if parts else []) + [f"– {f}." for f in failed]


def _setup_notes(ix: Index, lines: Sequence[Line]) -> list[str]:
    """What a [setup] label means, and which rows have no raw row to be compared with; [] when no row needs it."""
    notes = []
    if any(line.shown for line in lines):
        seeds = (" (except runs that differ only in seed: one row [seeds …])" if ix.merge else
                 "; rows that differ only in seed are replicates, shown apart")
        notes.append("A variant run in more than one setup has a row per setup, labelled [what differs among its "
                     f"setups] (mteb experiment kwargs), never averaged with another{seeds}. Differences are from "
                     "the raw row of the same pooling and layer.")
    alone = [line.label for line in lines if line.variant != "raw" and ix.raw[line] is None
             and any(other.variant == "raw" for other in ix.lines[line.base, line.rev])]
    if alone:
        notes.append(f"No raw row of the same setup for {', '.join(alone)}: no difference shown.")
    return notes


def _benchmark_note(ix: Index, lines: Sequence[Line]) -> list[str]:
    """What a [benchmark=…] label means, where a row of another benchmark definition is among ``lines``."""
    others = sorted({line.label for line in lines if not ix.ranked(line)})
    if not others:
        return []
    return [f"{', '.join(others)}: results of another benchmark definition than this board's reference "
            f"({ix.reference}; other tasks, protocol or method defaults, or none recorded), labelled "
            "[benchmark=…]: shown, never bold and never best, not ranked with the other rows."]


def _kernel_note(ix: Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[str]:
    """Where the rows of a table were made with different kernel classes (``cpu-avx2`` beside a ``cpu-native-...``
    row: other float rounding), a note naming each row's class: shown and compared, not excluded, but their
    differences mix kernels. Results that record no class are left out of the comparison of classes."""
    classes: dict[str, set[str]] = {}
    for line in lines:
        found = {str(k) for t in tasks for r in ix.found(line, t)
                 if (k := (r.record.get("extraction") or {}).get("kernel_class"))}
        if found:
            classes[line.label] = found
    if len(set().union(*classes.values(), set())) < 2:
        return []
    rows = "; ".join(f"{label}: {', '.join(sorted(found))}" for label, found in classes.items())
    return [f"Rows made with different kernels ({rows}): each class rounds floats its own way, so a difference "
            "between rows of different classes holds that rounding too (iso-bench run --kernels, docs/"
            "reproducibility.md)."]


def _same_as_raw(ix: Index, columns: Sequence[Sequence[Cell]], lines: Sequence[Line],
                 col_tasks: Sequence[Sequence[str]]) -> tuple[list[list[Cell]], list[str]]:
    """The cells whose row's vectors are raw's on the column's tasks (:meth:`Index.unchanged`) flagged
    ``unchanged`` (shown as ``= raw``, never best), and the note saying so; [] when there is none."""
    out, seen = [], False
    for cells, tasks in zip(columns, col_tasks, strict=True):
        col = []
        for cell, line in zip(cells, lines, strict=True):
            same = cell.value is not None and ix.raw.get(line) is not None and ix.unchanged(line, tasks)
            col.append(dataclasses.replace(cell, unchanged=True, best=False) if same else cell)
            seen = seen or same
        out.append(col)
    note = (f"{SAME}: every fit of the row on the column's tasks zeroed no dimension (clip found no outlier), so its "
            "vectors and scores there are raw's: no result of the method, never best.")
    return out, [note] if seen else []


def _ranked_table(ix: Index, group: Group, tasks: tuple[str, ...], lines: Sequence[Line], boot: Bootstrap | None
                  ) -> Table:
    columns = [Column(t, ix.label[t]) for t in tasks]
    grid = [[ix.score(line, t) for line in lines] for t in tasks]
    marks = [ix.marks(lines, [t]) for t in tasks]
    notes = [f"Main score × 100 ({group.metric}), two decimals; (+d) / (−d) = difference from raw, computed from the "
             "rounded values; bold = best in its column (ties: all bold)."]
    if group.mean:
        columns.append(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"))
        grid.append([ix.mean(line, tasks) for line in lines])
        marks.append(ix.marks(lines, tasks))
        notes.append(f"{columns[-1].label} = unweighted mean of {', '.join(ix.label[t] for t in tasks)}; a variant "
                     "missing any of them gets – (never a mean of the present cells).")
    has_raw = any(line.variant == "raw" for line in lines)
    notes += ([] if has_raw else ["No raw variant: no differences shown."]) + _setup_notes(ix, lines)
    notes += _benchmark_note(ix, lines) + _kernel_note(ix, lines, tasks)
    eligible = [ix.ranked(line) for line in lines]
    cells = [_cells(col, ix.refs(col, lines), True, marks=m, eligible=eligible)
             for col, m in zip(grid, marks, strict=True)]
    families = families_of(ix, lines)
    if boot is not None:
        col_tasks = [(t,) for t in tasks] + [tasks] * bool(group.mean)
        cells, more = annotate(boot, ix, cells, lines, col_tasks, [c.label for c in columns],
                               [line.label for line in lines], bool(group.mean), families)
        notes += more
    cells, more = _same_as_raw(ix, cells, lines, [(t,) for t in tasks] + [tasks] * bool(group.mean))
    notes += more + _missing_note(ix, lines, tasks)
    picked = [r for line in lines for t in tasks for r in ix.found(line, t)]
    notes += mark_notes(cells, picked)
    return Table(f"{group.title}: main score × 100 ({group.metric})", ("variant",), tuple(columns),
                 _rows(cells, [(line, "") for line in lines], families), tuple(notes), provenance(picked))


def _diagnostic_table(ix: Index, group: Group, task: str, lines: Sequence[Line]) -> Table:
    label = ix.label[task]
    found = [r for line in lines for r in ix.found(line, task)]
    metrics = [m for m in ISOTROPY_METRICS if any(m[0] in r.scores for r in found)] or [("main_score", "main score")]
    whitened = {key: [line for line in lines if (r := ix.get(line, task)) and r.method.startswith(methods)]
                for key, methods in WHITENED.items()}
    columns = []
    for key, _ in metrics:
        seeds = {line: [_finite(r.scores.get(key)) for r in ix.found(line, task)] for line in lines}
        values = [None if not v or None in v else v[0] if len(v) == 1 else math.fsum(v) / len(v)  # type: ignore[arg-type]
                  for v in seeds.values()]
        cells = spread_cells(_cells(values, ix.refs(values, lines), False, False, ix.marks(lines, [task])),
                             [seeds[line] if line.seeds else [] for line in lines])
        if key in BASIS_DEPENDENT:
            cells = [Cell(withheld=True) if line in whitened[key] else c for line, c in zip(lines, cells, strict=True)]
        columns.append(cells)
    notes = [f"Diagnostics of the vectors on {label}, as fractions; (+d) / (−d) = difference from raw. Not ranked "
             "and never averaged: more isotropy is not better by itself. I(W): Mu & Viswanath 2018 (1 = isotropic); "
             "IsoScore: Rudman et al. 2022; avg. cosine: mean cosine of all pairs."]
    if any(key.endswith(("isoscore_star", "effective_rank")) for key, _ in metrics):
        c0 = ("the covariance of the model's token vectors under the variant's own sentence map, in its sentence "
              "vectors' coordinates and units"
              if any("isoscore_star_c0_tokens_mapped" in r.scores for line in lines for r in ix.found(line, task))
              else "the covariance of the variant's token vectors")  # results made before the map was recorded
        notes.append(f"IsoScore*: Rudman & Eickhoff 2024, its authors' evaluation setting (zeta = 0.75, shrunk towards "
                     f"{c0}; for token vectors it equals IsoScore). "
                     "eff. rank: Roy & Vetterli 2007, of the centred vectors (1 to the dimension; not a fraction).")
    shown = [m for m, _ in metrics]
    withheld = [line for key in BASIS_DEPENDENT if key in shown for line in whitened[key]]
    if withheld:
        token_only = {line for line in withheld if "sentence_iw" in shown and line not in whitened["sentence_iw"]}
        names = ", ".join(dict.fromkeys(line.variant + " (token vectors)" * (line in token_only) for line in withheld))
        notes.append(f"I(W) of whitened vectors ({names}) is not shown (–, not a missing result): "
                     "I(W) takes its directions from the eigenvectors of WᵀW; after whitening those eigenvalues are "
                     "(nearly) equal, any basis qualifies and I(W) moves with rounding noise (a rerun of the same fit "
                     "can move it by more than 0.5). For whitened rows read IsoScore.")
    notes += _setup_notes(ix, lines) + _missing_note(ix, lines, [task]) + mark_notes(columns, found)
    if any(line.seeds and any(col[i].value is not None for col in columns) for i, line in enumerate(lines)):
        notes.append("m ± s = the mean of the seeds of a [seeds …] row ± their standard deviation (ddof=1).")
    return Table(f"{group.title}: {label}", ("variant",),
                 tuple(Column(f"{task}/{key}", name, "diagnostic", "fraction") for key, name in metrics),
                 _rows(columns, [(line, "") for line in lines]), tuple(notes), provenance(found))


def _finite(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _compared(ix: Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[tuple[Line, str]]:
    """One model's rows in the comparison: its best row(s) by the mean of ``tasks`` (ties: all), after the raw
    row(s) they are compared with (every raw row when no row has the mean); tags as in :func:`_comparison`."""
    means = {line: round(m, PERCENT_DECIMALS) for line in lines  # a modified result is never best
             if ix.ranked(line) and (m := ix.mean(line, tasks)) is not None
             and ix.marks([line], tasks)[0][0] != MODIFIED}
    best = [line for line, m in means.items() if m == max(means.values())]
    raws = [line for line in lines if line.variant == "raw"]
    shown = [r for r in raws if r in best or any(ix.raw[b] == r for b in best)] or raws
    return ([(r, BEST if r in best else "") for r in shown]
            + [(line, UNCHANGED if ix.unchanged(line) else BEST) for line in best if line.variant != "raw"])


def _comparison(ix: Index, boot: Bootstrap | None) -> Table | None:
    """Each model's raw and best row(s) by the first group mean, across every ranked column.

    A row that ties only because it changed nothing (clip that zeroed no dimension) is tagged
    ``= raw (no dimension zeroed)``, not best.
    """
    ranked = [(g, ts) for g, ts in ix.groups if g.ranked]
    crit = next(((g, ts) for g, ts in ranked if g.mean), None)
    if crit is None:
        return None
    keys = [key for base, rev in ix.models for key in _compared(ix, ix.lines[base, rev], crit[1])]
    columns, cells, col_tasks = [], [], []
    for group, tasks in ranked:
        for col, picked in ([(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"), tasks)]
                            if group.mean else [(Column(t, ix.label[t]), (t,)) for t in tasks]):
            columns.append(col)
            col_tasks.append(picked)
            cells.append(_cells([ix.mean(line, picked) for line, _ in keys],
                                [ix.mean(ix.raw[line], picked) if ix.raw[line] else None for line, _ in keys], True,
                                marks=ix.marks([line for line, _ in keys], picked),
                                eligible=[ix.ranked(line) for line, _ in keys]))
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
    notes += _benchmark_note(ix, [line for line, _ in keys])
    if boot is not None:
        lines = [line for line, _ in keys]
        cells, more = annotate(boot, ix, cells, lines, col_tasks, [c.label for c in columns],
                               [f"{line.base} {line.label}" for line in lines], True)
        notes += more
    cells, more = _same_as_raw(ix, cells, [line for line, _ in keys], col_tasks)
    notes += more
    used = [r for r in ix.results if ix.group[r.task].ranked]
    notes += mark_notes(cells, used)
    return Table(f"best variant of each model by {label}", ("model", "revision", "variant"), tuple(columns),
                 _rows(cells, keys), tuple(notes), provenance(used))


def _seed_notes(ix: Index, lines: Sequence[Line], tasks: Sequence[str]) -> list[str]:
    """Where a best row is one seed of several runs that differ only in seed: the best of replicates overstates
    the setup, so the note gives the others' means. (Only without intervals: with them such runs are one row.)"""
    notes = []
    for line in lines:
        siblings = [o for o in ix.lines[line.base, line.rev] if o.variant == line.variant]
        others = [o for o in siblings if o.setup in replicates(line.setup, [o.setup for o in siblings])]
        if others and line.variant != "raw":
            rest = ", ".join(f"{o.label} {'–' if (m := ix.mean(o, tasks)) is None else f'{m:.2f}'}" for o in others)
            notes.append(f"{line.label} is the best of {len(others) + 1} runs that differ only in seed ({rest}); the "
                         "best of replicates overstates its setup: read them together.")
    return notes


__all__ = ["BEST", "Cell", "Column", "Leaderboard", "Line", "PERCENT_DECIMALS", "Row", "Section", "Table",
           "UNCHANGED", "build_leaderboard", "mean_label", "place", "variant_order"]
