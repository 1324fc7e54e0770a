"""Temporary files on a shared file system: a temporary name says which host and process wrote it, and the
stale-file cleaner (run whenever a job opens the cache or a results folder) judges only this host's writers by
their pid; another host's temporary file, whose writer may be alive there, is left alone until it is older
than :data:`iso_bench.files.STALE_AFTER`. Names of earlier versions (a pid, no host) are judged by age too."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iso_bench import files
from iso_bench.files import STALE_AFTER, remove_stale_temporaries, replacing, temporary_name


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_temporary_name_says_which_host_and_process_wrote_it(tmp_path: Path) -> None:
    with replacing(tmp_path / "STS12.json") as tmp:
        assert tmp.name.startswith(f".STS12.json@{socket.gethostname()}@{os.getpid()}-") and tmp.suffix == ".tmp"
        assert remove_stale_temporaries(tmp_path) == []  # our own write in progress
        tmp.write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["STS12.json"]


def test_another_hosts_temporary_file_is_left_alone_until_it_is_older_than_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = _dead_pid()  # no such process here; on node-b it may be a live writer
    with monkeypatch.context() as there:  # the name a writer on node-b gives its temporary file
        there.setattr(socket, "gethostname", lambda: "node-b")
        there.setattr(os, "getpid", lambda: dead)
        name = temporary_name(tmp_path / "STS12.json") + "k3j4h5.tmp"
    assert "node-b" in name and socket.gethostname() != "node-b"
    theirs = tmp_path / name
    theirs.write_text('{"task_name": "STS1')
    _age(theirs, STALE_AFTER - 60)
    assert remove_stale_temporaries(tmp_path) == [] and theirs.exists()
    _age(theirs, STALE_AFTER + 60)
    assert remove_stale_temporaries(tmp_path) == [theirs] and not theirs.exists()


def test_on_this_host_the_pid_decides_at_once(tmp_path: Path) -> None:
    host = files.host_name()
    gone = tmp_path / f".a.npz@{host}@{_dead_pid()}-ab12.tmp"
    alive = tmp_path / f".b.npz@{host}@{os.getpid()}-cd34.tmp"
    for path in (gone, alive):
        path.write_bytes(b"half")
    _age(alive, 10 * STALE_AFTER)  # a live writer's file stays however old
    assert remove_stale_temporaries(tmp_path) == [gone] and alive.exists()


def test_a_name_of_an_earlier_version_is_judged_by_age(tmp_path: Path) -> None:
    """``.<name>-<pid>-*.tmp`` holds no host: its pid may be another node's, so it is not trusted."""
    older = tmp_path / f".STS12.json-{_dead_pid()}-ab12cd34.tmp"
    nameless = tmp_path / ".tmp-c3d4.json"
    for path in (older, nameless):
        path.write_text("{")
    assert remove_stale_temporaries(tmp_path) == [] and older.exists() and nameless.exists()
    for path in (older, nameless):
        _age(path, STALE_AFTER + 60)
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted([older, nameless])


def test_a_host_name_with_odd_characters_is_kept_apart_from_the_delimiters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "node@7/x y")
    assert files.host_name() == "node_7_x_y"
    assert files._writer(temporary_name(Path("a-b@c.json")) + "x_1.tmp") == ("node_7_x_y", os.getpid())


def test_a_killed_whole_folder_write_leaves_a_temporary_folder_that_is_removed(tmp_path: Path) -> None:
    """An export or a submission killed before its rename leaves ``.<name>@<host>@<pid>-*`` (with or without
    ``.tmp``): removed when its writer is gone, kept while it runs; another name's, or a file, is not touched."""
    from iso_bench.outputs import remove_stale_temporary_folders

    host, dead = files.host_name(), _dead_pid()
    gone = [tmp_path / f".out@{host}@{dead}-ab12", tmp_path / f".out@{host}@{dead}-cd34.tmp"]
    kept = [tmp_path / f".out@{host}@{os.getpid()}-ef56.tmp", tmp_path / f".other@{host}@{dead}-gh78.tmp"]
    for folder in gone + kept:
        (folder / "1_Pooling").mkdir(parents=True)
        (folder / "1_Pooling" / "config.json").write_text("{}")
    stray = tmp_path / f".out@{host}@{dead}-ij90.tmp"
    stray.write_text("{")
    assert sorted(remove_stale_temporary_folders(tmp_path, "out")) == sorted(gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in [*kept, stray])
