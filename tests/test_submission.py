"""``iso-bench submission``: a small real run (raw, whiten and flow with one seed on STS16 and STSBenchmark,
all-MiniLM-L6-v2, the shared data mirror) turned into a folder in the layout of MTEB's results repository,
checked by that repository's own test suite (../shared/mteb-results-check/run.sh), read back by mteb's
``ResultCache.load_results`` per variant, its digests verified where a reader finds them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.results.submission import SubmissionError, submission_kwargs, write_submission
from tests.conftest import MINILM, SHARED_DATA

CHECK = SHARED_DATA.parent / "mteb-results-check" / "run.sh"
REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
BASE = MINILM.replace("/", "__")
EXPERIMENTS = {"whiten": "fit_corpus_task__post_processing_whiten",
               "flow": "fit_corpus_task__post_processing_flow__seed_0"}
TASKS = ("STS16", "STSBenchmark")
pytestmark = pytest.mark.slow


def _suite(folder: Path) -> tuple[int, dict[str, int], str]:
    """Run the results repository's suite on ``folder``: exit status, pytest's counts, its output."""
    done = subprocess.run(["bash", str(CHECK), str(folder), sys.executable], capture_output=True, text=True,
                          timeout=900)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
    return done.returncode, counts, done.stdout + done.stderr


@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory, vector_cache: Path) -> tuple[Path, Path]:
    """The run's results folder and its submission (a folder of model folders)."""
    from iso_bench.grid.runner import RunConfig, run

    results = tmp_path_factory.mktemp("run")
    summary = run(RunConfig(methods=["raw", "whiten", "flow"], tasks=list(TASKS), results_dir=results,
                            cache_dir=vector_cache, data_dir=SHARED_DATA, progress=False, resamples=50))
    assert all(summary.scores[f"{MINILM}+{m}"][t] is not None for m in ("raw", "whiten", "flow") for t in TASKS)
    out = tmp_path_factory.mktemp("submission") / "out"
    made = write_submission(results, out)
    assert made.files and not made.tasks_left_out and not made.models_left_out
    return results / "results", out



def test_layout_names_each_setup_by_mtebs_serialisation(submitted: tuple[Path, Path]) -> None:
    _, out = submitted
    assert sorted(p.name for p in out.iterdir()) == [BASE]  # no "+method" folder
    revision = out / BASE / REVISION
    assert sorted(p.name for p in (revision / "experiments").iterdir()) == sorted(EXPERIMENTS.values())
    assert sorted(p.name for p in revision.glob("*.json")) == ["STS16.json", "STSBenchmark.json", "model_meta.json"]
    for method, name in EXPERIMENTS.items():
        meta = json.loads((revision / "experiments" / name / "model_meta.json").read_text())
        assert meta["name"] == MINILM and meta["revision"] == REVISION
        assert meta["experiment_kwargs"]["post_processing"] == method
        assert sorted(p.name for p in (revision / "experiments" / name).iterdir()) == sorted(
            ["model_meta.json", *(f"{t}.json" for t in TASKS)])  # no units, no run settings
    base_meta = json.loads((revision / "model_meta.json").read_text())
    assert base_meta["name"] == MINILM and base_meta["experiment_kwargs"] is None


def test_results_repository_suite_passes_on_the_submission_and_fails_on_plus_folders(
        submitted: tuple[Path, Path], tmp_path: Path) -> None:
    if not CHECK.is_file():
        pytest.skip(f"{CHECK} is not here")
    results, out = submitted
    status, counts, output = _suite(out)
    assert status == 0, output[-3000:]
    print(output.strip().splitlines()[-1])  # the suite's summary, for the log (pytest -s)
    assert counts.get("passed", 0) > 10 and "failed" not in counts and "errors" not in counts, output[-2000:]
    plus = tmp_path / "plus"  # one of the run's own folders, as it is (one: the suite's output is cut to 40 lines)
    shutil.copytree(results / f"{BASE}+whiten", plus / f"{BASE}+whiten")
    status, counts, output = _suite(plus)
    assert status != 0 and counts.get("failed", 0) >= 1, output[-2000:]
    assert "FAILED tests/test_model_implementation.py::test_all_models_are_implemented_in_mteb" in output
    assert f"{MINILM}+whiten\n" in output, output[-2000:]  # named as the model that mteb does not implement


def test_load_results_reads_back_exactly_each_variants_results(submitted: tuple[Path, Path], tmp_path: Path) -> None:
    import mteb

    from iso_bench.results.submission import submitted_meta

    results, out = submitted
    shutil.copytree(out, tmp_path / "results")  # a ResultCache reads <cache>/results/<model>/...
    cache = mteb.ResultCache(tmp_path)
    seen = {}
    for method in ("whiten", "flow"):
        registered = mteb.get_model_meta(f"{MINILM}+{method}")  # the name iso-bench registers for running
        assert submitted_meta(registered).experiment_name == EXPERIMENTS[method]
        loaded = cache.load_results(models=[registered], include_remote=False, load_experiments="match_kwargs")
        [model] = loaded.model_results
        assert model.model_name == MINILM and model.experiment_name == EXPERIMENTS[method]
        assert sorted(r.task_name for r in model.task_results) == sorted(TASKS)
        seen[method] = {r.task_name: r.get_score() for r in model.task_results}
        kwargs = {"post_processing": method, "fit_corpus": "task", **({"seed": 0} if method == "flow" else {})}
        plain = mteb.get_model_meta(MINILM, experiment_kwargs=kwargs)  # mteb alone, as a reader without iso-bench
        [same] = cache.load_results(models=[plain], include_remote=False, load_experiments="match_kwargs").model_results
        assert {r.task_name: r.get_score() for r in same.task_results} == seen[method]
        for task in TASKS:
            entry = json.loads((out / BASE / REVISION / "experiments" / EXPERIMENTS[method] / f"{task}.json")
                               .read_text())["scores"]["test"][0]
            assert entry["iso_bench"]["variant"]["method"] == method
    assert seen["whiten"] != seen["flow"]
    other_seed = mteb.get_model_meta(f"{MINILM}+flow", experiment_kwargs={"fit_corpus": "task", "seed": 1})
    assert cache.load_results(models=[other_seed], include_remote=False).model_results == []  # not submitted
    [raw] = cache.load_results(models=[mteb.get_model_meta(f"{MINILM}+raw")], include_remote=False).model_results
    assert raw.model_name == MINILM and raw.experiment_name is None  # raw is the base model's own result
    [own] = cache.load_results(models=[mteb.get_model_meta(MINILM)], include_remote=False,
                               load_experiments="no_experiments").model_results
    assert own.experiment_name is None and sorted(r.task_name for r in own.task_results) == sorted(TASKS)
    assert {r.task_name: r.get_score() for r in raw.task_results} == {r.task_name: r.get_score()
                                                                      for r in own.task_results}
    # the run's own folder answers to the same meta: both places a variant's results can be
    run_cache = tmp_path / "run"
    shutil.copytree(results, run_cache / "results")
    [ran] = mteb.ResultCache(run_cache).load_results(models=[mteb.get_model_meta(f"{MINILM}+whiten")],
                                                     include_remote=False).model_results
    assert ran.model_name == f"{MINILM}+whiten"
    assert {r.task_name: r.get_score() for r in ran.task_results} == seen["whiten"]


def test_digests_verify_where_a_reader_finds_them(submitted: tuple[Path, Path]) -> None:
    from iso_bench.results.result_files import MODIFIED, VERIFIED, check_entry, identity

    _, out = submitted
    for path in sorted(out.rglob("STS16.json")):
        meta = json.loads((path.parent / "model_meta.json").read_text())
        entry = json.loads(path.read_text())["scores"]["test"][0]
        ident = identity(meta["name"], REVISION, meta["experiment_kwargs"] or {}, "STS16")
        assert check_entry(entry, ident) == VERIFIED, path
        assert check_entry(entry, {**ident, "model": f"{MINILM}+raw"}) == MODIFIED


def test_a_changed_score_is_refused(submitted: tuple[Path, Path], tmp_path: Path) -> None:
    results, _ = submitted
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    [path] = (copy / f"{BASE}+whiten").rglob("STS16.json")
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["main_score"] += 0.01
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionError, match="digest does not match"):
        write_submission(copy, tmp_path / "out")


def test_own_tasks_are_left_out_with_a_line(submitted: tuple[Path, Path], tmp_path: Path) -> None:
    results, _ = submitted
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    for path in (copy / f"{BASE}+whiten").rglob("STS16.json"):
        data = json.loads(path.read_text())
        path.with_name("WiC.json").write_text(json.dumps({**data, "task_name": "WiC"}))
    made = write_submission(copy, tmp_path / "out")
    assert made.tasks_left_out == {"WiC"} and not list((tmp_path / "out").rglob("WiC.json"))
    [line] = made.notes()
    assert line.startswith("left out WiC: iso-bench's own tasks")


def test_same_setup_same_name_and_different_setups_different_names() -> None:
    from mteb.models.model_meta import _serialize_experiment_kwargs_to_name as name

    task = {"fit_corpus": "task"}
    assert name(submission_kwargs("whiten-256", {**task, "data": "mirror"})) == name(
        submission_kwargs("whiten-n_components=256", task)) == "fit_corpus_task__post_processing_whiten__whiten." \
        "n_components_256"
    setups = [("whiten", task), ("zca", task), ("whiten", {"fit_corpus": "train"}), ("flow", {**task, "seed": 0}),
              ("flow", {**task, "seed": 1}), ("raw", {"pooling": "cls"}), ("raw", {})]
    names = [name(submission_kwargs(spec, setup)) for spec, setup in setups]
    assert len(set(names)) == len(names) and names[-1] is None


def test_an_occupied_output_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(SubmissionError, match="not an empty folder"):
        write_submission(tmp_path, tmp_path / "out")


def test_the_published_results_are_a_submission_the_repository_accepts(tmp_path: Path) -> None:
    """``iso-bench submission`` on the published results (v3's): every result of an mteb task and an mteb model is
    written (raw as the base model's own, the rest as experiments), and the results repository's suite passes."""
    from tests.conftest import PUBLISHED_RESULTS

    if not CHECK.is_file():
        pytest.skip(f"{CHECK} is not here")
    out = tmp_path / "submission"
    made = write_submission(PUBLISHED_RESULTS, out)
    own = {"WiC", "WSD-ALL", "Isotropy-STSB"}
    assert own <= made.tasks_left_out and "local/static-all-MiniLM-L6-v2" in made.models_left_out
    left_out = {m.replace("/", "__") for m in made.models_left_out}
    results = PUBLISHED_RESULTS / "results"
    expected = [p for p in results.rglob("*.json") if p.name != "model_meta.json" and p.stem not in
                made.tasks_left_out and p.relative_to(results).parts[0].rpartition("+")[0] not in left_out]
    written = [p for p in made.files if p.name != "model_meta.json"]
    assert len(written) == len(expected) > 0
    status, counts, output = _suite(out)
    assert status == 0 and "failed" not in counts and counts.get("passed", 0) > 10, output[-3000:]


def _published_copy(tmp_path: Path, *variants: str) -> Path:
    """The published results of all-MiniLM-L6-v2's ``variants``, copied (folders and digests as published)."""
    from tests.conftest import PUBLISHED_RESULTS

    for variant in variants:
        shutil.copytree(PUBLISHED_RESULTS / "results" / f"{BASE}+{variant}", tmp_path / "results" / f"{BASE}+{variant}")
    return tmp_path / "results"


def test_a_full_disk_leaves_no_submission_and_the_same_command_then_works(tmp_path: Path, capsys,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC at the fourth file (a fault point): one line, nothing under the output's folder (no partial
    submission, no temporary folder); the same command run again writes the whole submission."""
    from iso_bench import faults
    from iso_bench.cli import main

    results = _published_copy(tmp_path, "raw", "whiten")
    disk = tmp_path / "disk"
    disk.mkdir()
    argv = ["submission", str(results), "-o", str(disk / "out")]
    monkeypatch.setattr(faults, "_hits", {})
    with monkeypatch.context() as full:
        full.setenv("ISO_BENCH_FULL_DISK", str(disk))
        full.setenv("ISO_BENCH_FULL_DISK_AFTER", "3")
        assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"iso-bench: error: {disk / 'out'}: No space left on device; free space there or choose another "
                   "place, then run the same command again"]
    assert list(disk.iterdir()) == []
    assert main(argv) == 0
    written = sorted(p.relative_to(disk / "out").as_posix() for p in (disk / "out").rglob("*.json"))
    assert f"{BASE}/{REVISION}/model_meta.json" in written and len(written) > 20
    assert [p.name for p in disk.iterdir()] == ["out"]


def test_an_output_that_cannot_be_written_is_one_line_before_any_work(tmp_path: Path, capsys) -> None:
    from iso_bench.cli import main

    assert main(["submission", str(tmp_path / "nowhere"), "-o", "/proc/subx"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("iso-bench: error: -o /proc/subx: cannot write in /proc ("), err
