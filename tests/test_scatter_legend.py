"""The isotropy-vs-STS scatter plot of a board with many methods (the bytes axis gives over 40): its methods' legend
takes the columns its entries need, every text stays within the figure and clear of the others, and every method
keeps a colour of its own."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from iso_bench.report.plots import Plot, _draw, _pyplot, method_colours  # noqa: E402
from iso_bench.results.benchmark import METHOD_GROUPS, STORAGE_METHODS  # noqa: E402


def _texts_clear(fig) -> list:
    """The figure's visible texts that leave it or overlap another (matplotlib's own renderer measures them)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer, ax = fig.canvas.get_renderer(), fig.axes[0]
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    hidden = {id(t) for t in ax.get_xticklabels() if not x0 <= t.get_position()[0] <= x1}  # ticks not drawn
    hidden |= {id(t) for t in ax.get_yticklabels() if not y0 <= t.get_position()[1] <= y1}
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
    page, bad = fig.bbox, []
    for k, (text, box) in enumerate(boxes):
        if not (page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1):
            bad.append(("leaves the figure", text))
        bad += [("overlaps", text, other) for other, b in boxes[k + 1:] if box.overlaps(b)
                and box.intersection(box, b).width > 0.5 and box.intersection(box, b).height > 0.5]
    return bad


@pytest.mark.parametrize("methods", [METHOD_GROUPS["default"], (*METHOD_GROUPS["default"], *STORAGE_METHODS)])
def test_every_method_of_the_legend_is_drawn_within_the_figure(methods) -> None:
    points = tuple((m, 0.1 + 0.02 * k, 50.0 + k / 2) for k, m in enumerate(methods))
    plot = Plot("org/m @ r1", "sentence IsoScore", "mean STS score x 100", (("mean MTEB-STS", points),))
    plt = _pyplot()
    fig = _draw(plt, plot, None)
    try:
        legend = fig.axes[0].get_legend() or fig.axes[0].artists[0]
        names = {t.get_text() for artist in (*fig.axes[0].artists, legend) for t in artist.get_texts()}
        assert set(methods) <= names  # every method named, none cut off
        assert _texts_clear(fig) == []
        width = fig.get_size_inches()[0]
        assert width == pytest.approx(9.0) if len(methods) <= 22 else width > 9.0  # the 13 defaults: as v2 drew them
    finally:
        plt.close(fig)
    colours = method_colours(list(methods))
    assert len({tuple(c) if not isinstance(c, str) else c for c in colours.values()}) == len(methods)
