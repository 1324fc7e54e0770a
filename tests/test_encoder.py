"""The fit corpus of a task: the unlabeled texts of its evaluation splits, both sides, deduplicated in order."""

from __future__ import annotations

import pytest

datasets = pytest.importorskip("datasets")

from iso_bench.data.fit_corpus import task_texts  # noqa: E402


def _task(test):
    """mteb's STSBenchmark task holding ``test`` as its data."""
    import mteb

    task = mteb.get_task("STSBenchmark")
    task.dataset, task.data_loaded = {"test": test}, True
    return task


PAIRS = {"sentence1": ["a cat", "a dog", "a cat"], "sentence2": ["the mat", "a cat", "a bird"],
         "score": [1.0, 2.0, 3.0]}


def test_task_texts_are_both_sides_deduplicated_in_first_seen_order() -> None:
    # column by column: sentence1 first, then sentence2; the float score column is not text
    assert task_texts(_task(datasets.Dataset.from_dict(PAIRS))) == ["a cat", "a dog", "the mat", "a bird"]


def test_task_texts_of_a_selected_dataset_follow_its_rows_not_the_table() -> None:
    # select() keeps the whole Arrow table behind an index mapping: only rows 2 and 0 count
    selected = datasets.Dataset.from_dict(PAIRS).select([2, 0])
    assert task_texts(_task(selected)) == ["a cat", "a bird", "the mat"]


def test_a_sampled_fit_corpus_is_seeded_ordered_and_recorded() -> None:
    from iso_bench.data.provider import CorpusProvider

    words = [f"text {i}" for i in range(40)]
    task = _task(datasets.Dataset.from_dict({"sentence1": words[:20], "sentence2": words[20:], "score": [1.0] * 20}))
    corpus = CorpusProvider("task", {"STSBenchmark": task}, sample=10, seed=3)("STSBenchmark")
    record = corpus.to_record()
    assert len(corpus.texts) == 10 and record["n_texts"] == 10 and record["n_texts_total"] == 40
    assert (record["sample"], record["sample_seed"]) == (10, 3) and corpus.key == "task:STSBenchmark@10"
    assert [words.index(t) for t in corpus.texts] == sorted(words.index(t) for t in corpus.texts)  # kept in order
    again = CorpusProvider("task", {"STSBenchmark": task}, sample=10, seed=3)("STSBenchmark")
    other = CorpusProvider("task", {"STSBenchmark": task}, sample=10, seed=4)("STSBenchmark")
    assert again.texts == corpus.texts and other.texts != corpus.texts
    whole = CorpusProvider("task", {"STSBenchmark": task}, sample=100, seed=3)("STSBenchmark")
    assert whole.texts == tuple(words)  # fewer texts than the sample: all of them, the sample still recorded


def test_the_runs_seed_is_part_of_the_setup_not_of_the_variants_name() -> None:
    from iso_bench.encoder import VariantEncoder

    seeded = VariantEncoder(None, "cluster-pca", seed=2)
    assert seeded.spec == "cluster-pca" and seeded._prototype.seed == 2  # one variant, fitted with seed 2
    assert seeded.config()["seed"] == 2
    fixed = VariantEncoder(None, "cluster-pca-seed=7", seed=2)
    assert fixed.spec == "cluster-pca-seed=7" and fixed._prototype.seed == 7  # a seed the spec sets stays
    assert VariantEncoder(None, "whiten-level=token", seed=2).spec == "whiten-level=token"


def test_the_texts_of_mtebs_loaders_are_read_as_iterating_them_gives_them() -> None:
    import mteb
    from mteb._create_dataloaders import create_dataloader

    from iso_bench.encoder import _texts

    texts = [f"text {i}" for i in range(70)]
    task = mteb.get_task("STSBenchmark")
    loader = create_dataloader(datasets.Dataset.from_dict({"text": texts}), task_metadata=task.metadata,
                               batch_size=32)
    assert _texts(loader) == [t for batch in loader for t in batch["text"]] == texts
    shuffled = __import__("torch").utils.data.DataLoader(datasets.Dataset.from_dict({"text": texts}), batch_size=8,
                                                         shuffle=True)
    assert sorted(_texts(shuffled)) == sorted(texts)  # not sequential: iterated, whatever order it gives
    assert _texts([{"text": ["a", "b"]}, {"text": ["c"]}]) == ["a", "b", "c"]  # any iterable of batches
    selected = __import__("torch").utils.data.DataLoader(datasets.Dataset.from_dict({"text": texts}).select([5, 1, 3]),
                                                         batch_size=2)
    assert _texts(selected) == ["text 5", "text 1", "text 3"]  # the rows a select() keeps, in its order
    transformed = datasets.Dataset.from_dict({"text": texts})
    transformed.set_transform(lambda batch: {"text": [t.upper() for t in batch["text"]]})
    assert _texts(__import__("torch").utils.data.DataLoader(transformed, batch_size=8))[:1] == ["TEXT 0"]
