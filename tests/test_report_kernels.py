"""A table whose rows were made with different kernel classes (the fourth fault drill: native variants beside an
avx2 raw in one folder) says so under the table, naming each row's class; the rows stay, ranked as before. A table
of one class, or of results that record none, says nothing."""

from __future__ import annotations

from pathlib import Path

from iso_bench.report import build_leaderboard, read_results, render_markdown
from tests.report_helpers import set_record, write_result

NATIVE = "cpu-native-avx512-amd-25-17"


def _extraction(kernel_class: str) -> dict:
    return {"pooling": "mean", "layer": -1, "normalize": True, "max_length": 256, "kernel_class": kernel_class}


def test_rows_of_different_kernel_classes_are_annotated_not_excluded(tmp_path: Path) -> None:
    for variant, score, klass in (("raw", 0.70, "cpu-avx2"), ("whiten", 0.74, NATIVE), ("center", 0.71, NATIVE)):
        set_record(write_result(tmp_path, "org/m", variant, "STS12", score), extraction=_extraction(klass))
    board = build_leaderboard(read_results(tmp_path), ci=False)
    table = board.sections[0].tables[0]
    assert [r.variant for r in table.rows] == ["raw", "center", "whiten"]  # every row kept
    [note] = [n for n in table.notes if n.startswith("Rows made with different kernels")]
    assert note.startswith(f"Rows made with different kernels (raw: cpu-avx2; center: {NATIVE}; whiten: {NATIVE}): ")
    assert note in render_markdown(board)


def test_one_class_or_none_recorded_says_nothing(tmp_path: Path) -> None:
    for variant, score in (("raw", 0.70), ("whiten", 0.74)):
        set_record(write_result(tmp_path / "one", "org/m", variant, "STS12", score),
                   extraction=_extraction("cpu-avx2"))
        write_result(tmp_path / "none", "org/m", variant, "STS12", score)
    for folder in ("one", "none"):
        table = build_leaderboard(read_results(tmp_path / folder), ci=False).sections[0].tables[0]
        assert not any("different kernels" in n for n in table.notes)
