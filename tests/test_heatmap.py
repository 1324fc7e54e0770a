"""The verdict's heatmap (one per fit setting: methods x (encoder, judged unit), coloured by the difference from
raw, marked where significant) on the planted board of tests/test_verdict.py, in the markdown board (PNG) and the
web page (inline SVG)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from iso_bench.report import build_leaderboard, read_results
from iso_bench.report.heatmap import CMAP, KEY, LIMIT, draw_heatmap, heatmaps
from iso_bench.report.html import render_html
from iso_bench.report.plots import _pyplot, svg_plots, write_plots
from iso_bench.report.tables import render_markdown
from tests.test_verdict import BASE, plant, sharp_mean


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    return build_leaderboard(read_results(plant(tmp_path_factory.mktemp("heatmap"))))


def _table(board, group: str):
    return next(t for s in board.sections for t in s.tables if t.title.startswith(group))


def test_the_heatmap_holds_each_methods_difference_and_test_from_the_tables(board) -> None:
    """Planted: sharp wins the STS mean, blurred loses it, clip's vectors are raw's there; WiC (no mean) is a
    column of its own where nothing is significant."""
    [hm] = heatmaps(board)
    assert hm.setting == "fitted on test texts" and hm.methods == ("blurred", "clip", "sharp")
    assert hm.columns == ((BASE, "MTEB STS"), (BASE, "WiC"))
    sts, wic = _table(board, "MTEB"), _table(board, "word")
    for i, method in enumerate(hm.methods):
        for j, cell in enumerate(next(r for r in t.rows if r.variant == method).cells[-1] for t in (sts, wic)):
            got = hm.cells[i][j]
            assert (got.delta, got.significant, got.same) == (cell.delta, cell.significant, cell.unchanged)
    sharp, clip, blurred = hm.cells[2][0], hm.cells[1][0], hm.cells[0][0]
    assert sharp.delta == sharp_mean(board) > 0 and sharp.text == f"{sharp.delta:+.1f}*"
    assert blurred.delta < 0 and blurred.text.startswith("−") and blurred.text.endswith("*")
    assert clip.same and clip.text == "=" and not any(c.significant for c in (row[1] for row in hm.cells))


def test_the_heatmaps_cells_have_the_colour_of_their_difference(board) -> None:
    """Each cell's colour, read from the drawn pixels beside its text, is the colour map's at its difference
    (clipped at ±LIMIT), or the grey of a cell without one (clip: raw's vectors)."""
    import matplotlib

    plt = _pyplot()
    [hm] = heatmaps(board)
    fig = draw_heatmap(plt, hm)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(float) / 255
    ax = fig.axes[0]
    cmap = matplotlib.colormaps[CMAP]
    height = pixels.shape[0]
    for i, row in enumerate(hm.cells):
        for j, cell in enumerate(row):
            x, y = ax.transData.transform((j - 0.38, i - 0.38))  # near the cell's corner, away from its text
            got = pixels[int(round(height - y)), int(round(x))]
            want = (np.full(3, 0xEE / 255) if cell.same else
                    np.array(cmap((np.clip(cell.delta, -LIMIT, LIMIT) + LIMIT) / (2 * LIMIT))[:3]))
            assert np.abs(got - want).max() < 0.02, (hm.methods[i], hm.columns[j], got, want)
    plt.close(fig)


def test_the_markdown_shows_the_heatmap_png_under_the_matrix(board, tmp_path: Path) -> None:
    plots = write_plots(board, tmp_path, "leaderboard")
    assert plots[f"{KEY}:fitted on test texts"] == "leaderboard-verdict-fitted-on-test-texts.png"
    png = tmp_path / "leaderboard-verdict-fitted-on-test-texts.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = render_markdown(board, plots)
    verdict = text[text.index("## Verdict"):text.index(f"## {BASE}")]
    image = verdict.index("](leaderboard-verdict-fitted-on-test-texts.png)")
    assert verdict.index("Each cell: ") < image < verdict.index("Each judgement in words")


def test_the_page_shows_the_heatmap_as_inline_svg_one_cell_per_method_and_column(board) -> None:
    [hm] = heatmaps(board)
    page = render_html(board, svg_plots(board))
    figure = re.search(r'<figure class="heatmap"><div class="scroll" tabindex="0">(<svg.*?</svg>)\s*</div>'
                       r"<figcaption>([^<]*)</figcaption></figure>", page, re.S)
    assert figure is not None and page.index('class="matrix"') < figure.start() < page.index('class="board"')
    svg, caption = figure.groups()
    assert "<?xml" not in svg and not re.search(r'<svg[^>]*\swidth=', svg)
    width = float(re.search(r'viewBox="0 0 ([0-9.]+) ', svg)[1])  # shown no narrower: it scrolls in its box
    assert f'<svg style="min-width:{width:.0f}px" ' in svg
    mesh = svg[svg.index('<g id="QuadMesh_1"'):]
    mesh = mesh[:mesh.index("</g>")]
    assert mesh.count("<path") == len(hm.methods) * len(hm.columns) == 6
    assert caption.startswith("Fitted on test texts: each method&#39;s difference from raw")
    assert "else each task in a column of its own" in caption


def test_a_result_marked_modified_is_never_drawn_as_a_difference(board) -> None:
    """A cell marked † (edited after its run: no paired test) is left empty in the heatmap, as in the matrix,
    however large its difference."""
    from dataclasses import replace

    from iso_bench.report.cells import Leaderboard

    sts = _table(board, "MTEB")
    rows = tuple(replace(r, cells=(*r.cells[:-1], replace(r.cells[-1], mark="modified")))
                 if r.variant == "sharp" else r for r in sts.rows)
    section = next(s for s in board.sections if sts in s.tables)
    edited = Leaderboard((replace(section, tables=tuple(replace(t, rows=rows) if t is sts else t
                                                         for t in section.tables)),))
    [hm] = heatmaps(edited)
    sharp = hm.cells[hm.methods.index("sharp")][hm.columns.index((BASE, "MTEB STS"))]
    assert sharp.delta is None and sharp.text == "–"
    [before] = heatmaps(board)
    assert before.cells[before.methods.index("sharp")][0].delta is not None  # the same cell, unmarked, is drawn


def _planted(n_models: int, n_methods: int, name: str = "org/model", units: tuple[str, ...] = ("MTEB STS", "WiC")
             ) -> Any:
    """A heatmap of ``n_models`` encoders (``name`` with a number after the first) on ``units``, and ``n_methods``
    methods with differences from −12 to +12, every third significant."""
    from iso_bench.report.heatmap import HeatCell, Heatmap

    models = [name if k == 0 else f"{name}-{k}" for k in range(n_models)]
    columns = tuple((m, unit) for m in models for unit in units)
    methods = tuple(f"method-{i}" for i in range(n_methods))
    cells = tuple(tuple(HeatCell(round(-12 + 24 * (i * len(columns) + j) / max(1, n_methods * len(columns) - 1), 2),
                                 (i + j) % 3 == 0) for j in range(len(columns))) for i in range(n_methods))
    return Heatmap("fitted on test texts", methods, columns, cells)


@pytest.mark.parametrize(("n_models", "n_methods", "name", "units"), [
    (1, 2, "sentence-transformers/all-MiniLM-L6-v2", ("MTEB STS",)), (1, 3, "org/model", ("MTEB STS", "WiC")),
    (3, 3, "sentence-transformers/all-MiniLM-L6-v2", ("MTEB STS", "WiC")),
    (1, 3, "org/" + "a-long-name-" * 9 + "1234", ("MTEB STS", "WiC")), (1, 3, "org/" + "x" * 100, ("MTEB STS",)),
    (2, 20, "sentence-transformers/all-MiniLM-L6-v2", ("MTEB STS", "WiC"))])
def test_the_heatmap_renders_whole_and_no_text_overlaps(n_models: int, n_methods: int, name: str,
                                                         units: tuple[str, ...]) -> None:
    """One model, three, a 100-character model name, 20 methods: every text of the figure (title, encoder names,
    method and unit labels, cell numbers, colour bar) lies inside the figure and none overlaps another, as
    matplotlib's renderer measures them; drawing and saving it warns of nothing."""
    import io
    import warnings

    from matplotlib.text import Text

    assert name == "org/model" or len(name) > 30
    plt = _pyplot()
    hm = _planted(n_models, n_methods, name, units)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied" and the like fail the test
        fig = draw_heatmap(plt, hm)
        fig.savefig(io.BytesIO(), format="png")
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    texts = [text for text, _ in boxes]
    short = name.rsplit("/", 1)[-1]
    assert [t.replace("\n", "") for t in texts if t.replace("\n", "").startswith(short)] == [
        short if k == 0 else f"{short}-{k}" for k in range(n_models)]  # every encoder's name, whole
    assert {m for m in hm.methods} <= set(texts) and "points (* = significant)" in texts
    assert "Fitted on test texts: difference from raw" in texts
    page = fig.bbox
    for k, (text, box) in enumerate(boxes):
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, text
        clash = [other for other, b in boxes[k + 1:] if box.overlaps(b) and box.intersection(box, b).width > 0.5
                 and box.intersection(box, b).height > 0.5]
        assert not clash, (text, clash)
    plt.close(fig)
