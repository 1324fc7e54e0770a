"""A setup's identity is what defines it, never the route its data took: a result written from the local mirror
is found by a ``--dry-run`` without the mirror (no data loaded) and by a run that reads the same data from a hub
cache (the datasets library's cache of an earlier hub read, laid out here), and the leaderboard shows one row
for it; the same repository and revision with other content is reported, never merged silently. The published
results, written by an older version into ``data_mirror__...`` folders, keep being found."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.report import build_leaderboard, read_results, render_markdown
from iso_bench.report.results import LeaderboardError

from .conftest import MINILM, V1_BOARD, small_mirror

REPO, FOLDER = "mteb/sts12-sts", "sts12-sts"


def hub_cache(root: Path, mirror: Path, edit: bool = False) -> Path:
    """A datasets cache holding ``mteb/sts12-sts`` as an earlier hub read leaves it (what ``datasets`` reads
    offline), built from the mirror's rows; ``edit``: with one sentence of other content."""
    import datasets

    source = root / "source" / FOLDER
    source.mkdir(parents=True)
    lines = (mirror / "mteb" / FOLDER / "test.jsonl").read_text(encoding="utf-8").splitlines()
    if edit:
        first = json.loads(lines[0])
        lines[0] = json.dumps({**first, "sentence1": first["sentence1"] + " ."})
    (source / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    datasets.load_dataset(str(source), cache_dir=str(root / "prepared"))
    (prepared,) = (root / "prepared" / FOLDER / "default" / "0.0.0").glob("*/dataset_info.json")
    cache = root / "datasets-cache"
    shutil.copytree(prepared.parent, cache / f"mteb___{FOLDER}" / "default" / "0.0.0" / prepared.parent.name)
    return cache


def iso_bench(*args: str, datasets_cache: Path, data_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "ISO_BENCH_THREADS": "1",
           "HF_DATASETS_CACHE": str(datasets_cache)}
    env.pop("ISO_BENCH_DATA_DIR", None)  # the mirror only where a command names it
    argv = [sys.executable, "-m", "iso_bench", *args, *(["--data-dir", str(data_dir)] if data_dir else [])]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)


def plan_row(stdout: str) -> list[str]:
    """What the plan says of STS12: results present, status, where its data is."""
    return next(line.split()[2:] for line in stdout.splitlines() if line.split()[1:2] == ["STS12"])


def result_files(results: Path) -> list[str]:
    return sorted(p.relative_to(results).as_posix() for p in results.rglob("*.json") if p.name != "model_meta.json")


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str], str]:
    """raw and center of all-MiniLM-L6-v2 on a 40-pair STS12, run with the mirror: (mirror, out, run args, what
    the run printed)."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(MINILM, local_files_only=True)
    except Exception:  # noqa: BLE001
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    root = tmp_path_factory.mktemp("route")
    mirror = small_mirror(root / "mirror", [FOLDER], 40)
    out = root / "out"
    args = ["run", "--model", MINILM, "--methods", "raw", "center", "--tasks", "STS12", "--results",
            str(out / "results"), "--cache-dir", str(out / "cache"), "--no-progress"]
    done = iso_bench(*args, datasets_cache=root / "mirror-datasets-cache", data_dir=mirror)
    assert done.returncode == 0, done.stderr[-3000:]
    return mirror, out, args, done.stdout


def test_a_mirror_result_is_found_without_the_mirror_and_from_the_hub(mirrored, tmp_path: Path) -> None:
    mirror, out, args, _ = mirrored
    written = result_files(out / "results")
    assert len(written) == 2 and not any("data_mirror" in f for f in written), written  # no route in a folder
    record = json.loads((out / "results" / written[0]).read_text())["scores"]["test"][0]["iso_bench"]
    assert record["data"]["source"] == "mirror" and len(record["data"]["rows_sha256"]) == 64
    assert record["data"]["splits"] == ["test"]
    assert record["command"].endswith("--data-dir DATA")  # the command names a data folder, never the machine's
    assert record["data"]["path"] == f"mteb/{FOLDER}"  # the mirror folder by its place in the data folder

    empty = tmp_path / "empty-cache"
    plan = iso_bench(*args, "--dry-run", datasets_cache=empty)  # no mirror, no hub cache: nothing to load
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert plan_row(plan.stdout) == ["2/2", "done", "missing"], plan.stdout

    cache = hub_cache(tmp_path / "hub", mirror)
    assert plan_row(iso_bench(*args, "--dry-run", datasets_cache=cache).stdout) == ["2/2", "done", "hub", "cache"]
    again = iso_bench(*args, datasets_cache=cache)  # the same rows, read from the hub cache: one setup
    assert again.returncode == 0, again.stderr[-3000:]
    assert "raw vectors: 0 texts encoded" in again.stdout and "data:" not in again.stderr, again.stderr[-3000:]
    assert result_files(out / "results") == written  # nothing computed again, nothing written beside it

    board = build_leaderboard(read_results(out / "results"), ci=False)
    assert [row.label for row in board.sections[0].tables[0].rows] == ["raw", "center"]  # one row each


def test_other_content_of_the_same_revision_is_reported(mirrored, tmp_path: Path) -> None:
    _, out, args, _ = mirrored
    mirror = small_mirror(tmp_path / "mirror", [FOLDER], 40)
    cache = hub_cache(tmp_path / "hub", mirror, edit=True)
    other = iso_bench(*args, datasets_cache=cache)
    assert other.returncode == 0, other.stderr[-3000:]
    notes = [line for line in other.stderr.splitlines() if line.startswith("data: ")]
    assert len(notes) == 1 and notes[0].startswith("data: STS12: 2 result(s) present were computed from other data"
                                                   f" ({REPO} @ "), notes
    assert "not merged with this data" in notes[0]


def test_two_results_of_one_setup_from_other_data_are_refused_by_the_board(mirrored, tmp_path: Path) -> None:
    """The same setup filed by an older version (``data_mirror__...``) beside this version's folder: one of them
    is shown where they hold the same data; other data is refused, naming both files."""
    _, out, _, _ = mirrored
    results = tmp_path / "results"
    shutil.copytree(out / "results", results)
    [new] = [p for p in (results / "results").rglob("STS12.json") if "+center" in str(p)]
    old = new.parent.parent / "data_mirror__fit_corpus_task"
    shutil.copytree(new.parent, old)
    meta = json.loads((old / "model_meta.json").read_text())
    (old / "model_meta.json").write_text(json.dumps({**meta, "experiment_kwargs": {"data": "mirror",
                                                                                   "fit_corpus": "task"}}))
    shown = read_results(results, accept_modified=True)  # the copy's digest names the other folder: modified
    assert [r.experiment for r in shown if r.variant == "center"] == ["fit_corpus_task"]  # this version's layout
    assert "| center " in render_markdown(build_leaderboard(shown, ci=False))
    data = json.loads((old / "STS12.json").read_text())
    data["scores"]["test"][0]["iso_bench"]["data"]["rows_sha256"] = "0" * 64
    (old / "STS12.json").write_text(json.dumps(data))
    with pytest.raises(LeaderboardError, match=r"computed from other data \(mteb/sts12-sts @ \w+, rows sha256 \w+; "
                                               r"the other: mteb/sts12-sts @ \w+, rows sha256 \w+\)") as info:
        read_results(results, accept_modified=True)
    assert "rows sha256 000000000000" in str(info.value) and str(old / "STS12.json") in str(info.value)


def test_the_summary_counts_texts_and_names_the_next_command(mirrored) -> None:
    """A cold run encodes each distinct text once, reusing none; a rerun that computes every result again
    encodes none and reuses each text once (not once per variant that looks it up); both name the leaderboard
    command next, and the table has the variants' mean (of the one task) first."""
    mirror, out, args, printed = mirrored
    pairs = [json.loads(line) for line in (mirror / "mteb" / FOLDER / "test.jsonl").read_text().splitlines()]
    texts = len({t for pair in pairs for t in (pair["sentence1"], pair["sentence2"])})
    assert f"raw vectors: {texts} texts encoded, 0 reused from the cache;" in printed, printed
    assert f"next: iso-bench leaderboard {out / 'results'}  (every table" in printed
    again = iso_bench(*args, "--overwrite", datasets_cache=out.parent / "mirror-datasets-cache", data_dir=mirror)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"raw vectors: 0 texts encoded, {texts} reused from the cache;" in again.stdout, again.stdout


def test_the_published_results_of_an_older_layout_are_found_without_data(tmp_path: Path) -> None:
    """The 677 published results sit in ``data_mirror__...`` folders: a dry-run without any data finds every raw
    and sentence-level result of all-MiniLM-L6-v2 (14 of 20 per task). The 6 token-level ones per task (cluster-pca
    with seeds 0-4, zipfian-whiten) pooled the text's own tokens and are filed under that setup, so a token-level
    variant, which now goes through the model's own pooling (``token_pooling`` in its setup), never takes them."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(MINILM, local_files_only=True)
    except Exception:  # noqa: BLE001
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    from iso_bench.results.benchmark import V1, definition

    v1 = definition(V1)  # the published results are v1's: its tasks and default methods
    plan = iso_bench("run", "--model", MINILM, "--tasks", *[t["task"] for t in v1["tasks"]], "--methods",
                     *v1["methods"], "--seeds", "0", "1", "2", "3", "4", "--results", str(V1_BOARD), "--dry-run",
                     datasets_cache=tmp_path / "empty")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert plan.stdout.splitlines()[0] == ("plan: 1 model(s) x 17 task(s) = 17 jobs; 17 to run (102 results), "
                                           "0 complete"), plan.stdout
    rows = [line.split() for line in plan.stdout.splitlines() if line.startswith(MINILM)]
    assert len(rows) == 17 and all(row[2] == "14/20" for row in rows), plan.stdout
