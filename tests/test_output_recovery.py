"""An output folder's lock and swap under faults: a full disk while taking the lock leaves no lock held (the next
writer of the folder is not told that another process is writing) and says which folder in one line; a writer
killed between setting the earlier folder aside and renaming the new one in leaves the earlier folder, which the
next write of that name puts back at the target instead of deleting it as a temporary."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.outputs import output_lock, remove_stale_temporary_folders, whole_folder
from iso_bench.registry import IsoBenchError


def test_a_full_disk_while_taking_the_lock_leaks_no_lock_and_names_the_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISO_BENCH_FULL_DISK", str(tmp_path))
    with pytest.raises(IsoBenchError) as caught:
        with output_lock(tmp_path / "cx", "cx", IsoBenchError):
            pass
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"-o cx: cannot take the lock of {tmp_path / 'cx'} (")
    assert "No space left on device" in line and "another iso-bench process" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the lock file removed, nothing else made
    monkeypatch.delenv("ISO_BENCH_FULL_DISK")
    with output_lock(tmp_path / "cx", "cx", IsoBenchError):  # free: this process holds no descriptor of it
        assert (tmp_path / ".cx.iso-bench-lock").read_text().startswith(f"pid {os.getpid()} on ")


def _write(target: Path, text: str, **env: str) -> subprocess.CompletedProcess:
    """A whole-folder write of ``target`` (``a.txt`` holding ``text``) by another process, which may be killed."""
    code = ("import sys; from pathlib import Path; from iso_bench.outputs import whole_folder\n"
            f"with whole_folder(Path({str(target)!r}), 'cx', lambda: None, ValueError) as f:\n"
            f"    (f / 'a.txt').write_text({text!r})\n")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120)


def _refuse_existing(target: Path):
    def check() -> None:
        if target.exists():
            raise IsoBenchError(f"-o cx: {target} exists: add --overwrite")
    return check


def test_a_kill_in_the_swap_leaves_the_earlier_folder_which_the_next_write_puts_back(tmp_path: Path) -> None:
    target = tmp_path / "cx"
    assert _write(target, "first").returncode == 0
    killed = _write(target, "second", ISO_BENCH_FAULT="swap")
    assert killed.returncode == -9, killed.stderr
    assert not target.exists()
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".old")]) == 1  # the earlier folder, set aside
    assert remove_stale_temporary_folders(tmp_path, "cx") != []  # the new folder; never the earlier one
    with output_lock(target, "cx", IsoBenchError):  # the lock an export takes before its checks and its work
        assert (target / "a.txt").read_text() == "first"
    # so the next write that refuses an existing folder (an export without --overwrite) finds the earlier one
    with pytest.raises(IsoBenchError, match="exists: add --overwrite"):
        with whole_folder(target, "cx", _refuse_existing(target), IsoBenchError):
            pass
    assert (target / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cx"]
    # killed again, then a write that may replace it (--overwrite): the new folder, nothing left beside it
    assert _write(target, "second", ISO_BENCH_FAULT="swap").returncode == -9
    with whole_folder(target, "cx", lambda: None, IsoBenchError) as folder:
        (folder / "a.txt").write_text("third")
    assert (target / "a.txt").read_text() == "third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cx"]


def test_a_set_aside_folder_is_removed_once_the_new_one_is_in_place(tmp_path: Path) -> None:
    """Killed after the new folder is in place and before the earlier one was removed: the earlier one goes."""
    target = tmp_path / "cx"
    assert _write(target, "new").returncode == 0
    left = tmp_path / ".cx@somehost@1-ab12cd34.old"
    left.mkdir()
    (left / "a.txt").write_text("old")
    os.utime(left, (0, 0))  # another host's, last written long ago
    assert remove_stale_temporary_folders(tmp_path, "cx") == [left]
    assert (target / "a.txt").read_text() == "new"


@pytest.mark.slow
def test_an_export_killed_in_its_swap_is_back_for_the_next_command(tmp_path: Path) -> None:
    """The drill: ``export --overwrite`` killed (SIGKILL) between setting the earlier export aside and renaming the
    new one in; the next ``export`` without ``--overwrite`` is refused before any work, and the earlier export is
    there, whole (``--verify``), with its own record."""
    import json

    from tests.conftest import MINILM

    (tmp_path / "corpus.txt").write_text("a man is playing a guitar\nthe cat sat on the mat\na dog runs\n",
                                         encoding="utf-8")

    def export(spec: str, *flags: str, **env: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "iso_bench.cli", "export", f"{MINILM}+{spec}", "--fit-corpus", "corpus.txt",
                "-o", "cx", "--no-progress", *flags]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "ISO_BENCH_CACHE": str(tmp_path / "c"), **env})

    assert export("center").returncode == 0
    assert export("zscore", "--overwrite", ISO_BENCH_FAULT="swap").returncode == -9
    assert not (tmp_path / "cx").exists()
    refused = export("zscore")
    assert refused.returncode == 2 and "the folder exists and is not empty" in refused.stderr.strip().splitlines()[-1]
    record = json.loads((tmp_path / "cx" / "iso_bench_transform.json").read_text(encoding="utf-8"))
    assert record["variant"] == f"{MINILM}+center"
    verify = subprocess.run([sys.executable, "-m", "iso_bench.cli", "export", "--verify", "cx"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".old")]  # the killed one's new folder: a .tmp
    assert export("zscore", "--overwrite").returncode == 0  # which the next write removes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "corpus.txt", "cx"]
