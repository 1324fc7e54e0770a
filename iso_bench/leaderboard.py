"""Leaderboard aggregation: read an iso-bench results folder and fill the table model of :mod:`iso_bench.render`.

The folder is mteb's layout, ``RESULTS_DIR/results/<model>/<revision>/<Task>.json``, read with plain
``json`` (no mteb import). A model name is ``<base model>+<method spec>``; the base is the part before the
last ``+``. Tasks fall into groups by name (``GROUPS``: data, not branches); ranked groups get a column per
task and, for STS, a mean that is missing (–) when any of its tasks is missing, never a mean of the rest.

>>> from iso_bench.render import render_markdown
>>> board = build_leaderboard(read_results("results"))          # doctest: +SKIP
>>> print(render_markdown(board))                                # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iso_bench.render import PERCENT_DECIMALS, Cell, Column, Leaderboard, Row, Section, Table, provenance
from iso_bench.suites import MTEB_STS


class LeaderboardError(ValueError):
    """A results folder that cannot be turned into a leaderboard (missing, empty, or a malformed file)."""


@dataclass(frozen=True)
class TaskGroup:
    """A kind of task: which names belong to it, what its main score is, whether it is ranked and averaged."""

    key: str
    title: str
    metric: str  # what the main score is, e.g. "cosine Spearman"
    tasks: tuple[str, ...] = ()  # known members, in display order
    suffix: str = ""  # or any task name ending so
    prefix: str = ""  # or any task name starting so
    mean: str = ""  # set: a column "mean <mean> (N tasks, <metric>)"
    ranked: bool = True  # False: diagnostics, never bold, never averaged

    def matches(self, task: str) -> bool:
        return (task in self.tasks or bool(self.suffix and task.endswith(self.suffix))
                or bool(self.prefix and task.startswith(self.prefix)))


GROUPS: tuple[TaskGroup, ...] = (
    TaskGroup("mteb-sts", "MTEB STS", "cosine Spearman", MTEB_STS, mean="MTEB-STS"),
    TaskGroup("paper-sts", "paper STS (SentEval)", "wmean Spearman", tuple(f"{t}-SentEval" for t in MTEB_STS),
              suffix="-SentEval", mean="paper-STS"),
    TaskGroup("word", "word level", "WiC accuracy, WSD-ALL F1", ("WiC", "WSD-ALL")),
    TaskGroup("isotropy", "isotropy diagnostics", "sentence I(W)", ("Isotropy-STSB",), prefix="Isotropy-",
              ranked=False),
)
OTHER = TaskGroup("other", "other tasks", "main score")
ISOTROPY_METRICS: tuple[tuple[str, str], ...] = tuple(
    (f"{level}_{key}", f"{level} {label}") for level in ("sentence", "token")
    for key, label in (("iw", "I(W)"), ("isoscore", "IsoScore"), ("average_cosine", "avg. cosine"),
                       ("pc1_variance_ratio", "PC1 var. ratio")))


def group_of(task: str) -> TaskGroup:
    """The group of a task, by its name; unknown tasks go to ``OTHER`` (ranked, no mean).

    >>> group_of("STS12").key, group_of("STS12-SentEval").key, group_of("Banking77").key
    ('mteb-sts', 'paper-sts', 'other')
    """
    return next((g for g in GROUPS if g.matches(task)), OTHER)


@dataclass(frozen=True)
class Result:
    """The main entry of one task result file."""

    file: str  # path under the results folder, posix
    base: str  # base model id
    variant: str  # method spec
    revision: str
    task: str
    main_score: float | None  # a fraction; None when the file holds a non-finite score
    scores: Mapping[str, Any]  # every metric of the entry
    record: Mapping[str, Any]  # the iso_bench provenance record ({} when absent)
    mteb_version: str | None = None
    date: str | None = None  # YYYY-MM-DD, UTC
    dataset_revision: str | None = None


def split_model_name(name: str) -> tuple[str, str]:
    """``(base, spec)``: ``split_model_name("org/m+whiten-256") == ("org/m", "whiten-256")``."""
    base, plus, spec = name.rpartition("+")
    return (base, spec) if plus and base and spec else (name, "(as is)")


def read_results(results_dir: str | Path) -> list[Result]:
    """Every task result under ``results_dir/results/`` (or under ``results_dir`` itself), sorted.

    Raises :class:`LeaderboardError` naming the folder or the file when the folder is missing or holds
    no result, or a file is not a task result (bad JSON, no ``task_name``, ``scores`` or ``main_score``).

    >>> sorted({r.task for r in read_results("results")})         # doctest: +SKIP
    ['STS12', 'STSBenchmark']
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise LeaderboardError(f"{root}: no such results folder")
    top = root / "results" if (root / "results").is_dir() else root
    files = sorted(p for p in top.glob("*/*/*.json") if p.name != "model_meta.json")
    if not files:
        raise LeaderboardError(f"{root}: no result files (expected {top}/<model>/<revision>/<task>.json)")
    names: dict[Path, str] = {}
    seen: dict[tuple[str, str, str, str], Result] = {}
    for path in files:
        if path.parent.parent not in names:
            names[path.parent.parent] = _model_name(path.parent.parent)
        r = _parse(path, path.relative_to(top).as_posix(), *split_model_name(names[path.parent.parent]))
        if (r.base, r.revision, r.variant, r.task) in seen:
            first = seen[r.base, r.revision, r.variant, r.task].file
            raise LeaderboardError(f"{path}: a second result for {r.task} of {r.base}+{r.variant} (first: {first})")
        seen[r.base, r.revision, r.variant, r.task] = r
    return [seen[k] for k in sorted(seen)]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LeaderboardError(f"{path}: not a readable JSON file ({exc})") from exc


def _model_name(folder: Path) -> str:
    """The name in ``model_meta.json`` when there is one, else the folder's (mteb writes ``/`` as ``__``)."""
    metas = sorted(folder.glob("*/model_meta.json"))
    if not metas:
        return folder.name.replace("__", "/")
    meta = _read_json(metas[0])
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise LeaderboardError(f'{metas[0]}: malformed model_meta.json (no "name" string)')
    return meta["name"]


def _parse(path: Path, rel: str, base: str, variant: str) -> Result:
    data = _read_json(path)

    def bad(why: str) -> LeaderboardError:
        return LeaderboardError(f"{path}: malformed task result: {why}")

    if not isinstance(data, dict):
        raise bad("not a JSON object")
    task, splits = data.get("task_name"), data.get("scores")
    if not isinstance(task, str) or not task:
        raise bad('no "task_name" string')
    if not isinstance(splits, dict) or not splits:
        raise bad('no "scores" object with a split')
    split = "test" if "test" in splits else sorted(splits)[0]
    entries = splits[split]
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise bad(f'"scores.{split}" is not a non-empty list of objects')
    for e in entries:
        if isinstance(e.get("main_score"), bool) or not isinstance(e.get("main_score"), (int, float)):
            raise bad(f'"main_score" of split {split!r} is not a number: {e.get("main_score")!r}')
    main = math.fsum(e["main_score"] for e in entries) / len(entries)  # subsets: their mean, as mteb
    entry = next((e for e in entries if e.get("hf_subset") == "default"), entries[0])
    record = entry.get("iso_bench") or {}
    if not isinstance(record, dict):
        raise bad('"iso_bench" is not an object')
    version, day, dataset = data.get("mteb_version") or entry.get("mteb_version"), None, data.get("dataset_revision")
    stamp = data.get("date")
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and math.isfinite(stamp):
        day = datetime.fromtimestamp(stamp, tz=timezone.utc).date().isoformat()
    elif isinstance(stamp, str) and len(stamp) >= 10 and stamp[4] == stamp[7] == "-":
        day = stamp[:10]
    return Result(rel, base, variant, path.parent.name, task, main if math.isfinite(main) else None, entry, record,
                  None if version is None else str(version), day, None if dataset is None else str(dataset))


def variant_order(variants: Iterable[str]) -> list[str]:
    """Raw first, then the rest sorted: ``['raw', 'abtt', 'whiten']``."""
    return sorted(set(variants), key=lambda v: (v != "raw", v))


def mean_label(group: TaskGroup, n_tasks: int) -> str:
    """The header of a group's mean: ``mean MTEB-STS (7 tasks, cosine Spearman)``."""
    return f"mean {group.mean} ({n_tasks} task{'s' * (n_tasks != 1)}, {group.metric})"


def build_leaderboard(results: Sequence[Result]) -> Leaderboard:
    """One section per (base model, revision), then the comparison of the models.

    A group's columns are its tasks over the whole folder, so a mean covers the same tasks in every
    table. The output depends on the results' contents only, never on their order.

    >>> board = build_leaderboard(read_results("results"))        # doctest: +SKIP
    >>> [t.title for t in board.sections[0].tables]                # doctest: +SKIP
    ['MTEB STS: main score × 100 (cosine Spearman)', 'isotropy diagnostics: Isotropy-STSB']
    """
    if not results:
        raise LeaderboardError("no results to aggregate")
    ix = _Index(results)
    sections = []
    for base, rev in ix.models:
        tables = []
        for group, tasks in ix.groups:
            mine = [t for t in tasks if any(ix.get(base, rev, v, t) for v in ix.variants[base, rev])]
            if group.ranked:
                tables += [_ranked_table(ix, group, tasks, base, rev)] if mine else []
            else:
                tables += [_diagnostic_table(ix, group, t, base, rev) for t in mine]
        key = base.replace("/", "__") + (f"-{rev[:12]}" if [b for b, _ in ix.models].count(base) > 1 else "")
        sections.append(Section(base, f"revision {rev}", tuple(tables), key))
    comparison = _comparison(ix)
    if comparison is not None:
        sections.append(Section("Models compared", "", (comparison,), "comparison"))
    return Leaderboard(tuple(sections), len(results))


class _Index:
    """Results by (base, revision, variant, task); the task groups present; each model's variants."""

    def __init__(self, results: Sequence[Result]) -> None:
        self.results = sorted(results, key=lambda r: (r.base, r.revision, r.variant, r.task))
        self.by_key = {(r.base, r.revision, r.variant, r.task): r for r in results}
        self.models = sorted({(r.base, r.revision) for r in results})
        self.variants = {m: variant_order(r.variant for r in results if (r.base, r.revision) == m) for m in self.models}
        present = {r.task for r in results}
        self.groups: list[tuple[TaskGroup, tuple[str, ...]]] = []
        for group in (*GROUPS, OTHER):
            mine = {t for t in present if group_of(t) is group}
            if mine:
                self.groups.append((group, (*(t for t in group.tasks if t in mine), *sorted(mine - set(group.tasks)))))

    def get(self, base: str, rev: str, variant: str, task: str | None) -> Result | None:
        return self.by_key.get((base, rev, variant, task or ""))

    def score(self, base: str, rev: str, variant: str, task: str) -> float | None:
        """The main score × 100, or None when missing."""
        r = self.get(base, rev, variant, task)
        return None if r is None or r.main_score is None else r.main_score * 100

    def mean(self, base: str, rev: str, variant: str, tasks: Sequence[str]) -> float | None:
        """The unweighted mean of ``tasks``, or None when any is missing (never a mean of the present ones)."""
        values = [self.score(base, rev, variant, t) for t in tasks]
        return None if any(v is None for v in values) else math.fsum(values) / len(values)  # type: ignore[arg-type]


def _cells(values: Sequence[float | None], refs: Sequence[float | None], ranked: bool, percent: bool = True
           ) -> list[Cell]:
    """One column: percents rounded as shown; delta = shown value − shown reference; best = max (ties: all)."""
    places = PERCENT_DECIMALS if percent else 6
    shown, refs = ([None if v is None else round(v, places) if percent else v for v in vs] for vs in (values, refs))
    top = max((v for v in shown if v is not None), default=None) if ranked else None
    return [Cell(v, None if v is None or ref is None else round(v - ref, places) + 0.0, top is not None and v == top)
            for v, ref in zip(shown, refs, strict=True)]


def _rows(columns: Sequence[Sequence[Cell]], keys: Sequence[tuple[str, str, str, str]]) -> tuple[Row, ...]:
    return tuple(Row(b, r, v, tuple(col[i] for col in columns), tag) for i, (b, r, v, tag) in enumerate(keys))


def _raw_refs(values: Sequence[float | None], variants: Sequence[str]) -> list[float | None]:
    ref = values[variants.index("raw")] if "raw" in variants else None
    return [None if v == "raw" else ref for v in variants]


def _missing_note(ix: _Index, base: str, rev: str, tasks: Sequence[str]) -> list[str]:
    parts = []
    for v in ix.variants[base, rev]:
        gone = [t for t in tasks if ix.score(base, rev, v, t) is None]
        if gone:
            parts.append(f"{v} on " + (f"all {len(tasks)} tasks" if len(gone) == len(tasks) > 1 else ", ".join(gone)))
    return [f"Missing (–): {'; '.join(parts)}: no result file, or a non-finite score."] if parts else []


def _ranked_table(ix: _Index, group: TaskGroup, tasks: tuple[str, ...], base: str, rev: str) -> Table:
    variants = ix.variants[base, rev]
    columns = [Column(t, t) for t in tasks]
    grid = [[ix.score(base, rev, v, t) for v in variants] for t in tasks]
    notes = [f"Main score × 100 ({group.metric}), two decimals; (+d) / (−d) = difference from raw, computed from the "
             "rounded values; bold = best in its column (ties: all bold)."]
    if group.mean:
        columns.append(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"))
        grid.append([ix.mean(base, rev, v, tasks) for v in variants])
        notes.append(f"{columns[-1].label} = unweighted mean of {', '.join(tasks)}; a variant missing any of them "
                     "gets – (never a mean of the present cells).")
    notes += ([] if "raw" in variants else ["No raw variant: no differences shown."])
    notes += _missing_note(ix, base, rev, tasks)
    picked = [r for v in variants for t in tasks if (r := ix.get(base, rev, v, t))]
    return Table(f"{group.title}: main score × 100 ({group.metric})", ("variant",), tuple(columns),
                 _rows([_cells(col, _raw_refs(col, variants), True) for col in grid],
                       [(base, rev, v, "") for v in variants]), tuple(notes), provenance(picked))


def _diagnostic_table(ix: _Index, group: TaskGroup, task: str, base: str, rev: str) -> Table:
    variants = ix.variants[base, rev]
    found = [r for v in variants if (r := ix.get(base, rev, v, task))]
    metrics = [m for m in ISOTROPY_METRICS if any(m[0] in r.scores for r in found)] or [("main_score", "main score")]
    grid = [[_finite(getattr(ix.get(base, rev, v, task), "scores", {}).get(key)) for v in variants]
            for key, _ in metrics]
    notes = [f"Diagnostics of the vectors on {task}, as fractions; (+d) / (−d) = difference from raw. Not ranked and "
             "never averaged: more isotropy is not better by itself. I(W): Mu & Viswanath 2018 (1 = isotropic); "
             "IsoScore: Rudman et al. 2022; avg. cosine: mean cosine of all pairs. I(W) takes its directions from "
             "the eigenvectors of WᵀW; where those eigenvalues are (nearly) equal, as after whitening, any basis "
             "qualifies and I(W) moves with rounding noise: for whiten rows read IsoScore.",
             *_missing_note(ix, base, rev, [task])]
    return Table(f"{group.title}: {task}", ("variant",),
                 tuple(Column(f"{task}/{key}", label, "diagnostic", "fraction") for key, label in metrics),
                 _rows([_cells(col, _raw_refs(col, variants), False, False) for col in grid],
                       [(base, rev, v, "") for v in variants]), tuple(notes), provenance(found))


def _finite(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _comparison(ix: _Index) -> Table | None:
    """Each model's raw and best variant(s) by the first STS mean, across every ranked column."""
    ranked = [(g, ts) for g, ts in ix.groups if g.ranked]
    crit = next(((g, ts) for g, ts in ranked if g.mean), None)
    if crit is None:
        return None
    keys: list[tuple[str, str, str, str]] = []
    for base, rev in ix.models:
        means = {v: round(m, PERCENT_DECIMALS) for v in ix.variants[base, rev]
                 if (m := ix.mean(base, rev, v, crit[1])) is not None}
        best = [v for v, m in means.items() if m == max(means.values())]
        keys += [(base, rev, "raw", "best" if "raw" in best else "")] if "raw" in ix.variants[base, rev] else []
        keys += [(base, rev, v, "best") for v in best if v != "raw"]
    columns, cells = [], []
    for group, tasks in ranked:
        for col, picked in ([(Column(f"mean:{group.key}", mean_label(group, len(tasks)), "mean"), tasks)]
                            if group.mean else [(Column(t, t), (t,)) for t in tasks]):
            values = {k[:3]: ix.mean(*k[:3], picked) for k in keys}
            columns.append(col)
            cells.append(_cells([values[k[:3]] for k in keys],
                                [None if k[2] == "raw" else values.get((*k[:2], "raw")) for k in keys], True))
    label = mean_label(crit[0], len(crit[1]))
    notes = (f"best = the variant with the highest {label}, among the variants with a result on every one of its "
             "tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.",
             "Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the "
             "model's raw; bold = best in the column over all rows; – = missing, never averaged.")
    return Table(f"best variant of each model by {label}", ("model", "revision", "variant"), tuple(columns),
                 _rows(cells, keys), notes, provenance([r for r in ix.results if group_of(r.task).ranked]))


FORMATS = ("markdown", "csv", "latex")


def add_leaderboard_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the arguments of ``iso-bench leaderboard`` to ``parser`` (e.g. a sub-command's) and return it."""
    parser.add_argument("results_dir", metavar="RESULTS_DIR",
                        help="results folder of `iso-bench run` (holds results/<model>/<revision>/<task>.json)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    parser.add_argument("--format", choices=FORMATS, default="markdown", help="output format (default: markdown)")
    parser.add_argument("--no-plot", action="store_true",
                        help="no isotropy-vs-STS plots (plots are written beside -o FILE, for markdown only)")
    return parser


def run_leaderboard(args: argparse.Namespace) -> int:
    """Write the leaderboard of parsed arguments: 0 when written, 2 with a message for bad input."""
    from iso_bench import render

    try:
        board = build_leaderboard(read_results(args.results_dir))
    except LeaderboardError as exc:
        print(f"iso-bench leaderboard: error: {exc}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.write(render.RENDERERS[args.format](board))
        return 0
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    plots = render.write_plots(board, out.parent, out.stem) if args.format == "markdown" and not args.no_plot else {}
    out.write_text(render.render_markdown(board, plots) if plots else render.RENDERERS[args.format](board),
                   encoding="utf-8")
    print(f"wrote {out}" + "".join(f", {out.parent / p}" for p in sorted(plots.values())), file=sys.stderr)
    return 0


def main_leaderboard(argv: list[str] | None = None) -> int:
    """``iso-bench leaderboard RESULTS_DIR [-o FILE.md] [--format markdown|csv|latex] [--no-plot]``.

    >>> main_leaderboard(["results", "-o", "leaderboards/minilm.md"])   # doctest: +SKIP
    0
    """
    parser = argparse.ArgumentParser(prog="iso-bench leaderboard",
                                     description="Tables and plots of the main scores in an iso-bench results folder.")
    return run_leaderboard(add_leaderboard_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main_leaderboard())
