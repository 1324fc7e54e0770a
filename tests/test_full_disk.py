"""A full disk loses no completed work and says what happened in one line.

- The cache's disk full, the results' disk free: every result of the run is written, with the same scores as
  a run with room; the cache's trouble is one warning naming the path.
- The results' disk full: the run stops with one ``iso-bench: error:`` line naming the path (no traceback),
  and its summary names exactly the results that exist on disk and those that do not.

Each runs ``python -m iso_bench run`` (all-MiniLM-L6-v2, two 40-pair STS mirrors, two variants) on a small tmpfs
where this machine lets the test mount one, else with ``ISO_BENCH_FULL_DISK`` (:mod:`iso_bench.faults`), which
makes every whole-file write under a folder fail with ENOSPC."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import MINILM, small_mirror

PAIRS = 40
METHODS = ["raw", "whiten-32"]
TASKS = {"STS12": "sts12-sts", "STS13": "sts13-sts"}
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_mirror(tmp_path_factory.mktemp("mirror"), TASKS.values(), PAIRS)


def _mount(folder: Path, size: str) -> bool:
    """A tmpfs of ``size`` at ``folder``; False where this machine does not let the test mount one."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.fixture(params=["tmpfs", "injected"])
def full(request: pytest.FixtureRequest, tmp_path: Path):
    """``full(folder, size)``: the env that makes ``folder``'s disk full (a tmpfs of ``size`` already filled,
    or the injected ENOSPC); mounts are undone at the end."""
    mounted: list[Path] = []

    def make(folder: Path, size: str = "64k", after: int = 0) -> dict[str, str]:
        if request.param == "injected":
            return {"ISO_BENCH_FULL_DISK": str(folder), "ISO_BENCH_FULL_DISK_AFTER": str(after)}
        if not _mount(folder, size):
            pytest.skip("cannot mount a tmpfs here; the injected case covers it")
        mounted.append(folder)
        return {}

    yield make
    for folder in mounted:
        subprocess.run(["umount", str(folder)], check=False)


def _run(mirror: Path, results: Path, cache: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ISO_BENCH_THREADS": "1",
           "HF_DATASETS_CACHE": str(mirror.parent / "datasets-cache"), **env}
    argv = [sys.executable, "-m", "iso_bench", "run", "--model", MINILM, "--methods", *METHODS, "--tasks", *TASKS,
            "--data-dir", str(mirror), "--results", str(results), "--cache-dir", str(cache), "--no-progress"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


def _scores(results: Path) -> dict[tuple[str, str], float]:
    found = {}
    for path in (results / "results").rglob("*.json"):
        if path.name != "model_meta.json":
            data = json.loads(path.read_text(encoding="utf-8"))
            variant = path.relative_to(results / "results").parts[0].rpartition("+")[2]
            found[variant, data["task_name"]] = data["scores"]["test"][0]["main_score"]
    return found


@pytest.fixture(scope="module")
def reference(mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], float]:
    out = tmp_path_factory.mktemp("reference")
    done = _run(mirror, out / "results", out / "cache", {})
    assert done.returncode == 0, done.stderr[-3000:]
    return _scores(out / "results")


def test_a_full_cache_disk_loses_no_result(mirror: Path, reference: dict, full, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = full(cache, "16k")  # room for the namespace's meta.json, not for a shard of vectors
    done = _run(mirror, tmp_path / "results", cache, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert _scores(tmp_path / "results") == reference  # every result, the same numbers
    warnings = [line for line in done.stderr.splitlines() if "cannot write the raw vectors cache" in line]
    assert len(warnings) == 1 and str(cache) in warnings[0] and "--cache-dir" in warnings[0]


def test_a_full_results_disk_stops_in_one_line_naming_what_exists(mirror: Path, full, tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = full(results, "40k", after=5)  # room for a few of the run's files, not for all
    done = _run(mirror, results, tmp_path / "cache", env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("iso-bench: error:")]
    assert len(errors) == 1 and f"cannot write results to {results}" in errors[0]
    assert "--results" in errors[0]
    on_disk = {(variant, task) for variant, task in _scores(results)}
    said_missing = {(line.split(" on ")[0].rpartition("+")[2], line.split(" on ")[1])
                    for line in done.stderr.splitlines() if line.startswith("  not written: ")}
    everything = {(m, t) for m in METHODS for t in TASKS}
    assert said_missing == everything - on_disk and on_disk < everything
    assert f"stopped: {len(on_disk)} results of this run are on disk, {len(said_missing)} are not" in done.stderr


@pytest.mark.parametrize("after", [1, 2])  # the disk fills after a result's units: at its model_meta.json, its JSON
def test_units_are_never_left_without_their_result(mirror: Path, tmp_path: Path, after: int) -> None:
    results = tmp_path / "results"
    env = {"ISO_BENCH_FULL_DISK": str(results), "ISO_BENCH_FULL_DISK_AFTER": str(after)}
    done = _run(mirror, results, tmp_path / "cache", env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    units = sorted(results.rglob("*.instances.npz"))
    assert [p for p in units if not p.with_name(p.name.replace(".instances.npz", ".json")).is_file()] == []
    assert _scores(results) == {}  # nothing was written whole, and nothing is left of it


def test_a_read_only_results_folder_holding_every_result_is_read(mirror: Path, tmp_path: Path) -> None:
    """Every result present on a read-only disk: the rerun reports them (rc 0, nothing written); a run that lacks
    one is refused in one line before the model loads."""
    results = tmp_path / "results"
    if os.geteuid() == 0 and not _mount(results, "8m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        assert _run(mirror, results, tmp_path / "cache", {}).returncode == 0
        written = _scores(results)
        if os.geteuid() == 0:
            subprocess.run(["mount", "-o", "remount,ro", str(results)], check=True)
        else:
            for folder in [results, *(p for p in results.rglob("*") if p.is_dir())]:
                folder.chmod(0o555)
        done = _run(mirror, results, tmp_path / "cache", {})
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert _scores(results) == written
        env = {"ISO_BENCH_CACHE": str(tmp_path / "cache")}
        more = subprocess.run([sys.executable, "-m", "iso_bench", "run", "--model", MINILM, "--methods", "center",
                               "--tasks", "STS12", "--data-dir", str(mirror), "--results", str(results),
                               "--no-progress"], env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=600)
        assert more.returncode == 2 and more.stderr.strip().splitlines()[-1].startswith(
            f"iso-bench: error: --results {results}: cannot write there ("), more.stderr
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(results)], check=False)
        else:
            for folder in [results, *(p for p in results.rglob("*") if p.is_dir())]:
                folder.chmod(0o755)


def test_a_run_that_fails_before_writing_leaves_no_results_folder(tmp_path: Path, capsys) -> None:
    from iso_bench.cli import main

    results = tmp_path / "new" / "results"
    assert main(["run", "--results", str(results), "--fit-corpus", str(tmp_path / "nowhere.txt"),
                 "--tasks", "STS12", "--no-progress"]) == 2
    assert "iso-bench: error: fit corpus file" in capsys.readouterr().err
    assert not results.exists()


def test_an_os_error_is_one_line_naming_the_file(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import errno

    from iso_bench import cli

    def full(args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/cache/x.npz")

    monkeypatch.setattr(cli, "cmd_list", full)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iso-bench: error: /data/cache/x.npz: No space left on device;") and err.count("\n") == 1


def test_a_name_too_long_for_the_file_system_is_said_so_not_a_full_disk(tmp_path: Path, capsys) -> None:
    """ENAMETOOLONG is its own error: the results' message and the command's line name the cause (a name over the
    file system's limit) and its remedy, never "free space there"."""
    import errno

    from iso_bench.results.result_files import ResultsNotWritten

    long = tmp_path / ("m" * 300) / "STS12.json"
    try:
        long.parent.mkdir()
    except OSError as exc:
        assert exc.errno == errno.ENAMETOOLONG  # the file system's own answer, as a run meets it
        error = exc
    else:
        pytest.skip("this file system takes 300-byte names")
    message = str(ResultsNotWritten(long, error))
    assert "longer than the file system allows" in message and "free space" not in message
    assert "give the model a shorter name" in message

    from iso_bench.cli import main

    assert main(["export", f"{MINILM}+center", "--fit-corpus", "task:STS12", "-o", str(long.parent)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"iso-bench: error: {long.parent}: ") and "a name longer than the file system allows" in line
    assert "free space" not in line and "Traceback" not in line
