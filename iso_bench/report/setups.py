"""A result's setup: the mteb ``experiment_kwargs`` of the folder it was read from (fit corpus, seed,
pooling, layer, fit sample), as this version names it (:func:`iso_bench.results.setups.same_setup`: the route
of the data an older version recorded left out); ``{}`` for a result written before setups were recorded.

A setup is part of a row's identity: two setups of one variant are two rows, never averaged. Results that
differ only in seed are replicates: rows of their own in the tables without intervals, one row of their mean
(:func:`merge_replicates`, labelled ``seeds 0-2``) in the tables with them. This module gives a setup its
hashable key and order, the label that tells one variant's rows apart, and the raw row a row is compared with.

>>> key = setup_key({"seed": 0, "fit_corpus": "train"})
>>> key
(('fit_corpus', '"train"'), ('seed', '0'))
>>> setup_labels([key, setup_key({"seed": 0, "fit_corpus": "task"})])[key]
'fitted on the training split'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from iso_bench.data.fit_corpus import SETTING_WORDS, TASK

SetupKey = tuple[tuple[str, str], ...]  # sorted (kwarg, JSON of its value) pairs; () for no recorded setup
FIT_KWARGS = ("fit_corpus", "fit_corpus_sha256", "seed", "fit_sample", "fit_budget",  # what a fit adds; raw: none
              "token_pooling")  # and a token-level method (its rows through the model's pooling)
# what a kwarg that a setup lacks means, in a label (the runner records only what is not the default)
ABSENT = {"fit_sample": "all", "fit_budget": "100000", "pooling": "default", "layer": "default", "dtype": "float32",
          "token_pooling": "mean of the text's own tokens"}
NO_SETUP = "no setup recorded"
DEFAULT_FIT = json.dumps(TASK)  # the default setting, as a setup key holds it: named only where another differs


def setup_key(setup: Mapping[str, Any]) -> SetupKey:
    """The identity of a setup: its kwargs sorted, values as JSON (hashable, and 0 differs from "0")."""
    return tuple(sorted((str(k), json.dumps(v, sort_keys=True)) for k, v in setup.items()))


def setup_order(key: SetupKey) -> tuple[tuple[str, int, float, str], ...]:
    """A sort key: no recorded setup first, then by kwarg, numbers by value (``seed=2`` before ``seed=10``)."""
    out = []
    for name, text in key:
        value = json.loads(text)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        out.append((name, 0, float(value), "") if number else (name, 1, 0.0, text))
    return tuple(out)


def _show(name: str, text: str | None) -> str:
    """A kwarg's value as a label shows it: strings bare, a missing one by what it means (``layer=default``)."""
    if text is None:
        return ABSENT.get(name, "none")
    value = json.loads(text)
    return value if isinstance(value, str) else text


def _part(name: str, text: str | None) -> str:
    """One kwarg in a label: the fit corpus in words (``fitted on held-out texts``), anything else ``name=value``."""
    shown = _show(name, text)
    if name == "fit_corpus" and text is not None:
        return SETTING_WORDS.get(shown, f"fitted on {shown}")
    return f"{name}={shown}"


def setup_labels(keys: Sequence[SetupKey]) -> dict[SetupKey, str]:
    """The label of each setup of one variant: the kwargs that differ among them, "" when there is one setup.

    A fit corpus other than the test texts is always named, in words (``fitted on held-out texts``), one setup
    or several: a row fitted elsewhere is never shown as if it were the default setting. A kwarg a setup lacks
    is shown by what its absence means (``layer=default``). A result folder without a recorded setup (``{}``,
    written before setups were recorded, or a run with nothing but defaults) is "no setup recorded" where what
    differs has no such meaning (fit corpus, seed).

    >>> labels = setup_labels([(), setup_key({"fit_corpus": "task", "seed": 0}), setup_key({"fit_corpus": "train"})])
    >>> list(labels.values())
    ['no setup recorded', 'fitted on test texts, seed=0', 'fitted on the training split, seed=none']
    >>> list(setup_labels([setup_key({"fit_corpus": "held-out"})]).values())
    ['fitted on held-out texts']
    """
    keys = list(dict.fromkeys(keys))
    setups = [dict(k) for k in keys]
    differ = sorted({name for s in setups for name in s if len({t.get(name) for t in setups}) > 1})
    if "fit_corpus_sha256" in differ and not _same_name_other_file(setups):
        differ.remove("fit_corpus_sha256")  # a file corpus is told by its name, its digest where the names agree
    if "fit_corpus" not in differ and any(s.get("fit_corpus") not in (None, DEFAULT_FIT) for s in setups):
        differ = sorted([*differ, "fit_corpus"])
    if not differ:
        return {k: "" for k in keys}
    unknown = len(keys) > 1 and any(name not in ABSENT for name in differ)
    return {key: NO_SETUP if not setup and unknown else ", ".join(_part(n, setup.get(n)) for n in differ)
            for key, setup in zip(keys, setups, strict=True)}


def _same_name_other_file(setups: Sequence[Mapping[str, str]]) -> bool:
    """Whether two setups name the same fit corpus file with other contents (a digest is then needed)."""
    digests: dict[str | None, set[str | None]] = {}
    for s in setups:
        digests.setdefault(s.get("fit_corpus"), set()).add(s.get("fit_corpus_sha256"))
    return any(len(found) > 1 for found in digests.values())


def row_label(variant: str, label: str) -> str:
    """A row's label: ``row_label("whiten", "fitted on held-out texts") == "whiten [fitted on held-out texts]"``;
    the variant alone when the label is empty."""
    return variant + (f" [{label}]" if label else "")


def _bare(key: SetupKey) -> SetupKey:
    return tuple(pair for pair in key if pair[0] not in FIT_KWARGS)


def raw_reference(key: SetupKey, raws: Sequence[SetupKey]) -> SetupKey | None:
    """The setup of the raw row that a row of setup ``key`` is compared with, or None when none fits.

    Raw has no fit corpus, so fit corpus, seed and fit sample are ignored: the raw setup with the same
    pooling and layer; several such: the one sharing most kwargs (a tie: None); none: the only
    raw setup there is, else None.

    >>> raw_reference(setup_key({"fit_corpus": "train", "seed": 1}), [(), setup_key({"layer": 6})])
    ()
    """
    same = [r for r in raws if _bare(r) == _bare(key)]
    if not same:
        return raws[0] if len(raws) == 1 else None
    shared = [len(set(r) & set(key)) for r in same]
    best = [r for r, n in zip(same, shared, strict=True) if n == max(shared)]
    return best[0] if len(best) == 1 else None


def _unseeded(key: SetupKey) -> SetupKey:
    return tuple(pair for pair in key if pair[0] != "seed")


def replicates(key: SetupKey, keys: Sequence[SetupKey]) -> list[SetupKey]:
    """The other setups among ``keys`` that differ from ``key`` only in seed: replicates of one setup.

    >>> replicates(setup_key({"seed": 0}), [setup_key({"seed": 0}), setup_key({"seed": 1}), ()])
    [(('seed', '1'),)]
    """
    if _unseeded(key) == key:
        return []
    return [k for k in keys if k != key and _unseeded(k) == _unseeded(key) and _unseeded(k) != k]


def merge_replicates(keys: Sequence[SetupKey]) -> list[tuple[SetupKey, ...]]:
    """``keys`` (one variant's setups, in :func:`setup_order`) grouped: the setups that differ only in seed form
    one group, in seed order; every other setup is a group of its own. Groups come in the order of their first
    setup.

    >>> [len(g) for g in merge_replicates([setup_key({"seed": s}) for s in (0, 1, 2)] + [()])]
    [3, 1]
    """
    groups: dict[SetupKey, list[SetupKey]] = {}
    for key in keys:
        groups.setdefault(_unseeded(key) + (("seed", "*"),) if _unseeded(key) != key else key, []).append(key)
    return [tuple(g) for g in groups.values()]


def seeds_text(group: Sequence[SetupKey]) -> str:
    """The seeds of a group of replicates as a label shows them: ``seeds 0-2`` for a run of consecutive whole
    numbers, else listed (``seeds 0, 1, 10``).

    >>> seeds_text([setup_key({"seed": s}) for s in (0, 1, 2)]), seeds_text([setup_key({"seed": s}) for s in (0, 7)])
    ('seeds 0-2', 'seeds 0, 7')
    """
    values = [json.loads(dict(key)["seed"]) for key in group]
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if whole and len(values) > 2 and values == list(range(values[0], values[0] + len(values))):
        return f"seeds {values[0]}-{values[-1]}"
    return "seeds " + ", ".join(_show("seed", json.dumps(v)) for v in values)


def group_labels(groups: Sequence[Sequence[SetupKey]]) -> list[str]:
    """The label of each group of :func:`merge_replicates`: a single setup as :func:`setup_labels` labels it
    among the groups; a group of replicates by what else differs, then its seeds (``fit_corpus=train, seeds
    0-2``; ``seeds 0-2`` when nothing else differs).

    >>> group_labels(merge_replicates([setup_key({"fit_corpus": c, "seed": s}) for c in ("task", "train")
    ...                                for s in (0, 1)]))
    ['fitted on test texts, seeds 0, 1', 'fitted on the training split, seeds 0, 1']
    """
    marks = [json.dumps(f"\0{i}") for i in range(len(groups))]  # a seed no setup has: one per group
    reps = [g[0] if len(g) == 1 else tuple(sorted(_unseeded(g[0]) + (("seed", mark),)))
            for g, mark in zip(groups, marks, strict=True)]
    labels = setup_labels(reps)
    out = []
    for group, rep, mark in zip(groups, reps, marks, strict=True):
        label = labels[rep]
        if len(group) > 1:
            parts = [part for part in label.split(", ") if part and part != f"seed={json.loads(mark)}"]
            label = ", ".join([*parts, seeds_text(group)])
        out.append(label)
    return out

