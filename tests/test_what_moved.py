"""leaderboards/what_moved.py: every main score of one results folder beside its counterpart in another, each move
larger than 1e-6 given a cause."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import LEADERBOARDS

spec = importlib.util.spec_from_file_location("what_moved", LEADERBOARDS / "what_moved.py")
what_moved = importlib.util.module_from_spec(spec)
spec.loader.exec_module(what_moved)
MINILM = "sentence-transformers__all-MiniLM-L6-v2"


@pytest.mark.parametrize(("model", "spec", "task", "kind", "diff", "expected"), [
    (MINILM, "whiten", "STS12", "STS", 1e-6, ""),  # within 1e-6: not attributed
    ("local__static-all-MiniLM-L6-v2", "raw", "WiC", "WiC", -0.0071, "rows: the static encoder's folder"),
    (MINILM, "cluster-pca", "STS12", "STS", 0.003, "pooling: the model's own"),
    (MINILM, "zipfian-whiten-precision=int8", "STS12", "STS", 0.003, "pooling: the model's own"),
    (MINILM, "center-level=token", "STS12", "STS", 0.003, "pooling: the model's own"),
    (MINILM, "whiten-256", "Isotropy-STSB", "Isotropy", -0.32, "rounding: I(W) of whitened vectors"),
    (MINILM, "center", "Isotropy-STSB", "Isotropy", 2e-4, "unexplained"),  # centred vectors are not whitened
    (MINILM, "whiten", "STS12", "STS", 8e-6, "rounding"),
    (MINILM, "whiten", "STS12", "STS", 2e-5, "unexplained"),  # no units to look at
])
def test_each_move_larger_than_1e6_gets_the_first_cause_that_applies(model, spec, task, kind, diff, expected):
    assert what_moved.cause(model, spec, task, kind, diff, None, None) == expected


def test_a_near_tie_counts_the_instances_whose_output_differs() -> None:
    old = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    new = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])  # two rows differ
    assert what_moved.cause(MINILM, "whiten", "Banking77Classification", "Classification", 0.01, old, new) == \
        "near-tie: 2 of 4 decisions differ"
    assert what_moved.cause(MINILM, "whiten", "SciFact", "Retrieval", -0.01, old[:, 0], new[:, 0]) == \
        "near-tie: 2 of 4 queries' metrics differ"
    cosines = np.array([[1.0, 5.0], [1.0, 0.0], [0.5, 2.0]])  # two pairs of identical texts, tied at cosine 1
    rounded = cosines - [[0.0, 0.0], [2 ** -24, 0.0], [0.0, 0.0]]  # one float32 ulp below 1: the tie is broken
    assert what_moved.cause(MINILM, "whiten", "STS12", "STS", 0.01, cosines, rounded) == \
        "near-tie: 1 of 3 similarities moved by at most 6e-08, reordering near-equal ones"


STATIC = "local__static-all-MiniLM-L6-v2"


@pytest.mark.parametrize(("old", "mid", "new", "expected"), [
    (0.5, 0.49, 0.49, "rows: the static encoder's folder"),  # the old code on the new rows gives the new score
    (0.5, 0.5, 0.49, "pooling: the model's own"),  # the old code on the new rows gives the old score: the code's
    (0.5, 0.49, 0.48, "rows: the static encoder's folder; pooling: the model's own"),  # both moved it
    (0.5, None, 0.49, "rows: the static encoder's folder (the code's share not measured)"),  # no old-code result
    (0.5, 0.49, 0.5 + 1e-7, ""),  # within 1e-6 overall: nothing to attribute
    (0.5, 0.5 + 9e-7, 0.5 + 1.8e-6, "rows: the static encoder's folder"),  # neither share above 1e-6, both more
])
def test_a_static_move_is_split_into_its_rows_and_the_codes_share(old, mid, new, expected) -> None:
    got = what_moved.split_cause(STATIC, "cluster-pca", "STS12", "STS", (old, None), mid and (mid, None), (new, None))
    assert got == expected
    assert what_moved.split_cause(MINILM, "whiten", "STS12", "STS", (0.5, None), None, (0.5 + 8e-6, None)) == "rounding"


def test_two_folders_are_matched_result_by_result(tmp_path: Path, capsys) -> None:
    """The same committed result in both folders, then with its main score moved by hand in one."""
    found = sorted((LEADERBOARDS / "v3" / "results").glob("local__static-all-MiniLM-L6-v2+raw/*/STS12-SentEval.json"))
    assert found, "v3's committed results hold the static encoder's raw STS12-SentEval"
    for name in ("old", "new"):
        folder = tmp_path / name / "results" / found[0].parent.parent.name / found[0].parent.name
        folder.mkdir(parents=True)
        for path in found[0].parent.glob("STS12-SentEval.*"):
            shutil.copy(path, folder / path.name)
    what_moved.main([str(tmp_path / "old"), str(tmp_path / "new"), "--csv", str(tmp_path / "same.csv")])
    row = (tmp_path / "same.csv").read_text(encoding="utf-8").splitlines()[1].split(",")
    assert row[1:4] == ["raw", "-", "STS12-SentEval"] and row[-2:] == ["True", ""]  # same units, nothing to explain
    moved = tmp_path / "new" / "results" / found[0].relative_to(found[0].parents[2])
    data = json.loads(moved.read_text(encoding="utf-8"))
    data["scores"]["test"][0]["main_score"] += 0.5
    moved.write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    what_moved.main([str(tmp_path / "old"), str(tmp_path / "new")])
    assert "| local__static-all-MiniLM-L6-v2 | rows: the static encoder's folder | 1 |" in capsys.readouterr().out


def test_a_missing_units_file_stops_the_comparison_naming_it(tmp_path: Path) -> None:
    """A folder without the units files its results record (v2's working tree) is refused, never compared as
    'units not the same'."""
    found = sorted((LEADERBOARDS / "v3" / "results").glob("local__static-all-MiniLM-L6-v2+raw/*/STS12-SentEval.json"))
    folder = tmp_path / "old" / "results" / found[0].parent.parent.name / found[0].parent.name
    folder.mkdir(parents=True)
    shutil.copy(found[0], folder / found[0].name)  # the result file alone
    with pytest.raises(SystemExit, match=r"STS12-SentEval.instances.npz: the units file that .* is missing\. .*"
                                         r"git restore --source=iso-bench-v2"):
        what_moved.scores(tmp_path / "old")
