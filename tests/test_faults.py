"""Crash drill: a run killed (SIGKILL) at each point where work is half done resumes, on the next run, to
results identical to those of an uninterrupted run, and no half-written file is ever read as a result.

The kill comes from ``ISO_BENCH_FAULT`` (:mod:`iso_bench.faults`). The runs use all-MiniLM-L6-v2 on a small
copy of two STS mirrors (40 pairs each), three variants, one thread."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MINILM, small_mirror

PAIRS = 40
METHODS = ["raw", "center", "abtt-2"]
TASKS = {"STS12": "sts12-sts", "STS13": "sts13-sts"}
VOLATILE = {"evaluation_time", "evaluation_phases", "date", "kg_co2_emissions"}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_mirror(tmp_path_factory.mktemp("mirror"), TASKS.values(), PAIRS)


def _run(mirror: Path, out: Path, fault: str | None = None, term: bool = False) -> subprocess.CompletedProcess[str]:
    # a datasets cache of its own: the shared one may hold the full STS12 under the same name
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ISO_BENCH_THREADS": "1",
           "HF_DATASETS_CACHE": str(mirror.parent / "datasets-cache")}
    env.pop("ISO_BENCH_FAULT", None)
    env.pop("ISO_BENCH_FAULT_SIGNAL", None)
    if fault:
        env["ISO_BENCH_FAULT"] = fault
    if term:
        env["ISO_BENCH_FAULT_SIGNAL"] = "TERM"
    argv = [sys.executable, "-m", "iso_bench", "run", "--model", MINILM, "--methods", *METHODS,
            "--tasks", *TASKS, "--data-dir", str(mirror), "--results", str(out / "results"),
            "--cache-dir", str(out / "cache"), "--no-progress"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


def _results(out: Path) -> dict[str, dict]:
    """Every result file under the results folder, parsed, without its timings and provenance records;
    fails on any file that is not complete JSON."""
    found = {}
    for path in sorted((out / "results").rglob("*.json")):
        rel = path.relative_to(out / "results").as_posix()
        data = json.loads(path.read_text(encoding="utf-8"))  # a partial file would fail here
        if path.name == "model_meta.json":
            continue
        for entries in data["scores"].values():
            for entry in entries:
                entry.pop("iso_bench")
        found[rel] = {k: v for k, v in data.items() if k not in VOLATILE}
    return found


@pytest.fixture(scope="module")
def reference(mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("reference")
    done = _run(mirror, out)
    if done.returncode != 0 and "not available" in done.stderr:
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    assert done.returncode == 0, done.stderr[-3000:]
    results = _results(out)
    assert len(results) == len(METHODS) * len(TASKS)
    return results


@pytest.mark.parametrize("fault", ["encode", "shard-write", "result-write:2", "between-results:3"])
def test_a_killed_run_resumes_to_the_uninterrupted_results(fault: str, mirror: Path, reference: dict,
                                                           tmp_path: Path) -> None:
    killed = _run(mirror, tmp_path, fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    partial = _results(tmp_path)  # every result file present is complete
    assert len(partial) < len(reference)
    for name, result in partial.items():
        assert result == reference[name], name  # what survived the kill is already final
    if fault.startswith(("shard-write", "result-write")):
        assert list(tmp_path.rglob(".*.tmp")), "the kill left the half-written temporary file"
    resumed = _run(mirror, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _results(tmp_path) == reference
    assert not list(tmp_path.rglob(".*.tmp"))  # the next run removed what the killed writer left
    from iso_bench.report import write_leaderboard

    board = write_leaderboard(tmp_path / "results")  # every digest still matches its scores
    assert "°" not in board and "†" not in board  # neither unverified nor modified


def test_sigterm_ends_a_run_like_an_interrupt_and_leaves_no_temporary_file(mirror: Path, reference: dict,
                                                                           tmp_path: Path) -> None:
    """SIGTERM half-way through a result file's write: one line, exit 143, the temporary file removed, the
    finished results kept; the next run completes them to the uninterrupted numbers."""
    ended = _run(mirror, tmp_path, "result-write:2", term=True)
    assert ended.returncode == 143, ended.stderr[-3000:]
    assert "iso-bench: terminated (SIGTERM); finished results and cached vectors are kept" in ended.stderr
    assert "Traceback" not in ended.stderr
    assert not list(tmp_path.rglob(".*.tmp"))
    assert 0 < len(_results(tmp_path)) < len(reference)
    assert _run(mirror, tmp_path).returncode == 0 and _results(tmp_path) == reference
