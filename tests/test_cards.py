"""The task cards: a contract over every registered task, and a new kind added from outside the package."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iso_bench.backbones.base import model_label
from iso_bench.kinds import Kind, kind_class
from iso_bench.kinds.cards import CARDS, Group, TaskCard, cards, expand_tasks, suites

ALL = [c.name for c in cards()]


@pytest.mark.parametrize("name", ALL)
def test_card_contract(name: str) -> None:
    card = CARDS.get(name)
    assert card.name and card.kind and card.suite and card.size and card.splits
    assert isinstance(card.group, Group) and card.group.key and card.group.title and card.group.metric
    assert card.column  # the leaderboard label
    assert name in suites()[card.suite] and name in suites()["all"]
    assert card.module.startswith("iso_bench.tasks")
    if card.is_mteb:
        return
    assert issubclass(kind_class(card), Kind)
    for field in ("description", "reference", "type", "main_score", "citation"):
        assert card.metadata.get(field), f"{name}: metadata.{field}"


@pytest.mark.parametrize("name", ALL)
def test_card_builds_the_mteb_task(name: str) -> None:
    """Every card is an mteb task with the card's splits; MTEB's own tasks match the card's size."""
    import mteb

    import iso_bench  # noqa: F401 - registers the tasks

    card = CARDS.get(name)
    task = mteb.get_task(name)
    assert list(task.metadata.eval_splits) == list(card.splits)
    if card.is_mteb:
        stats = [(task.metadata.descriptive_stats or {})[s] for s in card.splits]
        if "num_queries" in stats[0]:  # retrieval: queries and documents
            n, docs = (sum(s[k] for s in stats) for k in ("num_queries", "num_documents"))
            assert card.size == f"{n:,} test queries, {docs:,} documents"
        else:  # pairs (STS) or texts (classification), then what else the card says (a training split's size)
            n = sum(s["num_samples"] for s in stats)
            assert card.size.split(";")[0].split(", train")[0] in (f"{n:,} test pairs", f"{n:,} test texts")
    else:
        assert task.card is card and task.metadata.main_score == card.metadata["main_score"]


def test_groups_are_declared_once() -> None:
    by_key: dict[str, Group] = {}
    for card in cards():
        assert by_key.setdefault(card.group.key, card.group) == card.group


def test_suites_expand_in_card_order_without_repeats() -> None:
    assert expand_tasks(["STSBenchmark", "mteb-sts"]) == [
        "STSBenchmark", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R"]
    assert expand_tasks(["Banking77Classification"]) == ["Banking77Classification"]  # any mteb task passes on
    assert suites()["word"] == ("WiC", "WSD-ALL")


def test_a_card_without_a_kind_module_is_named(tmp_path: Path) -> None:
    from iso_bench.kinds.cards import CardError

    card = TaskCard(name="Nope", kind="no_such_kind", suite="x", group=Group("x", "x", "x"), module="tests")
    with pytest.raises(CardError, match="no module iso_bench.kinds.no_such_kind"):
        kind_class(card)


TOY_KIND = '''
"""A toy kind: the share of pairs whose two sentence vectors point the same way."""
import numpy as np
from iso_bench.kinds.base import Kind, sentence_vectors
from iso_bench.numerics.linalg import paired_cosine


class ToyKind(Kind):
    def read(self, folder):
        rows = [line.split("\\t") for line in (folder / "pairs.tsv").read_text().splitlines()]
        return {"test": rows}

    def fit_texts(self):
        self.load_data()
        return [t for a, b in self.dataset["test"] for t in (a, b)]

    def score(self, model, split, encode_kwargs):
        a = sentence_vectors(model, [r[0] for r in self.dataset["test"]], self, encode_kwargs)
        b = sentence_vectors(model, [r[1] for r in self.dataset["test"]], self, encode_kwargs)
        same = paired_cosine(a, b) > 1 - 1e-6
        return {"same_direction": float(np.mean(same)), "n_pairs": len(same)}


KIND = ToyKind
'''

TOY_CARD = '''
from iso_bench.cards import Group, TaskCard
from iso_bench.data import RawSource

CARD = TaskCard(
    name="Toy-Pairs", kind="toyplug.toy_kind", suite="toys", label="toy pairs (label)",
    group=Group("toys", "toy group", "share of parallel pairs", order=5), size="3 pairs",
    source=RawSource(path="toy", url="file:///nowhere/toy.zip", version="0.1"),
    metadata=dict(description="Toy pairs.", reference="https://example.org/toy", type="STS",
                  main_score="same_direction", citation="@misc{toy}"),
)
'''

TOY_RUN = '''
import json, sys
from iso_bench.kinds.cards import suites
from iso_bench.cli import main
from iso_bench.grid.runner import RunConfig, run

main(["list"])
print("SUITE", json.dumps(suites()["toys"]))
summary = run(RunConfig(model=sys.argv[1], methods=["raw", "center"], tasks=["toys"], results_dir=sys.argv[2],
                        data_dir=sys.argv[3], cache_dir=sys.argv[4], progress=False))
print("SCORES", json.dumps(summary.scores))
from iso_bench.report import build_leaderboard, read_results
board = build_leaderboard(read_results(sys.argv[2]))
tables = [t for s in board.sections for t in s.tables]
print("TABLES", json.dumps([[t.title, [c.label for c in t.columns]] for t in tables]))
'''


@pytest.mark.slow
def test_a_new_kind_and_card_from_a_plugin_package(tmp_path: Path, tiny_bert_dir: Path) -> None:
    """One kind module and one card in a package outside iso-bench, named in $ISO_BENCH_TASK_PACKAGES: the
    task is listed, in its suite and its leaderboard group with its label, and a run scores it."""
    plugin = tmp_path / "plugins" / "toyplug"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(textwrap.dedent(TOY_CARD))
    (plugin / "toy_kind.py").write_text(textwrap.dedent(TOY_KIND))
    data = tmp_path / "data" / "toy"
    data.mkdir(parents=True)
    (data / "pairs.tsv").write_text("a cat\ta cat\nthe dog sat\tthe dog sat\na cat\tmoney river bank\n")
    script = tmp_path / "run_toy.py"
    script.write_text(TOY_RUN)
    env = {**os.environ, "ISO_BENCH_TASK_PACKAGES": "toyplug",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script), str(tiny_bert_dir), str(tmp_path / "results"),
                          str(tmp_path / "data"), str(tmp_path / "cache")], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout
    assert re.search(r"^\s+Toy-Pairs\s+toyplug\.toy_kind\s+3 pairs; held-out: semcor$", lines, re.M), lines
    assert re.search(r"^\s+toys\s+Toy-Pairs$", lines, re.M)
    assert json.loads(lines.split("SUITE ", 1)[1].splitlines()[0]) == ["Toy-Pairs"]
    scores = json.loads(lines.split("SCORES ", 1)[1].splitlines()[0])
    # two of the three pairs are the same text twice (cosine 1); the third pair's texts differ
    assert {v: row["Toy-Pairs"] for v, row in scores.items()} == {
        f"{model_label(str(tiny_bert_dir))}+raw": pytest.approx(2 / 3),  # a folder by its name: local/tiny-bert0
        f"{model_label(str(tiny_bert_dir))}+center": pytest.approx(2 / 3)}
    tables = json.loads(lines.split("TABLES ", 1)[1].splitlines()[0])
    assert any(title.startswith("toy group") and "toy pairs (label)" in labels for title, labels in tables), tables
