"""``iso-bench run --skip-tasks``: the tasks of ``--tasks`` left out of this run (the slowest, for a later run).
Each result records the whole run's command (``--tasks`` as given, no ``--skip-tasks``), so the same command run
later writes the skipped tasks alone and leaves the results there as they are. A tiny random BERT folder on 40
pairs of STS12 and STS13."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import small_mirror


def _command(path: Path) -> str:
    return json.loads(path.read_text(encoding="utf-8"))["scores"]["test"][0]["iso_bench"]["command"]


def test_skipped_tasks_are_left_for_a_later_run_of_the_recorded_command(tiny_bert_dir: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from iso_bench.cli import main

    monkeypatch.chdir(tmp_path)
    mirror = small_mirror(tmp_path / "data", ["sts12-sts", "sts13-sts"], 40)
    given = ["run", "--model", str(tiny_bert_dir), "--methods", "raw", "center", "--tasks", "STS12", "STS13",
             "--data-dir", str(mirror), "--results", "out"]
    speed = ["--cache-dir", str(tmp_path / "cache"), "--threads", "1", "--no-progress"]
    assert main([*given, "--skip-tasks", "STS13", *speed]) == 0
    made = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("STS1*.json"))
    assert len(made) == 2 and all(p.endswith("/STS12.json") for p in made), made
    first = {p: (tmp_path / "out" / p).read_bytes() for p in made}
    recorded = {_command(tmp_path / "out" / p) for p in made}
    assert recorded == {f"iso-bench run --model ./{tiny_bert_dir.name} --methods raw center --tasks STS12 STS13 "
                        "--data-dir DATA"}, recorded

    assert main([*given, *speed]) == 0  # the recorded command: the skipped task alone is run
    now = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("STS1*.json"))
    assert len(now) == 4 and sum(p.endswith("/STS13.json") for p in now) == 2, now
    assert {p: (tmp_path / "out" / p).read_bytes() for p in made} == first  # those there are left as they were
    assert {_command(tmp_path / "out" / p) for p in now} == recorded


@pytest.mark.parametrize(("skipped", "said"), [
    (["STS17"], "--skip-tasks 'STS17': not a task of --tasks STS12 STS13 (STS12, STS13)"),
    (["STS12", "STS13"], "--skip-tasks leaves none of the tasks of --tasks STS12 STS13 to run"),
])
def test_a_skipped_name_not_among_the_tasks_is_refused_before_any_work(skipped: list[str], said: str, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from iso_bench.cli import main

    assert main(["run", "--tasks", "STS12", "STS13", "--skip-tasks", *skipped, "--results", str(tmp_path / "r"),
                 "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("iso-bench: error: ") and said in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()
