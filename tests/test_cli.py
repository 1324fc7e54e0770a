"""The command line: help, list, errors, and what it leaves unimported (torch, mteb)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench.backbones.hf_backbone import POOLINGS
from iso_bench.cli import main
from iso_bench.registry import IsoBenchError

OPTIONS = {
    "run": ["--model", "--revision", "--methods", "--tasks", "--results", "--data-dir", "--cache-dir", "--device",
            "--batch-size", "--threads", "--fit-corpus", "--seed", "--seeds", "--resamples", "--pooling", "--layer",
            "--overwrite", "--trust-remote-code", "--no-progress"],
    "list": [],
    "leaderboard": ["RESULTS_DIR", "--output", "--format", "--fragment", "--no-plot", "markdown", "csv", "latex"],
    "outliers": ["--model", "--revision", "--layers", "--corpus", "--output", "--top", "--data-dir", "--device",
                 "--batch-size", "--threads", "--no-progress"],
    "export": ["MODEL+SPEC", "--fit-corpus", "task:NAME", "--output", "--overwrite", "--revision", "--data-dir",
               "--cache-dir", "--device", "--batch-size", "--seed", "--threads", "--trust-remote-code",
               "--no-progress"],
}


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare word sequences


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_every_command_has_help_naming_its_options(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, command)
    for option in OPTIONS[command]:
        assert option in text, option


def test_main_help_lists_the_commands_and_readme_examples(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    for command in OPTIONS:
        assert command in text
    # the examples run as written: a model id with its organisation, the data folder the README names
    assert "--model google-bert/bert-base-uncased" in text and "--data-dir ../shared/data " in text
    assert "--model bert-base-uncased" not in text
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "--data-dir ../shared/data" in readme


def test_pooling_choices_are_the_backbones(capsys: pytest.CaptureFixture[str]) -> None:
    assert "{" + ",".join(POOLINGS) + "}" in _help(capsys, "run")


def test_list_names_every_method_and_every_carded_task(capsys: pytest.CaptureFixture[str]) -> None:
    from iso_bench.kinds.cards import cards, suites
    from iso_bench.methods import method_names

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    methods = [line.split()[0] for line in lines if line.startswith("  ") and line.split()[0] in method_names()]
    assert methods == ["raw", "center", "mean-proj", "clip", "abtt", "whiten", "cluster-pca", "flow", "zscore", "zca",
                       "zipfian-whiten", "softdecay", "truncate", "pca"]  # the README's order
    for card in cards():
        assert any(line.split()[:2] == [card.name, card.kind] and card.size in line for line in lines), card
    for suite in suites():
        assert f"  {suite} " in out or f"  {suite} * " in out


def test_list_is_plain_text_marks_the_defaults_and_names_mteb_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    from iso_bench.results.benchmark import DEFAULT_METHODS, STORAGE_METHODS

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and not re.search(r":(class|func|meth|mod):", out)  # no docstring markup
    assert "  abtt *  " in out and "  mteb-sts *  " in out and "  paper-sts    " in out  # what a bare run runs
    assert f"default methods (a run without --methods; --methods default): {' '.join(DEFAULT_METHODS)}" in out
    storage = "storage methods (--methods storage; with default, the benchmark's every method): "
    assert f"{storage}{' '.join(STORAGE_METHODS)}\n" in out
    assert '"MTEB(eng, v2)"' in out and "iso-bench list --benchmarks" in out
    assert main(["list", "--benchmarks"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert '  "MTEB(eng, v2)"  (41 tasks)' in every and '  "iso-bench v1"  (17 tasks)' in every
    assert '  "iso-bench v2"  (19 tasks)' in every and '  "iso-bench v3"  (19 tasks)' in every


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "--methods", "raw", "whitten"], ["--methods", "unknown method 'whitten'", "Did you mean 'whiten'"]),
        (["run", "--methods", "whiten-k"], ["--methods", "'whiten-k'", "n_components='k'"]),
        (["run", "--batch-size", "0"], ["--batch-size", "must be at least 1, got 0"]),
        (["run", "--batch-size", "many"], ["--batch-size", "'many' is not a whole number"]),
        (["run", "--pooling", "max"], ["--pooling", "'max'"]),
        (["outliers", "--top", "-1"], ["--top", "must be at least 1"]),
    ],
)
def test_bad_arguments_fail_while_parsing(argv: list[str], expected: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"iso-bench {argv[0]}: error: argument" in err and "Traceback" not in err
    for text in expected:
        assert text in err


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-results-here"
    assert main(["leaderboard", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iso-bench: error: ") and str(missing) in err and "Traceback" not in err


def test_only_iso_bench_errors_are_caught(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad input prints its message; anything else is a bug and keeps its traceback."""
    import iso_bench.cli as cli

    def bad_input(args: object) -> int:
        raise IsoBenchError("file 'x.txt' has no texts")

    def bug(args: object) -> int:
        raise FileNotFoundError("/internal/file")

    monkeypatch.setattr(cli, "cmd_list", bad_input)
    assert main(["list"]) == 2
    assert capsys.readouterr().err == "iso-bench: error: file 'x.txt' has no texts\n"
    monkeypatch.setattr(cli, "cmd_list", bug)
    with pytest.raises(FileNotFoundError, match="/internal/file"):
        main(["list"])


HEAVY = ("heavy = sorted(m for m in ('torch', 'mteb', 'transformers', 'dask', 'distributed') if m in sys.modules); "
         "assert not heavy, heavy")
HELP = "from iso_bench.cli import main\ntry:\n    main({argv})\nexcept SystemExit as e:\n    assert e.code == 0"


@pytest.mark.parametrize(
    "code",
    [
        "import iso_bench",
        HELP.format(argv=["--help"]),
        *(HELP.format(argv=[command, "--help"]) for command in sorted(OPTIONS)),
        "from iso_bench.cli import main\nassert main(['list']) == 0",
    ],
    ids=["import", "help", *(f"{command}-help" for command in sorted(OPTIONS)), "list"],
)
def test_help_and_list_load_neither_torch_nor_mteb_nor_dask(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n{HEAVY}"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_module_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "iso_bench.cli", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "usage: iso-bench" in proc.stdout, proc.stderr


CONSOLE = """
import logging
logging.basicConfig()
import datasets, huggingface_hub.utils as hub
from transformers.utils import logging as transformers_logging
from iso_bench.cli import console

def handlers():
    return {type(h).__name__ for name in ("", "transformers", "datasets") for h in logging.getLogger(name).handlers}

assert transformers_logging.is_progress_bar_enabled() and not datasets.are_progress_bars_disabled()
assert "_TqdmLoggingHandler" not in handlers()
with console(network=True, progress=False):
    # log lines are written through tqdm (never into a bar), the libraries' own loggers included
    assert handlers() == {"_TqdmLoggingHandler"}, handlers()
    # --no-progress: no model-loading, download or dataset bars either
    assert not transformers_logging.is_progress_bar_enabled()
    assert hub.are_progress_bars_disabled() and datasets.are_progress_bars_disabled()
assert "_TqdmLoggingHandler" not in handlers()
"""


def test_console_routes_logs_through_tqdm_and_no_progress_silences_library_bars() -> None:
    proc = subprocess.run([sys.executable, "-c", CONSOLE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["/tmp/my\nmodel", "/tmp/tab\there", "/tmp/it's\r\x1b\x7f", "/tmp/sep\u2028\x85é"])
def test_the_reproduce_command_keeps_a_control_character_of_a_model_name_on_one_line(name: str) -> None:
    from iso_bench.cli import build_parser
    from iso_bench.grid.plan import reproduce_command

    args = build_parser().parse_args(["run", "--model", name, "--methods", "raw", "--tasks", "STS12"])
    command = reproduce_command(args, name)
    assert len(command.splitlines()) == 1 and not any(c in command for c in "\n\r\t\x1b\x7f\x85\u2028")
    # bash reads it back into the very same arguments (the newline no longer a space: another folder)
    printed = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, check=True,
                             env={**os.environ, "LC_ALL": "C.UTF-8"}).stdout
    assert printed.decode("utf-8").split("\0")[:-1] == ["iso-bench", "run", "--model", name, "--methods", "raw",
                                                        "--tasks", "STS12"]


@pytest.mark.parametrize("flag, env, recorded", [(None, "native", "native"), ("avx2", "native", "avx2"),
                                                 ("native", None, "native"), (None, None, None),
                                                 ("avx2", None, "avx2")])
def test_the_reproduce_command_names_native_kernels_however_they_were_chosen(monkeypatch, flag, env,
                                                                             recorded) -> None:
    """Native kernels give other bits: the recorded command says --kernels native whether the flag or
    $ISO_BENCH_KERNELS chose them; a --kernels avx2 that beat ISO_BENCH_KERNELS=native is kept, so that the
    command run again in that shell runs avx2; the pinned mode by default adds nothing."""
    from iso_bench.cli import build_parser
    from iso_bench.grid.plan import reproduce_command

    if env is None:
        monkeypatch.delenv("ISO_BENCH_KERNELS", raising=False)
    else:
        monkeypatch.setenv("ISO_BENCH_KERNELS", env)
    argv = ["run", "--model", "org/m", "--methods", "raw", "--tasks", "STS12"] + (["--kernels", flag] if flag else [])
    command = reproduce_command(build_parser().parse_args(argv), "org/m")
    assert command.count("--kernels") == int(recorded is not None)
    assert recorded is None or command.endswith(f"--kernels {recorded}")
