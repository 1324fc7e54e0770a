"""Bad input fails before the work: the results folder, the device, the thread count, the batch size and every
method spec against the encoder's dimension, each with a message that names the input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iso_bench.checks import (
    InputError,
    check_device,
    check_methods,
    check_results_dir,
    cpu_threads,
    default_threads,
    output_dims,
    set_threads,
)
from iso_bench.cli import main
from iso_bench.methods import MethodError

from .conftest import MINILM


def _parse_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


# ---- the results folder ---------------------------------------------------------------------------------
def test_a_results_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "results"
    file.write_text("not a folder")
    with pytest.raises(InputError, match=rf"--results {file}: is a file, not a folder"):
        check_results_dir(file)
    assert file.read_text() == "not a folder"


def test_a_results_folder_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot write there"):
        check_results_dir(blocker / "results")  # under a file: not a folder anyone can make


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_results_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(InputError, match="cannot write there"):
            check_results_dir(folder)
    finally:
        folder.chmod(0o755)


def test_a_writable_results_folder_is_created_and_left_empty(tmp_path: Path) -> None:
    folder = check_results_dir(tmp_path / "a" / "b")
    assert folder.is_dir() and list(folder.iterdir()) == []  # the probe file is gone


def test_run_refuses_a_results_file_before_loading_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import iso_bench.grid.runner as runner

    def no_model(cfg):  # pragma: no cover - reached only when the check is missing
        raise AssertionError("the model was loaded before the results folder was checked")

    monkeypatch.setattr(runner, "build_backbone", no_model)
    file = tmp_path / "results.json"
    file.write_text("{}")
    assert main(["run", "--methods", "raw", "--tasks", "STS12", "--results", str(file),
                 "--cache-dir", str(tmp_path / "cache")]) == 2
    assert f"--results {file}: is a file" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


# ---- device, threads, batch size: refused while parsing -----------------------------------------------
def test_cuda_on_a_machine_without_it_is_a_parse_error(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    message = _parse_error(capsys, "run", "--device", "cuda")
    assert message.startswith("iso-bench run: error: argument --device: this machine has no CUDA device")
    assert "use --device cpu" in message
    with pytest.raises(InputError, match="no CUDA device"):
        check_device("cuda:0")


def test_a_device_name_that_is_not_one_is_a_parse_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a device name; use cpu, cuda, cuda:N or mps" in _parse_error(capsys, "run", "--device", "gpu0")
    assert check_device("cpu") == "cpu" and check_device(None) is None


@pytest.mark.parametrize("value", ["0", "-1", "two"])
@pytest.mark.parametrize("option", ["--batch-size", "--threads"])
def test_counts_below_one_are_parse_errors(option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    message = _parse_error(capsys, "run", option, value)
    assert message.startswith(f"iso-bench run: error: argument {option}:")
    assert ("must be at least 1" if value != "two" else "is not a whole number") in message


def test_threads_are_set_and_default_to_the_idle_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("ISO_BENCH_THREADS", "2")
        assert default_threads() == 2
        monkeypatch.setenv("ISO_BENCH_THREADS", "0")
        with pytest.raises(InputError, match="ISO_BENCH_THREADS=0: use at least 1 thread"):
            default_threads()
        monkeypatch.delenv("ISO_BENCH_THREADS")
        monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 0.0, 0.0))
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
        assert default_threads() == 2  # 4 CPUs, 2 busy (1.6 rounds to 2)
        monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 0.0, 0.0))
        assert default_threads() == 1  # never below one
    finally:
        torch.set_num_threads(before)


def test_the_boards_threads_are_the_variables_or_the_cpus_at_most_eight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leaderboard's resampling ignores the load (its parts are independent; torch's threads wait for each
    other), so a busy machine still gets one thread a CPU, capped at 8; $ISO_BENCH_THREADS decides, checked."""
    monkeypatch.delenv("ISO_BENCH_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert cpu_threads() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert cpu_threads() == 8
    monkeypatch.setenv("ISO_BENCH_THREADS", "12")
    assert cpu_threads() == 12
    monkeypatch.setenv("ISO_BENCH_THREADS", "two")
    with pytest.raises(InputError, match="ISO_BENCH_THREADS='two': not a whole number of threads"):
        cpu_threads()


# ---- method specs against the encoder's dimension ------------------------------------------------------
@pytest.fixture(scope="module")
def minilm_dims() -> dict[str, int]:
    dims = output_dims(MINILM)
    if not dims:
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    return dims


def test_output_dims_come_from_mteb_meta_and_the_config(minilm_dims: dict[str, int]) -> None:
    assert minilm_dims == {"sentence": 384, "token": 384}


@pytest.mark.parametrize(("spec", "allowed"), [
    ("abtt-999999", "383"),
    ("whiten-4000", "384"),
    ("clip-dims=9999", "383"),
    ("cluster-pca-27-384", "383"),
])
def test_specs_beyond_the_dimension_are_refused_naming_the_model(spec: str, allowed: str,
                                                                   minilm_dims: dict[str, int]) -> None:
    with pytest.raises(MethodError) as err:
        check_methods(["raw", spec], minilm_dims, MINILM)
    message = str(err.value)
    assert spec in message and allowed in message
    assert message.endswith(f"({MINILM} gives 384-d {'token' if 'cluster' in spec else 'sentence'} vectors)")


def test_valid_specs_pass_and_come_back_built(minilm_dims: dict[str, int]) -> None:
    made = check_methods(["raw", "abtt-383", "whiten-384", "clip-dims=0,383", "cluster-pca"], minilm_dims, MINILM)
    assert [level for _, level in made] == ["sentence"] * 4 + ["token"]


def test_run_refuses_a_bad_spec_before_the_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       minilm_dims: dict[str, int]) -> None:
    import iso_bench.grid.runner as runner

    def no_model(cfg):  # pragma: no cover - reached only when the check is missing
        raise AssertionError("the model was loaded before the method specs were checked")

    monkeypatch.setattr(runner, "build_backbone", no_model)
    cfg = runner.RunConfig(methods=["raw", "abtt-999999"], tasks=["STS12"], results_dir=tmp_path / "r",
                           cache_dir=tmp_path / "c", progress=False)
    with pytest.raises(MethodError, match="abtt-999999"):
        runner.run(cfg)
    assert list((tmp_path / "r").iterdir()) == [] and not (tmp_path / "c").exists()


def test_the_mteb_loader_refuses_a_bad_spec_before_the_model_loads(monkeypatch: pytest.MonkeyPatch,
                                                                   minilm_dims: dict[str, int]) -> None:
    import iso_bench.mteb_plugin as backbone
    from iso_bench.mteb_plugin import load_variant

    monkeypatch.setattr(backbone, "load_backbone", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(MethodError, match="whiten-4000"):
        load_variant(f"{MINILM}+whiten-4000", base_model=MINILM, method="whiten-4000")
