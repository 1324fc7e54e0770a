"""The web leaderboard: one self-contained page with the markdown's tables, sortable and filterable, each
cell's hover holding what the markdown cannot fit; the same bytes for the same results; a real headless
Chromium reads it (Debian's chromium and chromium-driver through Selenium; skipped, saying why, where they are
not installed: CI installs them), on an emulated 390 x 844 phone and a 1400 x 900 screen. The screenshots are
kept in ``$ISO_BENCH_SCREENSHOTS`` (a folder) where it is set, else in the test's own temporary folder."""

from __future__ import annotations

import csv
import io
import os
import time
from pathlib import Path

import pytest

from iso_bench.report import render, write_computed, write_leaderboard
from iso_bench.report.board import build_leaderboard
from iso_bench.report.results import read_results
from iso_bench.report.tables import MINUS
from tests.conftest import LEADERBOARDS, V1_BOARD, V2_BOARD
from tests.report_helpers import sts_units, write_scored

PLANTED = "org/<script>window.pwned = 1</script>"
VARIANTS = {"raw": 1.0, "center": 0.9, "whiten": 1.3}  # noise of each variant's predictions


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A results folder (a model with a planted script for a name, and a plain one; raw, center and whiten on
    two STS tasks, with units for intervals and paired tests) and its page."""
    root = tmp_path_factory.mktemp("html-results")
    for m, base in enumerate([PLANTED, "org/plain"]):
        for t, task in enumerate(["STS12", "STS13"]):
            for v, (variant, noise) in enumerate(VARIANTS.items()):
                units = sts_units(400, noise + 0.1 * m, seed=100 * m + 10 * t + v, gold_seed=t)
                write_scored(root, base, variant, task, units)
    written = write_leaderboard(root, tmp_path_factory.mktemp("site"), "html")
    return root, written[0]


def _csv_rows(root: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(render(build_leaderboard(read_results(root)), "csv"))))


def test_the_page_is_one_self_contained_file_rendered_to_the_same_bytes(site: tuple[Path, Path]) -> None:
    root, page = site
    html = page.read_text(encoding="utf-8")
    assert page.name == "index.html" and html.startswith("<!DOCTYPE html>")
    for external in ("src=", "<link", 'href="http', "url(http", "@import", "<iframe"):
        assert external not in html, external  # no CDN, no file beside it: nothing is fetched
    assert html.count("<svg") >= 2  # the isotropy plot is absent (no diagnostics), the differences are there
    assert render(build_leaderboard(read_results(root)), "html") == html  # rendered again: the same bytes
    assert PLANTED not in html and "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html


def test_the_published_page_is_a_fresh_render_of_the_committed_results(published_computed, tmp_path: Path) -> None:
    committed = LEADERBOARDS / "index.html"
    assert committed.is_file(), "leaderboards/index.html is missing"
    page, budget = write_computed(published_computed, tmp_path / "site", "html")  # the page and its budget page
    assert page.read_bytes() == committed.read_bytes()
    assert budget.read_bytes() == (LEADERBOARDS / "index-budget.html").read_bytes()
    html = page.read_text(encoding="utf-8")
    assert html.index(">Verdict<") < html.index("<table")  # the answer before any table


def test_the_v2_page_is_a_fresh_render_of_its_results_at_their_tag(v2_board) -> None:
    assert render(v2_board, "html") == (V2_BOARD / "index.html").read_text(encoding="utf-8")


def test_the_v1_page_is_a_fresh_render_of_its_results(v1_computed, tmp_path: Path) -> None:
    page, budget = write_computed(v1_computed, tmp_path / "site", "html")  # write_leaderboard(V1_BOARD, ...)'s files
    assert page.read_bytes() == (V1_BOARD / "index.html").read_bytes()
    # beside it, the table per budget (whiten-256 is a 256-d vector: two sizes), the page itself unchanged
    assert budget == tmp_path / "site" / "index-budget.html"
    assert '<td>whiten-256 (untested)</td><td class="num">75.87</td><td>truncate-256</td>' in budget.read_text()


# ---- in a real browser ---------------------------------------------------------------------------------
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module (Selenium, the system's chromedriver: nothing is downloaded)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    if not CHROMIUM.exists() or not DRIVER.exists():
        pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install chromium "
                    "chromium-driver); CI installs them")
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1100"):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    yield driver
    driver.quit()


def _visible_rows(table) -> list[list[str]]:
    return [[c.text for c in row.find_elements("css selector", "th, td")]
            for row in table.find_elements("css selector", "tbody tr") if row.is_displayed()]


def _number(text: str) -> str:
    """The value of a cell's text (its first line: the value; then its difference and its interval)."""
    return text.split()[0].replace(MINUS, "-").rstrip("*†‡°")


def _artifacts(tmp_path: Path) -> Path:
    """Where screenshots are kept: ``$ISO_BENCH_SCREENSHOTS``, else the test's temporary folder."""
    folder = Path(os.environ.get("ISO_BENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_reader_sorts_filters_and_hovers_the_tables_in_a_browser(site, browser, tmp_path: Path) -> None:
    root, page = site
    browser.get(page.as_uri())
    rows = _csv_rows(root)
    # every table has the rows and numbers of the markdown (the CSV holds the same cells)
    model_table = browser.find_element("id", "t1-0")  # the plain model's STS table
    assert model_table.find_element("xpath", "preceding::h2[1]").text == "org/plain"
    shown = {r[0]: r[1:] for r in _visible_rows(model_table)}
    expected = [r for r in rows if r["model"] == "org/plain" and r["table"].startswith("MTEB STS")]
    assert set(shown) == {r["variant"] for r in expected} == set(VARIANTS)
    columns = [th.text.rstrip(" ↕↑↓") for th in model_table.find_elements("css selector", "thead th")][1:]
    for r in expected:
        assert _number(shown[r["variant"]][columns.index(r["column"])]) == r["value"], r
    # a click on a column header orders the rows by it (highest first), a second click lowest first
    header = model_table.find_elements("css selector", "thead th button")[1 + columns.index("STS12")]
    header.click()
    by_sts12 = sorted((r for r in expected if r["column"] == "STS12"), key=lambda r: -float(r["value"]))
    assert [r[0] for r in _visible_rows(model_table)] == [r["variant"] for r in by_sts12]
    header.click()
    assert [r[0] for r in _visible_rows(model_table)] == [r["variant"] for r in reversed(by_sts12)]
    # the method filter keeps one method (and raw, the reference of its differences)
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "method-filter")).select_by_value("whiten")
    assert sorted(r[0] for r in _visible_rows(model_table)) == ["raw", "whiten"]
    Select(browser.find_element("id", "method-filter")).select_by_value("")
    # a cell's hover holds the paired test's p and q, as the CSV gives them
    cell = next(r for r in expected if r["variant"] == "whiten" and r["column"] == "STS12")
    td = model_table.find_elements("css selector", "tbody tr")
    row = next(tr for tr in td if tr.find_element("css selector", "th").text == "whiten")
    title = row.find_elements("css selector", "td")[columns.index("STS12")].get_attribute("title")
    assert f"p = {cell['p_value']}, q = {cell['q_value']}" in title
    assert "n = 400 evaluation units" in title  # the 400 pairs each STS result of the fixture is scored on
    raw = next(tr for tr in td if tr.find_element("css selector", "th").text == "raw")
    mean = next(i for i, c in enumerate(columns) if c.startswith("mean"))
    assert "n = 800 evaluation units over its tasks" in raw.find_elements("css selector", "td")[mean].get_attribute(
        "title")  # raw's mean of the 2 tasks
    # the planted model name is text on the page, and no script of it ran
    assert browser.find_element("css selector", "#s0 > h2").text == PLANTED
    assert browser.execute_script("return window.pwned === undefined")
    shot = _artifacts(tmp_path) / "leaderboard-fixture.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


SCREENS = {"phone": (390, 844, True), "desktop": (1400, 900, False)}  # width, height, mobile (DevTools metrics)
LAYOUT = """
const width = window.innerWidth;
const out = {width: width, document: document.documentElement.scrollWidth, means: [], averaging: 0, svgs: [],
             heatmaps: []};
document.querySelectorAll("table.board").forEach(function (table) {
  const heads = Array.from(table.querySelectorAll("thead th"));
  out.averaging += heads.some(function (th) { return th.textContent.trim().startsWith("mean "); }) ? 1 : 0;
  const mean = table.querySelector("thead th.mean");  // the first mean: the one that ranks the table
  if (mean) { const r = mean.getBoundingClientRect(); out.means.push([table.id, r.left, r.right]); }
});
document.querySelectorAll("figure:not(.heatmap) svg").forEach(function (svg) {
  out.svgs.push(svg.getBoundingClientRect().width); });
document.querySelectorAll("figure.heatmap").forEach(function (figure) {  // [its box's right, the SVG's width, its own]
  const svg = figure.querySelector("svg");
  out.heatmaps.push([figure.querySelector(".scroll").getBoundingClientRect().right, svg.getBoundingClientRect().width,
                     svg.viewBox.baseVal.width]); });
return out;"""
COVERED = """
const th = arguments[0]; th.scrollIntoView({block: "start"});
const r = th.getBoundingClientRect(), hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
return th.contains(hit);"""


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_the_published_page_works_on_a_phone_and_a_wide_screen(browser, screen: str, tmp_path: Path) -> None:
    """No horizontal overflow of the document (a table scrolls in its own box), the verdict matrix in the first
    screen and no wider than it, each table's mean column in
    view without scrolling, plots as wide as the screen at most, no header under the filter bar, a cell's hover
    text on a tap and on focus, no console error; the screenshot kept (see the module's docstring)."""
    width, height, mobile = SCREENS[screen]
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    try:
        browser.get_log("browser")  # what earlier pages logged
        browser.get((LEADERBOARDS / "index.html").as_uri())
        layout = browser.execute_script(LAYOUT)
        for _ in range(40):  # a page of 2,000 results under a loaded machine: measured once it is laid out
            if layout["averaging"] >= 5:
                break
            time.sleep(0.25)
            layout = browser.execute_script(LAYOUT)
        assert layout["width"] == width and layout["document"] <= width, layout
        matrix = browser.execute_script(  # the verdict matrix opens the page: its first rows in the first screen
            "const r = document.querySelector('table.matrix').getBoundingClientRect(); return [r.top, r.right];")
        assert 0 < matrix[0] < height / 2 and matrix[1] <= width, matrix
        assert len(layout["means"]) == layout["averaging"] >= 5, layout  # both models' STS tables, the comparison
        assert all(0 <= left and right <= width for _, left, right in layout["means"]), layout["means"]
        assert layout["svgs"] and all(0 < w <= width for w in layout["svgs"]), layout["svgs"]
        # a heatmap per fit setting, never drawn below its own size (its numbers readable): wider than the screen,
        # it scrolls in its box, which stays within the screen
        assert len(layout["heatmaps"]) == 2 and all(right <= width and drawn >= own - 1
                                                    for right, drawn, own in layout["heatmaps"]), layout["heatmaps"]
        heads = browser.find_elements("css selector", "table.board thead th") + browser.find_elements("css selector",
                                                                                                       "h2, h3")
        assert all(browser.execute_script(COVERED, th) for th in heads[::7])  # nothing over a header in view
        browser.get((LEADERBOARDS / "index.html").as_uri())  # each table at the start of its box again
        cells = browser.find_element("id", "t0-0").find_elements("css selector", "tbody td")
        cells[0].click()  # a tap on the mean of the first row
        info = browser.find_element("id", "cell-info")
        assert info.is_displayed() and info.text.startswith(cells[0].get_attribute("title")[:40])
        browser.execute_script("arguments[0].focus()", cells[2])  # the keyboard
        assert browser.find_element("id", "cell-info-text").text == cells[2].get_attribute("title")
        browser.find_element("id", "cell-info-close").click()
        assert not info.is_displayed()
        browser.execute_script("document.querySelector('figure.heatmap').scrollIntoView()")
        browser.save_screenshot(str(_artifacts(tmp_path) / f"leaderboard-heatmap-{screen}.png"))
        browser.execute_script("document.getElementById('t0-0-title').scrollIntoView()")
        shot = _artifacts(tmp_path) / f"leaderboard-{screen}.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
