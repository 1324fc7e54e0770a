"""Run-level logging: a message repeated by every per-task fit is shown once per run."""

from __future__ import annotations

import logging

import pytest

from iso_bench.grid.runner import _Once


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("iso_bench.methods.whiten", logging.WARNING, __file__, 1, msg, args, None)


def test_each_distinct_message_passes_once() -> None:
    once = _Once()
    text = "method %r: %d of %d directions have no variance and are dropped"
    assert once.filter(_record(text, "whiten", 3, 384))
    assert not once.filter(_record(text, "whiten", 3, 384))  # the next task's fit says the same
    assert once.filter(_record(text, "whiten-256", 3, 384))  # another method: shown


def test_a_methods_warning_names_what_it_is_fitted_on_and_the_run_names_the_others(
        caplog: pytest.LogCaptureFixture) -> None:
    """whiten fitted on two tasks' vectors with a constant dimension: the first warning names STS12, the
    second (the same words) is said once at the end of the run, naming STS13."""
    import numpy as np

    from iso_bench.methods import make_method
    from iso_bench.methods.base import fitting_on

    X = np.random.default_rng(0).normal(size=(50, 4))
    X[:, 2] = 1.0
    once, log = _Once(), logging.getLogger("iso_bench.methods.whiten")
    log.addFilter(once)
    try:
        with caplog.at_level(logging.WARNING, logger="iso_bench.methods.whiten"):
            for task in ("STS12", "STS13"):
                with fitting_on(task):
                    make_method("whiten")[0].fit(X)
            make_method("whiten")[0].fit(X)  # fitted outside a run's fit: no corpus named
    finally:
        log.removeFilter(once)
    assert caplog.messages == ["method 'whiten' (fit on STS12): 1 of 4 directions have no variance and are dropped"]
    assert once.also() == ["the same on STS13: method 'whiten': 1 of 4 directions have no variance and are dropped"]


def test_the_filter_is_attached_to_the_method_loggers_only_during_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import iso_bench.grid.runner as runner

    seen = {}

    def fake_run(cfg):
        seen["filters"] = list(logging.getLogger("iso_bench.methods.whiten").filters)
        return "done"

    monkeypatch.setattr(runner, "_run", fake_run)
    assert runner.run(runner.RunConfig()) == "done"
    assert any(isinstance(f, _Once) for f in seen["filters"])
    assert not any(isinstance(f, _Once) for f in logging.getLogger("iso_bench.methods.whiten").filters)


def test_seeds_replicate_only_the_variants_a_seed_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    import iso_bench.grid.runner as runner

    calls = []

    monkeypatch.setattr(runner, "_prepare", lambda cfg: runner._Prepared([], {}, None, "r", 8))
    monkeypatch.setattr(runner, "_missing", lambda run, cache, variants: [set() for _ in variants])
    monkeypatch.setattr("iso_bench.grid.runner.install_result_hook", lambda: None)
    monkeypatch.setattr("mteb.cache.ResultCache", lambda path: None)
    monkeypatch.setattr(runner, "_start_variant", lambda cfg, run, spec, position, replicate, todo:
                        calls.append((spec, cfg.seed, replicate, position)))
    monkeypatch.setattr(runner, "_evaluate", lambda cfg, run, states, cache, summary: None)
    monkeypatch.setattr(runner, "_finish_variant", lambda state, run, cache, summary: None)
    cfg = runner.RunConfig(methods=["raw", "whiten", "flow", "cluster-pca-seed=7"], seeds=[0, 1, 1, 2])
    runner._run(cfg)
    assert [(spec, seed, rep) for spec, seed, rep, _ in calls] == [
        ("raw", 0, False), ("whiten", 0, False),  # nothing random: once
        ("flow", 0, True), ("flow", 1, True), ("flow", 2, True),  # each distinct seed once
        ("cluster-pca-seed=7", 0, False),  # the spec fixes its seed
    ]
    assert calls[3][3] == "variant 3/4 seed 1"
    calls.clear()
    runner._run(runner.RunConfig(methods=["whiten"], seeds=[3, 4], fit_sample=100))  # a sampled corpus: seeded
    assert [(spec, seed) for spec, seed, _, _ in calls] == [("whiten", 3), ("whiten", 4)]


def test_a_sampled_fit_corpus_puts_the_seed_in_the_setup(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from iso_bench.files import texts_digest
    from iso_bench.mteb_plugin import setup_kwargs

    monkeypatch.setenv("ISO_BENCH_DATA_DIR", str(tmp_path))  # where the data comes from is no part of a setup
    assert setup_kwargs("whiten", seed=3) == {"fit_corpus": "task"} and setup_kwargs("raw") == {}
    corpus = tmp_path / "wiki-sentences.txt"
    corpus.write_text("a text\nanother\na text\n", encoding="utf-8")
    assert setup_kwargs("whiten", fit_corpus=str(corpus)) == {  # a file by its name, its digest beside it
        "fit_corpus": "wiki-sentences.txt", "fit_corpus_sha256": texts_digest(["a text", "another"])[:12]}
    assert setup_kwargs("whiten", seed=3) == {"fit_corpus": "task"}
    assert setup_kwargs("whiten", seed=3, fit_sample=50) == {"fit_corpus": "task", "fit_sample": 50, "seed": 3}
    assert setup_kwargs("raw", seed=3, fit_sample=50) == {}


def test_a_fit_budget_other_than_the_default_is_part_of_the_setup_of_a_method_that_samples(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs with different --fit-budget write different result files where the budget can change the
    numbers (a method that does not stream fits on a sample of a corpus over the budget), and the same where it
    cannot (streaming methods, the default budget, raw)."""
    from iso_bench.mteb_plugin import setup_kwargs

    monkeypatch.delenv("ISO_BENCH_DATA_DIR", raising=False)
    monkeypatch.delenv("ISO_BENCH_FIT_BUDGET", raising=False)
    token = {"token_pooling": "model"}  # a token-level method, before the model's own pooling
    assert setup_kwargs("cluster-pca", seed=2) == {"fit_corpus": "task", "seed": 2, **token}
    assert setup_kwargs("cluster-pca", seed=2, fit_budget=100_000) == {"fit_corpus": "task", "seed": 2, **token}
    assert setup_kwargs("cluster-pca", seed=2, fit_budget=500) == {"fit_corpus": "task", "fit_budget": 500, "seed": 2,
                                                                   **token}
    assert setup_kwargs("whiten", seed=2, fit_budget=500) == {"fit_corpus": "task"}  # streams: budget-free
    assert setup_kwargs("raw", fit_budget=500) == {}
    monkeypatch.setenv("ISO_BENCH_FIT_BUDGET", "700")  # the environment's budget counts like the option's
    assert setup_kwargs("cluster-pca", seed=2)["fit_budget"] == 700


def test_a_store_kept_between_runs_recomputes_what_was_removed_and_is_dropped_with_its_folder(tmp_path) -> None:
    import shutil

    import numpy as np

    from iso_bench.vectors.store import EmbeddingStore
    from tests.conftest import KeywordBackbone

    store = EmbeddingStore(KeywordBackbone(["cat", "dog"]), tmp_path / "cache", progress=False)
    store.sentences(["cat dog", "dog"])
    assert store.intact()
    (shard,) = store.folder.glob("sentence-*.npz")
    shard.unlink()  # a shard removed between two runs of one process: its texts are encoded again
    assert np.array_equal(store.sentences(["dog"]), [[0.0, 1.0]]) and store.stats["computed"] == 3
    shutil.rmtree(tmp_path / "cache")  # the cache folder cleared: the store is not reused
    assert not store.intact()
    fresh = EmbeddingStore(KeywordBackbone(["cat", "dog"]), tmp_path / "cache", progress=False)
    assert np.array_equal(fresh.sentences(["dog"]), [[0.0, 1.0]]) and fresh.stats["computed"] == 1
