"""The marks of leaderboard cells whose results cannot be vouched for: ``†`` (modified) for a result whose
scores, record or identity no longer match the digest written with them, or whose units file no longer
matches its recorded SHA-256, shown only with ``accept_modified``; ``°`` (unverified) for a result without a
digest (early iso-bench files, other models' files); ``‡`` (older) for a result of iso-bench 0.1, whose
digest covers its scores only. Each is explained by a legend note under the table that shows it (:func:`mark_notes`).

>>> worst("", "unverified", "modified"), worst("older", "unverified", ""), worst("older", ""), worst()
('modified', 'unverified', 'older', '')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from iso_bench.results.result_files import MODIFIED, OLDER, UNVERIFIED

if TYPE_CHECKING:
    from iso_bench.report.cells import Cell
    from iso_bench.report.results import Result

MARKS = {MODIFIED: "†", UNVERIFIED: "°", OLDER: "‡"}  # shown after a cell computed from such a result
UNITS_CHANGED, SCORE_CHANGED = "units", "score"  # why a result's units check failed: its units file's bytes, or a
# main score its (unchanged) units do not give
GRAVITY = (MODIFIED, UNVERIFIED, OLDER)  # the gravest first


def worst(*marks: str) -> str:
    """The gravest of ``marks``: "modified", else "unverified", else "older", else "" (verified, or nothing
    to mark)."""
    return next((m for m in GRAVITY if m in marks), "")


def mark_notes(columns: Sequence[Sequence[Cell]], results: Sequence[Result]) -> list[str]:
    """The legend of the marks shown in a table (:data:`MARKS`); [] when it shows none."""
    shown = {c.mark for col in columns for c in col}
    notes = []
    files = ", ".join(sorted({r.file for r in results if r.check == MODIFIED}))
    if MODIFIED in shown and files:
        notes.append(f"{MARKS[MODIFIED]} = modified: computed from a result file whose scores, model name, setup or "
                     "provenance no longer match the digest written with them (iso_bench.result_sha256), so it was "
                     f"changed after its run; shown because of --accept-modified ({files}).")
    units = ", ".join(sorted({r.file for r in results if r.units_check == MODIFIED and r.units_why != SCORE_CHANGED}))
    scored = ", ".join(sorted({r.file for r in results if r.units_check == MODIFIED and r.units_why == SCORE_CHANGED}))
    if MODIFIED in shown and units:
        notes.append(f"{MARKS[MODIFIED]} = modified: computed from a result whose units file no longer matches the "
                     "sha256 recorded for it (iso_bench.results.instances.sha256), so the units were changed after "
                     "its run; "
                     f"shown because of --accept-modified, without interval or test ({units}).")
    if MODIFIED in shown and scored:
        notes.append(f"{MARKS[MODIFIED]} = modified: computed from a result whose main score is not the one its "
                     "per-instance units give (its units file unchanged), so its score was changed after its run; "
                     f"shown because of --accept-modified, without interval or test ({scored}).")
    if UNVERIFIED in shown:
        notes.append(f"{MARKS[UNVERIFIED]} = unverified: computed from a result file without a digest (written by "
                     "an early iso-bench version, or not by an iso-bench variant), so a change after its run could "
                     "not be detected.")
    if OLDER in shown:
        notes.append(f"{MARKS[OLDER]} = older: computed from a result file of iso-bench 0.1, whose digest "
                     "(iso_bench.scores_sha256) covers its scores only; its scores are as written, but a change of "
                     "its model name, setup or provenance after its run could not be detected.")
    never = f" A cell marked {MARKS[MODIFIED]} is never bold, and its row never best." if MODIFIED in shown else ""
    return notes + ([f"A cell is marked when any result it is computed from is, the raw result of its difference "
                     f"included.{never}"] if notes else [])
