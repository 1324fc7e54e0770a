"""The fit corpus of a task: the unlabeled texts of its evaluation splits, both sides, deduplicated in order."""

from __future__ import annotations

import pytest

datasets = pytest.importorskip("datasets")

from iso_bench.fit_corpus import task_texts  # noqa: E402


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
