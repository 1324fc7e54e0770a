"""No result whose main score is not a finite number is ever written or counted as done.

A method whose vectors are degenerate on a task (here: ``center`` forced to return zero vectors, whose cosine
similarities are NaN) fails that cell with one line naming the variant and the task, writes no result and makes
the run exit 1; through ``mteb.evaluate`` it raises. A NaN result that an earlier version wrote is not done for
``--dry-run`` and is set aside and computed again by the run. (Parameters that are not finite are refused when
the spec is parsed: tests/test_method_checks.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from iso_bench.backbones.base import model_label
from iso_bench.cli import main
from iso_bench.methods.center import Center
from tests.conftest import small_mirror
from tests.test_integrity import evaluate, make_variant


@pytest.fixture
def zero_center(monkeypatch: pytest.MonkeyPatch) -> None:
    """``center`` returns zero vectors: every cosine similarity, and so the Spearman correlation, is NaN."""
    monkeypatch.setattr(Center, "transform", lambda self, X: np.zeros(np.shape(X)))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_mirror(tmp_path_factory.mktemp("mirror"), ["sts12-sts"], 40)


def _run(tiny_bert_dir: Path, mirror: Path, tmp_path: Path, *extra: str) -> int:
    return main(["run", "--model", str(tiny_bert_dir), "--methods", "raw", "center", "--tasks", "STS12",
                 "--data-dir", str(mirror), "--results", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache"),
                 "--no-progress", *extra])


def _results(tmp_path: Path, spec: str) -> list[Path]:
    return sorted((tmp_path / "res" / "results").glob(f"*+{spec}/*/**/STS12.json"))


def test_a_variant_whose_score_is_not_finite_fails_in_one_line_and_writes_no_result(
        tiny_bert_dir: Path, mirror: Path, tmp_path: Path, zero_center: None, capsys: pytest.CaptureFixture) -> None:
    assert _run(tiny_bert_dir, mirror, tmp_path) == 1
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if "is not a finite number" in line]
    name = model_label(str(tiny_bert_dir))  # a local folder by its name
    assert lines == [f"  {name}+center on STS12: main score test/default: nan is not a finite number, so no "
                     "result was written; the method's vectors are degenerate on this task (all equal, zero or not "
                     "finite): check its parameters, or leave the variant out"]
    assert re.search(r"\| center +\| – +\|", out)  # the table shows the cell missing, not nan
    assert not re.search(r"\bnan\b", out.lower())  # (not "provenance")
    assert _results(tmp_path, "center") == [] and len(_results(tmp_path, "raw")) == 1
    assert _run(tiny_bert_dir, mirror, tmp_path, "--dry-run") == 0  # not counted as done
    assert "1/2" in capsys.readouterr().out


def test_mteb_evaluate_raises_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iso_bench.methods.raw import Raw
    from iso_bench.mteb_plugin import NonFiniteScore

    monkeypatch.setattr(Raw, "transform", lambda self, X: np.zeros(np.shape(X)))
    variant = make_variant()
    with pytest.raises(NonFiniteScore, match=r"^test/keywords\+raw on STSBenchmark: main score test/default: nan is"):
        evaluate(variant, tmp_path)
    assert not list(tmp_path.rglob("STSBenchmark.json"))


def test_a_nan_result_of_an_earlier_version_is_not_done_and_is_computed_again(
        tiny_bert_dir: Path, mirror: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _run(tiny_bert_dir, mirror, tmp_path) == 0
    (path,) = _results(tmp_path, "center")
    good = json.loads(path.read_text())["scores"]["test"][0]["main_score"]
    path.write_text(re.sub(r'"main_score": [-0-9.e]+', '"main_score": NaN', path.read_text()))
    capsys.readouterr()
    assert _run(tiny_bert_dir, mirror, tmp_path, "--dry-run") == 0
    plan = capsys.readouterr().out
    assert re.search(r"STS12 +1/2 +1 to run", plan), plan
    assert path.read_text().count("NaN") == 1  # the plan changes nothing
    assert _run(tiny_bert_dir, mirror, tmp_path) == 0
    assert json.loads(path.read_text())["scores"]["test"][0]["main_score"] == good  # computed again
    assert "NaN" in path.with_name("STS12.json.nonfinite").read_text()  # set aside, not deleted
    assert "has a main score that is not a finite number (test/default: nan)" in capsys.readouterr().err
