"""A fresh run reproduces iso-bench v3's published instance files byte for byte (leaderboards/v3/README.md,
"Reproduced"): all-MiniLM-L6-v2 on STS12-SentEval from an empty cache, in the default kernels, raw and whiten with
its int8 and binary codes fitted on the test texts. The units files hold every per-instance score the board's
intervals and paired tests are computed from, so equal bytes mean the same board."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LEADERBOARDS, MINILM, SHARED_DATA

pytestmark = pytest.mark.slow
REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"
TASK = "STS12-SentEval"
SETUP = {"raw": "", "whiten": "experiments/fit_corpus_task", "whiten-precision=int8": "experiments/fit_corpus_task",
         "whiten-precision=binary": "experiments/fit_corpus_task"}


def _file(results: Path, spec: str) -> Path:
    folder = results / "results" / f"{MINILM.replace('/', '__')}+{spec}" / REVISION / SETUP[spec]
    return folder / f"{TASK}.instances.npz"


def test_a_fresh_run_gives_v3s_published_instance_files_byte_for_byte(tmp_path: Path, minilm_backbone) -> None:
    from iso_bench.cli import main

    if not (SHARED_DATA / "senteval").is_dir():
        pytest.skip(f"the SentEval STS files are not in {SHARED_DATA}")
    published = LEADERBOARDS / "v3"
    out = tmp_path / "out"
    args = ["run", "--model", MINILM, "--methods", *SETUP, "--tasks", TASK, "--fit-corpus", "task",
            "--results", str(out), "--cache-dir", str(tmp_path / "cache"), "--data-dir", str(SHARED_DATA),
            "--no-progress"]
    assert main(args) == 0
    for spec in SETUP:
        made, committed = _file(out, spec), _file(published, spec)
        assert committed.is_file(), committed
        assert made.read_bytes() == committed.read_bytes(), spec
