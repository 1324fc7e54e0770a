"""The marks of leaderboard cells whose results cannot be vouched for: ``†`` (modified) for a result whose
scores no longer match the digest written with them, or whose units file no longer matches its recorded
SHA-256, shown only with ``accept_modified``; ``°`` (unverified) for a result without a digest (older files,
other models' files). Each is explained by a legend note under the table that shows it (:func:`mark_notes`).

>>> worst("", "unverified", "modified"), worst("unverified", ""), worst()
('modified', 'unverified', '')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from iso_bench.result_files import MODIFIED, UNVERIFIED

if TYPE_CHECKING:
    from iso_bench.report.board import Cell
    from iso_bench.report.results import Result

MARKS = {MODIFIED: "†", UNVERIFIED: "°"}  # shown after a cell computed from such a result


def worst(*marks: str) -> str:
    """The gravest of ``marks``: "modified", else "unverified", else "" (verified, or nothing to mark)."""
    return next((m for m in (MODIFIED, UNVERIFIED) if m in marks), "")


def mark_notes(columns: Sequence[Sequence[Cell]], results: Sequence[Result]) -> list[str]:
    """The legend of the marks shown in a table (:data:`MARKS`); [] when it shows none."""
    shown = {c.mark for col in columns for c in col}
    notes = []
    files = ", ".join(sorted({r.file for r in results if r.check == MODIFIED}))
    if MODIFIED in shown and files:
        notes.append(f"{MARKS[MODIFIED]} = modified: computed from a result file whose scores no longer match the "
                     "digest written with them (iso_bench.scores_sha256), so it was changed after its run; shown "
                     f"because of --accept-modified ({files}).")
    units = ", ".join(sorted({r.file for r in results if r.units_check == MODIFIED}))
    if MODIFIED in shown and units:
        notes.append(f"{MARKS[MODIFIED]} = modified: computed from a result whose units file no longer matches the "
                     "sha256 recorded for it (iso_bench.instances.sha256), so the units were changed after its run; "
                     f"shown because of --accept-modified, without interval or test ({units}).")
    if UNVERIFIED in shown:
        notes.append(f"{MARKS[UNVERIFIED]} = unverified: computed from a result file without a digest of its scores "
                     "(written before iso-bench recorded one, or not by an iso-bench variant), so a change after "
                     "its run could not be detected.")
    return notes + (["A cell is marked when any result it is computed from is, the raw result of its difference "
                     "included."] if notes else [])
