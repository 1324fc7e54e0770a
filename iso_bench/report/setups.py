"""A result's setup: the mteb ``experiment_kwargs`` of the folder it was read from (fit corpus, seed,
pooling, layer, data source, fit sample); ``{}`` for a result written before setups were recorded.

A setup is part of a row's identity: two setups of one variant are two rows, never averaged, and results
that differ only in seed are replicates shown as rows of their own. This module gives a setup its hashable
key and order, the label that tells one variant's rows apart, and the raw row a row is compared with.

>>> key = setup_key({"seed": 0, "fit_corpus": "train"})
>>> key
(('fit_corpus', '"train"'), ('seed', '0'))
>>> setup_labels([key, setup_key({"seed": 0, "fit_corpus": "task"})])[key]
'fit_corpus=train'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

SetupKey = tuple[tuple[str, str], ...]  # sorted (kwarg, JSON of its value) pairs; () for no recorded setup
FIT_KWARGS = ("fit_corpus", "seed", "fit_sample")  # what a fit adds to a setup; raw is fitted on nothing
# what a kwarg that a setup lacks means, in a label (the runner records only what is not the default)
ABSENT = {"data": "hub", "fit_sample": "all", "pooling": "default", "layer": "default"}
NO_SETUP = "no setup recorded"


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
    """A kwarg's value as a label shows it: strings bare, a missing one by what it means (``data=hub``)."""
    if text is None:
        return ABSENT.get(name, "none")
    value = json.loads(text)
    return value if isinstance(value, str) else text


def setup_labels(keys: Sequence[SetupKey]) -> dict[SetupKey, str]:
    """The label of each setup of one variant: the kwargs that differ among them, "" when there is one setup.

    A kwarg a setup lacks is shown by what its absence means (``data=hub``, ``layer=default``). A result
    folder without a recorded setup (``{}``, written before setups were recorded, or a run with nothing but
    defaults) is "no setup recorded" where what differs has no such meaning (fit corpus, seed).

    >>> labels = setup_labels([(), setup_key({"fit_corpus": "task", "seed": 0}), setup_key({"fit_corpus": "train"})])
    >>> list(labels.values())
    ['no setup recorded', 'fit_corpus=task, seed=0', 'fit_corpus=train, seed=none']
    """
    keys = list(dict.fromkeys(keys))
    if len(keys) < 2:
        return {k: "" for k in keys}
    setups = [dict(k) for k in keys]
    differ = sorted({name for s in setups for name in s if len({t.get(name) for t in setups}) > 1})
    unknown = any(name not in ABSENT for name in differ)
    return {key: NO_SETUP if not setup and unknown else ", ".join(f"{n}={_show(n, setup.get(n))}" for n in differ)
            for key, setup in zip(keys, setups, strict=True)}


def row_label(variant: str, label: str) -> str:
    """A row's label: ``row_label("whiten", "fit_corpus=train") == "whiten [fit_corpus=train]"``; the variant
    alone when the label is empty."""
    return variant + (f" [{label}]" if label else "")


def _bare(key: SetupKey) -> SetupKey:
    return tuple(pair for pair in key if pair[0] not in FIT_KWARGS)


def raw_reference(key: SetupKey, raws: Sequence[SetupKey]) -> SetupKey | None:
    """The setup of the raw row that a row of setup ``key`` is compared with, or None when none fits.

    Raw has no fit corpus, so fit corpus, seed and fit sample are ignored: the raw setup with the same
    pooling, layer and data source; several such: the one sharing most kwargs (a tie: None); none: the only
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


def replicates(key: SetupKey, keys: Sequence[SetupKey]) -> list[SetupKey]:
    """The other setups among ``keys`` that differ from ``key`` only in seed: replicates of one setup.

    >>> replicates(setup_key({"seed": 0}), [setup_key({"seed": 0}), setup_key({"seed": 1}), ()])
    [(('seed', '1'),)]
    """
    def unseeded(k: SetupKey) -> SetupKey:
        return tuple(pair for pair in k if pair[0] != "seed")

    if unseeded(key) == key:
        return []
    return [k for k in keys if k != key and unseeded(k) == unseeded(key) and unseeded(k) != k]

