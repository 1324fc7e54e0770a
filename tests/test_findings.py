"""The findings that leaderboards/README.md states under "Reading the results" are read from the committed result
files, not trusted: every score and difference its table quotes (5-seed means where the method has seeds, as the
board computes them), and what it says of clip's fits on all-MiniLM-L6-v2. A number changed in the section, or a
result file that says otherwise, fails here."""

from __future__ import annotations

import re

import pytest

from iso_bench.report import read_results
from iso_bench.report.index import Index
from tests.conftest import LEADERBOARDS, PUBLISHED_RESULTS

ROW = re.compile(r"^\| `(?P<model>[^`]+)` \| (?P<task>[^|]+?) \| (?P<variant>[a-z0-9-]+) \| (?P<setting>[a-z -]+) \| "
                 r"(?P<raw>\d+\.\d\d) \| (?P<value>\d+\.\d\d) \| (?P<delta>[+−]\d+\.\d\d) \|$", re.M)
MEAN = "MTEB STS mean"  # the task column of a group's mean: the mean of its seven tasks, as the board's


def section() -> str:
    text = (LEADERBOARDS / "README.md").read_text(encoding="utf-8")
    start = text.index("## Reading the results")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


@pytest.fixture(scope="module")
def index() -> Index:
    return Index(read_results(PUBLISHED_RESULTS), merge=True)  # seeds merged into one row, as on the board


def _value(ix: Index, model: str, variant: str, setting: str | None, task: str) -> float:
    lines = [line for (base, _), ls in ix.lines.items() if base == model for line in ls if line.variant == variant
             and (setting is None or f"fitted on {setting}" in line.shown)]
    assert len(lines) == 1, (model, variant, setting, [line.label for line in lines])
    if task == MEAN:
        tasks = next(ts for group, ts in ix.groups if group.key == "mteb-sts")
        assert len(tasks) == 7
        value = ix.mean(lines[0], tasks)
    else:
        value = ix.score(lines[0], task)
    assert value is not None, (model, variant, setting, task)
    return round(value, 2)


def test_every_score_the_findings_quote_is_the_result_files(index) -> None:
    rows = list(ROW.finditer(section()))
    assert len(rows) >= 12, "the findings' table is missing or no longer parses"
    for row in rows:
        model, task, variant, setting = row["model"], row["task"].strip(), row["variant"], row["setting"]
        raw = _value(index, model, "raw", None, task)
        value = _value(index, model, variant, setting, task)
        delta = f"{round(value - raw, 2):+.2f}".replace("-", "−")
        assert (row["raw"], row["value"], row["delta"]) == (f"{raw:.2f}", f"{value:.2f}", delta), row[0]
    seeded = [row for row in rows if row["variant"] in ("cluster-pca", "flow")]
    assert seeded and all(len(line.seeds) == 5 for row in seeded for line in index.lines[next(
        m for m in index.models if m[0] == row["model"])] if line.variant == row["variant"])


def test_what_the_findings_say_of_clip_on_minilm_is_its_fit_records(index) -> None:
    said = re.search(r"on (\d+) of its (\d+) results [^;]*? no dimension [^;]*; the exception is (\S+) fitted on "
                     r"held-out texts, where it zeroes dimension (\d+)\.", " ".join(section().split()))
    assert said is not None, "the sentence on clip and all-MiniLM-L6-v2 no longer parses"
    clip = [r for r in index.results if r.base == "sentence-transformers/all-MiniLM-L6-v2" and r.variant == "clip"]
    zeroed = {(r.task, r.setup.get("fit_corpus")): sorted({d for f in r.fits for d in f["learned"]["dims_"]})
              for r in clip}
    assert (int(said[1]), int(said[2])) == (sum(not dims for dims in zeroed.values()), len(clip))
    assert {key: dims for key, dims in zeroed.items() if dims} == {(said[3], "held-out"): [int(said[4])]}
