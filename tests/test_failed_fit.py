"""A variant whose fit fails (whiten fitted on a 3-line file, the fourth fault drill) is recorded in the results
folder beside the result it lacks (``STS12.failed``): the leaderboard built later shows its row with – and the
reason, while mteb's ResultCache and ``iso-bench submission`` read result JSON only and never take it for a
result. Real all-MiniLM-L6-v2 on 40 pairs of STS12."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iso_bench.results.benchmark import NAME, definition_sha256
from tests.conftest import MINILM, small_mirror

pytestmark = pytest.mark.slow


def test_a_failed_fit_is_recorded_and_shown_with_its_reason(tmp_path: Path) -> None:
    import mteb

    from iso_bench.grid.runner import RunConfig, run
    from iso_bench.report import write_leaderboard
    from iso_bench.results.submission import write_submission

    mirror = small_mirror(tmp_path / "mirror", ["sts12-sts"], 40)
    corpus = tmp_path / "three.txt"
    corpus.write_text("a cat\nthe dog\na bank\n", encoding="utf-8")
    results = tmp_path / "results"
    summary = run(RunConfig(methods=["raw", "whiten"], tasks=["STS12"], results_dir=results, data_dir=mirror,
                            cache_dir=tmp_path / "cache", fit_corpus=str(corpus), progress=False, resamples=50))
    assert summary.scores[f"{MINILM}+raw"]["STS12"] is not None and summary.scores[f"{MINILM}+whiten"]["STS12"] is None
    [failed] = results.rglob("STS12.failed")
    assert any(part.endswith("+whiten") for part in failed.parts)
    assert not (failed.with_suffix(".json")).exists()
    record = json.loads(failed.read_text(encoding="utf-8"))
    assert record["task"] == "STS12" and record["model"] == f"{MINILM}+whiten"
    assert "too few" in record["reason"] and str(tmp_path) not in failed.read_text()  # no path of the machine
    assert "./three.txt" in record["reason"]
    # the benchmark its result would have recorded: the failure counts under this run's definition
    assert record["benchmark"] == {"name": NAME, "definition_sha256": definition_sha256(), "conforms": False,
                                   "differs": ["fit corpus", "resamples"]}
    board = write_leaderboard(results)
    row = next(line for line in board.splitlines() if line.startswith("| whiten"))
    assert "–" in row and "benchmark=" not in board and "none recorded" not in board
    assert "on STS12: its evaluation failed (method 'whiten': 3 fit vectors are too few" in board
    loaded = mteb.ResultCache(results).load_results(include_remote=False)
    assert sorted(m.model_name for m in loaded.model_results) == [f"{MINILM}+raw"]  # never taken for a result
    made = write_submission(results, tmp_path / "submission")
    assert made.files and not any(p.suffix == ".failed" for p in (tmp_path / "submission").rglob("*"))
