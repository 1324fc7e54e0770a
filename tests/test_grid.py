"""The grid: several models x tasks x methods, planned before any work, run in this process or on a real Dask
cluster (separate ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1), with a worker killed
mid-job; on Slurm through dask-jobqueue against stand-in ``sbatch``/``scancel``; mteb benchmark names; a job
that cannot run. The two models are the packaged all-MiniLM-L6-v2 and a copy of it in a local folder; the
tasks are small copies of two STS mirrors (40 pairs each)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import HUB_MIRROR, MINILM, small_mirror

pytest.importorskip("distributed")

PAIRS = 40
METHODS = ["raw", "center", "abtt-2"]
TASKS = {"STS12": "sts12-sts", "STS13": "sts13-sts"}
VOLATILE = {"evaluation_time", "evaluation_phases", "date", "kg_co2_emissions"}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_mirror(tmp_path_factory.mktemp("grid-mirror"), TASKS.values(), PAIRS)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """all-MiniLM-L6-v2 by its hub id, and a copy of its files in a local folder (another model id)."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(MINILM, local_files_only=True)
    except Exception:  # noqa: BLE001
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    copy = tmp_path_factory.mktemp("models") / "minilm-copy"
    shutil.copytree(folder, copy)
    return [MINILM, str(copy)]


def _env(mirror: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ISO_BENCH_THREADS": "1", "ISO_BENCH_DATA_DIR": str(mirror),
           "HF_DATASETS_CACHE": str(mirror.parent / "datasets-cache")}
    env.pop("ISO_BENCH_FAULT", None)
    return env


def _cli(mirror: Path, out: Path, models: list[str], *extra: str, tasks=tuple(TASKS)) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "iso_bench", "run", "--model", *models, "--methods", *METHODS, "--tasks", *tasks,
            "--results", str(out / "results"), "--cache-dir", str(out / "cache"), "--no-progress", *extra]
    return subprocess.run(argv, env=_env(mirror), capture_output=True, text=True, timeout=900)


def _results(out: Path) -> dict[str, dict]:
    """Every result file (scores without timings and provenance), by its path under the results folder."""
    found = {}
    for path in sorted((out / "results" / "results").rglob("*.json")):
        if path.name == "model_meta.json":
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for entries in data["scores"].values():
            for entry in entries:
                entry.pop("iso_bench")
        found[path.relative_to(out / "results").as_posix()] = {k: v for k, v in data.items() if k not in VOLATILE}
    return found


@pytest.fixture(scope="module")
def local_grid(mirror: Path, models: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("local-grid")
    done = _cli(mirror, out, models)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "plan: 2 model(s) x 2 task(s) = 4 jobs; 4 to run (12 results)" in done.stdout
    results = _results(out)
    assert len(results) == len(models) * len(TASKS) * len(METHODS)
    return results


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def cluster(mirror: Path, tmp_path_factory: pytest.TempPathFactory):
    """A scheduler and two workers (one thread each) as separate processes on 127.0.0.1; stopped by their pids,
    and checked to leave no process behind."""
    if not shutil.which("dask", path=str(Path(sys.executable).parent)):
        pytest.skip("the dask command line is not installed")
    dask = str(Path(sys.executable).parent / "dask")
    logs = tmp_path_factory.mktemp("cluster-logs")
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = _env(mirror)
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1],
                               "--no-dashboard"], env=env, stdout=open(logs / "scheduler.log", "w"),  # noqa: SIM115
                              stderr=subprocess.STDOUT)]
    for i in range(2):
        procs.append(subprocess.Popen([dask, "worker", address, "--nworkers", "1", "--nthreads", "1", "--host",
                                       "127.0.0.1", "--no-dashboard", "--death-timeout", "60"], env=env,
                                      stdout=open(logs / f"worker{i}.log", "w"), stderr=subprocess.STDOUT))  # noqa: SIM115
    from distributed import Client

    deadline = time.time() + 60
    while True:
        try:
            with Client(address, timeout=5) as client:
                if len(client.scheduler_info()["workers"]) == 2:
                    break
        except OSError:
            pass
        assert time.time() < deadline, (logs / "worker0.log").read_text()[-2000:]
        time.sleep(0.5)
    yield address, procs
    every = {p.pid for p in procs} | {d for p in procs for d in _descendants(p.pid)}
    for p in procs[1:] + procs[:1]:  # workers first, then the scheduler
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    deadline = time.time() + 30
    while any(_alive(pid) for pid in every) and time.time() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in every if _alive(pid)], "processes of the cluster left behind"


def test_a_grid_on_dask_survives_a_killed_worker_and_equals_the_local_grid(mirror, models, local_grid, cluster,
                                                                          tmp_path: Path) -> None:
    from iso_bench.grid.jobs import attempts_file, read_attempts

    address, _ = cluster
    argv = [sys.executable, "-m", "iso_bench", "run", "--model", *models, "--methods", *METHODS, "--tasks", *TASKS,
            "--results", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            "--engine", "dask", "--scheduler", address]
    proc = subprocess.Popen(argv, env=_env(mirror), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and proc.poll() is None:
        for path in (tmp_path / "results" / "grid" / "attempts").rglob("*.jsonl"):
            records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            if records and records[-1]["event"] == "start":  # a job is running: kill its worker process
                os.kill(records[-1]["pid"], signal.SIGKILL)
                killed = (path, records[-1]["pid"])
                break
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=900)
    assert killed is not None, "no running job was seen"
    assert proc.returncode == 0, stderr[-3000:]
    results = _results(tmp_path)
    assert results == local_grid  # every result present once, every score equal to the local engine's
    task = killed[0].stem
    (model,) = [m for m in models if attempts_file(tmp_path / "results", m, task) == killed[0]]
    starts = [a for a in read_attempts(tmp_path / "results", model, task) if a["event"] == "start"]
    assert len(starts) >= 2 and starts[0]["pid"] == killed[1]
    assert f"rerun: {model} on {task} ran {len(starts)} times" in stderr


def test_a_job_that_cannot_run_is_named_and_the_others_finish(mirror, models, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    done = _cli(mirror, tmp_path, [models[0], missing], tasks=["STS12"])
    assert done.returncode == 1
    assert f"failed: {missing} on STS12: " in done.stderr
    log = tmp_path / "results" / "grid" / "logs"
    assert any(log.rglob("STS12.log")), "the failed job's traceback is kept"
    assert len(_results(tmp_path)) == len(METHODS)  # the model that loads has all its results


def test_the_plan_of_an_mteb_benchmark_names_its_tasks_and_their_data_without_loading(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if not (HUB_MIRROR / "mteb" / "sts12-sts").is_dir():
        pytest.skip("no STS mirror here")
    done = subprocess.run([sys.executable, "-m", "iso_bench", "run", "--tasks", "MTEB(eng, v2)", "--dry-run",
                           "--data-dir", str(HUB_MIRROR.parent), "--results", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split()[1]: line for line in done.stdout.splitlines() if line.startswith(MINILM)}
    assert len(rows) == 41 and "41 task(s) = 41 jobs" in done.stdout
    assert rows["STS12"].rstrip().endswith("mirror") and "[MTEB(eng, v2)]" in rows["STS12"]
    assert rows["ArguAna"].rstrip().endswith(("missing", "hub cache"))
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_the_isotropy_task_finds_its_data_where_its_corpus_task_has_it() -> None:
    import mteb

    from iso_bench.grid.tasks import data_at_hand

    if not (HUB_MIRROR / "mteb" / "stsbenchmark-sts").is_dir():
        pytest.skip("no STS mirror here")
    here = data_at_hand(mteb.get_task("Isotropy-STSB"), HUB_MIRROR.parent)
    assert here == data_at_hand(mteb.get_task("STSBenchmark"), HUB_MIRROR.parent) == "mirror"


def test_the_local_engine_imports_no_dask(mirror, tmp_path: Path) -> None:
    code = ("import sys\nfrom iso_bench.cli import main\n"
            f"assert main(['run', '--model', 'a/b', 'c/d', '--tasks', 'STS12', '--dry-run', '--results', "
            f"{str(tmp_path)!r}]) == 0\n"
            "assert not [m for m in ('dask', 'distributed') if m in sys.modules]")
    done = subprocess.run([sys.executable, "-c", code], env=_env(mirror), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "plan: 2 model(s) x 1 task(s) = 2 jobs" in done.stdout


def test_an_unknown_name_suggests_tasks_suites_and_benchmarks(capsys) -> None:
    from iso_bench.cli import main

    assert main(["run", "--tasks", "MTEB(eng, v9)", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown task, suite or mteb benchmark 'MTEB(eng, v9)'" in err and "MTEB(eng, v2)" in err


STAND_IN_SBATCH = """#!/bin/bash
# a stand-in for Slurm's sbatch: keep the job script, start it in the background, answer as sbatch does
id=$((RANDOM + 1000))
cp "$1" "$SLURM_STANDIN_DIR/job-$id.sh"
setsid bash "$SLURM_STANDIN_DIR/job-$id.sh" > "$SLURM_STANDIN_DIR/job-$id.out" 2>&1 &
echo $! > "$SLURM_STANDIN_DIR/job-$id.pid"
echo "Submitted batch job $id"
"""
STAND_IN_SCANCEL = """#!/bin/bash
for id in "$@"; do pid=$(cat "$SLURM_STANDIN_DIR/job-$id.pid" 2>/dev/null) && kill -TERM -- -$pid 2>/dev/null; done
exit 0
"""


def test_the_grid_runs_on_slurm_through_dask_jobqueue(mirror, models, local_grid, tmp_path: Path) -> None:
    pytest.importorskip("dask_jobqueue")
    bin_dir, jobs = tmp_path / "bin", tmp_path / "slurm-jobs"
    bin_dir.mkdir()
    jobs.mkdir()
    stand_ins = {"sbatch": STAND_IN_SBATCH, "scancel": STAND_IN_SCANCEL, "squeue": "#!/bin/bash\nexit 0\n"}
    for name, text in stand_ins.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**_env(mirror), "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_STANDIN_DIR": str(jobs)}
    argv = [sys.executable, "-m", "iso_bench", "run", "--model", *models, "--methods", *METHODS, "--tasks", *TASKS,
            "--results", str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), "--no-progress",
            "--engine", "slurm", "--slurm-jobs", "2", "--slurm-partition", "gpu", "--slurm-account", "proj",
            "--slurm-walltime", "01:30:00", "--slurm-memory", "8GB", "--slurm-cores", "1", "--gpus-per-job", "1",
            "--scheduler-host", "127.0.0.1"]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        assert _results(tmp_path) == local_grid
        scripts = sorted(jobs.glob("job-*.sh"))
        assert len(scripts) == 2
        script = scripts[0].read_text()
        for line in ["#SBATCH -p gpu", "#SBATCH -A proj", "#SBATCH -t 01:30:00", "#SBATCH --gres=gpu:1",
                     "#SBATCH --mem=", "--resources GPU=1", "tcp://127.0.0.1:"]:
            assert line in script, (line, script)
    finally:
        for pid_file in jobs.glob("job-*.pid"):  # nothing left running, whatever happened
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def test_a_dask_engine_without_a_usable_worker_says_so_and_gives_up_at_its_limit() -> None:
    """No worker yet: the engine says what it waits for, then names the scheduler and what to do; jobs on a GPU
    wait for a worker with the resource GPU, and a worker without it is named as such."""
    from distributed import LocalCluster

    from iso_bench.grid.engines import DaskEngine, EngineError

    said: list[str] = []
    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as empty:
        engine = DaskEngine(cluster=empty, worker_wait=1.5, poll=0.5)
        try:
            joined = r"at the Dask scheduler (\S+); no worker joined: start workers \(`dask worker \1`\)"
            with pytest.raises(EngineError, match=joined):
                engine.wait_ready(say=said.append)
        finally:
            engine.close()
    assert said and said[0].startswith(f"waiting for a worker to join the Dask scheduler at {engine.address} (0 now")
    assert len(said) >= 2  # said again while it waits
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cpu_only:
        engine = DaskEngine(cluster=cpu_only, worker_wait=0.5)
        try:
            engine.wait_ready(say=said.append)  # a CPU job: the worker will do
            with pytest.raises(EngineError, match="1 worker.s. joined, none with the resource GPU: start each GPU"):
                engine.wait_ready(gpu=True, say=said.append)
        finally:
            engine.close()


def test_the_benchmarks_every_method_is_two_group_names_and_the_command_keeps_them(mirror, tmp_path: Path,
                                                                                  capsys) -> None:
    """``--methods default storage`` plans v3's 43 specs (each once, a spec named again too); the command a result
    records names the groups as given."""
    import argparse

    from iso_bench.cli import main
    from iso_bench.grid.plan import reproduce_command
    from iso_bench.results.benchmark import definition

    assert main(["run", "--methods", "default", "storage", "raw", "--tasks", "STS12", "--dry-run", "--results",
                 str(tmp_path), "--data-dir", str(mirror)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith(MINILM)]
    assert f" 0/{len(definition()['methods'])} " in row and len(definition()["methods"]) == 43
    args = argparse.Namespace(revision=None, methods=["default", "storage"], tasks=["all"], data_dir=None,
                              fit_corpus="task", fit_sample=None, fit_budget=None, seed=0, seeds=None, pooling=None,
                              layer=None, dtype="auto", resamples=1000, kernels=None)
    assert reproduce_command(args, MINILM).startswith(f"iso-bench run --model {MINILM} --methods default storage ")
