"""Each method's provenance line names only what the method records: its fit, fitted for real on vectors with two
dimensions without variance, rendered as the leaderboard renders it; no unknown-field marker ("?") in any
method's line, nor in the published provenance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iso_bench.methods import make_method, method_names
from iso_bench.report import read_results
from iso_bench.report.provenance import provenance
from iso_bench.results.failures import record_failure
from iso_bench.vectors.fit_cache import learned_summary
from tests.conftest import LEADERBOARDS
from tests.report_helpers import write_result

SPECS = {"cluster-pca": "cluster-pca-2-1"}  # few vectors: 2 clusters of 1 direction, fitted whole
# what the line says of the 2 constant dimensions of 16, by what each method records
SAID = {"whiten": "; 14 of 16 directions kept (2 without variance dropped)",
        "zca": "; 14 of 16 directions kept (2 without variance dropped)",
        "zipfian-whiten": "; 14 of 16 directions kept (2 without variance dropped)",
        "zscore": "; 2 of 16 dimensions without variance set to 0",
        "clip": "; dimensions zeroed: none"}


def fitted_line(tmp_path: Path, name: str) -> str:
    """The provenance line of ``name`` fitted on 400 random 16-d vectors whose dimensions 3 and 7 are constant."""
    spec = SPECS.get(name, name)
    method, level = make_method(spec)
    X = np.random.default_rng(0).normal(size=(400, 16))
    X[:, 3], X[:, 7] = 1.0, 0.0
    if type(method).fitted:
        method.fit(X)
    fits = [{"level": level, "n_vectors": len(X), "learned": learned_summary(method)}] if type(method).fitted else []
    write_result(tmp_path, "org/m", spec, "STS12", 0.7, fits=fits)
    (line,) = dict(provenance(read_results(tmp_path)))["fit"]
    return line


@pytest.mark.parametrize("name", method_names())
def test_each_method_names_only_the_fields_it_has(tmp_path: Path, name: str) -> None:
    line = fitted_line(tmp_path, name)
    assert "?" not in line, line
    said = SAID.get(name, "")
    assert line.endswith(f"seed 0{said}") if name != "raw" else line == "raw: nothing fitted", line


def test_a_failed_evaluation_adds_nothing_unknown_to_the_provenance(tmp_path: Path) -> None:
    """A failure recorded beside the results (``<task>.failed``, the isotropy diagnostic of a static encoder's
    cluster-pca) shows as – with its reason; the provenance lists the results' own records and no "not recorded"."""
    write_result(tmp_path, "org/m", "raw", "STS12", 0.7)
    folder = next((tmp_path / "results").glob("org__m+raw/*"))
    record_failure(folder.parent.parent / "org__m+whiten" / folder.name / "STS12.json", "org/m+whiten", "STS12",
                   "average_cosine: 3 zero vectors have no direction")
    results = read_results(tmp_path)
    assert len(results) == 2 and sum("failed" in r.record for r in results) == 1
    assert provenance(results) == provenance([r for r in results if "failed" not in r.record])
    lines = [value for _, values in provenance(results) for value in values]
    assert not [line for line in lines if "not recorded" in line or "?" in line], lines


def test_the_published_provenance_has_no_unknown_field() -> None:
    text = (LEADERBOARDS / "leaderboard.md").read_text(encoding="utf-8")
    provenance_lines = [line for line in text.splitlines() if line.startswith(("- ", "  - "))]
    assert provenance_lines and not [line for line in provenance_lines if "?" in line]
