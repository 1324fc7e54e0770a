"""What ``iso-bench run`` prints when it ends: the table of main scores per model (each group's mean and its
difference from raw first), what was encoded and fitted, the command that renders the leaderboard next, results
present of other data, the cells or jobs that failed (never averaged), the jobs that ran more than once, or,
when the results disk stopped the run, which results exist. Each returns the command's exit status (1 when
something failed)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from iso_bench.registry import IsoBenchError
from iso_bench.report import build_leaderboard, format_summary, read_results, summary_header
from iso_bench.report.budget import budget_markdown, budgets
from iso_bench.report.matrix import matrix_text, verdict_matrices
from iso_bench.report.verdict import verdict_lines


def print_run(summary: Any) -> int:
    """A single-process run of one model."""
    print(f"\n{summary_header(summary)}")
    print(format_summary(summary))
    stats = summary.encode_stats
    fits, loaded = sum(summary.fits_run.values()), sum(summary.fits_loaded.values())
    print(f"\nraw vectors: {stats.get('computed', 0)} texts encoded, {stats.get('reused', 0)} reused from the cache;"
          f" fits: {fits} run, {loaded} loaded from the fit cache; {summary.seconds:.1f} s; results in "
          f"{summary.results_dir}")
    print(next_command(summary.results_dir))
    print_verdict(summary.results_dir, [summary.model], summary.tasks)
    print_data_notes(summary)
    return print_failed_cells(summary.errors)


def print_verdict(results_dir: Any, models: Sequence[str], tasks: Sequence[str] | None = None,
                  quiet: bool = False) -> None:
    """The verdict on ``models`` from every result of them in the folder on ``tasks`` (all where None): each
    judgement in words, then the matrix per fit setting (:mod:`iso_bench.report.matrix`), and where the variants
    store vectors of several sizes the table per budget (:mod:`iso_bench.report.budget`) that ends the output;
    nothing when the folder holds no readable result of them or no paired test (``quiet``: not even why)."""
    try:
        results = [r for r in read_results(results_dir) if r.base in models and (tasks is None or r.task in tasks)]
        board = build_leaderboard(results) if results else None
    except (IsoBenchError, OSError, ValueError) as exc:  # the verdict is a summary: the results stay as written
        if not quiet:
            print(f"\nno verdict: {exc}", file=sys.stderr)
        return
    lines = verdict_lines(board) if board is not None else []
    if lines:
        print("\nverdict (paired bootstrap tests over this folder's results of the run's models and tasks):")
        print("\n".join(f"  {line}" for line in lines))
        print(f"\n{matrix_text(verdict_matrices(board))}")
    try:
        per_budget = budget_markdown(budgets(results)) if board is not None else ""
    except (IsoBenchError, OSError, ValueError):  # said by the verdict above where it matters
        per_budget = ""
    if per_budget:  # storage stages or cuts among the variants: what each size of vector buys
        print(f"\nper budget (the best variant at each size beside raw at that size):\n{per_budget}")


def next_command(results_dir: Path) -> str:
    """What to run next: the leaderboard of the results folder (``--results``, which holds ``results/``).

    >>> next_command(Path("results/results"))
    'next: iso-bench leaderboard results  (every table with its intervals, paired tests and provenance)'
    """
    folder = results_dir.parent if results_dir.name == "results" else results_dir
    return f"next: iso-bench leaderboard {shlex.quote(str(folder))}  (every table with its intervals, paired tests " \
           "and provenance)"


def print_data_notes(summary: Any) -> None:
    """The results present that were computed from other data than the run read (or that cannot be compared)."""
    for note in summary.data_notes():
        print(f"data: {note}", file=sys.stderr)


def print_stopped(stop: Any) -> None:
    """A run stopped by its results disk: the scores that exist, and every result that is not on disk."""
    print(f"\n{summary_header(stop.summary)}")
    print(format_summary(stop.summary))
    print(f"\nstopped: {len(stop.written)} results of this run are on disk, {len(stop.missing)} are not "
          "(shown as – above):", file=sys.stderr)
    for label, task in stop.missing:
        print(f"  not written: {label} on {task}", file=sys.stderr)


def print_grid(grid: Any) -> int:
    """A grid: a table per model, the jobs run, the warnings of jobs that ran in other processes, reruns, jobs the
    engine lost, failed jobs with their reason and log."""
    results_dir = None
    for summary in grid.models.values():
        results_dir = summary.results_dir
        if summary.scores:
            print(f"\n{summary_header(summary)}")
            print(format_summary(summary))
    print(f"\n{grid.jobs_run} jobs run in {grid.seconds:.1f} s; results in {results_dir}")
    for label, messages in grid.warnings.items():  # logged on a worker, whose log the user does not see
        for message in messages:
            print(f"warning: {label}: {message}", file=sys.stderr)
    if results_dir is not None:
        print(next_command(Path(results_dir)))
        tasks = sorted({task for summary in grid.models.values() for task in summary.tasks})
        print_verdict(results_dir, [s.model for s in grid.models.values() if s.scores], tasks, quiet=True)
    for summary in grid.models.values():
        print_data_notes(summary)
    for label, attempts in grid.rerun.items():
        print(f"rerun: {label} ran {attempts} times (a worker was lost); each result is written once, whole",
              file=sys.stderr)
    for lost in grid.lost:
        print(f"lost: {lost['model']} on {lost['task']}: {lost['reason']}", file=sys.stderr)
    for failed in grid.failed:
        where = f" (log: {failed['log']})" if failed.get("log") else ""
        reason = failed.get("reason") or "; ".join(f"{k}: {v}" for k, v in failed.get("errors", {}).items())
        print(f"failed: {failed['model']} on {failed['task']}: {reason}{where}", file=sys.stderr)
    failed_jobs = {(f["model"], f["task"]) for f in grid.failed}  # named above, with their reason
    cells = {}
    for model, summary in grid.models.items():
        for label, errors in summary.errors.items():
            left = {task: message for task, message in errors.items() if (model, task) not in failed_jobs}
            if left:
                cells[f"{model}: {label}"] = left
    status = print_failed_cells(cells)
    return 1 if grid.failed or grid.lost else status


def print_failed_cells(errors: dict[str, dict[str, Any]]) -> int:
    """The cells that failed (shown as – in the table, never averaged); 1 when there are any."""
    if not errors:
        return 0
    print("\nfailed (shown as – above, never averaged):", file=sys.stderr)
    for variant, by_task in errors.items():
        for task, message in by_task.items():
            print(f"  {variant} on {task}: {message}", file=sys.stderr)
    return 1
