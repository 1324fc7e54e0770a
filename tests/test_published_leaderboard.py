"""The published leaderboards are what the reporter renders from the committed result files, byte for byte:
iso-bench v3's board (``leaderboards/``, from ``leaderboards/v3``), v2's and v1's, kept beside it
(``leaderboards/v2``, whose units files are at tag iso-bench-v2, and ``leaderboards/v1``)."""

from __future__ import annotations

from pathlib import Path

from iso_bench.report import write_computed
from iso_bench.report.plots import write_plots
from iso_bench.report.tables import render_markdown
from tests.conftest import LEADERBOARDS, V1_BOARD, V2_BOARD


def test_the_published_board_renders_again_byte_for_byte_and_opens_with_its_verdict(published_computed,
                                                                                      tmp_path: Path) -> None:
    """Every file `iso-bench leaderboard leaderboards/v3 -o leaderboards/leaderboard.md` writes (the board, its
    plots, the table per budget and its pictures) is the committed one, and no committed one is left out."""
    committed = LEADERBOARDS / "leaderboard.md"
    assert committed.is_file(), "leaderboards/leaderboard.md is missing"
    written = write_computed(published_computed, tmp_path / "leaderboard.md")
    assert sorted(p.name for p in written) == sorted(p.name for p in LEADERBOARDS.glob("leaderboard*.*")
                                                     if p.suffix in (".md", ".png"))
    for path in written:
        assert path.read_bytes() == (LEADERBOARDS / path.name).read_bytes(), path.name
    text = committed.read_text(encoding="utf-8")
    assert "iso-bench v3" in text.split("\n## ", 1)[0]
    assert text.split("\n## ")[1].startswith("Verdict\n\n**Fitted on test texts**\n\n| encoder ")  # the answer first
    assert "truncate-256" in (LEADERBOARDS / "leaderboard-budget.md").read_text(encoding="utf-8")


def test_the_v2_board_renders_again_byte_for_byte_from_its_results_at_their_tag(v2_board, tmp_path: Path) -> None:
    """v2's board, kept under leaderboards/v2 beside its result files, is what its results (units files
    included, at tag iso-bench-v2) render to; its per-budget table was never published."""
    plots = write_plots(v2_board, tmp_path, "leaderboard")  # the same stem: the links come out the same
    text = render_markdown(v2_board, plots)
    assert text == (V2_BOARD / "leaderboard.md").read_text(encoding="utf-8")
    assert sorted(plots.values()) == sorted(p.name for p in V2_BOARD.glob("leaderboard-*.png"))
    assert "Benchmark: iso-bench v2," in text
    assert not list((V2_BOARD / "results").rglob("*.npz"))  # in the working tree: its result files alone


ENCODERS = ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2",
            "local/static-all-MiniLM-L6-v2")


def _score(section, task: str, label: str) -> float:
    """The main score of the row labelled ``label`` in the column of ``task`` of a model's section."""
    for table in section.tables:
        keys = [c.key for c in table.columns]
        if task in keys:
            [row] = [r for r in table.rows if r.label == label]
            return row.cells[keys.index(task)].value
    raise AssertionError(f"{section.title}: no column {task}")


SETTINGS = ("test", "held-out")
"""The fit settings every encoder's fitted rows are in: all six parts of the regeneration (v2/README.md)."""


def _whiten(setting: str = "test") -> str:
    """whiten's row label on a board whose models are in both settings."""
    return f"whiten [fitted on {setting} texts]"


def test_the_published_board_answers_for_its_encoders_task_types_and_settings(published_board) -> None:
    """Every encoder on the board has Banking77Classification and SciFact columns and its fitted rows in both
    settings; the static encoder's whitened vectors beat its raw ones on STSBenchmark, the
    contrastive encoders' do not; the verdict names each encoder."""
    sections = {s.title: s for s in published_board.sections}
    assert set(ENCODERS) <= set(sections), sorted(sections)
    for model in ENCODERS:
        section = sections[model]
        keys = {c.key for t in section.tables for c in t.columns}
        assert {"STSBenchmark", "Banking77Classification", "SciFact", "WiC", "WSD-ALL"} <= keys, model
        labels = {r.label for t in section.tables for r in t.rows}
        fitted = {label for label in labels if label.split(" [")[0] == "whiten"}
        assert "raw" in labels and fitted == {_whiten(s) for s in SETTINGS}, (model, fitted)
    static = sections[ENCODERS[2]]
    assert _score(static, "STSBenchmark", _whiten()) > _score(static, "STSBenchmark", "raw")
    for model in ENCODERS[:2]:
        assert _score(sections[model], "STSBenchmark", _whiten()) < _score(sections[model], "STSBenchmark", "raw")
    verdict = (LEADERBOARDS / "leaderboard.md").read_text(encoding="utf-8").split("## Verdict", 1)[1].split("\n## ")[0]
    assert all(f"- {model}, " in verdict for model in ENCODERS)


def test_the_v1_board_renders_again_byte_for_byte_from_its_own_folder(v1_computed, tmp_path: Path) -> None:
    out = tmp_path / "leaderboard.md"
    written = write_computed(v1_computed, out)  # the files of write_leaderboard(V1_BOARD, out)
    assert out.read_bytes() == (V1_BOARD / "leaderboard.md").read_bytes()
    # the published plots again, and beside them the table per budget (whiten-256 is a 256-d vector: two sizes)
    assert [p.name for p in written[1:] if "-budget" not in p.name] == \
        sorted(p.name for p in V1_BOARD.glob("leaderboard-*.png"))
    assert [p.name for p in written if p.suffix == ".md"] == ["leaderboard.md", "leaderboard-budget.md"]
    assert "whiten-256" in (tmp_path / "leaderboard-budget.md").read_text(encoding="utf-8")
    assert "Benchmark: iso-bench v1," in out.read_text(encoding="utf-8")


def test_committed_plots_are_linked_and_present() -> None:
    for folder in (LEADERBOARDS, V2_BOARD, V1_BOARD):
        text = (folder / "leaderboard.md").read_text(encoding="utf-8")
        links = [line[line.index("](") + 2 : -1] for line in text.splitlines() if line.startswith("![")]
        assert links, f"{folder}: the leaderboard links no plot"
        for link in links:
            assert (folder / link).is_file(), link


def test_the_published_scatter_plots_keep_every_point_and_no_text_overlaps(published_board) -> None:
    """Each model's IsoScore-vs-STS plot: every row of its data is a point where the data put it (coloured by its
    method, hollow where fitted on held-out texts), and no two texts of the figure overlap (measured by
    matplotlib's renderer), nor leaves the figure."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.text import Text

    from iso_bench.report.plots import _draw, _pyplot, plot_data

    plt = _pyplot()
    plots = [p for p in map(plot_data, published_board.sections) if p is not None]
    assert len(plots) == 3
    for plot in plots:
        fig = _draw(plt, plot, None)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        dots = [c for c in ax.collections if isinstance(c, PathCollection)]  # not the error bars
        drawn = sorted(tuple(map(float, xy)) for c in dots for xy in c.get_offsets())
        assert drawn == sorted((x, y) for _, points in plot.series for _, x, y in points)
        hollow = sum(len(c.get_offsets()) for c in dots if not np.asarray(c.get_facecolor()).size)
        assert hollow == sum("held-out" in label for _, points in plot.series for label, _, _ in points) > 0
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        hidden = {id(t) for t in ax.get_xticklabels() if not x0 <= t.get_position()[0] <= x1}
        hidden |= {id(t) for t in ax.get_yticklabels() if not y0 <= t.get_position()[1] <= y1}  # ticks not drawn
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
                 if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
        assert len(boxes) > 20  # the axes' and legends' texts
        page = fig.bbox
        for k, (text, box) in enumerate(boxes):
            assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, text
            clash = [other for other, b in boxes[k + 1:] if box.overlaps(b) and box.intersection(box, b).width > 0.5
                     and box.intersection(box, b).height > 0.5]
            assert not clash, (plot.title, text, clash)
        plt.close(fig)
