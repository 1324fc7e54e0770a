"""Variants on MTEB's classification and retrieval tasks (real mirrors), setups as identities, and the
provenance on mteb's own path.

Published references: MTEB's official all-MiniLM-L6-v2 (revision 8b3219a9...) Banking77Classification
accuracy 0.80042 and SciFact nDCG@10 0.64508 (embeddings-benchmark/results); ../shared/data/README.md states
that mteb reproduces both exactly on these mirrors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from iso_bench.data.provider import normalised
from iso_bench.files import texts_digest
from tests.conftest import MINILM, SHARED_DATA

pytestmark = pytest.mark.slow
BANKING77 = SHARED_DATA / "hub" / "mteb" / "banking77"
SCIFACT = SHARED_DATA / "hub" / "mteb" / "scifact"


def _split_texts(folder: Path, split: str, config: str | None = None, column: str = "text") -> list[str]:
    import datasets

    data = datasets.load_dataset(str(folder), config, split=split)
    return list(dict.fromkeys(data[column]))


def _results(results: Path, variant: str, task: str) -> list[Path]:
    folder = results / "results" / (MINILM.replace("/", "__") + "+" + variant)
    return sorted(folder.glob(f"*/**/{task}.json"))


def _entry(path: Path) -> dict:
    return json.loads(path.read_text())["scores"]["test"][0]


@pytest.fixture(scope="module")
def banking(tmp_path_factory, minilm_backbone, vector_cache):
    from iso_bench.grid.runner import RunConfig, run

    if not BANKING77.is_dir():
        pytest.skip(f"{BANKING77} is not here")
    results = tmp_path_factory.mktemp("banking-results")
    common = dict(tasks=["Banking77Classification"], results_dir=results, cache_dir=vector_cache,
                  data_dir=SHARED_DATA, progress=False)
    task_run = run(RunConfig(methods=["raw", "whiten", "cluster-pca"], **common))
    train_run = run(RunConfig(methods=["whiten"], fit_corpus="train", **common))
    return results, task_run, train_run


def test_raw_reproduces_mtebs_banking77_accuracy(banking) -> None:
    _, task_run, _ = banking
    assert task_run.scores[f"{MINILM}+raw"]["Banking77Classification"] == pytest.approx(0.80042, abs=1e-4)


def test_fitted_variants_run_and_record_their_fit_corpora(banking) -> None:
    results, task_run, train_run = banking
    row = task_run.scores
    raw = row[f"{MINILM}+raw"]["Banking77Classification"]
    for variant in ("whiten", "cluster-pca"):
        score = row[f"{MINILM}+{variant}"]["Banking77Classification"]
        assert score is not None and abs(score - raw) > 1e-4, variant
    test_texts = _split_texts(BANKING77, "test")
    train_texts = _split_texts(BANKING77, "train")
    assert (len(test_texts), len(train_texts)) == (3080, 10003)
    by_setup = {p.parent.name: _entry(p)["iso_bench"]["fit"] for p in _results(results, "whiten",
                                                                              "Banking77Classification")}
    assert set(by_setup) == {"fit_corpus_task", "fit_corpus_train"}  # read from the mirror: no route in the setup
    task_fit, train_fit = by_setup["fit_corpus_task"], by_setup["fit_corpus_train"]
    assert (task_fit["n_texts"], task_fit["texts_sha256"]) == (3080, texts_digest(test_texts))
    # the training split held out from the evaluated texts: a train text equal to a test text is not fitted on
    evaluated = {normalised(t) for t in test_texts}
    held_out = [t for t in train_texts if normalised(t) not in evaluated]
    assert 0 < train_fit["held_out_removed"] == len(train_texts) - len(held_out)
    assert (train_fit["n_texts"], train_fit["texts_sha256"]) == (len(held_out), texts_digest(held_out))
    assert task_fit["splits"] == ["test"] and train_fit["splits"] == ["train"]
    cpca = _entry(_results(results, "cluster-pca", "Banking77Classification")[0])["iso_bench"]
    assert cpca["fit"]["n_texts"] == 3080 and cpca["fit"]["fits"][0]["level"] == "token"
    assert cpca["task_type"] == "Classification" and cpca["data"]["source"] == "mirror"


def test_two_fit_corpora_keep_both_results_and_the_leaderboard_shows_both(banking) -> None:
    from iso_bench.report import build_leaderboard, read_results, render_markdown

    results, _, train_run = banking
    assert len(_results(results, "whiten", "Banking77Classification")) == 2  # the second run deleted nothing
    found = [r for r in read_results(results) if r.variant == "whiten"]
    assert len(found) == 2 and len({r.main_score for r in found}) == 2
    markdown = render_markdown(build_leaderboard(read_results(results)))
    assert "whiten [fitted on test texts]" in markdown and "whiten [fitted on the training split]" in markdown


def test_a_task_without_a_train_split_is_refused_before_any_encode(tmp_path, vector_cache) -> None:
    from iso_bench.data.fit_corpus import FitCorpusError
    from iso_bench.grid.runner import RunConfig, run

    with pytest.raises(FitCorpusError, match="STS12"):  # its dataset has a test split only
        run(RunConfig(methods=["whiten"], tasks=["STS12"], fit_corpus="train", results_dir=tmp_path,
                      cache_dir=tmp_path / "cache", data_dir=SHARED_DATA, progress=False))
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.npz"))


def test_mteb_evaluate_writes_the_provenance_the_leaderboard_prints(tmp_path, minilm_backbone, vector_cache) -> None:
    import mteb

    import iso_bench  # noqa: F401 - registers the variants
    from iso_bench.data.sources import get_task
    from iso_bench.report import build_leaderboard, read_results, render_markdown

    model = mteb.get_model(f"{MINILM}+whiten", cache_dir=str(vector_cache), data_dir=str(SHARED_DATA))
    mteb.evaluate(model, get_task("STSBenchmark", SHARED_DATA), cache=mteb.ResultCache(tmp_path),
                  show_progress_bar=False)
    (path,) = (tmp_path / "results").glob("*/*/experiments/*/STSBenchmark.json")
    record = _entry(path)["iso_bench"]
    fit = record["fit"]
    assert fit["fit_corpus"] == "task" and fit["task"] == "STSBenchmark" and 2000 < fit["n_texts"] < 2 * 1379
    assert record["data"]["source"] == "mirror" and record["task_type"] == "STS"
    assert record["variant"]["method"] == "whiten" and record["revision"] == minilm_backbone.revision
    markdown = render_markdown(build_leaderboard(read_results(tmp_path)))
    assert "whiten (eps=0.0, n_components=null): fit on the evaluated task's own texts (split test" in markdown
    assert record["data"]["sha256"] in markdown and "vectors=mteb" in markdown


def test_a_relative_model_folder_runs(tmp_path, tiny_bert_dir, monkeypatch) -> None:
    from iso_bench.cli import main

    monkeypatch.chdir(tiny_bert_dir.parent)
    code = main(["run", "--model", tiny_bert_dir.name, "--methods", "raw", "center", "--tasks", "STSBenchmark",
                 "--results", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache"), "--data-dir",
                 str(SHARED_DATA), "--no-progress"])
    assert code == 0
    assert len(list((tmp_path / "res" / "results").glob("*/*/**/STSBenchmark.json"))) == 2


@pytest.mark.skipif(not os.environ.get("ISO_BENCH_SCIFACT"), reason="SciFact encodes 5,483 texts (about 10 min "
                    "on 2 CPU cores): set ISO_BENCH_SCIFACT=1 to run it")
def test_scifact_raw_reproduces_mteb_and_fits_cover_queries_and_corpus(tmp_path, minilm_backbone,
                                                                         vector_cache) -> None:
    from iso_bench.grid.runner import RunConfig, run

    summary = run(RunConfig(methods=["raw", "whiten", "cluster-pca"], tasks=["SciFact"], results_dir=tmp_path,
                            cache_dir=vector_cache, data_dir=SHARED_DATA, progress=False))
    row = {v.rpartition("+")[2]: s["SciFact"] for v, s in summary.scores.items()}
    print("SciFact nDCG@10:", row)
    assert row["raw"] == pytest.approx(0.64508, abs=1e-4)
    assert abs(row["whiten"] - row["raw"]) > 1e-4 and abs(row["cluster-pca"] - row["raw"]) > 1e-4
    fit = _entry(_results(tmp_path, "whiten", "SciFact")[0])["iso_bench"]["fit"]
    # the queries mteb evaluates (those with relevance judgements in test) and every corpus document
    import datasets

    qrels = datasets.load_dataset(str(SCIFACT), "default", split="test")
    judged = set(map(str, qrels["query-id"]))
    queries = datasets.load_dataset(str(SCIFACT), "queries", split="queries")
    corpus = datasets.load_dataset(str(SCIFACT), "corpus", split="corpus")
    query_texts = [q["text"] for q in queries if str(q["_id"]) in judged]
    documents = [f"{d['title']} {d['text']}".strip() if d["title"] else d["text"].strip() for d in corpus]
    expected = list(dict.fromkeys(query_texts + documents))
    assert fit["n_texts"] == len(expected) and fit["texts_sha256"] == texts_digest(expected)
