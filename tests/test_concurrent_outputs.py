"""Two writers of one output folder, as real processes (the fourth fault drill): two ``iso-bench export -o cx``
started 0.3 s apart, two ``--overwrite`` of one earlier export, two ``iso-bench submission -o cs``. Each pair
leaves one complete output (its manifest verifies, its record is the winner's) and one ``iso-bench: error:`` line,
never two "wrote" with one output lost, never a traceback. And the targets a rename cannot replace (``-o .``, a
folder above the working folder, a mount point, ``/``) are one line before any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iso_bench.files import MANIFEST, verify_manifest
from iso_bench.outputs import output_lock, resolve_output
from tests.conftest import MINILM, PUBLISHED_RESULTS

REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
CORPUS = ["a man is playing a guitar", "a woman is slicing a cucumber", "the cat sat on the mat",
          "a dog runs in the park", "two men are playing chess", "the river bank was flooded",
          "she deposited money at the bank", "a girl is combing her hair", "a boy plays the piano"]


def _cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "iso_bench.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "ISO_BENCH_CACHE": str(cwd / "c")})


def _race(first: list[str], second: list[str], cwd: Path) -> list[tuple[int, str]]:
    """Start ``first``, then 0.3 s later ``second``; their exit statuses and standard errors."""
    a = _cli(*first, cwd=cwd)
    time.sleep(0.3)
    b = _cli(*second, cwd=cwd)
    return [(p.wait(timeout=600), p.communicate()[1]) for p in (a, b)]


def _one_wins(done: list[tuple[int, str]]) -> int:
    """Which of the two wrote; the other said one ``iso-bench: error:`` line naming the writer."""
    assert sorted(rc for rc, _ in done) == [0, 2], done
    winner = [rc for rc, _ in done].index(0)
    err = done[1 - winner][1]
    assert "Traceback" not in err and "Traceback" not in done[winner][1]
    lines = [line for line in err.splitlines() if line.startswith("iso-bench:")]
    assert len(lines) == 1 and lines[0].startswith("iso-bench: error: -o "), err
    assert "another iso-bench process (pid " in lines[0] and "is writing" in lines[0], lines
    return winner


def _no_leftovers(folder: Path, kept: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == kept  # no temporary folder, no lock file


@pytest.mark.slow
def test_two_exports_to_one_new_folder_leave_one_complete_and_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    specs = ("zscore", "center")
    argv = [["export", f"{MINILM}+{spec}", "--fit-corpus", "corpus.txt", "-o", "cx", "--no-progress"]
            for spec in specs]
    winner = _one_wins(_race(*argv, cwd=tmp_path))
    assert verify_manifest(tmp_path / "cx") == []  # complete: every listed file as recorded, nothing else
    record = json.loads((tmp_path / "cx" / "iso_bench_transform.json").read_text(encoding="utf-8"))
    assert record["variant"] == f"{MINILM}+{specs[winner]}"
    _no_leftovers(tmp_path, {"corpus.txt", "cx", "c"})
    # two --overwrite of that earlier export at once: one replaces it whole, the other is refused
    argv = [[*a, "--overwrite"] for a in argv[::-1]]
    winner = _one_wins(_race(*argv, cwd=tmp_path))
    assert verify_manifest(tmp_path / "cx") == []
    record = json.loads((tmp_path / "cx" / "iso_bench_transform.json").read_text(encoding="utf-8"))
    assert record["variant"] == f"{MINILM}+{specs[::-1][winner]}"
    _no_leftovers(tmp_path, {"corpus.txt", "cx", "c"})


@pytest.mark.slow
def test_two_submissions_to_one_folder_leave_one_complete_and_one_error_line(tmp_path: Path) -> None:
    pytest.importorskip("mteb")
    source = PUBLISHED_RESULTS / "results" / f"{MINILM.replace('/', '__')}+center" / REVISION / "experiments"
    shutil.copytree(source / "fit_corpus_task", tmp_path / "R" / "results" / f"{MINILM.replace('/', '__')}+center"
                    / REVISION / "experiments" / "fit_corpus_task")
    argv = ["submission", "R", "-o", "cs"]
    _one_wins(_race(argv, argv, cwd=tmp_path))
    written = sorted(p.relative_to(tmp_path / "cs").as_posix() for p in (tmp_path / "cs").rglob("*.json"))
    experiment = f"{MINILM.replace('/', '__')}/{REVISION}/experiments/fit_corpus_task__post_processing_center"
    assert f"{experiment}/STS16.json" in written and f"{experiment}/model_meta.json" in written
    _no_leftovers(tmp_path, {"R", "cs"})


def test_a_held_lock_refuses_a_second_writer_naming_it(tmp_path: Path) -> None:
    """A process that holds ``cx``'s lock (a real one, started here) makes an export to ``cx`` one line; once it
    ends, the lock file is gone and the lock is free."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from iso_bench.outputs import output_lock\n"
        f"with output_lock(Path({str(tmp_path / 'cx')!r}), 'cx', ValueError):\n"
        "    print('held', flush=True); sys.stdin.readline()")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    assert holder.stdout.readline() == "held\n"
    from iso_bench.registry import IsoBenchError

    with pytest.raises(IsoBenchError, match=rf"another iso-bench process \(pid {holder.pid} on "):
        with output_lock(tmp_path / "cx", "cx", IsoBenchError):
            pass
    holder.communicate("\n", timeout=60)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the lock file removed by its holder
    with output_lock(tmp_path / "cx", "cx", IsoBenchError):
        assert (tmp_path / ".cx.iso-bench-lock").read_text() .startswith(f"pid {os.getpid()} on ")


@pytest.mark.parametrize("output", [".", "..", "sub/..", "/"])
def test_a_folder_a_rename_cannot_replace_is_one_line_before_any_work(tmp_path: Path, output: str) -> None:
    (tmp_path / "work" / "sub").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "iso_bench.cli", "export", f"{MINILM}+center", "--fit-corpus",
                           "task:STS16", "-o", output, "--overwrite"], cwd=tmp_path / "work", capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    line = done.stderr.strip()
    if output == "/":
        assert line == ("iso-bench: error: -o /: / is a mount point (the root of a file system), which a rename "
                        "cannot replace: name a new folder inside it")
    else:
        where = "a folder above the working folder" if output == ".." else "the working folder"
        resolved = tmp_path if output == ".." else tmp_path / "work"
        assert line.startswith(f"iso-bench: error: -o {output}: is {where} ({resolved}); ")
    done = subprocess.run([sys.executable, "-m", "iso_bench.cli", "submission", str(tmp_path), "-o", output],
                          cwd=tmp_path / "work", capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["sub"]


def test_a_mount_point_is_refused() -> None:
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    mount = next((m for m in mounts if m not in ("/",) and Path(m).is_dir() and not Path.cwd().is_relative_to(m)),
                 None)
    if mount is None:
        pytest.skip("no mount point here")
    with pytest.raises(ValueError, match="is a mount point"):
        resolve_output(mount, ValueError)


def test_folders_have_the_users_usual_mode(tmp_path: Path) -> None:
    """A whole folder gets ``0o777 & ~umask`` (as mkdir makes it), not the temporary folder's 0o700."""
    from iso_bench.outputs import whole_folder

    old = os.umask(0o027)
    try:
        with whole_folder(tmp_path / "out", "out", lambda: None, ValueError) as folder:
            (folder / "sub").mkdir()
        assert (tmp_path / "out").stat().st_mode & 0o777 == 0o750
    finally:
        os.umask(old)
    assert MANIFEST not in {p.name for p in (tmp_path / "out").iterdir()}
