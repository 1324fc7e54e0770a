"""An engine checks what it needs before it waits for anything: Slurm's commands on PATH for ``--engine slurm``,
a scheduler address Dask can parse for ``--engine dask`` (from ``--scheduler`` or ``$DASK_SCHEDULER_ADDRESS``;
an empty ``--scheduler ""`` is an error, not a local cluster). Each failure is one ``iso-bench: error:`` line
saying what to do, exit 2, before any model, task or cluster is touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.cli import main

RUN = ["run", "--model", "sentence-transformers/all-MiniLM-L6-v2", "--methods", "raw", "--tasks", "STS12",
       "--no-progress"]
ADDRESS_ERRORS = {
    "garbage": "scheduler address 'garbage' (--scheduler): no port in 'garbage'; give it as tcp://HOST:PORT, "
               "e.g. tcp://head:8786 (the address `dask scheduler` prints)",
    "tcp://127.0.0.1:notaport": "scheduler address 'tcp://127.0.0.1:notaport' (--scheduler): the port 'notaport' is "
                                "not a number from 1 to 65535; give it as tcp://HOST:PORT",
    "http://head:8786": "scheduler address 'http://head:8786' (--scheduler): unknown protocol 'http' (one of tcp, "
                        "tls, ws, wss, ucx)",
    "tcp://:8786": "scheduler address 'tcp://:8786' (--scheduler): no host before the port",
    "": "--scheduler is empty: give the address of a running Dask scheduler, e.g. tcp://head:8786, or leave it out "
        "to start a local cluster of --workers processes",
}


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting or reaching a Dask cluster fails the test: the address is refused before either."""
    import distributed

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Dask client or cluster was started")

    monkeypatch.setattr(distributed, "Client", reached)
    monkeypatch.setattr(distributed, "LocalCluster", reached)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


@pytest.mark.parametrize("address", list(ADDRESS_ERRORS))
def test_a_scheduler_address_dask_cannot_use_is_one_line(address: str, tmp_path: Path, no_cluster: None,
                                                         capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("distributed")
    code = main([*RUN, "--results", str(tmp_path / "res"), "--engine", "dask", "--scheduler", address])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"iso-bench: error: {ADDRESS_ERRORS[address]}")
    assert not (tmp_path / "res").exists()


def test_a_scheduler_address_from_the_environment_is_checked_and_named(tmp_path: Path, no_cluster: None,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "garbage")
    assert main([*RUN, "--results", str(tmp_path / "res"), "--engine", "dask"]) == 2
    assert capsys.readouterr().err == ("iso-bench: error: scheduler address 'garbage' ($DASK_SCHEDULER_ADDRESS): no "
                                       "port in 'garbage'; give it as tcp://HOST:PORT, e.g. tcp://head:8786 (the "
                                       "address `dask scheduler` prints)\n")


def test_slurm_without_sbatch_on_path_is_one_line_not_a_wait(tmp_path: Path) -> None:
    """Before, five asyncio tracebacks ("FileNotFoundError: 'sbatch'") and a wait for a worker with no limit: the
    timeout below is what would fail."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "iso_bench", *RUN, "--results", str(tmp_path / "res"),
                           "--engine", "slurm"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines() == [
        "iso-bench: error: --engine slurm submits and watches its workers with Slurm's commands, and sbatch, "
        "squeue, scancel are not on PATH; run iso-bench on a Slurm login node (or load Slurm there, e.g. `module "
        "load slurm`), or use --engine dask --scheduler ADDRESS or --engine local"]


def test_one_missing_slurm_command_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iso_bench.grid.engines import EngineError, slurm_cluster

    for name in ("sbatch", "squeue"):  # scancel is missing
        (tmp_path / name).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EngineError, match=r"commands, and scancel is not on PATH; "):
        slurm_cluster(jobs=1)
