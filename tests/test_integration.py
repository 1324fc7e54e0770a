"""End to end on the real all-MiniLM-L6-v2 and the STS-B test set from the shared data mirror.

Published reference: MTEB's official result for sentence-transformers/all-MiniLM-L6-v2 at revision
8b3219a92973c328a8e22fadcfa821b5dc75636a on STSBenchmark, cosine Spearman 0.8203247 (file
results/sentence-transformers__all-MiniLM-L6-v2/8b3219a.../STSBenchmark.json of the
embeddings-benchmark/results repository).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import MINILM

pytestmark = pytest.mark.slow
PUBLISHED_STSB = 0.8203247
# MTEB's official cosine Spearman of all-MiniLM-L6-v2 @ 8b3219a (embeddings-benchmark/results, files
# results/sentence-transformers__all-MiniLM-L6-v2/8b3219a.../<task>.json); STS14's file was not in the copy
# of that repository we could read, so STS14 is checked against mteb's own wrapper in the issue note only.
PUBLISHED = {"STS12": 0.72369, "STS13": 0.8060317, "STS15": 0.8538962, "STS16": 0.7898945,
             "STSBenchmark": PUBLISHED_STSB, "SICK-R": 0.7758246}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, hub_mirror, minilm_backbone):
    from iso_bench.cli import main

    results = tmp_path_factory.mktemp("results")
    cache = tmp_path_factory.mktemp("cache")
    args = ["run", "--methods", "raw", "whiten-256", "cluster-pca", "--tasks", "STSBenchmark", "isotropy",
            "--results", str(results), "--cache-dir", str(cache), "--data-dir", str(hub_mirror), "--no-progress"]
    assert main(args) == 0
    return results, cache, args


def _entry(results, variant: str, task: str = "STSBenchmark") -> dict:
    folder = results / "results" / (MINILM.replace("/", "__") + "+" + variant)
    (path,) = folder.glob(f"*/**/{task}.json")
    return json.loads(path.read_text())["scores"]["test"][0]


def test_raw_variant_reproduces_the_published_mteb_score(cli_run) -> None:
    results, _, _ = cli_run
    assert _entry(results, "raw")["main_score"] == pytest.approx(PUBLISHED_STSB, abs=5e-4)


def test_results_are_readable_by_mteb_and_carry_provenance(cli_run) -> None:
    import mteb

    results, _, _ = cli_run
    cache = mteb.ResultCache(results)
    loaded = cache.load_results(models=[f"{MINILM}+raw", f"{MINILM}+whiten-256"], tasks=["STSBenchmark"],
                                load_experiments="match_name")
    assert {m.model_name for m in loaded.model_results} == {f"{MINILM}+raw", f"{MINILM}+whiten-256"}
    fit = _entry(results, "whiten-256")["iso_bench"]["fit"]
    assert fit["fit_corpus"] == "task" and fit["task"] == "STSBenchmark" and fit["splits"] == ["test"]
    # the unlabeled texts of STS-B test: both sides of 1,379 pairs, deduplicated
    assert 2000 < fit["n_texts"] < 2 * 1379 and len(fit["texts_sha256"]) == 64
    record = _entry(results, "cluster-pca")["iso_bench"]
    assert record["variant"]["level"] == "token" and record["fit"]["fits"][0]["level"] == "token"
    assert record["fit"]["fits"][0]["n_vectors"] > 10 * record["fit"]["n_texts"]
    assert record["data"]["source"] == "mirror" and len(record["data"]["sha256"]) == 64
    assert record["revision"] == "8b3219a92973c328a8e22fadcfa821b5dc75636a"


def test_a_rerun_with_every_result_present_loads_no_model(cli_run, capsys, monkeypatch) -> None:
    import iso_bench.grid.runner
    from iso_bench.cli import main

    _, _, args = cli_run
    monkeypatch.setattr(iso_bench.grid.runner, "_LOADED", {})
    monkeypatch.setattr(iso_bench.grid.runner, "load_backbone", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(args) == 0
    assert "raw vectors: 0 texts encoded, 0 reused from the cache; fits: 0 run, 0 loaded" in capsys.readouterr().out


def test_second_run_encodes_nothing_fits_nothing_and_scores_the_same(cli_run, capsys) -> None:
    from iso_bench.cli import main

    results, _, args = cli_run
    before = {v: _entry(results, v)["main_score"] for v in ("raw", "whiten-256", "cluster-pca")}
    assert main([*args, "--overwrite"]) == 0
    out = capsys.readouterr().out
    assert "raw vectors: 0 texts encoded" in out
    # whiten-256 and cluster-pca, on 2 tasks each (and the isotropy task's token-level fit of whiten-256)
    assert int(re.search(r"fits: 0 run, (\d+) loaded from the fit cache", out).group(1)) >= 4
    assert {v: _entry(results, v)["main_score"] for v in before} == before  # cached fits: the same numbers


def test_mteb_get_model_gives_the_runner_number(cli_run, hub_mirror) -> None:
    import mteb

    import iso_bench  # noqa: F401 - registers the variants
    from iso_bench.data.sources import get_task
    from iso_bench.encoder import VariantEncoder

    results, cache, _ = cli_run
    model = mteb.get_model(f"{MINILM}+whiten-256", cache_dir=str(cache), data_dir=str(hub_mirror))
    assert isinstance(model, VariantEncoder)
    result = mteb.evaluate(model, get_task("STSBenchmark", hub_mirror), cache=None, show_progress_bar=False)
    assert result.task_results[0].get_score() == pytest.approx(_entry(results, "whiten-256")["main_score"], abs=1e-6)


def test_isotropy_task_measures_the_variant(cli_run) -> None:
    results, _, _ = cli_run
    raw = _entry(results, "raw", "Isotropy-STSB")
    white = _entry(results, "whiten-256", "Isotropy-STSB")
    # whitened fit vectors have identity covariance: every direction carries 1/256 of the variance,
    # so IsoScore is 1 and the first principal component holds 1/256 of it
    assert white["sentence_isoscore"] == pytest.approx(1.0, abs=1e-6)
    assert white["sentence_pc1_variance_ratio"] == pytest.approx(1 / 256, abs=1e-6)  # mteb rounds to 6 places
    # IsoScore*'s C0: the model's token vectors under each variant's sentence map (whiten-256: its sentence fit's
    # principal coordinates; cluster-pca: what its pooling reads), so every variant's is in its own coordinates
    assert all(_entry(results, v, "Isotropy-STSB")["isoscore_star_c0_tokens_mapped"] == 1
               for v in ("raw", "whiten-256", "cluster-pca"))
    from iso_bench.report import build_leaderboard, read_results

    notes = [n for s in build_leaderboard(read_results(results), ci=False).sections for t in s.tables for n in t.notes]
    assert any("the model's token vectors under the variant's own sentence map" in n for n in notes)  # the board: how
    assert raw["main_score"] == raw["sentence_iw"] and 0 < raw["sentence_iw"] < 1
    assert raw["n_sentences"] == 2552 and raw["n_tokens"] > 10 * raw["n_sentences"]
    assert white["iso_bench"]["fit"]["task"] == "Isotropy-STSB"


def test_raw_reproduces_mtebs_published_sts_scores(cli_run, hub_mirror) -> None:
    """The issue's acceptance check: the raw variant is within 0.5 points of MTEB's official scores."""
    from iso_bench.grid.runner import RunConfig, run

    results, cache, _ = cli_run
    summary = run(RunConfig(methods=["raw"], tasks=["mteb-sts"], results_dir=results, cache_dir=cache,
                            data_dir=hub_mirror, progress=False))
    row = summary.scores[f"{MINILM}+raw"]
    for task, published in PUBLISHED.items():
        assert abs(row[task] - published) < 0.005, task
        assert row[task] == pytest.approx(published, abs=5e-4), task  # in fact, to the 4th decimal
    assert 0.70 < row["STS14"] < 0.80
